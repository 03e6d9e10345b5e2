"""What FlagTree's CMake (and flagtree-cpu's) links, read from the files: the LLVM/MLIR libraries and the plain
system libraries of the cpu build.

Both lists are compared with what the recipe provides: ``recipe/llvm_distribution.py`` (the LLVM libraries
flagtree-llvm installs) and the host requirements of flagtree-cpu (a plain ``-lz`` needs ``zlib``).
``flagtree-feedstock bump`` runs the comparison on a new FlagTree commit; tests/test_llvm_distribution.py and
tests/test_recipe_dependencies.py on ``FLAGTREE_SRC``. The reading is text matching on CMake calls, not CMake
itself: a library named through a variable set elsewhere than a ``set(*_LIBS ...)`` would be missed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

# LLVM and MLIR libraries FlagTree's cpu build can name: LLVM<Component>, MLIR<Component>.
_LIBRARY = re.compile(r"(?:LLVM|MLIR)[A-Za-z0-9]+")
_COMMAND = re.compile(r"(\w+)\s*\(([^()]*)\)")
# Commands whose arguments name what a target links or waits for (DEPENDS, LINK_LIBS, PUBLIC, ...).
_LINKING = {"add_triton_library", "add_triton_plugin", "add_triton_object", "target_link_libraries"}
# Commands whose first argument is a target FlagTree defines itself (LLVMIRIncGen is one of them).
_DEFINING = {"add_triton_library", "add_triton_plugin", "add_public_tablegen_target", "add_library"}
# The folders of FlagTree the cpu build adds (root CMakeLists.txt, at 54d33a53): include/ (tablegen targets
# such as LLVMIRIncGen) and lib/ whole, the f2reduce, proton dialect, TLE and tle_arm64 plugins, and the
# host_cpu_llvm plugin.
FLAGTREE_DIRS = (
    "include",
    "lib",
    "third_party/f2reduce",
    "third_party/proton/dialect",
    "third_party/tle",
    "third_party/tle_arm64",
    "third_party/cpu/python",
)
# flagtree-cpu's folders that link_flagtree_cpu.sh puts into FlagTree's tree and whose CMake the build reads.
FLAGTREE_CPU_DIRS = ("third_party/cpu", "lib/Dialect/TritonCPU")

# What flagtree-cpu links, by commit, for a check without its source. 19cede7e read through the public file
# index (kevinzs2048/flagtree-cpu; it cannot be cloned here). third_party/cpu/lib/TritonCPUTransforms/
# CMakeLists.txt is not stored at 19cede7e; none of its 4 stored versions links an LLVM or MLIR library.
FLAGTREE_CPU_RECORDS: dict[str, dict[str, frozenset[str]]] = {
    "19cede7e753ca6eed75c15f8ae782bf41eb00c3d": {
        # TritonCPU plugin: target_link_libraries(TritonCPU PUBLIC ...); TritonCPURuntime: LLVMSupport
        "third_party/cpu/CMakeLists.txt": frozenset(
            {
                "MLIRVectorToSCF",
                "MLIRAffineToStandard",
                "MLIRMathToLibm",
                "MLIRAMXToLLVMIRTranslation",
                "MLIRMemRefTransforms",
                "MLIRReconcileUnrealizedCasts",
                "LLVMSupport",
            }
        ),
        "third_party/cpu/lib/TritonCPUToLLVM/CMakeLists.txt": frozenset({"MLIRVectorToLLVMPass"}),
        # DEPENDS MLIRDialectUtils: a target that must exist in the installed MLIR
        "third_party/cpu/lib/TritonToTritonCPU/CMakeLists.txt": frozenset(
            {"MLIRVectorDialect", "MLIRDialectUtils"}
        ),
        "third_party/cpu/lib/Analysis/CMakeLists.txt": frozenset({"MLIRAnalysis"}),
        "lib/Dialect/TritonCPU/IR/CMakeLists.txt": frozenset(),
    }
}

# Backends a FLAGTREE_BACKEND=cpu build does not add (setup.py passes TRITON_CODEGEN_BACKENDS=cpu; the root
# CMakeLists.txt adds third_party/<backend> for those only), and the unit-test helpers (TRITON_BUILD_UT=OFF).
NOT_BUILT = (
    *(f"third_party/{b}" for b in ("amd", "nvidia", "aipu", "enflame", "iluvatar", "mthreads")),
    "third_party/tsingmicro",
    "third_party/xpu",
    "unittest",
    "cmake/AddTritonUnitTest.cmake",
)
SYSROOT = "the sysroot (stdlib('c'))"
# Where each plain library name comes from at link time: a host requirement, or the target's sysroot.
# A name missing here fails the check until someone says where it comes from.
PROVIDERS = {
    "z": "zlib",  # conda-forge's zlib has libz.so; its run export libzlib only libz.so.1
    **dict.fromkeys(("c", "m", "dl", "pthread", "rt", "util"), SYSROOT),  # glibc 2.17
}
_CALL = re.compile(r"\b(target_link_libraries|add_\w+)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", re.DOTALL)


class ScanError(Exception):
    """FlagTree's CMake no longer has the shape the scan reads."""


def is_cmake_file(path: str) -> bool:
    """A file the scans read: a CMakeLists.txt or a *.cmake module."""
    return path.rsplit("/", 1)[-1] == "CMakeLists.txt" or path.endswith(".cmake")


def is_built(path: str) -> bool:
    """False for a path under a folder the cpu build never adds (:data:`NOT_BUILT`)."""
    return not any(path == skip or path.startswith(f"{skip}/") for skip in NOT_BUILT)


