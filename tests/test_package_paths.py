"""A package's paths, checked before anything indexes, installs, uploads or builds against it.

The smallest package that makes py-rattler 0.28 write outside the prefix (issue 28) is kept here twice: once
installed by py-rattler itself with our check bypassed, inside ``tmp_path`` only, to document the engine's
behaviour for an upstream report; once through each of our console scripts, which refuse it in one line
naming the package and the member, having written nothing.

The package: ``info/paths.json`` lists ``x/../../target``; the package holds ``x``, a symlink to ``d1/d2``,
the folder ``d1/d2`` (a file in it) and a file ``target``. py-rattler links each listed path from the unpacked
package (where ``x/../..`` is the package's folder, through the symlink) to the same path under the prefix,
creating the missing ``x`` there as a folder first: ``prefix/x/../../target`` is the prefix's parent's
``target``, which it replaces.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rattler
from rattler.index import index_fs

from _hostile_packages import (
    INDEX,
    STEM,
    Part,
    channel_with,
    conda,
    gnu_long_name,
    header,
    info_members,
    member,
    pax,
    sha256,
    stored_zip,
    symlink,
    tar_bz2,
    zstd,
)
from _toy import build_args, make_empty_channel, native_args, run_toolkit

PLANTED = b"planted by a package\n"


def _reproducer() -> list[Part]:
    listed = {"_path": "x/../../target", "path_type": "hardlink", "sha256": sha256(PLANTED)}
    paths = {"paths_version": 1, "paths": [listed | {"size_in_bytes": len(PLANTED)}]}
    return [
        *member("info/index.json", json.dumps(INDEX).encode()),
        *member("info/paths.json", json.dumps(paths).encode()),
        *symlink("x", "d1/d2"),
        *member("d1/d2/keep", b""),
        *member("target", PLANTED),
    ]


def _victim(tmp_path: Path) -> Path:
    """The file the package aims at: beside the prefix tmp_path/a/b/prefix, where the package lands it."""
    victim = tmp_path / "a" / "b" / "target"
    victim.parent.mkdir(parents=True)
    victim.write_text("the original\n")
    return victim


def test_py_rattler_writes_outside_the_prefix_when_our_check_is_bypassed(tmp_path: Path) -> None:
    """The engine's behaviour, for an upstream report: py-rattler 0.28 installs the reproducer's file to
    the prefix's parent, replacing the file there. If this fails, py-rattler resolves paths safely now."""
    channel, _ = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(_reproducer()))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    victim = _victim(tmp_path)
    prefix = tmp_path / "a" / "b" / "prefix"
    records = asyncio.run(
        rattler.solve([rattler.Channel(channel.resolve().as_uri())], ["evil"], platforms=["noarch"])
    )
    asyncio.run(
        rattler.install(
            records, prefix, cache_dir=tmp_path / "cache", execute_link_scripts=False, show_progress=False
        )
    )
    assert victim.read_bytes() == PLANTED
    assert (prefix / "x").is_dir()


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("flagtree-feedstock: error:")]
    return line


@pytest.mark.parametrize("command", ["index", "install", "upload", "build", "build-into"])
def test_every_command_refuses_the_reproducer_and_writes_nothing(command: str, tmp_path: Path) -> None:
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(_reproducer()))
    if command != "index":  # a channel as another tool indexed it
        asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    indexed = {p: p.read_bytes() for p in channel.rglob("repodata.json")}
    victim = _victim(tmp_path)
    prefix = tmp_path / "a" / "b" / "prefix"
    argv = {
        "index": ["channel", "index", str(channel)],
        "install": ["channel", "install", str(channel), "evil", "--prefix", str(prefix)],
        "upload": ["upload", str(channel), "--to", "prefix", "--channel", "c", "--url", "http://127.0.0.1:9"],
        "build": ["build", "--render-only", "-c", channel.resolve().as_uri()],
        # the output folder already holds it: the build stops before its first step
        "build-into": build_args("toy-multi", channel, *native_args(make_empty_channel(tmp_path / "empty"))),
    }[command]
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: its info/paths.json lists "
        "'x/../../target': not a relative path without '..'"
    )
    assert victim.read_text() == "the original\n"
    assert not prefix.exists()
    assert {p: p.read_bytes() for p in channel.rglob("repodata.json")} == indexed
    assert sorted(channel.rglob("*.tar.bz2")) + sorted(channel.rglob("*.conda")) == [package]


