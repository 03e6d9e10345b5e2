"""How a ``flagtree-feedstock`` command ends on a signal, and the steps a signal must not cut in half.

SIGINT (Ctrl-C), SIGTERM (a cancelled CI job, ``timeout``, systemd) and SIGHUP (a closed terminal or ssh
session) take one path, the doctor's (:mod:`flagtree_doctor.interrupts`): each is raised as a
:class:`KeyboardInterrupt` in the main thread, so every cleanup runs (during a build: the engine's worker and
everything it started are ended, the staging folder is removed, the packages finished before are kept and
indexed, and only then is the output folder's lock released), and the command ends with one line,
``flagtree-feedstock: interrupted`` (exit status 130) or ``flagtree-feedstock: terminated (SIGTERM)`` (143;
SIGHUP: 129). Writing a package into the output folder, indexing it and removing scratch folders take a
moment each; a signal that comes in meanwhile is held until that step is done (:func:`deferred_interrupts`),
so it never leaves a file half-written.
"""

from __future__ import annotations

from flagtree_doctor.interrupts import Interrupted, deferred_interrupts, report

PROG = "flagtree-feedstock"

__all__ = ["PROG", "Interrupted", "deferred_interrupts", "report_interrupt"]


def report_interrupt(interrupt: KeyboardInterrupt) -> int:
    """Print the one line for ``interrupt`` and return its exit status, 128 + the signal's number."""
    return report(PROG, interrupt)
