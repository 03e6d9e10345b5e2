"""`build --llvm-archive URL`: the download goes through the toolkit's HTTP client, capped, and leaves nothing.

A loopback server (two: 127.0.0.2 is another origin) serves a stand-in archive whole, chunked without a
length, cut short, trickled, or redirects; the download is refused past --llvm-archive-max-size, and a failure,
a Ctrl-C (the real console script, a real SIGINT) or a SIGKILL (cleared by the next download) leaves no
partial file in the cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from _timing import POLL, seconds, seconds_arg
from flagtree_feedstock import llvm_archive
from flagtree_feedstock.errors import ConfigurationError, SourceFetchError
from flagtree_feedstock.llvm_archive.fetch import parse_size

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
ARCHIVE = os.urandom(3 << 20)  # 3 MiB: what is served (no archive is inspected in this module's failures)
SHA256 = hashlib.sha256(ARCHIVE).hexdigest()

Serve = Callable[[str], str]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    other = ""  # the other origin's URL, for the redirect
    trickles: ClassVar[list[float]] = []  # when each trickle began (time.monotonic())

    def do_GET(self) -> None:
        route = self.path.strip("/")
        if route == "archive.tar.gz":
            self._head(200, {"Content-Length": str(len(ARCHIVE))})
            self.wfile.write(ARCHIVE)
        elif route == "chunked.tar.gz":  # no length announced: the cap is found while reading
            self._head(200, {"Transfer-Encoding": "chunked"})
            for start in range(0, len(ARCHIVE), 1 << 16):
                chunk = ARCHIVE[start : start + (1 << 16)]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif route == "short.tar.gz":
            self._head(200, {"Content-Length": str(len(ARCHIVE) + 1000)})
            self.wfile.write(ARCHIVE)
            self.close_connection = True
        elif route == "slow.tar.gz":  # a trickle, until the client goes
            self._head(200, {"Content-Length": str(len(ARCHIVE))})
            for start in range(0, len(ARCHIVE), 1 << 14):
                try:
                    self.wfile.write(ARCHIVE[start : start + (1 << 14)])
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(seconds(0.2))  # the download lasts while the test signals it
        elif route == "trickle.tar.gz":
            self._trickle()
        elif route == "elsewhere":
            self._head(302, {"Location": f"{self.other}/archive.tar.gz", "Content-Length": "0"})
        elif route == "moved":
            self._head(302, {"Location": "/archive.tar.gz", "Content-Length": "0"})
        else:
            self._head(404, {"Content-Length": "0"})

    def _trickle(self) -> None:
        """A byte a second (on the time scale), every read well within its 60 s; 45 bytes, then it breaks off."""
        self.trickles.append(time.monotonic())
        self._head(200, {"Content-Length": str(len(ARCHIVE))})
        for byte in ARCHIVE[:45]:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(seconds(1))

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """``serve(host)``: a server on that loopback address, its URL; /elsewhere redirects to the one on 127.0.0.2."""
    servers: list[ThreadingHTTPServer] = []
    monkeypatch.setenv("no_proxy", "127.0.0.1,127.0.0.2")

    def start(host: str) -> str:
        server = ThreadingHTTPServer((host, 0), _Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://{host}:{server.server_address[1]}"
        if host == "127.0.0.2":
            _Handler.other = url
        return url

    _Handler.trickles.clear()
    yield start
    _Handler.other = ""
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}


def _download(url: str, env: dict[str, str], max_size: str | None = None) -> Path:
    return llvm_archive.fetch.download(
        url, SHA256, llvm_archive.cache_dir(env), **({"max_size": parse_size(max_size)} if max_size else {})
    )


def _left(env: dict[str, str]) -> list[str]:
    folder = llvm_archive.cache_dir(env)
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_download_within_the_cap_is_kept(serve: Serve, env: dict[str, str]) -> None:
    url = serve("127.0.0.1")
    cached = _download(f"{url}/chunked.tar.gz", env, "3M")
    assert cached.read_bytes() == ARCHIVE
    assert _left(env) == [cached.name]


@pytest.mark.parametrize("route", ["archive.tar.gz", "chunked.tar.gz"], ids=["announced", "not-announced"])
def test_a_download_larger_than_the_cap_is_refused_and_leaves_nothing(
    route: str, serve: Serve, env: dict[str, str]
) -> None:
    url = f"{serve('127.0.0.1')}/{route}"
    with pytest.raises(SourceFetchError) as raised:
        _download(url, env, "1M")
    assert raised.value.message == (
        f"--llvm-archive {url} is larger than 1.0 MiB (--llvm-archive-max-size): not downloaded further, "
        "nothing kept"
    )
    assert raised.value.fix == "check the URL; if that file is right, raise --llvm-archive-max-size"
    assert _left(env) == []


@pytest.mark.parametrize(
    ("value", "size"),
    [("4G", 4 << 30), ("1500M", 1500 << 20), ("500MiB", 500 << 20), ("1.5g", 3 << 29), ("123456", 123456)],
)
def test_the_cap_is_read_in_bytes_or_binary_units(value: str, size: int) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("value", ["", "lots", "0", "-1G", "4X"])
def test_a_cap_that_is_not_a_size_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"--llvm-archive-max-size {value!r} is not a size"):
        parse_size(value)


def test_the_cap_alone_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="--llvm-archive-max-size works only with --llvm-archive"):
        llvm_archive.from_options(None, None, env=env, fetch=True, max_size="4G")


def test_a_redirect_to_another_origin_is_an_error_naming_both(serve: Serve, env: dict[str, str]) -> None:
    url = serve("127.0.0.1")
    other = serve("127.0.0.2")
    with pytest.raises(SourceFetchError) as raised:
        _download(f"{url}/elsewhere", env)
    assert raised.value.message == (
        f"--llvm-archive {url}/elsewhere could not be downloaded: {url} redirected to another origin, {other}: "
        "not followed"
    )
    assert raised.value.fix.startswith(f"if {other} is the server you mean, give its URL yourself")
    assert _left(env) == []


def test_a_redirect_within_the_server_is_followed(serve: Serve, env: dict[str, str]) -> None:
    assert _download(f"{serve('127.0.0.1')}/moved", env).read_bytes() == ARCHIVE


@pytest.mark.parametrize("spelling", ["2130706433", "0x7f.1", "127.0.0.%31"])
def test_a_url_spelt_otherwise_is_downloaded_from_the_host_the_standard_reads(
    spelling: str, serve: Serve, env: dict[str, str]
) -> None:
    """Read as rattler and browsers read it (issue 41): ``0x7f.1`` is this machine's 127.0.0.1."""
    url = serve("127.0.0.1").replace("127.0.0.1", spelling)
    assert _download(f"{url}/archive.tar.gz", env).read_bytes() == ARCHIVE


