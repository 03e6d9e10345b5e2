"""A conda package file read whole, bounded, and checked before anything indexes, installs or uploads it.

Both formats: a ``.tar.bz2`` is one tar; a ``.conda`` is a zip of ``metadata.json``, ``info-<stem>.tar.zst``
and ``pkg-<stem>.tar.zst``, each tar read as a zstd stream whose window is at most :data:`ZSTD_WINDOW`; its
zip is read as the engine reads it, entry by entry from its first byte (:mod:`.zip_layout` refuses an entry
its central directory does not list, a name held twice, data after its end). Every tar is read by :class:`flagtree_feedstock._tar_stream.TarStream` within :data:`LIMITS` (no sparse member, no
name read two ways, no size beyond the data). Then the package is checked as the installer will use it:

- ``info/`` holds files only: a link there (symbolic or hard) is refused, since the installer would read
  the metadata through it where this check would not;
- every member and every ``info/paths.json`` entry (and ``info/files`` and ``info/has_prefix`` line) is a
  relative path without ``..``; an entry names a file or link the package holds (the installer links each from the unpacked package
  into the prefix); no member lies below a symlink of the package (the installer would write through it);
- every symlink's target, resolved through the package's own symlinks from the link's folder, stays inside
  the prefix (it may name a file of another package: ``libblas.so.3 -> libopenblas.so.0``), and is never
  absolute; so no path of the package leaves the prefix;
- every noarch python entry point (``info/link.json``) is a plain file name (the installer writes
  ``bin/<name>``);
- the ``info/`` JSON files are read only up to :data:`INFO_BYTES`, nested no deeper than Python's parser goes.

py-rattler 0.28 itself resolves a ``paths.json`` entry such as ``x/../../target`` through a symlink member
``x`` and writes outside the prefix (``tests/test_package_paths.py`` keeps the smallest such package).
"""

from __future__ import annotations

import bz2
import json
import shlex
import zipfile
import zlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO

from flagtree_feedstock._engine import require
from flagtree_feedstock._tar_stream import (
    CHUNK,
    ArchiveRefused,
    Limits,
    NotATar,
    TarStream,
    parts_of,
    resolve,
    shown,
)

from .zip_layout import check_layout

# What reading one package may cost. The largest package this feedstock builds, flagtree-llvm (an LLVM and
# MLIR install tree: static libraries, tools, headers), unpacks to a few GB in some thousands of files
# (Debian's LLVM 19 and MLIR: 4,385, benchmarks/README.md).
LIMITS = Limits(total_bytes=32 << 30, member_bytes=4 << 30, members=100_000)
# An info/ JSON file read into memory is at most this big (flagtree-llvm's paths.json is a few MB); parsed, 16 MiB
# of the smallest entries take about 300 MB (tests/test_package_bombs.py measures it).
INFO_BYTES = 16 << 20
# The largest zstd window a .conda's tars may ask for (zstd's own default limit, 2**27 bytes; conda's and
# rattler's writers use far less): a frame asking for more would be an allocation of its size.
ZSTD_WINDOW = 1 << 27
PATHS = "info/paths.json"
FILES = "info/files"
HAS_PREFIX = "info/has_prefix"
LINK = "info/link.json"


_LINK_KINDS = {"symlink": "symbolic link", "hardlink": "hard link"}


class DamagedPackage(Exception):
    """A package file that is not a whole conda package; the message says why."""


class UnsafePackage(DamagedPackage):
    """A package refused before it is used: a path leading out of the prefix, a bomb, an ambiguous archive."""


def read_package(
    path: Path, wanted: Collection[str], name: str | None = None, *, whole: bool = True
) -> dict[str, bytes]:
    """The ``info/...`` members named in ``wanted`` that the package at ``path`` holds, once the whole file was
    read, bounded, and found whole and safe (the module docstring); else raise :class:`DamagedPackage` (or
    :class:`UnsafePackage`) saying why, naming the member. ``name``, the file name it has in a channel
    (``path``'s own by default), says which of the two formats it is. ``whole=False`` stops once the members
    are found, for a package already checked whole (``upload`` checks each first).

    A link is never followed inside the archive: a conda package may hold links to files of a package it
    depends on. A ``.conda`` file's zip members must pass their CRC-32, a ``.tar.bz2`` must decompress to its
    end (bzip2 checks each block's CRC and the stream's). A file that cannot be read (``OSError`` with an
    errno) is not a damaged package: that error is raised as it is.
    """
    reading = _Reading(wanted, whole=whole)
    try:
        if (name or path.name).endswith(".conda"):
            _read_conda(path, reading)
        else:
            _read_tar_bz2(path, reading)
    except NotATar as exc:
        raise DamagedPackage(str(exc)) from None
    except ArchiveRefused as exc:
        raise UnsafePackage(str(exc)) from None
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise DamagedPackage(_first_line(exc)) from None
    except OSError as exc:
        if exc.errno is not None:  # the file could not be read: not a damaged package
            raise
        raise DamagedPackage(_first_line(exc)) from None  # bz2's "Invalid data stream", zstd's errors
    if whole:
        reading.check()
    return {key: value for key, value in reading.found.items() if key in wanted}


