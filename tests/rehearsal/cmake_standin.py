"""Stand-in for CMake (conda-forge's ``cmake``) in the rehearsal's stub channel, installed as ``bin/cmake``.

It takes the command lines the real build scripts give CMake (configure, ``--build``, ``--install``), keeps
the configure arguments the way CMake's cache does (the last ``-D`` of a name wins), and instead of
compiling upstream's C++ makes the files the real build makes, from the arguments it was given, with the
build's own compiler: real aarch64 ELF files (one object, made of tests/rehearsal/standin.c).

- LLVM (a source folder whose CMakeLists.txt says ``project(LLVM``): ``--install`` puts into the install
  prefix the arguments name one static archive per library (``LLVM_DISTRIBUTION_COMPONENTS`` when it is
  set, else every library of the stand-in's list for the ``LLVM_TARGETS_TO_BUILD``), ``.so`` files instead
  when ``BUILD_SHARED_LIBS=ON``, the CMake packages, and the tablegens when they are to be installed.
- FlagTree (``project(triton``): configure checks what FlagTree's CMake finds (MLIR's and LLVM's CMake
  packages under ``LLVM_LIBRARY_DIR``, pybind11); ``--build`` links ``libtriton.so`` against every plain
  library FlagTree's CMakeLists.txt links (``z``, ``stdc++fs``) with the build's LDFLAGS, so a library no
  host requirement provides fails with the linker's own message, and puts ``libTritonCPURuntime.so`` and
  sleef's ``libsleef.so`` beside it in ``CMAKE_LIBRARY_OUTPUT_DIRECTORY``; ``--install`` installs sleef's
  files (its only install rules) into the prefix, and refuses one outside the build's folders.

What it cannot show: whether upstream's C++ compiles with this compiler, which LLVM/MLIR libraries a real
LLVM build produces , and anything a real CMake would find or reject
that is not named above (a real LLVM build installs many more libraries).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

VERSION = "3.31.6"
CACHE = "standin-cmake-cache.json"
# The stub package installs this file as bin/cmake and standin.c beside it in share/cmake-standin/.
STANDIN_C = Path(__file__).resolve().parent.parent / "share" / "cmake-standin" / "standin.c"
# A short list of LLVM and MLIR libraries (among them those FlagTree links and the recipe's package_contents
# names); with each LLVM_TARGETS_TO_BUILD target's own libraries, what the LLVM stand-in installs when no
# LLVM_DISTRIBUTION_COMPONENTS narrows it. A real LLVM build installs many more.
LLVM_CORE_LIBRARIES = (
    "LLVMCore",
    "LLVMSupport",
    "LLVMPasses",
    "LLVMOption",
    "LLVMMC",
    "LLVMMCParser",
    "LLVMCodeGen",
    "LLVMTarget",
    "LLVMAnalysis",
    "LLVMTransformUtils",
    "LLVMIRReader",
    "LLVMAsmParser",
    "MLIRIR",
    "MLIRSupport",
    "MLIRPass",
    "MLIRTransforms",
    "MLIRLLVMDialect",
    "MLIRLLVMToLLVMIRTranslation",
    "MLIRTargetLLVMIRExport",
)
TARGET_LIBRARY_KINDS = ("CodeGen", "AsmParser", "Desc", "Info", "Utils")
TABLEGENS = ("llvm-tblgen", "mlir-tblgen")
# Arguments of target_link_libraries/link_libraries that are no library name.
CMAKE_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "debug", "optimized", "general"}


def fail(message: str) -> None:
    print(f"CMake Error (rehearsal stand-in): {message}", file=sys.stderr)
    raise SystemExit(1)


def run(argv: list[str]) -> None:
    print("+ " + shlex.join(argv), file=sys.stderr)
    done = subprocess.run(argv, check=False)
    if done.returncode != 0:
        fail(f"{Path(argv[0]).name} exited with {done.returncode}")


def compile_object(build: Path) -> Path:
    cc = os.environ.get("CC") or fail("CC is not set (the compiler package's activation sets it)")
    obj = build / "standin.o"
    if not obj.exists():
        run([*shlex.split(str(cc)), *shlex.split(os.environ.get("CFLAGS", "")), "-c", str(STANDIN_C), "-o", str(obj)])
    return obj


def archive(build: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    ar = os.environ.get("AR") or fail("AR is not set (the compiler package's activation sets it)")
    run([str(ar), "rcs", str(target), str(compile_object(build))])


def shared_library(build: Path, target: Path, libraries: list[str] = (), soname: str | None = None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    cxx = os.environ.get("CXX") or fail("CXX is not set (the compiler package's activation sets it)")
    argv = [*shlex.split(str(cxx)), "-shared", "-o", str(target), str(compile_object(build))]
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    argv += shlex.split(os.environ.get("LDFLAGS", ""))
    argv += ["-Wl,--no-as-needed", *(f"-l{name}" for name in libraries)]
    run(argv)


def executable(build: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC") or fail("CC is not set")
    run([*shlex.split(str(cc)), "-DSTANDIN_MAIN", str(STANDIN_C), "-o", str(target)])


def project_of(source: Path) -> str:
    lists = source / "CMakeLists.txt"
    if not lists.is_file():
        fail(f'The source directory "{source}" does not appear to contain CMakeLists.txt.')
    found = re.search(r"^\s*project\s*\(\s*(\w+)", lists.read_text(errors="replace"), re.MULTILINE | re.IGNORECASE)
    return found.group(1) if found else fail(f"{lists} has no project() command")


def plain_link_libraries(source: Path) -> list[str]:
    """Every plain library name (no variable, no CMake target) FlagTree's CMakeLists.txt links."""
    text = (source / "CMakeLists.txt").read_text(errors="replace")
    names: list[str] = []
    for command, args in re.findall(r"\b(target_link_libraries|link_libraries)\s*\(([^)]*)\)", text):
        words = args.split()
        if command == "target_link_libraries":
            words = words[1:]  # the target being linked
        for word in words:
            if word in CMAKE_KEYWORDS or "$" in word or word in names:
                continue
            if re.fullmatch(r"[A-Za-z0-9_+.-]+", word) and not word[0].isupper():
                names.append(word)
    return names


