"""Hypothesis strategies for hostile conda packages, and what rattler's own extraction makes of one.

A package is drawn in layers, each with the ways two readers could differ there (issue 41 item 2):

- its members (:func:`members`): ``info/index.json`` and ``info/paths.json`` listing the payload, then payload
  files (executable or not), folders, symlinks and hard links from a small pool of names, so that names meet;
  links in ``info/``, hard links between ``info/`` and the payload, a second member at one path;
- each member's header (:func:`tar_stream`): ustar or GNU, a PAX header, a GNU long name (the same name or
  another one), both, a sparse type, a PAX size other than the header's, a PAX link path, a GNU long link;
  members after the two zero blocks that end the archive, bytes after it;
- control characters (:data:`CONTROLS`: NUL, newline, ESC, DEL, C1's CSI) in names and link targets, so in
  every field that holds one: the header's name and link name, a PAX ``path`` and ``linkpath``, a GNU long
  name and long link, and a zip entry's name; modes beyond 0644 and 0755 (world-writable, setuid, setgid,
  sticky), which the copy must not keep;
- the compression: for a ``.conda``'s tars, zstd in one frame or several, skippable frames before, between or
  after, bytes after the last frame (:func:`zstd_stream`); for a ``.tar.bz2``, one bzip2 stream, two, or bytes
  after it;
- a ``.conda``'s zip (:func:`conda_zip`): its three entries in any order, an extra ``*.tar.zst`` entry and a
  nested ``sub/info-<stem>.tar.zst``, a name held twice, deflated entries, data descriptors, zip64 extra fields,
  bytes before the first entry or after the end record, names flagged UTF-8 or not, an entry its central
  directory does not list.

:func:`rattler_view` extracts a package with ``rattler.package_streaming.extract`` (the installer's reading)
and describes what it wrote: every file with its bytes' sha256 and executable bit, every symlink with its
target, every folder.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import stat
import struct
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import zstandard
from hypothesis import strategies as st

from _hostile_packages import BLOCK, INDEX, STEM, data

# What a reader saw of a package: path -> ("file", sha256, executable) | ("symlink", target, False) | ("dir", "", False)
View = dict[str, tuple[str, str, bool]]

NAMES = ["lib/a", "lib/b", "bin/t", "share/x/y", "a", "lib", "share/x"]
TARGETS = ["a", "lib/a", "b", "../a", "x", "t", "../../escape", "/etc/passwd", "info/index.json", ".."]
# Control characters put into names and link targets: C0 (NUL, newline, ESC), DEL and C1 (CSI).
CONTROLS = ["\0", "\n", "\x1b", "\x7f", "\x9b"]
# A name whose NUL cuts it to a link script for one reader (issue 47 item 4), and each control in a name.
CONTROL_NAMES = ["bin/.evil-post-link.sh\0.txt", *(f"lib/a{c}b" for c in CONTROLS)]
CONTROL_TARGETS = [f"a{c}b" for c in CONTROLS]
# Modes the copy must make normal (0644 or 0755), beside the plain ones.
FILE_MODES = [0o644, 0o755, 0o600, 0o700, 0o666, 0o777, 0o4755, 0o2775]
DIR_MODES = [0o755, 0o755, 0o777, 0o1777, 0o2775]


@dataclass
class Entry:
    """One tar member as drawn, before it is written: its kind, name, data, link target, mode and header form."""

    kind: str  # file, dir, symlink, hardlink
    name: str
    content: bytes = b""
    target: str = ""
    mode: int = 0o644
    # ustar, gnu, pax, pax-other, longname, longname-other, both, sparse, pax-size, pax-link, longlink
    form: str = "ustar"
    extra_after_end: bool = False  # written after the two zero blocks that end the archive


@dataclass
class Drawn:
    """A drawn package: its file name's suffix and bytes, and how it was drawn (shown when an example fails)."""

    suffix: str
    content: bytes
    notes: list[str] = field(default_factory=list)


