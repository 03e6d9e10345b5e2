"""builder/landing/payload_rewrite.py on real files: an ELF shared object linked here twice with different run paths (the
linker's build-ids differ, the rest does not), a RECORD, text and binary files holding a build folder, each
passed in pieces as the landing streams them."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

from _tools import require_executable
from flagtree_feedstock.builder.landing.payload_rewrite import (
    BUILD_FOLDER,
    TextSniffer,
    content_build_id,
    fix_record,
    replaced,
)


def _with_content_build_id(data: bytes) -> bytes:
    """``data`` with the build-id content_build_id gives it, as the landing writes it over the spooled file."""
    found = content_build_id(lambda at, size: data[at : at + size], len(data))
    if found is None:
        return data
    offset, new = found
    return data[:offset] + new + data[offset + len(new) :]


def _link(tmp_path: Path, run_path: str) -> bytes:
    cc = require_executable("cc", "gcc")
    source = tmp_path / "lib.c"
    source.write_text("int answer(void) { return 42; }\n")
    out = tmp_path / f"lib{len(run_path)}-{abs(hash(run_path))}.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-Wl,--build-id=sha1",
            f"-Wl,-rpath,{run_path}",
            "-o",
            str(out),
            str(source),
        ],
        check=True,
    )
    return out.read_bytes()


def _same_length_run_path(data: bytes, old: str, new: str) -> bytes:
    """What patchelf does to a run path that fits: written over in place."""
    assert len(old) == len(new)
    return data.replace(old.encode(), new.encode())


def test_a_build_id_from_the_content_is_the_same_for_the_same_file(tmp_path: Path) -> None:
    # Two links whose run paths differ (as the host prefix does), then made the same (as the engine's rewrite
    # to $ORIGIN does): the linker's build-ids still differ, the content ones do not.
    one = _same_length_run_path(_link(tmp_path, "/tmp/aaaa/prefix"), "/tmp/aaaa/prefix", "$ORIGIN/../lib/x")
    two = _same_length_run_path(_link(tmp_path, "/tmp/bbbb/prefix"), "/tmp/bbbb/prefix", "$ORIGIN/../lib/x")
    assert one != two
    assert _with_content_build_id(one) == _with_content_build_id(two)
    assert _with_content_build_id(one) != one  # the id changed, nothing else
    assert sum(a != b for a, b in zip(_with_content_build_id(one), one, strict=True)) <= 20
    readelf = require_executable("readelf", "binutils")
    fixed = tmp_path / "fixed.so"
    fixed.write_bytes(_with_content_build_id(one))
    notes = subprocess.run([readelf, "-n", str(fixed)], capture_output=True, text=True, check=True).stdout
    assert "Build ID:" in notes


def test_other_files_keep_their_bytes() -> None:
    script = b"#!/bin/sh\necho\n"
    assert content_build_id(lambda at, size: script[at : at + size], len(script)) is None


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)] or [b""]


def test_the_build_folder_leaves_text_and_binary_files_in_any_pieces() -> None:
    """What bytes.replace does to the whole file, whatever the pieces it comes in (a match cut in two
    among them), and text told from binary as the pieces pass."""
    folder = "/work/out/.x-staging-abc/bld/rattler-build_p_1"
    placeholder = "/" + "p" * (len(folder) - 1)
    text = f'{{"url": "file://{folder}/work/src", "also": "{folder}{folder}"}}'.encode()
    binary = b"\0\x05" + folder.encode() + b"/lib/x.py\0" + folder.encode()
    for size in (1, 2, 7, len(folder) - 1, len(folder), 1000):
        for data, is_text in ((text, True), (binary, False), (b"nothing", True)):
            sniffer = TextSniffer()
            for piece in _pieces(data, size):
                sniffer.see(piece)
            assert sniffer.done() is is_text
            new = (BUILD_FOLDER if is_text else placeholder).encode()
            hits = [0]
            out = b"".join(replaced(_pieces(data, size), folder.encode(), new, hits))
            assert out == data.replace(folder.encode(), new)
            assert hits[0] == data.count(folder.encode())
    assert b"".join(replaced([b"aaa", b"aa"], b"aa", b"b", [0])) == b"aaaaa".replace(b"aa", b"b")


def test_a_utf8_character_cut_between_pieces_is_text_and_one_cut_at_the_end_is_not() -> None:
    sniffer = TextSniffer()
    for piece in _pieces("é".encode() * 3, 1):
        sniffer.see(piece)
    assert sniffer.done()
    cut = TextSniffer()
    cut.see("é".encode()[:1])
    assert not cut.done()


def test_record_lines_follow_the_files() -> None:
    record = (
        "../../../bin/tool,sha256=old,10\n"
        "../../../bin/gone,sha256=old,10\n"
        "pkg-1.0.dist-info/direct_url.json,sha256=old,5\n"
        "pkg/__init__.py,sha256=kept,0\n"
        "pkg-1.0.dist-info/RECORD,,\n"
    )
    url = b'{"url": "file:///usr/src/build"}'
    script = b"#!/_placehold_placehold/bin/python\n"
    site = "lib/python3.11/site-packages"
    files = {
        f"{site}/pkg-1.0.dist-info/RECORD",
        f"{site}/pkg-1.0.dist-info/direct_url.json",
        f"{site}/pkg/__init__.py",
        "bin/tool",
    }
    changed = {
        f"{site}/pkg-1.0.dist-info/direct_url.json": (hashlib.sha256(url).digest(), len(url)),
        "bin/tool": (hashlib.sha256(script).digest(), len(script)),
    }
    fixed = fix_record(f"{site}/pkg-1.0.dist-info/RECORD", record.encode(), files, changed)

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    assert (
        fixed.decode().splitlines()
        == [
            f"../../../bin/tool,sha256={digest(script)},{len(script)}",  # site-packages/../../../bin/tool = bin/tool
            "../../../bin/gone,,",  # not in the package (a noarch package's entry point, written at install)
            f"pkg-1.0.dist-info/direct_url.json,sha256={digest(url)},{len(url)}",
            "pkg/__init__.py,sha256=kept,0",
            "pkg-1.0.dist-info/RECORD,,",
        ]
    )
