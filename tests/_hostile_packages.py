"""Hostile conda packages and tar archives, made at test time from raw tar headers (tarfile, bz2, zstandard).

A tar archive here is a list of blocks: :func:`header` writes one header as Python's tarfile would (its
checksum right), whatever it declares; :func:`data` pads its bytes to whole blocks. Large members are
streamed (:class:`Zeros`), so a bomb of gigabytes costs the test a few seconds of zstd and a few KB of disk.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import zstandard

BLOCK = 512
NAME = "evil"
STEM = f"{NAME}-1-0"
INDEX = {
    "name": NAME,
    "version": "1",
    "build": "0",
    "build_number": 0,
    "depends": [],
    "subdir": "noarch",
    "noarch": "generic",
}


@dataclass(frozen=True)
class Zeros:
    """``size`` zero bytes of member data, written in chunks."""

    size: int


Part = bytes | Zeros


def header(
    name: str, *, kind: bytes = tarfile.REGTYPE, size: int = 0, linkname: str = "", posix: bool = True
) -> bytes:
    """One tar header block declaring what it is given (no data follows it here)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = linkname
    info.mode = 0o755 if kind in (tarfile.DIRTYPE, tarfile.SYMTYPE) else 0o644
    block = info.tobuf(tarfile.USTAR_FORMAT if posix else tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    assert len(block) == BLOCK, f"{name!r}: more than one header block"
    return block


def raw_header(name: bytes, *, kind: bytes, size: int) -> bytes:
    """A header whose name field is written as given (up to 100 bytes) and whose size may exceed 8 GiB."""
    block = bytearray(header("placeholder", kind=kind))
    block[0:100] = name.ljust(100, b"\0")[:100]
    if size >= 8 << 30:  # GNU's base-256 size field, as tarfile writes it for large members
        block[124:136] = bytes([0x80]) + size.to_bytes(11, "big")
    else:
        block[124:136] = f"{size:011o}".encode() + b"\0"
    block[148:156] = b"        "
    block[148:156] = f"{sum(block):06o}".encode() + b"\0 "
    return bytes(block)


def data(content: bytes) -> bytes:
    return content + b"\0" * (-len(content) % BLOCK)


def member(name: str, content: bytes) -> list[Part]:
    return [header(name, size=len(content)), data(content)]


def symlink(name: str, target: str) -> list[Part]:
    return [header(name, kind=tarfile.SYMTYPE, linkname=target)]


def pax(records: dict[str, str]) -> list[Part]:
    """A PAX extended header holding ``records``."""
    body = b""
    for key, value in records.items():
        record = f" {key}={value}\n".encode()
        length = len(record) + 1
        while len(str(length)) + len(record) != length:  # the length counts its own digits
            length = len(str(length)) + len(record)
        body += str(length).encode() + record
    return [header("././@PaxHeader", kind=tarfile.XHDTYPE, size=len(body)), data(body)]


def gnu_long_name(name: str) -> list[Part]:
    raw = name.encode() + b"\0"
    return [header("././@LongLink", kind=tarfile.GNUTYPE_LONGNAME, size=len(raw), posix=False), data(raw)]


def info_members(paths: Iterable[str] = (), *, index: bytes | None = None, extra: bool = True) -> list[Part]:
    """``info/index.json`` and ``info/paths.json`` listing ``paths``."""
    listed = [{"_path": p, "path_type": "hardlink", "sha256": "0" * 64, "size_in_bytes": 0} for p in paths]
    parts = member("info/index.json", index if index is not None else json.dumps(INDEX).encode())
    if extra:
        parts += member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode())
    return parts


def tar_chunks(parts: Iterable[Part], *, end: bool = True) -> Iterable[bytes]:
    for part in parts:
        if isinstance(part, Zeros):
            left = part.size
            while left:
                chunk = min(left, 1 << 20)
                yield bytes(chunk)
                left -= chunk
            if part.size % BLOCK:
                yield bytes(-part.size % BLOCK)
        else:
            yield part
    if end:
        yield bytes(2 * BLOCK)