def test_a_url_read_as_two_hosts_is_refused_before_a_request(serve: Serve, env: dict[str, str]) -> None:
    """``\\@``: 127.0.0.1 to the WHATWG standard, 127.0.0.2 to Python: refused in one line, nothing kept."""
    url, other = serve("127.0.0.1"), serve("127.0.0.2")
    with pytest.raises(ConfigurationError) as raised:
        _download(f"{url}\\@{other.removeprefix('http://')}/archive.tar.gz", env)
    assert raised.value.message == (
        "--llvm-archive 'http://…' names one server to Python's URL parser and another to rattler's (WHATWG): "
        "they read its host or port differently"
    )
    assert _left(env) == []


@pytest.mark.parametrize(
    ("route", "reason"),
    [
        (
            "short.tar.gz",
            "{url}'s answer broke off after 3145728 bytes of the 3146728 it announced (a short read)",
        ),
        ("missing.tar.gz", "the server answered HTTP 404 Not Found"),
    ],
    ids=["short-read", "not-found"],
)
def test_a_failed_download_is_one_line_and_leaves_nothing(
    route: str, reason: str, serve: Serve, env: dict[str, str]
) -> None:
    url = serve("127.0.0.1")
    with pytest.raises(SourceFetchError) as raised:
        _download(f"{url}/{route}", env)
    assert raised.value.message == (
        f"--llvm-archive {url}/{route} could not be downloaded: {reason.format(url=url)}"
    )
    assert _left(env) == []


