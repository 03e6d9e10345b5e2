"""What a CPU can execute, and the one verdict on whether the package's code runs on it.

flagtree-doctor's CPU checks, flagtree-verify, the package tests and FlagTree's CPU backend (through
:mod:`flagtree_doctor.cpu_check`) all judge a CPU with :func:`judge`, so they cannot disagree.

Live, features come from ``getauxval(AT_HWCAP/AT_HWCAP2)`` and the SVE vector length from
``prctl(PR_SVE_GET_VL)``: both answer for the CPU this process runs on, under qemu-user too (where
``/proc/cpuinfo`` is the host's). A ``--root`` tree gives the same facts from its files (:mod:`.cpu`).
Imports nothing beyond the standard library: FlagTree runs this before every kernel it loads.
"""

from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass

from .target import PACKAGE_TARGET, Component

AT_HWCAP = 16
AT_HWCAP2 = 26
PR_SVE_GET_VL = 51
PR_SVE_VL_LEN_MASK = 0xFFFF

# Linux arch/arm64/include/uapi/asm/hwcap.h: bit numbers, named as /proc/cpuinfo names them.
HWCAP_BITS: dict[str, int] = {"asimd": 1, "fphp": 9, "asimdhp": 10, "asimddp": 20, "sve": 22}
HWCAP2_BITS: dict[str, int] = {"sve2": 1, "svei8mm": 9, "svebf16": 12, "i8mm": 13, "bf16": 14, "sme": 23}
KNOWN_FEATURES: frozenset[str] = frozenset(HWCAP_BITS) | frozenset(HWCAP2_BITS)


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """The facts a verdict needs: the machine, its CPU features and (with SVE) its vector length."""

    machine: str
    features: frozenset[str]
    source: str  # where the features were read
    sve_vector_bits: int | None


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Whether the package's code runs on a CPU, and why not."""

    machine: str
    lacking: tuple[tuple[Component, tuple[str, ...]], ...]  # each component and the features it misses
    sve_vector_bits: int | None

    @property
    def aarch64(self) -> bool:
        return self.machine == "aarch64"

    @property
    def wrong_vector_length(self) -> bool:
        """SVE vectors of another length than the code assumes, on a CPU that has every feature.

        Where a feature is missing the code cannot run whatever the length, so the length is no blocker.
        """
        return (
            self.aarch64
            and not self.lacking
            and self.sve_vector_bits not in (None, PACKAGE_TARGET.sve_vector_bits)
        )

    @property
    def blockers(self) -> list[str]:
        """Why the package's kernels cannot run (correctly) here, one phrase each; empty when they can."""
        if not self.aarch64:
            return [f"this machine is {self.machine}, not aarch64"]
        blockers = [
            f"the CPU lacks {', '.join(lacks)} ({component.name}: -march={component.march})"
            for component, lacks in self.lacking
        ]
        if self.wrong_vector_length:
            blockers.append(
                f"SVE vectors are {self.sve_vector_bits} bits; the code assumes {PACKAGE_TARGET.sve_vector_bits}"
            )
        return blockers


def judge(capabilities: Capabilities) -> Verdict:
    lacking = tuple(
        (component, tuple(sorted(component.features - capabilities.features)))
        for component in PACKAGE_TARGET.components
        if component.features - capabilities.features
    )
    # Without SVE there is no vector length to be wrong.
    bits = capabilities.sve_vector_bits if "sve" in capabilities.features else None
    return Verdict(machine=capabilities.machine, lacking=lacking, sve_vector_bits=bits)


def decode_hwcaps(hwcap: int, hwcap2: int) -> frozenset[str]:
    """The known feature names whose bits are set in ``AT_HWCAP``/``AT_HWCAP2``."""
    names = {name for name, bit in HWCAP_BITS.items() if hwcap >> bit & 1}
    names |= {name for name, bit in HWCAP2_BITS.items() if hwcap2 >> bit & 1}
    return frozenset(names)


def live_hwcaps() -> tuple[int, int]:
    """``getauxval(AT_HWCAP)`` and ``getauxval(AT_HWCAP2)`` of this process."""
    libc = ctypes.CDLL(None)
    getauxval = libc.getauxval
    getauxval.restype = ctypes.c_ulong
    getauxval.argtypes = [ctypes.c_ulong]
    return int(getauxval(AT_HWCAP)), int(getauxval(AT_HWCAP2))


def live_sve_vector_bits() -> int | None:
    """This process's SVE vector length in bits, or ``None`` without SVE (``prctl`` fails)."""
    libc = ctypes.CDLL(None)
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    value = int(prctl(PR_SVE_GET_VL, 0, 0, 0, 0))
    return None if value < 0 else (value & PR_SVE_VL_LEN_MASK) * 8


def live_capabilities() -> Capabilities:
    """This process's machine, CPU features and SVE vector length (no file is read)."""
    machine = platform.machine()
    if machine != "aarch64":
        return Capabilities(
            machine=machine, features=frozenset(), source="platform.machine()", sve_vector_bits=None
        )
    features = decode_hwcaps(*live_hwcaps())
    return Capabilities(
        machine=machine,
        features=features,
        source="getauxval(AT_HWCAP, AT_HWCAP2)",
        sve_vector_bits=live_sve_vector_bits() if "sve" in features else None,
    )
