"""The ``flagtree-feedstock`` console script: a Ctrl-C is one line from the first moment this module runs.

pip's generated wrapper imports this module, then calls :func:`entrypoint`. It imports nothing that takes
time (the command's modules, rich and the engines, load inside the guard), so an interrupt while they load
ends like one at any later moment: ``flagtree-feedstock: interrupted``, exit status 130, no traceback.
"""

from __future__ import annotations

import signal
import sys


def entrypoint() -> None:
    try:
        try:
            from .cli import main  # noqa: PLC0415 - inside the guard on purpose

            status = main(sys.argv[1:])
        finally:
            # The command is over (done, failed or interrupted): a Ctrl-C from here on, while the line is
            # written or Python shuts down, changes nothing. One that lands before this line is caught below.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        from ._interrupts import report_interrupt  # noqa: PLC0415

        status = report_interrupt()
    sys.exit(status)
