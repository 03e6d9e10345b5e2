"""Install Triton's prebuilt LLVM archive as flagtree-llvm: what the from-source build installs, nothing else.

    python3 llvm_archive_install.py ARCHIVE PREFIX

ARCHIVE is the archive as the engine unpacked it (its one top folder, llvm-<commit8>-ubuntu-arm64/, stripped),
PREFIX the package's private prefix ($PREFIX/lib/flagtree-llvm). build-llvm.sh runs it when the recipe
fetched an archive (llvm_archive_url). Triton's archive is the whole `ninja install` of LLVM, MLIR and lld,
for the AArch64, NVPTX and AMDGPU targets (Triton's .github/workflows/llvm-build.yml at the commit that
pinned a66376b0, 60a6f989: its "ubuntu arm64" step). Moved into PREFIX, as build-llvm.sh's
LLVM_DISTRIBUTION_COMPONENTS install it from source:

- include/: the LLVM and MLIR headers (lld's left out);
- lib/*.a: the static libraries (all of LLVM's and MLIR's: FlagTree's CMake picks what it links);
- lib/cmake/llvm and lib/cmake/mlir: the CMake packages FlagTree's CMake finds;
- bin/llvm-tblgen and bin/mlir-tblgen: the tablegens FlagTree's build runs.

Left out: every other tool, the shared libraries (libLTO.so, libRemarks.so, MLIR's runtime libraries), lld,
MLIR's aggregate objects, python_packages/ and share/. Two edits keep what is installed consistent:

- The CMake packages' per-configuration export files (LLVMExports-release.cmake, MLIRTargets-release.cmake)
  name the file of every target installed, and CMake refuses a package whose named files are missing ("The
  imported target ... references the file ... but this file does not exist"): the entries whose files were
  left out are removed, as an install of fewer targets would have written them.
- include/llvm/Config/{Targets,AsmParsers,AsmPrinters,Disassemblers,TargetMCAs,TargetExegesis}.def list the
  targets llvm::InitializeAll*() initialise. FlagTree's python/src/llvm.cc calls those, and its cpu build
  links only AArch64's libraries (CMakeLists.txt, the FLAGTREE_BACKEND cpu branch): with NVPTX and AMDGPU in
  the lists, libtriton.so would be left with undefined LLVMInitializeNVPTX*/AMDGPU* symbols (triton issue
  #7637). They are cut to AArch64, the one target the from-source LLVM builds.

Nothing is written through a symlink: before anything moves, every folder the install walks and every file
it moves or edits must be a real one (a symlink there could point anywhere on the machine, and an edit would
rewrite that file). An edited file is written beside itself (O_NOFOLLOW, O_EXCL) and renamed over it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

TABLEGENS = ("llvm-tblgen", "mlir-tblgen")
CMAKE_PACKAGES = ("llvm", "mlir")
# Every file the install needs, checked before anything moves: FlagTree's CMake and the package tests use them.
REQUIRED = (
    *(f"bin/{tool}" for tool in TABLEGENS),
    "include/llvm/Config/Targets.def",
    "include/mlir/IR/Operation.h",
    "lib/cmake/llvm/LLVMConfig.cmake",
    "lib/cmake/mlir/MLIRConfig.cmake",
)
# The folders the install walks and writes into: each must be a real folder, not a symlink.
FOLDERS = (
    "bin",
    "include",
    "include/llvm",
    "include/llvm/Config",
    "lib",
    "lib/cmake",
    *(f"lib/cmake/{package}" for package in CMAKE_PACKAGES),
)
TARGET = "AArch64"
# The generated lists of include/llvm/Config/ (each a run of `LLVM_<KIND>(<Target>)` on one line).
TARGET_LISTS = (
    "Targets.def",
    "AsmParsers.def",
    "AsmPrinters.def",
    "Disassemblers.def",
    "TargetMCAs.def",
    "TargetExegesis.def",
)
_TARGET_ENTRY = re.compile(r"\bLLVM_[A-Z_]+\((\w+)\) ?")
# One target's entry of an export file CMake generates for a configuration, up to the next one.
_IMPORT_BLOCK = re.compile(
    r'^# Import target "[^"]+" for configuration "[^"]+"\n.*?(?=^# Import target |^# Commands beyond |\Z)',
    re.MULTILINE | re.DOTALL,
)
# The files CMake checks for a target (`_cmake_import_check_files_for_X` from CMake 3.24, before that
# `_IMPORT_CHECK_FILES_FOR_X`).
_CHECKED_FILES = re.compile(
    r"^list\(APPEND _(?:cmake_import_check_files_for|IMPORT_CHECK_FILES_FOR)_\S+ (.*)\)$", re.MULTILINE
)
_QUOTED = re.compile(r'"([^"]*)"')


class InstallError(Exception):
    """The archive is not shaped like Triton's: one line, and nothing was installed."""


