"""Run a console script and measure its own peak memory (tests/interrupt_hook, ``FLAGTREE_TEST_PEAK``): the issue's 600 MB bound."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HOOK = Path(__file__).parent / "interrupt_hook"
# What a command may use at most on any input, however large (issue 28).
LIMIT_KIB = 600 * 1024


def run_measured(
    argv: list[str], peak: Path, *, timeout: float = 60, **env: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``argv`` (a Python console script) to its end within ``timeout``; its result and its VmHWM in kB."""
    done = subprocess.run(
        argv,
        env={
            **os.environ,
            # The hook first, then what was there (mutations/run.py puts its copy of the code there).
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_PEAK": str(peak),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done, int(peak.read_text())