def load_json(member: str, content: bytes) -> object:
    """An ``info/`` JSON member, within :data:`INFO_BYTES` and the nesting Python's parser takes (its recursion
    limit, about 1000 levels; deeper is a RecursionError, refused here); else :class:`DamagedPackage`."""
    if len(content) > INFO_BYTES:
        raise UnsafePackage(
            f"its {member} has {len(content)} bytes, above the {INFO_BYTES} an info file may have"
        )
    try:
        return json.loads(content.decode())
    except UnicodeDecodeError:
        raise DamagedPackage(f"its {member} is not UTF-8") from None
    except RecursionError:
        raise UnsafePackage(f"its {member} is nested deeper than Python's JSON parser goes") from None
    except ValueError as exc:
        raise DamagedPackage(f"its {member} is not JSON: {_first_line(exc)}") from None


class _Reading:
    """What the tars of one package held: each member's kind, the symlinks, the info files read."""

    def __init__(self, wanted: Collection[str], *, whole: bool) -> None:
        self.wanted = set(wanted) | ({PATHS, FILES, HAS_PREFIX, LINK} if whole else set())
        self.whole = whole
        self.found: dict[str, bytes] = {}
        self.kinds: dict[str, str] = {}
        self.symlinks: dict[str, str] = {}

    def done(self) -> bool:
        return not self.whole and all(name in self.found for name in self.wanted)

    def take(self, tar: TarStream, *, info_only: bool | None = None) -> None:
        """Every member of ``tar``; ``info_only``: the tar must hold only ``info/`` (True) or none of it (False)."""
        for member in tar:
            if not member.name:  # the root folder itself (./)
                continue
            in_info = member.name == "info" or member.name.startswith("info/")
            if info_only is not None and in_info != info_only:
                where = "the info tar" if info_only else "the pkg tar"
                raise ArchiveRefused(f"member {shown(member.name)} does not belong in {where} of a .conda")
            if member.name in self.kinds:
                raise ArchiveRefused(f"member {shown(member.name)} is held twice")
            if in_info and member.kind in _LINK_KINDS:
                raise ArchiveRefused(
                    f"member {shown(member.name)} is a {_LINK_KINDS[member.kind]}: the installer would read "
                    "info/ through it; a package's info/ holds files only"
                )
            self.kinds[member.name] = member.kind
            if member.kind == "symlink":
                self.symlinks[member.name] = member.target
            elif member.kind == "file" and member.name in self.wanted:
                if member.size > INFO_BYTES:
                    raise ArchiveRefused(
                        f"member {shown(member.name)} declares {member.size} bytes, above the {INFO_BYTES} an "
                        "info file may have"
                    )
                self.found[member.name] = _read_all(tar, member.size)
            if self.done():
                return

    def check(self) -> None:
        """The package as the installer will link it: every path and link target stays inside the prefix.

        With no ``..`` in a name (the tar reader refuses it), a path can leave the prefix only through a
        symlink: no member may lie below one of the package's symlinks, and every symlink's target, resolved
        through the others, must stay inside.
        """
        for name in self.kinds:
            parts = parts_of(name)
            for depth in range(1, len(parts)):
                if "/".join(parts[:depth]) in self.symlinks:
                    raise UnsafePackage(
                        f"member {shown(name)} lies below the package's symlink {shown('/'.join(parts[:depth]))}: "
                        "the installer would write through it"
                    )
        for name, target in self.symlinks.items():
            if target.startswith("/"):
                raise UnsafePackage(f"member {shown(name)} is a symlink to the absolute path {shown(target)}")
            if resolve([*parts_of(name)[:-1], *target.split("/")], self.symlinks, follow_last=True) is None:
                raise UnsafePackage(
                    f"member {shown(name)} is a symlink to {shown(target)}, which leads outside the prefix"
                )
        for entry, source in self._listed():
            self._check_listed(entry, source)
        self._check_entry_points()

    def _listed(self) -> Iterator[tuple[object, str]]:
        """Every path ``info/paths.json``, ``info/files`` and ``info/has_prefix`` list, with the file that lists
        it."""
        if PATHS in self.found:
            document = load_json(PATHS, self.found[PATHS])
            paths = document.get("paths") if isinstance(document, dict) else None
            if not isinstance(paths, list):
                raise DamagedPackage(f"its {PATHS} holds no list of paths")
            for entry in paths:
                yield (entry.get("_path") if isinstance(entry, dict) else None), PATHS
        yield from ((line, FILES) for line in self._lines(FILES))
        yield from ((_prefix_path(line), HAS_PREFIX) for line in self._lines(HAS_PREFIX))

    def _lines(self, member: str) -> list[str]:
        """The lines of the text file ``member`` that are not blank (none when the package has no such file)."""
        try:
            lines = self.found.get(member, b"").decode().splitlines()
        except UnicodeDecodeError:
            raise DamagedPackage(f"its {member} is not UTF-8") from None
        return [line for line in lines if line.strip()]

    def _check_listed(self, entry: object, source: str) -> None:
        if not isinstance(entry, str) or not entry:
            raise DamagedPackage(f"its {source} lists a path that is no text: {shown(repr(entry))}")
        if len(entry.encode()) > LIMITS.name_bytes:
            raise UnsafePackage(f"its {source} lists {shown(entry)}, longer than {LIMITS.name_bytes} bytes")
        if entry.startswith("/") or ".." in entry.split("/"):
            raise UnsafePackage(f"its {source} lists {shown(entry)}: not a relative path without '..'")
        # held as a member, so it lies below none of the package's symlinks (check)
        if self.kinds.get("/".join(parts_of(entry))) not in ("file", "symlink", "hardlink"):
            raise UnsafePackage(
                f"its {source} lists {shown(entry)}, which is no file or link the package holds"
            )

    def _check_entry_points(self) -> None:
        if LINK not in self.found:
            return
        document = load_json(LINK, self.found[LINK])
        noarch = document.get("noarch") if isinstance(document, dict) else None
        points = noarch.get("entry_points", []) if isinstance(noarch, dict) else []
        for point in points if isinstance(points, list) else [points]:
            command = point.split("=", 1)[0].strip() if isinstance(point, str) else ""
            if not command or "/" in command or "\\" in command or command in (".", ".."):
                raise UnsafePackage(
                    f"its {LINK} names the entry point {shown(str(point))}, not a plain file name"
                )


