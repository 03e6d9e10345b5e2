"""The real conda-build and conda-smithy (tier conda_build), run offline by runners of our own, or a skip.

Neither is on PyPI: where one is installed (its command on PATH, a python beside it) the tier runs it through
its runner in tests/conda_tools/, with the python of its own environment; elsewhere the test is skipped, naming
what to install. Every run is offline and its own: the classic solver, and conda's package cache, build root and
condarc (empty) in the test's folder, so nothing of the user's conda set-up or caches takes part.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from _timing import seconds

RUNNERS = Path(__file__).resolve().parent / "conda_tools"
INSTALL = "install: conda install -c conda-forge conda-build conda-smithy; neither is on PyPI"


def tool_python(command: str) -> str:
    """The python of the environment ``command`` (conda-build, conda-smithy) is installed in, or a skip."""
    found = shutil.which(command)
    if found is None:
        pytest.skip(f"{command} is not installed here (tier conda_build; {INSTALL})")
    python = Path(found).with_name("python")
    if not python.is_file():
        pytest.skip(f"no python beside {found}: its runner runs in that environment ({INSTALL})")
    return str(python)


def offline_environment(scratch: Path, **variables: str) -> dict[str, str]:
    """The caller's environment with the classic solver, and conda's caches and an empty condarc in ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    condarc = scratch / "condarc"
    condarc.touch()
    return dict(
        os.environ,
        CONDA_SOLVER="classic",
        CONDARC=str(condarc),
        CONDA_PKGS_DIRS=str(scratch / "pkgs"),
        CONDA_BLD_PATH=str(scratch / "bld"),
        **variables,
    )


def run_conda_build(args: list[str], *, scratch: Path) -> subprocess.CompletedProcess[str]:
    """``conda-build ARGS`` for linux-aarch64 (which skips no output, so every output is checked), offline."""
    python = tool_python("conda-build")
    return subprocess.run(
        [python, str(RUNNERS / "conda_build_offline.py"), *args],
        env=offline_environment(scratch, CONDA_SUBDIR="linux-aarch64"),
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(900),
    )