def _good() -> list[Part]:
    """What real packages hold: folders, versioned library links, a hard link, a link to another package."""
    listed = ["lib/libz.so.1.3", "lib/libz.so.1", "lib/libz.so", "lib/libblas.so.3", "bin/tool", "bin/alias"]
    return [
        *info_members(listed),
        header("lib", kind=tarfile.DIRTYPE),
        *member("lib/libz.so.1.3", b"\x7fELF"),
        *symlink("lib/libz.so.1", "libz.so.1.3"),
        *symlink("lib/libz.so", "./libz.so.1"),
        *symlink("lib/libblas.so.3", "libopenblas.so.0"),  # a file of the package it depends on
        *member("bin/tool", b"#!/bin/sh\n"),
        header("bin/alias", kind=tarfile.LNKTYPE, linkname="bin/tool"),
    ]


@pytest.mark.parametrize("suffix", [".tar.bz2", ".conda"])
def test_a_package_with_links_inside_its_prefix_is_indexed(suffix: str, tmp_path: Path) -> None:
    parts = _good()
    root, info = header("./", kind=tarfile.DIRTYPE), header("info", kind=tarfile.DIRTYPE)
    # A .conda's tars as tar writers make them: the info tar with its folder, both with the root folder.
    content = tar_bz2(parts) if suffix == ".tar.bz2" else conda([root, info, *parts[:4]], [root, *parts[4:]])
    channel, _ = channel_with(tmp_path, f"{STEM}{suffix}", content)
    done = run_toolkit(["channel", "index", str(channel)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{STEM}{suffix}" in (channel / "noarch" / "repodata.json").read_text()


# (the package's members, the refusal after "<package> is refused, and was not used: ")
BAD_PACKAGES: dict[str, tuple[list[Part], str]] = {
    "absolute-symlink": (
        [*info_members(["lib/libz.so"]), *symlink("lib/libz.so", "/etc/passwd")],
        "member 'lib/libz.so' is a symlink to the absolute path '/etc/passwd'",
    ),
    "symlink-up": (
        [*info_members(["lib/passwd"]), *symlink("lib/passwd", "../../etc/passwd")],
        "member 'lib/passwd' is a symlink to '../../etc/passwd', which leads outside the prefix",
    ),
    # As text lib/up/../../etc is etc, inside; through the package's own link up -> .. it is the prefix's parent.
    "symlink-through-a-symlink": (
        [*info_members(["lib/up", "lib/x"]), *symlink("lib/up", ".."), *symlink("lib/x", "up/../../etc")],
        "member 'lib/x' is a symlink to 'up/../../etc', which leads outside the prefix",
    ),
    "symlink-loop": (
        [*info_members(["a", "b"]), *symlink("a", "b"), *symlink("b", "a")],
        "member 'a' is a symlink to 'b', which leads outside the prefix",
    ),
    "member-below-a-symlink": (
        [*info_members(["x/file"]), *symlink("x", "lib"), *member("x/file", b"")],
        "member 'x/file' lies below the package's symlink 'x': the installer would write through it",
    ),
    "dotdot-member": (
        [*info_members(), *member("lib/../../evil", b"")],
        "member 'lib/../../evil' is a path with '..'",
    ),
    "absolute-member": (
        [*info_members(), *member("/tmp/evil", b"")],
        "member '/tmp/evil' is an absolute path",
    ),
    "paths-json-absolute": (
        [*info_members(["/etc/passwd"])],
        "its info/paths.json lists '/etc/passwd': not a relative path without '..'",
    ),
    "paths-json-not-held": (
        [*info_members(["lib/ghost"])],
        "its info/paths.json lists 'lib/ghost', which is no file or link the package holds",
    ),
    "hard-link-to-nothing": (
        [*info_members(["bin/h"]), header("bin/h", kind=tarfile.LNKTYPE, linkname="bin/nothing")],
        "member 'bin/h' is a hard link to 'bin/nothing', which is no earlier file of the archive",
    ),
    "pax-path-and-gnu-long-name": (
        [
            *info_members(),
            *gnu_long_name("lib/seen-by-tarfile"),
            *pax({"path": "lib/seen-by-rust"}),
            *member("lib/x", b""),
        ],
        (
            "member 'lib/seen-by-rust' has both a PAX path and a GNU long name ('lib/seen-by-tarfile'): readers "
            "take different ones"
        ),
    ),
    "index-json-twice": (
        [*info_members(), *member("info/index.json", json.dumps(INDEX | {"name": "other"}).encode())],
        (
            "member 'info/index.json' (file) is a second member at a path already held (file): readers keep "
            "different ones"
        ),
    ),
    "file-and-link": (
        [*info_members(["lib/a"]), *member("lib/a", b""), *symlink("lib/a", "b")],
        "member 'lib/a' (symlink) is a second member at a path already held (file): readers keep different ones",
    ),
    "entry-point-out": (
        [
            *info_members(),
            *member(
                "info/link.json", json.dumps({"noarch": {"entry_points": ["../../evil = m:f"]}}).encode()
            ),
        ],
        "its info/link.json names the entry point '../../evil = m:f', not a plain file name",
    ),
    "legacy-files-dotdot": (
        [*info_members(extra=False), *member("info/files", b"lib/ok\n../../evil\n"), *member("lib/ok", b"")],
        "its info/files lists '../../evil': not a relative path without '..'",
    ),
    "fifo": ([*info_members(), header("lib/pipe", kind=tarfile.FIFOTYPE)], "member 'lib/pipe' is a FIFO"),
    "device": (
        [*info_members(), header("lib/tty", kind=tarfile.CHRTYPE)],
        "member 'lib/tty' is a device file",
    ),
}


@pytest.mark.parametrize("case", BAD_PACKAGES)
def test_a_package_that_leads_out_or_reads_two_ways_is_refused_naming_the_member(
    case: str, tmp_path: Path
) -> None:
    parts, why = BAD_PACKAGES[case]
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(parts))
    done = run_toolkit(["channel", "index", str(channel)], tmp_path)
    assert done.returncode == 9, done.stderr
    line = _one_error(done)
    assert line.startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: {why} (fix: "
    ), line
    assert not (channel / "noarch" / "repodata.json").exists()


def test_a_conda_with_a_flipped_byte_where_no_reader_looks_is_damaged(tmp_path: Path) -> None:
    """Every zip member passes its CRC-32, metadata.json too (the tars alone would not show this one)."""
    content = conda(_good()[:4], _good()[4:])
    flipped = content.replace(b'"conda_pkg_format_version"', b'"conda_pkg_format_versioN"', 1)
    assert flipped != content
    channel, package = channel_with(tmp_path, f"{STEM}.conda", flipped)
    done = run_toolkit(["channel", "index", str(channel)], tmp_path)
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {package} is damaged ('metadata.json' fails its checksum): it is not a whole "
        "conda package"
    )


