"""Test hook for real commands: a real signal at the Nth moment of one function, to try every moment in turn.

Put this folder on ``PYTHONPATH`` and Python's ``site`` imports it at start-up. With ``FLAGTREE_TEST_SIGNAL_AT``
set to ``N:SIGNAL:MODULE.FUNCTION`` (``3:SIGTERM:flagtree_feedstock.recipe.pins.write_atomically``), it counts
the moments of each call of that function in the main thread (and of everything it calls), and at the Nth sends
the process SIGNAL (``signal.raise_signal``: the handler runs at once, as a signal from outside would at that
point). A moment is either side of an operation:

- *before*: an audit event of an operation on files (``sys.addaudithook``): ``open``, ``os.link``,
  ``os.rename`` (which ``os.replace`` raises too), ``os.remove``, ``os.chmod``, ``tempfile.mkstemp``, ...; the
  exception the signal's handler raises comes out of the operation before it is done;
- *after*: the return of such an operation of ``os`` or of a file stream's method (``sys.setprofile``'s
  ``c_return``): ``os.replace`` has renamed, ``os.open`` has created, ``write`` has written, ``close`` has
  flushed, and the caller has not yet run its next statement.

At the Nth moment it first writes what that moment is to the file ``FLAGTREE_TEST_SIGNAL_MARK``; a run that
leaves no such file had fewer than N moments, so a test raises N from 1 until a run completes untouched. Without
``FLAGTREE_TEST_SIGNAL_AT`` it does nothing; it is never installed outside the tests.
"""

import os
import signal
import sys
from pathlib import Path

_SPEC = os.environ.get("FLAGTREE_TEST_SIGNAL_AT", "")
if _SPEC:
    _AT, _SIGNAL, _FUNCTION = _SPEC.split(":", 2)
    _MODULE, _, _NAME = _FUNCTION.rpartition(".")
    _FILE = _MODULE.replace(".", "/") + ".py"
    _MARK = Path(os.environ["FLAGTREE_TEST_SIGNAL_MARK"])
    _state = {"left": int(_AT), "inside": None, "done": False, "audited": False}

    def _moment(what):
        if _state["done"] or _state["inside"] is None:
            return
        _state["left"] -= 1
        if _state["left"]:
            return
        _state["done"] = True
        sys.setprofile(None)
        _MARK.write_text(f"{what}\n")
        signal.raise_signal(getattr(signal, _SIGNAL))

    # The audit events of operations on files, and the built-ins that change a file (os's, a stream's).
    _EVENTS = ("open", "os.", "shutil.", "tempfile.")
    _STREAMS = ("TextIOWrapper.", "BufferedWriter.", "FileIO.")

    def _before(event, args):
        if event.startswith(_EVENTS):
            _state["audited"] = True
            _moment(f"before {event} {args[0] if args else ''}")

    def _profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and _state["inside"] is None:
            if code.co_name == _NAME and code.co_filename.endswith(_FILE):
                _state["inside"] = frame
        elif event == "return" and frame is _state["inside"]:
            _state["inside"] = None
        elif event == "c_call":
            _state["audited"] = False
        elif event == "c_return":
            name = getattr(arg, "__qualname__", "")
            if (_state["audited"] and getattr(arg, "__module__", None) == "posix") or name.startswith(
                _STREAMS
            ):
                _moment(f"after {name}")

    sys.addaudithook(_before)
    sys.setprofile(_profile)
