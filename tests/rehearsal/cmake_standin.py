"""Stand-in for CMake (conda-forge's ``cmake``) in the rehearsal's stub channel, installed as ``bin/cmake``.

It takes the command lines the real build scripts give CMake (configure, ``--build``, ``--install``), keeps
the configure arguments the way CMake's cache does (the last ``-D`` of a name wins), and instead of
compiling upstream's C++ makes the files the real build makes, from the arguments it was given, with the
build's own compiler: real aarch64 ELF files (one object, made of tests/rehearsal/standin.c).

- LLVM (a source folder whose CMakeLists.txt says ``project(LLVM``): configure writes ``--graphviz``'s link
  graph of the stand-in's libraries (for the ``LLVM_TARGETS_TO_BUILD`` and ``LLVM_ENABLE_PROJECTS``) and
  checks ``LLVM_DISTRIBUTION_COMPONENTS`` as LLVM's CMake does (each one exists, each library's links are
  in it); the install (``--install``, or ``--build --target install[-distribution]``) puts into the install
  prefix the arguments name one static archive per library (``.so`` when ``BUILD_SHARED_LIBS=ON``; the
  shared libLTO and libRemarks that a full install adds), the headers, the CMake packages and the tablegens:
  the distribution's components only, when it is set.
- FlagTree (``project(triton``): configure checks what FlagTree's CMake finds (MLIR's and LLVM's CMake
  packages under ``LLVM_LIBRARY_DIR``, pybind11); ``--build`` links ``libtriton.so`` against every plain
  library FlagTree's CMakeLists.txt links (``z``, ``stdc++fs``) with the build's LDFLAGS, so a library no
  host requirement provides fails with the linker's own message, and puts sleef's ``libsleef.so`` and each
  build of ``libTritonCPURuntime.so`` the (patched) CMakeLists.txt declares beside it in
  ``CMAKE_LIBRARY_OUTPUT_DIRECTORY``: on aarch64 the Armv9 one with the flags of
  ``FLAGTREE_CPU_RUNTIME_ARCH_FLAGS`` (patch 0008), and the baseline one with
  ``FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS`` in the folder its ``LIBRARY_OUTPUT_DIRECTORY`` names (patch 0010), each
  compiled with those flags and the runtime's soname; ``--install`` installs sleef's
  files (its only install rules) into the prefix, and refuses one outside the build's folders. The link
  also takes FlagTree's codegen pair for ``CMAKE_SYSTEM_PROCESSOR`` (``LLVMAArch64CodeGen`` and
  ``LLVMAArch64AsmParser`` on aarch64, the X86 pair on x86_64; CMake's default processor is the build
  machine's, ``build_platform``) from ``LLVM_LIBRARY_DIR``, so a cross build that does not give FlagTree's
  CMake the target's system links the X86 pair, which an AArch64-only LLVM lacks.
- Cross-compiling (``CMAKE_SYSTEM_NAME`` given, as conda's cross activation puts it into ``CMAKE_ARGS``):
  ``--build --target`` of LLVM's tablegens or sleef's helpers (``mkrename``, ...) makes them in
  ``<build>/bin`` with ``CMAKE_C_COMPILER`` (else ``CC``), as the scripts' native sub-builds ask; the cross
  LLVM's install runs the tablegens of ``LLVM_NATIVE_TOOL_DIR`` on this machine, as LLVM's build does; the
  FlagTree build runs sleef's helpers from ``NATIVE_BUILD_DIR/bin`` on this machine (sleef's
  ``add_host_executable``; ninja's own message when one is missing) and flagtree-llvm's ``mlir-tblgen``
  through ``CMAKE_CROSSCOMPILING_EMULATOR`` (directly without one), as MLIR's tablegen rules do. A program for
  the wrong machine fails as it does here, where no qemu is registered with binfmt_misc: "Exec format
  error". When ``share/cmake-standin/record`` names a file, each such run is appended to it (tool, path,
  ELF machine, sha256, how it ran) for the tests to read.

What it cannot show: whether upstream's C++ compiles with this compiler, which libraries a real LLVM build
makes and links (its graph is a small subset, with simplified links), whether the LLVM/MLIR libraries
FlagTree names are really linked into libtriton.so, and anything a real CMake would find or reject that is
not named above. Cross-compiling: which tools a real LLVM, FlagTree or sleef build runs and when (it runs
each once, at the step named above), a real LLVM's own native sub-build when ``LLVM_NATIVE_TOOL_DIR`` is not
given, and a machine where qemu is registered with binfmt_misc, which runs an aarch64 program directly.
"""

