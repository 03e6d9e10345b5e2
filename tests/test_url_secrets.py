"""A channel's or an archive URL's secrets (password, anaconda.org's /t/ token, a signed query) are shown nowhere.

Through the console script, against a loopback channel server (tests/_http_recorder.py, its own process): the
start-up summary, the "could not be solved" error, the lock record, the engine's files beside the output
folder, the worker's command line (readable by every local user in /proc), `--render-only` and its `--json`.
Each run's every output and every file it wrote is searched for each secret.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _timing import POLL, seconds, seconds_arg
from _toy import build_args, error_line

TESTS = Path(__file__).resolve().parent
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
PASSWORD, TOKEN, SIGNATURE = "PW-5ecret-91", "TK-5ecret-77", "SIG-5ecret-3"
SECRETS = (PASSWORD, TOKEN, SIGNATURE)
EMPTY = {"packages": {}, "packages.conda": {}}


def _rules() -> list[dict[str, Any]]:
    """An empty channel `chan` (so toy-host's toy-dep cannot be solved), under /t/TOKEN/ and without; only
    plain repodata.json (404 for its compressed forms and shards)."""
    rules: list[dict[str, Any]] = []
    for prefix in (f"/t/{TOKEN}/chan", "/chan"):
        for subdir in ("linux-64", "noarch"):
            base = f"{prefix}/{subdir}/"
            rules += [
                {"path": f"{base}repodata_shards", "status": 404},
                {"path": f"{base}repodata.json.", "status": 404},
                # A second's wait: the worker runs long enough for its command line to be read.
                {"path": f"{base}repodata.json", "status": 200, "delay": seconds(1), "body": {**EMPTY, "info": {"subdir": subdir}}},
            ]  # fmt: skip
    return [*rules, {"path": "/", "status": 404}]


@pytest.fixture
def channel_server(tmp_path: Path) -> Iterator[tuple[int, Callable[[], list[dict[str, Any]]]]]:
    """The recorder serving :func:`_rules` on 127.0.0.1: its port and what it was asked."""
    folder = tmp_path / "server"
    folder.mkdir()
    log = folder / "requests.jsonl"
    log.touch()
    with (folder / "stderr").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "_http_recorder.py"), str(log), json.dumps(_rules())],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    yield port, lambda: [json.loads(line) for line in log.read_text().splitlines()]
    process.terminate()
    process.wait(timeout=seconds(10))
    process.stdout.close()


def _environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TMPDIR": str(tmp_path / "tmp"),
        "no_proxy": "127.0.0.1",
        "NO_PROXY": "127.0.0.1",
    }


def _children(pid: int) -> dict[int, str]:
    """The running children of ``pid`` and their command lines, as any local user reads them; a child that
    has not exec'd yet (its command line still ``pid``'s own, which the user gave) is not one of them yet."""
    found = {}
    try:
        own = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return found
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                line = (entry / "cmdline").read_bytes()
                if line != own:
                    found[int(entry.name)] = line.replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
    return found


def _run_watching(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The console script run to its end (at most a minute), and every child command line seen meanwhile."""
    seen: set[str] = set()  # every command line, also of a pid seen again later (a zombie's is empty)
    with subprocess.Popen(
        [str(CONSOLE_SCRIPT), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        ends = time.monotonic() + seconds(60)
        while process.poll() is None and time.monotonic() < ends:
            seen.update(_children(process.pid).values())
            time.sleep(POLL)
        out, err = process.communicate(timeout=seconds(10))
    return subprocess.CompletedProcess(argv, process.returncode, out, err), sorted(seen)


def _files_holding_secrets(root: Path, skip: Path) -> list[str]:
    """Every file under ``root`` (but ``skip``) that holds one of the secrets, as given or base64-encoded."""
    forms = [s.encode() for s in SECRETS] + [base64.b64encode(f"user:{PASSWORD}".encode())]
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and skip not in path.parents:
            content = path.read_bytes()
            found += [f"{path}: {form!r}" for form in forms if form in content]
    return found


CHANNELS = {
    "token": (f"http://127.0.0.1:{{port}}/t/{TOKEN}/chan?sig={SIGNATURE}", "http://127.0.0.1:{port}/t/…/chan?…"),
    "password": (f"http://user:{PASSWORD}@127.0.0.1:{{port}}/chan?sig={SIGNATURE}", "http://…@127.0.0.1:{port}/chan?…"),
    # Odd spellings of the host (issue 41): shown, and keyed, as rattler reads them.
    "token-short-host": (f"http://127.1:{{port}}/t/{TOKEN}/chan?sig={SIGNATURE}", "http://127.0.0.1:{port}/t/…/chan?…"),
    "password-decimal-host": (f"http://user:{PASSWORD}@2130706433:{{port}}/chan?sig={SIGNATURE}", "http://…@127.0.0.1:{port}/chan?…"),
    "password-percent-host": (f"HTTP://user:{PASSWORD}@127.0.0.%31:{{port}}/./chan?sig={SIGNATURE}", "http://…@127.0.0.1:{port}/chan?…"),
}  # fmt: skip


@pytest.mark.parametrize("form", sorted(CHANNELS))
def test_a_channel_s_secrets_are_nowhere_but_in_its_requests(
    form: str, tmp_path: Path, channel_server: tuple[int, Callable[[], list[dict[str, Any]]]]
) -> None:
    port, requests = channel_server
    given, shown = (text.format(port=port) for text in CHANNELS[form])
    out = tmp_path / "out"
    lock = tmp_path / ".out.lock"
    if form.startswith(
        "token"
    ):  # a lock file as a version before made it (readable by every local user), kept
        lock.touch()
        lock.chmod(0o644)
    argv = build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "-c", given)
    done, children = _run_watching(argv, _environment(tmp_path))

    assert done.returncode == 7, done.stderr
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: the build/host requirements of toy-host 1.0 {_build_string(done.stderr)} "
        f"could not be solved from {shown} (fix: pass --channel with a reachable channel that has them "
        "(conda-forge needs network access))"
    )
    assert f"channels: {shown}" in done.stderr  # the start-up summary
    workers = [c for c in children if "flagtree_feedstock.builder._worker" in c]
    assert workers, children
    for text in (done.stdout, done.stderr, *children):
        assert not [s for s in SECRETS if s in text], text
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert list((tmp_path / "tmp").iterdir()) == []  # the credentials' file is gone
    # The credentials still reach the channel's server, as rattler sends them.
    asked = requests()
    assert asked
    if form.startswith("token"):
        assert all(r["path"].startswith(f"/t/{TOKEN}/chan/") for r in asked), asked
    else:
        basic = "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()
        assert all(r["headers"].get("authorization") == basic for r in asked), asked