def _header(
    name: str, *, kind: bytes, size: int = 0, linkname: str = "", mode: int = 0o644, gnu: bool = False
) -> bytes:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = linkname
    info.mode = mode
    return info.tobuf(tarfile.GNU_FORMAT if gnu else tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")


def _pax(records: dict[str, str]) -> bytes:
    body = b""
    for key, value in records.items():
        record = f" {key}={value}\n".encode()
        length = len(record) + 1
        while len(str(length)) + len(record) != length:
            length = len(str(length)) + len(record)
        body += str(length).encode() + record
    return _header("././@PaxHeader", kind=tarfile.XHDTYPE, size=len(body)) + data(body)


def _longname(name: str, kind: bytes = tarfile.GNUTYPE_LONGNAME) -> bytes:
    raw = name.encode() + b"\0"
    return _header("././@LongLink", kind=kind, size=len(raw), gnu=True) + data(raw)


_TYPES = {
    "file": tarfile.REGTYPE,
    "dir": tarfile.DIRTYPE,
    "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE,
}


def _member_bytes(entry: Entry) -> bytes:
    """The header blocks (and data) of ``entry`` in its drawn form."""
    kind = _TYPES[entry.kind]
    size = len(entry.content) if entry.kind == "file" else 0
    name, prefix = entry.name, b""
    if entry.form in ("pax", "pax-other"):
        prefix = _pax({"path": entry.name if entry.form == "pax" else entry.name + "-pax"})
        name = entry.name if entry.form == "pax" else entry.name + "-header"
    elif entry.form in ("longname", "longname-other"):
        prefix = _longname(entry.name if entry.form == "longname" else entry.name + "-long")
    elif entry.form == "both":
        prefix = _longname(entry.name + "-long") + _pax({"path": entry.name})
    elif entry.form == "pax-size":
        prefix = _pax({"size": str(size + BLOCK)})
    elif entry.form == "pax-link" and entry.target:
        prefix = _pax({"linkpath": entry.target})
    elif entry.form == "longlink" and entry.target:
        prefix = _longname(entry.target, tarfile.GNUTYPE_LONGLINK)
    if entry.form == "sparse":
        kind = tarfile.GNUTYPE_SPARSE
    header = _header(
        name, kind=kind, size=size, linkname=entry.target, mode=entry.mode, gnu=entry.form != "ustar"
    )
    return prefix + header + (data(entry.content) if size else b"")


def tar_stream(entries: list[Entry], *, after_end: bytes = b"") -> bytes:
    """The tar of ``entries``: those marked ``extra_after_end`` after the end-of-archive blocks, then ``after_end``."""
    body = b"".join(_member_bytes(e) for e in entries if not e.extra_after_end)
    later = b"".join(_member_bytes(e) for e in entries if e.extra_after_end)
    return body + bytes(2 * BLOCK) + later + (bytes(2 * BLOCK) if later else b"") + after_end


_FORMS = (
    ["ustar"] * 12
    + ["gnu"] * 3
    + ["pax"] * 2
    + ["pax-other", "longname", "longname-other", "both", "sparse", "pax-size", "pax-link", "longlink"]
)
_INFO_NAMES = ["info/extra", "info/index.json"]


@st.composite
def payload(draw: st.DrawFn, *, hostile: bool = True) -> list[Entry]:
    """Payload members from :data:`NAMES`: files, folders, symlinks and hard links, each in a drawn form (plain
    ustar headers, all before the end blocks, unless ``hostile``)."""
    entries: list[Entry] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["file", "file", "file", "dir", "symlink", "hardlink"]))
        pool = _INFO_NAMES if draw(st.integers(0, 11)) == 0 else NAMES
        name = draw(st.sampled_from(CONTROL_NAMES if hostile and draw(st.integers(0, 7)) == 0 else pool))
        form = draw(st.sampled_from(_FORMS)) if hostile else "ustar"
        targets = CONTROL_TARGETS if hostile and draw(st.integers(0, 5)) == 0 else TARGETS
        files = [e.name for e in entries if e.kind == "file"]
        if kind == "file":
            content = draw(st.binary(max_size=40))
            mode = draw(st.sampled_from(FILE_MODES))
            entries.append(Entry(kind, name, content=content, mode=mode, form=form))
        elif kind == "dir":
            entries.append(Entry(kind, name, mode=draw(st.sampled_from(DIR_MODES)), form=form))
        elif kind == "symlink":
            entries.append(Entry(kind, name, target=draw(st.sampled_from(targets)), mode=0o777, form=form))
        else:  # mostly to an earlier file; else to anything, info/ included
            pool = files if files and draw(st.integers(0, 4)) else [*NAMES, *_INFO_NAMES, "info/paths.json"]
            pool = targets if targets is CONTROL_TARGETS else pool
            entries.append(Entry(kind, name, target=draw(st.sampled_from(pool)), form=form))
        entries[-1].extra_after_end = hostile and draw(st.integers(0, 11)) == 0
    return entries


def _paths_json(entries: list[Entry], unlisted: set[str]) -> bytes:
    listed = [
        {
            "_path": e.name,
            "path_type": "softlink" if e.kind == "symlink" else "hardlink",
            "size_in_bytes": len(e.content),
        }
        for e in entries
        if e.kind != "dir" and e.name not in unlisted and not e.name.startswith("info/")
    ]
    return json.dumps({"paths_version": 1, "paths": listed}).encode()


