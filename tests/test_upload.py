"""``flagtree-feedstock upload``: real py-rattler-build uploads of real toy packages to a loopback recorder.

The recorder (tests/_http_recorder.py) stands in for prefix.dev and anaconda.org: it keeps every request
whole, so these tests check what is sent (URL, labels, headers, the package bytes) and where the token goes,
and it answers as each test scripts it (a package anaconda.org does not know yet, a 401, a 500).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from _timing import seconds, seconds_arg
from _tools import require_executable
from _toy import build_toy_multi
from flagtree_feedstock._http import redact
from flagtree_feedstock.channel import upload_api
from flagtree_feedstock.channel.package_check import DamagedPackage, read_info
from flagtree_feedstock.channel.package_info import package_info
from flagtree_feedstock.cli import main
from flagtree_feedstock.errors import ChannelError

TESTS = Path(__file__).resolve().parent
TOKEN = "recorded-secret-token"

Records = Callable[[], list[dict[str, Any]]]
Recorder = Callable[..., tuple[str, Records]]


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="module")
def toy_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel folder with two real packages (toy-llvm, toy-py for python 3.11), built by the main job."""
    return build_toy_multi(tmp_path_factory.mktemp("upload"))


@pytest.fixture
def packages(toy_channel: Path) -> list[Path]:
    found = sorted((toy_channel / "linux-64").glob("*.conda"))
    assert [p.name.rsplit("-", 2)[0] for p in found] == ["toy-llvm", "toy-py"]
    return found


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Start the recorder in its own process (the engine holds the GIL while it uploads); loopback only."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,127.0.0.2,localhost")
    started: list[subprocess.Popen[str]] = []

    def start(
        rules: list[dict[str, Any]] | None = None,
        *,
        host: str = "127.0.0.1",
        tls: tuple[Path, Path] | None = None,
    ) -> tuple[str, Records]:
        log = tmp_path / f"requests-{len(started)}.jsonl"
        log.touch()
        options = ["--host", host, *(["--tls", *map(str, tls)] if tls else [])]
        # The recorder's own stderr (socketserver's report of a client that hung up) goes to a file of its own:
        # on the test's stderr it could land inside the toolkit's error line, which the tests read.
        with (tmp_path / f"recorder-{len(started)}.stderr").open("w") as recorder_stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    str(TESTS / "_http_recorder.py"),
                    str(log),
                    json.dumps(rules or []),
                    *options,
                ],
                stdout=subprocess.PIPE,
                stderr=recorder_stderr,
                text=True,
            )
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())

        def records() -> list[dict[str, Any]]:
            requests = [json.loads(line) for line in log.read_text().splitlines()]
            for request in requests:
                request["body"] = base64.b64decode(request["body"])
            return requests

        return f"{'https' if tls else 'http'}://{host}:{port}", records

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=seconds(10))
        if process.stdout is not None:
            process.stdout.close()


