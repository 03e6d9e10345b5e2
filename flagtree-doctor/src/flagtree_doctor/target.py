"""What the flagtree-cpu binaries were compiled for: the one place the doctor, verify and the CPU check read it.

Sources (FlagTree ``54d33a53`` with patch 0008): the root ``CMakeLists.txt`` gives ``-march`` and
``-msve-vector-bits`` to the ``TritonCPURuntime`` target (upstream gives them to every C/C++ object, libtriton
too; with the patch libtriton keeps the toolchain's baseline, so it loads on any aarch64 CPU);
``third_party/cpu/language/cpu/neon.py`` (flagtree-cpu) compiles the TLE NEON objects at run time with its own
``-march``; ``runtime/build.py`` passes the first ``-march`` for each JIT-compiled ``kernel.s``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Component:
    """One part of the package built with one ``-march``: the CPU features its code may use."""

    name: str
    march: str
    features: frozenset[str]  # /proc/cpuinfo names

    @property
    def flags(self) -> tuple[str, ...]:
        """The compiler flags, as the build passes them."""
        return tuple(f"-march={self.march}".split())


@dataclass(frozen=True, kw_only=True)
class PackageTarget:
    components: tuple[Component, ...]
    sve_vector_bits: int  # -msve-vector-bits: the code assumes exactly this SVE vector length

    @property
    def required_features(self) -> frozenset[str]:
        return frozenset().union(*(c.features for c in self.components))


PACKAGE_TARGET = PackageTarget(
    components=(
        Component(
            name="TritonCPURuntime and JIT kernels",
            march="armv9-a+sve2+i8mm+bf16+fp16+dotprod -msve-vector-bits=128",
            # armv9-a brings SVE and SVE2; +i8mm/+bf16 with SVE also enable the SVE forms.
            features=frozenset(
                {"asimd", "fphp", "asimdhp", "asimddp", "sve", "sve2", "i8mm", "bf16", "svei8mm", "svebf16"}
            ),
        ),
        Component(
            name="TLE NEON objects (libtle_neon.a)",
            march="armv8.2-a+dotprod+i8mm+bf16",
            features=frozenset({"asimd", "asimddp", "i8mm", "bf16"}),
        ),
    ),
    sve_vector_bits=128,
)

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

# The shared libraries `triton/_C` must hold (the driver preloads the last two by these names).
RUNTIME_LIBRARIES: tuple[str, ...] = ("libtriton.so", "libTritonCPURuntime.so", "libsleef.so")

# Lines our patches put into the installed package (patches/flagtree/), so the doctor knows which
# environment variables the package still needs: with 0003, an installed cpu backend selects the CPU build
# path of runtime/build.py without FLAGTREE_BACKEND; with 0005, the cpu driver's TRITON_SYS_PATH defaults to
# the running Python's prefix instead of /usr/local.
PATCHED_DEFAULTS: dict[str, tuple[str, str]] = {
    "FLAGTREE_BACKEND": ("runtime/build.py", "_CPU_BACKEND_DIR"),
    "TRITON_SYS_PATH": ("backends/cpu/driver.py", 'os.getenv("TRITON_SYS_PATH", default=sys.prefix)'),
}
