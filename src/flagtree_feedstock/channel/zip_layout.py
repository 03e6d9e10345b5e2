"""A ``.conda``'s zip read as the engine reads it: its entries in order from the first byte, nothing else.

Python's :mod:`zipfile` reads a zip from its end (the central directory); the engine's streaming reader
(rattler's, Rust's ``zip`` crate) reads the local entries one after the other from offset 0 until it meets the
central directory, and extracts every ``info-``/``pkg-`` entry it passes. The two read the same entries only
when the file is laid out as one: :func:`check_layout` walks the local headers from offset 0 and the central
directory after them, and refuses, naming the entry, every way they could differ:

- an entry the central directory does not list (data before the first entry or between two: a reader in order
  would read it), or an entry whose local header says other than the directory (name, method, CRC, sizes);
- an entry written with a trailing data descriptor (flag bit 3: its sizes are not in its header), a name held
  twice, a directory whose records do not follow the last entry, and any byte after the end record's comment.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Sequence
from typing import BinaryIO

from flagtree_feedstock._tar_stream import ArchiveRefused, shown

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"
_ZIP64_END = b"PK\x06\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_END = b"PK\x05\x06"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
_CENTRAL_HEADER = 46
_DATA_DESCRIPTOR = 0x08
_ZIP64_SIZE = 0xFFFFFFFF


def check_layout(archive: zipfile.ZipFile, file: BinaryIO, size: int) -> None:
    """Raise :class:`ArchiveRefused` unless the local entries of ``file`` (``size`` bytes, opened as
    ``archive``), read in order from offset 0, are exactly the entries its central directory lists."""
    entries = sorted(archive.infolist(), key=lambda e: e.header_offset)
    _check_unique([e.filename for e in entries])
    position = 0
    for entry in entries:
        if entry.header_offset != position:
            raise ArchiveRefused(
                f"the zip holds data its central directory does not list before {shown(entry.filename)}: "
                "a reader of its entries in order reads it"
            )
        position = _local_entry(file, entry)
    if position != archive.start_dir:
        raise ArchiveRefused(
            "the zip holds data its central directory does not list after its last entry: a reader of its "
            "entries in order reads it"
        )
    position = _directory_end(file, position, len(entries))
    if position != size:
        raise ArchiveRefused(f"the zip has {size - position} bytes after its end: readers differ on them")


def _check_unique(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ArchiveRefused(f"the zip holds {shown(name)} twice: readers keep different ones")
        seen.add(name)


def _at(file: BinaryIO, position: int, size: int, what: str) -> bytes:
    file.seek(position)
    data = file.read(size)
    if len(data) != size:
        raise ArchiveRefused(f"the zip ends inside {what}")
    return data


def _local_entry(file: BinaryIO, entry: zipfile.ZipInfo) -> int:
    """Check the local header of ``entry`` against the directory's record; where the next entry starts."""
    head = _LOCAL_HEADER.unpack(_at(file, entry.header_offset, _LOCAL_HEADER.size, "a local header"))
    signature, _, flags, method, _, _, crc, compressed, uncompressed, name_length, extra_length = head
    name = _at(file, entry.header_offset + _LOCAL_HEADER.size, name_length, "a local header")
    listed = entry.filename.encode("utf-8" if entry.flag_bits & 0x800 else "cp437")
    if signature != _LOCAL or name != listed:
        raise ArchiveRefused(
            f"the zip's entry at {entry.header_offset} is not {shown(entry.filename)}, which its central "
            "directory lists there"
        )
    if flags & _DATA_DESCRIPTOR:
        raise ArchiveRefused(
            f"the zip's entry {shown(entry.filename)} keeps its sizes after its data (a data descriptor): "
            "a reader in order cannot tell where it ends"
        )
    sizes = (compressed, uncompressed)
    if (method, crc) != (entry.compress_type, entry.CRC) or (
        _ZIP64_SIZE not in sizes and sizes != (entry.compress_size, entry.file_size)
    ):
        raise ArchiveRefused(
            f"the zip's entry {shown(entry.filename)} says other in its local header than in its central "
            "directory: readers differ on it"
        )
    return (
        entry.header_offset + _LOCAL_HEADER.size + int(name_length) + int(extra_length) + entry.compress_size
    )


def _directory_end(file: BinaryIO, position: int, count: int) -> int:
    """Walk ``count`` central directory records from ``position``, then the end records; where they end."""
    for _ in range(count):
        record = _at(file, position, _CENTRAL_HEADER, "its central directory")
        if record[:4] != _CENTRAL:
            raise ArchiveRefused("the zip's central directory does not follow its last entry")
        name_length, extra_length, comment_length = struct.unpack("<HHH", record[28:34])
        position += _CENTRAL_HEADER + name_length + extra_length + comment_length
    signature = _at(file, position, 4, "its end records")
    if signature == _ZIP64_END:
        (record_size,) = struct.unpack("<Q", _at(file, position + 4, 8, "its zip64 end record"))
        position += 12 + record_size
        if _at(file, position, 4, "its zip64 end locator") != _ZIP64_LOCATOR:
            raise ArchiveRefused("the zip's zip64 end record is not followed by its locator")
        position += 20
    end = _at(file, position, 22, "its end record")
    if end[:4] != _END:
        raise ArchiveRefused("the zip's central directory is not followed by its end record")
    return position + 22 + int.from_bytes(end[20:22], "little")  # and the end record's comment