@st.composite
def members(draw: st.DrawFn, *, hostile: bool = True) -> tuple[list[Entry], list[Entry]]:
    """The info members and the payload members of a package."""
    body = draw(payload(hostile=hostile))
    index = json.dumps(INDEX).encode()
    info = [
        Entry(
            "file",
            "info/index.json",
            content=index,
            form=draw(st.sampled_from(_FORMS)) if hostile else "ustar",
        )
    ]
    info.append(Entry("file", "info/paths.json", content=_paths_json(body, set())))
    twist = draw(
        st.sampled_from(
            ["none"] * 12 + ["info-symlink", "info-hardlink", "info-twice", "info-dir", "info-dir"]
        )
    )
    if twist == "info-symlink":
        info.append(Entry("symlink", "info/link.json", target="../lib/a", mode=0o777))
    elif twist == "info-hardlink":
        info.append(Entry("hardlink", "info/about.json", target="info/index.json"))
    elif twist == "info-twice":
        info.append(Entry("file", "info/index.json", content=json.dumps(INDEX | {"name": "other"}).encode()))
    elif twist == "info-dir":
        info.insert(0, Entry("dir", "info", mode=0o755))
    return info, body


def bzip2_stream(raw: bytes, how: str) -> bytes:
    """``raw`` as bzip2: one stream, the data split over two streams, or one stream with bytes after it."""
    if how == "two-streams":
        cut = len(raw) // 2
        return bz2.compress(raw[:cut]) + bz2.compress(raw[cut:])
    if how == "bytes-after":
        return bz2.compress(raw) + b"garbage"
    return bz2.compress(raw)


_SKIPPABLE = struct.pack("<II", 0x184D2A50, 4) + b"skip"


def zstd_stream(raw: bytes, how: str) -> bytes:
    """``raw`` as zstd: one frame (its size not declared, as a stream writer's), two frames, a skippable frame
    before, between or after, or bytes after the frame."""
    params = zstandard.ZstdCompressionParameters.from_level(3, write_content_size=0)
    compress = zstandard.ZstdCompressor(compression_params=params).compress
    cut = len(raw) // 2
    return {
        "one-frame": lambda: compress(raw),
        "two-frames": lambda: compress(raw[:cut]) + compress(raw[cut:]),
        "skippable-before": lambda: _SKIPPABLE + compress(raw),
        "skippable-between": lambda: compress(raw[:cut]) + _SKIPPABLE + compress(raw[cut:]),
        "skippable-after": lambda: compress(raw) + _SKIPPABLE,
        "bytes-after": lambda: compress(raw) + b"garbage",
    }[how]()


@dataclass
class ZipEntry:
    name: bytes
    content: bytes
    deflated: bool = False
    descriptor: bool = False
    zip64: bool = False
    utf8: bool = False
    listed: bool = True


def zip_file(entries: list[ZipEntry], *, before: bytes = b"", after: bytes = b"") -> bytes:
    """A zip written entry by entry as drawn: local headers in order, then the central directory and its end."""
    out = io.BytesIO()
    out.write(before)
    directory = io.BytesIO()
    count = 0
    for entry in entries:
        offset = out.tell()
        if entry.deflated:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
            stored = compressor.compress(entry.content) + compressor.flush()
        else:
            stored = entry.content
        crc = zlib.crc32(entry.content)
        flags = (0x08 if entry.descriptor else 0) | (0x800 if entry.utf8 else 0)
        method = 8 if entry.deflated else 0
        extra = struct.pack("<HHQQ", 1, 16, len(entry.content), len(stored)) if entry.zip64 else b""
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if entry.zip64 else (len(stored), len(entry.content))
        local_crc, local_sizes = (0, (0, 0)) if entry.descriptor and not entry.zip64 else (crc, sizes)
        out.write(
            struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45 if entry.zip64 else 20, flags, method, 0, 0x21,
                        local_crc, *local_sizes, len(entry.name), len(extra))
            + entry.name + extra + stored
        )  # fmt: skip
        if entry.descriptor:
            out.write(struct.pack("<4sIII", b"PK\x07\x08", crc, len(stored), len(entry.content)))
        if entry.listed:
            count += 1
            directory.write(
                struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45 if entry.zip64 else 20,
                            45 if entry.zip64 else 20, flags, method, 0, 0x21, crc, *sizes, len(entry.name),
                            len(extra), 0, 0, 0, 0, offset)
                + entry.name + extra
            )  # fmt: skip
    start, table = out.tell(), directory.getvalue()
    out.write(table + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(table), start, 0))
    return out.getvalue() + after


_ZIP_TWISTS = ["none"] * 16 + [
    "extra-tar-zst",
    "nested-info",
    "name-twice",
    "deflated",
    "descriptor",
    "zip64",
    "bytes-before",
    "bytes-after",
    "utf8-name",
    "cp437-name",
    "control-name",
    "unlisted",
    "reordered",
]
_ZSTD_TWISTS = ["one-frame"] * 12 + [
    "two-frames",
    "skippable-before",
    "skippable-between",
    "skippable-after",
    "bytes-after",
]
_BZ2_TWISTS = ["one-stream"] * 4 + ["two-streams", "bytes-after"]