def check(archive: Path) -> None:
    missing = [name for name in REQUIRED if not (archive / name).is_file()]
    if missing:
        raise InstallError(
            f"{archive} is not Triton's LLVM install tree: no {', '.join(missing)} (an archive of "
            "llvm-<commit8>-ubuntu-arm64/ holding bin/, include/ and lib/ is expected)"
        )
    edited = [f"include/llvm/Config/{name}" for name in TARGET_LISTS] + [
        str(path.relative_to(archive))
        for package in CMAKE_PACKAGES
        for path in sorted((archive / "lib" / "cmake" / package).glob("*.cmake"))
    ]
    for name in (*FOLDERS, *REQUIRED, *edited):
        if (archive / name).is_symlink():
            raise InstallError(
                f"{archive}/{name} is a symlink (to {(archive / name).readlink()}): the install writes "
                "only into real files and folders, never through a link"
            )
    if TARGET not in _targets(_read(archive / "include/llvm/Config/Targets.def")):
        raise InstallError(f"the LLVM of {archive} has no {TARGET} target (Targets.def): not an arm64 build")


def _read(path: Path) -> str:
    """A file's text; a symlink in its place is refused (O_NOFOLLOW), never followed."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise InstallError(f"{path} cannot be read without following a link ({exc.strerror})") from None
    with os.fdopen(descriptor, encoding="utf-8") as handle:
        return handle.read()


def _rewrite(path: Path, text: str) -> None:
    """Replace ``path`` by a new file holding ``text``: written beside it, never through a link, renamed over."""
    mode = path.lstat().st_mode & 0o777
    temporary = path.with_name(f".{path.name}.llvm_archive_install")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _targets(text: str) -> list[str]:
    """The targets of a generated list (its preprocessor lines, e.g. `#  error ... LLVM_TARGET(TargetName)`,
    name none)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [match[1] for line in lines for match in _TARGET_ENTRY.finditer(line)]


def keep_one_target(text: str, target: str = TARGET) -> str:
    """A generated target list (Targets.def, ...) with every entry but ``target``'s removed."""
    return "".join(
        line
        if line.lstrip().startswith("#")
        else _TARGET_ENTRY.sub(lambda m: m[0] if m[1] == target else "", line)
        for line in text.splitlines(keepends=True)
    )


def prune_exports(text: str, prefix: Path) -> tuple[str, list[str]]:
    """An export file without the targets whose files are not under ``prefix``; and the files left out."""
    dropped: list[str] = []

    def keep(block: re.Match[str]) -> str:
        files = [
            name.replace("${_IMPORT_PREFIX}", str(prefix))
            for line in _CHECKED_FILES.findall(block[0])
            for name in _QUOTED.findall(line)
        ]
        absent = [name for name in files if not Path(name).exists()]
        dropped.extend(absent)
        return "" if absent else block[0]

    return _IMPORT_BLOCK.sub(keep, text), dropped


def install(archive: Path, prefix: Path) -> None:
    check(archive)
    prefix.mkdir(parents=True, exist_ok=True)
    # Moves, not copies: the work folder and the prefix are on one file system, and the archive is large.
    shutil.move(archive / "include", prefix / "include")
    lld = prefix / "include" / "lld"
    if lld.is_symlink():
        lld.unlink()
    else:
        shutil.rmtree(lld, ignore_errors=True)
    (prefix / "lib" / "cmake").mkdir(parents=True)
    for library in sorted((archive / "lib").glob("*.a")):
        if not library.name.startswith("liblld"):
            shutil.move(library, prefix / "lib" / library.name)
    for package in CMAKE_PACKAGES:
        shutil.move(archive / "lib" / "cmake" / package, prefix / "lib" / "cmake" / package)
    (prefix / "bin").mkdir()
    for tool in TABLEGENS:
        shutil.move(archive / "bin" / tool, prefix / "bin" / tool)
    config = prefix / "include" / "llvm" / "Config"
    for name in TARGET_LISTS:
        if (config / name).is_file():
            _rewrite(config / name, keep_one_target(_read(config / name)))
    for package in CMAKE_PACKAGES:
        for exports in sorted((prefix / "lib" / "cmake" / package).glob("*.cmake")):
            text = _read(exports)
            if _CHECKED_FILES.search(text):
                pruned, dropped = prune_exports(text, prefix)
                _rewrite(exports, pruned)
                print(f"llvm_archive_install.py: {exports.name}: {len(dropped)} files left out")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: llvm_archive_install.py ARCHIVE PREFIX", file=sys.stderr)
        return 2
    try:
        install(Path(argv[0]), Path(argv[1]))
    except InstallError as exc:
        print(f"llvm_archive_install.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
