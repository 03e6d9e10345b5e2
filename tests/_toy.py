"""The toy recipes of tests/recipes and what it takes to build them offline."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rattler.index import index_fs

RECIPES = Path(__file__).resolve().parent / "recipes"


def build_args(recipe: str, out: Path, *extra: str) -> list[str]:
    """`flagtree-feedstock build` arguments for the toy recipe folder ``recipe`` into channel ``out``."""
    folder = RECIPES / recipe
    return [
        "build",
        "--recipe-dir",
        str(folder),
        "--variant-config",
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
