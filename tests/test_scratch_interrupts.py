"""A signal at each moment around a command's scratch file or folder leaves nothing of it behind.

A scratch file or folder made by ``tempfile`` exists from the moment the kernel creates it; a SIGINT or
SIGTERM (raised as an exception between two bytecodes) that lands before the code that removes it knows its
name leaves it where the user will find it. Each test runs the real console script once per moment of one
function (``tests/signal_hook``: the Nth file operation of that function, before or after it), from its first
moment until the scratch holds its first content, and checks the one closing line and that nothing is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _hostile_packages import STEM, channel_with, info_members, tar_bz2
from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]
HOOK = Path(__file__).parent / "signal_hook"
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
ENDINGS = {
    signal.SIGINT: ("flagtree-feedstock: interrupted", 130),
    signal.SIGTERM: ("flagtree-feedstock: terminated (SIGTERM)", 143),
}
# More moments than this before the scratch holds its first content, and the hook counts what it should not.
MOST_MOMENTS = 40


def _run(
    argv: list[str], function: str, moment: int, signum: signal.Signals, mark: Path
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
        "FLAGTREE_TEST_SIGNAL_AT": f"{moment}:{signum.name}:{function}",
        "FLAGTREE_TEST_SIGNAL_MARK": str(mark),
    }
    mark.unlink(missing_ok=True)
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )


def test_staged_recipes_interrupted_at_each_moment_of_its_write_leaves_no_folder(tmp_path: Path) -> None:
    """The output folder did not exist: after a signal at any moment up to the first file in the scratch folder,
    it still does not (the folders made, the scratch folder, are removed)."""
    output, mark = tmp_path / "staged-recipes", tmp_path / "moment"
    argv = ["staged-recipes", "--maintainer", "alice", "--output", str(output)]
    seen: list[str] = []
    for moment in range(1, MOST_MOMENTS + 1):
        signum = (signal.SIGINT, signal.SIGTERM)[moment % 2]
        done = _run(argv, "flagtree_feedstock.recipe.staged_recipes.write", moment, signum, mark)
        assert mark.is_file(), f"the write had fewer than {moment} moments: {seen}"
        seen.append(mark.read_text().strip())
        line, status = ENDINGS[signum]
        assert (done.returncode, done.stderr.splitlines()[-1:]) == (status, [line]), (
            f"at {seen[-1]}: {done.stderr}"
        )
        assert not output.exists(), f"at {seen[-1]}: {sorted(p.name for p in output.rglob('*'))}"
        if seen[-1].startswith("after TextIOWrapper.write"):  # recipe.yaml written into the scratch folder
            break
    else:
        pytest.fail(f"no file written to the scratch folder within {MOST_MOMENTS} moments: {seen}")


def test_channel_index_interrupted_at_each_moment_of_its_write_probe_leaves_no_probe_file(
    tmp_path: Path,
) -> None:
    """``channel index`` makes and removes a scratch file in each folder it will write in: a signal at any
    moment of that leaves none."""
    channel, _ = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(info_members()))
    mark = tmp_path / "moment"
    seen: list[str] = []
    for moment in range(1, MOST_MOMENTS + 1):
        signum = (signal.SIGINT, signal.SIGTERM)[moment % 2]
        done = _run(
            ["channel", "index", str(channel)],
            "flagtree_feedstock._paths.probe_writable",
            moment,
            signum,
            mark,
        )
        if not mark.is_file():  # every moment of every probe tried: the index ran through
            assert done.returncode == 0, done.stderr
            break
        seen.append(mark.read_text().strip())
        line, status = ENDINGS[signum]
        assert (done.returncode, done.stderr.splitlines()[-1:]) == (status, [line]), (
            f"at {seen[-1]}: {done.stderr}"
        )
        assert sorted(p.name for p in channel.rglob(".flagtree-write-test-*")) == [], f"at {seen[-1]}"
    else:
        pytest.fail(f"more than {MOST_MOMENTS} moments: {seen}")
    assert any("mkstemp" in s or "open" in s for s in seen), seen
