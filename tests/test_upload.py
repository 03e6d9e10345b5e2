"""``flagtree-feedstock upload``: real py-rattler-build uploads of real toy packages to a loopback recorder.

The recorder (tests/_http_recorder.py) stands in for prefix.dev and anaconda.org: it keeps every request
whole, so these tests check what is sent (URL, labels, headers, the package bytes) and where the token goes,
and it answers as each test scripts it (a package anaconda.org does not know yet, a 401, a 500).
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _toy import build_args, make_empty_channel, native_args
from flagtree_feedstock.cli import main

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
    base = tmp_path_factory.mktemp("upload")
    out = base / "channel"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("http_proxy", "http://127.0.0.1:9")
        mp.setenv("https_proxy", "http://127.0.0.1:9")
        args = build_args(
            "toy-multi", out, *native_args(make_empty_channel(base / "empty")), "--python", "3.11"
        )
        assert main(args) == 0
    return out


@pytest.fixture
def packages(toy_channel: Path) -> list[Path]:
    found = sorted((toy_channel / "linux-64").glob("*.conda"))
    assert [p.name.rsplit("-", 2)[0] for p in found] == ["toy-llvm", "toy-py"]
    return found


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Start the recorder in its own process (the engine holds the GIL while it uploads); loopback only."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    started: list[subprocess.Popen[str]] = []

    def start(rules: list[dict[str, Any]] | None = None) -> tuple[str, Records]:
        log = tmp_path / f"requests-{len(started)}.jsonl"
        log.touch()
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "_http_recorder.py"), str(log), json.dumps(rules or [])],
            stdout=subprocess.PIPE,
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

        return f"http://127.0.0.1:{port}", records

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)
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
    assert [(r["method"], r["path"]) for r in requests] == [("POST", "/api/v1/upload/flagtree")] * 2
    for request, package in zip(requests, packages, strict=True):
        assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
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


def _anaconda_calls(owner: str, package: Path, *, new: bool) -> list[tuple[str, str]]:
    name, version, _ = package.name.rsplit("-", 2)
    create = "POST" if new else "PATCH"  # a package/release anaconda.org does not know yet is created
    return [
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
    for package, calls in zip(packages, [requests[:7], requests[7:]], strict=True):
        api = [r for r in calls if r["path"] != "/s3"]
        assert {r["headers"]["authorization"] for r in api} == {f"token {TOKEN}"}
        stage = json.loads(calls[4]["body"])
        assert stage["channels"] == expected  # the labels
        assert stage["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
        assert stage["attrs"]["subdir"] == "linux-64"
        assert stage["attrs"]["name"] == package.name.rsplit("-", 2)[0]
        # The file goes to the storage URL of the upload form, without the token.
        s3 = calls[5]
        assert "authorization" not in s3["headers"]
        assert _form_parts(s3)["file"][1] == package.read_bytes()
        assert json.loads(calls[6]["body"]) == {"dist_id": "recorded"}
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
    created = json.loads(requests[1]["body"])
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
        "flagtree-feedstock: error: PREFIX_API_KEY is not set: uploading to prefix needs its API token "
        "(fix: export PREFIX_API_KEY=<token> (in CI: a repository secret of that name))"
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
        'failed: authentication failed (HTTP 401): {"detail": "bad token"}; none uploaded '
        "(fix: check PREFIX_API_KEY (its scopes), the channel name and --url)"
    )
    assert captured.out == ""
    requests = records()
    assert len(requests) == 1  # the second package is not tried after a refusal
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
        'failed: authentication failed (HTTP 401): {"detail": "invalid token ***"}; none uploaded '
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
        f"failed: HTTP status server error (500 Internal Server Error) for url ({url}{commit}); "
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
