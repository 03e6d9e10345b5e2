"""The README's test command on a clone without torch (issue 23 item 10): what needs torch skips, naming how to
install it, like every other missing tool; under ``CI=true`` (.ci/run installs torch) the skip is a failure.

The environment without torch is this one minus torch: a venv whose only site folder holds links to every
entry of this venv's site-packages but torch's (torch, functorch, torchgen and their metadata), and console
scripts of its own, so the commands the tests start run without torch too. A fresh venv and
``pip install -e ".[test]"`` would show the same (done by hand for the issue); this costs seconds and no network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest

from _timing import seconds
from _tools import TORCH_INSTALL

ROOT = Path(__file__).resolve().parents[1]
# The tests that need torch, in-process or in a command they start (and, without CI, the files around them).
NEED_TORCH = (
    "tests/test_verify_ops.py",
    "tests/test_verify_references.py",
    "tests/test_doctor_interrupts.py::test_an_interrupt_while_verify_imports_flagtree",
    "tests/test_terminals.py::test_a_piped_verify_keeps_each_row_on_one_line",
)
AROUND = ("tests/test_verify.py", "tests/test_doctor_interrupts.py")
TORCH = re.compile(r"^(torch|functorch|torchgen)([-_.].*)?$")
SCRIPTS = ("flagtree-feedstock", "flagtree-doctor", "flagtree-verify")


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv that is this one without torch."""
    base = tmp_path_factory.mktemp("without-torch")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    linked = base / "site-packages"
    linked.mkdir()
    for entry in ours.iterdir():
        if not TORCH.match(entry.name):
            (linked / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # A .pth line that imports runs at start-up: addsitedir also reads the linked .pth files (the editable
    # install's among them).
    (Path(purelib) / "without-torch.pth").write_text(f"import site; site.addsitedir({str(linked)!r})\n")
    for name in SCRIPTS:
        script = Path(sys.executable).parent / name
        lines = script.read_text().splitlines(keepends=True)
        (venv / "bin" / name).write_text(f"#!{python}\n" + "".join(lines[1:]))
        (venv / "bin" / name).chmod(0o755)
    found = subprocess.run(
        [str(python), "-c", "import importlib.util, flagtree_feedstock; print(importlib.util.find_spec('torch'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert found == "None"
    return python


class Run(NamedTuple):
    """The inner run: its status, each test's outcome (passed, skipped, failure, error) and message, and how
    the run itself ended (the last lines of its output: its summary, or why it wrote no report)."""

    status: int
    outcomes: dict[str, tuple[str, str]]
    tail: str

    def failed(self) -> str:
        """What to read when the run did not end as expected: each test that failed, then the run's own end."""
        bad = {name: found for name, found in self.outcomes.items() if found[0] in ("failure", "error")}
        return "\n".join([*(f"{name}: {tag}: {message}" for name, (tag, message) in bad.items()), self.tail])


def _pytest(python: Path, report: Path, *, ci: bool) -> Run:
    """Run the tests that need torch without it (and those around them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "PYTHONPATH")}
    if ci:
        env["CI"] = "true"
    argv = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    done = subprocess.run(
        [*argv, "--continue-on-collection-errors", *(NEED_TORCH if ci else (*NEED_TORCH, *AROUND))],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=seconds(900),
    )  # fmt: skip
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
    assert report.is_file(), f"the inner pytest wrote no report (status {done.returncode}):\n{tail}"
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        name = ".".join(part for part in (case.get("classname"), case.get("name")) if part)
        found = next((c for c in case if c.tag in ("skipped", "failure", "error")), None)
        message = f"{found.get('message', '')}\n{found.text or ''}" if found is not None else ""
        outcomes[name] = (found.tag if found is not None else "passed", message)
    return Run(done.returncode, outcomes, tail)


INTERRUPT = "tests.test_doctor_interrupts.test_an_interrupt_while_verify_imports_flagtree"
MISSING = f"torch is not installed (install: {TORCH_INSTALL})"


def test_what_needs_torch_skips_with_the_install_line(without_torch: Path, tmp_path: Path) -> None:
    run = _pytest(without_torch, tmp_path / "report.xml", ci=False)
    assert run.status == 0, run.failed()
    outcomes = run.outcomes
    skipped = {name: message for name, (outcome, message) in outcomes.items() if outcome == "skipped"}
    torch = {name for name, message in skipped.items() if "torch" in message}
    assert all(MISSING in skipped[name] for name in torch), skipped
    # The interrupt of flagtree-verify's import of FlagTree needs torch (the command checks it first), the
    # verify modules need it at their top, and the verify table through a pipe.
    assert INTERRUPT in torch
    assert "tests.test_terminals.test_a_piped_verify_keeps_each_row_on_one_line" in torch
    assert {name.split(".")[1] for name in torch} >= {"test_verify_ops", "test_verify_references"}


def test_under_ci_a_missing_torch_is_a_failure(without_torch: Path, tmp_path: Path) -> None:
    run = _pytest(without_torch, tmp_path / "report.xml", ci=True)
    assert run.status == 1, run.failed()
    outcomes = run.outcomes
    failed = {
        name: message for name, (outcome, message) in outcomes.items() if outcome in ("failure", "error")
    }
    assert INTERRUPT in failed
    assert all(
        f"CI=true, and {MISSING}: .ci/run must provide it" in message for message in failed.values()
    ), failed