@st.composite
def packages(draw: st.DrawFn) -> Drawn:
    """A whole package file, ``.conda`` or ``.tar.bz2``, drawn layer by layer (the module's docstring)."""
    # Half the packages are hostile in their headers, compression and zip; the other half only in what they
    # hold (links, names that meet), so that many are read and compared with rattler's reading, not refused.
    hostile = draw(st.booleans())
    info, body = draw(members(hostile=hostile))
    suffix = draw(st.sampled_from([".conda", ".conda", ".tar.bz2"]))
    after_end = draw(st.sampled_from([b""] * 5 + [bytes(BLOCK), b"trailing"])) if hostile else b""
    notes = [f"info={info}", f"payload={body}", f"after_end={after_end!r}"]
    if suffix == ".tar.bz2":
        how = draw(st.sampled_from(_BZ2_TWISTS)) if hostile else "one-stream"
        notes.append(f"bz2={how}")
        return Drawn(suffix, bzip2_stream(tar_stream([*info, *body], after_end=after_end), how), notes)
    info_how = draw(st.sampled_from(_ZSTD_TWISTS)) if hostile else "one-frame"
    pkg_how = draw(st.sampled_from(_ZSTD_TWISTS)) if hostile else "one-frame"
    twist = draw(st.sampled_from(_ZIP_TWISTS)) if hostile else "none"
    notes += [f"zstd info={info_how} pkg={pkg_how}", f"zip={twist}"]
    info_tar = zstd_stream(tar_stream(info, after_end=after_end), info_how)
    pkg_tar = zstd_stream(tar_stream(body), pkg_how)
    entries = [
        ZipEntry(b"metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode()),
        ZipEntry(f"pkg-{STEM}.tar.zst".encode(), pkg_tar),
        ZipEntry(f"info-{STEM}.tar.zst".encode(), info_tar),
    ]
    before = after = b""
    # A second reading of info/ that walks out of the prefix, for the entries a reader should not take.
    evil = zstd_stream(
        tar_stream(
            [Entry("file", "info/paths.json", content=_paths_json([Entry("file", "../../escape")], set()))]
        ),
        "one-frame",
    )
    if twist == "extra-tar-zst":
        entries.append(ZipEntry(b"zz.tar.zst", evil))
    elif twist == "nested-info":
        entries.append(ZipEntry(f"sub/info-{STEM}.tar.zst".encode(), evil))
    elif twist == "name-twice":
        entries.append(ZipEntry(f"info-{STEM}.tar.zst".encode(), evil))
    elif twist in ("deflated", "descriptor", "zip64"):
        index = draw(st.integers(0, 2))
        setattr(entries[index], twist, True)
    elif twist == "bytes-before":
        before = draw(st.sampled_from([b"x", b"PK\x03\x04junk", bytes(30)]))
    elif twist == "bytes-after":
        after = draw(st.sampled_from([b"x", b"PK\x03\x04junk"]))
    elif twist == "utf8-name":
        entries[1].name, entries[1].utf8 = f"pkg-{STEM}é.tar.zst".encode(), True
    elif twist == "cp437-name":
        entries[1].name = f"pkg-{STEM}".encode() + b"\x82.tar.zst"
    elif twist == "control-name":  # a NUL cuts the name for one reader; the others are kept by all
        index, control = draw(st.integers(0, 2)), draw(st.sampled_from(CONTROLS))
        entries[index].name = entries[index].name.replace(b".", control.encode() + b".", 1)
    elif twist == "unlisted":
        entries.insert(draw(st.integers(0, 3)), ZipEntry(f"info-{STEM}.tar.zst".encode(), evil, listed=False))
    elif twist == "reordered":
        entries = draw(st.permutations(entries))
    return Drawn(suffix, zip_file(entries, before=before, after=after), notes)


def rattler_view(package: Path, dest: Path) -> View:
    """What ``rattler.package_streaming.extract`` writes for ``package`` into the new folder ``dest``."""
    from rattler.package_streaming import extract  # noqa: PLC0415 - py-rattler, imported where it is used

    extract(package, dest)
    return folder_view(dest)


def folder_view(root: Path) -> View:
    """Every file (sha256, executable bit), symlink (target) and folder under ``root``, by relative path."""
    view: View = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                view[relative] = ("symlink", str(path.readlink()), False)
            elif stat.S_ISDIR(mode):
                view[relative] = ("dir", "", False)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                view[relative] = ("file", digest, bool(mode & stat.S_IXUSR))
    return view