def channel_with(tmp_path: Path, filename: str, content: bytes) -> tuple[Path, Path]:
    """A channel folder ``tmp_path/chan`` holding ``noarch/filename``; the folder and the package."""
    channel = tmp_path / "chan"
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    package = channel / "noarch" / filename
    package.write_bytes(content)
    return channel, package


def tar_bz2(parts: Iterable[Part]) -> bytes:
    compressor = bz2.BZ2Compressor(9)
    out = [compressor.compress(chunk) for chunk in tar_chunks(parts)]
    return b"".join([*out, compressor.flush()])


def zstd(parts: Iterable[Part]) -> bytes:
    """The tar of ``parts`` as one zstd frame, which does not declare its size (as a stream writer's)."""
    params = zstandard.ZstdCompressionParameters.from_level(3, write_content_size=0)
    out = io.BytesIO()
    compressor = zstandard.ZstdCompressor(compression_params=params)
    with compressor.stream_writer(out, closefd=False) as writer:
        for chunk in tar_chunks(parts):
            writer.write(chunk)
    return out.getvalue()


def conda(info: Iterable[Part], pkg: Iterable[Part] | bytes) -> bytes:
    """A ``.conda`` file: metadata.json and the two zstd tars (stored, as conda's writers store them); ``pkg``
    may be the pkg tar's zstd frame itself."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        archive.writestr(f"pkg-{STEM}.tar.zst", pkg if isinstance(pkg, bytes) else zstd(pkg))
        archive.writestr(f"info-{STEM}.tar.zst", zstd(info))
    return out.getvalue()


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def package_with_files(name: str, files: dict[str, bytes]) -> bytes:
    """A well-formed ``.tar.bz2`` of the package ``name`` (``INDEX``'s version and build) holding ``files``, each
    listed in its ``info/paths.json``: the toy dependency the border's tests serve (its files a link or an
    activation script, and what the toy recipes copy)."""
    listed = [
        {"_path": path, "path_type": "hardlink", "sha256": sha256(content), "size_in_bytes": len(content)}
        for path, content in files.items()
    ]
    parts: list[Part] = [
        *member("info/index.json", json.dumps(INDEX | {"name": name}).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    for path, content in files.items():
        parts += member(path, content)
    return tar_bz2(parts)


def empty_files(count: int, *, prefix: str = "lib/f", name_length: int = 0) -> Iterable[Part]:
    """``count`` empty files, each its own header, named ``<prefix><number>`` (padded to ``name_length``
    characters with a GNU long name where that is over 100); made from one template, fast."""
    template = bytearray(header("placeholder"))
    for number in range(count):
        name = f"{prefix}{number:08d}".ljust(name_length, "n").encode()
        if len(name) > 100:
            yield from gnu_long_name(name.decode())
        block = bytearray(template)
        block[0:100] = name[:100].ljust(100, b"\0")
        block[148:156] = b"        "
        block[148:156] = f"{sum(block):06o}".encode() + b"\0 "
        yield bytes(block)


def stored_zip(entries: Iterable[tuple[str, bytes, bool]], *, after: bytes = b"") -> bytes:
    """A zip of stored entries written in order, each ``(name, content, listed)``: an entry not ``listed`` is
    in the file but not in its central directory; ``after`` follows the end record."""
    out, directory, count = io.BytesIO(), io.BytesIO(), 0
    for name, content, listed in entries:
        offset, raw, crc = out.tell(), name.encode(), zlib.crc32(content)
        fields = (20, 0, 0, 0, 0x21, crc, len(content), len(content), len(raw), 0)
        out.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *fields) + raw + content)
        if listed:
            count += 1
            directory.write(
                struct.pack("<4sH", b"PK\x01\x02", 20)
                + struct.pack("<HHHHHIIIHHHHHII", *fields, 0, 0, 0, 0, offset)
                + raw
            )
    start, table = out.tell(), directory.getvalue()
    out.write(table + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(table), start, 0))
    return out.getvalue() + after
