"""The rewrite of a package's payload files, piece by piece: the build folder out, where the engine wrote it.

The engine builds under ``<staging>/bld/rattler-build_<name>_<seconds>/`` (its work folder and both prefixes),
a path that differs from build to build. Some of it stays in the package where no compiler flag reaches:

- the ``.pyc`` files the engine compiles in the host prefix (each code object's ``co_filename``; Python puts
  the real path in when it loads one, so the recorded one is never used);
- pip's ``direct_url.json`` (the work folder it installed from), and the hash of it in ``RECORD``, which also
  holds the hash of each entry-point script pip wrote with the host prefix in its first line;
- an ELF file's build-id, which the linker hashes over the file as linked, with the run path conda's
  ``LDFLAGS`` give (the host prefix), before the engine rewrites that run path to ``$ORIGIN``.

A file streams through here in pieces, never whole: :func:`replaced` writes a fixed name over the folder in
every text file (:data:`BUILD_FOLDER`; :class:`TextSniffer` tells text, UTF-8 without a NUL, as the pieces
pass) and a placeholder of the same length in every other (lengths, and so offsets in binaries and marshalled
strings, stay as they are: so a ``.pyc`` still differs between two build folders of different lengths);
:func:`fix_record` brings a ``RECORD`` up to date from the new hashes; :func:`content_build_id` makes a
build-id from the file itself (its sha1 with the build-id zeroed, as ``debugedit --build-id`` recomputes it),
so the same file gets the same id: it reads the file where it lies (a spool on disk), through ``read_at``.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import posixpath
import struct
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

# What the build folder becomes in a text file: what the build scripts' -ffile-prefix-map name it after.
BUILD_FOLDER = "/usr/src/build"
ELF64_LE = b"\x7fELF\x02\x01"
_SHT_NOTE = 7
_NT_GNU_BUILD_ID = 3
_PIECE = 1 << 20


def replaced(pieces: Iterable[bytes], old: bytes, new: bytes, hits: list[int]) -> Iterator[bytes]:
    """``pieces`` with every ``old`` written over by ``new``, left to right as :meth:`bytes.replace` does
    (a match across two pieces too; what is written is never searched again); ``hits[0]`` counts them."""
    keep = len(old) - 1
    pending = b""
    for piece in pieces:
        data = pending + piece
        cut = len(data) - keep  # a match starting here or later does not fit in what is read yet
        out: list[bytes] = []
        position = 0
        while (at := data.find(old, position)) != -1 and at < cut:
            out += (data[position:at], new)
            position = at + len(old)
            hits[0] += 1
        end = max(position, cut)
        out.append(data[position:end])
        pending = data[end:]
        yield b"".join(out)
    yield pending  # shorter than ``old``: no match in it


class TextSniffer:
    """Whether the pieces seen so far read as text: UTF-8, no NUL byte (:attr:`text`, checked to the end by
    :meth:`done`)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = True

    def see(self, piece: bytes) -> None:
        if self.text:
            try:
                self._decoder.decode(piece)
            except UnicodeDecodeError:
                self.text = False
            else:
                self.text = b"\0" not in piece

    def done(self) -> bool:
        """Whether the whole file was text (a UTF-8 sequence cut at the end is not)."""
        self.see(b"")
        if self.text:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self.text = False
        return self.text


def record_hash(digest: bytes) -> str:
    """A sha256 digest as a wheel's ``RECORD`` writes it."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def fix_record(
    name: str, data: bytes, files: Collection[str], changed: Mapping[str, tuple[bytes, int]]
) -> bytes:
    """The ``*.dist-info/RECORD`` ``name`` (its bytes ``data``): each file of ``changed`` (its new sha256 digest
    and size) it lists with its new hash and size, and each file the package does not hold (``files``: a
    noarch package's ``bin/`` entry points, which the engine leaves out and conda writes at install, with the
    host prefix in the hash pip recorded) with none."""
    base = name.rsplit("/", 2)[0]
    lines = []
    for line in data.decode("utf-8").splitlines():
        path, _, rest = line.partition(",")
        member = posixpath.normpath(f"{base}/{path}")
        target = changed.get(member)
        if not rest.strip(","):
            lines.append(line)
        elif target is not None:
            lines.append(f"{path},{record_hash(target[0])},{target[1]}")
        elif member not in files:
            lines.append(f"{path},,")
        else:
            lines.append(line)
    text = "\n".join(lines) + "\n"
    return text.encode() if text.encode() != data else data


def is_record(name: str) -> bool:
    return name.endswith(".dist-info/RECORD")


def build_id(read_at: Callable[[int, int], bytes], size: int) -> tuple[int, int] | None:
    """Where a 64-bit little-endian ELF file's GNU build-id lies (offset, length), from its section headers;
    ``read_at(offset, length)`` reads the file (``size`` bytes)."""
    head = read_at(0, 64)
    if not head.startswith(ELF64_LE) or len(head) < 64:
        return None
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
    for index in range(shnum):
        at = shoff + index * shentsize
        if at + 0x28 > size:
            return None
        section = read_at(at, 0x28)
        (kind,) = struct.unpack_from("<I", section, 4)
        if kind != _SHT_NOTE:
            continue
        offset, length = struct.unpack_from("<QQ", section, 0x18)
        notes = read_at(offset, min(length, max(size - offset, 0)))
        position = 0
        while position + 12 <= len(notes):
            namesz, descsz, note = struct.unpack_from("<III", notes, position)
            name_at = position + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if note == _NT_GNU_BUILD_ID and notes[name_at : name_at + namesz] == b"GNU\0":
                return offset + desc_at, descsz
            position = desc_at + (descsz + 3) // 4 * 4
    return None


def content_build_id(read_at: Callable[[int, int], bytes], size: int) -> tuple[int, bytes] | None:
    """The build-id an ELF file (``size`` bytes, read through ``read_at``) gets from its own content: where it
    lies and its bytes (the sha1 of the file with its build-id zeroed), or None for a file without one."""
    found = build_id(read_at, size)
    if found is None:
        return None
    offset, length = found
    digest = hashlib.sha1(usedforsecurity=False)
    position = 0
    while position < size:
        piece = read_at(position, min(_PIECE, size - position))
        start, end = max(offset - position, 0), min(offset + length - position, len(piece))
        if start < end:
            piece = piece[:start] + bytes(end - start) + piece[end:]
        digest.update(piece)
        position += len(piece)
    return offset, (digest.digest() * (length // 20 + 1))[:length]