from __future__ import annotations

import hashlib
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
# Beside it, in the cross rehearsal's stub: the file each program run while cross-compiling is recorded in.
RECORD = STANDIN_C.with_name("record")
# The stand-in's LLVM: a subset of the libraries a real LLVM + MLIR build (AArch64 target) makes, each with
# some of the libraries it links, enough for FlagTree's links and their closure to be found in it and for
# what a full install adds (the shared libLTO and libRemarks that LLVM builds even for static builds, and
# libraries nothing of FlagTree's links) to show. A real LLVM has several hundred libraries.
_MLIR_DIALECT_LINKS = ("MLIRIR", "MLIRSupport")
LLVM_LIBRARIES: dict[str, tuple[str, ...]] = {
    "LLVMDemangle": (),
    "LLVMSupport": ("LLVMDemangle",),
    "LLVMTargetParser": ("LLVMSupport",),
    "LLVMBinaryFormat": ("LLVMSupport", "LLVMTargetParser"),
    "LLVMRemarks": ("LLVMBitstreamReader", "LLVMSupport"),
    "LLVMBitstreamReader": ("LLVMSupport",),
    "LLVMCore": ("LLVMBinaryFormat", "LLVMRemarks", "LLVMSupport", "LLVMTargetParser"),
    "LLVMMC": ("LLVMSupport", "LLVMBinaryFormat", "LLVMTargetParser"),
    "LLVMMCParser": ("LLVMMC", "LLVMSupport"),
    "LLVMAsmParser": ("LLVMBinaryFormat", "LLVMCore", "LLVMSupport"),
    "LLVMIRReader": ("LLVMAsmParser", "LLVMCore", "LLVMSupport"),
    "LLVMAnalysis": ("LLVMCore", "LLVMSupport", "LLVMTargetParser"),
    "LLVMTransformUtils": ("LLVMAnalysis", "LLVMCore", "LLVMSupport"),
    "LLVMTarget": ("LLVMAnalysis", "LLVMCore", "LLVMMC", "LLVMSupport", "LLVMTargetParser"),
    "LLVMCodeGen": ("LLVMAnalysis", "LLVMCore", "LLVMMC", "LLVMTarget", "LLVMTransformUtils"),
    "LLVMPasses": ("LLVMAnalysis", "LLVMCodeGen", "LLVMCore", "LLVMTarget", "LLVMTransformUtils"),
    "LLVMLTO": ("LLVMCodeGen", "LLVMCore", "LLVMPasses"),
    "LLVMAArch64Info": ("LLVMMC", "LLVMSupport"),
    "LLVMAArch64Utils": ("LLVMCore", "LLVMSupport"),
    "LLVMAArch64Desc": ("LLVMAArch64Info", "LLVMAArch64Utils", "LLVMMC", "LLVMSupport"),
    "LLVMAArch64CodeGen": (
        "LLVMAArch64Desc",
        "LLVMAArch64Info",
        "LLVMAArch64Utils",
        "LLVMCodeGen",
        "LLVMCore",
    ),
    "LLVMAArch64AsmParser": ("LLVMAArch64Desc", "LLVMAArch64Info", "LLVMMC", "LLVMMCParser"),
    "MLIRSupport": ("LLVMSupport",),
    "MLIRIR": ("MLIRSupport", "LLVMSupport"),
    **dict.fromkeys(
        [
            "MLIRPass",
            "MLIRTransforms",
            "MLIRTransformUtils",
            "MLIRRewrite",
            "MLIRAnalysis",
            "MLIRDialectUtils",
            "MLIRBytecodeWriter",
            "MLIRLLVMDialect",
            "MLIRTargetLLVMIRExport",
            "MLIRBuiltinToLLVMIRTranslation",
            "MLIRLLVMToLLVMIRTranslation",
            "MLIRNVVMToLLVMIRTranslation",
            "MLIRROCDLToLLVMIRTranslation",
            "MLIRAMXToLLVMIRTranslation",
            "MLIRControlFlowToLLVM",
            "MLIRArithToLLVM",
            "MLIRFuncToLLVM",
            "MLIRIndexToLLVM",
            "MLIRSCFToControlFlow",
            "MLIRReconcileUnrealizedCasts",
            "MLIRUBToLLVM",
            "MLIRMathToLLVM",
            "MLIRMathToLibm",
            "MLIRVectorToSCF",
            "MLIRVectorToLLVMPass",
            "MLIRAffineToStandard",
            "MLIRAffineDialect",
            "MLIRVectorDialect",
            "MLIRVectorTransforms",
            "MLIRMemRefToLLVM",
            "MLIRMemRefTransforms",
            "MLIRMemRefDialect",
            "MLIRArithDialect",
            "MLIRMathDialect",
            "MLIRSCFDialect",
            "MLIRGPUDialect",
            "MLIRGPUToNVVMTransforms",
            "MLIRGPUToROCDLTransforms",
            "MLIRGPUTransforms",
            "MLIRSPIRVDialect",
            "MLIRPresburger",
        ],
        _MLIR_DIALECT_LINKS,
    ),
}
# Shared libraries a full LLVM build makes even with BUILD_SHARED_LIBS=OFF (tools/lto, tools/remarks-shlib).
LLVM_SHARED = {"LTO": ("LLVMLTO",), "Remarks": ("LLVMRemarks",)}
LLVM_EXECUTABLES = ("llvm-tblgen", "mlir-tblgen", "mlir-opt")
# Distribution components that are no target of the graph: headers and CMake packages.
HEADER_FILES = {"llvm-headers": "include/llvm/IR/Module.h", "mlir-headers": "include/mlir/IR/Operation.h"}
CMAKE_PACKAGES = {"cmake-exports": ("LLVM", "llvm"), "mlir-cmake-exports": ("MLIR", "mlir")}
TABLEGENS = ("llvm-tblgen", "mlir-tblgen")
# Arguments of target_link_libraries/link_libraries that are no library name.
CMAKE_KEYWORDS = {"PRIVATE", "PUBLIC", "INTERFACE", "debug", "optimized", "general"}
# Programs the build scripts build for the build machine in native sub-builds, by project: the tools LLVM and
# MLIR run while they build (build-llvm.sh) and sleef's build-time helpers (build-flagtree.sh).
HOST_TOOLS = {
    "LLVM": ("llvm-tblgen", "mlir-tblgen", "mlir-linalg-ods-yaml-gen", "mlir-src-sharder", "mlir-pdll"),
    "SLEEF": ("mkrename", "mkalias", "mkdisp", "addSuffix"),
}
# FlagTree's CMakeLists.txt: the LLVM codegen and asm parser libraries libtriton links, by CMAKE_SYSTEM_PROCESSOR.
CODEGEN = {"aarch64": "AArch64", "arm64": "AArch64", "x86_64": "X86", "AMD64": "X86"}
# conda's platforms, as the machine (CMAKE_HOST_SYSTEM_PROCESSOR) a build runs on.
PLATFORM_PROCESSOR = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# ELF e_machine values.
ELF_MACHINES = {62: "x86-64", 183: "AArch64"}


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
        run(
            [
                *shlex.split(str(cc)),
                *shlex.split(os.environ.get("CFLAGS", "")),
                "-c",
                str(STANDIN_C),
                "-o",
                str(obj),
            ]
        )
    return obj


