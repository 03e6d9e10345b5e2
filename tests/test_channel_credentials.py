"""A channel's credentials go to the origin they were given for, and are written nowhere but a private file
that every ending removes (channel/credentials.py, issues 34 and 37).

Through the console script, against loopback channel servers (tests/_http_recorder.py, each its own process;
one serves https with a certificate made here by openssl): ``build --channel`` and ``channel install -c``.
Rattler keys its authentication file by host alone, so a channel on that host at another origin is refused; so
is a URL that Python and rattler read as two hosts (``\\@``). The host is the one rattler reads (issue 41): each
spelling of 127.0.0.1 (``2130706433``, ``0177.0.0.1``, ``0x7f.0.0.1``, ``127.1``, ``127.0.0.%31``, ``127.0.0.1.``)
and of ``[::1]`` is that host, and so are a unicode name and its punycode, upper and lower case, ``:80`` written or
not; ``host.`` is another host. Which Authorization header rattler sends for each is watched, not assumed: on a
loopback server, or on the recorder standing in for an http proxy (for names, which do not resolve here).
``channel install`` leaves no secret in rattler's cache nor in the prefix, and a SIGKILLed build's authentication
file is removed by the next build.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from rattler.index import index_fs

from _stub_channel import write_package
from _timing import POLL, seconds
from _tools import require_executable
from _toy import build_args, error_line

TESTS = Path(__file__).resolve().parent
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
USER, PASSWORD, TOKEN = "user", "PW-5ecret/91+x", "TK-5ecret-77"
QUOTED = quote(PASSWORD, safe="")  # as it stands in a URL
# Every form a secret could be written in: as given, URL-encoded, and the Basic header's base64.
FORMS = (PASSWORD, QUOTED, TOKEN, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())

Server = tuple[str, Callable[[], list[dict[str, Any]]]]  # its URL (scheme, host, port), what it was asked
StartServer = Callable[..., Server]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A server certificate for 127.0.0.1, its key, and the CA that signed it (made here: rustls, rattler's TLS,
    takes no self-signed certificate as a server's, and trusts this CA through SSL_CERT_FILE)."""
    openssl = require_executable("openssl", "openssl")
    folder = tmp_path_factory.mktemp("tls")
    ca, ca_key, cert, key = (folder / name for name in ("ca.pem", "ca.key", "cert.pem", "key.pem"))
    (folder / "leaf.cnf").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=flagtree test CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
         "-keyout", str(ca_key), "-out", str(ca)],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key),
         "-out", str(folder / "leaf.csr")],
        ["x509", "-req", "-in", str(folder / "leaf.csr"), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", "2", "-extfile", str(folder / "leaf.cnf"), "-out", str(cert)],
    ):  # fmt: skip
        subprocess.run([openssl, *command], check=True, capture_output=True)
    return cert, key, ca


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start a recorder (its own process, loopback only) with the given rules (404 for any other path): its
    URL and the requests it was sent."""
    started: list[subprocess.Popen[str]] = []
    folder = tmp_path / "server"
    folder.mkdir()

    def start(
        rules: list[dict[str, Any]], *, host: str = "127.0.0.1", tls: tuple[Path, Path, Path] | None = None
    ) -> Server:
        log = folder / f"requests-{len(started)}.jsonl"
        log.touch()
        options = ["--host", host, *(["--tls", str(tls[0]), str(tls[1])] if tls else [])]
        with (folder / f"stderr-{len(started)}").open("w") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    str(TESTS / "_http_recorder.py"),
                    str(log),
                    json.dumps([*rules, {"path": "/", "status": 404}]),
                    *options,
                ],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())
        bracketed = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL holds it
        return f"{'https' if tls else 'http'}://{bracketed}:{port}", lambda: [
            json.loads(line) for line in log.read_text().splitlines()
        ]

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=seconds(10))
        assert process.stdout is not None
        process.stdout.close()


def _channel_rules(base: str, folder: Path | None = None, *, delay: float = 0) -> list[dict[str, Any]]:
    """A channel at ``base`` (a path): ``folder``'s files, else an empty index per subdir; only plain
    repodata.json (404 for its compressed forms and shards), answered after ``delay`` seconds."""
    rules: list[dict[str, Any]] = []
    for subdir in ("linux-64", "noarch"):
        rules += [
            {"path": f"{base}/{subdir}/repodata_shards", "status": 404},
            {"path": f"{base}/{subdir}/repodata.json.", "status": 404},
        ]
        if folder is None:
            empty = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
            rules.append(
                {"path": f"{base}/{subdir}/repodata.json", "status": 200, "delay": delay, "body": empty}
            )
    if folder is not None:
        rules += [
            {"path": f"{base}/{path.relative_to(folder)}", "status": 200, "delay": delay, "file": str(path)}
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        ]
    return rules


def _environment(tmp_path: Path, **more: str) -> dict[str, str]:
    """The console script's environment: every cache, home and temporary folder under ``tmp_path``."""
    for name in ("tmp", "home", "xdg-cache", "rattler-cache"):
        (tmp_path / name).mkdir(exist_ok=True)
    return {
        **os.environ,
        "TMPDIR": str(tmp_path / "tmp"),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rattler-cache"),
        # A native crash (py-rattler's SIGSEGV, once) prints every thread's Python stack into the stderr the
        # test shows: what ran when it came.
        "PYTHONFAULTHANDLER": "1",
        "no_proxy": "127.0.0.1,127.0.0.2",
        "NO_PROXY": "127.0.0.1,127.0.0.2",
        **more,
    }


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *argv],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds(300),
    )


