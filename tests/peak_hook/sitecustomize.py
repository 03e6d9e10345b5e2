"""Test hook: the peak memory of a real command, as the system counts it for that process alone.

Put this folder on ``PYTHONPATH`` with ``FLAGTREE_TEST_PEAK`` naming a file: as the interpreter exits (any way
but SIGKILL) the process writes its own ``VmHWM`` from ``/proc/self/status`` (kB) there. Unlike
``ru_maxrss``, which a child inherits from its parent at fork, ``VmHWM`` counts only this process's pages.
Without ``FLAGTREE_TEST_PEAK`` it does nothing; it is never installed outside the tests.
"""

import atexit
import os
from pathlib import Path

_OUT = os.environ.get("FLAGTREE_TEST_PEAK", "")
if _OUT:

    def _write() -> None:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                Path(_OUT).write_text(line.split()[1] + "\n")

    atexit.register(_write)
