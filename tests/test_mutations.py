"""mutations/run.py, run on a tiny repository of its own (a package, its tests, a small catalogue), and the
repository's own catalogue checked against this checkout without running it (that takes minutes:
`python mutations/run.py`, tests/README.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from functools import cache
from pathlib import Path

import pytest

from _tools import require_executable

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "mutations" / "run.py"

TOY_PACKAGE = """def add(a, b):
    return a + b


def unused():
    return 1
"""
TOY_TESTS = """import toypkg


def test_add():
    assert toypkg.add(2, 3) == 5


def test_broken():
    assert False
"""
CATALOGUE = """
[[mutation]]
id = "add-subtracts"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a - b"
tests = ["tests/test_toy.py::test_add"]
why = "a caught one"

[[mutation]]
id = "unused-changes"
file = "src/toypkg/__init__.py"
find = "return 1"
replace = "return 2"
tests = ["tests/test_toy.py::test_add"]
why = "nothing tests it"

[[mutation]]
id = "twice"
file = "src/toypkg/__init__.py"
find = "return"
replace = "yield"
tests = ["tests/test_toy.py::test_add"]
why = "find occurs twice"

[[mutation]]
id = "needs-a-source"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return b"
tests = ["tests/test_toy.py::test_add"]
why = "skipped without its variable"
requires = ["TOY_SOURCE_THAT_IS_NOT_SET"]

[[mutation]]
id = "tests-fail-anyway"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a * b"
tests = ["tests/test_toy.py::test_broken"]
why = "its tests fail unmutated"

[[mutation]]
id = "shadowed"
file = "src/time.py"
find = "X = 1"
replace = "X = 2"
tests = ["tests/test_toy.py::test_add"]
why = "Python imports its builtin time, never this file"
"""


@cache
def _runner() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("mutations_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def toy_repository(tmp_path: Path) -> Path:
    git = require_executable("git", "git")
    repo = tmp_path / "toy"
    for name, text in {
        "src/toypkg/__init__.py": TOY_PACKAGE,
        "src/time.py": "X = 1\n",
        "tests/test_toy.py": TOY_TESTS,
        "mutations/toy.toml": CATALOGUE,
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    return repo


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # PYTEST_ADDOPTS as .ci/run exports it, and worse: the runner must not pass it on to its pytest runs.
    env = {**os.environ, "PYTEST_ADDOPTS": "--collect-only", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, str(RUNNER), "--root", str(repo), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_runner_reports_each_kind_of_result(toy_repository: Path) -> None:
    before = {p: p.read_text() for p in toy_repository.rglob("*") if p.is_file() and ".git" not in p.parts}
    done = _run(toy_repository, "--json")
    assert done.returncode == 1, done.stderr
    results = {r["id"]: (r["status"], r["detail"]) for r in json.loads(done.stdout)}
    assert results == {
        "add-subtracts": ("caught", "tests/test_toy.py::test_add"),
        "unused-changes": ("survived", "pytest exit status 0: tests/test_toy.py::test_add passed"),
        "twice": ("stale", "its find text occurs 2 times in src/toypkg/__init__.py, not once"),
        "needs-a-source": ("skipped", "TOY_SOURCE_THAT_IS_NOT_SET unset"),
        "tests-fail-anyway": ("baseline-fails", "fails unmutated: tests/test_toy.py::test_broken"),
        "shadowed": ("not-live", "imports time from built-in"),
    }
    after = {p: p.read_text() for p in toy_repository.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before  # the mutations went to a scratch copy


def test_only_one_mutation_and_the_table(toy_repository: Path) -> None:
    done = _run(toy_repository, "--only", "add-subtracts")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "add-subtracts" in line]
    assert len(rows) == 1 and "caught" in rows[0] and "tests/test_toy.py::test_add" in rows[0]
    assert done.stdout.splitlines()[-1] == (
        "1 caught, 0 survived, 0 equivalent, 0 skipped, "
        "0 could not run or were wrongly marked (stale, baseline-fails, not-live, timeout, not-equivalent)"
    )


def test_list_runs_nothing_and_bad_input_is_one_line(toy_repository: Path) -> None:
    listed = _run(toy_repository, "--list")
    assert listed.returncode == 0
    assert all(f"{m}" in listed.stdout for m in ("add-subtracts", "shadowed", "TOY_SOURCE_THAT_IS_NOT_SET"))
    unknown = _run(toy_repository, "--only", "nosuch")
    assert (unknown.returncode, unknown.stderr) == (
        2,
        "mutations/run.py: error: no mutation nosuch (see --list)\n",
    )
    first = CATALOGUE.split("[[mutation]]")[1]
    (toy_repository / "mutations" / "again.toml").write_text(f"[[mutation]]{first}")
    duplicate = _run(toy_repository, "--list")
    assert (duplicate.returncode, duplicate.stderr) == (
        2,
        "mutations/run.py: error: toy.toml: mutation add-subtracts: id add-subtracts is also in again.toml\n",
    )


def test_the_repositorys_catalogue_applies_to_this_checkout() -> None:
    """Every mutation of mutations/*.toml is well formed, its find text is in its file exactly once, and its
    tests name files that exist, so `python mutations/run.py` can run each one."""
    runner = _runner()
    mutations = runner.load(sorted((ROOT / "mutations").glob("*.toml")))
    assert mutations
    problems = [f"{m.id}: {reason}" for m in mutations if (reason := runner.stale(m, ROOT))]
    problems += [
        f"{m.id}: no {test}"
        for m in mutations
        for test in m.tests
        if not (ROOT / test.split("::")[0]).exists()
    ]
    assert problems == []
