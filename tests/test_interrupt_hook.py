"""tests/interrupt_hook's pause ends when the test's signal comes, whenever between the hook saying it is paused
and the start of its wait that signal lands.

A test sends its signal as soon as the hook's ready file is there. On a loaded machine the command may not have
begun to wait yet: the signal is then handled at once (Python's C handler notes it), and a plain ``time.sleep``
begun after that sleeps its whole length, the signal's Python handler running only when it ends. So
``test_a_signal_while_a_command_loads`` (which then had a ``sleep`` of its own) ran through its 60 s pause after
its SIGINT in 2 runs of 2,000 under load. The hook's wait is on Python's wakeup fd, set before the ready file is
written: the C handler writes the signal there, and the wait ends at once, however early the signal came.

Here the program itself makes that happen every time: its own audit hook raises SIGINT as the hook opens the
ready file, and its SIGINT handler only notes the signal (as a command that holds signals back does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _timing import seconds, seconds_arg

HOOK = Path(__file__).parent / "interrupt_hook"

PROGRAM = """\
import os, signal, sys

noted = []
signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
ready = os.environ["FLAGTREE_TEST_READY"]


def early(event, args):
    # The hook says it is paused: the signal comes now, before its wait has begun.
    if event == "open" and args and str(args[0]) == ready and not noted:
        signal.raise_signal(signal.SIGINT)


sys.addaudithook(early)
open(sys.argv[1], "w").close()  # the moment the hook pauses at
print(noted)
"""


def test_a_signal_that_comes_before_the_pause_begins_ends_it(tmp_path: Path) -> None:
    """Paused for at most a minute, the program ends at once: a plain sleep there would time out here."""
    ready = tmp_path / "ready"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "moment")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_PAUSE": "open:moment",
            "FLAGTREE_TEST_READY": str(ready),
            "FLAGTREE_TEST_PAUSE_SECONDS": seconds_arg(60),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(20),
    )
    assert done.returncode == 0, done.stderr
    assert ready.is_file()  # the hook did pause there
    assert done.stdout == "[2]\n"  # the signal came once, and was noted, not lost