def configure(argv: list[str]) -> None:
    source, build, defines = None, Path.cwd(), {}
    args = iter(argv)
    for arg in args:
        if arg == "-S":
            source = Path(next(args))
        elif arg == "-B":
            build = Path(next(args))
        elif arg == "-G":
            next(args)
        elif arg.startswith("-D"):
            name, _, value = arg[2:].partition("=")
            defines[name.split(":")[0]] = value.strip("'\"")
        elif not arg.startswith("-"):
            source = Path(arg)
    if source is None:
        fail("no source directory given")
    source = source.resolve()
    project = project_of(source)
    build.mkdir(parents=True, exist_ok=True)
    if project == "triton":
        check_flagtree_configure(source, defines)
    (build / CACHE).write_text(json.dumps({"source": str(source), "project": project, "defines": defines}))
    print(f"-- Configuring done (stand-in, project {project})\n-- Build files have been written to: {build}")


def check_flagtree_configure(source: Path, defines: dict[str, str]) -> None:
    """What FlagTree's CMakeLists.txt needs found at configure time, as find_package reports it missing."""
    lib_dir = defines.get("LLVM_LIBRARY_DIR") or fail("LLVM_LIBRARY_DIR is not set (setup.py passes it)")
    for package, folder in (("MLIR", "mlir"), ("LLVM", "llvm")):
        config = Path(lib_dir) / "cmake" / folder / f"{package}Config.cmake"
        if not config.is_file():
            fail(f'Could not find a package configuration file provided by "{package}" ({config} is missing)')
    pybind = defines.get("pybind11_DIR")
    if pybind and not Path(pybind).is_dir():
        fail(f'Could not find a package configuration file provided by "pybind11" (pybind11_DIR={pybind})')
    if not (source / "third_party" / "cpu" / "CMakeLists.txt").exists():
        fail(f"{source}/third_party/cpu/CMakeLists.txt is missing (the backend links are not made)")


def load(build: Path) -> dict[str, object]:
    cache = build / CACHE
    if not cache.is_file():
        fail(f"{build} is not a CMake build directory (no configure step ran)")
    data = json.loads(cache.read_text())
    assert isinstance(data, dict)
    return data