def _form_parts(request: dict[str, Any]) -> dict[str, tuple[dict[str, str], bytes]]:
    """A multipart/form-data body as {field name: (part headers, content)}."""
    content_type = request["headers"]["content-type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    boundary = content_type.split("boundary=", 1)[1].encode()
    body: bytes = request["body"]
    assert body.endswith(b"--" + boundary + b"--\r\n")
    parts = {}
    for chunk in body.split(b"--" + boundary)[1:-1]:
        head, _, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n"))
        headers = {k.lower(): v for k, v in headers.items()}
        name = headers["content-disposition"].split('name="', 1)[1].split('"', 1)[0]
        parts[name] = (headers, content.removesuffix(b"\r\n"))
    return parts


def _assert_token_only_in_authorization(requests: list[dict[str, Any]], output: str) -> None:
    """The token is sent as a header to the API and nowhere else: not in a URL, a body or the output."""
    for request in requests:
        assert TOKEN not in request["path"]
        assert TOKEN.encode() not in request["body"]
        assert [k for k, v in request["headers"].items() if TOKEN in v] in ([], ["authorization"])
    assert TOKEN not in output


def test_prefix_upload_sends_each_package_whole_with_the_token(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder()
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 0
    requests = records()
    assert [(r["method"], r["path"]) for r in requests] == [
        call for p in packages for call in _prefix_calls("flagtree", p)
    ]
    assert {r["headers"]["authorization"] for r in requests} == {f"Bearer {TOKEN}"}
    for request, package in zip(requests[1::2], packages, strict=True):
        headers, content = _form_parts(request)["file"]
        assert 'filename="' + package.name + '"' in headers["content-disposition"]
        assert headers["x-file-name"] == package.name
        assert headers["x-file-sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
        assert content == package.read_bytes()
    captured = capsys.readouterr()
    _assert_token_only_in_authorization(requests, captured.out + captured.err)
    assert captured.out.splitlines() == [
        "uploaded 2 package(s) to prefix channel flagtree:",
        *(f"  {p}" for p in packages),
    ]


def _prefix_calls(channel: str, package: Path) -> list[tuple[str, str]]:
    """The lookup of what the channel holds (its subdir's repodata), then the upload."""
    return [("GET", f"/{channel}/linux-64/repodata.json"), ("POST", f"/api/v1/upload/{channel}")]


def _dist(owner: str, package: Path) -> str:
    name, version, _ = package.name.rsplit("-", 2)
    return f"/dist/{owner}/{name}/{version}/linux-64%2F{package.name}"


def _anaconda_calls(owner: str, package: Path, *, new: bool) -> list[tuple[str, str]]:
    name, version, _ = package.name.rsplit("-", 2)
    create = "POST" if new else "PATCH"  # a package/release anaconda.org does not know yet is created
    return [
        ("GET", _dist(owner, package)),  # the lookup of what the owner holds under that file name
        ("GET", f"/package/{owner}/{name}"),
        (create, f"/package/{owner}/{name}"),
        ("GET", f"/release/{owner}/{name}/{version}"),
        (create, f"/release/{owner}/{name}/{version}"),
        ("POST", f"/stage/{owner}/{name}/{version}/linux-64/{package.name}"),
        ("POST", "/s3"),
        ("POST", f"/commit/{owner}/{name}/{version}/linux-64/{package.name}"),
    ]


@pytest.mark.parametrize("labels", [(), ("dev", "test")], ids=["default", "labels"])
def test_anaconda_upload_sends_the_labels_and_each_package_whole(
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    labels: tuple[str, ...],
) -> None:
    toy_channel = packages[0].parents[1]
    expected = list(labels) or ["main"]  # anaconda.org's default label
    url, records = recorder()
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "anaconda", "--channel", "flagos", "--url", url]
    assert main([*args, *(a for label in labels for a in ("--label", label))]) == 0
    requests = records()
    assert [(r["method"], r["path"]) for r in requests] == [
        call for p in packages for call in _anaconda_calls("flagos", p, new=False)
    ]
    for package, calls in zip(packages, [requests[:8], requests[8:]], strict=True):
        api = [r for r in calls if r["path"] != "/s3"]
        assert {r["headers"]["authorization"] for r in api} == {f"token {TOKEN}"}
        stage = json.loads(calls[5]["body"])
        assert stage["channels"] == expected  # the labels
        assert stage["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
        assert stage["attrs"]["subdir"] == "linux-64"
        assert stage["attrs"]["name"] == package.name.rsplit("-", 2)[0]
        # The file goes to the storage URL of the upload form, without the token.
        s3 = calls[6]
        assert "authorization" not in s3["headers"]
        assert _form_parts(s3)["file"][1] == package.read_bytes()
        assert json.loads(calls[7]["body"]) == {"dist_id": "recorded"}
    captured = capsys.readouterr()
    _assert_token_only_in_authorization(requests, captured.out + captured.err)
    assert captured.out.splitlines()[0] == "uploaded 2 package(s) to anaconda channel flagos:"


def test_anaconda_creates_a_package_that_does_not_exist_yet(
    toy_channel: Path, packages: list[Path], recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_found = {"status": 404, "body": {"error": "not found"}}
    url, records = recorder(
        [
            {"method": "GET", "path": "/package/", **not_found},
            {"method": "GET", "path": "/release/", **not_found},
        ]
    )
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "anaconda", "--channel", "flagos", "--url", url]
    assert main(args) == 0
    requests = records()
    assert [(r["method"], r["path"]) for r in requests] == [
        call for p in packages for call in _anaconda_calls("flagos", p, new=True)
    ]
    created = json.loads(requests[2]["body"])
    assert created["public"] is True
    assert created["public_attrs"]["name"] == "toy-llvm"


def test_missing_token_is_one_line_and_sends_nothing(
    toy_channel: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url, records = recorder()
    monkeypatch.delenv("PREFIX_API_KEY", raising=False)
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 2
    assert _error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: PREFIX_API_KEY " + PREFIX_NO_KEY.format(state="is not set")
    )
    assert records() == []


def test_a_refused_upload_is_one_line_without_the_token(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder([{"path": "/api/v1/upload/", "status": 401, "body": {"detail": "bad token"}}])
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 9
    captured = capsys.readouterr()
    assert _error_line(captured.err) == (
        f"flagtree-feedstock: error: uploading {packages[0].name} (1 of 2) to prefix channel flagtree at {url} "
        "failed: the server answered POST /api/v1/upload/flagtree with HTTP 401 Unauthorized: "
        '{"detail": "bad token"}; none uploaded '
        "(fix: check PREFIX_API_KEY (its scopes), the channel name and --url)"
    )
    assert captured.out == ""
    requests = records()
    # the lookup and the refused upload: the second package is not tried after a refusal
    assert [(r["method"], r["path"]) for r in requests] == _prefix_calls("flagtree", packages[0])
    _assert_token_only_in_authorization(requests, captured.out + captured.err)


def test_a_server_that_echoes_the_token_does_not_get_it_printed(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A refusal whose body repeats the token it was sent (some servers do; prefix.dev's answer is in the
    error the engine raises): the one-line error keeps the server's answer with the token masked."""
    url, records = recorder(
        [{"path": "/api/v1/upload/", "status": 401, "body": {"detail": f"invalid token {TOKEN}"}}]
    )
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    assert main(["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]) == 9
    captured = capsys.readouterr()
    assert _error_line(captured.err) == (
        f"flagtree-feedstock: error: uploading {packages[0].name} (1 of 2) to prefix channel flagtree at {url} "
        "failed: the server answered POST /api/v1/upload/flagtree with HTTP 401 Unauthorized: "
        '{"detail": "invalid token ***"}; none uploaded '
        "(fix: check PREFIX_API_KEY (its scopes), the channel name and --url)"
    )
    _assert_token_only_in_authorization(records(), captured.out + captured.err)


def test_a_server_error_half_way_reports_only_what_was_uploaded(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """toy-py is staged and its file sent, then its commit fails: it is half-uploaded, not uploaded."""
    url, records = recorder(
        [{"path": "/commit/flagos/toy-py/", "status": 500, "body": {"error": "internal"}}]
    )
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "anaconda", "--channel", "flagos", "--url", url]
    assert main(args) == 9
    captured = capsys.readouterr()
    commit = f"/commit/flagos/toy-py/1.0/linux-64/{packages[1].name}"
    assert _error_line(captured.err) == (
        f"flagtree-feedstock: error: uploading {packages[1].name} (2 of 2) to anaconda channel flagos at {url} "
        f'failed: the server answered POST {commit} with HTTP 500 Internal Server Error: {{"error": "internal"}}; '
        f"1 uploaded before it: {packages[0].name} (fix: the server failed: retry later, or check --url)"
    )
    assert captured.out == ""  # nothing is reported as uploaded
    assert [(r["method"], r["path"]) for r in records()][-1] == ("POST", commit)
    _assert_token_only_in_authorization(records(), captured.out + captured.err)


def test_a_folder_without_packages_is_nothing_to_do(
    empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    assert main(["upload", str(empty_channel), "--to", "prefix", "--channel", "flagtree"]) == 3
    assert _error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: no packages (*.conda, *.tar.bz2) in the subdirs of {empty_channel} "
        "(fix: build into it first: flagtree-feedstock build --output-dir DIR)"
    )


def test_missing_folder_and_unknown_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upload", str(tmp_path / "nope"), "--to", "prefix", "--channel", "x"]) == 2
    assert _error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: channel folder {tmp_path / 'nope'} does not exist "
        "(fix: pass the folder a build wrote (`flagtree-feedstock build --output-dir DIR`), "
        "or the merged CI artifacts)"
    )
    assert main(["upload", str(tmp_path), "--to", "quetz", "--channel", "x"]) == 2
    assert _error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: --to 'quetz' is not a server the feedstock uploads to "
        "(fix: use one of anaconda, prefix)"
    )


def test_an_empty_channel_name_is_refused(toy_channel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # In CI the name comes from a repository variable, which expands to "" when it is not set.
    assert main(["upload", str(toy_channel), "--to", "prefix", "--channel", ""]) == 2
    assert _error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: the target channel name is empty "
        "(fix: pass --channel NAME (in CI: set the repository variable CHANNEL_NAME))"
    )


# ---- the token: refused before any request when blank or spaced; never in any output --------------------

VARIABLES = {"prefix": "PREFIX_API_KEY", "anaconda": "ANACONDA_API_KEY"}
EMPTY = "is empty: uploading to {server} needs its API token (fix: export {var}=<token> (in CI: check that the secret {var} is set and not blank))"
SPACED = "holds whitespace (a space, tab or line break): an API token has none (fix: set {var} again without the spaces or the trailing newline (in CI: re-save the secret))"
# prefix.dev without a key (unset, or an unset secret's ""): a key or trusted publishing (test_trusted_publishing.py)
PREFIX_NO_KEY = (
    "{state} and no OIDC token can be requested here (ACTIONS_ID_TOKEN_REQUEST_URL is not set): uploading to "
    "prefix needs an API token or trusted publishing (fix: in a GitHub job, add `permissions: id-token: write` "
    "to it to publish by trusted publishing (docs/ci-and-publishing.md); elsewhere export PREFIX_API_KEY=<token>)"
)
BAD_TOKENS = {
    "empty": ("", EMPTY),  # an unset GitHub secret expands to ""
    "blank": ("   ", EMPTY),
    "newline": ("\n", EMPTY),
    "space-inside": ("recorded secret-token", SPACED),
    "trailing-newline": (TOKEN + "\n", SPACED),  # a secret pasted with its line break
    "trailing-crlf": (TOKEN + "\r\n", SPACED),
    "leading-space": (" " + TOKEN, SPACED),
    "tab": (TOKEN + "\t", SPACED),
    "newline-inside": ("recorded\nsecret", SPACED),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
@pytest.mark.parametrize("server", ["prefix", "anaconda"])
def test_a_blank_or_spaced_token_is_refused_before_any_request(
    server: str,
    case: str,
    *,
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    token, problem = BAD_TOKENS[case]
    if (server, token) == ("prefix", ""):
        problem = PREFIX_NO_KEY.format(state="is empty")
    variable = VARIABLES[server]
    url, records = recorder()
    monkeypatch.setenv(variable, token)
    assert main(["upload", str(toy_channel), "--to", server, "--channel", "flagtree", "--url", url]) == 2
    captured = capfd.readouterr()
    assert _error_line(captured.err) == (
        f"flagtree-feedstock: error: {variable} " + problem.format(server=server, var=variable)
    )
    assert records() == []
    assert captured.out == ""
    if token.strip():
        assert token.strip() not in captured.err


def test_redaction_replaces_the_token_and_nothing_else() -> None:
    assert (
        redact(f'{{"detail": "token {TOKEN} is not valid"}}', TOKEN) == '{"detail": "token *** is not valid"}'
    )
    # A blank token is never read as one; were it, no space may go (the old code turned each into ***).
    assert redact("a b c", " ") == "a b c"
    assert redact("a b c", "") == "a b c"
    odd = 'pfx_ab/cd+ef"gh'  # and the forms a server may echo it in: JSON-escaped, with \/ too, URL-quoted
    escaped = json.dumps(odd)[1:-1]
    forms = [odd, escaped, escaped.replace("/", "\\/"), quote(odd, safe="")]
    assert redact(" | ".join(forms), odd) == " | ".join(["***"] * len(forms))


def _run(args: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``flagtree-feedstock ARGS``: its status and what reached the process's stdout and stderr (fd level, so
    anything the engine writes itself counts)."""
    status = main(args)
    captured = capfd.readouterr()
    return status, captured.out, captured.err


ECHO = {"detail": f"token {TOKEN} is not valid for this channel"}


@pytest.fixture
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds the upload waits before each new try of a 5xx answer, noted, not slept (1 + 2 + 4 s a
    package otherwise): upload_api's ``time``, with its ``sleep`` noting them."""
    waits: list[float] = []

    class Clock:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        def sleep(self, seconds: float) -> None:
            waits.append(seconds)

    monkeypatch.setattr(upload_api, "time", Clock())
    return waits


@pytest.mark.parametrize(
    ("server", "rule", "expected"),
    [
        pytest.param(
            "prefix",
            {"method": "POST", "path": "/api/v1/upload/", "status": 401, "body": ECHO},
            "failed: the server answered POST /api/v1/upload/flagtree with HTTP 401 Unauthorized: "
            '{"detail": "token *** is not valid for this channel"}; '
            "none uploaded (fix: check PREFIX_API_KEY (its scopes), the channel name and --url)",
            id="prefix-upload-401",
        ),
        pytest.param(
            "prefix",  # tried 4 times; each answer's start is logged before the toolkit gives up
            {"method": "POST", "path": "/api/v1/upload/", "status": 500, "body": ECHO},
            "failed: the server answered POST /api/v1/upload/flagtree with HTTP 500 Internal Server Error: "
            '{"detail": "token *** is not valid for this channel"} (tried 4 times); none uploaded '
            "(fix: the server failed: retry later, or check --url)",
            id="prefix-upload-500",
        ),
        pytest.param(
            "prefix",  # the lookup of what the channel holds
            {"method": "GET", "path": "/flagtree/", "status": 401, "body": ECHO},
            "asking prefix at {url} whether it holds {name} failed: HTTP 401 Unauthorized (fix: check "
            "PREFIX_API_KEY (its scopes) and the channel name)",
            id="prefix-lookup-401",
        ),
        pytest.param(
            "anaconda",
            {"method": "GET", "path": "/package/", "status": 500, "body": ECHO},
            "failed: the server answered GET /package/flagtree/toy-llvm with HTTP 500 Internal Server Error: "
            '{"detail": "token *** is not valid for this channel"}; none uploaded (fix: the server failed: '
            "retry later, or check --url)",
            id="anaconda-package-500",
        ),
        pytest.param(
            "anaconda",
            {"method": "GET", "path": "/dist/", "status": 403, "body": ECHO},
            "asking anaconda at {url} whether it holds {name} failed: HTTP 403 Forbidden (fix: check "
            "ANACONDA_API_KEY (its scopes) and the channel name)",
            id="anaconda-lookup-403",
        ),
    ],
)
def test_a_server_that_echoes_the_token_never_gets_it_printed(
    server: str,
    rule: dict[str, Any],
    expected: str,
    *,
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    retry_waits: list[float],
) -> None:
    url, records = recorder([rule])
    monkeypatch.setenv(VARIABLES[server], TOKEN)
    args = ["upload", str(toy_channel), "--to", server, "--channel", "flagtree", "--url", url]
    status, out, err = _run(args, capfd)
    assert status == 9
    assert retry_waits == ([1, 2, 4] if "tried 4 times" in expected else [])
    line = _error_line(err)
    assert line.endswith(expected.replace("{url}", url).replace("{name}", packages[0].name)), line
    assert TOKEN not in out + err
    _assert_token_only_in_authorization(records(), out + err)


def test_a_token_echoed_in_another_form_is_redacted_too(
    toy_channel: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A token with characters a server escapes: its JSON-escaped and URL-quoted echoes are hidden as well."""
    odd = 'pfx_ab/cd+ef"gh'
    body = {"detail": f"{odd} or {quote(odd, safe='')} is not a token"}
    url, _ = recorder([{"method": "POST", "path": "/api/v1/upload/", "status": 401, "body": body}])
    monkeypatch.setenv("PREFIX_API_KEY", odd)
    status, out, err = _run(["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree",
                             "--url", url], capfd)  # fmt: skip
    assert status == 9
    assert '{"detail": "*** or *** is not a token"}' in _error_line(err)
    for form in (odd, json.dumps(odd)[1:-1], quote(odd, safe="")):
        assert form not in out + err


# ---- a rerun resumes: what the server holds with the same content is skipped, a different file refused ----


def _upload(
    server: str, channel_dir: Path, url: str, capfd: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    owner = "flagtree"
    return _run(["upload", str(channel_dir), "--to", server, "--channel", owner, "--url", url], capfd)


def _uploads(records: Records, since: int = 0) -> list[str]:
    """The package files the requests after the first ``since`` sent (prefix: posted, anaconda: staged)."""
    names = []
    for request in records()[since:]:
        if request["method"] == "POST" and request["path"].startswith("/api/v1/upload/"):
            headers, _ = _form_parts(request)["file"]
            names.append(headers["x-file-name"])
        elif request["method"] == "POST" and request["path"].startswith("/stage/"):
            names.append(request["path"].rsplit("/", 1)[1])
    return names


# A failure on the second package, once: prefix.dev's upload answers 500 (the engine tries 4 times), an
# anaconda.org commit fails after the file was staged and sent.
PARTIAL_FAILURE = {
    "prefix": {
        "method": "POST",
        "path": "/api/v1/upload/",
        "body_contains": "toy-py-",
        "status": 500,
        "times": 4,
        "body": {"detail": "internal"},
    },
    "anaconda": {"method": "POST", "path": "/commit/flagtree/toy-py/", "status": 500, "times": 1},
}


@pytest.mark.parametrize("server", ["prefix", "anaconda"])
def test_a_rerun_after_a_partial_failure_uploads_only_the_rest(
    server: str,
    *,
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    retry_waits: list[float],
) -> None:
    url, records = recorder([PARTIAL_FAILURE[server]])
    monkeypatch.setenv(VARIABLES[server], TOKEN)
    status, out, err = _upload(server, toy_channel, url, capfd)
    assert status == 9
    assert retry_waits == ([1, 2, 4] if server == "prefix" else [])  # prefix.dev's 5xx is tried again
    assert f"1 uploaded before it: {packages[0].name}" in _error_line(err)
    first = len(records())

    status, out, err = _upload(server, toy_channel, url, capfd)
    assert status == 0, err
    assert _uploads(records, first) == [packages[1].name]
    assert out.splitlines() == [f"uploaded 1 package(s) to {server} channel flagtree:", f"  {packages[1]}"]
    assert f"{packages[0].name}: already on {server} channel flagtree, the same file; skipped" in err

    second = len(records())
    status, out, err = _upload(server, toy_channel, url, capfd)
    assert (status, out.splitlines()[0]) == (0, f"uploaded 0 package(s) to {server} channel flagtree:")
    assert _uploads(records, second) == []
    _assert_token_only_in_authorization(records(), out + err)


@pytest.fixture
def changed_llvm(tmp_path: Path, packages: list[Path]) -> Path:
    """A channel folder with the same two file names, toy-llvm's content changed (a rebuild, same name)."""
    channel = tmp_path / "rebuilt"
    for package in packages:
        (channel / package.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package, channel / package.parent.name / package.name)
    changed = channel / packages[0].parent.name / packages[0].name
    with zipfile.ZipFile(changed, "a") as archive:  # the same package, another file: a zip comment added
        archive.comment = b"rebuilt"
    return channel


@pytest.mark.parametrize("server", ["prefix", "anaconda"])
def test_a_different_file_under_a_held_name_is_refused_the_rest_uploaded(
    server: str,
    *,
    packages: list[Path],
    changed_llvm: Path,
    tmp_path: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder()
    monkeypatch.setenv(VARIABLES[server], TOKEN)
    only_llvm = tmp_path / "first"
    (only_llvm / "linux-64").mkdir(parents=True)
    shutil.copyfile(packages[0], only_llvm / "linux-64" / packages[0].name)
    assert _upload(server, only_llvm, url, capfd)[0] == 0
    first = len(records())

    status, out, err = _upload(server, changed_llvm, url, capfd)
    assert status == 9
    held = hashlib.sha256(packages[0].read_bytes()).hexdigest()
    here = hashlib.sha256((changed_llvm / "linux-64" / packages[0].name).read_bytes()).hexdigest()
    assert _error_line(err) == (
        f"flagtree-feedstock: error: {server} channel flagtree at {url} already holds a different file under "
        f"the same name, not replaced: {packages[0].name}: another sha256 ({held[:12]}… there, {here[:12]}… "
        "here) (1 uploaded, 0 already there) (fix: a published file name is never replaced: raise the build "
        "number in recipe/recipe.yaml and meta.yaml and rebuild, or remove that file from the channel first)"
    )
    assert _uploads(records, first) == [packages[1].name]  # the rest went up; the changed file was never sent
    assert out == ""


def test_anaconda_compares_the_md5_where_the_record_has_no_sha256(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    llvm = packages[0]
    md5 = hashlib.md5(llvm.read_bytes()).hexdigest()  # the digest anaconda.org records
    url, records = recorder(
        [
            {
                "method": "GET",
                "path": _dist("flagtree", llvm),
                "status": 200,
                "body": {"md5": md5, "labels": ["main"]},
            }
        ]
    )
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    status, _, err = _upload("anaconda", toy_channel, url, capfd)
    assert status == 0, err
    assert _uploads(records) == [packages[1].name]


def test_anaconda_refuses_the_same_file_on_other_labels(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    llvm = packages[0]
    sha256 = hashlib.sha256(llvm.read_bytes()).hexdigest()
    url, _ = recorder(
        [
            {
                "method": "GET",
                "path": _dist("flagtree", llvm),
                "status": 200,
                "body": {"sha256": sha256, "labels": ["dev"]},
            }
        ]
    )
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    status, _, err = _upload("anaconda", toy_channel, url, capfd)
    assert status == 9
    assert (
        f"{llvm.name}: the same file, on label(s) dev, not main (1 uploaded, 0 already there)"
        in _error_line(err)
    )


@pytest.mark.parametrize("listed_later", [True, False], ids=["listed-on-second-look", "never-listed"])
def test_a_409_for_a_file_the_listing_did_not_show(
    listed_later: bool,
    *,
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """prefix.dev holds the file (uploaded meanwhile, or its repodata not updated yet) but its listing does
    not show it: the upload's 409 makes the toolkit look again; the same file is then skipped, and a 409 that
    the second look does not explain stays the error."""
    empty = {"info": {}, "packages": {}, "packages.conda": {}}
    # The first run's two lookups see the empty listing too; then one more (or every one) does.
    hide = {
        "method": "GET",
        "path": "/flagtree/",
        "status": 200,
        "body": empty,
        "times": 3 if listed_later else 99,
    }
    url, records = recorder([hide])
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    assert _upload("prefix", toy_channel, url, capfd)[0] == 0  # the server holds both now
    first = len(records())
    status, out, err = _upload("prefix", toy_channel, url, capfd)
    assert _uploads(records, first) == [packages[0].name]  # tried once, answered 409
    if listed_later:
        assert status == 0, err
        assert out.splitlines() == ["uploaded 0 package(s) to prefix channel flagtree:"]
        for package in packages:
            assert f"{package.name}: already on prefix channel flagtree, the same file; skipped" in err
    else:
        assert status == 9
        assert _error_line(err) == (
            f"flagtree-feedstock: error: uploading {packages[0].name} (1 of 2) to prefix channel flagtree at "
            f"{url} failed: the server answered POST /api/v1/upload/flagtree with HTTP 409 Conflict: "
            '{"detail": "package already exists"}; '
            "none uploaded (fix: the server holds a file of that name but does not list it yet: rerun later, "
            "or remove it there)"
        )


# ---- the HTTP client: the token stays with its server, every wait ends, a protocol error is one line -----

CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and uploads.test, the proxy test's name) and its key."""
    openssl = require_executable("openssl", "openssl")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:uploads.test", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def _failed_upload(
    url: str, toy_channel: Path, capfd: pytest.CaptureFixture[str], *options: str
) -> tuple[str, str]:
    """An upload to ``url`` that must fail as one line (exit 9) reporting nothing uploaded; the line and stdout."""
    status, out, err = _run(
        ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url, *options], capfd
    )
    assert status == 9, err
    assert out == ""  # nothing is reported as uploaded
    assert TOKEN not in out + err
    return _error_line(err), out


def _received_token(records: Records) -> bool:
    return any(TOKEN in json.dumps(request["headers"]) + request["path"] for request in records())


@pytest.mark.parametrize(
    ("method", "path", "status", "expected"),
    [
        ("GET", "/flagtree/", 302, "{url} redirected to another origin, {other}: not followed"),
        (
            "POST",
            "/api/v1/upload/",
            307,
            (
                "{url} answered POST /api/v1/upload/flagtree with HTTP 307 Temporary Redirect, a redirect, "
                "which is not followed for an upload"
            ),
        ),
    ],
    ids=["lookup-302", "upload-307"],
)
def test_a_redirect_to_another_host_is_an_error_and_the_token_stays_home(
    method: str,
    path: str,
    status: int,
    expected: str,
    *,
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """urllib followed a 302 with the Authorization header to any host; the other host gets nothing now,
    not even the token the redirect echoes into its URL."""
    other, other_records = recorder(host="127.0.0.2")  # another origin on this machine
    location = f"{other}/collect?token={{authorization}}"
    url, _ = recorder([{"method": method, "path": path, "status": status, "headers": {"Location": location}}])
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    line, _ = _failed_upload(url, toy_channel, capfd)
    assert expected.format(url=url, other=other) in line, line
    assert other_records() == []


def test_an_https_server_redirecting_to_http_is_an_error(
    certificate: tuple[Path, Path],
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    plain, plain_records = recorder()
    location = f"{plain}/flagtree/linux-64/repodata.json"
    secure, secure_records = recorder(
        [{"method": "GET", "path": "/flagtree/", "status": 301, "headers": {"Location": location}}],
        tls=certificate,
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    line, _ = _failed_upload(secure, toy_channel, capfd)
    assert (
        f"failed: {secure} redirected to another origin, {plain}: not followed (fix: if {plain} is the server "
        "you mean, give its URL yourself)" in line
    )
    assert _received_token(secure_records)  # the https server had it, as it should
    assert plain_records() == []


def test_a_redirect_within_the_server_is_followed(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The lookup may be redirected on its own server (a moved path), with the token: it is that server's."""
    moved = {"method": "GET", "path": "/flagtree/", "status": 302, "headers": {"Location": "/moved/repodata"}}
    url, records = recorder([moved])
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    status, _, err = _upload("prefix", toy_channel, url, capfd)
    assert status == 0, err
    followed = [r for r in records() if r["path"] == "/moved/repodata"]
    assert len(followed) == len(packages)
    assert {r["headers"]["authorization"] for r in followed} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "url", ["http://uploads.example.org", "http://192.0.2.7:8080", "http://[2001:db8::1]/"]
)
def test_a_token_over_plain_http_to_another_machine_is_refused_before_any_request(
    url: str,
    *,
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Any request would reach the recorder: it is the http proxy (those hosts are not in no_proxy)."""
    proxy, records = recorder()
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    status, out, err = _run(
        ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url], capfd
    )
    assert status == 2
    host = str(urlsplit(url).hostname)
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed as in a URL
    assert _error_line(err) == (
        f"flagtree-feedstock: error: --url {url} is plain http to another machine: PREFIX_API_KEY would cross "
        f"the network unencrypted, so nothing is sent (fix: use https://{host} (plain http only to this "
        "machine: localhost, 127.0.0.1, ::1))"
    )
    assert records() == []
    assert out == ""


def test_plain_http_to_this_machine_by_name_is_allowed(
    toy_channel: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    url, records = recorder()
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    status, _, err = _upload("prefix", toy_channel, url.replace("127.0.0.1", "localhost"), capfd)
    assert status == 0, err
    assert len(_uploads(records)) == 2


def test_a_server_that_never_answers_the_upload_ends_at_the_timeout(
    toy_channel: Path, recorder: Recorder, tmp_path: Path
) -> None:
    """The real console script in its own process: were the wait endless, subprocess's timeout would say so."""
    url, records = recorder(
        [{"method": "POST", "path": "/api/v1/upload/", "status": 200, "delay": seconds(3600)}]
    )
    argv = [str(CONSOLE_SCRIPT), "upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree"]
    started = time.monotonic()
    done = subprocess.run(
        [*argv, "--url", url, "--timeout", seconds_arg(2)],
        env={**os.environ, "PREFIX_API_KEY": TOKEN},
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=False,
    )
    assert done.returncode == 9, done.stderr
    assert (
        "failed: "
        + f"{url} did not finish the request within {seconds_arg(2)} s: gave up; none uploaded (fix: retry later; if it "
        in (_error_line(done.stderr))
    )
    assert _error_line(done.stderr).endswith("or give the server longer with --timeout)")
    assert done.stdout == ""
    assert time.monotonic() - started < seconds(60)
    assert [r["method"] for r in records()] == ["GET", "POST"]


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(
    value: str, toy_channel: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    argv = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--timeout", value]
    status, _, err = _run(argv, capfd)
    assert status == 2
    assert f"--timeout {value} is not a positive number of seconds" in _error_line(err)


def test_a_redirect_answering_the_upload_is_an_error_never_followed(
    toy_channel: Path,
    packages: list[Path],
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A 302 to the POST was followed as a GET, whose 200 the CLI reported as "uploaded"."""
    url, records = recorder(
        [{"method": "POST", "path": "/api/v1/upload/", "status": 302, "headers": {"Location": "/uploaded"}}]
    )
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    line, _ = _failed_upload(url, toy_channel, capfd)
    assert line == (
        f"flagtree-feedstock: error: uploading {packages[0].name} (1 of 2) to prefix channel flagtree at {url} "
        f"failed: {url} answered POST /api/v1/upload/flagtree with HTTP 302 Found, a redirect, which is not "
        "followed for an upload; none uploaded (fix: check the URL: it must name the server's upload API "
        "itself)"
    )
    assert [r["path"] for r in records() if r["path"] == "/uploaded"] == []


SHORT = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"packages": '
PROTOCOL_ERRORS = {
    # The bad status line repeats the Authorization header: the traceback printed the token.
    "bad-status-line": (
        {"raw": "HTTP/1.1 OK {authorization}\r\n\r\n"},
        "{url} answered with a malformed status line: not an HTTP server",
    ),
    "not-http": ({"raw": "SSH-2.0-OpenSSH_9.2\r\n"}, "{url} answered with a malformed status line"),
    "short-read": ({"raw": SHORT}, "{url}'s answer broke off after 13 bytes of the 1000 it announced"),
    # http.client counts only the chunks it read whole, and reports a malformed chunk as a short read.
    "short-chunked": (
        {"raw": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{"},
        "{url}'s answer broke off after 0 bytes (a short read)",
    ),
    "bad-chunk": (
        {"raw": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{authorization}\r\n"},
        "{url}'s answer broke off after 0 bytes (a short read)",
    ),
    "no-answer": ({"raw": ""}, "{url} closed the connection without an answer"),
    "reset": ({"reset": True}, "{url} reset the connection"),
}


@pytest.mark.parametrize("method", ["GET", "POST"], ids=["lookup", "upload"])
@pytest.mark.parametrize("case", sorted(PROTOCOL_ERRORS))
def test_a_protocol_error_is_one_line_naming_the_server_never_the_token(
    case: str,
    method: str,
    *,
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    answer, expected = PROTOCOL_ERRORS[case]
    path = "/flagtree/" if method == "GET" else "/api/v1/upload/"
    url, _ = recorder([{"method": method, "path": path, "status": 200, **answer}])
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    line, _ = _failed_upload(url, toy_channel, capfd)
    assert expected.format(url=url) in line, line
    what = "asking prefix at" if method == "GET" else "uploading "
    assert line.startswith(f"flagtree-feedstock: error: {what}"), line


def test_tls_errors_are_one_line(
    certificate: tuple[Path, Path],
    toy_channel: Path,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    secure, _ = recorder(tls=certificate)  # its certificate is not trusted: SSL_CERT_FILE does not name it
    line, _ = _failed_upload(secure, toy_channel, capfd)
    assert f"{secure}'s TLS certificate is not trusted (self-signed certificate)" in line
    plain, _ = recorder()  # https:// to a server that speaks plain http
    line, _ = _failed_upload(plain.replace("http://", "https://"), toy_channel, capfd)
    assert f"TLS with {plain.replace('http://', 'https://')} failed (" in line


@pytest.fixture
def connect_proxy() -> Iterator[Callable[[dict[str, int]], tuple[str, list[str]]]]:
    """A loopback proxy answering CONNECT for the names it is given (name -> a port on 127.0.0.1), piping the
    bytes both ways; it returns its URL and records each tunnel's target."""
    listener = socket.create_server(("127.0.0.1", 0))
    threads: list[threading.Thread] = []

    def start(hosts: dict[str, int]) -> tuple[str, list[str]]:
        tunnels: list[str] = []

        def pipe(source: socket.socket, sink: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    sink.sendall(data)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

        def tunnel(client: socket.socket) -> None:
            with client:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += client.recv(4096)
                target = head.split()[1].decode()
                tunnels.append(target)
                name, _, port = target.rpartition(":")
                assert int(port) == hosts[name]
                with socket.create_connection(("127.0.0.1", hosts[name])) as upstream:
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    back = threading.Thread(target=pipe, args=(upstream, client))
                    back.start()
                    pipe(client, upstream)
                    back.join()

        def serve() -> None:
            with contextlib.suppress(OSError):  # the listener closed: the test is over
                while True:
                    client, _ = listener.accept()
                    thread = threading.Thread(target=tunnel, args=(client,))
                    threads.append(thread)
                    thread.start()

        server = threading.Thread(target=serve)
        threads.append(server)
        server.start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}", tunnels

    yield start
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    for thread in threads:
        thread.join(timeout=seconds(10))


def test_an_https_upload_through_a_connect_proxy(
    *,
    certificate: tuple[Path, Path],
    toy_channel: Path,
    recorder: Recorder,
    connect_proxy: Callable[[dict[str, int]], tuple[str, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """https_proxy is honoured as urllib did: a CONNECT tunnel, TLS checked against the server's own name."""
    secure, records = recorder(tls=certificate)
    port = int(secure.rsplit(":", 1)[1])
    proxy, tunnels = connect_proxy({"uploads.test": port})
    monkeypatch.setenv("https_proxy", proxy)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    status, _, err = _upload("prefix", toy_channel, f"https://uploads.test:{port}", capfd)
    assert status == 0, err
    assert tunnels and set(tunnels) == {f"uploads.test:{port}"}
    assert len(_uploads(records)) == 2
    _assert_token_only_in_authorization(records(), err)


def test_anaconda_is_given_each_package_format_s_index_and_about(
    packages: list[Path], tmp_path: Path
) -> None:
    """A .conda file's info-*.tar.zst and a .tar.bz2's info/: what the stage and package calls send."""
    index, about = package_info(packages[0])
    assert (index["name"], index["version"], index["subdir"]) == ("toy-llvm", "1.0", "linux-64")
    assert isinstance(about, dict)
    legacy = tmp_path / "legacy-1.0-0.tar.bz2"
    documents = {
        "info/index.json": {"name": "legacy", "subdir": "noarch"},
        "info/about.json": {"summary": "s"},
    }
    with tarfile.open(legacy, "w:bz2") as tar:
        for name, document in documents.items():
            data = json.dumps(document).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert package_info(legacy) == (documents["info/index.json"], documents["info/about.json"])
    damaged = tmp_path / "damaged-1.0-0.tar.bz2"
    damaged.write_bytes(legacy.read_bytes()[:40])
    with pytest.raises(ChannelError, match=f"{damaged} cannot be read for the upload"):
        package_info(damaged)


def test_the_upload_reads_only_the_info_of_a_package_it_checked_whole(
    packages: list[Path], tmp_path: Path
) -> None:
    """package_info stops at info/: the upload checked every package whole first, so a package of LLVM is
    not read twice. A byte flipped in the .conda's pkg-*.tar.zst (its data, not its info) shows which: the
    whole check refuses it, package_info still gives the info."""
    copy = tmp_path / packages[0].name
    shutil.copy2(packages[0], copy)
    with zipfile.ZipFile(copy) as archive:
        member = next(i for i in archive.infolist() if i.filename.startswith("pkg-"))
    with copy.open("r+b") as handle:
        handle.seek(member.header_offset + 26)  # the local header's name and extra field lengths
        name_length, extra_length = struct.unpack("<HH", handle.read(4))
        handle.seek(member.header_offset + 30 + name_length + extra_length + member.compress_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(DamagedPackage, match="fails its checksum"):
        read_info(copy, ("info/index.json",))
    assert package_info(copy) == package_info(packages[0])


# ---- issue 28: what a server answers is bounded (time, depth, headers), and what goes out is checked ----


def _console(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real console script in its own process, and how long it ran (it must end well within a minute)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=seconds(60),
        check=False,
    )
    return done, time.monotonic() - started


def _upload_argv(toy_channel: Path, url: str, *options: str, server: str = "prefix") -> list[str]:
    return ["upload", str(toy_channel), "--to", server, "--channel", "flagtree", "--url", url, *options]


# A lookup answer that would take 30 s at its pace (one byte every 0.25 s), or an endless 100 Continue: on the
# time scale, as the timeout is, so that each read stays within it and the whole answer does not.
SLOW_ANSWERS = {
    "trickle": {"status": 200, "trickle": seconds(0.25), "body": {"packages": {}, "padding": "x" * 100}},
    "interim": {"status": 200, "interim": seconds(30)},
}


@pytest.mark.parametrize("case", sorted(SLOW_ANSWERS))
def test_the_timeout_bounds_the_whole_answer(case: str, toy_channel: Path, recorder: Recorder) -> None:
    """`--timeout 3` ends the request after 3 s, however the server keeps it alive: a body trickling in a byte
    at a time (each read well within the timeout: it ran 25 s), or `100 Continue` after `100 Continue`."""
    url, records = recorder([{"method": "GET", "path": "/flagtree/", **SLOW_ANSWERS[case]}])
    done, _ = _console(_upload_argv(toy_channel, url, "--timeout", seconds_arg(3)), {"PREFIX_API_KEY": TOKEN})
    took = time.monotonic() - records()[0]["at"]  # from the request: the command's start-up is not timed
    assert done.returncode == 9, done.stderr
    line = _error_line(done.stderr)
    assert f"asking prefix at {url} whether it holds" in line, line
    assert f" {seconds_arg(3)} s: gave up" in line, line
    assert "Traceback" not in done.stderr
    assert took < seconds(10), took


def test_an_endless_100_continue_ends_without_a_total_deadline(
    tmp_path: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The LLVM archive's download has no total deadline (a 1 GB file takes long): the head of an answer, 1xx
    interim answers included, must still arrive within its read timeout."""
    from flagtree_feedstock._http import Timeouts  # noqa: PLC0415
    from flagtree_feedstock.errors import SourceFetchError  # noqa: PLC0415
    from flagtree_feedstock.llvm_archive import fetch  # noqa: PLC0415

    monkeypatch.setattr(fetch, "TIMEOUTS", Timeouts(connect=seconds(2), read=seconds(2)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    url, _ = recorder([{"method": "GET", "path": "/llvm", "status": 200, "interim": seconds(30)}])
    started = time.monotonic()
    with pytest.raises(SourceFetchError) as raised:
        fetch.download(f"{url}/llvm.tar.gz", "0" * 64, tmp_path / "cache")
    assert f"{url} did not answer for {seconds_arg(2)} s: gave up" in str(raised.value)
    assert time.monotonic() - started < seconds(10)


def test_a_content_length_that_is_not_ascii_digits_is_no_traceback(
    toy_channel: Path, recorder: Recorder
) -> None:
    """`Content-Length: ²` (a digit to str.isdigit, not to int) on the answers: read as no length."""
    answer = "HTTP/1.1 200 OK\r\nContent-Length: \u00b2\r\nConnection: close\r\n\r\n{}"
    url, records = recorder([{"path": "/", "raw_latin1": answer}])
    done, _ = _console(_upload_argv(toy_channel, url), {"PREFIX_API_KEY": TOKEN})
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert len(_uploads(records)) == 2


def test_a_token_with_a_stray_byte_is_refused_in_one_line(toy_channel: Path, recorder: Recorder) -> None:
    """A byte that is not UTF-8 in the variable (\\x85, read as a lone surrogate) cannot go into a header."""
    url, records = recorder()
    secret = "pfx_QWERTY\udc85ASDFG-1234567890"
    done, _ = _console(_upload_argv(toy_channel, url), {"PREFIX_API_KEY": secret})
    assert done.returncode == 2, done.stderr
    assert "PREFIX_API_KEY holds a control character or one that is not ASCII" in _error_line(done.stderr)
    assert "Traceback" not in done.stderr
    assert "QWERTY" not in done.stdout + done.stderr
    assert records() == []


def _nested(depth: int) -> str:
    body = "[" * depth + "]" * depth
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"


@pytest.mark.parametrize("depth", [100, 20_000])
def test_a_deeply_nested_answer_is_one_line(depth: int, toy_channel: Path, recorder: Recorder) -> None:
    """JSON nested 20 000 deep was a RecursionError traceback; now refused by its depth (beyond 64), in one
    line, whether Python's parser could read it (100) or not."""
    url, _ = recorder([{"method": "GET", "path": "/flagtree/", "raw": _nested(depth)}])
    done, _ = _console(_upload_argv(toy_channel, url), {"PREFIX_API_KEY": TOKEN})
    assert done.returncode == 9, done.stderr
    assert "the answer cannot be read: it nests more than the 64 levels allowed" in _error_line(done.stderr)
    assert "Traceback" not in done.stderr


# A 40-character token after spaces: 780 (the whole read; it leaked half the token when only 800 bytes were
# read) and 64 KiB less 20 (so the read stops inside the token, and its first 20 characters are all there is).
SEAMS = {"780": 780, "read-edge": (64 << 10) - 20}


@pytest.mark.parametrize("case", sorted(SEAMS))
def test_a_token_straddling_the_read_is_masked(case: str, toy_channel: Path, recorder: Recorder) -> None:
    secret = "pfx_" + "0123456789abcdef" * 2 + "ZYXW"
    assert len(secret) == 40
    body = " " * SEAMS[case] + secret
    answer = f"HTTP/1.1 403 Forbidden\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    url, _ = recorder([{"method": "POST", "path": "/api/v1/upload/", "raw": answer}])
    done, _ = _console(_upload_argv(toy_channel, url), {"PREFIX_API_KEY": secret})
    assert done.returncode == 9, done.stderr
    assert "with HTTP 403 Forbidden: ***" in _error_line(done.stderr)
    output = done.stdout + done.stderr
    assert not [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in output]


def test_a_url_with_a_password_is_refused_unshown(toy_channel: Path, recorder: Recorder) -> None:
    url, records = recorder()
    with_password = url.replace("http://", "http://user:pw-SECRET-1@") + "/?sig=SIG-SECRET-2"
    done, _ = _console(_upload_argv(toy_channel, with_password), {"PREFIX_API_KEY": TOKEN})
    assert done.returncode == 2, done.stderr
    line = _error_line(done.stderr)
    assert line.startswith(
        f"flagtree-feedstock: error: --url {url.replace('http://', 'http://…@')}/?… holds a"
    ), line
    assert "SECRET" not in done.stdout + done.stderr
    assert records() == []


def _renamed_copy(package: Path, folder: Path, name: str) -> Path:
    """``package`` (a .conda) as a .tar.bz2 whose index.json names the package ``name``, in ``folder``/linux-64."""
    import zstandard  # noqa: PLC0415

    members = {}
    with zipfile.ZipFile(package) as outer:
        # Both tars, info-… and pkg-…: the package check wants every file paths.json lists.
        for part in (n for n in outer.namelist() if n.endswith(".tar.zst")):
            inner = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(outer.read(part)))
            with tarfile.open(fileobj=inner, mode="r|") as tar:
                for member in tar:
                    if member.isfile():
                        members[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    index = json.loads(members["info/index.json"])
    index["name"] = name
    members["info/index.json"] = json.dumps(index).encode()
    target = folder / "linux-64" / f"{name}-{index['version']}-{index['build']}.tar.bz2"
    target.parent.mkdir(parents=True)
    with tarfile.open(target, "w:bz2") as tar:
        for member_name, content in members.items():
            entry = tarfile.TarInfo(member_name)
            entry.size = len(content)
            tar.addfile(entry, io.BytesIO(content))
    return target


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        # A line break is refused by the archive layer in any package's name, before the upload reads it.
        ('toy"\r\nX-Injected: yes\r\n', "holds the control character"),
        # A quote is a name's own business, but it would end the part's header value: the upload refuses it.
        ('toy"; X-Injected="yes', "which would break out of its multipart header"),
    ],
    ids=["line-break", "quote"],
)
def test_a_file_name_cannot_add_multipart_headers(
    name: str, refusal: str, tmp_path: Path, packages: list[Path], recorder: Recorder
) -> None:
    """A package whose file name would end the part's header line (or its value) is refused in one line."""
    folder = tmp_path / "channel"
    _renamed_copy(packages[0], folder, name)
    url, records = recorder()
    done, _ = _console(_upload_argv(folder, url), {"PREFIX_API_KEY": TOKEN})
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr
    line = _error_line(done.stderr)  # one line: the name's line breaks are shown escaped
    assert refusal in line, line
    assert not [r for r in records() if r["method"] == "POST"]
    assert not [r for r in records() if b"X-Injected" in r["body"]]


def test_a_staging_answer_cannot_add_multipart_headers(toy_channel: Path, recorder: Recorder) -> None:
    """anaconda.org's staging answer names the storage form's fields; one name holding a line break is refused
    before the file is sent to the storage."""
    fields = {'key"\r\nX-Injected: yes\r\nx': "value"}
    stage = {"method": "POST", "path": "/stage/", "status": 200,
             "body": {"post_url": "http://127.0.0.1:9/s3", "form_data": fields, "dist_id": "d"}}  # fmt: skip
    url, records = recorder([stage])
    done, _ = _console(_upload_argv(toy_channel, url, server="anaconda"), {"ANACONDA_API_KEY": TOKEN})
    assert done.returncode == 9, done.stderr
    line = _error_line(done.stderr)
    assert "which would break out of its multipart header" in line, line
    assert "Traceback" not in done.stderr
    assert not [r for r in records() if b"X-Injected" in r["body"]]


def test_a_package_whose_index_nests_deeply_is_one_line(tmp_path: Path, recorder: Recorder) -> None:
    """A package's info/index.json nested 20 000 deep: checked before any request, refused in one line."""
    package = tmp_path / "channel" / "linux-64" / "toy-1.0-0.tar.bz2"
    package.parent.mkdir(parents=True)
    index = ("[" * 20_000 + "]" * 20_000).encode()
    with tarfile.open(package, "w:bz2") as tar:
        entry = tarfile.TarInfo("info/index.json")
        entry.size = len(index)
        tar.addfile(entry, io.BytesIO(index))
    url, records = recorder()
    done, _ = _console(_upload_argv(tmp_path / "channel", url), {"PREFIX_API_KEY": TOKEN})
    assert done.returncode == 9, done.stderr
    assert "Traceback" not in done.stderr
    assert str(package) in _error_line(done.stderr)
    assert records() == []


# ---- another spelling of the server's host (issue 41) --------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "spelling"),
    [
        ("127.0.0.1", "2130706433"),
        ("127.0.0.1", "0x7f.1"),
        ("127.0.0.1", "127.0.0.%31"),
        ("::1", "[0:0:0::1]"),
    ],
    ids=["decimal", "hex-short", "percent", "ipv6"],
)
def test_an_upload_goes_to_the_server_as_the_standard_reads_its_host(
    host: str, spelling: str, toy_channel: Path, recorder: Recorder
) -> None:
    """``--url`` spelt otherwise is that host: loopback (plain http allowed), the token sent to it, every
    request to its canonical form (the Host header); Python's reading took ``2130706433`` for another machine."""
    url, records = recorder(host=host)
    port = url.rsplit(":", 1)[1]
    done, _ = _console(
        _upload_argv(toy_channel, f"http://{spelling}:{port}"),
        {"PREFIX_API_KEY": TOKEN, "no_proxy": "127.0.0.1,::1", "NO_PROXY": "127.0.0.1,::1"},
    )
    assert done.returncode == 0, done.stderr
    requests = records()
    assert len(_uploads(records)) == 2
    assert {r["headers"]["authorization"] for r in requests} == {f"Bearer {TOKEN}"}
    canonical = f"[{host}]" if ":" in host else host
    assert {r["headers"]["host"] for r in requests} == {f"{canonical}:{port}"}


def test_a_redirect_to_another_spelling_of_the_server_is_followed_to_another_port_refused(
    toy_channel: Path, recorder: Recorder
) -> None:
    """The lookup redirected to ``2130706433`` at the same port is the same origin (followed, with the token);
    the next lookup redirected to ``127.0.0.%32`` at another port is another (refused, nothing sent there)."""
    other, other_records = recorder(host="127.0.0.2")
    other_port = other.rsplit(":", 1)[1]
    rules = [
        {"method": "GET", "path": "/flagtree/linux-64/", "status": 302, "times": 1,
         "headers": {"Location": "http://2130706433:{port}/moved/repodata"}},
        {"method": "GET", "path": "/flagtree/linux-64/", "status": 302,
         "headers": {"Location": f"http://127.0.0.%32:{other_port}/collect"}},
    ]  # fmt: skip
    url, records = recorder(rules)
    done, _ = _console(_upload_argv(toy_channel, url), {"PREFIX_API_KEY": TOKEN})
    assert done.returncode == 9, done.stderr
    assert f"{url} redirected to another origin, {other}: not followed" in _error_line(done.stderr)
    followed = [r for r in records() if r["path"] == "/moved/repodata"]
    assert [r["headers"]["authorization"] for r in followed] == [f"Bearer {TOKEN}"]
    assert other_records() == []
    assert TOKEN not in done.stdout + done.stderr