def _prefix_path(line: str) -> str:
    """The path of an ``info/has_prefix`` line: ``PLACEHOLDER MODE PATH`` (each may be quoted), or a path alone."""
    try:
        words = shlex.split(line)
    except ValueError:  # an unclosed quote: the line is a path, as the installer reads it
        return line
    return words[2] if len(words) == 3 and words[1] in ("text", "binary") else line


def _read_all(tar: TarStream, size: int) -> bytes:
    chunks = []
    while chunk := tar.read(CHUNK):
        chunks.append(chunk)
    data = b"".join(chunks)
    assert len(data) == size
    return data


def _read_tar_bz2(path: Path, reading: _Reading) -> None:
    limits = LIMITS.for_file(path.stat().st_size)
    with bz2.open(path, "rb") as stream:
        tar = TarStream(stream, limits)
        reading.take(tar)
        # To the end of the bzip2 stream, whose CRC is checked there.
        while reading.whole and stream.read(CHUNK):
            tar.consumed += CHUNK
            if tar.consumed > limits.total_bytes:
                raise ArchiveRefused(
                    f"the data after its tar archive takes it above {limits.total_bytes} bytes"
                )


def _read_conda(path: Path, reading: _Reading) -> None:
    size = path.stat().st_size
    limits = LIMITS.for_file(size)
    with path.open("rb") as file, zipfile.ZipFile(file) as archive:
        check_layout(archive, file, size)  # the entries Python reads are the ones the engine reads, in order
        entries = archive.infolist()
        if sum(entry.file_size for entry in entries) > limits.total_bytes:
            raise ArchiveRefused(f"its zip members declare more than {limits.total_bytes} bytes in all")
        failed = archive.testzip() if reading.whole else None
        if failed is not None:
            raise DamagedPackage(f"{shown(failed)} fails its checksum")
        names = archive.namelist()
        info = [n for n in names if n.startswith("info-") and n.endswith(".tar.zst")]
        pkg = [n for n in names if n.startswith("pkg-") and n.endswith(".tar.zst")]
        if "metadata.json" not in names or len(info) != 1 or len(pkg) > 1 or (reading.whole and not pkg):
            raise DamagedPackage("it holds no conda package metadata")
        with _zstd_tar(archive, info[0], limits) as tar:
            reading.take(tar, info_only=True)
            left = limits.total_bytes - tar.consumed
        if reading.whole:
            with _zstd_tar(archive, pkg[0], replace(limits, total_bytes=left)) as tar:
                reading.take(tar, info_only=False)


@contextmanager
def _zstd_tar(archive: zipfile.ZipFile, member: str, limits: Limits) -> Iterator[TarStream]:
    zstandard = require("zstandard", "zstandard")
    try:
        with (
            archive.open(member) as compressed,
            zstandard.ZstdDecompressor(max_window_size=ZSTD_WINDOW).stream_reader(compressed) as raw,
        ):
            yield TarStream(_Unbuffered(raw), limits)
    except zstandard.ZstdError as exc:
        raise DamagedPackage(f"{member}: {_first_line(exc)}") from None


class _Unbuffered:
    """A zstd stream reader read to the size asked for (its ``read`` may return less before the end)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def read(self, size: int) -> bytes:
        data = self.raw.read(size)
        while data and len(data) < size:
            more = self.raw.read(size - len(data))
            if not more:
                break
            data += more
        return data


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