def build_step(argv: list[str]) -> None:
    build = Path(argv[0]).resolve()
    state = load(build)
    if "--target" in argv and argv[argv.index("--target") + 1] == "mlir-doc":
        return  # FlagTree's docs: nothing to package
    if state["project"] != "triton":
        return  # LLVM's archives are made at install time from the recorded arguments
    defines = state["defines"]
    assert isinstance(defines, dict)
    out = Path(defines.get("CMAKE_LIBRARY_OUTPUT_DIRECTORY") or fail("no CMAKE_LIBRARY_OUTPUT_DIRECTORY"))
    libraries = plain_link_libraries(Path(str(state["source"])))
    shared_library(build, out / "libtriton.so", libraries)
    shared_library(build, out / "libTritonCPURuntime.so")
    shared_library(build, out / "libsleef.so.3", soname="libsleef.so.3")
    (out / "libsleef.so").unlink(missing_ok=True)
    (out / "libsleef.so").symlink_to("libsleef.so.3")


def install_step(argv: list[str]) -> None:
    build = Path(argv[0]).resolve()
    state = load(build)
    defines = state["defines"]
    assert isinstance(defines, dict)
    prefix = Path(argv[argv.index("--prefix") + 1]) if "--prefix" in argv else None
    prefix = prefix or Path(defines.get("CMAKE_INSTALL_PREFIX", "/usr/local"))
    libdir = prefix / defines.get("CMAKE_INSTALL_LIBDIR", "lib")
    if state["project"] == "triton":
        inside = [os.environ.get(v) for v in ("SRC_DIR", "PREFIX")]
        if not any(d and prefix.resolve().is_relative_to(Path(d).resolve()) for d in inside):
            fail(f"install prefix {prefix} is outside the build's folders (set CMAKE_INSTALL_PREFIX or --prefix)")
        (prefix / "include").mkdir(parents=True, exist_ok=True)
        (prefix / "include" / "sleef.h").write_text("/* stand-in */\n")
        shared_library(build, libdir / "libsleef.so.3", soname="libsleef.so.3")
        return
    install_llvm(build, defines, prefix, libdir)


def on(defines: dict[str, str], name: str) -> bool:
    return defines.get(name, "").upper() in {"ON", "1", "TRUE", "YES"}


def install_llvm(build: Path, defines: dict[str, str], prefix: Path, libdir: Path) -> None:
    components = [c for c in defines.get("LLVM_DISTRIBUTION_COMPONENTS", "").split(";") if c]
    targets = [t for t in defines.get("LLVM_TARGETS_TO_BUILD", "all").split(";") if t]
    every_library = [*LLVM_CORE_LIBRARIES, *(f"LLVM{t}{k}" for t in targets for k in TARGET_LIBRARY_KINDS)]
    wanted = set(components) if components else None
    libraries = [name for name in (components or every_library) if name.startswith(("LLVM", "MLIR"))]
    suffix = ".so" if on(defines, "BUILD_SHARED_LIBS") else ".a"
    for name in libraries:
        if suffix == ".a":
            archive(build, libdir / f"lib{name}.a")
        else:
            shared_library(build, libdir / f"lib{name}.so")
    if wanted is None or "cmake-exports" in wanted or "llvm-config" in wanted:
        for package, folder in (("LLVM", "llvm"), ("MLIR", "mlir")):
            config = libdir / "cmake" / folder / f"{package}Config.cmake"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(f"# stand-in {package}Config.cmake (prefix {prefix})\n")
    if wanted is None or {"llvm-headers", "mlir-headers"} & wanted:
        (prefix / "include" / "llvm").mkdir(parents=True, exist_ok=True)
        (prefix / "include" / "mlir").mkdir(parents=True, exist_ok=True)
    for tool in TABLEGENS:
        if (wanted is None and on(defines, "LLVM_INSTALL_UTILS")) or (wanted is not None and tool in wanted):
            executable(build, prefix / "bin" / tool)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--version"]:
        print(f"cmake version {VERSION}")
    elif argv[:1] == ["--build"]:
        build_step(argv[1:])
    elif argv[:1] == ["--install"]:
        install_step(argv[1:])
    else:
        configure(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
