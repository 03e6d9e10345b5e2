"""build/normalise.py on real files: an ELF shared object linked here twice with different run paths (the
linker's build-ids differ, the rest does not), a RECORD, text and binary files holding a build folder."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

from _tools import require_executable
from flagtree_feedstock.build.normalise import (
    BUILD_FOLDER,
    content_build_id,
    fix_records,
    replace_build_folder,
)


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
    assert content_build_id(one) == content_build_id(two)
    assert content_build_id(one) != one  # the id changed, nothing else
    assert sum(a != b for a, b in zip(content_build_id(one), one, strict=True)) <= 20
    readelf = require_executable("readelf", "binutils")
    fixed = tmp_path / "fixed.so"
    fixed.write_bytes(content_build_id(one))
    notes = subprocess.run([readelf, "-n", str(fixed)], capture_output=True, text=True, check=True).stdout
    assert "Build ID:" in notes


def test_other_files_keep_their_bytes() -> None:
    assert content_build_id(b"#!/bin/sh\necho\n") == b"#!/bin/sh\necho\n"


def test_the_build_folder_leaves_text_and_binary_files() -> None:
    folder = "/work/out/.x-staging-abc/bld/rattler-build_p_1"
    placeholder = "/" + "p" * (len(folder) - 1)
    text = f'{{"url": "file://{folder}/work/src"}}'.encode()
    binary = b"\0\x05" + folder.encode() + b"/lib/x.py\0"
    replaced = replace_build_folder({"a.json": text, "b.pyc": binary, "c": b"nothing"}, folder, placeholder)
    assert replaced == {
        "a.json": f'{{"url": "file://{BUILD_FOLDER}/work/src"}}'.encode(),
        "b.pyc": b"\0\x05" + placeholder.encode() + b"/lib/x.py\0",
    }


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
    contents = {
        f"{site}/pkg-1.0.dist-info/RECORD": record.encode(),
        f"{site}/pkg-1.0.dist-info/direct_url.json": url,
        f"{site}/pkg/__init__.py": b"",
        "bin/tool": script,
    }
    changed = {f"{site}/pkg-1.0.dist-info/direct_url.json": url, "bin/tool": script}
    (fixed,) = fix_records(contents, changed).values()

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
