"""A ``.conda``'s zip read as rattler reads it: its entries in order from its first byte, and nothing else.

Python's :mod:`zipfile` (and so conda-package-streaming, which reads a ``.conda`` through it) reads a zip from
its end, the central directory; rattler's streaming reader (Rust's ``zip``, ``read_zipfile_from_stream``)
reads the local entries one after the other from offset 0 until it meets the central directory, and unpacks
every one it passes whose name ends in ``.tar.zst``. The two read the same file only when it is laid out as
one, so :func:`read_entries` walks the local headers from offset 0, then the central directory and its end
records, and refuses, naming the entry, every way they could differ:

- data that is no entry (before the first entry, between two, after the last), an entry the central
  directory does not list, a record of the directory where no entry starts, and any byte after the end
  record's comment;
- an entry whose local header says other than its record (name, flags, method, CRC, sizes), one written
  with a trailing data descriptor (its sizes are not in its header: a reader in order cannot tell where it
  ends), an encrypted or compressed one (a ``.conda`` stores its entries), a name held twice, a name with a
  control character (:data:`.tar_stream.CONTROL`).

Each entry is then read through :class:`EntryReader`, bounded by its size, its CRC-32 checked at its end.
Zip64 sizes (rattler writes them in every header) are read from the extra field. Writing is
:mod:`.package_write`'s, with :mod:`zipfile` (a seekable file: sizes in every local header, no descriptor).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from .tar_stream import ArchiveDamaged, ArchiveRefused, refuse_control, shown

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"
_ZIP64_END = b"PK\x06\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_END = b"PK\x05\x06"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
_CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes
_END_RECORD = struct.Struct("<4sHHHHIIH")  # 22 bytes
_ZIP64_END_RECORD = struct.Struct("<4sQHHIIQQQQ")  # 56 bytes
_ENCRYPTED, _DATA_DESCRIPTOR, _UTF8 = 0x0001, 0x0008, 0x0800
_ZIP64 = 0xFFFFFFFF
_ZIP64_FIELD = 0x0001


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A stored entry: its name, where its header and its data start, its size and CRC-32."""

    name: str
    header: int
    data: int
    size: int
    crc: int


def read_entries(file: BinaryIO, size: int) -> list[Entry]:
    """The entries of the zip ``file`` (``size`` bytes) in order, once it was found laid out as one (the module
    docstring); else :class:`ArchiveRefused` (or :class:`ArchiveDamaged` for a cut or foreign file)."""
    entries, start = _local_entries(file, size)
    records, position = _central_records(file, start, size)
    _end_records(file, position, size, start, len(records))
    by_offset = sorted(records, key=lambda r: r[0])
    for index, entry in enumerate(entries):
        if index >= len(by_offset):
            raise ArchiveRefused(
                "the zip holds data its central directory does not list after its last entry: a reader of its "
                "entries in order reads it"
            )
        offset, name, fields = by_offset[index]
        if offset > entry.header:
            raise ArchiveRefused(
                f"the zip holds data its central directory does not list before {shown(name)}: a reader of its "
                "entries in order reads it"
            )
        if offset < entry.header:
            raise ArchiveRefused(
                f"the zip's central directory lists {shown(name)} at {offset}, where no entry starts"
            )
        if name != entry.name:
            raise ArchiveRefused(
                f"the zip's entry at {offset} is {shown(entry.name)}, not {shown(name)}, which its central "
                "directory lists there"
            )
        if fields != _fields(file, entry):
            raise ArchiveRefused(
                f"the zip's entry {shown(name)} says other in its local header than in its central directory: "
                "readers differ on it"
            )
    if len(by_offset) > len(entries):
        offset, name, _ = by_offset[len(entries)]
        raise ArchiveRefused(
            f"the zip's central directory lists {shown(name)} at {offset}, where no entry starts"
        )
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise ArchiveRefused(f"the zip holds {shown(entry.name)} twice: readers keep different ones")
        seen.add(entry.name)
    return entries


