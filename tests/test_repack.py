"""The installer gets only what the toolkit read (issue 41 item 1): `channel install` and the engine making a
build's host environment install the toolkit's own copy of each package, written from what its reader read,
cached by the original's sha256; a `.conda` whose zip holds one more `*.tar.zst` entry is refused by every
command, and nothing is written outside the prefix.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import stat
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from rattler.index import index_fs

from _hostile_packages import (
    INDEX,
    STEM,
    Part,
    channel_with,
    conda,
    data,
    member,
    sha256,
    symlink,
    tar_bz2,
    zstd,
)
from _toy import build_args, error_line, native_args, run_toolkit
from flagtree_feedstock._archive import open_package, tar_write
from flagtree_feedstock._archive.tar_stream import Member
from flagtree_feedstock.channel.package_reader import read_package
from flagtree_feedstock.channel.repack import REPACK_RULES, cached, repacked
from flagtree_feedstock.errors import ChannelError

PLANTED = b"planted by a package\n"
RULES = f"rules-{REPACK_RULES}"
# What the engine records of the build, its host environment's packages among it (their sha256 too).
RENDERED = "info/recipe/rendered_recipe.yaml"


def _good_conda(name: str = "evil", files: dict[str, bytes] | None = None) -> bytes:
    files = files if files is not None else {"share/evil.txt": b"payload\n"}
    listed = [
        {"_path": p, "path_type": "hardlink", "sha256": sha256(d), "size_in_bytes": len(d)}
        for p, d in files.items()
    ]
    info = [
        *member("info/index.json", json.dumps(INDEX | {"name": name}).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    payload = [part for path, data in files.items() for part in member(path, data)]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        archive.writestr(f"info-{name}-1-0.tar.zst", zstd(info))
        archive.writestr(f"pkg-{name}-1-0.tar.zst", zstd(payload))
    return out.getvalue()


def _with_one_more_entry(entry: str) -> bytes:
    """A whole `.conda` plus the zip entry ``entry``, a tar of tests/test_package_paths.py's reproducer: its
    info/paths.json lists ``x/../../target``, ``x`` a symlink to ``d1/d2``. rattler unpacks every entry whose
    last path part ends in ``.tar.zst``, over the info tar's files, and links ``target`` to the prefix's parent."""
    listed = {
        "_path": "x/../../target",
        "path_type": "hardlink",
        "sha256": sha256(PLANTED),
        "size_in_bytes": len(PLANTED),
    }
    paths = {"paths_version": 1, "paths": [listed]}
    evil = [
        *member("info/paths.json", json.dumps(paths).encode()),
        *symlink("x", "d1/d2"),
        *member("d1/d2/keep", b""),
        *member("target", PLANTED),
    ]
    out = io.BytesIO(_good_conda())
    with zipfile.ZipFile(out, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(entry, zstd(evil))
    return out.getvalue()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("entry", ["zz.tar.zst", f"sub/info-{STEM}.tar.zst", f"pkg-{STEM}-2.tar.zst"])
@pytest.mark.parametrize("command", ["index", "install", "build"])
def test_a_conda_with_one_more_tar_zst_entry_is_refused_and_nothing_is_written(
    entry: str, command: str, tmp_path: Path
) -> None:
    """Reproduced on main 565416c: installed with exit 0 by `channel install` and through a build's host
    environment, its paths.json walking out of the prefix; `channel index` accepted it."""
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _with_one_more_entry(entry))
    if command != "index":
        asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    victim = tmp_path / "a" / "b" / "target"
    victim.parent.mkdir(parents=True)
    victim.write_text("the original\n")
    prefix = tmp_path / "a" / "b" / "prefix"
    argv = {
        "index": ["channel", "index", str(channel)],
        "install": ["channel", "install", str(channel), "evil", "--prefix", str(prefix)],
        "build": build_args("toy-multi", tmp_path / "out", *native_args(channel)),
    }[command]
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 9, done.stderr
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: "
    )
    assert entry in error_line(done.stderr)
    assert victim.read_text() == "the original\n"
    assert not prefix.exists()
    assert not (tmp_path / "out").exists()


def test_channel_install_installs_the_toolkits_copy_repacked_once(tmp_path: Path) -> None:
    """The prefix's record of the package names the copy (its URL in the cache, its sha256), not the original;
    a second install takes the same copy from the cache, unwritten."""
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    copy = tmp_path / "xdg" / "flagtree-feedstock" / "repacked" / RULES / _digest(package) / package.name
    for number in (1, 2):
        prefix = tmp_path / f"prefix{number}"
        done = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
        assert done.returncode == 0, done.stderr
        assert (prefix / "share" / "evil.txt").read_bytes() == b"payload\n"
        record = json.loads((prefix / "conda-meta" / f"{STEM}.json").read_text())
        assert (record["url"], record["sha256"], record["size"]) == (
            copy.as_uri(),
            _digest(copy),
            copy.stat().st_size,
        )
        assert record["sha256"] != _digest(package)
        written = copy.stat()
        if number == 1:
            first = (written.st_ino, written.st_mtime_ns)
    assert (written.st_ino, written.st_mtime_ns) == first


def test_a_build_installs_the_toolkits_copy_of_a_local_host_requirement(tmp_path: Path) -> None:
    """toy-host's host requirement toy-dep, from a local channel: the engine installed the copy (the built
    package's record of its host environment names the copy's sha256), and toy-host copied its file."""
    content = _good_conda("toy-dep", {"share/toy-dep.txt": b"dep\n"})
    channel, package = channel_with(tmp_path, "toy-dep-1-0.conda", content)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    out = tmp_path / "out"
    done = run_toolkit(build_args("toy-host", out, *native_args(channel)), tmp_path)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("linux-64/toy-host-*.conda")
    rendered = read_package(built, [RENDERED])[RENDERED]
    (host,) = yaml.safe_load(rendered)["finalized_dependencies"]["host"]["resolved"]
    copy = tmp_path / ".out-repacked" / RULES / _digest(package) / package.name
    assert host["sha256"] == _digest(copy) != _digest(package)
    assert not list(tmp_path.glob(".out-copies-*")), "the steps' channels are removed"


def test_a_damaged_copy_in_the_cache_is_written_again(tmp_path: Path) -> None:
    """A copy cut short in the cache (a full disk, a hand) is not what its record says: it is repacked again,
    not handed to the installer."""
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    copy = tmp_path / "xdg" / "flagtree-feedstock" / "repacked" / RULES / _digest(package) / package.name
    first = run_toolkit(
        ["channel", "install", str(channel), "evil", "--prefix", str(tmp_path / "p1")], tmp_path
    )
    assert first.returncode == 0, first.stderr
    whole = copy.read_bytes()
    copy.write_bytes(whole[: len(whole) // 2])
    again = run_toolkit(
        ["channel", "install", str(channel), "evil", "--prefix", str(tmp_path / "p2")], tmp_path
    )
    assert again.returncode == 0, again.stderr
    assert copy.read_bytes() == whole
    assert (tmp_path / "p2" / "share" / "evil.txt").read_bytes() == b"payload\n"


@pytest.mark.parametrize("order", ["info-payload-info", "payload-info"])
def test_a_tar_bz2_whose_info_is_not_first_is_refused_in_one_line(order: str, tmp_path: Path) -> None:
    """info/ after payload members (written so by conda-build before 3, or split in two): the copy's info/
    comes first, and this one cannot be copied so without holding the payload; refused, naming the member."""
    index = member("info/index.json", json.dumps(INDEX).encode())
    payload = member("share/evil.txt", b"payload\n")
    paths = member("info/paths.json", json.dumps({"paths_version": 1, "paths": []}).encode())
    parts = [*index, *payload, *paths] if order == "info-payload-info" else [*payload, *index, *paths]
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(parts))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    done = run_toolkit(
        ["channel", "install", str(channel), "evil", "--prefix", str(tmp_path / "prefix")], tmp_path
    )
    assert done.returncode == 9, done.stderr
    first = "info/paths.json" if order == "info-payload-info" else "info/index.json"
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: member {first!r} of info/ comes "
        "after payload members: the copy has its info/ first, as every conda-build since 3 writes it (fix: "
    )
    assert not (tmp_path / "prefix").exists()


# Issue 47 item 6: the cache of copies proves an entry before it is used. The planted copy below carries a
# post-link script its record hides (link_scripts: []): used, the engine would run it; `channel install` would
# link the planted files.
NOBODY = 65534


def _plant(entry: Path, name: str, content: bytes, **record: object) -> Path:
    """A cache entry ``entry/name`` holding ``content``, its record (every field a record has) saying what
    ``content`` is unless ``record`` says otherwise, and hiding every link and activation script."""
    entry.mkdir(parents=True, exist_ok=True)
    copy = entry / name
    copy.write_bytes(content)
    said = {
        "sha256": sha256(content),
        "md5": hashlib.md5(content, usedforsecurity=False).hexdigest(),
        "size": len(content),
        "name": name.rsplit("-", 2)[0],
        "link_scripts": [],
        "activation_scripts": [],
    }
    (entry / f"{name}.json").write_text(json.dumps(said | record))
    return copy


def _hostile(name: str, planted: Path) -> bytes:
    """The package ``name`` whose post-link script writes ``planted``, and whose share/NAME.txt says so."""
    script = f'#!/bin/bash\necho ran > "{planted}"\n'.encode()
    return _good_conda(name, {f"bin/.{name}-post-link.sh": script, f"share/{name}.txt": b"planted\n"})


def _owned_by_nobody(top: Path) -> None:
    """``top`` and everything in it: another user's, and writable by everyone."""
    for path in [top, *top.rglob("*")]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        if not path.is_symlink():
            path.chmod(0o777)


