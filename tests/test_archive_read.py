"""The archive layer's package reader (``_archive.open_package``): every member streamed, ``info/`` first, bounded,
and one reading only: what rattler would read otherwise than Python (zip entries in order, every ``*.tar.zst``
entry, several zstd frames, members hidden after a tar's end, a second bzip2 stream) is refused in one line.

The packages are made here from raw blocks (tests/_hostile_packages.py), the zips by :func:`_zip`, which writes
each local header and central record as asked (zip64 fields as rattler writes them, a data descriptor, a method).
"""

from __future__ import annotations

import bz2
import json
import struct
import tarfile
import zlib
from pathlib import Path

import pytest
import zstandard

from _hostile_packages import (
    STEM,
    Part,
    conda,
    data,
    header,
    info_members,
    member,
    pax,
    symlink,
    tar_bz2,
    tar_chunks,
    zstd,
)
from flagtree_feedstock._archive import DamagedPackage, UnsafePackage, open_package

META = json.dumps({"conda_pkg_format_version": 2}).encode()
INFO = "info-" + STEM + ".tar.zst"
PKG = "pkg-" + STEM + ".tar.zst"


def _zip(
    entries: list[tuple[str, bytes]],
    *,
    zip64: bool = False,
    flags: int = 0,
    method: int = 0,
    crc_in_directory: int | None = None,
    before: bytes = b"",
    between: bytes = b"",
    after: bytes = b"",
) -> bytes:
    """A zip of ``entries`` stored (``method`` and ``flags`` written as given), every one listed; ``zip64``
    writes the sizes in a zip64 field of both headers, as rattler does."""
    out, directory = bytearray(before), bytearray()
    for index, (name, content) in enumerate(entries):
        if index:
            out += between
        offset, raw, crc = len(out), name.encode(), zlib.crc32(content)
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(content), len(content))
        extra = struct.pack("<HHQQ", 1, 16, len(content), len(content)) if zip64 else b""
        local = (45, flags, method, 0, 0x21, crc, *sizes, len(raw), len(extra))
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *local) + raw + extra + content
        central = (45, 45, flags, method, 0, 0x21, crc_in_directory if crc_in_directory is not None else crc)
        directory += struct.pack("<4sHHHHHHI", b"PK\x01\x02", *central)
        directory += struct.pack("<IIHHHHHII", *sizes, len(raw), len(extra), 0, 0, 0, 0o644 << 16, offset)
        directory += raw + extra
    start = len(out)
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), start, 0)
    return bytes(out + directory + end) + after


