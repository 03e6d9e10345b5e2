"""Builds for a target platform that is not this machine's (a cross build), with the real engine, offline.

The host environment must be solved and installed for the target: a host package that exists only in the
target's subdir of a local channel is what `toy-host` copies into its own package.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import rattler_build
from rattler.index import index_fs
from rattler.package_streaming import extract

from _toy import build_args
from flagtree_feedstock.cli import main
from flagtree_feedstock.platforms import PLATFORMS, host_platform

HOST = host_platform()
(FOREIGN,) = PLATFORMS - {HOST}


@pytest.fixture
def target_only_channel(tmp_path: Path) -> Path:
    """A channel whose one package, toy-dep, exists only for the foreign target platform."""
    channel = tmp_path / "deps"
    files = tmp_path / "toy-dep-files"
    (files / "share").mkdir(parents=True)
    (files / "share" / "toy-dep.txt").write_text(f"toy-dep for {FOREIGN}\n")
    (channel / "noarch").mkdir(parents=True)
    rattler_build.assemble_package(
        name="toy-dep",
        version="1.0",
        target_platform=FOREIGN,
        build_string="0",
        output_dir=channel / FOREIGN,
        files_dir=files,
    )
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel


def _cross_args(channel: Path) -> list[str]:
    return [
        "--target-platform",
        FOREIGN,
        "--build-platform",
        HOST,
        "--channel",
        channel.as_uri(),
        "--no-test",
    ]


def test_cross_build_installs_the_targets_host_packages(tmp_path: Path, target_only_channel: Path) -> None:
    out = tmp_path / "channel"
    assert main(build_args("toy-host", out, *_cross_args(target_only_channel))) == 0
    (package,) = (out / FOREIGN).glob("toy-host-1.0-*.conda")
    extracted = tmp_path / "extracted"
    extract(package, extracted)
    assert (extracted / "share" / "toy-host.txt").read_text() == f"toy-dep for {FOREIGN}\n"


@pytest.mark.parametrize("select", [(), ("--output", "toy-fails")], ids=["a-call-each", "one-call"])
def test_cross_build_failure_shows_the_end_of_the_script_log(
    tmp_path: Path,
    target_only_channel: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    select: tuple[str, ...],
) -> None:
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    assert main(build_args("bad-script", out, *_cross_args(target_only_channel), *select)) == 8
    err = capsys.readouterr().err
    assert "[1/1] failing on purpose" in err
    # The cause, more than 40 lines before the end of the log, is shown as well.
    assert "toy.c:1: error: the cause, long before the end" in err
    assert "flagtree-feedstock: error: building toy-fails 1.0" in err
    # toy-good-first finished before the failure, in a call of its own or (--output toy-fails) in the same
    # call as toy-fails, which builds the outputs before it: either way it is published, toy-fails is not.
    assert log.read_text().splitlines() == ["toy-good-first", "toy-fails"]
    assert [p.name.split("-1.0-")[0] for p in (out / FOREIGN).glob("*.conda")] == ["toy-good-first"]
    assert (out / FOREIGN / "repodata.json").is_file()
