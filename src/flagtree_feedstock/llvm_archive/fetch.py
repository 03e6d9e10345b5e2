"""An archive to build from: a URL downloaded into the cache, or an unpacked folder packed reproducibly."""

from __future__ import annotations

import logging
import math
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from flagtree_feedstock._archive.compressed import gzip_writer
from flagtree_feedstock._archive.tar_stream import Member
from flagtree_feedstock._archive.tar_write import TarWriter
from flagtree_feedstock._http import HttpError, Timeouts, open_request, read, shown_url, status_text
from flagtree_feedstock.errors import ConfigurationError, SourceFetchError

from .cache import CHUNK, file_sha256, human_size, spool
from .inspection import TOP_EXAMPLE, TOP_FOLDER

LOGGER = logging.getLogger(__name__)


# What setup.py writes into an unpacked archive (the URL it came from): not part of Triton's archive.
SETUP_PY_MARKER = "version.txt"

# --llvm-archive-max-size's default: a download stops beyond it. Triton's LLVM archives are about 1 GB:
# llvm-10dc3a8e-ubuntu-x64.tar.gz is 950 MB (triton-lang/triton#5190), b74e588e's almalinux one about 1 GB
# (#5096), and the largest on record, a 2026 llvm-head build before its tools were trimmed, 1.6 GB (#10480).
# 4 GiB is two and a half times that.
DEFAULT_MAX_SIZE = 4 << 30
# A server that takes longer than this to connect, or to send the next bytes, is given up on.
TIMEOUTS = Timeouts(connect=30, read=60)
# --llvm-archive-timeout's default, the most the whole download may take: 4 GiB (the cap) in two hours is about
# 600 kB/s; a server that trickles its answer (a byte a second keeps every read within its 60 s) is cut off.
DEFAULT_TIMEOUT = 7200.0
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(value: str) -> int:
    """``--llvm-archive-max-size``: bytes, or a number with K, M, G or T (powers of 1024: ``4G``, ``500MiB``)."""
    found = _SIZE.fullmatch(value.strip())
    size = int(float(found["number"]) * _UNITS[found["unit"].upper()]) if found else 0
    if size <= 0:
        raise ConfigurationError(
            f"--llvm-archive-max-size {value!r} is not a size", fix="give bytes or e.g. 4G, 1500M"
        )
    return size


def parse_timeout(value: str) -> float:
    """``--llvm-archive-timeout``: seconds, a number above zero."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigurationError(
            f"--llvm-archive-timeout {value!r} is not a number of seconds above 0",
            fix=f"give seconds, e.g. {DEFAULT_TIMEOUT:g}",
        )
    return seconds


def download(
    url: str, sha256: str, cache: Path, *, max_size: int = DEFAULT_MAX_SIZE, timeout: float = DEFAULT_TIMEOUT
) -> Path:
    """``url`` in the cache (downloaded once), its sha256 checked; a failure leaves nothing behind.

    At most ``max_size`` bytes are taken: a larger answer is refused as soon as it says so or passes it.
    The whole download, connecting included, takes at most ``timeout`` seconds; each wait on the server
    at most :data:`TIMEOUTS`.
    """
    try:
        path = read(url).path  # as the download reads it: the WHATWG way (_url_parsing.py)
    except HttpError as exc:
        raise ConfigurationError(f"--llvm-archive {exc}", fix=exc.fix) from None
    name = f"{sha256[:16]}-{Path(path).name or 'llvm.tar.gz'}"
    cached = cache / name
    if cached.is_file() and file_sha256(cached) == sha256:
        return cached
    shown = shown_url(url)
    LOGGER.info("downloading %s", shown)
    too_large = SourceFetchError(
        f"--llvm-archive {shown} is larger than {human_size(max_size)} (--llvm-archive-max-size): not downloaded "
        "further, nothing kept",
        fix="check the URL; if that file is right, raise --llvm-archive-max-size",
    )
    try:
        timeouts = Timeouts(connect=TIMEOUTS.connect, read=TIMEOUTS.read, total=timeout)
        with open_request("GET", url, timeouts=timeouts) as answer:
            if answer.status != 200:
                raise SourceFetchError(
                    f"--llvm-archive {shown} could not be downloaded: the server answered "
                    f"{status_text(answer.status)}",
                    fix="check the URL, or download the file yourself and pass its path",
                )
            body = answer.bounded_chunks(max_size, too_large)
            with spool(cache, lambda digest: name if digest == sha256 else f".mismatch-{name}") as out:
                for chunk in body:
                    out.writer.write(chunk)
    except HttpError as exc:
        raise SourceFetchError(
            f"--llvm-archive {shown} could not be downloaded: {exc}",
            fix="on a slow link, raise --llvm-archive-timeout; or download the file yourself and pass its path"
            if exc.timed_out
            else f"{exc.fix}; or download the file yourself and pass its path",
        ) from None
    if out.sha256 != sha256:
        assert out.path is not None
        out.path.unlink()
        raise SourceFetchError(
            f"--llvm-archive {shown} downloaded with sha256 {out.sha256}, not {sha256} (--llvm-archive-sha256)",
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
    entries = list(_walk(folder))
    for path in entries:
        kind = _special(path)
        if kind is not None:
            raise ConfigurationError(
                f"--llvm-archive {folder}: {path} is {kind}, not a file an LLVM install holds",
                fix="remove it from the folder (or pass a copy without it)",
            )
    LOGGER.info("packing %s into %s", folder, cache)
    with (
        spool(cache, lambda digest: f"{folder.name}-{digest[:16]}.tar.gz") as raw,
        gzip_writer(raw.writer) as packed,
    ):
        tar = TarWriter(packed)
        tar.add(_entry(folder, folder.name))
        for path in entries:
            if path.parent == folder and path.name == SETUP_PY_MARKER:
                continue
            member = _entry(path, f"{folder.name}/{path.relative_to(folder)}")
            tar.add(member, _pieces(path) if member.kind == "file" else ())
        tar.close()
    assert raw.path is not None
    return raw.path


def _entry(path: Path, name: str) -> Member:
    """``path`` as a tar member named ``name``: owner and time zeroed, a symlink as a symlink, a hard link's
    content as a file of its own."""
    status = path.lstat()
    mode = stat.S_IMODE(status.st_mode)
    if stat.S_ISLNK(status.st_mode):
        return Member(name=name, kind="symlink", size=0, target=str(path.readlink()), mode=mode)
    if stat.S_ISDIR(status.st_mode):
        return Member(name=name, kind="dir", size=0, target="", mode=mode)
    return Member(name=name, kind="file", size=status.st_size, target="", mode=mode)


def _pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while piece := handle.read(CHUNK):
            yield piece


def _special(path: Path) -> str | None:
    """What ``path`` is when it is neither a file, a folder nor a symlink: a socket, a FIFO, a device."""
    mode = path.lstat().st_mode
    for test, kind in (
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return None


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder`` in a fixed order; symlinked folders are entries, not descended into."""
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)
