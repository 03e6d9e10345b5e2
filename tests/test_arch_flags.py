"""Patch 0008: the Armv9 + SVE2 flags reach the CPU runtime only, never libtriton (issue 12, section 1).

What the two ways of building do on CPUs with and without SVE2 is shown under qemu-user in
tests/emulated/test_arch_flags_qemu.py. Here: the patch gives the runtime exactly the flags the package's
CPU verdict assumes, and (with ``FLAGTREE_SRC`` at a pristine checkout of the pinned FlagTree) the patched
root ``CMakeLists.txt`` sets no global ``-march`` while upstream's does.
"""

from __future__ import annotations

import re
from pathlib import Path

from _tools import upstream_source
from flagtree_doctor.target import ARMV9_KERNEL_FLAGS, ARMV9_RUNTIME, ARMV9_TLE_NEON_MARCH
from test_patches import PATCHES, apply_series, series_patches

PATCH = PATCHES / "flagtree" / "0008-Build-only-the-CPU-runtime-for-Armv9-with-SVE2.patch"
RUNTIME_FLAGS = ARMV9_RUNTIME.flags
# A global C/C++ flag: set(CMAKE_C_FLAGS ...), set(CMAKE_CXX_FLAGS ...) or add_compile_options(...).
GLOBAL_MARCH = re.compile(
    r"^\s*(set\(\s*CMAKE_(?:C|CXX)_FLAGS\b|add_compile_options\().*-march=", re.MULTILINE | re.IGNORECASE
)
RUNTIME_OPTIONS = re.compile(
    r"target_compile_options\(\s*TritonCPURuntime\s+PRIVATE\s+\$\{FLAGTREE_CPU_RUNTIME_ARCH_FLAGS\}\s*\)"
)


def test_the_patch_gives_the_runtime_the_flags_the_verdict_assumes() -> None:
    added = [
        line[1:] for line in PATCH.read_text().splitlines() if line.startswith("+") and "ARCH_FLAGS" in line
    ]
    (setting,) = [line for line in added if line.strip().startswith("set(")]
    assert setting.strip() == f"set(FLAGTREE_CPU_RUNTIME_ARCH_FLAGS {' '.join(RUNTIME_FLAGS)})"
    assert any(RUNTIME_OPTIONS.search(line) for line in added)
    assert RUNTIME_FLAGS == ("-march=armv9-a+sve2+i8mm+bf16+fp16+dotprod", "-msve-vector-bits=128")


def test_the_patched_cmake_sets_no_global_march(tmp_path: Path) -> None:
    src = upstream_source("FLAGTREE_SRC")
    upstream = (src / "CMakeLists.txt").read_text()
    assert GLOBAL_MARCH.search(upstream), "upstream's CMakeLists.txt no longer sets a global -march"
    apply_series(series_patches("flagtree"), src, tmp_path)
    patched = (tmp_path / "CMakeLists.txt").read_text()
    assert not GLOBAL_MARCH.search(patched)
    assert len(RUNTIME_OPTIONS.findall(patched)) == 1
    # Applied after every place the backends (third_party/cpu, which defines TritonCPURuntime) are added.
    backends = [
        m.end() for m in re.finditer(r"add_subdirectory\(third_party/\$\{CODEGEN_BACKEND\}\)", patched)
    ]
    assert backends
    assert RUNTIME_OPTIONS.search(patched).start() > max(backends)  # type: ignore[union-attr]


def test_the_armv9_tier_keeps_upstreams_flags() -> None:
    """Speed on Armv9 is unchanged: the Armv9 runtime, the kernels' assembler and the TLE NEON objects get, on
    that tier, exactly the flags upstream gave everything (FlagTree's root CMakeLists.txt and runtime/build.py;
    flagtree-cpu's neon.py where FLAGTREE_CPU_SRC is set)."""
    src = upstream_source("FLAGTREE_SRC")
    cmake = (src / "CMakeLists.txt").read_text()
    found = set(
        re.findall(r'set\(CMAKE_(?:C|CXX)_FLAGS "\$\{CMAKE_(?:C|CXX)_FLAGS\} (-march=[^"]+)"\)', cmake)
    )
    assert [tuple(flags.split()) for flags in found] == [ARMV9_RUNTIME.flags]
    build_py = (src / "python" / "triton" / "runtime" / "build.py").read_text()
    kernel = re.search(r"cc_cmd \+= \[\s*([^\]]+?),?\s*\]", build_py.split('src.endswith(".s")')[1])
    assert kernel is not None, "runtime/build.py no longer adds flags for kernel.s"
    assert tuple(flag.strip().strip('"') for flag in kernel[1].split(",")) == ARMV9_KERNEL_FLAGS


def test_the_armv9_tier_keeps_upstreams_tle_neon_flags() -> None:
    neon = (upstream_source("FLAGTREE_CPU_SRC") / "third_party/cpu/language/cpu/neon.py").read_text()
    assert f'cc_cmd += ["-march={ARMV9_TLE_NEON_MARCH}", "-fopenmp"]' in neon