def _files_holding_secrets(root: Path, skip: Path) -> list[str]:
    """Every file under ``root`` (but ``skip``) that holds a secret in one of its :data:`FORMS`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and skip not in path.parents:
            content = path.read_bytes()
            found += [f"{path}: {form}" for form in FORMS if form.encode() in content]
    return found


def _sent_secret(requests: list[dict[str, Any]]) -> bool:
    return any(
        form in json.dumps(request["headers"]) + request["path"] for request in requests for form in FORMS
    )


def _install_args(
    local: Path, prefix: Path, *channels: str, specs: tuple[str, ...] = ("toy-app", "remote-lib")
) -> list[str]:
    extra = [option for channel in channels for option in ("-c", channel)]
    return ["channel", "install", str(local), *specs, "--prefix", str(prefix), "--target-platform", "linux-64", *extra]  # fmt: skip


@pytest.fixture
def channels(tmp_path: Path) -> tuple[Path, Path]:
    """A local channel folder with ``toy-app``, and a folder to serve ``remote-lib`` from (both indexed)."""
    local, remote = tmp_path / "local", tmp_path / "remote"
    write_package(local / "noarch" / "toy-app-1.0-h0_0.tar.bz2", "toy-app", "1.0", "h0_0", "noarch")
    write_package(remote / "noarch" / "remote-lib-1.0-h0_0.tar.bz2", "remote-lib", "1.0", "h0_0", "noarch")
    (remote / "linux-64").mkdir()
    for folder in (local, remote):
        asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    return local, remote


# ---- channel install: the secrets reach the server, and no file -------------------------------------------


# The channel's path for each form of its token: as anaconda.org gives it, and as a WHATWG reader (rattler, and
# a server) reads it to the same thing: after its dot segments, and with its ``t`` percent-encoded.
TOKEN_PATHS = {
    "token": f"/t/{TOKEN}/chan",
    "token-after-dot-segments": f"/x/../t/{TOKEN}/chan",
    "token-encoded-t": f"/%74/{TOKEN}/chan",
}


@pytest.mark.parametrize("form", ["password", *TOKEN_PATHS])
def test_channel_install_leaves_no_secret_in_rattler_s_cache_nor_in_any_file_it_writes(
    form: str, tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    local, remote = channels
    base = f"/t/{TOKEN}/chan" if form != "password" else "/chan"
    url, requests = start_server(_channel_rules(base, remote))
    channel = f"{url}{TOKEN_PATHS[form]}" if form != "password" else _with_password(url) + "/chan"
    prefix = tmp_path / "prefix"
    done = _run([*_install_args(local, prefix, channel)], _environment(tmp_path))

    assert done.returncode == 0, done.stderr
    assert (
        len(list((prefix / "conda-meta").glob("remote-lib-1.0-h0_0.json"))) == 1
    )  # installed from the server
    asked = requests()
    assert any(r["path"].endswith("remote-lib-1.0-h0_0.tar.bz2") for r in asked), asked
    if form != "password":
        assert all(r["path"].startswith(f"/t/{TOKEN}/chan/") for r in asked), asked
    else:
        basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        assert all(r["headers"].get("authorization") == basic for r in asked), asked
    assert not [form for form in FORMS if form in done.stdout + done.stderr]
    # Rattler's caches (RATTLER_CACHE_DIR, XDG_CACHE_HOME, ~/.cache), the prefix, the temporary folder: all read.
    # Its index cache is the run's own, in the temporary folder, removed (it read the loopback relay only).
    assert not list((tmp_path / "xdg-cache" / "rattler").rglob("*.info.json"))
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []
    assert list((tmp_path / "tmp").iterdir()) == []  # the credentials' file is gone


# ---- a credential goes to its own origin only ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["build", "install"])
def test_a_password_for_an_https_channel_is_not_sent_to_plain_http_on_another_port(
    command: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    certificate: tuple[Path, Path, Path],
    start_server: StartServer,
) -> None:
    secure, secure_requests = start_server(_channel_rules("/chan"), tls=certificate)
    plain, plain_requests = start_server(_channel_rules("/chan"))
    given = secure.replace("://", f"://{USER}:{QUOTED}@") + "/chan"
    env = _environment(tmp_path, SSL_CERT_FILE=str(certificate[2]))
    if command == "build":
        argv = build_args("toy-host", tmp_path / "out", "--target-platform", "linux-64", "--no-test", "-c", given, "-c", f"{plain}/chan")  # fmt: skip
    else:
        argv = _install_args(channels[0], tmp_path / "prefix", given, f"{plain}/chan")
    done = _run(argv, env)

    assert not _sent_secret(plain_requests()), plain_requests()  # the clear-text channel never sees it
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr) == _another_origin(
        f"{plain}/chan", f"{_shown(secure)}/chan", plain, secure
    )
    assert secure_requests() == plain_requests() == []  # refused before anything is fetched
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


def test_the_credentials_reach_the_https_channel_they_were_given_for(
    tmp_path: Path,
    channels: tuple[Path, Path],
    certificate: tuple[Path, Path, Path],
    start_server: StartServer,
) -> None:
    """The nearest real thing to the refused case that works: the https channel's own requests, over TLS, carry
    the password; a second channel of the same origin gets it too, as the user named that origin."""
    local, remote = channels
    rules = [*_channel_rules("/chan", remote), *_channel_rules("/other")]
    secure, requests = start_server(rules, tls=certificate)
    given = secure.replace("://", f"://{USER}:{QUOTED}@") + "/chan"
    env = _environment(tmp_path, SSL_CERT_FILE=str(certificate[2]))
    done = _run([*_install_args(local, tmp_path / "prefix", given, f"{secure}/other")], env)

    assert done.returncode == 0, done.stderr
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    asked = requests()
    assert {r["path"].split("/")[1] for r in asked} == {"chan", "other"}, asked
    assert all(r["headers"].get("authorization") == basic for r in asked), asked
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


@pytest.mark.parametrize("command", ["build", "install"])
def test_a_url_that_names_two_hosts_is_refused_in_one_line(
    command: str, tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    """``http://user:PW@A\\@B/chan``: host A to rattler (the password PW), host B to Python's urlsplit."""
    first, first_requests = start_server(_channel_rules("/chan"))
    second, second_requests = start_server(_channel_rules("/chan"), host="127.0.0.2")
    given = first.replace("://", f"://{USER}:{QUOTED}@") + "\\@" + second.removeprefix("http://") + "/chan"
    if command == "build":
        argv = build_args(
            "toy-host", tmp_path / "out", "--target-platform", "linux-64", "--no-test", "-c", given
        )
    else:
        argv = _install_args(channels[0], tmp_path / "prefix", given)
    done = _run(argv, _environment(tmp_path))

    assert (first_requests(), second_requests()) == ([], [])
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr) == (
        "flagtree-feedstock: error: channel http://… names one server to Python's URL parser and another to "
        "rattler's (WHATWG): they read its host or port differently (fix: write the host right after the scheme's "
        "two slashes, with no backslash before the path, and a backslash or slash in a user name or password as "
        "%5C or %2F)"
    )
    assert not [form for form in FORMS if form in done.stdout + done.stderr]


