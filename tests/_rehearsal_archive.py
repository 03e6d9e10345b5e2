"""The rehearsal's stand-in for Triton's prebuilt LLVM archive: the stand-in LLVM, laid out as Triton's is.

Triton's archive (llvm-<commit8>-ubuntu-arm64.tar.gz, upstream's install guide §1.3) is the whole `ninja install`
of LLVM, MLIR and lld for AArch64, NVPTX and AMDGPU, built on an Ubuntu runner. The stand-in takes what the
rehearsal's flagtree-llvm package holds (the stand-in cmake's install: static archives, headers, CMake
packages, the two tablegens, real aarch64 ELF files made by Debian's cross gcc) and adds what the archive has
and the package must leave out: other tools, the shared libLTO and libRemarks, lld's libraries, headers and
CMake package, MLIR's python packages, and the generated target lists of include/llvm/Config with NVPTX and
AMDGPU. Its programs need GLIBC_2.34 (Debian's cross glibc is 2.36), as programs built against any glibc from
2.34 on do. What it cannot show: the real archive's thousands of files, its CMake export files (the stand-in
cmake writes none: tests/test_llvm_archive_install.py checks the export edit against real CMake's), and
whether the real archive's LLVM links into a real libtriton.so.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import yaml
from rattler.package_streaming import extract

from flagtree_feedstock import llvm_archive

# What Triton's archive has that flagtree-llvm leaves out (llvm_archive_install.py).
LEFT_OUT = (
    "bin/llc",
    "lib/libLTO.so",
    "lib/libRemarks.so",
    "lib/liblldCommon.a",
    "lib/cmake/lld/LLDConfig.cmake",
    "include/lld/Common/Driver.h",
    "python_packages/mlir_core/mlir/__init__.py",
)
TARGET_LISTS = {"Targets.def": "LLVM_TARGET", "AsmPrinters.def": "LLVM_ASM_PRINTER"}
# The glibc the stand-in archive's programs need (Debian's cross gcc links __libc_start_main@GLIBC_2.34): a
# variant building from it raises c_stdlib_version to it.
ARCHIVE_GLIBC = "2.34"
ROOT = Path(__file__).resolve().parents[1]


def archive_top(llvm_commit: str) -> str:
    """The archive's top folder, as Triton names it."""
    return f"llvm-{llvm_commit[:8]}-ubuntu-arm64"


def target_list(kind: str, targets: tuple[str, ...]) -> str:
    """A generated list as LLVM's configure writes it (llvm/include/llvm/Config/Targets.def.in)."""
    entries = "".join(f"{kind}({target}) " for target in targets)
    return f"#ifndef {kind}\n#  error Please define the macro {kind}(TargetName)\n#endif\n\n{entries}\n\n#undef {kind}\n"


def standin_archive(llvm_package: Path, destination: Path, *, top: str, program: Path | None = None) -> Path:
    """``destination/<top>.tar.gz`` made of the stand-in flagtree-llvm package; ``program`` replaces every
    tool of bin/ when given (an archive whose programs need another glibc)."""
    unpacked = destination / "package"
    extract(llvm_package, unpacked)
    tree = destination / top
    shutil.copytree(unpacked / "lib" / "flagtree-llvm", tree, symlinks=True)
    tool = program or tree / "bin" / "mlir-tblgen"
    for name in LEFT_OUT:
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tool if name.startswith("bin/") else tree / "bin" / "mlir-tblgen", path)
    if program is not None:
        for name in ("mlir-tblgen", "llvm-tblgen"):
            shutil.copyfile(program, tree / "bin" / name)
    for name, kind in TARGET_LISTS.items():
        config = tree / "include" / "llvm" / "Config" / name
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(target_list(kind, ("AArch64", "NVPTX", "AMDGPU")))
    archive = destination / f"{top}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=top)
    return archive


def archive_variants(archive: Path, base: Path, folder: Path) -> tuple[llvm_archive.LlvmArchive, Path]:
    """The toolkit's checks of ``archive`` (as ``--llvm-archive`` runs them), then ``folder/variants.yaml``:
    ``base``'s variants with the route's keys set and ``c_stdlib_version`` raised to the archive's glibc."""
    found = llvm_archive.from_options(
        str(archive),
        None,
        env={"XDG_CACHE_HOME": str(folder / "cache")},
        fetch=True,
        recipe_dir=ROOT / "recipe",
    )
    assert found is not None and found.inspection is not None
    assert found.inspection.glibc == f"GLIBC_{ARCHIVE_GLIBC}"
    variants = yaml.safe_load(base.read_text())
    variants |= {
        "c_stdlib_version": [ARCHIVE_GLIBC],
        "llvm_archive_url": [found.url],
        "llvm_archive_sha256": [found.sha256],
    }
    variant_file = folder / "variants.yaml"
    variant_file.write_text(yaml.safe_dump(variants, sort_keys=False))
    return found, variant_file