@pytest.mark.parametrize("command", ["install", "build"])
def test_a_cache_in_another_users_world_writable_folder_is_refused_in_one_line(
    command: str, tmp_path: Path
) -> None:
    """Reproduced on main 7da5e8f: the planted copy, whose record gives its size, was installed. The cache
    root is another user's: refused in one line, nothing installed, the hidden post-link script never ran."""
    name = "evil" if command == "install" else "toy-dep"
    channel, package = channel_with(
        tmp_path, f"{name}-1-0.conda", _good_conda(name, {f"share/{name}.txt": b"dep\n"})
    )
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    ran = tmp_path / "outside" / "ran"
    ran.parent.mkdir()
    root = tmp_path / ("xdg/flagtree-feedstock/repacked" if command == "install" else ".out-repacked")
    _plant(root / RULES / _digest(package), package.name, _hostile(name, ran))
    _owned_by_nobody(root)
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    argv = {
        "install": ["channel", "install", str(channel), name, "--prefix", str(prefix)],
        "build": build_args("toy-host", out, *native_args(channel)),
    }[command]
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 10, done.stderr
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: the cache of repacked packages {root} is owned by uid {NOBODY}, not by you "
        f"(uid {os.geteuid()}): a copy there could be put or changed by someone else, so none is used (fix: "
    )
    assert not ran.exists()
    assert not prefix.exists()
    assert not list(out.rglob("*.conda"))