def archive(build: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    ar = os.environ.get("AR") or fail("AR is not set (the compiler package's activation sets it)")
    run([str(ar), "rcs", str(target), str(compile_object(build))])


def shared_library(
    build: Path,
    target: Path,
    libraries: list[str] = (),
    soname: str | None = None,
    library_dirs: list[str] = (),
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    cxx = os.environ.get("CXX") or fail("CXX is not set (the compiler package's activation sets it)")
    argv = [*shlex.split(str(cxx)), "-shared", "-o", str(target), str(compile_object(build))]
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    argv += shlex.split(os.environ.get("LDFLAGS", ""))
    argv += [f"-L{folder}" for folder in library_dirs]
    argv += ["-Wl,--no-as-needed", *(f"-l{name}" for name in libraries)]
    run(argv)


def executable(build: Path, target: Path, compiler: str | None = None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    cc = compiler or os.environ.get("CC") or fail("CC is not set")
    run([*shlex.split(str(cc)), "-DSTANDIN_MAIN", str(STANDIN_C), "-o", str(target)])


def elf_machine(path: Path) -> str:
    """The machine an ELF file is for (its e_machine), or what else it is."""
    head = path.read_bytes()[:20] if path.is_file() else b""
    if head[:4] != b"\x7fELF":
        return "not ELF"
    number = int.from_bytes(head[18:20], "little")
    return ELF_MACHINES.get(number, f"e_machine {number}")


def run_program(argv: list[str], program: Path, *, via: str, project: str) -> None:
    """Run a program the build runs (a tool, a helper), record it, and fail as the build would."""
    if RECORD.is_file():
        entry = {"project": project, "tool": program.name, "path": str(program), "via": via}
        digest = hashlib.sha256(program.read_bytes()).hexdigest() if program.is_file() else None
        with Path(RECORD.read_text().strip()).open("a") as record:
            record.write(json.dumps({**entry, "machine": elf_machine(program), "sha256": digest}) + "\n")
    print("+ " + shlex.join(argv), file=sys.stderr)
    try:
        done = subprocess.run(argv, check=False, capture_output=True)
    except OSError as exc:  # ENOEXEC: a program for another machine, run directly
        fail(f"{program}: {exc.strerror} ({elf_machine(program)} program run {via} on this machine)")
    if done.returncode != 0:
        fail(
            f"{program} ({via}) exited with {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
        )


def cross_compiling(defines: dict[str, str]) -> bool:
    """CMake cross-compiles when CMAKE_SYSTEM_NAME is given (CMAKE_CROSSCOMPILING)."""
    return bool(defines.get("CMAKE_SYSTEM_NAME"))


def processor(defines: dict[str, str]) -> str:
    """CMAKE_SYSTEM_PROCESSOR: the given one when cross-compiling, else the build machine's (build_platform)."""
    if cross_compiling(defines) and defines.get("CMAKE_SYSTEM_PROCESSOR"):
        return defines["CMAKE_SYSTEM_PROCESSOR"]
    # The engines' own lower-case names.
    platform = os.environ.get("build_platform") or os.environ.get("target_platform", "")  # noqa: SIM112
    return PLATFORM_PROCESSOR.get(platform) or os.uname().machine


def build_host_tools(build: Path, defines: dict[str, str], tools: list[str]) -> None:
    """A native sub-build's programs in <build>/bin, with its CMAKE_C_COMPILER (CMake's default: CC)."""
    compiler = defines.get("CMAKE_C_COMPILER") or os.environ.get("CC") or fail("no C compiler")
    for tool in tools:
        executable(build, build / "bin" / tool, compiler)


def run_sleef_helpers(defines: dict[str, str]) -> None:
    """sleef cross-compiled: its build runs the helpers of NATIVE_BUILD_DIR/bin here, directly."""
    native = defines.get("NATIVE_BUILD_DIR", "")
    for helper in HOST_TOOLS["SLEEF"]:
        path = Path(f"{native}/bin/{helper}")
        if not path.is_file():
            fail(
                f"ninja: error: '{path}', needed by 'sleef/src/libm/include/renameadvsimd.h', missing and no "
                "known rule to make it (sleef imports its helpers from NATIVE_BUILD_DIR when cross-compiling)"
            )
        run_program([str(path)], path, via="directly", project="sleef")


def run_tablegen(defines: dict[str, str]) -> None:
    """FlagTree cross-compiled: MLIR's tablegen rules run flagtree-llvm's mlir-tblgen through the emulator."""
    tablegen = Path(defines["LLVM_LIBRARY_DIR"]).parent / "bin" / "mlir-tblgen"
    emulator = [word for word in defines.get("CMAKE_CROSSCOMPILING_EMULATOR", "").split(";") if word]
    via = "through the emulator" if emulator else "directly"
    run_program([*emulator, str(tablegen), "--version"], tablegen, via=via, project="triton")


def project_of(source: Path) -> str:
    lists = source / "CMakeLists.txt"
    if not lists.is_file():
        fail(f'The source directory "{source}" does not appear to contain CMakeLists.txt.')
    found = re.search(
        r"^\s*project\s*\(\s*(\w+)", lists.read_text(errors="replace"), re.MULTILINE | re.IGNORECASE
    )
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
    graphviz: Path | None = None
    args = iter(argv)
    for arg in args:
        if arg == "-S":
            source = Path(next(args))
        elif arg == "-B":
            build = Path(next(args))
        elif arg == "-G":
            next(args)
        elif arg.startswith("--graphviz="):
            graphviz = Path(arg.partition("=")[2])
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
    cache = build / CACHE
    if cache.is_file():  # a second configure of the same build keeps the earlier -D values, as CMake's cache
        defines = {**json.loads(cache.read_text())["defines"], **defines}
    if project == "triton":
        check_flagtree_configure(source, defines)
    if project == "LLVM":
        libraries = llvm_libraries(defines)
        check_distribution(libraries, defines)
        if graphviz is not None:
            graphviz.write_text(link_graph(libraries))
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


def build_targets(argv: list[str]) -> list[str]:
    """The targets of `cmake --build DIR ... --target A B ...` (CMake takes several since 3.15)."""
    if "--target" not in argv:
        return []
    targets: list[str] = []
    for arg in argv[argv.index("--target") + 1 :]:
        if arg.startswith("-"):
            break
        targets.append(arg)
    return targets


def build_step(argv: list[str]) -> None:
    build = Path(argv[0]).resolve()
    state = load(build)
    if "--target" in argv and argv[argv.index("--target") + 1] == "mlir-doc":
        return  # FlagTree's docs: nothing to package
    host_tools = [t for t in build_targets(argv) if t in HOST_TOOLS.get(str(state["project"]), ())]
    if host_tools:
        defines = state["defines"]
        assert isinstance(defines, dict)
        build_host_tools(build, defines, host_tools)
        return
    if state["project"] != "triton":
        target = argv[argv.index("--target") + 1] if "--target" in argv else "all"
        if target in {"install", "install-distribution"}:
            install_step([argv[0]])
        return  # LLVM's archives are made at install time from the recorded arguments
    defines = state["defines"]
    assert isinstance(defines, dict)
    out = Path(defines.get("CMAKE_LIBRARY_OUTPUT_DIRECTORY") or fail("no CMAKE_LIBRARY_OUTPUT_DIRECTORY"))
    if cross_compiling(defines):
        run_sleef_helpers(defines)
        run_tablegen(defines)
    libraries = plain_link_libraries(Path(str(state["source"])))
    target = processor(defines)
    arch = CODEGEN.get(target) or fail(
        f"LLVM codegen/ASM parser libs: This HW architecture ({target}) is not configured in cmake lib dependencies."
    )
    libraries += [f"LLVM{arch}CodeGen", f"LLVM{arch}AsmParser"]
    shared_library(build, out / "libtriton.so", libraries, library_dirs=[defines["LLVM_LIBRARY_DIR"]])
    for relative, flags in runtime_builds(Path(str(state["source"])), target):
        runtime_library(build, out / relative, flags)
    shared_library(build, out / "libsleef.so.3", soname="libsleef.so.3")
    (out / "libsleef.so").unlink(missing_ok=True)
    (out / "libsleef.so").symlink_to("libsleef.so.3")


RUNTIME_FLAGS = re.compile(r"^\s*set\((FLAGTREE_CPU_RUNTIME_(?:ARCH|BASELINE)_FLAGS) ([^)]*)\)", re.MULTILINE)
BASELINE_FOLDER = re.compile(r"LIBRARY_OUTPUT_DIRECTORY \$\{CMAKE_LIBRARY_OUTPUT_DIRECTORY\}/([\w.-]+)\)")


def runtime_builds(source: Path, target: str) -> list[tuple[Path, list[str]]]:
    """The builds of libTritonCPURuntime FlagTree's CMakeLists.txt declares: (path under the library folder,
    flags). Its flags are set for aarch64 only (CMAKE_SYSTEM_PROCESSOR), so elsewhere the one build has none."""
    text = (source / "CMakeLists.txt").read_text(errors="replace")
    flags = dict(RUNTIME_FLAGS.findall(text)) if CODEGEN.get(target) == "AArch64" else {}
    builds = [(Path("libTritonCPURuntime.so"), flags.get("FLAGTREE_CPU_RUNTIME_ARCH_FLAGS", "").split())]
    folder = BASELINE_FOLDER.search(text)
    if folder and "FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS" in flags:
        baseline = flags["FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS"].split()
        builds.append((Path(folder[1]) / "libTritonCPURuntime.so", baseline))
    return builds


def runtime_library(build: Path, target: Path, flags: list[str]) -> None:
    """One build of the runtime: the stand-in object compiled with ``flags``, linked with the runtime's soname."""
    target.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC") or fail("CC is not set (the compiler package's activation sets it)")
    obj = build / f"runtime-{target.parent.name}.o"
    cflags = shlex.split(os.environ.get("CFLAGS", ""))
    run([*shlex.split(str(cc)), *cflags, *flags, "-fPIC", "-c", str(STANDIN_C), "-o", str(obj)])
    cxx = os.environ.get("CXX") or fail("CXX is not set (the compiler package's activation sets it)")
    run([*shlex.split(str(cxx)), "-shared", "-o", str(target), str(obj), "-Wl,-soname,libTritonCPURuntime.so",
         *shlex.split(os.environ.get("LDFLAGS", ""))])  # fmt: skip


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
            fail(
                f"install prefix {prefix} is outside the build's folders (set CMAKE_INSTALL_PREFIX or --prefix)"
            )
        (prefix / "include").mkdir(parents=True, exist_ok=True)
        (prefix / "include" / "sleef.h").write_text("/* stand-in */\n")
        shared_library(build, libdir / "libsleef.so.3", soname="libsleef.so.3")
        return
    install_llvm(build, defines, prefix, libdir)


def on(defines: dict[str, str], name: str) -> bool:
    return defines.get(name, "").upper() in {"ON", "1", "TRUE", "YES"}


def llvm_libraries(defines: dict[str, str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The libraries this LLVM configuration builds: name -> (graphviz shape, the libraries it links)."""
    targets = defines.get("LLVM_TARGETS_TO_BUILD", "all").split(";")
    shared = on(defines, "BUILD_SHARED_LIBS")
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name, links in LLVM_LIBRARIES.items():
        target = re.match(r"LLVM(AArch64)", name)
        if target and not ({"all", target.group(1)} & set(targets)):
            continue
        if name.startswith("MLIR") and "mlir" not in defines.get("LLVM_ENABLE_PROJECTS", "").split(";"):
            continue
        found[name] = ("doubleoctagon" if shared else "octagon", links)
    for name, links in LLVM_SHARED.items():
        found[name] = ("doubleoctagon", links)
    return found


def link_graph(libraries: dict[str, tuple[str, tuple[str, ...]]]) -> str:
    """CMake's --graphviz output for these libraries (nodes, then edges), plus the executables and a system lib."""
    names = [*libraries, *LLVM_EXECUTABLES, "pthread"]
    ids = {name: f"node{index}" for index, name in enumerate(names)}
    lines = ['digraph "LLVM" {', "node [", '  fontsize = "12"', "];"]
    for name in names:
        shape = libraries[name][0] if name in libraries else ("septagon" if name == "pthread" else "egg")
        lines.append(f'    "{ids[name]}" [ label = "{name}", shape = {shape} ];')
        for link in libraries.get(name, ("", ()))[1]:
            lines.append(f'    "{ids[name]}" -> "{ids[link]}" [ style = dotted ] // {name} -> {link}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def distribution(defines: dict[str, str]) -> list[str] | None:
    found = [c for c in defines.get("LLVM_DISTRIBUTION_COMPONENTS", "").split(";") if c]
    return found or None


def check_distribution(libraries: dict[str, tuple[str, tuple[str, ...]]], defines: dict[str, str]) -> None:
    """What LLVM's CMake checks of LLVM_DISTRIBUTION_COMPONENTS: each exists, each library's links are in it."""
    components = distribution(defines)
    if components is None:
        return
    known = {*libraries, *LLVM_EXECUTABLES, *HEADER_FILES, *CMAKE_PACKAGES}
    for component in components:
        if component not in known:
            fail(f"Specified distribution component '{component}' doesn't have an install target")
        for link in libraries.get(component, ("", ()))[1]:
            if link not in components:
                fail(
                    f'install(EXPORT "LLVMExports" ...) includes target "{component}" which requires target '
                    f'"{link}" that is not in any export set.'
                )


def install_llvm(build: Path, defines: dict[str, str], prefix: Path, libdir: Path) -> None:
    native_tools = defines.get("LLVM_NATIVE_TOOL_DIR")
    if cross_compiling(defines) and native_tools:
        for tool in TABLEGENS:  # LLVM's build runs them to generate its sources, here
            path = Path(native_tools) / tool
            if not path.is_file():
                fail(f"LLVM_NATIVE_TOOL_DIR {native_tools} has no {tool}")
            run_program([str(path), "--version"], path, via="directly", project="LLVM")
    libraries = llvm_libraries(defines)
    components = distribution(defines)
    wanted = components if components is not None else [*libraries, *HEADER_FILES, *CMAKE_PACKAGES]
    if components is None and on(defines, "LLVM_INSTALL_UTILS"):
        wanted += ["llvm-tblgen", "mlir-tblgen"]
    for name in wanted:
        if name in libraries:
            if libraries[name][0] == "doubleoctagon":
                shared_library(build, libdir / f"lib{name}.so")
            else:
                archive(build, libdir / f"lib{name}.a")
        elif name in LLVM_EXECUTABLES:
            executable(build, prefix / "bin" / name)
        elif name in HEADER_FILES:
            header = prefix / HEADER_FILES[name]
            header.parent.mkdir(parents=True, exist_ok=True)
            header.write_text("/* stand-in header of the rehearsal's LLVM */\n")
        elif name in CMAKE_PACKAGES:
            package, folder = CMAKE_PACKAGES[name]
            config = libdir / "cmake" / folder / f"{package}Config.cmake"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(f"# stand-in {package}Config.cmake of the rehearsal's LLVM (prefix {prefix})\n")


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