def _build_string(stderr: str) -> str:
    return stderr.split("toy-host 1.0 ", 1)[1].split(maxsplit=1)[0]


def test_a_channel_with_a_password_and_a_token_is_refused_unshown(tmp_path: Path) -> None:
    given = f"http://user:{PASSWORD}@127.0.0.1:9/t/{TOKEN}/chan?sig={SIGNATURE}"
    argv = build_args("toy-host", tmp_path / "out", "--target-platform", "linux-64", "--no-test", "-c", given)
    done, _ = _run_watching(argv, _environment(tmp_path))
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr).startswith(
        "flagtree-feedstock: error: channel http://…@127.0.0.1:9/t/…/chan?… has both a password and a /t/ token"
    )
    assert not [s for s in SECRETS if s in done.stdout + done.stderr]
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []


ARCHIVE = (
    f"https://user:{PASSWORD}@archives.example/t/{TOKEN}/llvm-a66376b0-ubuntu-arm64.tar.gz?sig={SIGNATURE}"
)
ARCHIVE_SHOWN = "https://…@archives.example/t/…/llvm-a66376b0-ubuntu-arm64.tar.gz?…"


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_render_only_shows_no_secret(as_json: bool, tmp_path: Path) -> None:
    """`--render-only` of the feedstock's recipe with a secret channel and an --llvm-archive URL signed and
    with a password: the summary, the table or JSON, and the variant file it writes hold none of them."""
    channel = f"https://user:{PASSWORD}@conda.example/t/{TOKEN}/chan?sig={SIGNATURE}"
    argv = [
        "build",
        "--render-only",
        "-c",
        channel,
        "--llvm-archive",
        ARCHIVE,
        "--llvm-archive-sha256",
        "d" * 64,
    ]
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *argv, *(["--json"] if as_json else [])],
        env=_environment(tmp_path),
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for text in (done.stdout, done.stderr):
        assert not [s for s in SECRETS if s in text], text
    assert _files_holding_secrets(tmp_path, skip=tmp_path / "server") == []
    assert list((tmp_path / "cache").rglob("variants-*.yaml"))  # it wrote its variant file, without them
    if as_json:
        archive = json.loads(done.stdout)["llvm_archive"]
        assert (archive["origin"], archive["url"]) == (ARCHIVE_SHOWN, ARCHIVE_SHOWN)
    else:
        assert f"  {ARCHIVE_SHOWN}\n" in done.stdout


def test_a_process_s_command_line_is_recorded_without_a_url_s_secrets() -> None:
    """What the lock record and the "waiting for" message show of a process: its URLs without their secrets."""
    from flagtree_feedstock._processes import Process  # noqa: PLC0415

    url = f"http://user:{PASSWORD}@host.example/t/{TOKEN}/chan?sig={SIGNATURE}"
    with subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({seconds_arg(30)})", "-c", url]
    ) as process:
        try:
            # Until the child has exec'd (on a loaded machine a moment after Popen returns), /proc shows the
            # command line of the fork, or none.
            cmdline = Path(f"/proc/{process.pid}/cmdline")
            deadline = time.monotonic() + seconds(20)
            while b"time.sleep" not in cmdline.read_bytes() and time.monotonic() < deadline:
                time.sleep(POLL)
            found = Process.of(process.pid)
        finally:
            process.kill()
    assert found is not None
    assert found.command.endswith(" -c http://…@host.example/t/…/chan?…"), found.command


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        # Python reads the password 'PW-5ecret@a.test\\', rattler 'PW-5ecret': both are masked.
        ("http://user:PW-5ecret@a.test\\@b.test/chan", "PW-5ecret"),
        ("http://user:PW-5ecret%40b@2130706433:8/chan", "PW-5ecret@b"),
        ("http://h.test/a/../t/TK-5ecret/chan", "TK-5ecret"),  # the token after the dot segments go
        ("http://h.test/%74/TK-5ecret/chan", "TK-5ecret"),  # a server decodes %74: the same /t/ segment
        ("http://u:PW-5ecret@xn--abc.example/chan", "PW-5ecret"),  # refused: nothing shown after the scheme
    ],
    ids=["two-hosts", "decimal-host", "dot-segments", "encoded-t", "bad-punycode"],
)
def test_a_secret_of_a_url_with_an_odd_host_is_masked_in_every_message(url: str, secret: str) -> None:
    """Where Python and the WHATWG standard read a URL differently, the secrets each finds are masked: in the
    URL as shown, and wherever an engine's message prints them apart."""
    from flagtree_feedstock._urls import one_line, shown_text, shown_url  # noqa: PLC0415

    assert secret not in shown_url(url)
    assert secret not in one_line(f"fetching {url} failed")
    assert secret not in shown_text(f"the server refused {secret} (from {url})", [url])