def _bad_entry(kind: str, root: Path, package: Path, hostile: bytes, elsewhere: Path) -> None:
    """An entry of the cache ``root`` for ``package`` holding ``hostile``, bad in the way ``kind`` says."""
    entry = root / RULES / _digest(package)
    if kind == "wrong-digest":  # the record gives the copy's size, as the old check wanted, and other digests
        _plant(entry, package.name, hostile, sha256=sha256(b"another"), md5="0" * 32)
    elif kind == "another-users":
        _plant(entry, package.name, hostile)
        for path in (entry, *entry.iterdir()):
            os.chown(path, NOBODY, NOBODY)
    elif kind == "writable-by-others":
        _plant(entry, package.name, hostile).chmod(0o666)
    elif kind == "linked-folder":
        _plant(elsewhere, package.name, hostile)
        entry.parent.mkdir(parents=True)
        entry.symlink_to(elsewhere)
    elif kind == "linked-copy":
        planted = _plant(elsewhere, package.name, hostile)
        _plant(entry, package.name, hostile)
        (entry / package.name).unlink()
        (entry / package.name).symlink_to(planted)
    elif (
        kind == "older-rules"
    ):  # a copy made by rules since fixed: the layout before REPACK_RULES, and rules-0
        _plant(root / _digest(package), package.name, hostile)
        _plant(root / "rules-0" / _digest(package), package.name, hostile)


@pytest.mark.parametrize(
    "kind",
    ["wrong-digest", "another-users", "writable-by-others", "linked-folder", "linked-copy", "older-rules"],
)
def test_a_bad_entry_in_the_user_cache_is_not_used_and_a_fresh_copy_replaces_it(
    kind: str, tmp_path: Path
) -> None:
    """`channel install`: a planted entry that is not what its record says, not the user's alone, reached
    through a link, or made by older rules is not installed; the package is repacked again, into a real
    entry; what a link led to is left as it was."""
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    root = tmp_path / "xdg" / "flagtree-feedstock" / "repacked"
    root.mkdir(parents=True)
    hostile = _hostile("evil", tmp_path / "ran")
    elsewhere = tmp_path / "elsewhere"
    _bad_entry(kind, root, package, hostile, elsewhere)
    before = sorted((p.name, p.read_bytes()) for p in elsewhere.iterdir()) if elsewhere.exists() else []
    prefix = tmp_path / "prefix"
    done = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (prefix / "share" / "evil.txt").read_bytes() == b"payload\n"
    assert not (prefix / "bin" / ".evil-post-link.sh").exists()
    entry = root / RULES / _digest(package)
    assert not entry.is_symlink()
    assert not (entry / package.name).is_symlink()
    record = json.loads((entry / f"{package.name}.json").read_text())
    assert record["sha256"] == _digest(entry / package.name) != sha256(hostile)
    for path in (entry, entry / package.name, entry / f"{package.name}.json"):
        status = path.stat()
        assert (status.st_uid, status.st_mode & 0o022) == (os.geteuid(), 0), path
    after = sorted((p.name, p.read_bytes()) for p in elsewhere.iterdir()) if elsewhere.exists() else []
    assert after == before
    assert not list((root / RULES).glob(".set-aside-*")), "what was set aside is removed"


