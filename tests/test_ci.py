"""What CI runs and what it says it did not run: the source-backed checks' skip or failure (tests/_tools.py),
the sources the workflow clones (.ci/sources.py), and the closing lines of .ci/run (.ci/skipped.py).

The workflow's sources step itself runs against local repositories in tests/test_workflows.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from functools import cache
from pathlib import Path

import pytest
import yaml

from _tools import SOURCES, upstream_source

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@cache
def _ci_module(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"ci_{name}", ROOT / ".ci" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _clean_env() -> dict[str, str]:
    """This environment without PYTEST_ADDOPTS: .ci/run's report option must not reach a nested pytest."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}


# ---- the source-backed checks --------------------------------------------------------------------------------


def test_a_missing_source_skips_in_a_clone_and_fails_where_the_workflow_requires_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SLEEF_SRC", raising=False)
    monkeypatch.delenv("FLAGTREE_REQUIRE_SOURCES", raising=False)
    (pin,) = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())["sleef_commit"]
    with pytest.raises(pytest.skip.Exception) as skipped:
        upstream_source("SLEEF_SRC")
    assert str(skipped.value) == f"SLEEF_SRC is not set (a checkout of sleef at sleef_commit {pin})"
    # Either outcome is caught here, so a skip where a failure belongs fails this test instead of skipping it.
    monkeypatch.setenv("FLAGTREE_REQUIRE_SOURCES", "1")
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as failed:
        upstream_source("SLEEF_SRC")
    assert failed.type is pytest.fail.Exception
    assert str(failed.value).startswith("FLAGTREE_REQUIRE_SOURCES=1, and SLEEF_SRC is not set")
    monkeypatch.setenv("SLEEF_SRC", str(tmp_path))
    assert upstream_source("SLEEF_SRC") == tmp_path
    monkeypatch.setenv("SLEEF_SRC", str(tmp_path / "nothing"))
    monkeypatch.delenv("FLAGTREE_REQUIRE_SOURCES")
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception), match="is not a folder") as wrong:
        upstream_source("SLEEF_SRC")
    assert wrong.type is pytest.fail.Exception  # a wrong value never skips


def test_the_workflow_clones_every_source_the_tests_read() -> None:
    """.ci/sources.py's checkouts are the variables upstream_source knows, each at the pin it names."""
    sources = _ci_module("sources")
    cloned = {s.variable: s for s in sources.pinned_sources()}
    assert set(cloned) == set(SOURCES)
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    for variable, (_, pin_key) in SOURCES.items():
        assert cloned[variable].commit == pins[pin_key][0], variable
    assert sources.default_host() == "https://github.com"
    assert cloned["FLAGTREE_SRC"].url == "${{ github }}/flagos-ai/FlagTree.git"


# ---- the closing lines of .ci/run ----------------------------------------------------------------------------

TINY_TESTS = """
import pytest

def test_ran():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_reads_flagtree(n):
    pytest.skip("FLAGTREE_SRC is not set (a checkout of FlagTree at flagtree_commit 54d33a53)")

def test_reads_sleef():
    pytest.skip("SLEEF_SRC is not set (a checkout of sleef at sleef_commit 93f04d86)")

@pytest.mark.skipif(True, reason="conda-build is not installed here (tier conda_build)")
def test_conda_build():
    pass
"""
CLOSING = [
    (
        "Source-backed checks that did not run here: 3 (their upstream checkout is not set; the workflow's tests "
        "job clones each and runs them):"
    ),
    "  FLAGTREE_SRC is not set (a checkout of FlagTree at flagtree_commit 54d33a53): 2",
    "    test_tiny.py::test_reads_flagtree[1]",
    "    test_tiny.py::test_reads_flagtree[2]",
    "  SLEEF_SRC is not set (a checkout of sleef at sleef_commit 93f04d86): 1",
    "    test_tiny.py::test_reads_sleef",
    "Other checks that did not run: 1:",
    "  conda-build is not installed here (tier conda_build): 1",
]


def _tiny_suite(folder: Path, *, fail: bool) -> Path:
    folder.mkdir()
    (folder / "test_tiny.py").write_text(
        TINY_TESTS + ("\ndef test_broken():\n    assert False\n" if fail else "")
    )
    return folder


def test_the_summary_names_each_source_backed_check_from_a_real_report(tmp_path: Path) -> None:
    suite = _tiny_suite(tmp_path / "suite", fail=False)
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", str(suite)],
        cwd=suite,
        env=_clean_env(),
        capture_output=True,
        check=True,
    )
    lines = _ci_module("skipped").summary(_ci_module("skipped").read(report, suite))
    assert lines == [*CLOSING, "Ran 1 of 5 checks (0 failed); skipped 4, 3 of them source-backed."]


