"""Two builds into one output folder, as two real processes: the second waits for the first, saying so,
then finds the packages built and builds nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from _timing import POLL, seconds
from _toy import build_args, leftovers, native_args, published

CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    """End the builds as a Ctrl-C does, so their engines' processes end too."""
    for process in processes:
        process.send_signal(signal.SIGINT)
    for process in processes:
        process.communicate(timeout=seconds(60))


def _wait_until(
    condition: Callable[[], bool],
    what: str,
    processes: list[subprocess.Popen[str]],
    *,
    wrong: Callable[[], str | None] = lambda: None,
) -> None:
    """Wait for ``condition``; fail at once when a process ends or ``wrong`` names something that happened."""
    timeout = seconds(120)
    deadline = time.monotonic() + timeout
    while not condition():
        problem = wrong()
        if problem:
            _stop(processes)
            pytest.fail(problem)
        for process in processes:
            if process.poll() is not None:
                pytest.fail(f"a build ended (status {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            _stop(processes)
            pytest.fail(f"no {what} within {timeout:g} s")
        time.sleep(POLL)


def test_a_second_build_into_the_same_folder_waits_and_builds_nothing_twice(
    tmp_path: Path, empty_channel: Path
) -> None:
    marker, release, log = tmp_path / "marker", tmp_path / "release", tmp_path / "builds.log"
    out = tmp_path / "channel"
    env = {**os.environ, "TOY_MARKER": str(marker), "TOY_RELEASE": str(release), "TOY_BUILD_LOG": str(log)}
    argv = [str(CONSOLE_SCRIPT), *build_args("toy-slow", out, *native_args(empty_channel))]
    errors = [tmp_path / "first.err", tmp_path / "second.err"]
    with errors[0].open("w") as first_err, errors[1].open("w") as second_err:
        first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=first_err, text=True)
        _wait_until(marker.exists, "build script of the first build", [first])  # first: in toy-slow's script
        second = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=second_err, text=True)
        # The one it waits for, named by its pid and command line (the lock file records them).
        waiting = f"waiting for process {first.pid} ("
        _wait_until(
            lambda: waiting in errors[1].read_text(),
            "waiting line from the second build",
            [first, second],
            wrong=lambda: (
                "the second build built beside the first"
                if len(log.read_text().splitlines()) > 2
                else "the second build waits without naming the first"
                if "waiting for " in errors[1].read_text() and waiting not in errors[1].read_text()
                else None
            ),
        )
        (line,) = [line for line in errors[1].read_text().splitlines() if waiting in line]
        assert f" {CONSOLE_SCRIPT} build --recipe-dir " in line
        assert line.endswith(f") to finish writing into {out} (one command writes into a folder at a time)")
        time.sleep(seconds(0.5))  # a while in which it would have started building, were it to
        assert second.poll() is None  # it waits; it does not build toy-slow beside the first
        assert log.read_text().splitlines() == ["toy-quick", "toy-slow"]
        release.touch()
        first_out, _ = first.communicate(timeout=seconds(120))
        second_out, _ = second.communicate(timeout=seconds(120))
    assert (first.returncode, second.returncode) == (0, 0), [e.read_text() for e in errors]
    assert log.read_text().splitlines() == ["toy-quick", "toy-slow"]  # each package built once
    assert "built 2 package(s)" in first_out
    assert "nothing new: every planned package was already in" in second_out
    for err in errors:
        assert "different package" not in err.read_text()
    assert len(published(out)) == 2
    assert not [name for name in leftovers(out) if "staging" in name]
