"""Test hook for tests/test_doctor_interrupts.py: pause a real command at a chosen moment for a real SIGINT.

Put this folder on ``PYTHONPATH`` and Python's ``site`` imports it at start-up. With ``FLAGTREE_TEST_PAUSE`` set
to ``EVENT:TEXT`` it adds an audit hook (``sys.addaudithook``): the first audit event named EVENT whose first
argument contains TEXT (``import:rich.console`` is an import statement of rich.console, as
``importlib.import_module`` raises no such event; ``open:.tmp`` the opening of a
temporary file, ``os.rename:`` any rename) creates the file ``FLAGTREE_TEST_READY`` and sleeps
``FLAGTREE_TEST_PAUSE_SECONDS`` (default 30) inside the operation, so the test's SIGINT lands there. A
KeyboardInterrupt raised in the sleep propagates out of the operation as one raised by the operation would.
``FLAGTREE_TEST_PAUSE=import:MODULE`` with ``FLAGTREE_TEST_PAUSE_SECONDS=0`` only marks a moment.
``return:MODULE.NAME`` pauses just *after* a call of that built-in function returns in the main thread
(``return:os.replace``: a file was just renamed, before the caller's next statement), through
``sys.setprofile``'s ``c_return`` event: a KeyboardInterrupt raised in that sleep comes out of the call as if
the call had raised it, after what it did is done: the moment between an operation and its bookkeeping.
Without ``FLAGTREE_TEST_PAUSE`` it does nothing; it is never installed outside the tests.
"""

import os
import sys
import time
from pathlib import Path

_SPEC = os.environ.get("FLAGTREE_TEST_PAUSE", "")
if _SPEC:
    _EVENT, _, _TEXT = _SPEC.partition(":")
    _READY = os.environ["FLAGTREE_TEST_READY"]
    _SECONDS = float(os.environ.get("FLAGTREE_TEST_PAUSE_SECONDS", "30"))
    _fired = []

    def _pause(event, args):
        if _fired or event != _EVENT or _TEXT not in str(args[0] if args else ""):
            return
        _fired.append(event)
        Path(_READY).write_text(f"{event} {args[0]}\n")
        time.sleep(_SECONDS)

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