def _downloading(url: str, env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    """The real console script building from ``url``, once its partial download is in the cache."""
    argv = [str(CONSOLE_SCRIPT), "build", "--output-dir", str(tmp_path / "out")]
    process = subprocess.Popen(
        [*argv, "--llvm-archive", url, "--llvm-archive-sha256", SHA256],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + seconds(60)
    while not [n for n in _left(env) if n.startswith(".incoming-")]:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the download did not start"
        time.sleep(POLL)
    return process


@pytest.mark.parametrize(
    ("signum", "line"),
    [
        (signal.SIGINT, "flagtree-feedstock: interrupted"),
        (signal.SIGTERM, "flagtree-feedstock: terminated (SIGTERM)"),
        (signal.SIGHUP, "flagtree-feedstock: terminated (SIGHUP)"),
    ],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_an_interrupted_download_leaves_no_partial_file(
    signum: signal.Signals, line: str, serve: Serve, env: dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C, a cancelled job's SIGTERM, a dropped session's SIGHUP: the partial download goes with the run."""
    process = _downloading(f"{serve('127.0.0.1')}/slow.tar.gz", env, tmp_path)
    process.send_signal(signum)
    _, err = process.communicate(timeout=seconds(60))
    assert process.returncode == 128 + signum, err
    assert err.splitlines()[-1] == line
    assert _left(env) == []


def test_a_trickling_server_is_cut_off_at_the_timeout(
    serve: Serve, env: dict[str, str], tmp_path: Path
) -> None:
    """A byte a second keeps every read within its own timeout: the whole download's deadline
    (--llvm-archive-timeout) ends it, in one line, with nothing left in the cache."""
    url = f"{serve('127.0.0.1')}/trickle.tar.gz"
    argv = ["build", "--output-dir", str(tmp_path / "out"), "--llvm-archive", url]
    done = subprocess.run(
        [
            str(CONSOLE_SCRIPT),
            *argv,
            "--llvm-archive-sha256",
            SHA256,
            "--llvm-archive-timeout",
            seconds_arg(2),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    took = time.monotonic() - _Handler.trickles[0]  # from the request: the command's start-up is not timed
    errors = [line for line in done.stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert done.returncode == 6, done.stderr
    line = (
        f"flagtree-feedstock: error: --llvm-archive {url} could not be downloaded: {url.rsplit('/', 1)[0]} did "
        f"not finish the request within {seconds_arg(2)} s: gave up (fix: on a slow link, raise --llvm-archive-timeout; or "
        "download the file yourself and pass its path)"
    )
    assert errors == [line], done.stderr
    assert "Traceback" not in done.stderr
    # The trickle lasts 45 s.
    assert took < seconds(30), f"the download went on for {took:.0f} s"
    assert _left(env) == []


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf", "nan"])
def test_a_timeout_that_is_not_seconds_is_refused(value: str, env: dict[str, str]) -> None:
    with pytest.raises(
        ConfigurationError, match=f"--llvm-archive-timeout {value!r} is not a number of seconds"
    ):
        llvm_archive.from_options(
            "https://example.invalid/a.tar.gz", SHA256, env=env, fetch=True, timeout=value
        )


def test_a_signed_url_s_query_is_never_printed(
    serve: Serve, env: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A presigned URL's query is a key to the file: the messages and the log show the URL without it; so do
    the error and the log records themselves, not only what the console script prints (which shows every
    URL's query as `?…`, whatever it is given)."""
    url = f"{serve('127.0.0.1')}/missing.tar.gz?sv=2026-01-01&sig=SIGNATURE-123"
    with caplog.at_level(logging.INFO), pytest.raises(SourceFetchError) as raised:
        _download(url, env)
    assert "SIGNATURE-123" not in f"{raised.value.message} {raised.value.fix}"
    logged = [record.getMessage() for record in caplog.records]
    bare = url.split("?", maxsplit=1)[0]
    assert [line for line in logged if "downloading" in line] == [f"downloading {bare}?…"]
    assert not [line for line in logged if "SIGNATURE-123" in line]
    argv = [
        "build",
        "--output-dir",
        str(tmp_path / "out"),
        "--llvm-archive",
        url,
        "--llvm-archive-sha256",
        SHA256,
    ]
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert done.returncode == 6, done.stderr
    assert "SIGNATURE-123" not in done.stdout + done.stderr
    assert (
        f"--llvm-archive {url.split('?', maxsplit=1)[0]}?… could not be downloaded"
        in done.stderr.splitlines()[-1]
    )


def test_a_killed_download_s_partial_file_is_removed_by_the_next_download(
    serve: Serve, env: dict[str, str], tmp_path: Path
) -> None:
    """SIGKILL cannot be handled: the file it leaves names its process, gone, and the next download removes it."""
    url = serve("127.0.0.1")
    process = _downloading(f"{url}/slow.tar.gz", env, tmp_path)
    process.kill()
    process.communicate(timeout=seconds(60))
    (abandoned,) = [n for n in _left(env) if n.startswith(".incoming-")]
    assert abandoned.startswith(f".incoming-{process.pid}-")
    cached = _download(f"{url}/archive.tar.gz", env)
    assert _left(env) == [cached.name]


HOOK = Path(__file__).parent / "signal_hook"
DOWNLOAD = "flagtree_feedstock.llvm_archive.fetch.download"
# More moments than this before the first chunk is written to the spool, and the hook counts what it should not.
MOST_MOMENTS = 60


def test_a_signal_at_each_moment_of_the_spool_s_creation_leaves_no_partial_file(
    serve: Serve, env: dict[str, str], tmp_path: Path
) -> None:
    """A SIGTERM at each moment from the start of the download to its first chunk written to the spool (so at
    the spool file's creation too): the command ends with its one line, and the cache holds no partial file.
    The signal used to land, on a loaded machine, just after the file's creation and before the block that
    removes it (test_an_interrupted_download_leaves_no_partial_file[SIGTERM] failed so once)."""
    url = f"{serve('127.0.0.1')}/archive.tar.gz"
    mark = tmp_path / "moment"
    seen: list[str] = []
    for moment in range(1, MOST_MOMENTS + 1):
        mark.unlink(missing_ok=True)
        hooked = {
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), env.get("PYTHONPATH")])),
            "FLAGTREE_TEST_SIGNAL_AT": f"{moment}:SIGTERM:{DOWNLOAD}",
            "FLAGTREE_TEST_SIGNAL_MARK": str(mark),
        }
        argv = [str(CONSOLE_SCRIPT), "build", "--output-dir", str(tmp_path / "out"), "--llvm-archive", url]
        done = subprocess.run(
            [*argv, "--llvm-archive-sha256", SHA256],
            cwd=ROOT,
            env=hooked,
            capture_output=True,
            text=True,
            timeout=seconds(120),
            check=False,
        )
        if not mark.is_file():  # fewer moments than that: the download ran through untouched
            break
        seen.append(mark.read_text().strip())
        assert (done.returncode, done.stderr.splitlines()[-1:]) == (
            143,
            ["flagtree-feedstock: terminated (SIGTERM)"],
        ), f"at {seen[-1]}: {done.stderr}"
        assert [n for n in _left(env) if n.startswith(".incoming-")] == [], f"left at {seen[-1]}"
        if seen[-1].startswith("after BufferedWriter.write"):  # its first chunk: created and open
            break
    else:
        pytest.fail(f"no chunk written to the spool within {MOST_MOMENTS} moments: {seen}")
