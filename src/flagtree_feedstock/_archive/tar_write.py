"""A tar written member by member, each member's data streamed in: :class:`TarWriter`.

The headers are the standard library's (:meth:`tarfile.TarInfo.tobuf`, GNU format: a long name or link
target gets a GNU long-name header, as rattler-build's writer gives one), the data is copied through as it
comes, padded to whole blocks, and the end is two zero blocks padded to a whole record, as :mod:`tarfile`
ends an archive. Nothing but the member being written is held: :class:`tarfile.TarFile` would do the same
given a file object per member, but a rewritten member is a stream of pieces here, not a file.
:func:`normal_mode` is the mode the toolkit's copy of a package gives each member.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterable

from .compressed import Writable
from .tar_stream import BLOCK, Kind, Member

RECORD = 20 * BLOCK  # tar's record: an archive is a whole number of them
_TYPES: dict[Kind, bytes] = {
    "file": tarfile.REGTYPE,
    "dir": tarfile.DIRTYPE,
    "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE,
}


def normal_mode(member: Member) -> int:
    """The mode a copy gives ``member``: a folder 0755, a file (or hard link) 0755 where its header set any
    executable bit, else 0644; a symlink keeps its own (Linux never reads a symlink's mode). No setuid, setgid
    or sticky bit, nothing group- or world-writable: rattler unpacks a package into its cache with the tar's
    modes and links the prefix's files to those. (A header's mode field holds 12 bits; some writers put the file
    type's bits above them, which no writer keeps.)"""
    if member.kind == "symlink":
        return member.mode & 0o7777
    if member.kind == "dir" or member.mode & 0o111:
        return 0o755
    return 0o644


def header(member: Member) -> bytes:
    """The header block(s) of ``member``: owner 0 with no names, its mode, time, size and link target."""
    info = tarfile.TarInfo(member.name)
    info.type = _TYPES[member.kind]
    info.size = member.size if member.kind == "file" else 0
    info.linkname = member.target if member.kind in ("symlink", "hardlink") else ""
    info.mode = member.mode
    info.mtime = member.mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


class TarWriter:
    """A tar archive written to ``out`` member by member; :attr:`written` counts its bytes."""

    def __init__(self, out: Writable) -> None:
        self.out = out
        self.written = 0

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.written += len(data)

    def add(self, member: Member, data: Iterable[bytes] = ()) -> None:
        """``member``'s header, then its data (a file's: exactly ``member.size`` bytes, in pieces)."""
        self._write(header(member))
        size = 0
        for piece in data:
            size += len(piece)
            if size > member.size:
                raise ValueError(f"{member.name}: more data than the {member.size} bytes it declares")
            self._write(piece)
        if size != (member.size if member.kind == "file" else 0):
            raise ValueError(f"{member.name}: {size} bytes of data, not the {member.size} it declares")
        if size % BLOCK:
            self._write(bytes(BLOCK - size % BLOCK))

    def close(self) -> None:
        """The end of the archive: two zero blocks, then zeros to a whole record."""
        end = self.written + 2 * BLOCK
        self._write(bytes(2 * BLOCK + (-end % RECORD)))