@pytest.mark.parametrize("fail", [False, True], ids=["green", "red"])
def test_ci_run_ends_with_what_did_not_run_and_keeps_the_tests_status(tmp_path: Path, fail: bool) -> None:
    """.ci/run's own lines from its report to the README's command, run by bash in a folder with a tiny test
    suite; `python -m pip` is a no-op there, `python -m pytest` the real one (PYTEST_ADDOPTS as .ci/run
    exports it)."""
    script = (ROOT / ".ci" / "run").read_text()
    start = script.index("report_dir=$(mktemp -d)")
    phase = script[script.index("phase_start=") : script.index("\n}\n", script.index("phase()")) + 3]
    repo = _tiny_suite(tmp_path / "repo", fail=fail)
    (repo / ".ci").mkdir()
    (repo / ".ci" / "skipped.py").write_text((ROOT / ".ci" / "skipped.py").read_text())
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then exit 0; fi\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{phase}\n{script[start:]}"],
        cwd=repo,
        env={
            **_clean_env(),
            "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
            "TMPDIR": str(scratch),
            "PYTEST_ADDOPTS": "-p no:cacheprovider",  # a user's own options are kept
            "FLAGTREE_TEST_TIME_SCALE": "2.5",  # passed on to the tests, and said
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == (1 if fail else 0), done.stdout + done.stderr
    lines = done.stdout.splitlines()
    closing = lines[lines.index(next(l for l in lines if "what did not run" in l)) + 1 :]
    assert closing == [
        *CLOSING,
        (
            f"Ran {2 if fail else 1} of {6 if fail else 5} checks ({int(fail)} failed); skipped 4, 3 of them "
            "source-backed."
        ),
    ]
    assert lines[-len(closing) - 1].startswith("==> .ci/run: what did not run (previous phase ")
    (tests,) = [line for line in lines if line.startswith("==> .ci/run: tests")]
    assert tests.startswith("==> .ci/run: tests (time scale 2.5) (previous phase ")
    assert list(scratch.iterdir()) == []  # the report's folder is removed
    assert not (repo / ".pytest_cache").exists()


def test_ci_run_passes_shellcheck() -> None:
    result = subprocess.run(
        [str(VENV_BIN / "shellcheck"), str(ROOT / ".ci" / "run")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


# ---- .ci/run --setup-only: the mutations workflow's set-up -----------------------------------------------------


def _ci_run_part(start: str, end: str) -> str:
    """The lines of .ci/run from ``start`` up to ``end``, after its phase function."""
    script = (ROOT / ".ci" / "run").read_text()
    phase = script[script.index("phase_start=") : script.index("\n}\n", script.index("phase()")) + 3]
    return f"set -euo pipefail\n{phase}\n{script[script.index(start) : script.index(end)]}"


@pytest.mark.parametrize(
    ("arguments", "status", "out", "err"),
    [
        ([], 0, "setup_only=false\n", ""),
        (["--setup-only"], 0, "setup_only=true\n", ""),
        (
            ["--set-up"],
            2,
            "",
            ".ci/run: error: unknown arguments '--set-up' (run it bare, or with --setup-only)\n",
        ),
        (
            ["--setup-only", "-x"],
            2,
            "",
            ".ci/run: error: unknown arguments '--setup-only -x' (run it bare, or with --setup-only)\n",
        ),
    ],
)
def test_ci_run_takes_setup_only_or_nothing(arguments: list[str], status: int, out: str, err: str) -> None:
    """.ci/run's argument check, run by bash before anything is installed (an unknown argument must stop it
    there: the rest installs packages and runs the whole suite)."""
    part = _ci_run_part("setup_only=false", "\n# One line per phase") + '\necho "setup_only=${setup_only}"\n'
    done = subprocess.run(
        ["bash", "-c", part, ".ci/run", *arguments], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (status, out, err)


@pytest.mark.parametrize("setup_only", [True, False])
def test_ci_run_setup_only_installs_the_package_and_runs_no_test(tmp_path: Path, setup_only: bool) -> None:
    """.ci/run's lines after the sysroot, up to the tests' report, run by bash with a `python` that notes its
    arguments: with --setup-only it installs the package and ends; without, it goes on to the tests."""
    calls = tmp_path / "calls"
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    shim.chmod(0o755)
    part = _ci_run_part('if [[ "${setup_only}" == true ]]', "report_dir=$(mktemp -d)")
    done = subprocess.run(
        ["bash", "-c", f"setup_only={str(setup_only).lower()}\n{part}\necho 'on to the tests'\n"],
        cwd=tmp_path,
        env={**_clean_env(), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if setup_only:
        assert calls.read_text() == "-m pip install -q -e .[test]\n"
        assert "on to the tests" not in done.stdout
        assert done.stdout.splitlines()[-1].startswith("==> .ci/run: set up (previous phase ")
    else:
        assert not calls.exists()
        assert done.stdout == "on to the tests\n"
