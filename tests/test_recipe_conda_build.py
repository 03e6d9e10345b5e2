"""Tier conda_build: `conda-build --check` accepts recipe/meta.yaml for linux-aarch64 (skipped without it).

linux-aarch64 skips no output, so the check sees every output (a skipped output hides its errors). Offline:
the channel is an empty local one, so dependencies stay unsolved; conda-build then still renders, checks
and reports every output, which is what this tier is for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from _recipe_support import OUTPUTS, RECIPE_DIR, VARIANT_FILES


@pytest.mark.conda_build
@pytest.mark.skipif(
    shutil.which("conda-build") is None, reason="conda-build is not installed here (tier conda_build)"
)
def test_conda_build_check_accepts_meta_yaml(tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    for subdir in ("noarch", "linux-aarch64"):
        (channel / subdir).mkdir(parents=True)
        repodata = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
        (channel / subdir / "repodata.json").write_text(json.dumps(repodata))
    env = dict(os.environ, CONDA_SUBDIR="linux-aarch64", CONDA_SOLVER="classic")
    argv = [
        str(shutil.which("conda-build")),
        "--check",
        str(RECIPE_DIR),
        "-m",
        str(VARIANT_FILES[0]),
        "--override-channels",
        "-c",
        channel.as_uri(),
        "--croot",
        str(tmp_path / "croot"),
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in OUTPUTS:
        assert f"finalize metadata for {name}" in output, output
    assert "Traceback" not in output