def _at(file: BinaryIO, position: int, size: int, end: int, what: str) -> bytes:
    if position + size > end:
        raise ArchiveDamaged(f"the zip ends inside {what}")
    file.seek(position)
    data = file.read(size)
    if len(data) != size:
        raise ArchiveDamaged(f"the zip ends inside {what}")
    return data


def _zip64(extra: bytes, wanted: int) -> list[int]:
    """The first ``wanted`` 8-byte values of the zip64 field of ``extra`` (an extra field's records)."""
    position = 0
    while position + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, position)
        if kind == _ZIP64_FIELD and length >= 8 * wanted:
            return list(struct.unpack_from(f"<{wanted}Q", extra, position + 4))
        position += 4 + length
    raise ArchiveDamaged("a zip header says its sizes are in a zip64 field, and holds none")


def _name(raw: bytes, flags: int) -> str:
    """An entry's name as its flags say to read it; one with a control character is refused (the name is
    compared with what a ``.conda`` holds, and a NUL cuts it for one reader only)."""
    name = raw.decode("utf-8" if flags & _UTF8 else "cp437", "surrogateescape")
    refuse_control(name, f"the zip's entry {shown(name)}")
    return name


def _local_entries(file: BinaryIO, size: int) -> tuple[list[Entry], int]:
    """The local entries from offset 0, each checked as a ``.conda`` stores it; where they end."""
    entries: list[Entry] = []
    position = 0
    while True:
        signature = _at(
            file, position, 4, size, "its first header" if not entries else "its central directory"
        )
        if signature != _LOCAL:
            break
        head = _LOCAL_HEADER.unpack(_at(file, position, _LOCAL_HEADER.size, size, "a local header"))
        _, _, flags, method, _, _, crc, compressed, uncompressed, name_length, extra_length = head
        raw = _at(file, position + _LOCAL_HEADER.size, name_length + extra_length, size, "a local header")
        name = _name(raw[:name_length], flags)
        if _ZIP64 in (compressed, uncompressed):
            uncompressed, compressed = _zip64(raw[name_length:], 2)
        _check_stored(name, flags, method, compressed, uncompressed)
        data = position + _LOCAL_HEADER.size + name_length + extra_length
        if data + compressed > size:
            raise ArchiveDamaged(f"the zip ends inside its entry {shown(name)}")
        entries.append(Entry(name=name, header=position, data=data, size=compressed, crc=crc))
        position = data + compressed
    if signature not in (_CENTRAL, _END):
        if not entries:
            raise ArchiveDamaged("it is not a zip: no zip entry at its start")
        raise ArchiveRefused(
            f"the zip holds data that is no entry after {shown(entries[-1].name)}: a reader of its entries in "
            "order stops there"
        )
    return entries, position


def _check_stored(name: str, flags: int, method: int, compressed: int, uncompressed: int) -> None:
    if flags & _DATA_DESCRIPTOR:
        raise ArchiveRefused(
            f"the zip's entry {shown(name)} keeps its sizes after its data (a data descriptor): a reader in "
            "order cannot tell where it ends"
        )
    if flags & _ENCRYPTED or flags & ~_UTF8:
        raise ArchiveRefused(
            f"the zip's entry {shown(name)} has flags {flags:#06x}: a .conda's entries have none"
        )
    if method != 0 or compressed != uncompressed:
        raise ArchiveRefused(
            f"the zip's entry {shown(name)} is compressed (method {method}): a .conda stores its entries"
        )


def _fields(file: BinaryIO, entry: Entry) -> tuple[int, int, int, int]:
    """What the local header of ``entry`` says of it, as the central directory's record says it."""
    file.seek(entry.header)
    _, _, flags, method, *_ = _LOCAL_HEADER.unpack(file.read(_LOCAL_HEADER.size))
    return flags, method, entry.crc, entry.size


