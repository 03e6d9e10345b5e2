"""A tar archive from outside, read as a stream: bounded, and refused where two readers could read it differently.

Every tar the toolkit is handed is read through :class:`TarStream`: the tars of a conda package
(:mod:`.package`) and the LLVM archive (``llvm_archive/``). The engine unpacks them with its own reader (Rust's
``tar`` crate), so what our check reads must be what the engine will write, and reading it must cost no more
than :class:`Limits` allow, whatever the headers claim:

- every header block is read 512 bytes at a time, its checksum and fields checked by the standard library's
  :meth:`tarfile.TarInfo.frombuf`; the data of a PAX or GNU long-name header is read only when its declared
  size is within :attr:`Limits.header_bytes` (Python's tarfile reads it whole, whatever it declares);
- a member declaring more than :attr:`Limits.member_bytes`, or more than what is left of
  :attr:`Limits.total_bytes`, is refused before a byte of it is read; one whose data ends before its declared
  size is refused there (no hole is filled with zeros);
- refused as what two readers read differently: a sparse member (GNU or PAX), a member with both a PAX path and
  a GNU long name (or a PAX link path and a GNU long link), two extended headers of one kind before one member,
  a global PAX header that renames or resizes, a PAX size other than the header's, a ustar prefix in a header
  that is not POSIX ustar, a name that is not UTF-8, a non-folder name ending in ``/``, and two members at one
  path (unless both are folders);
- refused as a name with two readings: a control character (:data:`CONTROL`: C0, DEL, C1) anywhere in a
  member's name or link target, whichever field holds it (the header's, a PAX ``path`` or ``linkpath``, a GNU
  long name or long link). A NUL ends a name in C and in tar's own fields, so one reader keeps
  ``bin/.x-post-link.sh\\0.txt`` whole and another cuts it to a link script; a GNU long name is read up to its
  one closing NUL (Rust's ``tar`` drops the last byte only), so a NUL before it is in the name, and refused;
- refused as what no archive of ours holds: an absolute name, a name with ``..``, a device file, a FIFO, a
  hard link to no earlier member, tar types beyond file, folder, symlink and hard link;
- read to the end of the decompressed data: after the end-of-archive block (the first all-zero header, where
  Rust's ``tar`` stops too) only zero bytes may follow, so a member hidden behind it, which one reader would
  unpack and another not, is refused.

Where a path resolved through the archive's own symlinks leads is :func:`resolve`. Messages name a member cut
to :data:`SHOWN_CHARS` characters, with its length (:func:`shown`).
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

BLOCK = 512
CHUNK = 1 << 20
# A name in a message is cut to this many characters, its length given.
SHOWN_CHARS = 120
# Symlinks followed while a path is resolved, at most (Linux's own limit, MAXSYMLINKS); a loop counts as leaving.
MAX_HOPS = 40

Kind = Literal["file", "dir", "symlink", "hardlink"]
_KINDS: dict[bytes, Kind] = {b"0": "file", b"\0": "file", b"5": "dir", b"2": "symlink", b"1": "hardlink"}
_REFUSED_TYPES = {
    b"3": "a device file",
    b"4": "a device file",
    b"6": "a FIFO",
    b"S": "a sparse member (GNU), whose holes readers fill differently",
    b"7": "a contiguous file (tar type '7'), which readers treat differently",
}
_POSIX_MAGIC = b"ustar\x0000"
# The control characters refused in a name or link target: C0 (NUL to US) and DEL, which readers cut at or
# keep (a NUL ends a C string and a tar field), and C1 (U+0080 to U+009F). C1 is read alike by every reader (two
# UTF-8 bytes, no NUL), but it is terminal control (U+009B is CSI) in whatever shows the name, and no
# package needs it: refusing it costs nothing.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Readable(Protocol):
    """A binary stream read forward: ``read(size)`` returns ``size`` bytes, fewer only at its end."""

    def read(self, size: int, /) -> bytes: ...


class Seekable(Readable, Protocol):
    """A :class:`Readable` that can go to an offset of its data."""

    def seek(self, offset: int, /) -> int | None: ...


class ArchiveRefused(Exception):
    """An archive refused by the reader; the message names the member (cut, see :func:`shown`) and why."""


class ArchiveDamaged(ArchiveRefused):
    """An archive that is not whole: cut short, a checksum that fails, a stream that is no such stream."""


class NotATar(ArchiveDamaged):
    """What is read holds no tar header at its start: not a tar archive (or one damaged from its start)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What reading one archive may cost, at most (each is documented in docs/troubleshooting.md)."""

    total_bytes: int  # all the data read: members' declared sizes and extended headers
    member_bytes: int  # one member's declared size
    members: int  # members (extended headers not counted)
    header_bytes: int = 64 << 10  # one PAX or GNU long-name header's data
    name_bytes: int = 4096  # one path or link target, in UTF-8 (Linux's PATH_MAX)
    names_bytes: int = 64 << 20  # all names and link targets, kept for the link and duplicate checks
    ratio: int = 100  # total_bytes is at most this many times the compressed file's size ...
    floor: int = 256 << 20  # ... or this many bytes, whichever is more

    def for_file(self, compressed: int) -> Limits:
        """These limits for a file of ``compressed`` bytes: at most :attr:`ratio` times its size unpacked (a
        bomb of zeros decompresses at a few hundred MB a second), at least :attr:`floor`."""
        # not a version order: byte counts (`floor` is the least a file may unpack to)
        return replace(self, total_bytes=min(self.total_bytes, max(self.floor, self.ratio * compressed)))


@dataclass(frozen=True, kw_only=True)
class Member:
    """One member: its name normalised (``a/./b/`` is ``a/b``), its kind, declared size and link target, and
    the mode and time its header gives."""

    name: str
    kind: Kind
    size: int
    target: str  # a symlink's target as written, a hard link's member normalised; "" otherwise
    mode: int = 0o644
    mtime: int = 0

    @property
    def parts(self) -> list[str]:
        return self.name.split("/") if self.name else []


def shown(name: str) -> str:
    """``name`` for a message: quoted, cut to :data:`SHOWN_CHARS` characters with its length given."""
    if len(name) <= SHOWN_CHARS:
        return repr(name)
    return f"{name[:SHOWN_CHARS]!r}... ({len(name)} characters)"


def parts_of(name: str) -> list[str]:
    """The parts of a relative path, ``.`` and empty ones dropped."""
    return [p for p in name.split("/") if p not in ("", ".")]


def resolve(
    parts: Sequence[str], symlinks: Mapping[str, str], *, follow_last: bool, floor: int = 0
) -> list[str] | None:
    """``parts`` (from the archive's root) resolved through the archive's ``symlinks`` (normalised name ->
    target): the parts it leads to, or None where it leaves the root (``..`` above ``floor`` parts, an absolute
    target, more than :data:`MAX_HOPS` links followed, a loop)."""
    here: list[str] = []
    pending = list(parts)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if len(here) <= floor:
                return None
            here.pop()
            continue
        here.append(part)
        target = symlinks.get("/".join(here))
        if target is not None and (pending or follow_last):
            hops += 1
            if hops > MAX_HOPS or target.startswith("/"):
                return None
            here.pop()
            pending = [*target.split("/"), *pending]
    return here


class TarStream:
    """The members of the tar archive ``raw`` (decompressed, read forward), one by one, within ``limits``.

    Iterate for the members; :meth:`read` reads the current one's data (a file's), bounded by its declared
    size; what is not read is skipped (read and dropped) before the next header. Raises
    :class:`ArchiveRefused` for what the module docstring lists, and for a truncated archive.
    """

    def __init__(self, raw: Readable, limits: Limits) -> None:
        self.raw = raw
        self.limits = limits
        self.consumed = 0  # bytes of data counted against limits.total_bytes
        self.kinds: dict[str, Kind] = {}  # every member by name, for duplicates and hard links
        self._names_bytes = 0
        self._left = 0  # data of the current member not yet read
        self._padding = 0
        self._current = ""
        self._position = 0  # bytes read from raw
        self._data = (0, 0)  # the current member's data: where it starts in raw, its size

    def __iter__(self) -> Iterator[Member]:
        while True:
            self._skip_rest()
            member = self._next()
            if member is None:
                return
            yield member

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes more of the current member's data (``b""`` at its end)."""
        size = min(size, self._left)
        if size <= 0:
            return b""
        data = self._raw(size)
        if len(data) < size:
            raise ArchiveRefused(f"member {shown(self._current)}: the archive ends inside its data")
        self._left -= len(data)
        return data

    def seek(self, raw: Seekable, offset: int) -> None:
        """Go back to ``offset`` of the current member's data, ``raw`` being this stream's seekable file."""
        start, size = self._data
        if raw is not self.raw or not 0 <= offset <= size:
            raise ValueError(f"cannot seek to {offset} of member {shown(self._current)}")
        raw.seek(start + offset)
        self._position = start + offset
        self._left = size - offset

    def _raw(self, size: int) -> bytes:
        data = self.raw.read(size)
        self._position += len(data)
        return data

    def _skip_rest(self) -> None:
        while self._left:
            self.read(CHUNK)
        if self._padding:
            self._exactly(self._padding, "the padding of", self._current)
            self._padding = 0

    def _exactly(self, size: int, what: str, name: str) -> bytes:
        data = self._raw(size)
        if len(data) != size:
            raise ArchiveRefused(f"the archive ends inside {what} {shown(name) if name else 'its start'}")
        return data

    def _count(self, size: int, what: str) -> None:
        """Count ``size`` bytes read (``what`` they are, for the message) against the archive's limit."""
        if self.consumed + size > self.limits.total_bytes:
            raise ArchiveRefused(
                f"{what} would take the archive above "
                f"{self.limits.total_bytes} bytes unpacked, the most read from this archive (at most "
                f"{self.limits.ratio} times its size, at least {self.limits.floor} bytes)"
            )
        self.consumed += size

    def _extended(self, info: tarfile.TarInfo, kind: str) -> bytes:
        """The data of an extended header (PAX or GNU long name), read only within the limits."""
        if info.size > self.limits.header_bytes:
            raise ArchiveRefused(
                f"a {kind} header declares {info.size} bytes, above the {self.limits.header_bytes} one may have"
            )
        self._count(_padded(info.size), f"a {kind} header of {info.size} bytes after {shown(self._current)}")
        return self._exactly(_padded(info.size), f"the {kind} header after", self._current)[: info.size]

    def _next(self) -> Member | None:
        pending = _Pending()
        while True:
            block = self._raw(BLOCK)
            if not block or block.count(0) == BLOCK:
                if pending.kinds:
                    raise ArchiveRefused("the archive ends after an extended header, before its member")
                self._only_zeros_after_the_end()
                return None
            self._count(BLOCK, f"a header after {shown(self._current)}")  # empty members cost their headers
            try:
                info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
            except tarfile.HeaderError as exc:
                if self._position == len(block):
                    raise NotATar(f"no tar header at its start: {exc}") from None
                raise ArchiveRefused(f"a header after {shown(self._current)} is damaged: {exc}") from None
            kind = block[156:157]
            if kind not in (b"L", b"K", b"x", b"g"):
                return self._member(block, info, pending)
            if kind in pending.kinds and kind != b"g":
                raise ArchiveRefused(
                    f"two extended headers of tar type {kind.decode()!r} before one member, after "
                    f"{shown(self._current)}: readers keep different ones"
                )
            pending.kinds.add(kind)
            data = self._extended(info, "PAX" if kind in (b"x", b"g") else "GNU long-name")
            if kind == b"L":
                pending.long_name = self._text(_closed(data), "a GNU long name")
            elif kind == b"K":
                pending.long_link = self._text(_closed(data), "a GNU long link")
            elif kind == b"x":
                pending.pax = _pax_records(data, self._current)
            else:
                _check_global(_pax_records(data, self._current), self._current)

    def _only_zeros_after_the_end(self) -> None:
        """The rest of the data after the end-of-archive block, read to its end: zeros only (tar pads with
        them), each counted against the limit."""
        while chunk := self._raw(CHUNK):
            self._count(len(chunk), f"the data after the archive's end (after {shown(self._current)})")
            if chunk.count(0) != len(chunk):
                raise ArchiveRefused(
                    f"the archive holds more than zeros after its end-of-archive block (after "
                    f"{shown(self._current)}): a reader that stops there would not see it"
                )

    def _text(self, raw: bytes, what: str) -> str:
        if len(raw) > self.limits.name_bytes:
            raise ArchiveRefused(
                f"{what} of {len(raw)} bytes after {shown(self._current)}, above the {self.limits.name_bytes} "
                f"a path may have: {shown(raw[:SHOWN_CHARS].decode('utf-8', 'replace'))}"
            )
        try:
            return raw.decode()
        except UnicodeDecodeError:
            shown_raw = raw.decode("utf-8", "backslashreplace")
            raise ArchiveRefused(f"{what} {shown(shown_raw)} is not UTF-8") from None

    def _name(self, block: bytes, pending: _Pending) -> str:
        """The member's name as every reader reads it: the PAX path, else the GNU long name, else the header's."""
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix and block[257:265] != _POSIX_MAGIC:
            raise ArchiveRefused(
                f"the member after {shown(self._current)} has a ustar prefix in a header that is not POSIX ustar"
            )
        raw_name = block[0:100].split(b"\0", 1)[0]
        header_name = self._text(prefix + b"/" + raw_name if prefix else raw_name, "a name")
        pax = pending.pax
        if pending.long_name is not None and "path" in pax:
            raise ArchiveRefused(
                f"member {shown(pax['path'])} has both a PAX path and a GNU long name ({shown(pending.long_name)}): "
                "readers take different ones"
            )
        if pending.long_link is not None and "linkpath" in pax:
            raise ArchiveRefused(
                f"member {shown(pax['linkpath'])} has both a PAX link path and a GNU long link: readers take "
                "different ones"
            )
        for key in ("path", "linkpath"):
            if key in pax and len(pax[key].encode()) > self.limits.name_bytes:
                raise ArchiveRefused(
                    f"member {shown(pax[key])}: a PAX {key} above the {self.limits.name_bytes} bytes a path may have"
                )
        return pax.get("path", pending.long_name if pending.long_name is not None else header_name)

    def _member(self, block: bytes, info: tarfile.TarInfo, pending: _Pending) -> Member:
        name = self._current = self._name(block, pending)
        kind = block[156:157]
        if "size" in pending.pax and pending.pax["size"] != str(info.size):
            raise ArchiveRefused(
                f"member {shown(name)}: its PAX size ({shown(pending.pax['size'])}) is not its header's ({info.size})"
            )
        if kind in _REFUSED_TYPES or kind not in _KINDS:
            why = _REFUSED_TYPES.get(
                kind, f"of tar type {kind.decode('latin-1')!r}, not a file, folder or link"
            )
            raise ArchiveRefused(f"member {shown(name)} is {why}")
        member_kind = _KINDS[kind]
        normal = _checked_name(name, member_kind)
        target = pending.pax.get(
            "linkpath", pending.long_link if pending.long_link is not None else info.linkname
        )
        refuse_control(target, f"member {shown(name)}: its link target {shown(target)}")
        if member_kind == "hardlink":
            target = self._hard_link_target(name, target)
        elif member_kind == "symlink" and not target:
            raise ArchiveRefused(f"member {shown(name)} is a symlink to nothing")
        if info.size and member_kind != "file":
            raise ArchiveRefused(f"member {shown(name)}: a {member_kind} with {info.size} bytes of data")
        size = info.size if member_kind == "file" else 0
        self._admit(name, normal, member_kind, size, target)
        self._left, self._padding = size, _padded(size) - size
        self._data = (self._position, size)
        return Member(
            name=normal, kind=member_kind, size=size, target=target, mode=info.mode, mtime=int(info.mtime)
        )

    def _hard_link_target(self, name: str, target: str) -> str:
        if target.startswith("/") or ".." in target.split("/"):
            raise ArchiveRefused(
                f"member {shown(name)} is a hard link to {shown(target)}, outside the archive's folder"
            )
        linked = "/".join(parts_of(target))
        if self.kinds.get(linked) not in ("file", "hardlink"):
            raise ArchiveRefused(
                f"member {shown(name)} is a hard link to {shown(target)}, which is no earlier file of the archive"
            )
        return linked

    def _admit(self, name: str, normal: str, kind: Kind, size: int, target: str) -> None:
        """Count the member against the limits and remember it; refuse a second member at its path."""
        if len(self.kinds) >= self.limits.members:
            raise ArchiveRefused(f"member {shown(name)}: more than {self.limits.members} members")
        if size > self.limits.member_bytes:
            raise ArchiveRefused(
                f"member {shown(name)} declares {size} bytes, above the {self.limits.member_bytes} one member "
                "may have"
            )
        self._count(_padded(size), f"member {shown(name)}: its data of {size} bytes")
        if not normal:
            return
        earlier = self.kinds.get(normal)
        if earlier is not None and not (earlier == kind == "dir"):
            raise ArchiveRefused(
                f"member {shown(name)} ({kind}) is a second member at a path already held ({earlier}): readers "
                "keep different ones"
            )
        self._names_bytes += len(normal) + len(target)
        if self._names_bytes > self.limits.names_bytes:
            raise ArchiveRefused(f"member {shown(name)}: names above {self.limits.names_bytes} bytes in all")
        self.kinds[normal] = kind


