"""`flagtree-feedstock channel`: index a folder and smoke-install from it with py-rattler, offline."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from _toy import build_args, make_empty_channel, native_args
from flagtree_feedstock.channel import install as channel_install
from flagtree_feedstock.cli import main


@pytest.fixture(scope="module")
def toy_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy matrix built once into a channel folder (real py-rattler-build builds)."""

    base = tmp_path_factory.mktemp("toy")
    empty = make_empty_channel(base / "empty")
    out = base / "channel"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("http_proxy", "http://127.0.0.1:9")
        mp.setenv("https_proxy", "http://127.0.0.1:9")
        status = main(build_args("toy-multi", out, *native_args(empty)))
    assert status == 0
    return out


def test_the_built_packages_are_readable_by_everyone(toy_channel: Path) -> None:
    """The engine writes its packages 0600; the channel folder is served or shared, so they are published 0644."""
    packages = sorted(toy_channel.glob("*/*.conda"))
    assert packages
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in packages} == {p.name: "0o644" for p in packages}


def test_index_rewrites_repodata(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    (copy / "linux-64").mkdir(parents=True)
    for package in (toy_channel / "linux-64").glob("*.conda"):
        (copy / "linux-64" / package.name).write_bytes(package.read_bytes())
    assert main(["channel", "index", str(copy)]) == 0
    assert f"indexed {copy / 'linux-64' / 'repodata.json'}" in capsys.readouterr().out
    repodata = json.loads((copy / "linux-64" / "repodata.json").read_text())
    assert len(repodata["packages.conda"]) == 5
    assert sorted(p.name for p in copy.iterdir()) == ["linux-64", "noarch"]


def test_smoke_install_solves_and_links(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "prefix"
    status = main(
        [
            "channel",
            "install",
            str(toy_channel),
            "toy-py ==1.0 py311*",
            "--prefix",
            str(prefix),
            "--target-platform",
            "linux-64",
        ]
    )
    assert status == 0
    assert (prefix / "lib" / "toy-py.txt").read_text().strip() == "3.11"
    assert (prefix / "lib" / "toy-llvm.txt").read_text().strip() == "llvm"  # the exact pin came along
    records = sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    assert records[0].startswith("toy-llvm-1.0-h") and records[1].startswith("toy-py-1.0-py311h")
    assert "toy-py" in capsys.readouterr().out


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder for Python's temporary files, so a test sees every scratch prefix made there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_smoke_install_without_prefix_cleans_up(
    toy_channel: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    installed_into = []

    def recording(*args: Any, prefix: Path, **kwargs: Any) -> Any:
        result = real(*args, prefix=prefix, **kwargs)
        assert (prefix / "conda-meta").is_dir()  # the packages were really installed there...
        installed_into.append(prefix)
        return result

    real = channel_install.smoke_install
    monkeypatch.setattr(channel_install, "smoke_install", recording)
    assert main(["channel", "install", str(toy_channel), "toy-py", "--target-platform", "linux-64"]) == 0
    assert "py313h" in capsys.readouterr().out  # the newest python variant wins
    (prefix,) = installed_into
    assert prefix.is_relative_to(scratch)
    assert list(scratch.iterdir()) == []  # ...and nothing of it is left


def test_a_failed_smoke_install_without_prefix_cleans_up(
    toy_channel: Path, scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["channel", "install", str(toy_channel), "nosuch", "--target-platform", "linux-64"]) == 7
    capsys.readouterr()
    assert list(scratch.iterdir()) == []


def test_unsolvable_spec_is_one_line(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "prefix"
    assert (
        main(
            [
                "channel",
                "install",
                str(toy_channel),
                "flagtree-cpu",
                "--prefix",
                str(prefix),
                "--target-platform",
                "linux-64",
            ]
        )
        == 7
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(
        f"flagtree-feedstock: error: cannot solve flagtree-cpu from {toy_channel} for linux-64: "
    )
    assert not prefix.exists()


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line (`build` prints its options first)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_not_a_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["channel", "install", str(empty), "toy-py"]) == 9
    assert _error(capsys) == (
        f"flagtree-feedstock: error: channel folder {empty} holds no packages (*.conda, *.tar.bz2 in its "
        f"subdirs) (fix: build into it first: flagtree-feedstock build --output-dir {empty})"
    )
    assert main(["channel", "install", str(tmp_path / "nope"), "toy-py"]) == 2
    assert _error(capsys) == (
        f"flagtree-feedstock: error: channel folder {tmp_path / 'nope'} does not exist "
        f"(fix: build into it first: flagtree-feedstock build --output-dir {tmp_path / 'nope'})"
    )


def _unindexed_copy(toy_channel: Path, folder: Path) -> Path:
    (folder / "linux-64").mkdir(parents=True)
    for package in (toy_channel / "linux-64").glob("*.conda"):
        shutil.copy2(package, folder / "linux-64" / package.name)
    return folder


@pytest.mark.parametrize(
    ("command", "state"),
    [
        *(("channel install", state) for state in ("missing", "empty", "unindexed", "damaged")),
        *(("build --channel", state) for state in ("missing", "empty", "unindexed")),
    ],
)
def test_a_suggested_index_command_works(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], state: str, command: str
) -> None:
    """Whatever state a channel folder is in, a `run: flagtree-feedstock ...` fix succeeds when run."""
    folder = tmp_path / "folder"
    if state == "empty":
        folder.mkdir()
    elif state == "unindexed":
        _unindexed_copy(toy_channel, folder)
    elif state == "damaged":  # indexed, then its linux-64 index overwritten
        shutil.copytree(toy_channel, folder)
        (folder / "linux-64" / "repodata.json").write_text("not json")
    if command == "channel install":
        args = ["channel", "install", str(folder), "toy-py", "--target-platform", "linux-64"]
    else:
        args = build_args("toy-multi", tmp_path / "out", "--target-platform", "linux-64")
        args += ["--channel", folder.as_uri(), "--no-test"]
    assert main(args) in {2, 9}
    line = _error(capsys)
    suggested = re.search(r"\(fix: run: (flagtree-feedstock [^)]*)\)$", line)
    assert bool(suggested) == (state in {"unindexed", "damaged"}), line
    if suggested:
        assert main(shlex.split(suggested.group(1))[1:]) == 0
        capsys.readouterr()
        assert main(args) == 0, capsys.readouterr().err


def test_a_damaged_index_is_not_called_unreachable(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = shutil.copytree(toy_channel, tmp_path / "damaged")
    (folder / "linux-64" / "repodata.json").write_text("not json")
    assert main(["channel", "install", str(folder), "toy-py", "--target-platform", "linux-64"]) == 9
    assert _error(capsys) == (
        f"flagtree-feedstock: error: the channel index {folder / 'linux-64' / 'repodata.json'} is damaged: "
        f"it is not JSON: Expecting value: line 1 column 1 (char 0) (fix: run: flagtree-feedstock channel index {folder})"
    )


def test_the_platform_the_channel_holds_is_named(
    toy_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["channel", "install", str(toy_channel), "toy-py", "toy-llvm"]) == 7
    assert _error(capsys) == (
        f"flagtree-feedstock: error: {toy_channel} holds toy-llvm, toy-py for linux-64, not for linux-aarch64 "
        "(fix: pass --target-platform linux-64)"
    )


@pytest.mark.parametrize("extra", ["conda-forge", "https://conda.anaconda.org/conda-forge"])
def test_an_unreachable_channel_is_named(
    toy_channel: Path, capsys: pytest.CaptureFixture[str], extra: str
) -> None:
    args = ["channel", "install", str(toy_channel), "toy-py", "--target-platform", "linux-64", "-c", extra]
    assert main(args) == 9
    line = _error(capsys)
    # The dead proxy of conftest.py stands in for a machine without network; the relay on loopback
    # (channel/index_relay.py) is what tried the channel, first for its shard index.
    assert re.fullmatch(
        re.escape(
            f"flagtree-feedstock: error: channel {extra} cannot be read: https://conda.anaconda.org/conda-forge/"
        )
        + "(linux-64|noarch)"  # whichever subdir rattler asked for first
        + re.escape(
            "/repodata_shards.msgpack.zst: https://conda.anaconda.org refused the connection (fix: check the "
            "channel, the network and the http(s)_proxy variables, or leave that channel out (a channel that "
            "cannot be read is never skipped))"
        ),
        line,
    ), line


def test_a_bad_match_spec_is_named(toy_channel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["channel", "install", str(toy_channel), "toy-py >>=1"]) == 2
    assert _error(capsys) == (
        "flagtree-feedstock: error: 'toy-py >>=1' is not a match spec: unable to parse version spec: >>=1 "
        "(fix: write NAME, 'NAME >=VERSION' or 'NAME ==VERSION BUILD', e.g. 'flagtree-cpu >=0.6'; a space ends "
        "the name)"
    )


def test_non_empty_prefix_is_refused(
    toy_channel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("mine")
    assert main(["channel", "install", str(toy_channel), "toy-py", "--prefix", str(prefix)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert (prefix / "keep.txt").read_text() == "mine"


def test_index_of_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["channel", "index", str(tmp_path / "nope")]) == 2
    assert _error(capsys) == (
        f"flagtree-feedstock: error: channel folder {tmp_path / 'nope'} does not exist "
        f"(fix: build into it first: flagtree-feedstock build --output-dir {tmp_path / 'nope'})"
    )


def test_index_of_a_folder_without_packages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "linux-64").mkdir()
    (tmp_path / "linux-64" / "notes.txt").write_text("not a package")
    assert main(["channel", "index", str(tmp_path)]) == 9
    assert _error(capsys) == (
        f"flagtree-feedstock: error: channel folder {tmp_path} holds no packages (*.conda, *.tar.bz2 in its "
        f"subdirs) to index (fix: build into it first: flagtree-feedstock build --output-dir {tmp_path})"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["linux-64", "notes.txt"]  # nothing written
