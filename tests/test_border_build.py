"""Issue 47's reproductions that name ``build`` and were tested through ``channel install`` only, here through
``flagtree-feedstock build`` (the checklist of all nine is in docs/security.md, "The engine reads only what we
wrote").

- 9: a repodata that trickles in (one byte every 0.2 s) ends at the relay's total deadline, ``build
  --channel-timeout`` (or ``FLAGTREE_FEEDSTOCK_CHANNEL_TIMEOUT``), in one line, exit 9, soon after it;
- 5: ``http://alice:PW@127.0.0.1:P1/chan`` whose index sets ``info.base_url`` to P2: the build's solve before
  the build sent alice's password to P2; now the channel is refused in one line and P2 is sent nothing;
- 4: a host requirement served over http (with a ``run_exports.json``) whose PAX ``path`` is
  ``bin/.toy-dep-post-link.sh\\0.txt``: the relay serves the engine's solve our copy only, so our reader's
  refusal stops the build in one line (exit 9), its script never run, nothing built; a harmless one, from a
  plain or a sharded channel, builds from the copy the relay served, downloaded once;
- 7: a host requirement whose files are 0666 and 0777 and whose folder is 0777: the build's package cache
  holds them with normal modes only (under the usual umask: the engine keeps only the executable bit).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from rattler.index import index_fs

from _hostile_packages import INDEX, Part, channel_with, data, member, pax, sha256, tar_bz2
from _timing import seconds, seconds_arg
from _toy import build_args, error_line, run_toolkit

TESTS = Path(__file__).resolve().parent
USER, PASSWORD = "alice", "PW-5ecret/47"
QUOTED = quote(PASSWORD, safe="")
NUL_SCRIPT = "bin/.toy-dep-post-link.sh\0.txt"

Requests = Callable[[], list[dict[str, Any]]]
StartServer = Callable[..., tuple[str, Requests]]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """A recorder on 127.0.0.1 (tests/_http_recorder.py, a process of its own) with ``rules``, 404 for any
    other path and for compressed indexes, and for sharded ones unless ``sharded``: its URL, and the requests
    it was sent."""
    started: list[subprocess.Popen[str]] = []

    def start(rules: list[dict[str, Any]], *, sharded: bool = False) -> tuple[str, Requests]:
        log = tmp_path / f"requests-{len(started)}.jsonl"
        log.touch()
        plain = [
            {"path": f"/chan/{subdir}/repodata{rest}", "status": 404}
            for subdir in ("linux-64", "noarch")
            for rest in ((".json.",) if sharded else ("_shards", ".json."))
        ]
        every = [*plain, *rules, {"path": "/", "status": 404}]
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "_http_recorder.py"), str(log), json.dumps(every)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())
        return f"http://127.0.0.1:{port}", lambda: [json.loads(line) for line in log.read_text().splitlines()]

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=seconds(10))
        assert process.stdout is not None
        process.stdout.close()


def _files(folder: Path) -> list[dict[str, Any]]:
    """Rules serving every file of ``folder`` under ``/chan``."""
    return [
        {"path": f"/chan/{path.relative_to(folder)}", "status": 200, "file": str(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


def _dep(planted: Path, *, nul: bool = False) -> bytes:
    """toy-dep (toy-host's host requirement) with ``share/toy-dep.txt``; with ``nul``, also a member whose PAX
    path is :data:`NUL_SCRIPT`, listed so in paths.json, whose script writes ``planted``."""
    script = f'#!/bin/bash\necho ran > "{planted}"\n'.encode()
    files = {"share/toy-dep.txt": b"dep\n", **({NUL_SCRIPT: script} if nul else {})}
    listed = [
        {"_path": path, "path_type": "hardlink", "sha256": sha256(data), "size_in_bytes": len(data)}
        for path, data in files.items()
    ]
    parts = [
        *member("info/index.json", json.dumps(INDEX | {"name": "toy-dep"}).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
        *member("share/toy-dep.txt", b"dep\n"),
    ]
    if nul:
        parts += [*pax({"path": NUL_SCRIPT}), *member("bin/placeholder.txt", script)]
    return tar_bz2(parts)


def _channel(tmp_path: Path, planted: Path, *, nul: bool = False, shards: bool = False) -> Path:
    channel, _ = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", _dep(planted, nul=nul))
    (channel / "linux-64").mkdir(exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=shards, force=True))
    return channel


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    return tmp_path / "outside" / "planted"


def _build(tmp_path: Path, channel: str, *more: str, **env: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    argv = build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "--channel", channel)
    return run_toolkit([*argv, *more], tmp_path, **env)


def _built(tmp_path: Path) -> list[Path]:
    return [*(tmp_path / "out").rglob("*.conda"), *(tmp_path / "out").rglob("*.tar.bz2")]


# ---- reproduction 9 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_trickling_repodata_ends_the_build_at_its_channel_timeout_in_one_line(
    given: str, tmp_path: Path, planted: Path, start_server: StartServer
) -> None:
    """Before the relay, rattler's own client waited on a trickle for ever; now each request of the relay has
    ``--channel-timeout`` whole (600 s by default), and the build stops in one line soon after it."""
    channel = _channel(tmp_path, planted)
    padded = {"info": {"subdir": "noarch", "pad": "x" * 60}, "packages": {}}  # 20 s at the scale of 1
    slow = {"path": "/chan/noarch/repodata.json", "status": 200, "body": padded, "trickle": seconds(0.2)}
    url, asked = start_server([slow, *_files(channel)])
    limit = seconds_arg(3)
    more, env = (
        (("--channel-timeout", limit), {})
        if given == "option"
        else ((), {"FLAGTREE_FEEDSTOCK_CHANNEL_TIMEOUT": limit})
    )

    started = time.monotonic()
    done = _build(tmp_path, f"{url}/chan", *more, **env)
    took = time.monotonic() - started

    assert done.returncode == 9, done.stderr
    assert f"did not finish the request within {limit} s: gave up" in error_line(done.stderr)
    assert "Traceback" not in done.stderr
    assert seconds(3) <= took < seconds(3) + seconds(90), took
    assert any(r["path"] == "/chan/noarch/repodata.json" for r in asked())
    assert not _built(tmp_path)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
def test_a_channel_timeout_that_is_no_deadline_is_refused_in_one_line(value: str, tmp_path: Path) -> None:
    done = _build(tmp_path, "conda-forge", f"--channel-timeout={value}")
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: --channel-timeout {value!r} is not a number of seconds above 0 "
        "(fix: give e.g. --channel-timeout 600)"
    )


# ---- reproduction 5 -----------------------------------------------------------------------------------------


def test_a_base_url_at_another_origin_stops_the_build_and_the_password_never_reaches_it(
    tmp_path: Path, planted: Path, start_server: StartServer
) -> None:
    channel = _channel(tmp_path, planted)
    other, other_asked = start_server(_files(channel))
    repodata = json.loads((channel / "noarch" / "repodata.json").read_text())
    repodata["info"]["base_url"] = f"{other}/chan/noarch/"
    url, asked = start_server(
        [{"path": "/chan/noarch/repodata.json", "status": 200, "body": repodata}, *_files(channel)]
    )

    done = _build(tmp_path, url.replace("://", f"://{USER}:{QUOTED}@") + "/chan")

    assert done.returncode == 9, done.stderr
    line = error_line(done.stderr)
    assert (
        f"its index's info.base_url is {other}/chan/noarch/, another origin than the channel's: refused"
        in line
    )
    assert other_asked() == []
    assert asked(), "the channel itself was read"
    assert PASSWORD not in done.stderr and QUOTED not in done.stderr
    assert not _built(tmp_path)


# ---- reproduction 4 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("allowed", [(), ("--allow-link-scripts", "toy-dep")])
def test_a_nul_in_a_host_requirement_s_pax_path_served_over_http_stops_the_build_in_one_line(
    allowed: tuple[str, ...], tmp_path: Path, planted: Path, start_server: StartServer
) -> None:
    """The package served with a ``run_exports.json`` (which the relay answers 404). The engine's solve before
    the build reads run exports from the packages it solved, and the relay serves it the toolkit's copy of
    each, never the original: our reader refuses this one, so the relay answers the engine 403 and the build
    stops in OUR one line (exit 9, the control character named), before the engine read a byte of it; the
    package was downloaded from upstream once; allowing toy-dep's link scripts by name changes nothing."""
    channel = _channel(tmp_path, planted, nul=True)
    exports = {"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}}
    url, asked = start_server(
        [{"path": "/chan/noarch/run_exports.json", "status": 200, "body": exports}, *_files(channel)]
    )

    done = _build(tmp_path, f"{url}/chan", *allowed)

    assert done.returncode == 9, done.stderr
    line = error_line(done.stderr)
    assert "toy-dep-1-0.tar.bz2 is refused" in line and "control character" in line, line
    assert "run exports" not in done.stderr.lower()  # not the engine's line: it never read the original
    assert "Traceback" not in done.stderr
    assert not planted.exists()
    fetched = [r for r in asked() if r["path"].endswith("toy-dep-1-0.tar.bz2")]
    assert len(fetched) == 1, fetched  # read once, by the relay, and refused
    assert not _built(tmp_path)


@pytest.mark.parametrize("shards", [False, True])
def test_a_build_from_an_http_channel_installs_the_copy_the_relay_served_its_solve(
    shards: bool, tmp_path: Path, planted: Path, start_server: StartServer
) -> None:
    """The relay serves the engine's solve the toolkit's copy of toy-dep under records without the original's
    digests (in repodata.json, or in a shard the solve asks for): the engine takes it, and the build installs
    that same copy, downloaded from upstream once."""
    channel = _channel(tmp_path, planted, shards=shards)
    url, asked = start_server(_files(channel), sharded=shards)

    done = _build(tmp_path, f"{url}/chan")

    assert done.returncode == 0, done.stderr
    assert _built(tmp_path)
    paths = [r["path"] for r in asked()]
    assert [p for p in paths if p.endswith("toy-dep-1-0.tar.bz2")] == ["/chan/noarch/toy-dep-1-0.tar.bz2"]
    if shards:
        assert any("/noarch/shards/" in p for p in paths) and "/chan/noarch/repodata.json" not in paths, paths
    assert not planted.exists()


# ---- reproduction 7 -----------------------------------------------------------------------------------------

# toy-dep's members, the modes its tar gives them, and the modes the build's package cache must hold.
MODED: dict[str, tuple[int, bytes | None, int]] = {
    "share": (0o777, None, 0o755),
    "share/toy-dep.txt": (0o666, b"dep\n", 0o644),
    "share/open": (0o777, None, 0o755),
    "share/open/group-writable.txt": (0o664, b"g\n", 0o644),
    "bin/all-can-write": (0o777, b"#!/bin/sh\n", 0o755),
    "bin/setuid": (0o4755, b"#!/bin/sh\n", 0o755),
}


def _moded(name: str, mode: int, content: bytes | None) -> list[Part]:
    """A member with ``mode`` in its header: a file (``content``) or a folder (None)."""
    info = tarfile.TarInfo(name)
    info.mode = mode
    if content is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(content)
    block = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    return [block] if content is None else [block, data(content)]


def test_a_build_s_host_environment_gets_normal_modes_only(tmp_path: Path) -> None:
    """Under the usual umask (022), the build's package cache, to whose files the engine links the host
    prefix's, holds no world- or group-writable file, no 0777 folder, no setuid bit. The engine
    (py-rattler-build 0.73) unpacks with the umask's modes, keeping only the executable bit, unlike py-rattler's
    installer (tests/test_repack.py): the toolkit's copy, normal already, guards an engine that would keep the
    tar's modes."""
    files = {name: content for name, (_, content, _) in MODED.items() if content is not None}
    listed = [
        {"_path": p, "path_type": "hardlink", "sha256": sha256(d), "size_in_bytes": len(d)}
        for p, d in files.items()
    ]
    info = [
        *member("info/index.json", json.dumps(INDEX | {"name": "toy-dep"}).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    payload = [part for name, (mode, content, _) in MODED.items() for part in _moded(name, mode, content)]
    channel, _ = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", tar_bz2([*info, *payload]))
    (channel / "linux-64").mkdir(exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))

    umask = os.umask(0o022)
    try:
        done = _build(tmp_path, str(channel))
    finally:
        os.umask(umask)

    assert done.returncode == 0, done.stderr
    assert _built(tmp_path)
    cache = tmp_path / ".out-cache"  # builder/output_dir.py's package_cache, beside the output folder
    (unpacked,) = (
        p.parent.parent for p in cache.rglob("info/index.json") if p.parent.parent.name.startswith("toy-dep-")
    )
    modes = {name: f"{stat.S_IMODE((unpacked / name).lstat().st_mode):04o}" for name in MODED}
    assert modes == {name: f"{want:04o}" for name, (_, _, want) in MODED.items()}
    for path in [unpacked, *unpacked.rglob("*")]:
        mode = path.lstat().st_mode
        assert stat.S_ISLNK(mode) or not mode & 0o7022, (path, f"{stat.S_IMODE(mode):04o}")
