"""recipe/llvm_archive_install.py against an install tree real CMake made, shaped like Triton's LLVM archive.

The tree is a CMake project's `install` (static and shared libraries, tools, two export sets, LLD's package),
so its export files are CMake's own, with the file checks CMake runs when a package is found. What it cannot
show: the thousands of targets of a real LLVM install; every one of them is exported the same way. A
consumer project then finds the installed MLIR package and links a library, as FlagTree's CMake does.
build-llvm.sh's archive branch runs the script, without network and without any compiler or cmake.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import types
from functools import cache
from pathlib import Path

import pytest

from _recipe_support import RECIPE_DIR
from _tools import network_jail, require_executable

TOP = "llvm-a66376b0-ubuntu-arm64"
# An install tree's generated target lists, as LLVM writes them for AArch64;NVPTX;AMDGPU (Triton's archive).
TARGET_LISTS = {
    "Targets.def": "LLVM_TARGET",
    "AsmParsers.def": "LLVM_ASM_PARSER",
    "AsmPrinters.def": "LLVM_ASM_PRINTER",
    "Disassemblers.def": "LLVM_DISASSEMBLER",
    "TargetMCAs.def": "LLVM_TARGETMCA",
}

_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(TritonLikeLLVM C)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
file(WRITE ${CMAKE_BINARY_DIR}/lib.c "int triton_like_llvm(void) { return 1; }\\n")
file(WRITE ${CMAKE_BINARY_DIR}/main.c "int main(void) { return 0; }\\n")
set(lib ${CMAKE_BINARY_DIR}/lib.c)
set(main ${CMAKE_BINARY_DIR}/main.c)
# LLVM's export set: static libraries, the shared libLTO, tools.
add_library(LLVMDemangle STATIC ${lib})
add_library(LLVMSupport STATIC ${lib})
target_link_libraries(LLVMSupport PUBLIC LLVMDemangle)
add_library(LLVMNVPTXCodeGen STATIC ${lib})
add_library(LTO SHARED ${lib})
set_target_properties(LTO PROPERTIES VERSION 20.0git SOVERSION 20.0git)
add_executable(llvm-tblgen ${main})
add_executable(llc ${main})
install(TARGETS LLVMDemangle LLVMSupport LLVMNVPTXCodeGen LTO llvm-tblgen llc EXPORT LLVMExports
        ARCHIVE DESTINATION lib LIBRARY DESTINATION lib RUNTIME DESTINATION bin)
install(EXPORT LLVMExports DESTINATION lib/cmake/llvm)
# MLIR's: a static library linking LLVM's, its tools, a runtime library.
add_library(MLIRIR STATIC ${lib})
target_link_libraries(MLIRIR PUBLIC LLVMSupport)
add_library(mlir_c_runner_utils SHARED ${lib})
add_executable(mlir-tblgen ${main})
add_executable(mlir-opt ${main})
install(TARGETS MLIRIR mlir_c_runner_utils mlir-tblgen mlir-opt EXPORT MLIRTargets
        ARCHIVE DESTINATION lib LIBRARY DESTINATION lib RUNTIME DESTINATION bin)
install(EXPORT MLIRTargets DESTINATION lib/cmake/mlir)
# LLD's package of its own.
add_library(lldCommon STATIC ${lib})
install(TARGETS lldCommon EXPORT LLDTargets ARCHIVE DESTINATION lib)
install(EXPORT LLDTargets DESTINATION lib/cmake/lld)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ DESTINATION include)
install(FILES ${CMAKE_SOURCE_DIR}/LLVMConfig.cmake DESTINATION lib/cmake/llvm)
install(FILES ${CMAKE_SOURCE_DIR}/MLIRConfig.cmake DESTINATION lib/cmake/mlir)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python_packages/ DESTINATION python_packages)
"""
# What LLVMConfig.cmake and MLIRConfig.cmake do that matters here: load the exports (MLIR's after LLVM's).
_LLVM_CONFIG = 'include("${CMAKE_CURRENT_LIST_DIR}/LLVMExports.cmake")\n'
_MLIR_CONFIG = (
    'find_package(LLVM REQUIRED CONFIG PATHS "${CMAKE_CURRENT_LIST_DIR}/../llvm" NO_DEFAULT_PATH)\n'
    'include("${CMAKE_CURRENT_LIST_DIR}/MLIRTargets.cmake")\n'
)
# FlagTree's use of the package: find MLIR (and so LLVM), link MLIR and LLVM libraries into a library.
_CONSUMER = """cmake_minimum_required(VERSION 3.20)
project(Consumer C)
find_package(MLIR REQUIRED CONFIG PATHS "{prefix}/lib/cmake/mlir" NO_DEFAULT_PATH)
file(WRITE ${{CMAKE_BINARY_DIR}}/use.c "int triton_like_llvm(void); int main(void) {{ return triton_like_llvm() - 1; }}\\n")
add_executable(use ${{CMAKE_BINARY_DIR}}/use.c)
target_link_libraries(use MLIRIR)
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@cache
def install_script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "llvm_archive_install", RECIPE_DIR / "llvm_archive_install.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def target_list(kind: str, targets: tuple[str, ...] = ("AArch64", "NVPTX", "AMDGPU")) -> str:
    """A list as LLVM's configure writes it (llvm/include/llvm/Config/Targets.def.in and its siblings)."""
    entries = "".join(f"{kind}({target}) " for target in targets)
    return f"#ifndef {kind}\n#  error Please define the macro {kind}(TargetName)\n#endif\n\n{entries}\n\n#undef {kind}\n"


