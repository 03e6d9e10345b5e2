"""A conda package file read as a stream of members, bounded, with one reading only: :func:`open_package`.

Both formats. A ``.tar.bz2`` is one bzip2 stream (:class:`.compressed.OneStream`: nothing after it) of one tar.
A ``.conda`` is a zip read in order from its first byte, as rattler reads it (:mod:`.zip_stream`), which must
hold exactly ``metadata.json``, ``info-<stem>.tar.zst`` and ``pkg-<stem>.tar.zst``: rattler unpacks every
entry whose name ends in ``.tar.zst`` (matching its last path part only), so any other entry is refused, a
nested ``sub/info-...`` or a second ``*.tar.zst`` among them. Each of the two is one zstd frame
(:class:`.compressed.ZstdFrame`: a window of at most :data:`ZSTD_WINDOW`, nothing after it) of one tar, the
info tar holding ``info/`` only and the pkg tar none of it. Every tar is read by
:class:`.tar_stream.TarStream` within :data:`LIMITS` (no sparse member, no name read two ways, no size beyond
the data, zeros only after its end, no control character in a name or link target), to the end of its data.
Every zip entry's CRC-32 is checked; no name, a zip entry's, a member's or the file's own, holds a control
character.

The members come ``info/`` first for a ``.conda`` (its info tar is read first, whatever the zip's order), in
the archive's order for a ``.tar.bz2`` (every writer since conda-build 3 puts ``info/`` first there too).
What is wrong is one line naming the member: :class:`DamagedPackage` for a file that is not whole (cut, a
checksum that fails), :class:`UnsafePackage` for one two readers could read differently or a bomb.

conda's own readers (conda-package-streaming 0.13, which conda-package-handling 2.6 wraps) open a ``.conda``
with :mod:`zipfile`, from its central directory, and its tars with :mod:`tarfile` unbounded: the very reading
that differs from rattler's, so they are not used here. The checks of a package as the installer links it
(paths, links, entry points) are :mod:`flagtree_feedstock.channel.package_reader`'s, on top of this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

from .compressed import OneStream, ZstdFrame
from .tar_stream import ArchiveDamaged, ArchiveRefused, Limits, Member, TarStream, refuse_control, shown
from .zip_stream import Entry, EntryReader, read_entries

# What reading one package may cost. The largest package this feedstock builds, flagtree-llvm (an LLVM and
# MLIR install tree: static libraries, tools, headers), unpacks to a few GB in some thousands of files
# (Debian's LLVM 19 and MLIR: 4,385, benchmarks/README.md).
LIMITS = Limits(total_bytes=32 << 30, member_bytes=4 << 30, members=100_000)
# An info/ file read into memory is at most this big (flagtree-llvm's paths.json is a few MB); parsed, 16 MiB
# of the smallest entries take about 300 MB (tests/test_package_bombs.py measures it).
INFO_BYTES = 16 << 20
# The largest zstd window a .conda's tars may ask for (zstd's own default limit, 2**27 bytes; conda's and
# rattler's writers use far less): a frame asking for more would be an allocation of its size.
ZSTD_WINDOW = 1 << 27
# A .conda's metadata.json is about 30 bytes ({"conda_pkg_format_version": 2}).
METADATA_BYTES = 64 << 10
METADATA = "metadata.json"
SUFFIXES = (".conda", ".tar.bz2")

Format = Literal["conda", "tar.bz2"]
Section = Literal["info", "pkg"]
_COMPONENT = re.compile(r"(info|pkg)-(.+)\.tar\.zst")
_T = TypeVar("_T")


class DamagedPackage(Exception):
    """A package file that is not a whole conda package; the message says why."""


class UnsafePackage(DamagedPackage):
    """A package refused before it is used: a path leading out of the prefix, a bomb, an ambiguous archive."""


@dataclass(frozen=True, kw_only=True)
class PackageMember(Member):
    """One member of a package: a tar's member (:class:`.tar_stream.Member`: its name normalised, its kind,
    declared size, link target, mode and time) and the section it is in (``info`` holds ``info/``, ``pkg``
    the payload)."""

    section: Section


def package_format(name: str) -> Format:
    """The format a package's file name says: ``conda`` for ``*.conda``, else ``tar.bz2``."""
    return "conda" if name.endswith(".conda") else "tar.bz2"


def section_of(name: str) -> Section:
    """Where a member of this name belongs: ``info`` for ``info`` and below it, else ``pkg``."""
    return "info" if name == "info" or name.startswith("info/") else "pkg"


def _translated(call: Callable[[], _T]) -> _T:
    try:
        return call()
    except ArchiveDamaged as exc:  # NotATar among them
        raise DamagedPackage(str(exc)) from None
    except ArchiveRefused as exc:
        raise UnsafePackage(str(exc)) from None


