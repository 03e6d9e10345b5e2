"""Which build of the runtime a CPU loads, and what the JIT compiles its kernels for: one choice for all.

:func:`choose_tier` is the one verdict FlagTree's CPU driver (patch 0009), flagtree-cpu's runtime module
(patch flagtree-cpu/0001), flagtree-doctor and flagtree-verify use. The Armv9 runtime only where every Armv9
requirement holds on every core (the features intersected across cores, and 128-bit SVE vectors: its code
assumes that length); else the baseline runtime where every core has dotprod; else none (the CPU is refused).

:class:`KernelTarget` is what the JIT derives from the same facts: the assembler flags for ``kernel.s``, the
``-march`` of the TLE NEON objects, the features the lowering passes may use, and the part of the kernel cache
key that keeps a kernel compiled for one CPU from being loaded on another. On the Armv9 tier every one of them
is upstream's, unchanged. Standard library only: FlagTree imports this at ``import triton``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .capabilities import Capabilities
from .target import (
    ARMV9_KERNEL_FLAGS,
    ARMV9_RUNTIME,
    ARMV9_TLE_NEON_MARCH,
    BASELINE_RUNTIME,
    DERIVED_MARCH_BASE,
    KERNEL_MARCH_MODIFIERS,
    TLE_NEON_MARCH_MODIFIERS,
    RuntimeBuild,
    Tier,
)

# The features whose LLVM name (llvm.get_cpu_features()) the JIT's lowering passes test, by hwcap name.
LLVM_FEATURE_NAMES: dict[str, str] = {
    "asimd": "neon",
    "asimddp": "dotprod",
    "fphp": "fullfp16",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
}
# What upstream's compiler.py adds to LLVM's features from /proc/cpuinfo (LLVM misses them on aarch64).
LLVM_SUPPLEMENTED: tuple[str, ...] = ("i8mm", "bf16")


def _lacks(build: RuntimeBuild, features: frozenset[str]) -> str | None:
    missing = sorted(build.features - features)
    return (
        f"the CPU lacks {', '.join(missing)} ({build.tier} runtime: -march={build.march})"
        if missing
        else None
    )


@dataclass(frozen=True, kw_only=True)
class TierChoice:
    """The runtime a CPU loads (``None``: refused), why not the Armv9 one, and why not any."""

    capabilities: Capabilities
    runtime: RuntimeBuild | None
    not_armv9: tuple[str, ...]  # why the Armv9 runtime cannot run here (empty on the Armv9 tier)
    blockers: tuple[str, ...]  # why no runtime can run here (empty when one is chosen)

    @property
    def tier(self) -> Tier | None:
        return None if self.runtime is None else self.runtime.tier

    @property
    def features(self) -> frozenset[str]:
        return self.capabilities.features


def choose_tier(capabilities: Capabilities) -> TierChoice:
    """Armv9 where every core has its features and SVE vectors are 128 bits, else baseline, else refuse."""
    if capabilities.machine != "aarch64":
        reason = f"this machine is {capabilities.machine}, not aarch64"
        return TierChoice(capabilities=capabilities, runtime=None, not_armv9=(reason,), blockers=(reason,))
    features = capabilities.features
    not_armv9 = [lacks] if (lacks := _lacks(ARMV9_RUNTIME, features)) else []
    bits = capabilities.sve_vector_bits if "sve" in features else None
    if not not_armv9 and bits != ARMV9_RUNTIME.sve_vector_bits:
        length = "unknown" if bits is None else f"{bits} bits"
        not_armv9.append(
            f"SVE vectors are {length}; the Armv9 runtime assumes {ARMV9_RUNTIME.sve_vector_bits} bits"
        )
    if not not_armv9:
        return TierChoice(capabilities=capabilities, runtime=ARMV9_RUNTIME, not_armv9=(), blockers=())
    baseline_lacks = _lacks(BASELINE_RUNTIME, features)
    return TierChoice(
        capabilities=capabilities,
        runtime=None if baseline_lacks else BASELINE_RUNTIME,
        not_armv9=tuple(not_armv9),
        blockers=(baseline_lacks,) if baseline_lacks else (),
    )


def derived_march(features: frozenset[str], modifiers: tuple[tuple[str, frozenset[str]], ...]) -> str:
    """``armv8.2-a+dotprod`` and each modifier whose features ``features`` holds (dotprod: the floor)."""
    extra = "".join(f"+{name}" for name, needs in modifiers if needs <= features)
    return DERIVED_MARCH_BASE + extra


@dataclass(frozen=True, kw_only=True)
class KernelTarget:
    """What the JIT compiles a kernel for on this CPU."""

    choice: TierChoice

    @property
    def armv9(self) -> bool:
        return self.choice.tier == "armv9"

    @property
    def assembler_flags(self) -> tuple[str, ...]:
        """The flags runtime/build.py gives the compiler that assembles ``kernel.s``."""
        if self.armv9:
            return ARMV9_KERNEL_FLAGS
        return (f"-march={derived_march(self.choice.features, KERNEL_MARCH_MODIFIERS)}",)

    @property
    def tle_neon_march(self) -> str:
        """The ``-march`` neon.py compiles the TLE NEON objects with."""
        if self.armv9:
            return ARMV9_TLE_NEON_MARCH
        return derived_march(self.choice.features, TLE_NEON_MARCH_MODIFIERS)

    def llvm_features(self, reported: set[str]) -> set[str]:
        """LLVM's host features as the lowering passes should see them: without any a core lacks, with the
        i8mm and bf16 LLVM does not report where every core has them (upstream read those from the first
        ``Features`` line of /proc/cpuinfo)."""
        absent = {llvm for hwcap, llvm in LLVM_FEATURE_NAMES.items() if hwcap not in self.choice.features}
        present = {name for name in LLVM_SUPPLEMENTED if name in self.choice.features}
        return (reported - absent) | present

    @property
    def key(self) -> str:
        """The part of the kernel cache key this CPU adds: its tier, the features, the SVE vector length."""
        bits = self.choice.capabilities.sve_vector_bits
        return f"{self.choice.tier or 'none'}-{','.join(sorted(self.choice.features))}-sve{bits or 0}"
