"""The tests' one time scale: every timeout, deadline and bounded wait in ``tests/`` is ``seconds(N)``.

A loaded machine (a shared CI runner, two suites at once, busy loops beside the run) takes longer for
everything, and a bound written for an idle one then fails a test that is right. ``FLAGTREE_TEST_TIME_SCALE`` (a
number above 0, default 1; CI may raise it) multiplies every such bound: the ``timeout=`` of a command, the
deadline of a polling loop, a pause a test holds a command in until its signal comes, the time a product's own
timeout is given in a test that exercises it. A wait that ends when its event happens costs nothing more on a
fast machine, so raising the scale slows nothing down but a failure.

It is read here only, once; ``tests/test_time_scale.py`` finds a literal timeout, sleep or deadline anywhere
else in ``tests/``. What is not a bound stays a constant here: :data:`POLL`, the pause between two looks of a
polling loop.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

import pytest

VARIABLE = "FLAGTREE_TEST_TIME_SCALE"
# The pause between two looks of a polling loop (poll_until): how soon an event is seen, not how long it may take.
POLL = 0.02
# The same where the moment an event is seen is what the test checks (a lock let go of, a pause reached).
FINE_POLL = 0.005


def read_scale(environ: Mapping[str, str]) -> float:
    """``FLAGTREE_TEST_TIME_SCALE`` of ``environ``: 1 when unset or empty; a ValueError saying what is wrong
    with any value that is not a number above 0."""
    text = environ.get(VARIABLE, "").strip()
    if not text:
        return 1.0
    try:
        scale = float(text)
    except ValueError:
        scale = float("nan")
    if not scale > 0 or scale == float("inf"):
        raise ValueError(
            f"{VARIABLE}={text!r} is not a number above 0 (it multiplies every timeout of the tests: set it to "
            "e.g. 2 on a slow or shared machine, or unset it)"
        )
    return scale


@cache
def scale() -> float:
    """This run's scale, read once. tests/conftest.py reads it first, as pytest starts: a bad value stops the
    run there, in one line (pytest's usage error)."""
    try:
        return read_scale(os.environ)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def seconds(n: float) -> float:
    """``n`` seconds on this project's 2-core test machine, idle, as this run's bound: ``n`` times the scale."""
    return n * scale()


def seconds_arg(n: float) -> str:
    """``seconds(n)`` as a command-line or environment value (``2`` at scale 1, ``3.5`` at 1.75)."""
    return f"{seconds(n):g}"


def poll_until(condition: Callable[[], object], what: str, timeout: float, *, interval: float = POLL) -> None:
    """Look at ``condition`` every ``interval`` seconds until it is true; a failure naming ``what`` once
    ``timeout`` seconds (a bound already scaled: ``seconds(N)``) have passed without it."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s ({VARIABLE} is {scale():g})")
        time.sleep(interval)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, every thread) process ``pid`` has used: so far, or in all once it has ended
    and is not yet reaped (a zombie keeps its counts). What a command costs, however loaded the machine is: its
    time on the clock grows with the load, this does not."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cost_after_signal(process: subprocess.Popen[str], signum: int, timeout: float) -> tuple[float, float]:
    """Send ``signum`` to ``process`` and wait (at most ``timeout`` seconds, scaled) until it has ended: the CPU
    seconds it spent after the signal, and the seconds on the clock. One that ended before the signal is still
    there to be read: the signal goes by its pid (``Popen.send_signal`` would first reap it)."""
    spent = cpu_seconds(process.pid)
    os.kill(process.pid, signum)
    sent = time.monotonic()
    cpu = cpu_until_it_ends(process, timeout) - spent
    return cpu, time.monotonic() - sent


def cpu_until_it_ends(process: subprocess.Popen[str], timeout: float) -> float:
    """Wait until ``process`` has ended (at most ``timeout`` seconds, scaled), without reaping it: the CPU
    seconds it used in all. Its output must fit in its pipes meanwhile (a line or two), as nothing reads them."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"{process.args}: still running {timeout:g} s on ({VARIABLE} is {scale():g})")
        time.sleep(FINE_POLL)
    return cpu_seconds(process.pid)
