"""Every solve reads the channels through the toolkit's relay on loopback (channel/index_relay.py, issue 47).

Through the console script, ``channel install -c``, against loopback channel servers (tests/_http_recorder.py,
each its own process, recording what it is sent): a repodata ``info.base_url`` at another origin is refused in
one line and the channel's password never reaches it (reproduction 5); a repodata that trickles in ends at the
total deadline, in one line (reproduction 9); a channel whose server refuses (403, 503) stops the install (fail
closed); a sharded channel (CEP 16) is read shard by shard, only the shards the solve needs, each checked
against the sha256 of its name. In process: the relay's packages (what a build's pre-solve downloads through
it) are checked against the index's sha256, and a solved package's loopback URL maps back to its upstream.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgpack
import pytest
import zstandard
from rattler.index import index_fs

from _stub_channel import write_package
from _timing import seconds, seconds_arg
from _toy import error_line
from flagtree_feedstock.channel.credentials import split_credentials
from flagtree_feedstock.channel.index_relay import DIGESTS, serving, within_channel
from flagtree_feedstock.errors import ChannelError

TESTS = Path(__file__).resolve().parent
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
USER, PASSWORD = "alice", "PW-5ecret/47"
QUOTED = quote(PASSWORD, safe="")

Requests = Callable[[], list[dict[str, Any]]]
StartServer = Callable[..., tuple[str, Requests]]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start a recorder (its own process) with the given rules (404 for any other path): its URL and the
    requests it was sent."""
    started: list[subprocess.Popen[str]] = []
    folder = tmp_path / "server"
    folder.mkdir()

    def start(rules: list[dict[str, Any]], *, host: str = "127.0.0.1") -> tuple[str, Requests]:
        log = folder / f"requests-{len(started)}.jsonl"
        log.touch()
        process = subprocess.Popen(
            [
                sys.executable,
                str(TESTS / "_http_recorder.py"),
                str(log),
                json.dumps([*rules, {"path": "/", "status": 404}]),
                "--host",
                host,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())
        return f"http://{host}:{port}", lambda: [json.loads(line) for line in log.read_text().splitlines()]

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=seconds(10))
        assert process.stdout is not None
        process.stdout.close()


def _files(base: str, folder: Path, **rule: object) -> list[dict[str, Any]]:
    """Rules serving every file of ``folder`` at ``base``."""
    return [
        {"path": f"{base}/{path.relative_to(folder)}", "status": 200, "file": str(path), **rule}
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


def _environment(tmp_path: Path, **more: str) -> dict[str, str]:
    for name in ("tmp", "home", "xdg-cache"):
        (tmp_path / name).mkdir(exist_ok=True)
    return {
        **os.environ,
        "TMPDIR": str(tmp_path / "tmp"),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "no_proxy": "127.0.0.1,127.0.0.2",
        "NO_PROXY": "127.0.0.1,127.0.0.2",
        **more,
    }


def _install(
    tmp_path: Path,
    local: Path,
    channel: str,
    *specs: str,
    more: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [
        "channel",
        "install",
        str(local),
        *specs,
        "--prefix",
        str(tmp_path / "prefix"),
        "--target-platform",
        "linux-64",
        "-c",
        channel,
        *more,
    ]
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *argv],
        check=False,
        env=env or _environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=seconds(300),
    )


def _sent_password(requests: list[dict[str, Any]]) -> bool:
    return any(PASSWORD in json.dumps(r) or QUOTED in json.dumps(r) for r in requests) or any(
        "authorization" in r["headers"] for r in requests
    )


@pytest.fixture
def local(tmp_path: Path) -> Path:
    """The channel folder ``channel install`` installs from: ``toy-app``, indexed."""
    folder = tmp_path / "local"
    write_package(folder / "noarch" / "toy-app-1.0-h0_0.tar.bz2", "toy-app", "1.0", "h0_0", "noarch")
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    return folder


