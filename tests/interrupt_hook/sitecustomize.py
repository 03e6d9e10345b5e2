"""Test hooks for real commands: a pause at a chosen moment for a real SIGINT, a recorded machine as this one, a peak memory.

Put this folder on ``PYTHONPATH`` and Python's ``site`` imports it at start-up. With ``FLAGTREE_TEST_PAUSE`` set
to ``EVENT:TEXT`` it adds an audit hook (``sys.addaudithook``): the first audit event named EVENT whose first
argument contains TEXT, or is TEXT for an import (``import:rich.console`` is an import statement of rich.console, as
``importlib.import_module`` raises no such event; ``open:.tmp`` the opening of a
temporary file, ``os.rename:`` any rename) creates the file ``FLAGTREE_TEST_READY`` and sleeps
``FLAGTREE_TEST_PAUSE_SECONDS`` (a bound on the tests' time scale, tests/_timing.py: the test sets it) inside the
operation, so the test's SIGINT lands there; the first signal that arrives (one the command holds back too, and
one that came before the pause began, once the wait was set up) ends the pause at once. A
KeyboardInterrupt raised in the sleep propagates out of the operation as one raised by the operation would.
``FLAGTREE_TEST_PAUSE=import:MODULE`` with ``FLAGTREE_TEST_PAUSE_SECONDS=0`` only marks a moment.
``return:MODULE.NAME`` pauses just *after* a call of that built-in function returns in the main thread
(``return:os.replace``: a file was just renamed, before the caller's next statement), through
``sys.setprofile``'s ``c_return`` event: a KeyboardInterrupt raised in that sleep comes out of the call as if
the call had raised it, after what it did is done: the moment between an operation and its bookkeeping.
Without ``FLAGTREE_TEST_PAUSE`` it does nothing; it is never installed outside the tests.

With ``FLAGTREE_TEST_NO_CGROUP`` set, the toolkit makes no cgroup for a build's worker, as on a machine that
does not let the user make one (``_cgroups.create`` returns None): the build is ended without one.

With ``FLAGTREE_TEST_MACHINE`` set to a recorded tree (tests/data/doctor/...), the doctor reads this machine's
``proc/`` and ``sys/`` from it, as ``--root`` does: ``flagtree-doctor --apply``, which ``--root`` refuses (another
machine's settings), is then run for a big.LITTLE machine on any host. The doctor's CPU reading is the one
``--root`` uses, tested on its own.

With ``FLAGTREE_TEST_PEAK`` naming a file, the process writes its own peak memory there as the interpreter exits
(any way but SIGKILL): ``VmHWM`` from ``/proc/self/status`` (kB), which counts only this process's pages, unlike
``ru_maxrss``, which a child inherits from its parent at fork (``tests/_peak_memory.py`` reads it).
"""

import os
import sys
import time
from pathlib import Path

_SPEC = os.environ.get("FLAGTREE_TEST_PAUSE", "")
if _SPEC:
    import contextlib
    import select
    import signal

    _EVENT, _, _TEXT = _SPEC.partition(":")
    _READY = os.environ["FLAGTREE_TEST_READY"]
    _SECONDS = float(os.environ["FLAGTREE_TEST_PAUSE_SECONDS"])
    _fired = []

    def _pause(event, args):
        subject = str(args[0] if args else "")
        if _fired or event != _EVENT or (subject != _TEXT if event == "import" else _TEXT not in subject):
            return
        _fired.append(event)
        with _woken_by_a_signal() as woken:  # before the test is told: its signal may come at once
            Path(_READY).write_text(f"{event} {args[0]}\n")
            woken(_SECONDS)

    @contextlib.contextmanager
    def _woken_by_a_signal():
        """A wait of some seconds that a signal ends: Python's C handler writes the signal's number to the
        wakeup fd before any Python handler runs, so a signal the command holds back ends the wait as one that
        raises does, and the test waits no longer than its signal takes. An ignored signal never arrives.
        Outside the main thread (no wakeup fd there) it is a plain sleep."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            old = signal.set_wakeup_fd(write)
        except ValueError:
            old = None
        try:
            if old is None:
                yield time.sleep
            else:
                yield lambda seconds: select.select([read], [], [], seconds) if seconds > 0 else None
        finally:
            if old is not None:
                signal.set_wakeup_fd(old)
            os.close(read)
            os.close(write)

    if _EVENT == "return":
        import importlib

        _module, _, _name = _TEXT.rpartition(".")
        _watched = getattr(importlib.import_module(_module), _name)

    def _after(frame, event, arg):
        if event == "c_return" and arg is _watched:
            sys.setprofile(None)
            _pause("return", (_TEXT,))

    if _EVENT == "return":
        sys.setprofile(_after)
    else:
        sys.addaudithook(_pause)

_MACHINE = os.environ.get("FLAGTREE_TEST_MACHINE", "")
if _MACHINE:
    from flagtree_doctor import model

    _from_root = model.System.from_root.__func__

    def _recorded(cls, root, env=None):
        return _from_root(cls, root or Path(_MACHINE), env)

    model.System.from_root = classmethod(_recorded)

_PEAK = os.environ.get("FLAGTREE_TEST_PEAK", "")
if _PEAK:
    import atexit

    def _write_peak():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                Path(_PEAK).write_text(line.split()[1] + "\n")

    atexit.register(_write_peak)

if os.environ.get("FLAGTREE_TEST_NO_CGROUP"):
    from flagtree_feedstock import _cgroups

    _cgroups.create = lambda: None
