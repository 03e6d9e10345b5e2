"""What repacking costs on a real-sized dependency: a generated package of about 200 MB (issue 41 item 1).

    python benchmarks/repack.py [--size-mb 200] [--keep DIR]

The package is a ``.conda`` whose payload is like a folder of static libraries (:func:`library_like`: symbol
tables, repeated code and random bytes, which zstd packs about 4:1 at level 3): ``--size-mb`` files of 4 MiB,
listed in its ``info/paths.json``. Then, each as a child process whose own time and peak memory
(``VmHWM``, ``tests/_peak_memory.py``) are measured:

- ``rattler-install``: py-rattler installs the original itself, unchecked (what `channel install` cost before
  the toolkit read packages at all);
- ``channel-install-cold``: ``flagtree-feedstock channel install`` of it, the copy not yet in the cache: the check
  before the solve, the solve, the repack (read, write at zstd level 1, check the copy), the install;
- ``channel-install-warm``: the same again, the copy taken from the cache (the original hashed);
- ``repack-alone``: :func:`flagtree_feedstock.channel.repack.repacked` alone, into an empty cache.

docs/testing.md has the table of one run here.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import zstandard  # the tests' generator's compressor (benchmarks are not src/)

from _hostile_packages import INDEX, data, header  # type: ignore[import-not-found]
from _peak_memory import run_measured  # type: ignore[import-not-found]

FILE_BYTES = 4 << 20
NAME = "bigdep"
STEM = f"{NAME}-1-0"


def library_like(rng: random.Random, size: int) -> bytes:
    """``size`` bytes shaped like a static library: blocks of symbol names, of a few repeated code patterns,
    and of random bytes (relocations, constants)."""
    words = [f"_ZN4llvm{rng.randrange(1 << 20):x}{w}Ev".encode() for w in ("Pass", "Value", "Type", "Inst")]
    patterns = [rng.randbytes(64) for _ in range(16)]
    out = bytearray()
    while len(out) < size:
        kind = rng.random()
        if kind < 0.35:
            out += b"\0".join(rng.choice(words) for _ in range(8)) + b"\0"
        elif kind < 0.75:
            out += rng.choice(patterns) * 2
        else:
            out += rng.randbytes(96)
    return bytes(out[:size])


def tar_of(members: list[tuple[str, bytes]]) -> Iterator[bytes]:
    for name, content in members:
        yield header(name, size=len(content))
        yield data(content)
    yield bytes(1024)


def zstd_of(chunks: Iterator[bytes]) -> bytes:
    params = zstandard.ZstdCompressionParameters.from_level(3, write_content_size=0, threads=-1)
    out = io.BytesIO()
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(out, closefd=False) as writer:
        for chunk in chunks:
            writer.write(chunk)
    return out.getvalue()


def make_package(folder: Path, size_mb: int) -> Path:
    """A channel folder ``folder`` holding ``noarch/bigdep-1-0.conda`` of about ``size_mb`` MB, indexed."""
    from rattler.index import index_fs  # noqa: PLC0415

    rng = random.Random(41)
    payload = [(f"lib/libpart{number:04d}.a", library_like(rng, FILE_BYTES)) for number in range(size_mb)]
    listed = [
        {"_path": name, "path_type": "hardlink", "sha256": hashlib.sha256(content).hexdigest(), "size_in_bytes": len(content)}
        for name, content in payload
    ]  # fmt: skip
    info = [
        ("info/index.json", json.dumps(INDEX | {"name": NAME}).encode()),
        ("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    package = folder / "noarch" / f"{STEM}.conda"
    package.parent.mkdir(parents=True)
    with zipfile.ZipFile(package, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        archive.writestr(f"info-{STEM}.tar.zst", zstd_of(tar_of(info)))
        archive.writestr(f"pkg-{STEM}.tar.zst", zstd_of(tar_of(payload)))
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    return package


RATTLER_INSTALL = """
import asyncio, sys, rattler
records = asyncio.run(rattler.solve([rattler.Channel(sys.argv[1])], ["bigdep"], platforms=["noarch"]))
asyncio.run(rattler.install(records, sys.argv[2], cache_dir=sys.argv[3], execute_link_scripts=False, show_progress=False))
"""
REPACK_ALONE = """
import sys
from pathlib import Path
from flagtree_feedstock.channel.repack import repacked
print(repacked(Path(sys.argv[1]), Path(sys.argv[2])).size)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200, help="the package's size, about [200]")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="repack-benchmark-"))
    try:
        channel = work / "channel"
        package = channel / "noarch" / f"{STEM}.conda"
        if not package.is_file():  # made once: a kept folder is measured again as it is
            make_package(channel, args.size_mb)
        print(
            f"package: {package.stat().st_size / 1e6:.0f} MB, payload {args.size_mb * FILE_BYTES / 1e6:.0f} MB"
        )
        env = {"XDG_CACHE_HOME": str(work / "xdg"), "RATTLER_CACHE_DIR": str(work / "rattler-cache")}
        python = "python"  # this environment's, as run_measured finds a console script
        runs = {
            "rattler-install": [python, "-c", RATTLER_INSTALL, channel.as_uri(), str(work / "p0"), str(work / "rc0")],
            "channel-install-cold": ["flagtree-feedstock", "channel", "install", str(channel), NAME, "--prefix", str(work / "p1")],
            "channel-install-warm": ["flagtree-feedstock", "channel", "install", str(channel), NAME, "--prefix", str(work / "p2")],
            "repack-alone": [python, "-c", REPACK_ALONE, str(package), str(work / "cache-alone")],
        }  # fmt: skip
        print(f"{'run':<24}{'seconds':>10}{'peak MB':>10}")
        for name, argv in runs.items():
            measured = run_measured(argv, work / "scratch" / name, env)
            if measured.returncode != 0:
                print(measured.stderr, file=sys.stderr)
                return 1
            print(f"{name:<24}{measured.seconds:>10.1f}{measured.peak_kib / 1024:>10.0f}")
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
