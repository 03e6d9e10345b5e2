"""Patch 0010's CMake, run by real CMake: the runtime built twice, the Armv9 build as it was.

FlagTree's whole build needs LLVM; the lines patches 0008 and 0010 give its root CMakeLists.txt need only a
``TritonCPURuntime`` target. So a small project stands around them: a ``cpu/`` folder shaped like flagtree-cpu's
``third_party/cpu/CMakeLists.txt`` (include folder, a compile definition, the runtime as a shared library linking
a plain library and OpenMP), the stand-in runtime (tests/emulated/standin_runtime.c) as its source, and the
patch's own lines (its ``set()`` lines and the blocks after the backends) read from the patch file. Real CMake
configures it for aarch64 with Debian's cross compiler, as setup.py passes ``CMAKE_LIBRARY_OUTPUT_DIRECTORY``,
and builds it: both libraries are checked, what they were compiled with, and what their instructions need.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from _patch_rules import Diff, patch_name
from _runtime_standin import FLAGS, SONAME, STANDIN_C, write_manifest
from _tools import aarch64_gcc, require_executable
from flagtree_doctor.elf import dynamic_info
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME
from test_patches import PATCHES

PATCH = PATCHES / "flagtree" / "0010-Build-the-CPU-runtime-a-second-time-for-every-aarch6.patch"
PATCH_0008 = PATCHES / "flagtree" / "0008-Build-only-the-CPU-runtime-for-Armv9-with-SVE2.patch"

CPU_CMAKE = """\
include_directories(${CMAKE_CURRENT_SOURCE_DIR}/include)
add_compile_definitions(STANDIN_FROM_THE_CPU_FOLDER=1)
set(TRITON_CPU_RUNTIME_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/runtime/standin_runtime.c)
add_library(TritonCPURuntime SHARED ${TRITON_CPU_RUNTIME_SOURCES})
target_link_libraries(TritonCPURuntime PRIVATE m)
find_package(OpenMP)
if(OpenMP_C_FOUND)
  target_link_libraries(TritonCPURuntime PRIVATE OpenMP::OpenMP_C)
endif()
"""
# The source includes a header of the include folder and needs the definition: a build that did not copy them
# fails to compile.
GUARD = '#include "standin_guard.h"\n#if !STANDIN_FROM_THE_CPU_FOLDER\n#error definition not copied\n#endif\n'


def _block(patch: Path, target: str) -> list[str]:
    """The ``if(TARGET TritonCPURuntime ...)`` block whose lines ``patch`` adds for ``target``."""
    diff = Diff.parse(patch_name(patch), patch.read_text(encoding="utf-8"))
    (hunk,) = [h for h in diff.hunks if any(f"target_compile_options({target} " in line for line in h.added)]
    added = hunk.added
    first = next(i for i, line in enumerate(added) if line.startswith("if(TARGET TritonCPURuntime"))
    last = next(i for i, line in enumerate(added) if i > first and line.startswith("endif()"))
    return added[first : last + 1]


def patch_lines() -> tuple[list[str], list[str]]:
    """(the flags' set() lines, the runtime blocks after the backends) as patches 0008 and 0010 write them."""
    settings = [
        line[1:].strip()
        for patch in (PATCH_0008, PATCH)
        for line in patch.read_text(encoding="utf-8").splitlines()
        if line.startswith("+") and line[1:].strip().startswith("set(FLAGTREE_")
    ]
    return settings, [*_block(PATCH_0008, "TritonCPURuntime"), *_block(PATCH, "TritonCPURuntimeBaseline")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the library output folder, the build folder) of the project, configured and built for aarch64."""
    cmake = require_executable("cmake", "cmake")
    require_executable("make", "make")
    compiler = aarch64_gcc()
    root = tmp_path_factory.mktemp("baseline-cmake")
    settings, blocks = patch_lines()
    (root / "cpu" / "include").mkdir(parents=True)
    (root / "cpu" / "runtime").mkdir()
    (root / "cpu" / "include" / "standin_guard.h").write_text("/* from the cpu folder's include folder */\n")
    (root / "cpu" / "runtime" / "standin_runtime.c").write_text(GUARD + STANDIN_C.read_text())
    (root / "cpu" / "CMakeLists.txt").write_text(CPU_CMAKE)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(standin C)\nfind_package(OpenMP)\n"
        + "\n".join(settings)
        + "\nadd_subdirectory(cpu)\n"
        + "\n".join(blocks)
        + "\n"
    )
    out, build = root / "out", root / "build"
    configure = [cmake, "-S", str(root), "-B", str(build), "-DCMAKE_SYSTEM_NAME=Linux",
                 "-DCMAKE_SYSTEM_PROCESSOR=aarch64", f"-DCMAKE_C_COMPILER={compiler}",
                 f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                 "-DCMAKE_BUILD_TYPE=Release"]  # fmt: skip
    for argv in (configure, [cmake, "--build", str(build)]):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    return out, build


def test_both_builds_are_made_with_one_soname(built: tuple[Path, Path]) -> None:
    out, _ = built
    for build in (ARMV9_RUNTIME, BASELINE_RUNTIME):
        library = out / build.library
        assert library.is_file(), f"{library} is missing"
        info = dynamic_info(library)
        assert info.machine == 183  # AArch64
        assert "libgomp.so.1" in info.needed  # OpenMP, a link of TritonCPURuntime, was copied
    sonames = {
        subprocess.run(["aarch64-linux-gnu-objdump", "-p", str(out / b.library)], capture_output=True,
                       text=True, check=True).stdout.split("SONAME", 1)[1].split()[0]
        for b in (ARMV9_RUNTIME, BASELINE_RUNTIME)
    }  # fmt: skip
    assert sonames == {SONAME}


def test_each_build_is_compiled_with_its_flags_and_the_armv9_one_as_before(built: tuple[Path, Path]) -> None:
    """The Armv9 object gets exactly upstream's flags; the baseline one the baseline's and no Armv9 flag."""
    _, build = built
    commands = json.loads((build / "compile_commands.json").read_text())
    by_target = {
        "baseline" if "TritonCPURuntimeBaseline.dir" in entry["command"] else "armv9": shlex.split(
            entry["command"]
        )
        for entry in commands
    }
    assert set(by_target) == {"armv9", "baseline"}
    for tier, argv in by_target.items():
        flags = [a for a in argv if a.startswith(("-march", "-msve-vector-bits"))]
        assert flags == list(FLAGS[tier]), (tier, argv)
        assert "-DSTANDIN_FROM_THE_CPU_FOLDER=1" in argv
        assert any(a.endswith("cpu/include") for a in argv)


def test_the_instructions_follow_the_flags(built: tuple[Path, Path]) -> None:
    """The plain loop is SVE (and SVE2) code in the Armv9 build and none in the baseline one."""
    out, _ = built
    needs = {}
    for build in (ARMV9_RUNTIME, BASELINE_RUNTIME):
        manifest = out / "manifest" / build.tier / "m.json"
        manifest.parent.mkdir(parents=True, exist_ok=True)
        done = write_manifest(out / build.library, build.march, manifest)
        assert done.returncode == 0, done.stderr
        needs[build.tier] = json.loads(manifest.read_text())["functions"]["standin_sve_loop"]["needs"]
    assert needs == {"armv9": ["sve", "sve2"], "baseline": []}
