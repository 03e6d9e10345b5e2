"""An input file made hostile in one of five forms, and the check of a run that must refuse it (issue 41 item 4).

The forms: a link to ``/dev/zero`` (it reads without end), a FIFO (an ``open`` that waits for a writer forever), a
folder, a link to a copy of the file outside the repository, and a file one byte over its kind's bound
(``flagtree_feedstock._own_files``). The run is the real console script in a child
(``tests/_peak_memory.py``), its address space capped at 2 GiB: a read without a bound ends in its own
MemoryError, not in the machine's memory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from _peak_memory import MEMORY_LIMIT_KIB, TIME_LIMIT_S, Measured, run_measured
from _toy import error_line
from flagtree_feedstock._own_files import Kind
from flagtree_feedstock.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
FORMS = ("dev-zero", "fifo", "folder", "outside", "too-large")
ADDRESS_SPACE = 2 << 30


def feedstock_copy(tmp_path: Path) -> Path:
    """What the commands read of this repository (the recipe folder, the patches, the path source, its licence
    and conda-smithy's settings), in a copy a test may change or damage."""
    copy = tmp_path / "feedstock"
    for name in ("recipe", "patches", "flagtree-doctor"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("LICENSE", "conda-forge.yml"):
        shutil.copy2(ROOT / name, copy / name)
    return copy


def damage(path: Path, form: str, kind: Kind, outside: Path) -> str:
    """Make ``path`` the hostile ``form`` (``outside``: a folder out of the repository, for the link's target);
    the words its error line must hold."""
    original = path.read_bytes()
    path.unlink()
    if form == "dev-zero":
        path.symlink_to("/dev/zero")
        return "/dev/zero"
    if form == "fifo":
        os.mkfifo(path)
        return "a pipe (FIFO)"
    if form == "folder":
        path.mkdir()
        return "a folder"
    if form == "outside":
        outside.mkdir(parents=True, exist_ok=True)
        target = outside / path.name
        target.write_bytes(original)
        path.symlink_to(target)
        return str(target)
    assert form == "too-large", form
    with path.open("wb") as file:  # sparse: one byte over the bound costs no disk
        file.truncate(kind.limit + 1)
    return "is larger than"


def run_capped(
    argv: list[str], tmp_path: Path, env: dict[str, str] | None = None, *, whole_env: bool = False
) -> Measured:
    """``argv`` run as a measured child with its address space capped."""
    return run_measured(argv, tmp_path / "peak", env, whole_env=whole_env, address_space=ADDRESS_SPACE)


def refused(done: Measured, path: Path, words: str) -> str:
    """The one error line of a run that refused ``path`` (it holds the file's name and ``words``), having ended
    with exit status 2 within the memory and time bounds."""
    assert done.returncode == ConfigurationError.return_code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    line = error_line(done.stderr)
    assert path.name in line and words in line, line
    assert "(fix: " in line, line
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, done.peak_kib
    assert done.seconds < TIME_LIMIT_S
    return line
