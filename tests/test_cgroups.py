"""A build's own cgroup v2 (`_cgroups.py`): where this machine lets the tests make one (root on CI), the empty
cgroup a killed build left is removed by the next build's, and one whose toolkit still runs is left alone.
The build's processes in it are ended whole: tests/test_interrupts.py, through the console script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from _timing import seconds_arg
from flagtree_feedstock import _cgroups
from flagtree_feedstock._processes import Process


def test_the_empty_cgroup_of_an_ended_toolkit_is_removed_and_a_running_one_s_kept() -> None:
    made = _cgroups.create()
    if made is None:
        pytest.skip("this machine lets this user make no cgroup v2 (the builds run without one)")
    _cgroups.end(made)
    ended = subprocess.Popen(["sleep", seconds_arg(60)])  # until it is killed
    gone = Process.of(ended.pid)
    assert gone is not None
    ended.kill()
    ended.wait()
    stale = made.parent / f"{_cgroups.PREFIX}{gone.pid}.{gone.start}-stale"
    me = Process.of(os.getpid())
    assert me is not None
    running = made.parent / f"{_cgroups.PREFIX}{me.pid}.{me.start}-running"
    stale.mkdir()
    running.mkdir()
    try:
        new = _cgroups.create()
        assert new is not None
        _cgroups.end(new)
        assert not stale.exists()
        assert running.is_dir()
        assert not new.exists()
    finally:
        for folder in (stale, running):
            if Path(folder).is_dir():
                folder.rmdir()