def _remote(tmp_path: Path, *names: str, shards: bool = False) -> Path:
    """A channel folder to serve: ``names`` (noarch), indexed (with shards if asked)."""
    folder = tmp_path / "remote"
    for name in names:
        write_package(folder / "noarch" / f"{name}-1.0-h0_0.tar.bz2", name, "1.0", "h0_0", "noarch")
    asyncio.run(index_fs(folder, write_zst=False, write_shards=shards, force=True))
    return folder


def _unsharded(base: str) -> list[dict[str, Any]]:
    return [{"path": f"{base}/noarch/repodata_shards", "status": 404}]


# ---- reproduction 5: info.base_url at another origin -------------------------------------------------------


@pytest.mark.parametrize("elsewhere", ["another-port", "another-host"])
def test_a_base_url_at_another_origin_is_refused_and_the_password_never_reaches_it(
    elsewhere: str, tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """The channel ``http://alice:PW@127.0.0.1:P1/chan`` whose repodata.json sets ``info.base_url`` to
    ``http://127.0.0.1:P2/noarch/`` (or 127.0.0.2, another host): before the relay, rattler's pre-solve sent
    alice's password there. Now the channel is refused in one line, and P2 is sent nothing at all."""
    remote = _remote(tmp_path, "remote-lib")
    other, other_asked = start_server(
        _files("", remote), host="127.0.0.2" if elsewhere == "another-host" else "127.0.0.1"
    )
    repodata = json.loads((remote / "noarch" / "repodata.json").read_text())
    repodata["info"]["base_url"] = f"{other}/noarch/"
    url, asked = start_server(
        [*_unsharded("/chan"), {"path": "/chan/noarch/repodata.json", "status": 200, "body": repodata}]
    )

    done = _install(
        tmp_path, local, url.replace("://", f"://{USER}:{QUOTED}@") + "/chan", "toy-app", "remote-lib"
    )

    assert done.returncode == 9, done.stderr
    line = error_line(done.stderr)
    assert f"its index's info.base_url is {other}/noarch/, another origin than the channel's: refused" in line
    assert other_asked() == []
    assert asked(), "the channel itself was read"
    assert PASSWORD not in done.stderr and QUOTED not in done.stderr
    assert not (tmp_path / "prefix").exists() or not any((tmp_path / "prefix").iterdir())


def test_a_base_url_within_the_channel_s_origin_is_followed_with_the_password(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """A ``base_url`` elsewhere on the channel's own origin (relative, as the WHATWG standard resolves it):
    the packages are fetched from there, with the channel's password, by the toolkit's client."""
    remote = _remote(tmp_path, "remote-lib")
    repodata = json.loads((remote / "noarch" / "repodata.json").read_text())
    repodata["info"]["base_url"] = "../../pkgs/noarch/"
    url, asked = start_server(
        [
            *_unsharded("/chan"),
            {"path": "/chan/noarch/repodata.json", "status": 200, "body": repodata},
            *_files("/pkgs", remote),
        ]
    )

    done = _install(
        tmp_path, local, url.replace("://", f"://{USER}:{QUOTED}@") + "/chan", "toy-app", "remote-lib"
    )

    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "prefix" / "conda-meta").glob("remote-lib-1.0-h0_0.json"))
    fetched = [r for r in asked() if r["path"].endswith(".tar.bz2")]
    assert [r["path"] for r in fetched] == ["/pkgs/noarch/remote-lib-1.0-h0_0.tar.bz2"]
    assert all("authorization" in r["headers"] for r in fetched)