def _linked_paths_json(kind: bytes) -> list[Part]:
    """The reproducer with its paths.json a member elsewhere, ``info/paths.json`` a link to it (issue 37)."""
    reproducer = _reproducer()
    evil = reproducer[3]  # the reproducer's paths.json, as data
    return [
        *reproducer[:2],
        header("lib/listing.json", size=len(evil.rstrip(b"\0"))),
        evil,
        header("info/paths.json", kind=kind, linkname="lib/listing.json" if kind == tarfile.LNKTYPE else "../lib/listing.json"),
        *reproducer[4:],
    ]  # fmt: skip


def _hidden_info_entry() -> bytes:
    """A .conda whose zip holds a second info tar, the reproducer's, that its central directory does not list:
    Python reads a harmless package, a reader of the entries in order reads the reproducer (issue 37)."""
    reproducer = _reproducer()
    harmless = [*info_members(["d1/d2/keep", "target"])]
    return stored_zip(
        [
            ("metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode(), True),
            (f"info-{STEM}.tar.zst", zstd(harmless), True),
            (f"pkg-{STEM}.tar.zst", zstd(reproducer[4:]), True),
            (f"info-{STEM}.tar.zst", zstd(reproducer[:4]), False),
        ]
    )


# (the package file's name and content, the refusal after "<package> is refused, and was not used: ")
OUT_OF_THE_PREFIX: dict[str, tuple[str, bytes, str]] = {
    "paths-json-hard-link": (
        f"{STEM}.tar.bz2",
        tar_bz2(_linked_paths_json(tarfile.LNKTYPE)),
        (
            "member 'info/paths.json' is a hard link: the installer would read info/ through it; a package's info/ "
            "holds files only"
        ),
    ),
    "paths-json-symlink": (
        f"{STEM}.tar.bz2",
        tar_bz2(_linked_paths_json(tarfile.SYMTYPE)),
        (
            "member 'info/paths.json' is a symbolic link: the installer would read info/ through it; a package's "
            "info/ holds files only"
        ),
    ),
    "hidden-info-entry": (
        f"{STEM}.conda",
        _hidden_info_entry(),
        (
            "the zip holds data its central directory does not list after its last entry: a reader of its entries "
            "in order reads it"
        ),
    ),
    "has-prefix-dotdot": (
        f"{STEM}.tar.bz2",
        tar_bz2(
            [
                *info_members(extra=False),
                *member("info/files", b"lib/ok\n"),
                *member("info/has_prefix", b'/opt/anaconda1anaconda2anaconda3 text "../../target"\n'),
                *member("lib/ok", b""),
            ]
        ),
        "its info/has_prefix lists '../../target': not a relative path without '..'",
    ),
}


@pytest.mark.parametrize("command", ["install", "build"])
@pytest.mark.parametrize("case", OUT_OF_THE_PREFIX)
def test_a_package_the_engine_would_read_otherwise_is_refused_by_install_and_build(
    case: str, command: str, tmp_path: Path
) -> None:
    """Issue 37: what the engine reads of the package (through a link in info/, an entry only a reader in
    order sees, info/has_prefix) is what is checked; the package is refused before the engine installs it."""
    filename, content, why = OUT_OF_THE_PREFIX[case]
    channel, package = channel_with(tmp_path, filename, content)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    victim = _victim(tmp_path)
    prefix = tmp_path / "a" / "b" / "prefix"
    argv = {
        "install": ["channel", "install", str(channel), "evil", "--prefix", str(prefix)],
        "build": build_args("toy-multi", tmp_path / "out", *native_args(channel)),
    }[command]
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: {why} (fix: "
    )
    assert victim.read_text() == "the original\n"
    assert not prefix.exists()
    assert not (tmp_path / "out").exists()


ZIP_READ_TWO_WAYS: dict[str, tuple[Callable[[bytes, bytes, bytes], bytes], str]] = {
    "entry-before-the-listed-ones": (
        lambda meta, info, pkg: stored_zip([("x", b"hidden", False), ("metadata.json", meta, True), (f"info-{STEM}.tar.zst", info, True), (f"pkg-{STEM}.tar.zst", pkg, True)]),
        "the zip holds data its central directory does not list before 'metadata.json': a reader of its entries in order reads it",
    ),
    "name-twice": (
        lambda meta, info, pkg: stored_zip([("metadata.json", meta, True), ("metadata.json", meta, True), (f"info-{STEM}.tar.zst", info, True), (f"pkg-{STEM}.tar.zst", pkg, True)]),
        "the zip holds 'metadata.json' twice: readers keep different ones",
    ),
    "data-after-the-end": (
        lambda meta, info, pkg: stored_zip([("metadata.json", meta, True), (f"info-{STEM}.tar.zst", info, True), (f"pkg-{STEM}.tar.zst", pkg, True)], after=b"PK\x03\x04more"),
        "the zip has 8 bytes after its end: readers differ on them",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", ZIP_READ_TWO_WAYS)
def test_a_conda_whose_zip_reads_two_ways_is_refused(case: str, tmp_path: Path) -> None:
    make, why = ZIP_READ_TWO_WAYS[case]
    meta = json.dumps({"conda_pkg_format_version": 2}).encode()
    content = make(meta, zstd(info_members(["lib/ok"])), zstd(member("lib/ok", b"")))
    channel, package = channel_with(tmp_path, f"{STEM}.conda", content)
    done = run_toolkit(["channel", "index", str(channel)], tmp_path)
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: {why} (fix: "
    )
    assert not (channel / "noarch" / "repodata.json").exists()


def test_a_conda_laid_out_as_one_is_read(tmp_path: Path) -> None:
    """The same entries, each listed, in order, nothing after: indexed (the walk refuses no whole package)."""
    meta = json.dumps({"conda_pkg_format_version": 2}).encode()
    entries = [("metadata.json", meta), (f"info-{STEM}.tar.zst", zstd(info_members(["lib/ok"]))), (f"pkg-{STEM}.tar.zst", zstd(member("lib/ok", b"")))]  # fmt: skip
    channel, _ = channel_with(tmp_path, f"{STEM}.conda", stored_zip([(*e, True) for e in entries]))
    done = run_toolkit(["channel", "index", str(channel)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{STEM}.conda" in (channel / "noarch" / "repodata.json").read_text()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, list[str]]]:
    """A loopback HTTP server of the folder ``tmp_path/served``, a remote channel: the folder, its URL and the
    paths each request asked for."""
    folder = tmp_path / "served"
    (folder / "noarch").mkdir(parents=True)
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, format: str, *args: object) -> None:
            asked.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


REMOTE = {
    "paths-json-dotdot": (
        f"{STEM}.tar.bz2",
        tar_bz2(_reproducer()),
        "its info/paths.json lists 'x/../../target': not a relative path without '..'",
    ),
    **OUT_OF_THE_PREFIX,
}


@pytest.mark.parametrize("case", REMOTE)
def test_a_remote_channel_s_package_is_checked_before_the_engine_installs_it(
    case: str, tmp_path: Path, served: tuple[Path, str, list[str]]
) -> None:
    """Issue 37: `channel install DIR evil -c http://...` downloads the package the solve took from the remote
    channel into a folder of its own and checks it there: refused, nothing installed, nothing written."""
    folder, url, _ = served
    filename, content, why = REMOTE[case]
    (folder / "noarch" / filename).write_bytes(content)
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    local = make_empty_channel(tmp_path / "local")
    victim = _victim(tmp_path)
    prefix = tmp_path / "a" / "b" / "prefix"
    done = run_toolkit(
        ["channel", "install", str(local), "evil", "-c", url, "--prefix", str(prefix)], tmp_path
    )
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {url}/noarch/{filename} is refused, and was not used: {why} (fix: do not "
        "install from this channel; tell its owner"
    )
    assert victim.read_text() == "the original\n"
    assert not prefix.exists()


@pytest.mark.parametrize("suffix", [".tar.bz2", ".conda"])
def test_a_remote_channel_s_package_is_installed_from_the_checked_copy(
    suffix: str, tmp_path: Path, served: tuple[Path, str, list[str]]
) -> None:
    """The package is downloaded once, by the toolkit; the engine installs the checked copy, and asks the
    server for nothing but the channel's index."""
    folder, url, asked = served
    parts = _good()
    content = tar_bz2(parts) if suffix == ".tar.bz2" else conda(parts[:4], parts[4:])
    (folder / "noarch" / f"{STEM}{suffix}").write_bytes(content)
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    local = make_empty_channel(tmp_path / "local")
    prefix = tmp_path / "prefix"
    done = run_toolkit(
        ["channel", "install", str(local), "evil", "-c", url, "--prefix", str(prefix)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (prefix / "lib" / "libz.so.1.3").read_bytes() == b"\x7fELF"
    assert [p for p in asked if p.endswith(suffix)] == [f"/noarch/{STEM}{suffix}"]


@pytest.mark.parametrize("field", ["sha256", "size"])
def test_a_remote_package_that_is_not_what_its_index_says_is_not_used(
    field: str, tmp_path: Path, served: tuple[Path, str, list[str]]
) -> None:
    folder, url, _ = served
    content = tar_bz2(_good())
    (folder / "noarch" / f"{STEM}.tar.bz2").write_bytes(content)
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    repodata = folder / "noarch" / "repodata.json"
    index = json.loads(repodata.read_text())
    index["packages"][f"{STEM}.tar.bz2"][field] = "0" * 64 if field == "sha256" else len(content) - 1
    repodata.write_text(json.dumps(index))
    local = make_empty_channel(tmp_path / "local")
    prefix = tmp_path / "prefix"
    done = run_toolkit(
        ["channel", "install", str(local), "evil", "-c", url, "--prefix", str(prefix)], tmp_path
    )
    assert done.returncode == 9, done.stderr
    shown = f"flagtree-feedstock: error: {url}/noarch/{STEM}.tar.bz2"
    assert (
        _one_error(done)
        == {
            "sha256": f"{shown} has the sha256 {sha256(content)}, its channel index says {'0' * 64}: not used (fix: "
            "download again later (the channel may be changing); if it stays so, tell the channel's owner)",
            "size": f"{shown} is larger than the {len(content) - 1} bytes its channel index gives: not downloaded "
            "further, not used (fix: do not install from this channel; tell its owner)",
        }[field]
    )
    assert not prefix.exists()


def _toy_dep(*parts: Part) -> bytes:
    """toy-dep, toy-host's host requirement, holding ``parts`` (listed in its paths.json unless they list)."""
    index = member("info/index.json", json.dumps(INDEX | {"name": "toy-dep"}).encode())
    return tar_bz2([*index, *parts])


def _planted(root: Path, *skip: Path) -> list[Path]:
    """Every file ``target`` under ``root`` (but ``skip``) that holds what the reproducer plants."""
    return [
        p
        for p in root.rglob("target")
        if not any(s in p.parents for s in skip) and p.is_file() and p.read_bytes() == PLANTED
    ]


def test_a_build_checks_the_host_requirement_it_would_take_from_a_remote_channel(
    tmp_path: Path, served: tuple[Path, str, list[str]]
) -> None:
    """Issue 37: `build -c http://...` of toy-host, whose host requirement toy-dep the remote channel serves
    as the reproducer: the engine's solve is checked before its install, and the build stops there."""
    folder, url, _ = served
    (folder / "noarch" / "toy-dep-1-0.tar.bz2").write_bytes(_toy_dep(*_reproducer()[2:]))
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    out = tmp_path / "out"
    done = run_toolkit(
        build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "-c", url), tmp_path
    )
    assert done.returncode == 9, done.stderr
    assert _one_error(done).startswith(
        f"flagtree-feedstock: error: {url}/noarch/toy-dep-1-0.tar.bz2 is refused, and was not used: its "
        "info/paths.json lists 'x/../../target': not a relative path without '..' (fix: do not install from "
        "this channel; tell its owner"
    )
    # The engine's package cache holds the package unpacked (its solve reads run exports there): its own member.
    assert _planted(tmp_path, folder, tmp_path / ".out-cache" / "pkgs" / "toy-dep-1-0") == []
    assert not list(out.rglob("*.conda"))


def test_a_build_installs_the_checked_copy_of_a_remote_host_requirement(
    tmp_path: Path, served: tuple[Path, str, list[str]]
) -> None:
    """The engine installs toy-dep from the checked copy (its package cache took it from the checked channel
    folder, not from the server), and toy-host copies what toy-dep put into the host prefix."""
    folder, url, asked = served
    paths = {"paths_version": 1, "paths": [{"_path": "share/toy-dep.txt", "path_type": "hardlink", "sha256": sha256(b"dep\n"), "size_in_bytes": 4}]}  # fmt: skip
    parts = [*member("info/paths.json", json.dumps(paths).encode()), *member("share/toy-dep.txt", b"dep\n")]
    (folder / "noarch" / "toy-dep-1-0.tar.bz2").write_bytes(_toy_dep(*parts))
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    out = tmp_path / "out"
    done = run_toolkit(
        build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "-c", url), tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert [p.name.rsplit("-", 2)[0] for p in out.glob("*/*.conda")] == ["toy-host"]
    # The build's package cache has it (the engine installed it), and the server was asked for it once: by the
    # toolkit's relay, whose copy both the engine's solve and the build's channel of copies took.
    assert (
        tmp_path / ".out-cache" / "pkgs" / "toy-dep-1-0" / "share" / "toy-dep.txt"
    ).read_bytes() == b"dep\n"
    assert asked.count("/noarch/toy-dep-1-0.tar.bz2") == 1
