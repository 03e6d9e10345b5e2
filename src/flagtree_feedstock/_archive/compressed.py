"""The compressed streams of the archives the toolkit reads and writes: zstd, bzip2, gzip and xz.

Reading, each is one stream and nothing after it, read in pieces no bigger than asked for, whatever the
compressed data claims (a bomb of zeros expands a thousandfold):

- :class:`ZstdFrame`: one zstd frame. python-zstandard's reader stops at the end of the first frame and keeps
  what follows in its own buffer; rattler's decoder (Rust's ``zstd``) reads on across frames and skips
  skippable ones. So the frame's own structure (its header, then each block's 3-byte header and size, then
  its checksum) is walked as the compressed bytes pass (:class:`_FrameWalk`): a byte after the frame, a
  skippable frame, a dictionary, a frame cut short, is refused, and both read the same single frame. Its
  window is at most what the caller allows (a frame asking for more would be an allocation of its size).
- :class:`OneStream`: one bzip2, gzip or xz stream through the standard library's decompressor objects (not
  :mod:`bz2`'s or :mod:`gzip`'s file objects, which read on across concatenated streams, as Rust's
  ``BzDecoder`` does not), ``max_length`` bounding each piece; a byte after the stream is refused. It can go
  back to an offset of its decompressed data (by decompressing again from the start), as the LLVM archive's
  ELF reader asks for in a rare case.
- :func:`decompressed`: a file read by its first bytes (gzip, bzip2, xz, or a plain tar).

Writing, :func:`zstd_writer` compresses with as many threads as this process may run on. zstd's
multi-threaded mode (one worker or more) cuts its input into jobs at fixed sizes, so the bytes do not depend
on the number of workers (``tests/test_archive_write.py`` checks it), though they differ from the
single-threaded mode's: so one worker is the least used, on any machine. Each worker holds its jobs and
its match finder: about 120 MB at level 15 once its jobs are full (``tests/test_landing.py`` measures the
whole), the engine's own compression as much. The frame does not declare its content size (a streamed
tar's size is not known before its end; no reader needs it).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from flagtree_feedstock._engine import require

from .tar_stream import CHUNK, ArchiveDamaged, ArchiveRefused, Readable

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Skippable frames: magic 0x184D2A50 to 0x184D2A5F, little-endian.
_SKIPPABLE_LOW, _SKIPPABLE_HIGH = 0x184D2A50, 0x184D2A5F
# How much compressed data is read at once.
_INPUT = 1 << 17

StreamKind = Literal["bzip2", "gzip", "xz"]


class Writable(Protocol):
    """A binary stream written forward."""

    def write(self, data: bytes, /) -> int: ...


class Flushable(Writable, Protocol):
    """A binary stream written forward, and flushed."""

    def flush(self) -> None: ...


class _FrameWalk:
    """Where one zstd frame ends, from its own structure, as its bytes pass (RFC 8878, section 3.1.1)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = False
        self._pending = bytearray()
        self._need = 5  # magic and frame header descriptor
        self._stage = "start"
        self._skip = 0
        self._last = False
        self._window = self._dictionary = self._checksum = 0

    def feed(self, data: bytes) -> int:
        """How many bytes of ``data`` (the next compressed bytes) belong to the frame."""
        used = 0
        while used < len(data) and not self.done:
            if self._skip:
                taken = min(self._skip, len(data) - used)
                self._skip -= taken
                used += taken
                self._maybe_done()
                continue
            taken = min(self._need - len(self._pending), len(data) - used)
            self._pending += data[used : used + taken]
            used += taken
            if len(self._pending) == self._need:
                self._parse(bytes(self._pending))
                self._pending.clear()
        return used

    def _maybe_done(self) -> None:
        if self._last and not self._skip:
            self.done = True

    def _parse(self, piece: bytes) -> None:
        if self._stage == "start":
            self._start(piece)
        elif self._stage == "header":
            if any(piece[self._window : self._window + self._dictionary]):
                raise ArchiveRefused(
                    f"{self.what}: its zstd frame needs a dictionary, which a package has none of"
                )
            self._stage, self._need = "block", 3
        else:
            header = int.from_bytes(piece, "little")
            kind, size = header >> 1 & 0x03, header >> 3
            if kind == 3:
                raise ArchiveDamaged(f"{self.what}: its zstd frame holds a block of a reserved type")
            self._skip = 1 if kind == 1 else size  # an RLE block carries one byte
            if header & 1:
                self._last = True
                self._skip += self._checksum
                self._maybe_done()

    def _start(self, piece: bytes) -> None:
        """The magic number and the frame header descriptor: how long the rest of the header is."""
        magic = int.from_bytes(piece[:4], "little")
        if _SKIPPABLE_LOW <= magic <= _SKIPPABLE_HIGH:
            raise ArchiveRefused(
                f"{self.what} starts with a skippable zstd frame: readers differ on what follows it"
            )
        if piece[:4] != ZSTD_MAGIC:
            raise ArchiveDamaged(f"{self.what} is not zstd data (it starts with {piece[:4].hex()})")
        descriptor = piece[4]
        if descriptor & 0x08:
            raise ArchiveDamaged(f"{self.what}: its zstd frame header sets a reserved bit")
        single = descriptor >> 5 & 1
        self._window = 0 if single else 1
        self._dictionary = (0, 1, 2, 4)[descriptor & 0x03]
        self._checksum = 4 if descriptor & 0x04 else 0
        content_size = (single, 2, 4, 8)[descriptor >> 6]
        self._stage, self._need = "header", self._window + self._dictionary + content_size
        if self._need == 0:
            self._stage, self._need = "block", 3


