"""The smaller surprises of issue 29 (item 6), through the console scripts: each fixed, or refused in one line.

- ``HOME`` that does not exist (a service account's ``/nonexistent``): the LLVM archive cache is not made
  there (nor is ``HOME``); the one line says to set ``XDG_CACHE_HOME``. A ``HOME`` that exists gets its cache.
- ``flagtree-doctor --apply --root TREE``: another machine's OpenMP settings are not written into this
  environment; refused, pointing at ``--env``.
- A misspelt ``FLAGTREE_FEEDSTOCK_*`` variable is offered only a close name (``FOO`` is not close to ``TOOL``).
The doctor's version (the package's) is tested in tests/test_doctor_distribution.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CIX = ROOT / "tests" / "data" / "doctor" / "cix-p1-orion-o6"
ARCHIVE_URL = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz"
# --render-only of an archive by URL: no download, but its variant file is written into the archive cache.
RENDER_WITH_ARCHIVE = ["build", "--render-only", "--python", "3.12", "--llvm-archive", ARCHIVE_URL,
                       "--llvm-archive-sha256", "d" * 64]  # fmt: skip


def run(command: str, *argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(BIN / command), *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=seconds(300),
    )
    return done.returncode, done.stdout, done.stderr


def without_cache_variables(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "HOME")}
    return {**env, **extra}


def test_a_home_that_does_not_exist_is_not_made(tmp_path: Path) -> None:
    home = tmp_path / "nonexistent"
    status, out, err = run(
        "flagtree-feedstock", *RENDER_WITH_ARCHIVE, env=without_cache_variables(HOME=str(home))
    )
    assert status == 2, out + err
    assert err.splitlines()[-1] == (
        f"flagtree-feedstock: error: no place for the LLVM archive cache: {home} (HOME) is not a folder (fix: set "
        "XDG_CACHE_HOME to a folder to keep it in (export XDG_CACHE_HOME=$PWD/.cache))"
    )
    assert "Traceback" not in err
    assert not home.exists()


def test_an_xdg_cache_home_under_a_missing_folder_is_not_made(tmp_path: Path) -> None:
    cache = tmp_path / "missing" / "cache"
    env = without_cache_variables(HOME=str(tmp_path), XDG_CACHE_HOME=str(cache))
    status, _, err = run("flagtree-feedstock", *RENDER_WITH_ARCHIVE, env=env)
    assert status == 2
    assert f"no place for the LLVM archive cache: {cache.parent} (XDG_CACHE_HOME) is not a folder" in err
    assert not cache.parent.exists()


def test_a_home_that_exists_gets_its_cache(tmp_path: Path) -> None:
    status, _, err = run(
        "flagtree-feedstock", *RENDER_WITH_ARCHIVE, env=without_cache_variables(HOME=str(tmp_path))
    )
    assert status == 0, err
    (variants,) = (tmp_path / ".cache" / "flagtree-feedstock" / "llvm-archives").glob("variants-*.yaml")
    assert ARCHIVE_URL in variants.read_text()


@pytest.mark.parametrize("undo", [False, True], ids=["apply", "undo"])
def test_apply_with_root_is_refused(tmp_path: Path, undo: bool) -> None:
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    argv = ["--root", str(CIX), "--apply", *(["--undo"] if undo else [])]
    status, out, err = run("flagtree-doctor", *argv, env={**os.environ, "CONDA_PREFIX": str(prefix)})
    assert (status, out) == (2, "")
    assert err == (
        f"flagtree-doctor: error: --apply writes this machine's OpenMP settings into the active environment, "
        f"and --root {CIX} is another machine's (fix: run flagtree-doctor --apply on that machine; "
        f"flagtree-doctor --root {CIX} --env prints its settings)\n"
    )
    assert sorted(p.name for p in prefix.iterdir()) == ["conda-meta"]


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("FLAGTREE_FEEDSTOCK_FOO", "known: FLAGTREE_FEEDSTOCK_RECIPE_DIR, "),
        ("FLAGTREE_FEEDSTOCK_X", "known: FLAGTREE_FEEDSTOCK_RECIPE_DIR, "),
        ("FLAGTREE_FEEDSTOCK_PYTHN", "did you mean FLAGTREE_FEEDSTOCK_PYTHON?)"),
        ("FLAGTREE_FEEDSTOCK_TOOLS", "did you mean FLAGTREE_FEEDSTOCK_TOOL?)"),
    ],
)
def test_a_misspelt_variable_is_offered_only_a_close_name(name: str, hint: str) -> None:
    status, _, err = run("flagtree-feedstock", "build", "--render-only", env={**os.environ, name: "x"})
    assert status == 2
    (line,) = err.splitlines()
    assert line.startswith(f"flagtree-feedstock: error: unknown environment variable {name} (fix: {hint}"), (
        line
    )
