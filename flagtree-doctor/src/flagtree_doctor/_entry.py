"""The console scripts ``flagtree-doctor`` and ``flagtree-verify``: a signal at any moment is one line.

The script wrapper pip or conda writes imports this module first, and it imports nothing but the standard
library and :mod:`.interrupts` (itself standard library only): the command's own module (rich, the checks,
torch and triton later) is imported inside :func:`.interrupts.run_console_script`, so SIGINT, SIGTERM or
SIGHUP while Python is still importing them ends the command with its one line (``flagtree-doctor:
interrupted``, exit 130; ``flagtree-doctor: terminated (SIGTERM)``, exit 143), not a traceback.
"""

from __future__ import annotations

import sys
from importlib import import_module

from .interrupts import run_console_script


def doctor() -> None:
    _run("flagtree-doctor", "flagtree_doctor.cli")


def verify() -> None:
    _run("flagtree-verify", "flagtree_doctor.verify.cli")


def _run(prog: str, module: str) -> None:
    def command() -> int:
        status: int = import_module(module).main(sys.argv[1:], prog=prog)
        return status

    run_console_script(prog, command)