class Package:
    """An open package: :attr:`format`, :attr:`stem`, :attr:`metadata`; iterate for its members and
    :meth:`read` the current one's data. Iterating to the end checks the whole file (every CRC, the end of
    every stream); a reader that stops early has checked only what it read."""

    def __init__(self, file: BinaryIO, size: int, fmt: Format, file_name: str) -> None:
        self.format: Format = fmt
        self._file = file
        self._limits = LIMITS.for_file(size)
        self._tar: TarStream | None = None
        self.metadata: bytes | None = None
        self._entries: dict[Section, Entry] = {}
        if fmt == "tar.bz2":
            self.stem = file_name.removesuffix(".tar.bz2")
            # the copy's own name (a .conda's stem is its zip entries', checked as they are read)
            _translated(lambda: refuse_control(self.stem, f"its file name {shown(file_name)}"))
        else:
            self.stem = _translated(lambda: self._layout(size))

    def _layout(self, size: int) -> str:
        """The ``.conda``'s zip checked: its three entries, their one stem; metadata.json read."""
        entries = read_entries(self._file, size)
        stems: dict[Section, str] = {}
        meta: Entry | None = None
        for entry in entries:
            component = _COMPONENT.fullmatch(entry.name)
            if entry.name == METADATA:
                meta = entry
            elif component is not None and "/" not in entry.name and "\\" not in entry.name:
                section: Section = "info" if component[1] == "info" else "pkg"
                if section in stems:
                    raise ArchiveRefused(
                        f"the zip holds two {section} tars: {shown(entry.name)} is the second"
                    )
                stems[section], self._entries[section] = component[2], entry
            else:
                raise ArchiveRefused(
                    f"the zip holds {shown(entry.name)}: a .conda holds metadata.json, info-<stem>.tar.zst and "
                    "pkg-<stem>.tar.zst only (rattler unpacks every entry whose name ends in .tar.zst)"
                )
        if meta is None or len(stems) != 2:
            raise ArchiveDamaged("it holds no conda package metadata")
        if stems["info"] != stems["pkg"]:
            raise ArchiveRefused(
                f"its info and pkg tars name two packages, {shown(stems['info'])} and {shown(stems['pkg'])}"
            )
        if meta.size > METADATA_BYTES:
            raise ArchiveRefused(
                f"its {METADATA} has {meta.size} bytes, above the {METADATA_BYTES} it may have"
            )
        reader = EntryReader(self._file, meta)
        self.metadata = reader.read(meta.size)
        reader.finish()
        return stems["info"]

    def __iter__(self) -> Iterator[PackageMember]:
        members = self._tar_bz2() if self.format == "tar.bz2" else self._conda()
        while True:
            member = _translated(lambda: next(members, None))
            if member is None:
                return
            yield member

    @property
    def position(self) -> int:
        """How far into the file reading has come (its compressed bytes), for a progress display."""
        return self._file.tell()

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes more of the current member's data (``b""`` at its end)."""
        tar = self._tar
        return b"" if tar is None else _translated(lambda: tar.read(size))

    def _members(self, tar: TarStream, section: Section | None) -> Iterator[PackageMember]:
        self._tar = tar
        for member in tar:
            if not member.name:  # the root folder itself (./)
                continue
            where = section_of(member.name)
            if section is not None and where != section:
                raise ArchiveRefused(
                    f"member {shown(member.name)} does not belong in the {section} tar of a .conda"
                )
            yield PackageMember(section=where, **asdict(member))
        self._tar = None

    def _tar_bz2(self) -> Iterator[PackageMember]:
        stream = OneStream(self._file, "bzip2", what="the .tar.bz2")
        yield from self._members(TarStream(stream, self._limits), None)

    def _conda(self) -> Iterator[PackageMember]:
        limits = self._limits
        sections: tuple[Section, ...] = ("info", "pkg")
        for section in sections:
            entry = self._entries[section]
            source = EntryReader(self._file, entry)
            frame = ZstdFrame(source, max_window=ZSTD_WINDOW, what=entry.name)
            tar = TarStream(frame, limits)
            try:
                yield from self._members(tar, section)
                frame.finish()
            except ArchiveRefused:
                source.finish()  # a damaged entry is named as such, not by what its damage made of its tar
                raise
            source.finish()
            limits = replace(limits, total_bytes=limits.total_bytes - tar.consumed)


@contextmanager
def open_package(path: Path, name: str | None = None) -> Iterator[Package]:
    """The package at ``path``, open for reading; ``name``, the file name it has in a channel (``path``'s own
    by default), says which of the two formats it is. A file that cannot be read (``OSError`` with an errno) is
    not a damaged package: that error is raised as it is."""
    file_name = name or path.name
    with path.open("rb") as file:
        size = file.seek(0, 2)
        file.seek(0)
        yield Package(file, size, package_format(file_name), file_name)