def _central_records(
    file: BinaryIO, position: int, size: int
) -> tuple[list[tuple[int, str, tuple[int, int, int, int]]], int]:
    """The central directory's records from ``position``: (local offset, name, what they say of the entry)."""
    records = []
    while _at(file, position, 4, size, "its central directory") == _CENTRAL:
        head = _CENTRAL_HEADER.unpack(
            _at(file, position, _CENTRAL_HEADER.size, size, "its central directory")
        )
        flags, method, crc, compressed, uncompressed = head[3], head[4], head[7], head[8], head[9]
        name_length, extra_length, comment_length, offset = head[10], head[11], head[12], head[16]
        raw = _at(
            file, position + _CENTRAL_HEADER.size, name_length + extra_length, size, "its central directory"
        )
        name = _name(raw[:name_length], flags)
        wanted = [value == _ZIP64 for value in (uncompressed, compressed, offset)]
        if any(wanted):
            values = iter(_zip64(raw[name_length:], sum(wanted)))
            uncompressed = next(values) if wanted[0] else uncompressed
            compressed = next(values) if wanted[1] else compressed
            offset = next(values) if wanted[2] else offset
        if compressed != uncompressed:
            raise ArchiveRefused(
                f"the zip's entry {shown(name)} is compressed (method {method}): a .conda stores its entries"
            )
        records.append((offset, name, (flags, method, crc, compressed)))
        position += _CENTRAL_HEADER.size + name_length + extra_length + comment_length
    return records, position


def _end_records(file: BinaryIO, position: int, size: int, directory: int, count: int) -> None:
    """The end records after the central directory (which starts at ``directory`` and lists ``count``
    entries), saying so, and nothing after them."""
    listed, start = count, directory
    if _at(file, position, 4, size, "its end records") == _ZIP64_END:
        record = _ZIP64_END_RECORD.unpack(
            _at(file, position, _ZIP64_END_RECORD.size, size, "its end records")
        )
        listed, start = record[7], record[9]
        zip64_end = position
        position += 12 + record[1]
        locator = _at(file, position, 20, size, "its zip64 end locator")
        if locator[:4] != _ZIP64_LOCATOR or struct.unpack_from("<Q", locator, 8)[0] != zip64_end:
            raise ArchiveRefused("the zip's zip64 end record is not followed by its locator")
        position += 20
    end = _END_RECORD.unpack(_at(file, position, _END_RECORD.size, size, "its end record"))
    if end[0] != _END:
        raise ArchiveRefused("the zip's central directory is not followed by its end record")
    if end[4] != 0xFFFF:
        listed = end[4]
    if end[6] != _ZIP64:
        start = end[6]
    if (listed, start) != (count, directory):
        raise ArchiveRefused(
            "the zip's end record says its central directory is other than the one after its entries: "
            "readers differ on it"
        )
    position += _END_RECORD.size + end[7]  # and the end record's comment
    if position != size:
        raise ArchiveRefused(f"the zip has {size - position} bytes after its end: readers differ on them")


class EntryReader:
    """The data of ``entry`` of ``file``, read forward, bounded by its size; its CRC-32 is checked at its end
    (:meth:`read` returning ``b""``, or :meth:`finish`)."""

    def __init__(self, file: BinaryIO, entry: Entry) -> None:
        self.file = file
        self.entry = entry
        self._position = entry.data
        self._left = entry.size
        self._crc = 0
        self._checked = False

    def read(self, size: int) -> bytes:
        if not self._left:
            self._check()
            return b""
        size = min(size, self._left)
        if size <= 0:
            return b""
        self.file.seek(self._position)
        data = self.file.read(size)
        if len(data) != size:
            raise ArchiveDamaged(f"the zip ends inside its entry {shown(self.entry.name)}")
        self._position += size
        self._left -= size
        self._crc = zlib.crc32(data, self._crc)
        return data

    def finish(self) -> None:
        """Read the rest (nothing is expected to be left) and check the CRC-32."""
        while self.read(1 << 20):
            pass

    def _check(self) -> None:
        if not self._checked and self._crc != self.entry.crc:
            raise ArchiveDamaged(f"{shown(self.entry.name)} fails its checksum")
        self._checked = True
