"""The suite under pytest-xdist (pyproject's `-n auto`): the tests that share a module-scoped fixture run on one
worker, so what it builds is built once in the run (tests/_xdist_groups.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]


def test_the_tests_of_a_module_fixture_run_on_one_worker_which_builds_it_once(tmp_path: Path) -> None:
    """test_doctor_elf.py: six tests share ``built`` (its folder ``elf``), three ``versioned``; two workers."""
    base = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", "--basetemp", str(base),
         "tests/test_doctor_elf.py"],
        cwd=ROOT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=seconds(600), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran_on = set(re.findall(r"^\[(gw\d+)\] .*PASSED", done.stdout, flags=re.MULTILINE))
    assert ran_on == {"gw0", "gw1"}, done.stdout  # both workers had tests
    built = sorted(
        str(p.relative_to(base)) for p in base.glob("popen-gw*/elf[0-9]*")
    )  # not pytest's elfcurrent link
    assert len(built) == 1, f"the module fixture was built by each worker that ran one of its tests: {built}"
