"""An archive to build from: a URL downloaded into the cache, or an unpacked folder packed reproducibly."""

from __future__ import annotations

import gzip
import logging
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from flagtree_feedstock.errors import ConfigurationError, SourceFetchError

from .cache import CHUNK, file_sha256, spool
from .inspection import TOP_EXAMPLE, TOP_FOLDER

LOGGER = logging.getLogger(__name__)


# What setup.py writes into an unpacked archive (the URL it came from): not part of Triton's archive.
SETUP_PY_MARKER = "version.txt"


def download(url: str, sha256: str, cache: Path) -> Path:
    """``url`` in the cache (downloaded once), its sha256 checked; a failure leaves nothing behind."""
    name = f"{sha256[:16]}-{Path(urllib.parse.urlparse(url).path).name or 'llvm.tar.gz'}"
    cached = cache / name
    if cached.is_file() and file_sha256(cached) == sha256:
        return cached
    LOGGER.info("downloading %s", url)
    try:
        with (
            urllib.request.urlopen(url, timeout=60) as response,
            spool(cache, lambda digest: name if digest == sha256 else f".mismatch-{name}") as out,
        ):
            shutil.copyfileobj(response, out.writer, CHUNK)
    except (urllib.error.URLError, OSError) as exc:
        raise SourceFetchError(
            f"--llvm-archive {url} could not be downloaded ({exc})",
            fix="check the URL and the network, or download the file yourself and pass its path",
        ) from None
    if out.sha256 != sha256:
        assert out.path is not None
        out.path.unlink()
        raise SourceFetchError(
            f"--llvm-archive {url} downloaded with sha256 {out.sha256}, not {sha256} (--llvm-archive-sha256)",
            fix="check --llvm-archive-sha256 against a copy you trust; the download was removed",
        )
    return cached


def pack_folder(folder: Path, cache: Path) -> Path:
    """An unpacked archive folder as a reproducible .tar.gz in ``cache``: the same tree, the same sha256.

    The folder (a symlink such as setup.py's ``llvm-ubuntu-arm64`` is followed) becomes the archive's top
    folder, so it must be named like Triton's. Entries are sorted, owners and times zeroed, symlinks kept as
    symlinks, setup.py's version.txt left out; gzip without a name or time.
    """
    folder = folder.resolve()
    if TOP_FOLDER.fullmatch(folder.name) is None:
        raise ConfigurationError(
            f"--llvm-archive {folder} is not named like Triton's LLVM archive folder ({TOP_EXAMPLE})",
            fix="pass the folder setup.py or upstream's guide unpacked "
            "(~/.triton/llvm/llvm-<commit8>-ubuntu-arm64)",
        )
    LOGGER.info("packing %s into %s", folder, cache)

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with (
        spool(cache, lambda digest: f"{folder.name}-{digest[:16]}.tar.gz") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw.writer, mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        tar.add(folder, arcname=folder.name, recursive=False, filter=reset)
        for path in _walk(folder):
            if path.parent == folder and path.name == SETUP_PY_MARKER:
                continue
            info = reset(tar.gettarinfo(path, arcname=f"{folder.name}/{path.relative_to(folder)}"))
            if info.islnk():  # a hard link: its content, as a file of its own
                info.type, info.linkname, info.size = tarfile.REGTYPE, "", path.stat().st_size
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    assert raw.path is not None
    return raw.path


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder`` in a fixed order; symlinked folders are entries, not descended into."""
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)