def _uncommented(path: Path) -> str:
    return re.sub(r"#[^\n]*", "", path.read_text(errors="replace"))


def _names(words: str) -> set[str]:
    return {word for word in words.split() if _LIBRARY.fullmatch(word)}


def cmake_links(root: Path, folders: Iterable[str]) -> set[str]:
    """LLVM/MLIR names the CMake files under ``folders`` link or depend on, less the targets they define."""
    linked: set[str] = set()
    defined: set[str] = set()
    for folder in folders:
        for path in sorted((root / folder).rglob("CMakeLists.txt")):
            if any(part.is_symlink() for part in [path, *path.parents] if part != root):
                continue  # a link into flagtree-cpu, read on its own
            for command, arguments in _COMMAND.findall(_uncommented(path)):
                if command in _DEFINING and arguments.split():
                    defined.add(arguments.split()[0])
                if command in _LINKING or (
                    command == "set" and re.match(r"\w*(LIBS|LIBRARIES)\b", arguments.strip())
                ):
                    linked |= _names(arguments)
    return linked - defined


def flagtree_root_links(root: Path) -> set[str]:
    """CMakeLists.txt: TRITON_LIBRARIES of the cpu branch and the aarch64 pair of the processor block."""
    text = _uncommented(root / "CMakeLists.txt") if (root / "CMakeLists.txt").is_file() else ""
    cpu = re.search(r'elseif\(FLAGTREE_BACKEND STREQUAL "cpu"\)\s*set\(TRITON_LIBRARIES([^)]*)\)', text)
    arm = re.search(
        r'if\(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64".*?list\(APPEND TRITON_LIBRARIES([^)]*)\)',
        text,
        re.DOTALL,
    )
    if not (cpu and arm):
        raise ScanError("FlagTree's CMakeLists.txt no longer has the cpu branch or the aarch64 block")
    return _names(cpu[1] + arm[1])


def expected_llvm_links(flagtree: Path, flagtree_cpu: Path | Mapping[str, frozenset[str]]) -> set[str]:
    """Every LLVM/MLIR library the cpu build links: FlagTree's CMake plus flagtree-cpu's (a tree or a record)."""
    cpu = (
        cmake_links(flagtree_cpu, FLAGTREE_CPU_DIRS)
        if isinstance(flagtree_cpu, Path)
        else set().union(*flagtree_cpu.values())
    )
    return flagtree_root_links(flagtree) | cmake_links(flagtree, FLAGTREE_DIRS) | cpu


def llvm_list_problems(listed: list[str], expected: set[str]) -> list[str]:
    """What is wrong with llvm_distribution.py's list against ``expected``, one sentence each."""
    problems = []
    if len(listed) != len(set(listed)):
        problems.append("a library is listed twice in recipe/llvm_distribution.py")
    unlisted, stale = sorted(expected - set(listed)), sorted(set(listed) - expected)
    if unlisted:
        problems.append(f"FlagTree links {', '.join(unlisted)}: add them to recipe/llvm_distribution.py")
    if stale:
        problems.append(
            f"FlagTree no longer links {', '.join(stale)}: drop them from recipe/llvm_distribution.py"
        )
    return problems


def cmake_files(root: Path) -> list[Path]:
    """The CMake files of ``root`` the cpu build reads (none under :data:`NOT_BUILT`)."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and is_cmake_file(path.name) and is_built(path.relative_to(root).as_posix())
    )


def plain_libraries(roots: Iterable[Path]) -> dict[str, list[str]]:
    """Every plain library name (`z`, `-lz`) linked by the CMake files under ``roots``, with where.

    A plain name is a lowercase word in target_link_libraries(...) or after LINK_LIBS that no add_*() call
    of the same trees defines as a target (`triton`, `sleef`, ...): the linker looks it up as lib<name>.so.
    """
    defined: set[str] = set()
    linked: dict[str, list[str]] = {}
    for root in roots:
        for path in cmake_files(root):
            text = _uncommented(path)
            relative = path.relative_to(root).as_posix()
            for call in _CALL.finditer(text):
                name, args = call[1], call[2].split()
                if name.startswith("add_") and args:
                    defined.add(args[0])
                elif name == "target_link_libraries":
                    for token in args[1:]:
                        linked.setdefault(token, []).append(relative)
                if "LINK_LIBS" in args:
                    for token in args[args.index("LINK_LIBS") + 1 :]:
                        linked.setdefault(token, []).append(relative)
    plain = {}
    for token, where in linked.items():
        library = token.removeprefix("-l")
        if (token.startswith("-l") or re.fullmatch(r"[a-z][a-z0-9_+.]*", token)) and library not in defined:
            plain[library] = where
    return plain


def unprovided(linked: Mapping[str, list[str]], host: Iterable[str], *, sysroot: bool) -> list[str]:
    """The libraries of ``linked`` nothing provides: no host requirement of theirs, or no sysroot."""
    names = set(host)
    problems = []
    for library, where in sorted(linked.items()):
        provider = PROVIDERS.get(library)
        if provider is None:
            problems.append(
                f"{where[0]} links lib{library}: say in cmake_scan.PROVIDERS which package has it"
            )
        elif provider == SYSROOT and not sysroot:
            problems.append(f"{where[0]} links lib{library}: the build requirements lack stdlib('c')")
        elif provider != SYSROOT and provider not in names:
            problems.append(f"{where[0]} links lib{library}: add {provider} to flagtree-cpu's host")
    return problems
