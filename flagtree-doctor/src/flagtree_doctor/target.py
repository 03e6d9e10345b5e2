"""What the flagtree-cpu binaries were compiled for: the one place the doctor, verify and the CPU check read it.

Sources: FlagTree ``54d33a53`` with the feedstock's patch 0008 builds flagtree-cpu's runtime twice, in the root
``CMakeLists.txt``: ``TritonCPURuntime`` for Armv9 (``triton/_C/libTritonCPURuntime.so``, upstream's flags) and
``TritonCPURuntimeBaseline`` for every aarch64 CPU with dotprod (``triton/_C/baseline/libTritonCPURuntime.so``,
the same soname). ``recipe/runtime_manifest.py`` records, at build time, what each exported function of the
baseline one needs, in the manifest beside it (:mod:`.manifest`). libtriton keeps the toolchain's baseline, so
it loads on any aarch64 CPU. The JIT's flags for ``kernel.s`` (``runtime/build.py``, patch 0010) and the TLE
NEON objects' (flagtree-cpu's ``neon.py``, patch flagtree-cpu/0002) follow the CPU (:mod:`.tier`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Tier = Literal["armv9", "baseline"]
TIERS: tuple[Tier, ...] = get_args(Tier)


@dataclass(frozen=True, kw_only=True)
class RuntimeBuild:
    """One build of libTritonCPURuntime: its ``-march``, what every core must have, where it is installed."""

    tier: Tier
    march: str
    sve_vector_bits: int | None  # -msve-vector-bits: the code assumes exactly this SVE vector length
    features: frozenset[str]  # /proc/cpuinfo (hwcap) names, every one on every core
    library: str  # under triton/_C
    manifest: str | None  # under triton/_C: what each function needs (None: the features above cover all)

    @property
    def flags(self) -> tuple[str, ...]:
        """The compiler flags, as patch 0008 gives them to the target."""
        bits = () if self.sve_vector_bits is None else (f"-msve-vector-bits={self.sve_vector_bits}",)
        return (f"-march={self.march}", *bits)


# Upstream's flags (FlagTree's root CMakeLists.txt at 54d33a53 gave them to every object), on the runtime
# target only: armv9-a brings SVE and SVE2; +i8mm/+bf16 with SVE also enable the SVE forms.
ARMV9_RUNTIME = RuntimeBuild(
    tier="armv9",
    march="armv9-a+sve2+i8mm+bf16+fp16+dotprod",
    sve_vector_bits=128,
    features=frozenset(
        {"asimd", "fphp", "asimdhp", "asimddp", "sve", "sve2", "i8mm", "bf16", "svei8mm", "svebf16"}
    ),
    library="libTritonCPURuntime.so",
    manifest=None,
)
# dotprod is the floor: runtime_sdot.cpp (flagtree-cpu 19cede7e) compiles its SDOT functions only under
# __ARM_FEATURE_DOTPROD and leaves empty stubs otherwise; the runtime's other sources read through the public
# index use NEON and dotprod intrinsics only, so no i8mm, bf16 or fp16 is given (a source that needs one fails
# to compile, loudly). Every CPU with dotprod implements Armv8.2 (FEAT_DotProd is an Armv8.2 option).
BASELINE_RUNTIME = RuntimeBuild(
    tier="baseline",
    march="armv8.2-a+dotprod",
    sve_vector_bits=None,
    features=frozenset({"asimd", "asimddp"}),
    library="baseline/libTritonCPURuntime.so",
    manifest="baseline/libTritonCPURuntime.isa.json",
)
RUNTIME_BUILDS: tuple[RuntimeBuild, ...] = (ARMV9_RUNTIME, BASELINE_RUNTIME)  # in order of preference

# The JIT on the Armv9 tier, unchanged: FlagTree's runtime/build.py passes these when it assembles kernel.s,
# and flagtree-cpu's neon.py compiles the TLE NEON objects with this -march.
ARMV9_KERNEL_FLAGS: tuple[str, ...] = ("-march=armv9-a+sve2+i8mm+bf16+fp16", "-msve-vector-bits=128")
ARMV9_TLE_NEON_MARCH = "armv8.2-a+dotprod+i8mm+bf16"
# Elsewhere both follow the CPU: this base, and each GCC modifier whose features every core has.
DERIVED_MARCH_BASE = "armv8.2-a+dotprod"
KERNEL_MARCH_MODIFIERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("fp16", frozenset({"fphp", "asimdhp"})),
    ("bf16", frozenset({"bf16"})),
    ("i8mm", frozenset({"i8mm"})),
    ("sve", frozenset({"sve"})),
    ("sve2", frozenset({"sve2"})),
)
TLE_NEON_MARCH_MODIFIERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("i8mm", frozenset({"i8mm"})),
    ("bf16", frozenset({"bf16"})),
)

# The runtime function each TLE op's kernel calls: flagtree-cpu's NeonSdotToLLVM.cpp at 19cede7e (read through
# the public index) lowers each op to a call of this function of libTritonCPURuntime. tle_ops.sdot lowers to
# the SDOT instruction inline (dotprod, the floor) and calls none.
TLE_OP_FUNCTIONS: dict[str, str] = {
    "sdot_gemv": "sdot_gemv_m1_prepacked",
    "sdot_gemv_fused_bf16": "sdot_gemv_m1_fused_bf16",
    "sdot_pack_weights": "sdot_pack_weights",
    "rms_norm": "standalone_rms_norm_bf16",
    "swiglu": "swiglu_bf16",
    "flash_attn_decode": "flash_attn_decode_bf16",
    "fused_mlp": "fused_mlp_bf16",
    "fused_transformer_layer": "fused_transformer_decode_layer",
    "fused_decode_step": "fused_decode_step",
}
# The function each wrapper of triton.language.extra.cpu.runtime (flagtree-cpu's runtime.py at 19cede7e)
# calls through ctypes.
RUNTIME_MODULE_FUNCTIONS: dict[str, str] = {
    "fused_mlp_bf16": "fused_mlp_bf16",
    "flash_attn_decode_bf16": "flash_attn_decode_bf16",
    "kv_cache_write_bf16": "standalone_kv_cache_write_bf16",
    "rope_bf16": "standalone_rope_bf16",
    "residual_add_bf16": "standalone_residual_add_bf16",
}


def runtime_ops(function: str) -> list[str]:
    """The ops (``tle_ops.X``, ``runtime.Y``) that call ``function`` of the runtime."""
    return [f"tle_ops.{op}" for op, f in TLE_OP_FUNCTIONS.items() if f == function] + [
        f"runtime.{name}" for name, f in RUNTIME_MODULE_FUNCTIONS.items() if f == function
    ]


# The builder methods FlagTree's `third_party/tle_arm64/python/triton_tle_arm64.cc` adds to
# `triton._C.libtriton.ir.builder`; flagtree-cpu's `tle_ops.py` calls each of them.
BUILDER_METHODS: tuple[str, ...] = (
    "create_cpu_flash_attn_decode",
    "create_cpu_fused_decode_step",
    "create_cpu_fused_mlp",
    "create_cpu_fused_transformer_layer",
    "create_cpu_neon_sdot",
    "create_cpu_rms_norm",
    "create_cpu_sdot_gemv",
    "create_cpu_sdot_gemv_fused_bf16",
    "create_cpu_sdot_pack_weights",
    "create_cpu_swiglu",
)

# The shared libraries `triton/_C` must hold (the driver preloads the last two by these names), and the
# baseline runtime with its manifest.
RUNTIME_LIBRARIES: tuple[str, ...] = ("libtriton.so", "libTritonCPURuntime.so", "libsleef.so")
BASELINE_FILES: tuple[str, ...] = (BASELINE_RUNTIME.library, str(BASELINE_RUNTIME.manifest))

# Lines our patches put into the installed package (patches/flagtree/), so the doctor knows which
# environment variables the package still needs: with 0003, an installed cpu backend selects the CPU build
# path of runtime/build.py without FLAGTREE_BACKEND; with 0005, the cpu driver's TRITON_SYS_PATH defaults to
# the running Python's prefix instead of /usr/local.
PATCHED_DEFAULTS: dict[str, tuple[str, str]] = {
    "FLAGTREE_BACKEND": ("runtime/build.py", "_CPU_BACKEND_DIR"),
    "TRITON_SYS_PATH": ("backends/cpu/driver.py", 'os.getenv("TRITON_SYS_PATH", default=sys.prefix)'),
}
