"""`flagtree-feedstock channel`: index a folder and smoke-install from it with py-rattler, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _toy import build_args, make_empty_channel, native_args
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


def test_smoke_install_without_prefix_cleans_up(
    toy_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["channel", "install", str(toy_channel), "toy-py", "--target-platform", "linux-64"]) == 0
    assert "py313h" in capsys.readouterr().out  # the newest python variant wins


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
        == 9
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"flagtree-feedstock: error: cannot solve flagtree-cpu from {toy_channel}: ")
    assert not prefix.exists()


def test_not_a_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["channel", "install", str(tmp_path), "toy-py"]) == 9
    assert capsys.readouterr().err.strip() == (
        f"flagtree-feedstock: error: {tmp_path} is not an indexed channel "
        f"(fix: run: flagtree-feedstock channel index {tmp_path})"
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
    assert "does not exist" in capsys.readouterr().err
