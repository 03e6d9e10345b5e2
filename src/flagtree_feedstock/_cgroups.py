"""A cgroup v2 of a build's own, where the machine lets this process make one: every process the build starts
stays in it (leaving it takes write access to another cgroup), so ending the cgroup ends them all at once.

A process finds its cgroup v2 in ``/proc/self/cgroup`` (the ``0::`` line) and the cgroup2 file system in
``/proc/self/mountinfo`` (``/sys/fs/cgroup``, or ``/sys/fs/cgroup/unified`` on a hybrid layout). Making a
cgroup below one's own and moving a process into it takes write access there: root has it, and so does a user
whose service manager delegated that cgroup (systemd's ``Delegate=``); elsewhere :func:`create` returns None and
the build is ended without one (:mod:`.build._worker` says how). Ending one is a write to its ``cgroup.kill``,
which Linux has since 5.14: an older kernel's cgroup is not used either.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

from ._processes import Process

_PROC_SELF = Path("/proc/self")
# The name of each build's cgroup, below the toolkit's own: this prefix, the toolkit's pid and start time (which
# tell whether it still runs), a unique rest.
PREFIX = "flagtree-build-"


def create() -> Path | None:
    """A new, empty cgroup below this process's own; None where there is no cgroup v2 or no right to make one.

    The empty cgroups of toolkits that have ended are removed first: one whose toolkit and watchdog were both
    killed is left behind.
    """
    parent = _own()
    me = Process.of(os.getpid())
    if parent is None or me is None:
        return None
    for left in parent.glob(f"{PREFIX}*"):
        pid, _, start = left.name.removeprefix(PREFIX).partition("-")[0].partition(".")
        owner = Process(pid=int(pid), start=int(start), command="") if f"{pid}{start}".isdigit() else None
        if owner is not None and not owner.alive():
            with contextlib.suppress(OSError):  # a process still in it: it stays
                left.rmdir()
    try:
        cgroup = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{me.pid}.{me.start}-", dir=parent))
    except OSError:
        return None  # no write access there (a user's session), a read-only mount
    if not (cgroup / "cgroup.kill").exists():  # Linux before 5.14
        cgroup.rmdir()
        return None
    return cgroup


def join(cgroup: Path) -> bool:
    """Move this process into ``cgroup`` (its children to come follow it); whether it could."""
    try:
        (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")
    except OSError:
        return False  # not allowed to move out of its cgroup, or the cgroup is of a kind that takes none
    return True


def end(cgroup: Path, *, timeout: float = 10.0) -> None:
    """SIGKILL every process in ``cgroup``, wait until none is left (at most ``timeout`` seconds), remove it."""
    if not cgroup.is_dir():
        return
    with contextlib.suppress(OSError):  # removed meanwhile
        (cgroup / "cgroup.kill").write_text("1\n")
    deadline = time.monotonic() + timeout
    while _populated(cgroup) and time.monotonic() < deadline:
        time.sleep(0.01)
    with contextlib.suppress(OSError):  # one could not be ended: the cgroup stays, and names it
        cgroup.rmdir()


def _populated(cgroup: Path) -> bool:
    try:
        return "populated 1" in (cgroup / "cgroup.events").read_text()
    except OSError:
        return False


def _own() -> Path | None:
    """This process's cgroup v2 as a folder, or None (no cgroup2 file system mounted, or it is not in one)."""
    try:
        lines = (_PROC_SELF / "cgroup").read_text().splitlines()
        mounts = (_PROC_SELF / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    for mount in mounts:
        fields = mount.split()
        # The fields after the separator " - ": the file system's type first.
        after = fields[fields.index("-") + 1 :] if "-" in fields else []
        if after[:1] != ["cgroup2"] or own is None:
            continue
        root, point = fields[3], fields[4]
        inside = os.path.relpath(own, root)
        if inside.startswith(".."):
            continue  # a mount of another part of the tree
        folder = Path(point) / inside
        return folder if folder.is_dir() else None
    return None
