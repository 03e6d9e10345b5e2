"""conda-smithy, run offline through our runner (tests/conda_tools/conda_smithy_offline.py), or a skip.

conda-smithy is not on PyPI: the conda_build tier uses it where it is installed (its ``conda-smithy`` on PATH,
a python beside it: tests/_conda_tools.py) and is skipped, saying what to install, elsewhere. The runner serves
conda-smithy's two remote inputs, conda-forge's linter hints and the bot's schema, from the copies in
``../shared/data/conda-smithy/`` (skipped where they are absent) and refuses every other request, so a
maintainer check it cannot make is the one lint expected offline.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from _conda_tools import RUNNERS, offline_environment, tool_python
from _recipe_support import SHARED
from _timing import seconds

DATA = SHARED / "data" / "conda-smithy"


def smithy_python() -> str:
    """The python of conda-smithy's environment, with the copies of its remote inputs present, or a skip."""
    python = tool_python("conda-smithy")
    for name in ("hints.toml", "cf_tick_schema.json"):
        if not (DATA / name).is_file():
            pytest.skip(f"{DATA / name} is absent (conda-smithy's remote input, beside the repository here)")
    return python


def run_smithy(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``conda-smithy ARGS`` offline, with conda's caches and condarc of its own under ``cwd``."""
    python = smithy_python()
    return subprocess.run(
        [python, str(RUNNERS / "conda_smithy_offline.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=offline_environment(cwd / ".conda-scratch", CONDA_SMITHY_DATA=str(DATA)),
        timeout=seconds(600),
    )