def _cmake(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_executable("cmake", "cmake"), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def triton_like_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`cmake --install` of the project above into <scratch>/llvm-a66376b0-ubuntu-arm64: the archive's tree."""
    require_executable("make", "make")
    root = tmp_path_factory.mktemp("triton-like")
    source = root / "source"
    _write(source / "CMakeLists.txt", _PROJECT)
    _write(source / "LLVMConfig.cmake", _LLVM_CONFIG)
    _write(source / "MLIRConfig.cmake", _MLIR_CONFIG)
    for name, kind in TARGET_LISTS.items():
        _write(source / "include" / "llvm" / "Config" / name, target_list(kind))
    _write(source / "include" / "llvm" / "Config" / "llvm-config.h", "#define LLVM_VERSION_MAJOR 20\n")
    _write(source / "include" / "mlir" / "IR" / "Operation.h", "/* MLIR */\n")
    _write(source / "include" / "lld" / "Common" / "Driver.h", "/* lld */\n")
    _write(source / "python_packages" / "mlir_core" / "mlir" / "__init__.py", "")
    prefix = root / TOP
    for step in (
        ("-S", str(source), "-B", str(root / "build"), "-G", "Unix Makefiles", "-DCMAKE_BUILD_TYPE=Release"),
        ("--build", str(root / "build"), "--parallel", "2"),
        ("--install", str(root / "build"), "--prefix", str(prefix)),
    ):
        done = _cmake(*step)
        assert done.returncode == 0, done.stdout + done.stderr
    return prefix


def _archive_copy(triton_like_install: Path, tmp_path: Path) -> Path:
    """The archive as the engine leaves it: its top folder's content in the work folder's llvm-archive/."""
    work = tmp_path / "work" / "llvm-archive"
    shutil.copytree(triton_like_install, work, symlinks=True)
    return work


def _configure_consumer(prefix: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "consumer"
    _write(source / "CMakeLists.txt", _CONSUMER.format(prefix=prefix))
    done = _cmake("-S", str(source), "-B", str(tmp_path / "consumer-build"), "-G", "Unix Makefiles")
    if done.returncode == 0:
        done = _cmake("--build", str(tmp_path / "consumer-build"))
    return done


def test_the_unedited_archive_is_what_cmake_finds(triton_like_install, tmp_path):
    """The fixture's package works as installed: what the edits must keep working."""
    done = _configure_consumer(triton_like_install, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_installs_what_the_source_build_installs_and_cmake_still_finds_it(triton_like_install, tmp_path):
    prefix = tmp_path / "prefix" / "lib" / "flagtree-llvm"
    install_script().install(_archive_copy(triton_like_install, tmp_path), prefix)
    files = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if not p.is_dir())
    assert [f for f in files if f.startswith("bin/")] == ["bin/llvm-tblgen", "bin/mlir-tblgen"]
    libraries = [f for f in files if f.startswith("lib/") and not f.startswith("lib/cmake/")]
    assert libraries == [
        "lib/libLLVMDemangle.a",
        "lib/libLLVMNVPTXCodeGen.a",
        "lib/libLLVMSupport.a",
        "lib/libMLIRIR.a",
    ]
    assert {f.split("/")[2] for f in files if f.startswith("lib/cmake/")} == {"llvm", "mlir"}
    assert "include/mlir/IR/Operation.h" in files
    assert not any(f.startswith(("include/lld", "python_packages")) for f in files)
    # The package's CMake configuration finds and links what remains, as FlagTree's CMake does.
    done = _configure_consumer(prefix, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_export_edit_cmake_refuses_the_package(triton_like_install, tmp_path, monkeypatch):
    """Why the edit exists: CMake checks that every file an export names is there."""
    monkeypatch.setattr(install_script(), "prune_exports", lambda text, prefix: (text, []))
    prefix = tmp_path / "prefix"
    install_script().install(_archive_copy(triton_like_install, tmp_path), prefix)
    done = _configure_consumer(prefix, tmp_path)
    assert done.returncode != 0
    assert "but this file does not exist" in done.stderr


def test_prune_exports_reads_the_older_cmake_form(tmp_path):
    """CMake before 3.24 wrote `_IMPORT_CHECK_FILES_FOR_<target>` (Triton's runners may have had one)."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libKept.a").write_text("")
    text = "".join(
        f'# Import target "{name}" for configuration "Release"\n'
        f'set_target_properties({name} PROPERTIES IMPORTED_LOCATION_RELEASE "${{_IMPORT_PREFIX}}/lib/{file}")\n\n'
        f"list(APPEND _IMPORT_CHECK_TARGETS {name} )\n"
        f'list(APPEND _IMPORT_CHECK_FILES_FOR_{name} "${{_IMPORT_PREFIX}}/lib/{file}" )\n\n'
        for name, file in (("Kept", "libKept.a"), ("Gone", "libGone.so"))
    )
    text += "# Commands beyond this point should not need to know the version.\n"
    pruned, dropped = install_script().prune_exports(text, tmp_path)
    assert 'Import target "Kept"' in pruned
    assert "Gone" not in pruned
    assert pruned.endswith("# Commands beyond this point should not need to know the version.\n")
    assert dropped == [f"{tmp_path}/lib/libGone.so"]


def test_the_initialised_targets_are_cut_to_aarch64(triton_like_install, tmp_path):
    prefix = tmp_path / "prefix"
    install_script().install(_archive_copy(triton_like_install, tmp_path), prefix)
    config = prefix / "include" / "llvm" / "Config"
    for name, kind in TARGET_LISTS.items():
        assert (config / name).read_text() == target_list(kind, ("AArch64",)), name
    assert (config / "llvm-config.h").read_text() == "#define LLVM_VERSION_MAJOR 20\n"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda tree: (tree / "bin" / "mlir-tblgen").unlink(), "no bin/mlir-tblgen"),
        (
            lambda tree: (tree / "lib" / "cmake" / "mlir" / "MLIRConfig.cmake").unlink(),
            "lib/cmake/mlir/MLIRConfig.cmake",
        ),
        (
            lambda tree: (tree / "include" / "llvm" / "Config" / "Targets.def").write_text(
                target_list("LLVM_TARGET", ("X86", "NVPTX"))
            ),
            "has no AArch64 target",
        ),
    ],
    ids=["no-tblgen", "no-mlir-package", "x86-only"],
)
def test_a_tree_not_shaped_like_triton_s_is_refused_before_anything_moves(
    triton_like_install, tmp_path, capsys, mutate, message
):
    archive = _archive_copy(triton_like_install, tmp_path)
    mutate(archive)
    before = sorted(archive.rglob("*"))
    assert install_script().main([str(archive), str(tmp_path / "prefix")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("llvm_archive_install.py: ") and message in line
    assert sorted(archive.rglob("*")) == before
    assert not (tmp_path / "prefix").exists()


def test_build_llvm_sh_installs_an_archive_without_building(triton_like_install, tmp_path):
    """The archive branch: no cmake, no compiler, no network, also in a cross build (nothing native runs)."""
    bash = require_executable("bash", "bash")
    work = _archive_copy(triton_like_install, tmp_path).parent
    log = tmp_path / "calls.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = (
        f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv) + '\\n')\n"
    )
    for tool in ("cmake", "ninja"):
        (bin_dir / tool).write_text(recorder)
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    prefix = tmp_path / "prefix"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SRC_DIR": str(work),
        "PREFIX": str(prefix),
        "RECIPE_DIR": str(RECIPE_DIR),
        "CPU_COUNT": "2",
        "build_platform": "linux-64",
        "target_platform": "linux-aarch64",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [*network_jail(), bash, str(RECIPE_DIR / "build-llvm.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not log.exists(), log.read_text()
    assert sorted(p.name for p in (prefix / "lib" / "flagtree-llvm" / "bin").iterdir()) == [
        "llvm-tblgen",
        "mlir-tblgen",
    ]


def _plant(archive: Path, outside: Path, where: str) -> Path:
    """Replace ``where`` in the archive by a symlink to a copy of it in ``outside``; the copy's path."""
    planted = archive / where
    copy = outside / planted.name
    shutil.move(planted, copy)
    planted.symlink_to(copy)
    return copy


@pytest.mark.parametrize(
    "where",
    [
        "include/llvm/Config/AsmParsers.def",  # a file the install edits
        "lib/cmake/llvm/LLVMExports-release.cmake",
        "include/llvm/Config",  # a folder it writes into
        "lib/cmake/mlir",
        "bin/mlir-tblgen",  # a file it moves into the package
    ],
)
def test_nothing_is_written_through_a_symlink(triton_like_install, tmp_path, capsys, where):
    """An archive unpacked with a symlink where the install writes: the file it points to (anywhere on the
    machine) was rewritten. Now the install refuses before anything moves."""
    archive = _archive_copy(triton_like_install, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = _plant(archive, outside, where)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    tree = sorted(archive.rglob("*"))
    prefix = tmp_path / "prefix"
    assert install_script().main([str(archive), str(prefix)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"llvm_archive_install.py: {archive}/{where} is a symlink (to {copy}): the install writes only into "
        "real files and folders, never through a link"
    )
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before
    assert sorted(archive.rglob("*")) == tree
    assert not prefix.exists()


def test_an_edit_replaces_the_file_never_writes_into_it(tmp_path):
    """The edit is a new file renamed over the old: a hard link's other name keeps its content."""
    config = tmp_path / "Targets.def"
    config.write_text(target_list("LLVM_TARGET"))
    other = tmp_path / "other-name"
    other.hardlink_to(config)
    install_script()._rewrite(config, target_list("LLVM_TARGET", ("AArch64",)))
    assert config.read_text() == target_list("LLVM_TARGET", ("AArch64",))
    assert other.read_text() == target_list("LLVM_TARGET")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Targets.def", "other-name"]