@dataclass
class _Pending:
    """The extended headers read before a member: their tar types, a GNU long name and link, PAX records."""

    kinds: set[bytes] = field(default_factory=set)
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] = field(default_factory=dict)


def _checked_name(name: str, kind: Kind) -> str:
    """``name`` normalised, once it is relative, without ``..`` or a control character, and ends in ``/`` only
    as a folder."""
    refuse_control(name, f"member {shown(name)}: its name")
    if name.startswith("/"):
        raise ArchiveRefused(f"member {shown(name)} is an absolute path")
    if ".." in name.split("/"):
        raise ArchiveRefused(f"member {shown(name)} is a path with '..'")
    if name.endswith("/") and kind != "dir":
        raise ArchiveRefused(f"member {shown(name)} ends in '/' but is no folder: readers differ on it")
    normal = "/".join(parts_of(name))
    if not normal and kind != "dir":
        raise ArchiveRefused(f"member {shown(name)} has no name")
    return normal


def refuse_control(text: str, what: str) -> None:
    """Refuse ``text`` (``what`` it is, for the message) when it holds a :data:`CONTROL` character."""
    found = CONTROL.search(text)
    if found is not None:
        raise ArchiveRefused(
            f"{what} holds the control character {found[0]!r}: readers cut a name at a NUL or keep it whole, "
            "and a terminal obeys the others, so no package's name holds one"
        )


