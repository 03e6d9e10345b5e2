"""Test hook for real commands: a real signal at the Nth moment of one function, to try every moment in turn.

Put this folder on ``PYTHONPATH`` and Python's ``site`` imports it at start-up. With ``FLAGTREE_TEST_SIGNAL_AT``
set to ``N:SIGNAL:MODULE.FUNCTION`` (``3:SIGTERM:flagtree_feedstock.recipe.pins.write_atomically``), it counts
the moments of each call of that function (and of everything it calls), and at the Nth sends
the process SIGNAL (``signal.raise_signal``: the handler runs at once, as a signal from outside would at that
point). A moment is either side of an operation:

- *before*: an audit event of an operation on files (``sys.addaudithook``): ``open``, ``os.link``,
  ``os.rename`` (which ``os.replace`` raises too), ``os.remove``, ``os.chmod``, ``tempfile.mkstemp``, ...; the
  exception the signal's handler raises comes out of the operation before it is done;
- *after*: the return of such an operation of ``os`` or of a file stream's method (``sys.setprofile``'s
  ``c_return``, the profile set only while the function runs: the module's name is swapped for a wrapper as
  it is imported): ``os.replace`` has renamed, ``os.open`` has created, ``write`` has written, ``close`` has
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
        if event == "c_call":
            _state["audited"] = False
        elif event == "c_return":
            name = getattr(arg, "__qualname__", "")
            if (_state["audited"] and getattr(arg, "__module__", None) == "posix") or name.startswith(
                _STREAMS
            ):
                _moment(f"after {name}")

    def _watched(function):
        """``function``, profiled while it runs: the profile costs the rest of the command nothing."""

        def watched(*args, **kwargs):
            if _state["inside"] is not None:  # a call within the call: already watched
                return function(*args, **kwargs)
            _state["inside"] = function
            sys.setprofile(_profile)
            try:
                return function(*args, **kwargs)
            finally:
                sys.setprofile(None)
                _state["inside"] = None

        return watched

    class _Wrapper:
        """Finds _MODULE with the finders after it, and once the module has run, puts ``_watched`` in place of
        _NAME, before any other module can take the name from it."""

        def find_spec(self, name, path, target=None):
            if name != _MODULE:
                return None
            for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
                spec = getattr(finder, "find_spec", lambda *_: None)(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                setattr(module, _NAME, _watched(getattr(module, _NAME)))

            spec.loader.exec_module = exec_module
            return spec

    sys.addaudithook(_before)
    sys.meta_path.insert(0, _Wrapper())
