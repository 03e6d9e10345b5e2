"""``flagtree-feedstock upload``: real py-rattler-build uploads of a real toy package to a loopback recorder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flagtree_feedstock.cli import main

TESTS = Path(__file__).resolve().parent
TOY = TESTS / "recipes" / "toy-multi"
TOKEN = "recorded-secret-token"

Records = Callable[[], list[dict[str, Any]]]


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def toy_channel(tmp_path: Path, empty_channel: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A channel folder holding one real package, built by the main job (offline, for linux-64)."""
    out = tmp_path / "channel"
    args = [
        "build",
        "--recipe-dir",
        str(TOY),
        "--variant-config",
        str(TOY / "conda_build_config.yaml"),
        "--output-dir",
        str(out),
        "--target-platform",
        "linux-64",
        "--channel",
        empty_channel.as_uri(),
        "--no-test",
        "--output",
        "toy-llvm",
    ]
    assert main(args) == 0
    capsys.readouterr()
    return out


@pytest.fixture
def recorder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], tuple[str, Records]]]:
    """Start the recorder in its own process (the engine holds the GIL while it uploads); loopback only."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    started: list[subprocess.Popen[str]] = []

    def start(status: int = 200) -> tuple[str, Records]:
        log = tmp_path / f"requests-{len(started)}.jsonl"
        log.touch()
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "_http_recorder.py"), str(log), str(status)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())

        def records() -> list[dict[str, Any]]:
            return [json.loads(line) for line in log.read_text().splitlines()]

        return f"http://127.0.0.1:{port}", records

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_prefix_upload_sends_each_package_with_the_token(
    toy_channel: Path,
    recorder: Callable[[int], tuple[str, Records]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder(200)
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    (package,) = sorted((toy_channel / "linux-64").glob("*.conda"))
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 0
    (request,) = records()
    assert request["method"] == "POST"
    assert request["path"] == "/api/v1/upload/flagtree"
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["content-type"].startswith("multipart/form-data")
    assert request["body_size"] > package.stat().st_size  # the whole package, inside a multipart form
    stdout = capsys.readouterr().out
    assert "uploaded 1 package(s) to prefix channel flagtree:" in stdout
    assert str(package) in stdout


def test_anaconda_upload_follows_the_protocol_with_the_token(
    toy_channel: Path,
    recorder: Callable[[int], tuple[str, Records]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, records = recorder(200)
    monkeypatch.setenv("ANACONDA_API_KEY", TOKEN)
    (package,) = sorted((toy_channel / "linux-64").glob("*.conda"))
    args = ["upload", str(toy_channel), "--to", "anaconda", "--channel", "flagos", "--url", url]
    assert main([*args, "--label", "dev"]) == 0
    requests = records()
    calls = [(r["method"], r["path"]) for r in requests]
    stage = f"/stage/flagos/toy-llvm/1.0/linux-64/{package.name}"
    assert ("GET", "/package/flagos/toy-llvm") in calls
    assert ("POST", stage) in calls
    assert ("POST", f"/commit/flagos/toy-llvm/1.0/linux-64/{package.name}") in calls
    # Every call to the API carries the token; the file itself goes to the upload form's post_url.
    api = [r for r in requests if r["path"] != "/s3"]
    assert {r["headers"]["authorization"] for r in api} == {f"token {TOKEN}"}
    (form,) = [r for r in requests if r["path"] == "/s3"]
    assert form["body_size"] > package.stat().st_size


def test_missing_token_is_one_line_and_sends_nothing(
    toy_channel: Path,
    recorder: Callable[[int], tuple[str, Records]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder(200)
    monkeypatch.delenv("PREFIX_API_KEY", raising=False)
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 2
    assert _error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: PREFIX_API_KEY is not set: uploading to prefix needs its API token "
        "(fix: export PREFIX_API_KEY=<token> (in CI: a repository secret of that name))"
    )
    assert records() == []


def test_refused_upload_is_one_line_without_the_token(
    toy_channel: Path,
    recorder: Callable[[int], tuple[str, Records]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, records = recorder(401)
    monkeypatch.setenv("PREFIX_API_KEY", TOKEN)
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", "flagtree", "--url", url]
    assert main(args) == 9
    stderr = capsys.readouterr().err
    line = _error_line(stderr)
    assert f"uploading 1 package(s) to prefix channel flagtree at {url} failed:" in line
    assert line.endswith("(fix: check PREFIX_API_KEY (its scopes), the channel name and --url)")
    assert TOKEN not in stderr
    assert len(records()) >= 1


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
    assert "channel folder" in _error_line(capsys.readouterr().err)
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