def _package(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _read(path: Path) -> list[tuple[str, str, str, int, str, bytes]]:
    """Every member of the package at ``path``: (section, name, kind, size, target, data)."""
    found = []
    with open_package(path) as package:
        for item in package:
            data = b""
            while chunk := package.read(3):
                assert len(chunk) <= 3
                data += chunk
            assert len(data) == item.size
            found.append((item.section, item.name, item.kind, item.size, item.target, data))
    return found


def _payload() -> list[Part]:
    return [*member("lib/a.txt", b"alpha\n"), *symlink("lib/b", "a.txt"), *member("lib/c.bin", bytes(700))]


def test_a_conda_is_read_info_first_whatever_the_zip_s_order(tmp_path: Path) -> None:
    """conda-package-handling and rattler put pkg- before info- in the zip: the members still come info/
    first; the stem, the metadata and every member's fields are what the archive says."""
    for order in ([INFO, PKG], [PKG, INFO]):
        tars = {INFO: zstd(info_members(["lib/a.txt"])), PKG: zstd(_payload())}
        path = _package(
            tmp_path, f"{STEM}.conda", _zip([("metadata.json", META), *((n, tars[n]) for n in order)])
        )
        with open_package(path) as package:
            assert (package.format, package.stem, package.metadata) == ("conda", STEM, META)
        found = _read(path)
        assert [(s, n, k) for s, n, k, *_ in found] == [
            ("info", "info/index.json", "file"),
            ("info", "info/paths.json", "file"),
            ("pkg", "lib/a.txt", "file"),
            ("pkg", "lib/b", "symlink"),
            ("pkg", "lib/c.bin", "file"),
        ]
        assert found[3][4] == "a.txt"
        assert found[2][5] == b"alpha\n"
        assert found[4][3] == 700


def test_a_tar_bz2_is_read_in_its_order_each_member_in_its_section(tmp_path: Path) -> None:
    path = _package(tmp_path, f"{STEM}.tar.bz2", tar_bz2([*info_members(["lib/a.txt"]), *_payload()]))
    with open_package(path) as package:
        assert (package.format, package.stem, package.metadata) == ("tar.bz2", STEM, None)
        modes = {item.name: (item.mode, item.mtime) for item in package}
    assert modes["lib/b"] == (0o755, 0)  # tests/_hostile_packages.py's headers
    assert [(s, n) for s, n, *_ in _read(path)][1:3] == [("info", "info/paths.json"), ("pkg", "lib/a.txt")]


def test_rattler_s_zip64_headers_are_read(tmp_path: Path) -> None:
    """rattler-build writes every size in a zip64 field (0xFFFFFFFF in the header): read as the sizes."""
    content = _zip(
        [("metadata.json", META), (PKG, zstd(_payload())), (INFO, zstd(info_members()))], zip64=True
    )
    assert len(_read(_package(tmp_path, f"{STEM}.conda", content))) == 5


def _entries(pkg: bytes | None = None) -> list[tuple[str, bytes]]:
    return [("metadata.json", META), (INFO, zstd(info_members())), (PKG, pkg or zstd(_payload()))]


def _frames(parts: list[Part]) -> bytes:
    """The tar of ``parts`` as two zstd frames, cut in the middle (zstd's own tool reads both)."""
    raw = b"".join(tar_chunks(parts))
    return zstandard.ZstdCompressor().compress(raw[:1024]) + zstandard.ZstdCompressor().compress(raw[1024:])


def _hidden_after_the_end(parts: list[Part]) -> bytes:
    """A tar whose end-of-archive blocks are followed by another member (Rust's tar stops at the first)."""
    return b"".join(tar_chunks(parts)) + b"".join(tar_chunks(member("lib/hidden", b"x")))


# case -> (the .conda's zip entries, a piece of the one-line refusal)
CONDA_REFUSED = {
    "third-tar-zst-entry": (
        [*_entries(), ("zz.tar.zst", zstd(_payload()))],
        "the zip holds 'zz.tar.zst': a .conda holds metadata.json, info-<stem>.tar.zst and pkg-<stem>.tar.zst only",
    ),
    "nested-info-entry": (
        [*_entries(), (f"sub/{INFO}", zstd(info_members()))],
        f"the zip holds 'sub/{INFO}': a .conda holds",
    ),
    "second-pkg-entry": (
        [*_entries(), ("pkg-other-1-0.tar.zst", zstd(_payload()))],
        "the zip holds two pkg tars: 'pkg-other-1-0.tar.zst' is the second",
    ),
    "a-stem-with-a-folder": (
        [
            ("metadata.json", META),
            ("info-x/y.tar.zst", zstd(info_members())),
            ("pkg-x/y.tar.zst", zstd(_payload())),
        ],
        "the zip holds 'info-x/y.tar.zst': a .conda holds",
    ),
    "two-stems": (
        [("metadata.json", META), (INFO, zstd(info_members())), ("pkg-other-1-0.tar.zst", zstd(_payload()))],
        f"its info and pkg tars name two packages, {STEM!r} and 'other-1-0'",
    ),
    "two-zstd-frames": (_entries(_frames(_payload())), f"{PKG} holds data after its zstd frame"),
    "a-skippable-frame-first": (
        _entries(struct.pack("<II", 0x184D2A50, 4) + b"skip" + zstd(_payload())),
        f"{PKG} starts with a skippable zstd frame",
    ),
    "bytes-after-the-frame": (_entries(zstd(_payload()) + b"\0"), f"{PKG} holds data after its zstd frame"),
    "a-member-after-the-tar-s-end": (
        _entries(zstandard.ZstdCompressor().compress(_hidden_after_the_end(_payload()))),
        "the archive holds more than zeros after its end-of-archive block (after 'lib/c.bin')",
    ),
    "an-info-member-in-the-pkg-tar": (
        _entries(zstd([*_payload(), *member("info/extra.json", b"{}")])),
        "member 'info/extra.json' does not belong in the pkg tar of a .conda",
    ),
}


@pytest.mark.parametrize("case", CONDA_REFUSED)
def test_a_conda_rattler_would_read_otherwise_is_refused_naming_what(case: str, tmp_path: Path) -> None:
    entries, why = CONDA_REFUSED[case]
    path = _package(tmp_path, f"{STEM}.conda", _zip(entries))
    with pytest.raises(UnsafePackage) as caught:
        _read(path)
    assert why in str(caught.value)
    assert "\n" not in str(caught.value)


ZIP_REFUSED = {
    "deflated": ({"method": 8}, "is compressed (method 8): a .conda stores its entries"),
    "data-descriptor": ({"flags": 0x08}, "keeps its sizes after its data (a data descriptor)"),
    "encrypted": ({"flags": 0x01}, "has flags 0x0001"),
    "crc-differs-in-the-directory": (
        {"crc_in_directory": 0},
        "says other in its local header than in its central directory",
    ),
    "bytes-before": ({"before": b"x" * 40}, "it is not a zip: no zip entry at its start"),
    "bytes-between": ({"between": b"junk"}, "the zip holds data that is no entry after 'metadata.json'"),
    "bytes-after": ({"after": b"\0"}, "the zip has 1 bytes after its end"),
}


@pytest.mark.parametrize("case", ZIP_REFUSED)
def test_a_zip_not_laid_out_as_one_is_refused(case: str, tmp_path: Path) -> None:
    options, why = ZIP_REFUSED[case]
    path = _package(tmp_path, f"{STEM}.conda", _zip(_entries(), **options))  # type: ignore[arg-type]
    with pytest.raises(DamagedPackage) as caught:
        _read(path)
    assert why in str(caught.value)


def test_a_tar_bz2_with_a_second_stream_or_a_hidden_member_is_refused(tmp_path: Path) -> None:
    whole = tar_bz2([*info_members(), *_payload()])
    for content, why in (
        (whole + bz2.compress(b"more"), "the .tar.bz2 holds data after its bzip2 stream"),
        (whole + b"\0", "the .tar.bz2 holds data after its bzip2 stream"),
        (
            bz2.compress(_hidden_after_the_end([*info_members(), *_payload()])),
            "the archive holds more than zeros after its end-of-archive block",
        ),
    ):
        with pytest.raises(UnsafePackage) as caught:
            _read(_package(tmp_path, f"{STEM}.tar.bz2", content))
        assert why in str(caught.value)


def test_zeros_after_a_tar_s_end_are_read_as_its_end(tmp_path: Path) -> None:
    """tar pads its end with zero blocks, any number of them: read to the end of the data, accepted."""
    raw = b"".join(tar_chunks(_payload())) + bytes(10240)
    path = _package(tmp_path, f"{STEM}.conda", _zip(_entries(zstandard.ZstdCompressor().compress(raw))))
    assert len(_read(path)) == 5


def test_a_damaged_entry_is_named_by_its_checksum(tmp_path: Path) -> None:
    """A flipped byte in the pkg tar: whatever the damage makes of the tar, the file is damaged, not unsafe."""
    content = bytearray(conda(info_members(), _payload()))
    at = content.index(zstd(_payload())) + 20
    content[at] ^= 0xFF
    with pytest.raises(DamagedPackage) as caught:
        _read(_package(tmp_path, f"{STEM}.conda", bytes(content)))
    assert type(caught.value) is DamagedPackage
    assert str(caught.value) == f"{PKG!r} fails its checksum"


def test_an_info_link_is_read_as_a_link(tmp_path: Path) -> None:
    """The reader gives links as they are (the check refuses one in info/: channel/package_reader.py)."""
    info = [*info_members(), header("info/x", kind=tarfile.SYMTYPE, linkname="index.json")]
    found = _read(_package(tmp_path, f"{STEM}.conda", conda(info, _payload())))
    assert ("info", "info/x", "symlink", 0, "index.json", b"") in found


def _long(kind: bytes, text: str) -> list[Part]:
    """A GNU long name (``L``) or long link (``K``) header holding ``text`` and its closing NUL."""
    raw = text.encode() + b"\0"
    return [header("././@LongLink", kind=kind, size=len(raw), posix=False), raw + bytes(-len(raw) % 512)]


SCRIPT = "bin/.evil-post-link.sh"
# Every field that holds a name or a link target, each with a control character in it (issue 47 item 4): the
# members, and what the refusal names.
CONTROLS: dict[str, tuple[list[Part], str]] = {
    "pax-path-nul": (
        [*pax({"path": f"{SCRIPT}\0.txt"}), *member("placeholder", b"x")],
        f"member '{SCRIPT}\\x00.txt': its name holds the control character '\\x00'",
    ),
    "pax-linkpath-nul": (
        [*pax({"linkpath": "a\0b"}), *symlink("lib/l", "placeholder")],
        "member 'lib/l': its link target 'a\\x00b' holds the control character '\\x00'",
    ),
    "gnu-long-name-nul": (
        [*_long(tarfile.GNUTYPE_LONGNAME, f"{SCRIPT}\0.txt"), *member("placeholder", b"x")],
        f"member '{SCRIPT}\\x00.txt': its name holds the control character '\\x00'",
    ),
    "gnu-long-link-nul": (
        [*_long(tarfile.GNUTYPE_LONGLINK, "a\0b"), *symlink("lib/l", "placeholder")],
        "member 'lib/l': its link target 'a\\x00b' holds the control character '\\x00'",
    ),
    "header-name-newline": (
        member("lib/a\nb", b"x"),
        "member 'lib/a\\nb': its name holds the control character '\\n'",
    ),
    "header-name-escape": (
        member("lib/\x1b[2Ja", b"x"),
        "member 'lib/\\x1b[2Ja': its name holds the control character '\\x1b'",
    ),
    "header-name-del": (member("lib/a\x7f", b"x"), "its name holds the control character '\\x7f'"),
    "header-name-c1-csi": (member("lib/a\x9b2J", b"x"), "its name holds the control character '\\x9b'"),
    "header-linkname-tab": (
        symlink("lib/l", "a\tb"),
        "member 'lib/l': its link target 'a\\tb' holds the control character '\\t'",
    ),
    "header-folder-newline": (
        [header("share/d\n", kind=tarfile.DIRTYPE)],
        "its name holds the control character '\\n'",
    ),
}


@pytest.mark.parametrize("suffix", [".conda", ".tar.bz2"])
@pytest.mark.parametrize("case", CONTROLS)
def test_a_control_character_in_any_name_or_link_field_is_refused(
    case: str, suffix: str, tmp_path: Path
) -> None:
    """A NUL cuts a name for one reader and not for another (PAX `bin/.x-post-link.sh\\0.txt` is a link script
    to one, a .txt to the other); the other controls are refused alike, C1 too (docs/security.md says why)."""
    parts, why = CONTROLS[case]
    info = info_members()
    content = conda(info, parts) if suffix == ".conda" else tar_bz2([*info, *parts])
    path = _package(tmp_path, f"{STEM}{suffix}", content)
    with pytest.raises(UnsafePackage) as caught:
        _read(path)
    assert why in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_gnu_long_name_is_read_to_its_closing_nul_and_a_long_name_with_none_whole(tmp_path: Path) -> None:
    """The closing NUL GNU tar and Python write is not part of the name; a long name written without one (its
    size its name's) is read whole, as Rust's ``tar`` reads it."""
    name = "lib/" + "n" * 150
    closed = _long(tarfile.GNUTYPE_LONGNAME, name)
    raw = name.encode()
    unclosed = [header("././@LongLink", kind=tarfile.GNUTYPE_LONGNAME, size=len(raw), posix=False), data(raw)]
    for parts in (closed, unclosed):
        path = _package(tmp_path, f"{STEM}.tar.bz2", tar_bz2([*info_members(), *parts, *member("x", b"x")]))
        assert [n for _, n, *_ in _read(path)][-1] == name


@pytest.mark.parametrize("control", ["\0", "\n", "\x9b"])
def test_a_zip_entry_name_with_a_control_character_is_refused(control: str, tmp_path: Path) -> None:
    """In the name of any of the three entries a .conda holds (flagged UTF-8: read as cp437, no byte is C1):
    the name is read as rattler reads it, and a NUL ends it for a C reader."""
    for index in range(3):
        entries = _entries()
        name, content = entries[index]
        entries[index] = (name.replace(".", f"{control}.", 1), content)
        path = _package(tmp_path, f"{STEM}.conda", _zip(entries, flags=0x800))
        with pytest.raises(UnsafePackage) as caught:
            _read(path)
        assert f"holds the control character {control!r}" in str(caught.value)
        assert "\n" not in str(caught.value)


def test_a_tar_bz2_file_name_with_a_control_character_is_refused(tmp_path: Path) -> None:
    """Its stem names the copy the toolkit writes of it."""
    path = _package(tmp_path, "x.tar.bz2", tar_bz2(info_members()))
    with pytest.raises(UnsafePackage) as caught, open_package(path, "evil\n-1-0.tar.bz2"):
        pass
    assert "its file name 'evil\\n-1-0.tar.bz2' holds the control character '\\n'" in str(caught.value)
