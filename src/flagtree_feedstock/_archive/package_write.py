"""A conda package written reproducibly, member by member: :func:`write_package`.

One form, which :func:`.package.open_package` reads (``tests/test_archive_write.py`` reads back what it
writes, for generated members): ``info/`` first, then the payload, each tar's members in the order given.
A ``.conda`` is a zip of ``metadata.json``, ``info-<stem>.tar.zst`` and ``pkg-<stem>.tar.zst``, each
stored, with zip64 sizes in its tars' local headers (written by :mod:`zipfile` into a seekable file: its
sizes, never a data descriptor), dated ``epoch`` (1980 at the least: a zip's dates begin there), mode 0644;
each tar is one zstd frame at :data:`INFO_LEVEL` or :data:`PKG_LEVEL` (:func:`.compressed.zstd_writer`: the
same bytes on any number of cores). A ``.tar.bz2`` is one tar in one bzip2 stream at :data:`TAR_BZ2_LEVEL`.
Each tar is :class:`.tar_write.TarWriter`'s: GNU headers, owner 0.

Nothing but the current piece of a member is held in memory, whatever the package's size. The package is
written under a temporary name beside ``path`` and renamed to it once whole; the temporary file is removed
on any failure or signal (the toolkit raises every ending signal as ``KeyboardInterrupt``).

conda-package-streaming 0.13's ``create.conda_builder`` and conda-package-handling 2.6's ``CondaFormat_v2``
write a ``.conda`` with :mod:`zipfile` too, but date its entries with the clock, read the members from
files on disk (handling) or keep both tars uncompressed until the end (streaming), and compress on one
thread by default: neither gives the same bytes twice, so they are not used here.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from .compressed import bz2_writer, zstd_writer
from .package import METADATA, Format, Section, section_of
from .tar_stream import Member
from .tar_write import TarWriter

# The pkg archive's level: rattler-build's own for .conda (build_configuration.packaging_settings: 15).
PKG_LEVEL = 15
# The inner info archive is small; rattler-build's own default level for .conda is 15-22.
INFO_LEVEL = 19
# A .tar.bz2's level: both engines' default (rattler-build's tar-bz2 and conda-build's are 9).
TAR_BZ2_LEVEL = 9
# What metadata.json says: the .conda format's version (rattler-build writes it so).
METADATA_JSON = b'{"conda_pkg_format_version":2}'
_ZIP_EPOCH = 315532800  # 1980-01-01, the first date a zip can hold
SECTIONS: tuple[Section, ...] = ("info", "pkg")
_CHUNK = 1 << 20


class PackageWriter:
    """The members of one package, added in order, ``info/`` first: :meth:`add`. See :func:`write_package`."""

    def __init__(self, file: BinaryIO, fmt: Format, *, stem: str, epoch: int, level: int | None) -> None:
        self._format = fmt
        self._stem = stem
        self._level = level
        self._done: list[Section] = []
        self._section: Section | None = None
        self._closing = ExitStack()
        self._sections = ExitStack()  # a .conda's current zip entry and its zstd frame
        if fmt == "conda":
            self._zip = self._closing.enter_context(zipfile.ZipFile(file, "w", zipfile.ZIP_STORED))
            self._date = datetime.fromtimestamp(max(epoch, _ZIP_EPOCH), tz=timezone.utc).timetuple()[:6]
            self._zip.writestr(self._entry(METADATA), METADATA_JSON)
        else:
            level = TAR_BZ2_LEVEL if level is None else min(max(level, 1), 9)
            self._tar = TarWriter(self._closing.enter_context(bz2_writer(file, level)))

    def _entry(self, name: str) -> zipfile.ZipInfo:
        entry = zipfile.ZipInfo(name, date_time=self._date)
        entry.external_attr = 0o644 << 16
        return entry

    def add(self, member: Member, data: Iterable[bytes] = ()) -> None:
        """Add ``member`` (its section by its name) with its data, ``member.size`` bytes in pieces."""
        section = section_of(member.name)
        if section != self._section:
            if section in self._done or (section == "info" and self._section == "pkg"):
                raise ValueError(f"{member.name}: info/ comes first, and each section's members together")
            self._open(section)
        self._tar.add(member, data)

    def _open(self, section: Section) -> None:
        """Close the current section's tar (in a .conda: its zstd frame, its zip entry) and open ``section``'s."""
        self._close_section()
        self._section = section
        if self._format == "conda":
            name = f"{section}-{self._stem}.tar.zst"
            entry = self._sections.enter_context(self._zip.open(self._entry(name), "w", force_zip64=True))
            level = self._level if self._level is not None else INFO_LEVEL if section == "info" else PKG_LEVEL
            self._tar = TarWriter(self._sections.enter_context(zstd_writer(entry, level)))

    def _close_section(self) -> None:
        if self._section is not None:
            if self._format == "conda":
                self._tar.close()
                self._sections.close()
            self._done.append(self._section)
            self._section = None

    def close(self) -> None:
        """Every section closed (in a .conda, an empty tar for one that had no member), the package whole."""
        self._close_section()
        if self._format == "conda":
            for section in SECTIONS:
                if section not in self._done:
                    self._open(section)
                    self._close_section()
        else:
            self._tar.close()
        self._closing.close()

    def abort(self) -> None:
        """Let go of everything open, the file being thrown away: whatever closing it says is of no use."""
        for stack in (self._sections, self._closing):
            with suppress(Exception):  # a half-written entry's complaints: the file goes anyway
                stack.close()


@contextmanager
def write_package(
    path: Path, *, stem: str, epoch: int, fmt: Format | None = None, level: int | None = None
) -> Iterator[PackageWriter]:
    """A package written to ``path`` (its format by its name, or ``fmt``), ``stem`` its name-version-build, the
    zip's entries dated ``epoch``; ``level`` compresses every tar at that level (zstd's, or bzip2's 1 to 9)
    rather than the final ones (:data:`PKG_LEVEL`, :data:`INFO_LEVEL`, :data:`TAR_BZ2_LEVEL`). ``path`` is
    replaced once the package is whole; on any failure nothing is left but what was there before."""
    fmt = fmt or ("conda" if path.name.endswith(".conda") else "tar.bz2")
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    staged = Path(name)
    try:
        with os.fdopen(descriptor, "w+b") as file:
            writer = PackageWriter(file, fmt, stem=stem, epoch=epoch, level=level)
            try:
                yield writer
                writer.close()
            except BaseException:
                writer.abort()
                raise
        staged.chmod(0o644)
        staged.replace(path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
