"""One meaning per exit status (issue 29 item 4): the table of docs/building.md is errors.py's, and the same
input fails with the same status in every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _stub_channel import write_package
from _tools import as_a_user
from _toy import error_line
from flagtree_feedstock import errors

ROOT = Path(__file__).resolve().parents[1]
BUILDING = ROOT / "docs" / "building.md"
SCRIPT = str(Path(sys.executable).with_name("flagtree-feedstock"))
BEGIN = "<!-- exit-status-table:"
END = "<!-- end of exit-status-table -->"


def test_the_docs_table_is_generated_from_errors_py() -> None:
    text = BUILDING.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    block = text[text.index(BEGIN) : text.index(END)]
    table = block[block.index("-->") + len("-->") :].strip()
    assert table == errors.exit_status_table(), (
        "docs/building.md's exit-status table differs from errors.py; put this between its markers:\n"
        + errors.exit_status_table()
    )


def test_each_status_has_one_class() -> None:
    codes = [row.split("|")[1].strip() for row in errors.exit_status_table().splitlines()[2:]]
    assert len(codes) == len(set(codes)) == 11  # 2 to 12


def _run(*argv: str, cwd: Path, user: bool = False) -> tuple[int, str]:
    command = [SCRIPT, *argv]
    done = subprocess.run(
        as_a_user(command) if user else command, cwd=cwd, capture_output=True, text=True, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, error_line(done.stderr) if done.returncode else ""


def test_a_missing_folder_is_2_in_every_command(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for argv in (["channel", "index", str(missing)], ["channel", "install", str(missing), "toy"]):
        status, line = _run(*argv, cwd=tmp_path)
        assert status == 2, line
        assert str(missing) in line


def test_a_read_only_folder_is_10_in_every_command(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    write_package(frozen / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    variants = tmp_path / "conda_build_config.yaml"
    variants.write_text((ROOT / "conda_build_config.yaml").read_text())
    cases = [
        ["channel", "index", str(frozen)],
        ["build", "--render-only", "--recipe-dir", str(ROOT / "recipe"), "-e", str(variants),
         "--output-dir", str(frozen)],
        ["build", "--render-only", "--recipe-dir", str(ROOT / "recipe"), "-e", str(variants),
         "--output-dir", str(frozen / "new")],
    ]  # fmt: skip
    for folder in (frozen, frozen / "noarch"):
        folder.chmod(0o555)
    try:
        for argv in cases:
            status, line = _run(*argv, cwd=tmp_path, user=True)
            assert (status, f"cannot write in {frozen}" in line) == (10, True), line
    finally:
        for folder in (frozen, frozen / "noarch"):
            folder.chmod(0o755)


def test_a_spec_no_channel_holds_is_7(tmp_path: Path) -> None:
    """Every time: py-rattler's solve raises its error while a tokio worker or two still run, and the command
    prints its line and ends; an interpreter torn down under such a thread crashes after that line (SIGSEGV or
    abort in 65 of 100 runs when the toolkit waited for the workers only after a solve that succeeded; once in
    a whole run of the suite). Ten in a row, a crash's stacks in the failure (PYTHONFAULTHANDLER)."""
    channel = tmp_path / "channel"
    write_package(channel / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    assert _run("channel", "index", str(channel), cwd=tmp_path)[0] == 0
    for _ in range(10):
        done = subprocess.run(
            [SCRIPT, "channel", "install", str(channel), "nosuch"],
            cwd=tmp_path, env={**os.environ, "PYTHONFAULTHANDLER": "1"}, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert (done.returncode, done.stderr.count("\n")) == (7, 1), done.stderr
        assert error_line(done.stderr).startswith("flagtree-feedstock: error: cannot solve nosuch from "), (
            done.stderr
        )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_standard_output_is_10_naming_it(tmp_path: Path) -> None:
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [SCRIPT, "build", "--render-only"], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True,
            check=False, env={**os.environ, "COLUMNS": "80"},
        )  # fmt: skip
    assert done.returncode == 10, done.stderr
    assert error_line(done.stderr).startswith(
        "flagtree-feedstock: error: No space left on device: standard output (/dev/full) (fix: "
    )
