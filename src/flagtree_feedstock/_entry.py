"""The ``flagtree-feedstock`` console script: a signal is one line from the first moment this module runs.

pip's generated wrapper imports this module, then calls :func:`entrypoint`. It imports nothing that takes
time (the command's modules, rich and the engines, load inside the guard), so SIGINT, SIGTERM or SIGHUP
while they load ends like one at any later moment (:mod:`._interrupts`): one line, exit status 128 + the
signal's number, no traceback.
"""

from __future__ import annotations

import sys

from flagtree_doctor.interrupts import run_console_script

from ._interrupts import PROG


def entrypoint() -> None:
    def command() -> int:
        from .cli import main  # noqa: PLC0415 - inside the guard on purpose

        return main(sys.argv[1:])

    run_console_script(PROG, command)
