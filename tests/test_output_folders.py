"""Output folders, recipe folders and prefixes whose paths hold a space and characters beyond ASCII.

conda-forge's compiler activation writes the build's prefixes into CFLAGS, LDFLAGS and CMAKE_ARGS unquoted, so
no compile can work under a folder with a space (ctng-compiler-activation-feedstock issue 188): the toolkit
builds in a folder above such an output folder (builder/output_dir.py, staging_parent), and the packages land in
the output folder itself. Real builds (py-rattler-build, offline), real installs (py-rattler).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _tools import as_a_user
from _toy import RECIPES, build_args, error_line, native_args, published
from flagtree_feedstock.cli import main

ODD = Path("构建") / "My Projects"  # Chinese characters above a space


def test_a_build_into_a_folder_with_a_space_works_where_compiler_flags_can_hold_the_paths(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recipe folder and the output folder both under ".../构建/My Projects/": the build script's work folder
    and prefixes have no blank in their paths (they are what conda's flags carry), the Chinese characters
    above the space are kept; the package lands in the output folder, and nothing is left behind."""
    report = tmp_path / "env.txt"
    monkeypatch.setenv("TOY_ENV_REPORT", str(report))
    recipe = shutil.copytree(RECIPES / "toy-script-env", tmp_path / ODD / "recipe folder")
    out = tmp_path / ODD / "build artifacts"
    toy = str(RECIPES / "toy-script-env")  # the recipe folder and its variant file: the copy's
    args = [
        arg.replace(toy, str(recipe))
        for arg in build_args("toy-script-env", out, *native_args(empty_channel))
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    seen = dict(line.split("=", 1) for line in report.read_text().splitlines())
    for name in ("SRC_DIR", "PREFIX", "BUILD_PREFIX"):
        assert not any(c.isspace() for c in seen[name]), seen[name]
        assert Path(seen[name]).is_relative_to(tmp_path / "构建"), seen[name]
    (package,) = published(out)
    assert package.startswith("toy-script-env-1.0-")
    assert "the path of" in captured.err and "has a blank" in captured.err  # where it built, and why
    assert [p for p in tmp_path.rglob("*") if "staging" in p.name] == []

    # The same folder as a channel, installed from into a prefix that has a space and Chinese characters too.
    prefix = tmp_path / ODD / "环境 env"
    argv = ["channel", "install", str(out), "toy-script-env", "--prefix", str(prefix)]
    assert main([*argv, "--target-platform", "linux-64"]) == 0
    assert (prefix / "share" / "toy-script-env.txt").read_text() == "ok\n"
    records = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    assert [r["name"] for r in records] == ["toy-script-env"]


def test_a_folder_with_a_space_under_a_folder_it_cannot_write_in_is_one_line(
    tmp_path: Path, empty_channel: Path
) -> None:
    """The build would work in the folder above the space, which is read-only: said before anything builds."""
    above = tmp_path / "read-only"
    spaced = above / "My Projects"
    spaced.mkdir(parents=True)
    spaced.chmod(0o777)
    above.chmod(0o555)
    out = spaced / "out"
    try:
        done = subprocess.run(
            as_a_user([sys.executable, "-m", "flagtree_feedstock", *build_args("toy-multi", out,
                                                                               *native_args(empty_channel))]),
            cwd=tmp_path, capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        above.chmod(0o755)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: --output-dir {out}: its path has a blank, which conda's compiler flags cannot "
        f"hold, so the build works in {above}, where it cannot write: Permission denied (fix: choose an "
        f"--output-dir whose path has no space or tab, or make {above} writable for you)"
    )
    assert sorted(p.name for p in above.rglob("*")) == ["My Projects"]