def test_a_users_own_cache_that_others_may_write_in_is_made_theirs_alone(tmp_path: Path) -> None:
    """The cache root and its rules folder are the user's, mode 0777: made writable by the user alone before
    anything in them is read; the entry another user put there is not used."""
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    root = tmp_path / "xdg" / "flagtree-feedstock" / "repacked"
    _bad_entry("another-users", root, package, _hostile("evil", tmp_path / "ran"), tmp_path / "elsewhere")
    for folder in (root, root / RULES):
        folder.chmod(0o777)
    prefix = tmp_path / "prefix"
    done = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (prefix / "share" / "evil.txt").read_bytes() == b"payload\n"
    assert [stat.S_IMODE(f.stat().st_mode) for f in (root, root / RULES)] == [0o755, 0o755]


@pytest.mark.parametrize("linked", ["root", "rules"])
def test_a_cache_folder_that_is_a_link_is_refused_in_one_line(linked: str, tmp_path: Path) -> None:
    channel, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    root = tmp_path / "xdg" / "flagtree-feedstock" / "repacked"
    elsewhere = tmp_path / "elsewhere"
    _plant(
        elsewhere / (RULES if linked == "root" else "") / _digest(package),
        package.name,
        _hostile("evil", tmp_path / "ran"),
    )
    link = root if linked == "root" else root / RULES
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    prefix = tmp_path / "prefix"
    done = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert done.returncode == 10, done.stderr
    where = " is" if linked == "root" else f": its folder {link} is"
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: the cache of repacked packages {root}{where} a symbolic link: "
    )
    assert not prefix.exists()


def test_a_build_never_uses_a_wrong_digest_entry_beside_its_output_folder(tmp_path: Path) -> None:
    """The build's own cache (.out-repacked) holds a copy of toy-dep whose record gives its size but not its
    digest, and hides its post-link script: the engine installs a fresh copy; the script never runs."""
    channel, package = channel_with(
        tmp_path, "toy-dep-1-0.conda", _good_conda("toy-dep", {"share/toy-dep.txt": b"dep\n"})
    )
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    ran = tmp_path / "ran"
    _bad_entry(
        "wrong-digest", tmp_path / ".out-repacked", package, _hostile("toy-dep", ran), tmp_path / "elsewhere"
    )
    out = tmp_path / "out"
    done = run_toolkit(build_args("toy-host", out, *native_args(channel)), tmp_path)
    assert done.returncode == 0, done.stderr
    assert not ran.exists()
    (built,) = out.glob("linux-64/toy-host-*.conda")
    (host,) = yaml.safe_load(read_package(built, [RENDERED])[RENDERED])["finalized_dependencies"]["host"][
        "resolved"
    ]
    copy = tmp_path / ".out-repacked" / RULES / _digest(package) / package.name
    assert host["sha256"] == _digest(copy) != _digest(package)


def test_a_copy_written_under_a_loose_umask_is_used_again(tmp_path: Path) -> None:
    """An entry the toolkit wrote is its owner's alone whatever the umask (0002 on many desktops): the next
    use proves it and takes it as it is, not written again."""
    _, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    cache = tmp_path / "cache"
    old = os.umask(0o002)
    try:
        first = repacked(package, cache)
        again = repacked(package, cache)
    finally:
        os.umask(old)
    assert again == first
    assert first.path.stat().st_ino == again.path.stat().st_ino
    assert cached(_digest(package), package.name, cache) == first


def _moded(name: str, mode: int, content: bytes | None = None, *, target: str = "") -> list[Part]:
    """A member with ``mode`` in its header: a file (``content``), a folder (None) or a symlink (``target``)."""
    info = tarfile.TarInfo(name)
    info.mode = mode
    if target:
        info.type, info.linkname = tarfile.SYMTYPE, target
    elif content is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(content)
    block = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    return [block] if content is None else [block, data(content)]


