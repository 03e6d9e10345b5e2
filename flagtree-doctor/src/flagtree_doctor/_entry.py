"""The console scripts ``flagtree-doctor`` and ``flagtree-verify``: Ctrl-C at any moment is one line, exit 130.

The script wrapper pip or conda writes imports this module first, and it imports nothing but the standard
library's ``sys`` and ``signal``: the command's own module (rich, the checks, torch and triton later) is
imported inside the ``try``, so an interrupt while Python is still importing them is caught too, not printed
as a traceback. Once the command is over, a late Ctrl-C is ignored (it would otherwise end Python's shutdown
with SIGINT and hide the exit status).
"""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def doctor() -> None:
    _run("flagtree-doctor", "flagtree_doctor.cli")


def verify() -> None:
    _run("flagtree-verify", "flagtree_doctor.verify.cli")


def _run(prog: str, module: str) -> None:
    try:
        try:
            from importlib import import_module  # noqa: PLC0415 - inside the try, as everything it loads

            status = import_module(module).main(sys.argv[1:], prog=prog)
        finally:
            # The command is over (done, failed or interrupted): a Ctrl-C from here on, while the line is
            # written or Python shuts down, changes nothing. One that lands before this line is caught below.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        status = INTERRUPTED
    sys.exit(status)