class ZstdFrame:
    """The decompressed data of the one zstd frame ``source`` holds (compressed, read forward to its end).

    :meth:`read` returns what is asked for, less only at the frame's end; :meth:`finish` reads ``source`` to
    its end and refuses anything after the frame. ``what`` names the stream in messages.
    """

    def __init__(self, source: Readable, *, max_window: int, what: str) -> None:
        zstandard = require("zstandard", "zstandard")
        self.what = what
        self._walk = _FrameWalk(what)
        self._source = source
        self._error = zstandard.ZstdError
        decompressor = zstandard.ZstdDecompressor(max_window_size=max_window)
        self._reader = decompressor.stream_reader(_Source(self), read_size=_INPUT, read_across_frames=False)
        self._ended = False

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the frame's data, ``size`` unless the frame ends first."""
        if self._ended:
            return b""
        pieces: list[bytes] = []
        left = size
        try:
            while left > 0:
                piece = self._reader.read(left)
                if not piece:
                    self._end()
                    break
                pieces.append(piece)
                left -= len(piece)
        except self._error as exc:
            raise ArchiveDamaged(f"{self.what}: {_first_line(exc)}") from None
        return b"".join(pieces)

    def finish(self) -> None:
        """Read to the frame's end and the source's: nothing may follow the frame."""
        while self.read(CHUNK):
            pass
        if self._source.read(1):
            raise ArchiveRefused(f"{self.what} holds data after its zstd frame: readers differ on it")

    def _end(self) -> None:
        self._ended = True
        if not self._walk.done:
            raise ArchiveDamaged(f"{self.what}: its zstd frame is cut short")

    def read_source(self, size: int) -> bytes:
        """The next compressed bytes, for python-zstandard's reader: the frame's, never one beyond it."""
        data = self._source.read(size)
        inside = self._walk.feed(data)
        if inside < len(data):
            raise ArchiveRefused(f"{self.what} holds data after its zstd frame: readers differ on it")
        return data


class _Source:
    """``frame``'s source as python-zstandard reads it: ``read(size)``."""

    def __init__(self, frame: ZstdFrame) -> None:
        self.frame = frame

    def read(self, size: int) -> bytes:
        return self.frame.read_source(size)


class _Decompressor(Protocol):
    """bz2's, lzma's and (wrapped) zlib's decompressor objects: pieces of at most ``max_length`` bytes."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def needs_input(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _Gzip:
    """zlib's gzip decompressor as bz2's and lzma's: what it has not used yet is given again, unasked."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(wbits=31)  # a gzip header, one member

    @property
    def eof(self) -> bool:
        return self._zlib.eof

    @property
    def unused_data(self) -> bytes:
        return self._zlib.unused_data

    @property
    def needs_input(self) -> bool:
        return not self._zlib.unconsumed_tail

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        return self._zlib.decompress(self._zlib.unconsumed_tail + data, max(max_length, 0))