# The payload's members and their modes as written (issue 47 item 5), and the modes the prefix and the
# package cache must have of each.
MODED: dict[str, tuple[int, bytes | None, int]] = {
    "share/open": (0o777, None, 0o755),
    "share/open/world-writable.txt": (0o666, b"w\n", 0o644),
    "share/open/group-writable.txt": (0o664, b"g\n", 0o644),
    "bin/all-can-write": (0o777, b"#!/bin/sh\n", 0o755),
    "bin/setuid": (0o4755, b"#!/bin/sh\n", 0o755),
    "bin/setgid-group-exec": (0o2614, b"#!/bin/sh\n", 0o755),
    "share/sticky": (0o1777, None, 0o755),
    "share/sticky/f": (0o600, b"f\n", 0o644),
}


@pytest.mark.parametrize("suffix", [".conda", ".tar.bz2"])
def test_channel_install_gives_the_prefix_and_the_package_cache_normal_modes_only(
    suffix: str, tmp_path: Path
) -> None:
    """Files 0644, or 0755 where any executable bit was set; folders 0755; a symlink keeps its own. rattler
    unpacks the copy into its cache keeping the tar's modes and links the prefix's files to those: without the
    rule, a world-writable file in the prefix and a 0777 folder in the package cache."""
    files = {name: content for name, (_, content, _) in MODED.items() if content is not None}
    listed = [
        {"_path": p, "path_type": "hardlink", "sha256": sha256(d), "size_in_bytes": len(d)}
        for p, d in files.items()
    ]
    listed.append({"_path": "share/link", "path_type": "softlink", "size_in_bytes": 0})
    info = [
        *member("info/index.json", json.dumps(INDEX).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    payload = [part for name, (mode, content, _) in MODED.items() for part in _moded(name, mode, content)]
    payload += _moded("share/link", 0o777, target="open/world-writable.txt")
    content = conda(info, payload) if suffix == ".conda" else tar_bz2([*info, *payload])
    channel, _ = channel_with(tmp_path, f"{STEM}{suffix}", content)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    prefix = tmp_path / "prefix"
    done = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert done.returncode == 0, done.stderr
    (unpacked,) = (p.parent.parent for p in (tmp_path / "cache").rglob("info/index.json"))
    for root in (prefix, unpacked):
        modes = {name: f"{stat.S_IMODE((root / name).lstat().st_mode):04o}" for name in MODED}
        assert modes == {name: f"{want:04o}" for name, (_, _, want) in MODED.items()}, root
        assert (root / "share" / "link").is_symlink()
        assert (root / "share" / "link").read_bytes() == b"w\n"
    for path in [unpacked, *unpacked.rglob("*")]:  # the cache's folder itself and everything in it
        mode = path.lstat().st_mode
        assert stat.S_ISLNK(mode) or not mode & 0o7022, (path, f"{stat.S_IMODE(mode):04o}")
    # The copy itself, in the toolkit's cache: rattler drops setuid and setgid as it unpacks, the copy has none.
    (copy,) = (tmp_path / "xdg" / "flagtree-feedstock" / "repacked").glob(f"{RULES}/*/{STEM}{suffix}")
    with open_package(copy) as package:
        held = {item.name: item.mode for item in package if item.name in MODED}
    assert held == {name: want for name, (_, _, want) in MODED.items()}


def test_a_copy_that_reads_back_other_than_written_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy's record is made from the copy read again, and its members must be those read and written: a
    writer that stores a name otherwise (here as a link script's, as the NUL of issue 47 item 4 was stored)
    makes the package refused, and nothing is cached."""
    real = tar_write.header

    def storing_otherwise(item: Member) -> bytes:
        return real(replace(item, name="bin/.evil-post-link.sh") if item.name == "share/evil.txt" else item)

    monkeypatch.setattr(tar_write, "header", storing_otherwise)
    _, package = channel_with(tmp_path, f"{STEM}.conda", _good_conda())
    cache = tmp_path / "cache"
    with pytest.raises(ChannelError) as caught:
        repacked(package, cache)
    assert str(caught.value).startswith(
        f"{package} is refused, and was not used: its copy, read again, is not what was written: member 3 was "
        "written as 'share/evil.txt' (file, 8 bytes, mode 0644) and reads as 'bin/.evil-post-link.sh' (file, 8 "
        "bytes, mode 0644) (fix: "
    )
    assert [p for p in cache.rglob("*") if not p.is_dir()] == []