def test_the_credentials_of_your_rattler_auth_file_reach_the_channel_s_origin(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """A private channel whose password is in your ``RATTLER_AUTH_FILE`` (not in its URL): the relay's client
    sends it, to the channel's origin, for the index and the package alike (rattler reads no file any more)."""
    remote = _remote(tmp_path, "remote-lib")
    url, asked = start_server([*_unsharded("/chan"), *_files("/chan", remote)])
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": USER, "password": PASSWORD}}}))
    env = _environment(tmp_path, RATTLER_AUTH_FILE=str(auth))

    done = _install(tmp_path, local, f"{url}/chan", "toy-app", "remote-lib", env=env)

    assert done.returncode == 0, done.stderr
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    requests = asked()
    assert any(r["path"].endswith(".tar.bz2") for r in requests), requests
    assert all(r["headers"].get("authorization") == basic for r in requests), requests


@pytest.mark.parametrize(
    ("channel", "url", "within"),
    [
        ("https://host.example/chan/", "https://host.example/pkgs/noarch/", True),
        ("https://host.example/chan/", "https://HOST.example:443/x/", True),
        ("http://127.0.0.1:8/chan/", "http://2130706433:8/x/", True),  # one host, as rattler reads it
        ("https://host.example/chan/", "http://host.example/chan/noarch/", False),  # https down to http
        (
            "https://host.example:8443/chan/",
            "http://host.example:8443/chan/noarch/",
            False,
        ),  # at one port too
        ("https://host.example/chan/", "https://host.example:8443/chan/noarch/", False),
        ("https://host.example/chan/", "https://other.example/chan/noarch/", False),
        ("https://host.example/chan/", "file:///etc/", False),
        ("file:///srv/chan/", "file:///srv/chan/noarch/", True),
        ("file:///srv/chan/", "file:///srv/other/noarch/", False),
        ("file:///srv/chan/", "http://127.0.0.1/noarch/", False),
    ],
)
def test_a_base_url_is_the_channel_s_only_at_its_origin_or_in_its_folder(
    channel: str, url: str, within: bool
) -> None:
    assert within_channel(channel, url) is within


# ---- reproduction 9, and fail closed ------------------------------------------------------------------------


def test_a_trickling_repodata_ends_at_the_total_deadline_in_one_line(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """One byte every 0.2 s keeps each read alive for ever (before the relay, rattler's client waited that
    long); the request's total (``--timeout``) ends it: one line, exit 9, soon after the deadline."""
    padded = {"info": {"subdir": "noarch", "pad": "x" * 60}, "packages": {}}  # 20 s at the scale of 1
    url, asked = start_server(
        [
            *_unsharded("/chan"),
            {"path": "/chan/noarch/repodata.json", "status": 200, "body": padded, "trickle": seconds(0.2)},
        ]
    )

    started = time.monotonic()
    done = _install(tmp_path, local, f"{url}/chan", "toy-app", more=("--timeout", seconds_arg(3)))
    took = time.monotonic() - started

    assert done.returncode == 9, done.stderr
    assert f"did not finish the request within {seconds_arg(3)} s: gave up" in error_line(done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert seconds(3) <= took < seconds(3) + seconds(60), took
    assert asked()


@pytest.mark.parametrize(("subdir", "status"), [("noarch", 403), ("noarch", 503), ("linux-64", 503)])
def test_a_channel_that_refuses_stops_the_install(
    subdir: str, status: int, tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """A channel whose server answers 403 or 503 for an index is never left out of the solve: the install
    stops, naming the channel and the answer, for a platform's subdir too (which, answered 404, rattler would
    take for one the channel lacks)."""
    url, _ = start_server(
        [
            *_unsharded("/chan"),
            {"path": "/chan/linux-64/repodata_shards", "status": 404},
            {"path": f"/chan/{subdir}/repodata.json", "status": status},
            {
                "path": "/chan/noarch/repodata.json",
                "status": 200,
                "body": {"info": {"subdir": "noarch"}, "packages": {}},
            },
        ]
    )

    done = _install(tmp_path, local, f"{url}/chan", "toy-app")

    assert done.returncode == 9, done.stderr
    assert f"channel {url}/chan cannot be read: {url}/chan/{subdir}/repodata.json answered HTTP {status}" in (
        error_line(done.stderr)
    )


# ---- sharded repodata (CEP 16) ------------------------------------------------------------------------------


def _shard_of(remote: Path, name: str) -> str:
    index = (remote / "noarch" / "repodata_shards.msgpack.zst").read_bytes()
    document = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(index, max_output_size=1 << 24))
    return str(document["shards"][name].hex())


def test_a_sharded_channel_is_read_through_the_relay_one_needed_shard_at_a_time(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """rattler asks every http channel for its shard index first; through the relay it still fetches only
    the shards the solve needs (``remote-b``'s, of three), never the whole repodata.json."""
    remote = _remote(tmp_path, "remote-a", "remote-b", "remote-c", shards=True)
    url, asked = start_server(_files("/chan", remote))

    done = _install(tmp_path, local, f"{url}/chan", "toy-app", "remote-b")

    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "prefix" / "conda-meta").glob("remote-b-1.0-h0_0.json"))
    paths = [r["path"] for r in asked()]
    assert [p for p in paths if "/shards/" in p] == [
        f"/chan/noarch/shards/{_shard_of(remote, 'remote-b')}.msgpack.zst"
    ]
    assert "/chan/noarch/repodata.json" not in paths
    assert "/chan/noarch/repodata_shards.msgpack.zst" in paths


def test_a_shard_whose_bytes_are_not_its_name_s_sha256_is_refused(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """The shard named for ``remote-b``'s sha256 answered with ``remote-a``'s bytes (a server swapping one
    package's records for another's): refused in one line."""
    remote = _remote(tmp_path, "remote-a", "remote-b", shards=True)
    wanted, other = _shard_of(remote, "remote-b"), _shard_of(remote, "remote-a")
    shard = remote / "noarch" / "shards" / f"{other}.msgpack.zst"
    url, _ = start_server(
        [
            {"path": f"/chan/noarch/shards/{wanted}.msgpack.zst", "status": 200, "file": str(shard)},
            *_files("/chan", remote),
        ]
    )

    done = _install(tmp_path, local, f"{url}/chan", "toy-app", "remote-b")

    assert done.returncode == 9, done.stderr
    assert f"its shard noarch/shards/{wanted[:12]}… does not have the sha256 of its name" in error_line(
        done.stderr
    )


def test_a_shard_index_pointing_at_another_origin_is_refused(
    tmp_path: Path, local: Path, start_server: StartServer
) -> None:
    """A shard index whose ``shards_base_url`` names another server: refused, and that server asked nothing."""
    remote = _remote(tmp_path, "remote-b", shards=True)
    other, other_asked = start_server(_files("", remote))
    path = remote / "noarch" / "repodata_shards.msgpack.zst"
    index = msgpack.unpackb(
        zstandard.ZstdDecompressor().decompress(path.read_bytes(), max_output_size=1 << 24)
    )
    index["info"]["shards_base_url"] = f"{other}/noarch/shards/"
    path.write_bytes(zstandard.ZstdCompressor().compress(msgpack.packb(index, use_bin_type=True)))
    url, _ = start_server(_files("/chan", remote))

    done = _install(tmp_path, local, f"{url}/chan", "toy-app", "remote-b")

    assert done.returncode == 9, done.stderr
    assert "its index's shards_base_url is" in error_line(done.stderr)
    assert other_asked() == []


# ---- in process: the relay's packages and the map back to upstream ------------------------------------------


def _get(base: str, path: str) -> tuple[int, bytes]:
    """GET ``base`` (``http://127.0.0.1:PORT/KEY``) + ``path``: the status and the body."""
    address, _, key = base.removeprefix("http://").partition("/")
    host, port = address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=seconds(60))
    try:
        connection.request("GET", f"/{key}{path}")
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_the_relay_serves_nothing_without_its_key(tmp_path: Path) -> None:
    """Another user of the machine can connect to 127.0.0.1 too: without the run's key in the path, nothing."""
    remote = _remote(tmp_path, "remote-lib")
    engine = split_credentials([remote.as_uri()])
    with serving(engine.channels, authorize=engine.authorize, scratch=tmp_path / "scratch") as relay:
        assert _get(relay.base, "/0/noarch/repodata.json")[0] == 200
        assert _get(relay.origin, "/0/noarch/repodata.json")[0] == 404
        assert _get(relay.origin + "/x", "/0/noarch/repodata.json")[0] == 404


def test_the_relay_serves_a_package_only_as_the_toolkit_s_copy_checked_against_the_index_s_sha256(
    tmp_path: Path, start_server: StartServer
) -> None:
    """What a build's pre-solve downloads through the relay: never the original, but the toolkit's copy of it
    (fetched once, with the channel's password, checked against the index, repacked), under records that say
    nothing of the original's bytes (else the engine would refuse the copy); the loopback URL maps back to the
    upstream URL, and :meth:`Relay.copy` is the very file served. A package whose bytes are not the index's
    sha256 is a 403, and the relay's failure names it."""
    remote = _remote(tmp_path, "remote-lib", "remote-bad")
    repodata = json.loads((remote / "noarch" / "repodata.json").read_text())
    repodata["packages"]["remote-bad-1.0-h0_0.tar.bz2"]["sha256"] = "0" * 64
    url, asked = start_server(
        [
            *_unsharded("/chan"),
            {"path": "/chan/noarch/repodata.json", "status": 200, "body": repodata},
            *_files("/chan", remote),
        ]
    )
    engine = split_credentials([url.replace("://", f"://{USER}:{QUOTED}@") + "/chan"])
    name = "remote-lib-1.0-h0_0.tar.bz2"
    scratch, copies = tmp_path / "scratch", tmp_path / "copies"
    with serving(engine.channels, authorize=engine.authorize, scratch=scratch, copies=copies) as relay:
        (base,) = relay.urls
        status, index = _get(relay.base, "/0/noarch/repodata.json")
        assert status == 200
        served = json.loads(index)["packages"]
        assert set(served) == set(repodata["packages"])
        assert not [key for record in served.values() for key in record if key in DIGESTS]
        status, body = _get(relay.base, f"/0/noarch/{name}")
        assert status == 200
        assert body != (remote / "noarch" / name).read_bytes()  # not the original
        copy = relay.copy(f"{base}noarch/{name}")
        assert (body, hashlib.sha256(body).hexdigest()) == (copy.path.read_bytes(), copy.sha256)
        assert copy.path.is_relative_to(copies)
        assert _get(relay.base, f"/0/noarch/{name}") == (200, body)
        assert relay.upstream(f"{base}noarch/{name}") == f"{url}/chan/noarch/{name}"
        assert relay.given(base) == f"{url}/chan"
        assert relay.failure is None
        assert _get(relay.base, "/0/noarch/remote-bad-1.0-h0_0.tar.bz2")[0] == 403
        with pytest.raises(ChannelError, match="its channel index says 0000"):
            relay.check()
        assert _get(relay.base, "/0/noarch/repodata.json.zst")[0] == 404
        assert _get(relay.base, "/0/noarch/run_exports.json")[0] == 404
    fetched = [r for r in asked() if r["path"].endswith(name)]
    assert len(fetched) == 1 and "authorization" in fetched[0]["headers"]  # downloaded once


def test_a_relay_without_copies_serves_no_package_and_keeps_the_index_s_digests(tmp_path: Path) -> None:
    """``channel install``'s relay (its solve reads indexes only, it installs copies it makes itself from
    the records' upstream sha256 and size): no package is served, not even a copy, and the records keep what
    the install checks the download against."""
    remote = _remote(tmp_path, "remote-lib")
    engine = split_credentials([remote.as_uri()])
    name = "remote-lib-1.0-h0_0.tar.bz2"
    with serving(engine.channels, authorize=engine.authorize, scratch=tmp_path / "scratch") as relay:
        status, index = _get(relay.base, "/0/noarch/repodata.json")
        assert status == 200
        record = json.loads(index)["packages"][name]
        assert record["sha256"] == hashlib.sha256((remote / "noarch" / name).read_bytes()).hexdigest()
        assert record["size"] == (remote / "noarch" / name).stat().st_size
        assert _get(relay.base, f"/0/noarch/{name}")[0] == 404
        relay.check()


def test_a_local_channel_is_served_from_its_folder(tmp_path: Path) -> None:
    """A user's folder is read by the relay, not by the solve: its index, and the copies of its packages,
    mapped back to the file."""
    remote = _remote(tmp_path, "remote-lib")
    engine = split_credentials([remote.as_uri()])
    name = "remote-lib-1.0-h0_0.tar.bz2"
    with serving(
        engine.channels, authorize=engine.authorize, scratch=tmp_path / "scratch", copies=tmp_path / "copies"
    ) as relay:
        (base,) = relay.urls
        assert _get(relay.base, "/0/noarch/repodata.json")[0] == 200
        status, body = _get(relay.base, f"/0/noarch/{name}")
        assert (status, body) == (200, relay.copy(f"{base}noarch/{name}").path.read_bytes())
        assert body != (remote / "noarch" / name).read_bytes()
        assert relay.upstream(f"{base}noarch/{name}") == (remote / "noarch" / name).resolve().as_uri()
        assert relay.source(f"{base}noarch/{name}") == str((remote / "noarch" / name).resolve())
        assert _get(relay.base, "/0/noarch/repodata_shards.msgpack.zst")[0] == 404


def test_a_relay_serving_copies_serves_shards_without_the_originals_digests(
    tmp_path: Path, start_server: StartServer
) -> None:
    """A sharded channel's records, served to a build's solve: no sha256, md5 or size of the original."""
    remote = _remote(tmp_path, "remote-a", "remote-b", shards=True)
    url, _ = start_server(_files("/chan", remote))
    engine = split_credentials([f"{url}/chan"])
    listed = _shard_of(remote, "remote-a")
    with serving(
        engine.channels, authorize=engine.authorize, scratch=tmp_path / "scratch", copies=tmp_path / "copies"
    ) as relay:
        assert _get(relay.base, "/0/noarch/repodata_shards.msgpack.zst")[0] == 200
        status, body = _get(relay.base, f"/0/noarch/shards/{listed}.msgpack.zst")
        assert status == 200
        shard = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(body, max_output_size=1 << 24))
        records = [r for key in ("packages", "packages.conda") for r in (shard.get(key) or {}).values()]
        assert records and not [key for record in records for key in record if key in DIGESTS]
        relay.check()


def test_the_relay_fetches_only_a_shard_its_index_lists(tmp_path: Path, start_server: StartServer) -> None:
    """A shard the index does not list is a 404, and upstream is not asked for it: the relay's shards are the
    index's, fetched one by one as the solve asks."""
    remote = _remote(tmp_path, "remote-a", "remote-b", shards=True)
    url, asked = start_server(_files("/chan", remote))
    engine = split_credentials([f"{url}/chan"])
    unlisted = "ab" * 32
    with serving(engine.channels, authorize=engine.authorize, scratch=tmp_path / "scratch") as relay:
        assert _get(relay.base, f"/0/noarch/shards/{unlisted}.msgpack.zst")[0] == 404  # no index read yet
        assert _get(relay.base, "/0/noarch/repodata_shards.msgpack.zst")[0] == 200
        assert _get(relay.base, f"/0/noarch/shards/{unlisted}.msgpack.zst")[0] == 404
        listed = _shard_of(remote, "remote-a")
        assert _get(relay.base, f"/0/noarch/shards/{listed}.msgpack.zst")[0] == 200
        relay.check()
    assert [r["path"] for r in asked() if "/shards/" in r["path"]] == [
        f"/chan/noarch/shards/{listed}.msgpack.zst"
    ]