def _decompressor(kind: StreamKind) -> _Decompressor:
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    return _Gzip()


class OneStream:
    """The decompressed data of the one ``kind`` stream ``source`` holds, read forward; nothing may follow it.

    ``source`` must be seekable for :meth:`seek` (going back decompresses again from its start).
    """

    def __init__(self, source: BinaryIO, kind: StreamKind, *, what: str) -> None:
        self.source = source
        self.kind = kind
        self.what = what
        self._start = source.tell()
        self._restart()

    def _restart(self) -> None:
        self.source.seek(self._start)
        self._decompressor = _decompressor(self.kind)
        self.position = 0
        self._ended = False

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes more, ``size`` unless the stream ends first (its end checked there)."""
        pieces: list[bytes] = []
        left = size
        try:
            while left > 0 and not self._ended:
                piece = self._piece(left)
                pieces.append(piece)
                left -= len(piece)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise  # the file could not be read
            raise ArchiveDamaged(f"{self.what}: {_first_line(exc)}") from None
        data = b"".join(pieces)
        self.position += len(data)
        return data

    def _piece(self, size: int) -> bytes:
        decompressor = self._decompressor
        data = b""
        if decompressor.needs_input:
            data = self.source.read(_INPUT)
            if not data:
                raise ArchiveDamaged(f"{self.what}: its {self.kind} stream is cut short")
        piece = decompressor.decompress(data, max_length=size)
        if decompressor.eof:
            self._ended = True
            if decompressor.unused_data or self.source.read(1):
                raise ArchiveRefused(
                    f"{self.what} holds data after its {self.kind} stream: readers differ on it"
                )
        return piece

    def seek(self, offset: int) -> None:
        """Go to ``offset`` of the decompressed data."""
        if offset < self.position:
            self._restart()
        while self.position < offset:
            if not self.read(min(CHUNK, offset - self.position)):
                raise ArchiveDamaged(f"{self.what}: cannot go to {offset}, past its end")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


@contextmanager
def decompressed(path: Path, *, what: str, opened: BinaryIO | None = None) -> Iterator[OneStream | BinaryIO]:
    """``path`` opened for reading (or ``opened``, the caller's open file of it, read from its start and left
    open), decompressed by its first bytes (gzip, bzip2, xz, or a plain tar)."""
    with ExitStack() as stack:
        handle = stack.enter_context(path.open("rb")) if opened is None else opened
        handle.seek(0)
        magic = handle.read(6)
        handle.seek(0)
        if magic.startswith(b"\x1f\x8b"):
            yield OneStream(handle, "gzip", what=what)
        elif magic.startswith(b"BZh"):
            yield OneStream(handle, "bzip2", what=what)
        elif magic == b"\xfd7zXZ\x00":
            yield OneStream(handle, "xz", what=what)
        else:
            yield handle


def threads() -> int:
    """The zstd workers: as many as the cores this process may run on, one at least (multi-threaded mode)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def zstd_writer(out: Writable, level: int) -> Iterator[Writable]:
    """A stream whose bytes are written to ``out`` as one zstd frame at ``level``, on :func:`threads` workers."""
    zstandard = require("zstandard", "zstandard")
    compressor = zstandard.ZstdCompressor(level=level, threads=threads())
    with compressor.stream_writer(out, closefd=False) as writer:
        yield writer


@contextmanager
def bz2_writer(out: Writable, level: int) -> Iterator[Writable]:
    """A stream whose bytes are written to ``out`` as one bzip2 stream at ``level``."""
    compressor = bz2.BZ2Compressor(level)

    class _Writer:
        def write(self, data: bytes) -> int:
            out.write(compressor.compress(data))
            return len(data)

    yield _Writer()
    out.write(compressor.flush())


@contextmanager
def gzip_writer(out: Flushable) -> Iterator[Writable]:
    """A stream whose bytes are written to ``out`` as one gzip member without a name or a time."""
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as packed:
        yield packed