# ---- a SIGKILLed build's credentials' file --------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found |= {int(entry.name), *_descendants(int(entry.name))}
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_build_writes_its_credentials_to_no_file_even_when_sigkilled(
    tmp_path: Path, start_server: StartServer
) -> None:
    """A build hands the engine no authentication file: its solves read the channels through the toolkit's relay
    on loopback (channel/index_relay.py), whose client holds the credentials in memory, and the build call reads
    the toolkit's folders only. So a SIGKILL, which no cleanup survives, leaves no secret in any file."""
    url, requests = start_server(_channel_rules("/chan", delay=seconds(30)))  # the relay waits on it
    given = url.replace("://", f"://{USER}:{QUOTED}@") + "/chan"
    out = tmp_path / "out"
    env = _environment(tmp_path)
    argv = build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "-c", given)
    with subprocess.Popen(
        [str(CONSOLE_SCRIPT), *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as build:
        ends = time.monotonic() + seconds(120)
        while not requests() and build.poll() is None and time.monotonic() < ends:
            time.sleep(POLL)
        assert requests(), "the relay never asked the channel"
        assert list(tmp_path.rglob("auth.json")) == []
        assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []
        children = _descendants(build.pid)
        build.send_signal(signal.SIGKILL)
        build.wait(timeout=seconds(30))
    ends = time.monotonic() + seconds(60)  # the watchdog ends the worker and what it started
    while any(map(_alive, children)) and time.monotonic() < ends:
        time.sleep(POLL)
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


def test_a_channel_install_writes_its_credentials_to_no_file_even_when_sigkilled(
    tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    """``channel install`` hands rattler no authentication file: its solve reads the channels through the
    toolkit's relay on loopback (channel/index_relay.py), whose client holds the credentials in memory. So a
    SIGKILL, which no cleanup survives, leaves no secret in any file."""
    local, remote = channels
    url, requests = start_server(_channel_rules("/chan", remote, delay=seconds(30)))  # the solve waits on it
    given = url.replace("://", f"://{USER}:{QUOTED}@") + "/chan"
    env = _environment(tmp_path)
    argv = _install_args(local, tmp_path / "prefix", given)
    with subprocess.Popen(
        [str(CONSOLE_SCRIPT), *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as install:
        ends = time.monotonic() + seconds(60)
        while not requests() and install.poll() is None and time.monotonic() < ends:
            time.sleep(POLL)
        assert requests(), "the install never asked the channel"
        assert list(tmp_path.rglob("auth.json")) == []
        install.send_signal(signal.SIGKILL)
        install.wait(timeout=seconds(30))
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


# ---- another spelling of the host is the same host (issue 41) ----------------------------------------------

# Spellings of 127.0.0.1 that rattler reads as 127.0.0.1 (the WHATWG standard's IPv4 parser) and Python did not.
LOOPBACK_SPELLINGS = {
    "decimal": "2130706433",
    "octal": "0177.0.0.1",
    "hex": "0x7f.0.0.1",
    "short": "127.1",
    "percent": "127.0.0.%31",
    "trailing-dot": "127.0.0.1.",
}
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _with_password(url: str) -> str:
    return url.replace("://", f"://{USER}:{QUOTED}@", 1)


@pytest.mark.parametrize("command", ["build", "install"])
@pytest.mark.parametrize("spelling", list(LOOPBACK_SPELLINGS.values()), ids=list(LOOPBACK_SPELLINGS))
def test_a_password_is_not_sent_to_another_port_through_another_spelling_of_the_host(
    command: str,
    spelling: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    start_server: StartServer,
) -> None:
    """The issue's case: ``-c http://alice:PW@127.0.0.1:P1/c -c http://2130706433:P2/c`` sent the password to
    P2, as rattler reads both hosts as 127.0.0.1."""
    first, first_requests = start_server(_channel_rules("/chan"))
    second, second_requests = start_server(_channel_rules("/chan"))
    given = _with_password(first) + "/chan"
    other = second.replace("127.0.0.1", spelling) + "/chan"
    if command == "build":
        argv = build_args("toy-host", tmp_path / "out", "--target-platform", "linux-64", "--no-test", "-c", given, "-c", other)  # fmt: skip
    else:
        argv = _install_args(channels[0], tmp_path / "prefix", given, other)
    done = _run(argv, _environment(tmp_path))

    assert (first_requests(), second_requests()) == ([], [])  # refused before anything is fetched
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr) == _another_origin(
        f"{second}/chan", f"{_shown(first)}/chan", second, first
    )
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


def _shown(url: str) -> str:
    return url.replace("://", "://…@", 1)


def _another_origin(channel: str, owner: str, origin: str, given_for: str) -> str:
    """The one line refusing ``channel`` (at ``origin``) on the host of the channel ``owner`` (as shown), whose
    credentials were given for ``given_for``, over plain http."""
    return (
        f"flagtree-feedstock: error: channel {channel} is on the host of channel {owner} at another origin "
        f"({origin}, not {given_for}), and rattler keys credentials by host alone: it would be sent that "
        f"channel's credentials in clear text (fix: give the credentials with this channel's URL too if "
        f"{origin} should have them, else serve both channels from one origin or leave one out)"
    )


@pytest.mark.parametrize(
    "spelling", ["2130706433", "0x7f.1", "127.0.0.%31", "[0:0::1]"], ids=["decimal", "hex", "percent", "ipv6"]
)
def test_a_channel_spelt_otherwise_gets_its_credentials_as_rattler_reads_its_host(
    spelling: str, tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    """Rattler is handed the canonical URL, and the credentials are keyed by the canonical host: so they reach
    the channel, each request of the solve and the checked copy's download (keyed by Python's host, as before,
    rattler never found them; for ``[::1]`` it looks up the host with its brackets)."""
    local, remote = channels
    host = "::1" if spelling.startswith("[") else "127.0.0.1"
    url, requests = start_server(_channel_rules("/chan", remote), host=host)
    port = url.rsplit(":", 1)[1]
    done = _run(
        _install_args(local, tmp_path / "prefix", f"http://{USER}:{QUOTED}@{spelling}:{port}/chan"),
        _environment(tmp_path, no_proxy="127.0.0.1,::1", NO_PROXY="127.0.0.1,::1"),
    )

    assert done.returncode == 0, done.stderr
    asked = requests()
    assert any(r["path"].endswith("remote-lib-1.0-h0_0.tar.bz2") for r in asked), asked
    assert all(r["headers"].get("authorization") == BASIC for r in asked), asked
    assert {r["headers"]["host"] for r in asked} == {url.removeprefix("http://")}  # the canonical host
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


def test_two_spellings_of_ipv6_loopback_are_one_host(
    tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    first, first_requests = start_server(_channel_rules("/chan"), host="::1")
    second, second_requests = start_server(_channel_rules("/chan"), host="::1")
    other = second.replace("[::1]", "[0:0:0:0:0:0:0:1]") + "/chan"
    done = _run(_install_args(channels[0], tmp_path / "prefix", _with_password(first) + "/chan", other), _environment(tmp_path))  # fmt: skip

    assert (first_requests(), second_requests()) == ([], [])
    assert done.returncode == 2, done.stderr
    assert (
        f"channel {second}/chan is on the host of channel {_shown(first)}/chan at another origin"
        in done.stderr
    )


# ---- names, through the recorder as an http proxy: what rattler asks for, with which header ------------------


def _through_proxy(tmp_path: Path, proxy: str) -> dict[str, str]:
    """The console script's environment with every http request sent to ``proxy`` (no host bypasses it)."""
    env = _environment(tmp_path, http_proxy=proxy, HTTP_PROXY=proxy)
    for name in ("no_proxy", "NO_PROXY"):
        env.pop(name)
    return env


@pytest.mark.parametrize(
    ("given", "other", "origin"),
    [
        ("BÜCHER.Example:8", "http://xn--bcher-kva.example:8", "http://xn--bcher-kva.example:8"),
        ("pkgs.example:80", "HTTP://PKGS.EXAMPLE", "http://pkgs.example"),
    ],
    ids=["unicode-and-punycode-in-any-case", "default-port-written-or-not"],
)
def test_a_name_written_otherwise_is_one_origin(
    *,
    given: str,
    other: str,
    origin: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    start_server: StartServer,
) -> None:
    """The channel given the password (a unicode name in upper case; ``:80`` written) and another written
    otherwise (its punycode; in upper case, no port): one origin, so the pair is not refused as two origins of
    one host (exit 2). Nothing resolves these names here: the recorder is the http proxy every request goes to.
    Every byte of the channels is fetched by the toolkit's relay (channel/index_relay.py), whose client sends
    no password over plain http to another machine: the channel is refused in one line naming ``origin``, as
    the toolkit reads it, and the password is sent nowhere (before the relay, rattler sent it in clear)."""
    local, remote = channels
    proxy, requests = start_server(
        [*_channel_rules(f"{origin}/chan", remote), *_channel_rules(f"{origin}/other")]
    )
    argv = _install_args(
        local,
        tmp_path / "prefix",
        f"http://{USER}:{QUOTED}@{given}/chan",
        f"{other}/other",
        specs=("toy-app",),
    )
    done = _run(argv, _through_proxy(tmp_path, proxy))

    assert done.returncode == 9, done.stderr
    assert f"not sending the token to {origin}: plain http to another machine" in error_line(done.stderr)
    assert not _sent_secret(requests())


@pytest.mark.parametrize(
    ("given", "other", "shown"),
    [
        (
            "http://…@bücher.example:8/chan",
            "http://XN--BCHER-KVA.example:9/other",
            (
                "channel http://xn--bcher-kva.example:9/other is on the host of channel "
                "http://…@xn--bcher-kva.example:8/chan at another origin (http://xn--bcher-kva.example:9, not "
                "http://xn--bcher-kva.example:8)"
            ),
        ),
        (
            "https://…@pkgs.example:443/chan",
            "http://pkgs.example:443/other",
            (
                "channel http://pkgs.example:443/other is on the host of channel https://…@pkgs.example/chan at "
                "another origin (http://pkgs.example:443, not https://pkgs.example)"
            ),
        ),
    ],
    ids=["punycode-at-another-port", "http-at-https-s-port"],
)
def test_another_origin_of_a_name_is_refused_as_rattler_reads_it(
    *,
    given: str,
    other: str,
    shown: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    start_server: StartServer,
) -> None:
    proxy, requests = start_server([])
    argv = _install_args(channels[0], tmp_path / "prefix", given.replace("…", f"{USER}:{QUOTED}"), other)
    done = _run(argv, _through_proxy(tmp_path, proxy))
    assert requests() == []
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr).startswith(f"flagtree-feedstock: error: {shown}")


def test_a_name_with_a_trailing_dot_is_another_host_as_rattler_reads_it(
    tmp_path: Path, channels: tuple[Path, Path], start_server: StartServer
) -> None:
    """``pkgs.example`` given the password, ``pkgs.example.`` none: two hosts to rattler's authentication lookup
    (an exact match on the host), so the pair is not refused (exit 2; _url_parsing.py argues why ``host.`` is
    its own origin). The relay's client sends no password over plain http to another machine: the channel
    that has one is refused in one line, and no password is sent, to either."""
    local, remote = channels
    proxy, requests = start_server(
        [
            *_channel_rules("http://pkgs.example:8/chan", remote),
            *_channel_rules("http://pkgs.example.:8/other"),
        ]
    )
    given = f"http://{USER}:{QUOTED}@pkgs.example:8/chan"
    done = _run(
        _install_args(local, tmp_path / "prefix", given, "http://pkgs.example.:8/other", specs=("toy-app",)),
        _through_proxy(tmp_path, proxy),
    )

    assert done.returncode == 9, done.stderr
    assert "not sending the token to http://pkgs.example:8: plain http" in error_line(done.stderr)
    assert not _sent_secret(requests())


# ---- rattler's own lookup: the key it uses for each spelling is the host the toolkit reads ------------------


def _rattler_asks(
    channel: str, key: str, requests: Callable[[], list[dict[str, Any]]], tmp_path: Path
) -> list[str | None]:
    """py-rattler (no toolkit in between) given ``channel`` as written and an authentication file holding the
    password under ``key``: the Authorization header of each request the server saw."""
    import rattler  # noqa: PLC0415 - the engine, imported where it is the subject

    folder = tmp_path / f"rattler-{len(list(tmp_path.glob('rattler-*')))}"
    folder.mkdir()
    auth = folder / "auth.json"
    auth.write_text(json.dumps({key: {"BasicHTTP": {"username": USER, "password": PASSWORD}}}))
    config = rattler.Config.from_toml(f"authentication-override-file = {json.dumps(str(auth))}")
    gateway = rattler.Gateway(cache_dir=folder / "cache", client=rattler.Client.from_config(config))
    before = len(requests())
    asyncio.run(gateway.query([rattler.Channel(channel)], ["noarch"], ["remote-lib"]))
    return [r["headers"].get("authorization") for r in requests()[before:]]


@pytest.mark.parametrize(
    ("host", "spelling", "ours", "python_s"),
    [
        ("127.0.0.1", "2130706433", "127.0.0.1", "2130706433"),
        ("127.0.0.1", "0177.0.0.1", "127.0.0.1", "0177.0.0.1"),
        ("127.0.0.1", "0x7f.0.0.1", "127.0.0.1", "0x7f.0.0.1"),
        ("127.0.0.1", "127.1", "127.0.0.1", "127.1"),
        ("127.0.0.1", "127.0.0.%31", "127.0.0.1", "127.0.0.%31"),
        ("127.0.0.1", "127.0.0.1.", "127.0.0.1", "127.0.0.1."),
        ("::1", "[0:0::1]", "[::1]", "0:0::1"),
        ("::1", "[::1]", "[::1]", "::1"),
    ],
)
def test_rattler_looks_a_credential_up_under_the_host_the_toolkit_reads(
    *,
    host: str,
    spelling: str,
    ours: str,
    python_s: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    start_server: StartServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ground truth for keying: rattler sends the password for ``spelling`` when the file holds it under the
    host the toolkit reads (:class:`Origin`), and not under the host Python's urlsplit reads."""
    from flagtree_feedstock._http import Origin  # noqa: PLC0415

    url, requests = start_server(_channel_rules("/chan", channels[1]), host=host)
    monkeypatch.setenv("no_proxy", "127.0.0.1,::1")
    channel = url.replace(f"[{host}]" if ":" in host else host, spelling) + "/chan"
    assert Origin.of(channel).host == ours

    assert set(_rattler_asks(channel, ours, requests, tmp_path)) == {BASIC}
    assert set(_rattler_asks(channel, python_s, requests, tmp_path)) == {None}


@pytest.mark.parametrize(
    ("spelling", "ours", "other"),
    [
        ("BÜCHER.example", "xn--bcher-kva.example", "bücher.example"),
        ("Pkgs.Example", "pkgs.example", "Pkgs.Example"),
        ("pkgs.example.", "pkgs.example.", "pkgs.example"),
        ("pkgs.example", "pkgs.example", "pkgs.example."),
    ],
)
def test_rattler_looks_a_name_up_as_the_toolkit_reads_it(
    *,
    spelling: str,
    ours: str,
    other: str,
    tmp_path: Path,
    channels: tuple[Path, Path],
    start_server: StartServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Names, through the recorder as the proxy: rattler asks for the punycode, lower-case host (a trailing dot
    kept), and sends the password kept under that host only."""
    from flagtree_feedstock._http import Origin  # noqa: PLC0415

    canonical = f"http://{ours}:8/chan"
    proxy, requests = start_server(_channel_rules(canonical, channels[1]))
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, proxy)
    channel = f"http://{spelling}:8/chan"
    assert Origin.of(channel).host == ours

    assert set(_rattler_asks(channel, ours, requests, tmp_path)) == {BASIC}
    assert set(_rattler_asks(channel, other, requests, tmp_path)) == {None}
    assert all(r["path"].startswith(f"{canonical}/") for r in requests())
