"""The packages' SOURCE_DATE_EPOCH comes from the recipe's context (``source_date_epoch``), where conda-forge's
lint allows it: a package `flagtree-feedstock build` lands carries that time, not the engine's clock, in
``info/index.json`` and in every member's time. tests/test_bump.py has the bump that moves it, and
tests/test_recipe_lint.py conda-smithy's lint of the recipes that hold it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import yaml
import zstandard

from _toy import RECIPES, build_args, make_empty_channel, native_args


def _members(package: Path) -> dict[str, tuple[int, bytes | None]]:
    """Each member of the .conda's two tars: its time and, for a file, its bytes."""
    found: dict[str, tuple[int, bytes | None]] = {}
    with zipfile.ZipFile(package) as archive:
        for name in archive.namelist():
            if not name.endswith(".tar.zst"):
                continue
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(archive.read(name))
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                for member in tar.getmembers():
                    handle = tar.extractfile(member) if member.isfile() else None
                    found[member.name] = (int(member.mtime), handle.read() if handle else None)
    return found


def test_a_built_package_carries_the_epoch_of_the_recipes_context(tmp_path: Path) -> None:
    epoch = yaml.safe_load((RECIPES / "toy-epoch" / "recipe.yaml").read_text())["context"][
        "source_date_epoch"
    ]
    out = tmp_path / "out"
    args = build_args("toy-epoch", out, *native_args(make_empty_channel(tmp_path / "channel")))
    done = subprocess.run(
        [sys.executable, "-m", "flagtree_feedstock", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    (package,) = (out / "noarch").glob("toy-epoch-1.0-*.conda")
    members = _members(package)
    index = json.loads(members["info/index.json"][1] or b"")
    assert index["timestamp"] == epoch * 1000
    assert {time for time, _ in members.values()} == {epoch}
    assert "share/toy-epoch/ok.txt" in members
