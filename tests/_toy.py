"""The toy recipes of tests/recipes and what it takes to build them offline."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from rattler.index import index_fs

from _timing import seconds

RECIPES = Path(__file__).resolve().parent / "recipes"
ROOT = RECIPES.parents[1]


def build_args(recipe: str, out: Path, *extra: str) -> list[str]:
    """`flagtree-feedstock build` arguments for the toy recipe folder ``recipe`` into channel ``out``."""
    folder = RECIPES / recipe
    return [
        "build",
        "--recipe-dir",
        str(folder),
        # The toy's own variant file in place of the repository's root one (which sets keys no toy uses).
        "--exclusive-config-file",
        str(folder / "conda_build_config.yaml"),
        "--output-dir",
        str(out),
        *extra,
    ]


def native_args(channel: Path) -> list[str]:
    """Build natively for this linux-64 machine against a local channel, with no package tests."""
    return ["--target-platform", "linux-64", "--channel", channel.as_uri(), "--no-test"]


def make_empty_channel(channel: Path) -> Path:
    """An indexed channel folder with no packages: a stand-in for conda-forge that needs no network."""
    (channel / "noarch").mkdir(parents=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False))
    return channel


def build_toy_multi(base: Path) -> Path:
    """``base/channel``: two real packages (toy-llvm, toy-py for python 3.11) built by the main job, offline
    (a proxy that refuses, so nothing reaches a network)."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415 - the toolkit, only where a toy is built

    out = base / "channel"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("http_proxy", "http://127.0.0.1:9")
        mp.setenv("https_proxy", "http://127.0.0.1:9")
        args = build_args(
            "toy-multi", out, *native_args(make_empty_channel(base / "empty")), "--python", "3.11"
        )
        assert main(args) == 0
    return out


def error_line(stderr: str) -> str:
    """The one `flagtree-feedstock: error:` line of a run's stderr (there must be exactly one)."""
    lines = [line for line in stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def leftovers(out: Path) -> list[str]:
    """Anything in the channel folder, and any staging folder left beside it."""
    inside = sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []
    staging = sorted(p.name for p in out.parent.glob(f".{out.name}-staging-*"))
    return inside + staging


def published(out: Path, subdir: str = "linux-64") -> list[str]:
    """The package files of ``out/<subdir>`` and, checked to be the same, the ones its repodata.json lists."""
    files = sorted(p.name for p in (out / subdir).glob("*.conda"))
    repodata = json.loads((out / subdir / "repodata.json").read_text())
    assert sorted(repodata["packages.conda"]) == files, "the index lists exactly the package files"
    return files


def run_toolkit(argv: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``flagtree-feedstock ARGV`` as a child in the repository, without colour, its rattler and XDG caches in
    ``tmp_path`` (the proxies stay the tests' dead end, 127.0.0.1 reached directly); ``env`` added."""
    from _peak_memory import console_script  # noqa: PLC0415 - its one finder of console scripts

    environment = {
        **os.environ,
        "NO_COLOR": "1",
        "RATTLER_CACHE_DIR": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "no_proxy": "127.0.0.1",
        **env,
    }
    environment.pop("PREFIX_API_KEY", None)
    return subprocess.run(
        [console_script("flagtree-feedstock"), *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=seconds(180),
        check=False,
    )
