"""Ctrl-C: what the CLI prints for it, and the steps it must not cut in half.

A Ctrl-C ends any command with one line, ``flagtree-feedstock: interrupted``, and exit status 130 (128 +
SIGINT, what a shell reports for a command that SIGINT ended). Writing a package into the output folder,
indexing it and removing scratch folders take a moment each; an interrupt that comes in meanwhile is held
until that step is done, so it never leaves a file half-written.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

PROG = "flagtree-feedstock"
EXIT_INTERRUPTED = 130


def report_interrupt() -> int:
    """Print the one line for an interrupt and return its exit status; a second Ctrl-C is ignored now."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"{PROG}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT while the block runs, then raise :class:`KeyboardInterrupt` if one came in.

    Signal handlers belong to the main thread: elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
        if received:
            raise KeyboardInterrupt
