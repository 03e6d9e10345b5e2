"""conda-smithy, run offline through the workplace's runner (../shared/conda-tools/smithy-lint.py), or a skip.

conda-smithy is not on PyPI: the conda_build tier uses it where it is installed (its ``conda-smithy`` on PATH,
the runner beside the repository, as ../shared/conda-tools/README.md sets them up) and is skipped, saying
which is missing, elsewhere. The runner serves conda-smithy's two remote inputs from local copies and refuses
every other request, so a maintainer check it cannot make is the one lint expected offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from _recipe_support import SHARED

RUNNER = SHARED / "conda-tools" / "smithy-lint.py"


def conda_smithy_python() -> str:
    """The python that runs conda-smithy (its environment has rattler-build-conda-compat), or a skip."""
    smithy = shutil.which("conda-smithy")
    if smithy is None:
        pytest.skip("conda-smithy is not installed here (tier conda_build; it is not on PyPI)")
    python = Path(smithy).with_name("python")
    if not python.is_file():
        pytest.skip(f"no python beside {smithy}")
    return str(python)


def smithy_python() -> str:
    """The python of conda-smithy's environment with the offline runner beside it, or a skip naming what is
    missing."""
    python = conda_smithy_python()
    if not RUNNER.is_file():
        pytest.skip(f"{RUNNER} is absent (the offline runner of conda-smithy, beside the repository)")
    return python


def run_smithy(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``conda-smithy ARGS`` offline, with conda's caches and condarc of its own under ``cwd``."""
    python = smithy_python()
    scratch = cwd / ".conda-scratch"
    scratch.mkdir(exist_ok=True)
    (scratch / "condarc").touch()
    env = dict(
        os.environ,
        CONDA_SOLVER="classic",
        CONDARC=str(scratch / "condarc"),
        CONDA_PKGS_DIRS=str(scratch / "pkgs"),
        CONDA_BLD_PATH=str(scratch / "bld"),
    )
    return subprocess.run(
        [python, str(RUNNER), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
        timeout=600,
    )