def _closed(data: bytes) -> bytes:
    """A GNU long name's or link's data without its closing NUL (only the last byte, as Rust's ``tar`` reads
    it: a NUL before it stays in the name, and is refused there)."""
    return data[:-1] if data.endswith(b"\0") else data


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _pax_records(data: bytes, after: str) -> dict[str, str]:
    """The records of a PAX header (``<length> <key>=<value>\\n``); a malformed one or a sparse key is refused."""
    records: dict[str, str] = {}
    position = 0
    while position < len(data):
        if data[position:].strip(b"\0") == b"":
            break
        length_text, space, _ = data[position : position + 24].partition(b" ")
        length = int(length_text) if space and length_text.isdigit() else 0
        record = data[position : position + length]
        if length <= len(length_text) + 1 or len(record) != length or not record.endswith(b"\n"):
            raise ArchiveRefused(f"a PAX header after {shown(after)} is malformed")
        key, equals, value = record[len(length_text) + 1 : -1].partition(b"=")
        if not equals:
            raise ArchiveRefused(f"a PAX header after {shown(after)} is malformed")
        try:
            key_text, value_text = key.decode(), value.decode()
        except UnicodeDecodeError:
            raise ArchiveRefused(f"a PAX header after {shown(after)} is not UTF-8") from None
        if key_text.startswith("GNU.sparse.") or key_text == "hdrcharset":
            raise ArchiveRefused(
                f"a PAX header after {shown(after)} has {shown(key_text)}: sparse members and non-UTF-8 names "
                "are read differently by different readers"
            )
        if key_text in records:
            raise ArchiveRefused(f"a PAX header after {shown(after)} holds {shown(key_text)} twice")
        records[key_text] = value_text
        position += length
    return records


def _check_global(records: Mapping[str, str], after: str) -> None:
    """A global PAX header may carry a comment (``git archive`` writes one), not a name or size for all."""
    for key in ("path", "linkpath", "size"):
        if key in records:
            raise ArchiveRefused(
                f"a global PAX header after {shown(after)} sets {key!r} for every member: readers differ on it"
            )
