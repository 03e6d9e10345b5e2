"""How a command ends on a signal: SIGINT, SIGTERM and SIGHUP take one path.

A Ctrl-C (SIGINT), a cancelled CI job, ``timeout`` or systemd (SIGTERM), a closed terminal or ssh session
(SIGHUP): a console script's first step, :func:`catch_signals`, turns each into :class:`Interrupted`, a
:class:`KeyboardInterrupt` raised in the main thread, so every ``finally`` and ``except BaseException``
cleanup runs for the three as it does for Ctrl-C. The console script then prints one line (:func:`report`):
``<prog>: interrupted`` for SIGINT, what a user who pressed Ctrl-C expects to read, and
``<prog>: terminated (SIGTERM)`` or ``(SIGHUP)`` when something else ended the command, naming what did;
its exit status is 128 + the signal's number, as a shell reports a command that signal ended (130, 143, 129).

A signal that was ignored when the command started stays ignored (``nohup`` ignores SIGHUP; a background
job of a non-interactive shell, SIGINT). Once the first one is raised the three are ignored: the command is
already ending, and its cleanup, which is bounded, is not cut short. :func:`deferred_interrupts` holds them
while a step that must not be cut in two runs (a rename into place, an index written, a scratch folder
removed), and delivers the first one when the step is done.

This module imports only the standard library: the console scripts load it before anything else.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The command was ended by ``signum``, one of :data:`ENDING_SIGNALS`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def catch_signals() -> None:
    """From now on each of :data:`ENDING_SIGNALS` raises :class:`Interrupted`, except one ignored already."""
    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _end)


def _end(signum: int, frame: FrameType | None) -> NoReturn:
    ignore_signals()
    raise Interrupted(signum)


def ignore_signals() -> None:
    """Ignore :data:`ENDING_SIGNALS` from now on: the command is ending anyway."""
    for signum in ENDING_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def signal_number(interrupt: KeyboardInterrupt) -> int:
    """The signal that ended the command: a plain KeyboardInterrupt is Python's own for SIGINT."""
    return interrupt.signum if isinstance(interrupt, Interrupted) else signal.SIGINT


def report(prog: str, interrupt: KeyboardInterrupt) -> int:
    """Print the one line for ``interrupt`` on stderr and return the exit status, 128 + its signal.

    A terminal that hung up (SIGHUP) cannot show the line: it is lost then, and the status is still returned.
    """
    signum = signal_number(interrupt)
    what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
    with contextlib.suppress(OSError):
        print(f"{prog}: {what}", file=sys.stderr, flush=True)
    return 128 + signum


def run_console_script(prog: str, command: Callable[[], int]) -> NoReturn:
    """Exit with ``command()``'s status, or with the one line and status of a signal that ended it.

    ``command`` imports what it needs itself, so a signal while that loads ends the same way. Once it is
    over (done, failed or ended by a signal), a late signal changes nothing: it would end Python's shutdown
    and hide the status.
    """
    catch_signals()
    try:
        try:
            status = command()
        finally:
            ignore_signals()
    except KeyboardInterrupt as interrupt:
        status = report(prog, interrupt)
    sys.exit(status)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold :data:`ENDING_SIGNALS` while the block runs, then deliver the first that came in, if any.

    Only signals with a Python handler are held (the ones :func:`catch_signals` set, Python's own for
    SIGINT): an ignored signal stays ignored, a default one keeps its default action. On leaving, the handler
    each had is put back and the first signal held is handed to its handler, which raises
    :class:`Interrupted` (or, Python's own, :class:`KeyboardInterrupt`). Signal handlers belong to the main
    thread: elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    handlers: dict[int, Callable[[int, FrameType | None], object]] = {}
    for signum in ENDING_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            handlers[signum] = handler
            signal.signal(signum, hold)
    try:
        yield
    finally:
        for held, handler in handlers.items():
            signal.signal(held, handler)
        if received:
            handlers[received[0]](received[0], None)
