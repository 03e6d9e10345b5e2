"""How long flagtree-llvm takes from an LLVM archive (`flagtree-feedstock build --llvm-archive`), here.

    python benchmarks/llvm_archive_step.py [--work DIR] [--scale FACTOR]

It makes a stand-in of Triton's archive (llvm-<commit8>-ubuntu-arm64/) with a realistic number and size of
files, then times the two parts of the archive route:

1. the toolkit's checks before anything builds (``llvm_archive.from_options``: the sha256, one pass through
   the archive, the glibc its programs need);
2. the flagtree-llvm build step itself, by the real engine (py-rattler-build): fetching the archive through
   its ``file://`` URL with the sha256 checked, unpacking it, recipe/build-llvm.sh (its archive branch,
   llvm_archive_install.py), the package tests of recipe.yaml's flagtree-llvm output, packaging.

The counts are those of Debian's LLVM 19.1.7 + MLIR install (llvm-19-dev and libmlir-19-dev: 3,665 headers
(81 MB), 574 static libraries (635 MB), 45 CMake files; llvm-19, mlir-19-tools and llvm-19-tools: 101
programs (388 MB)), counted from `dpkg-deb -c`; a Triton archive of the same LLVM and MLIR also has lld and
MLIR's python packages, and programs linked statically (larger). The files hold stand-in bytes (a quarter
random, so they compress about as object code does); the programs are copies of one aarch64 ELF file the
cross gcc makes, padded. Not timed: solving and installing the build environment (the compilers, cmake,
ninja, python), which the from-source route needs as well. Not a test: it writes about a gigabyte.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPE_DIR = ROOT / "recipe"
TOP = "llvm-a66376b0-ubuntu-arm64"
# (files, megabytes) of Debian's LLVM 19.1.7 + MLIR install, by kind (see the docstring).
DEBIAN_LLVM_19 = {"headers": (3665, 81), "static": (574, 635), "cmake": (45, 1), "programs": (101, 388)}
# The from-source cost it replaces (benchmarks/README.md): 2,019 compile units x 15.8 CPU-seconds over
# 4 cores, the compiles alone.
FROM_SOURCE_SECONDS = 2019 * 15.8 / 4
_PROGRAM = '#include <stdio.h>\nint main(void) { return puts("stand-in") < 0; }\n'


def _bytes(size: int, seed: int) -> bytes:
    """``size`` bytes that gzip and zstd compress to about a quarter: a random quarter, the rest repeated."""
    random = os.urandom(max(size // 4, 1))
    return (random + bytes(seed % 251 for _ in range(64)) * (size // 64 + 1))[:size]


# What llvm_archive_install.py and the package tests need, counted among the files of their kind.
REQUIRED = {
    "headers": ("include/llvm/Config/Targets.def", "include/mlir/IR/Operation.h", "include/llvm/IR/Module.h"),
    "static": tuple(
        f"lib/lib{name}.a" for name in ("LLVMAArch64CodeGen", "LLVMAArch64AsmParser", "LLVMPasses", "MLIRIR")
    ),
    "cmake": ("lib/cmake/llvm/LLVMConfig.cmake", "lib/cmake/mlir/MLIRConfig.cmake"),
    "programs": ("bin/mlir-tblgen", "bin/llvm-tblgen"),
}
_FILLER = {
    "headers": "include/{0}/H{1}/h{2}.h",
    "static": "lib/libLLVMStandIn{2}.a",
    "cmake": "lib/cmake/{0}/StandIn{2}.cmake",
    "programs": "bin/tool{2}",
}


def counts(scale: float) -> dict[str, tuple[int, float]]:
    """(files, megabytes) per kind: Debian's times ``scale``, never fewer files than the install needs."""
    return {
        kind: (max(len(REQUIRED[kind]), round(n * scale)), megabytes * scale)
        for kind, (n, megabytes) in DEBIAN_LLVM_19.items()
    }


def make_tree(root: Path, scale: float, program: Path) -> Path:
    """The stand-in archive's folder: :func:`counts` files of each kind, the required ones among them."""
    tree = root / TOP
    sizes = counts(scale)
    files = {
        kind: [
            *REQUIRED[kind],
            *(
                _FILLER[kind].format("mlir" if i % 2 else "llvm", i // 50, i)
                for i in range(sizes[kind][0] - len(REQUIRED[kind]))
            ),
        ]
        for kind in DEBIAN_LLVM_19
    }
    elf = program.read_bytes()
    for kind, names in files.items():
        size = int(sizes[kind][1] * 1e6 / len(names))
        for index, name in enumerate(names):
            path = tree / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith("Targets.def"):
                path.write_text("LLVM_TARGET(AArch64) LLVM_TARGET(NVPTX) LLVM_TARGET(AMDGPU)\n")
            elif kind == "programs":
                path.write_bytes(elf + _bytes(max(size - len(elf), 0), index))
                path.chmod(0o755)
            elif kind == "static":
                path.write_bytes(_bytes(size, index))
            else:  # headers and CMake files are text
                path.write_text(_bytes(size // 2, index).hex()[:size])
    return tree


def pack(tree: Path) -> Path:
    """The archive as Triton makes it (`tar czf NAME.tar.gz NAME`)."""
    archive = tree.parent / f"{tree.name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    return archive


def _recipe(work: Path, archive_url: str, sha256: str) -> Path:
    """flagtree-llvm of recipe.yaml on the archive route, alone: its sources, script, tests; no environments."""
    real = yaml.safe_load((RECIPE_DIR / "recipe.yaml").read_text())
    llvm = next(o for o in real["outputs"] if o["package"]["name"] == "flagtree-llvm")
    recipe_dir = work / "recipe"
    recipe_dir.mkdir()
    for name in ("build-llvm.sh", "llvm_archive_install.py"):
        shutil.copy2(RECIPE_DIR / name, recipe_dir / name)
    recipe = {
        "schema_version": 1,
        "package": {"name": "flagtree-llvm", "version": "0.0.0"},
        "source": [{"url": archive_url, "sha256": sha256, "target_directory": "llvm-archive"}],
        "build": {"script": "build-llvm.sh", "dynamic_linking": {"binary_relocation": False}},
        "tests": llvm["tests"],
    }
    (recipe_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return recipe_dir / "recipe.yaml"


def time_toolkit(archive: Path, cache: Path) -> tuple[float, str]:
    from flagtree_feedstock import llvm_archive  # noqa: PLC0415

    start = time.perf_counter()
    found = llvm_archive.from_options(str(archive), None, env={"XDG_CACHE_HOME": str(cache)}, fetch=True)
    assert found is not None
    return time.perf_counter() - start, found.sha256


def time_unpack_and_install(archive: Path, work: Path) -> float:
    """The part of the engine's step that is not fetching, testing or packaging: unpack, then the install."""
    spec = importlib.util.spec_from_file_location(
        "llvm_archive_install", RECIPE_DIR / "llvm_archive_install.py"
    )
    assert spec is not None and spec.loader is not None
    install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install)
    start = time.perf_counter()
    with tarfile.open(archive) as tar:
        tar.extractall(work / "unpacked", filter="tar")
    install.install(work / "unpacked" / TOP, work / "prefix" / "lib" / "flagtree-llvm")
    return time.perf_counter() - start


def time_engine(recipe: Path, output: Path) -> float:
    import rattler_build  # noqa: PLC0415

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rattler_build.build_recipes(
            [recipe],
            output_dir=output,
            test="native",
            target_platform="linux-aarch64",
            build_platform="linux-aarch64",
            host_platform="linux-aarch64",
        )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--scale", type=float, default=1.0, help="times Debian's counts and sizes [1]")
    parser.add_argument(
        "--cc", default="aarch64-linux-gnu-gcc", help="the aarch64 compiler of the stand-in programs"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="llvm-archive-bench-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        (work / "tool.c").write_text(_PROGRAM)
        subprocess.run([args.cc, str(work / "tool.c"), "-o", str(work / "tool")], check=True)
        start = time.perf_counter()
        archive = pack(make_tree(work / "archive", args.scale, work / "tool"))
        files = sum(1 for p in (work / "archive" / TOP).rglob("*") if p.is_file())
        made = time.perf_counter() - start
        checks, sha256 = time_toolkit(archive, work / "cache")
        unpack_install = time_unpack_and_install(archive, work)
        engine = time_engine(_recipe(work, archive.resolve().as_uri(), sha256), work / "output")
        size = archive.stat().st_size / 1e6
        print(
            f"stand-in archive: {files} files, {size:.0f} MB compressed (made in {made:.0f} s, not counted)"
        )
        print(f"toolkit checks (sha256, inspection, glibc): {checks:.1f} s")
        print(
            f"flagtree-llvm step by the engine (fetch, unpack, build-llvm.sh, tests, packaging): {engine:.1f} s"
        )
        print(f"  of it, unpacking and installing (timed alone): {unpack_install:.1f} s")
        total = checks + engine
        print(
            f"archive route: {total:.0f} s; from source, the compiles alone: {FROM_SOURCE_SECONDS / 3600:.1f} h "
            f"({FROM_SOURCE_SECONDS / total:.0f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
