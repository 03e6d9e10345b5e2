"""Processes, as ``/proc`` shows them: which run, which belong to a session, and ending a session whole.

A pid alone does not name a process for long: the system gives it to a new process once the old one is gone
and reaped. With its start time (``/proc/PID/stat``, clock ticks after boot) it names one process for good,
so a pid recorded by one command (the output folder's lock file) can be checked by another.
A session's id is the pid of the process that made it (the engine's worker, :mod:`.build._worker`): the
system does not give that pid to a new process while any process of the session runs, not even when the
worker itself has ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from ._urls import shown_text

_PROC = Path("/proc")
# A command line is shown up to this many characters (the engine worker's holds a whole JSON document).
_COMMAND_CHARS = 160
# How long :func:`kill_escaped` waits for the processes it sent SIGSTOP to stop, and then SIGKILL to end (one in
# the kernel, in ``D``, takes a signal only when it is back).
_STOP_SECONDS = 2.0


@dataclass(frozen=True, kw_only=True)
class Process:
    """One process: its pid, its start time (which tells it from a later process with that pid), its
    command line as one line."""

    pid: int
    start: int
    command: str

    @classmethod
    def of(cls, pid: int) -> Process | None:
        """The process ``pid`` as it runs now; None when there is none (or only its exit status, a zombie)."""
        fields = _stat(pid)
        if fields is None:
            return None
        try:
            words = (_PROC / str(pid) / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            return None  # ended meanwhile
        # Its URLs shown without their secrets (a -c channel's password, token or signature), before it is cut.
        command = shown_text(" ".join(w.decode(errors="replace") for w in words).replace("\n", " "))
        if len(command) > _COMMAND_CHARS:
            command = command[: _COMMAND_CHARS - 3] + "..."
        return cls(pid=pid, start=int(fields[19]), command=command or "?")

    def alive(self) -> bool:
        """Whether this very process still runs (not a later one given the same pid)."""
        now = _stat(self.pid)
        return now is not None and int(now[19]) == self.start

    def describe(self) -> str:
        """``process PID (COMMAND)``, its command line's control characters escaped: a command line, or a
        record of one in a lock file, may hold terminal escapes, which must not reach a terminal raw."""
        return f"process {self.pid} ({shown(self.command)})"


def shown(text: str) -> str:
    """``text`` with every character that is not printable (escapes, newlines, other controls) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (the state first), or None when ``pid`` does
    not run (no such process, or a zombie)."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in {"Z", "X"} else fields


def session_members(session: int) -> list[int]:
    """The running (not zombie) processes of session ``session``."""
    members = []
    for entry in _PROC.glob("[0-9]*"):
        fields = _stat(int(entry.name))
        if fields is not None and int(fields[3]) == session:
            members.append(int(entry.name))
    return members


def descendants(root: int) -> list[int]:
    """The running processes below ``root``: its children, theirs, and so on, as ``/proc`` links them."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.glob("[0-9]*"):
        fields = _stat(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def started(pids: Collection[int]) -> dict[int, int]:
    """Each running process of ``pids`` with its start time (which tells it from a later one with its pid)."""
    found = {}
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            found[pid] = int(fields[19])
    return found


def with_environment_under(folder: Path) -> dict[int, int]:
    """The running processes whose environment (``/proc/PID/environ``, as it was when each started its program)
    has a variable whose value is a path inside ``folder``, with their start times. Processes of other users
    cannot be read, and are not among them."""
    inside = f"{folder}/".encode()
    found: dict[int, int] = {}
    for entry in _PROC.glob("[0-9]*"):
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(variable.partition(b"=")[2].startswith(inside) for variable in environment.split(b"\0")):
            found |= started([int(entry.name)])
    return found


def kill_escaped(seen: Mapping[int, int], *, session: int) -> None:
    """SIGKILL each process of ``seen`` (pid -> start time) that still runs outside ``session``, and every
    process below it: all are stopped first (SIGSTOP, round after round until no new one appears, each round
    once the last one's have stopped), so none forks a child that escapes the kill, then killed. Returns once
    they are gone (a SIGKILL is sent, not yet taken), or after :data:`_STOP_SECONDS`."""
    stopped: set[int] = set()
    roots = [
        pid for pid, start in started(seen).items() if seen[pid] == start and _session_of(pid) != session
    ]
    while new := {pid for root in roots for pid in [root, *descendants(root)]} - stopped:
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
        # A signal is sent, not yet taken: a process may fork once more before it stops.
        _wait_while(lambda: any(_running(pid) for pid in new))
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _wait_while(lambda: any(_stat(pid) is not None for pid in stopped))


def _wait_while(condition: Callable[[], bool]) -> None:
    """Return once ``condition`` is false, or after :data:`_STOP_SECONDS`."""
    deadline = time.monotonic() + _STOP_SECONDS
    while condition() and time.monotonic() < deadline:
        time.sleep(0.001)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs, not stopped (``T``) nor gone."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in {"T", "t"}


def _session_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[3]) if fields is not None else None


def end_descendants(root: int, *, grace: float, spare: Collection[int] = ()) -> None:
    """End every process below ``root`` but ``spare``, wherever it went (a session of its own, SIGTERM
    ignored): SIGTERM to each, then, once ``grace`` seconds have passed, SIGKILL to each until none is left.

    ``root`` must be a child subreaper (``PR_SET_CHILD_SUBREAPER``) that runs meanwhile: a process whose
    parent ends is then re-parented to it, not to init, so each round finds what the last one's kills left,
    and a process that forks as fast as it can is ended with the children it made. Returns once none runs
    (or, if one cannot be ended, after a second grace period).
    """
    signalled: set[int] = set()
    kill_from = time.monotonic() + grace
    while left := [pid for pid in descendants(root) if pid not in spare]:
        now = time.monotonic()
        if now > kill_from + grace:
            return
        for pid in left:
            if now >= kill_from or pid not in signalled:
                # Ended meanwhile, or not ours to signal (a setuid program): the others are ended all the same.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL if now >= kill_from else signal.SIGTERM)
                signalled.add(pid)
        time.sleep(0.02)


def end_session(session: int, *, grace: float, spare: int | None = None) -> None:
    """End every process of ``session`` but ``spare``, each signalled by its pid (one that moved to a process
    group of its own is still in the session): SIGTERM, then SIGKILL to those left after ``grace`` seconds.
    Returns once none runs (or, if one cannot be ended, after the second grace period)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        members = [pid for pid in session_members(session) if pid != spare]
        if not members:
            return
        for pid in members:
            # Ended meanwhile, or not ours to signal (a setuid program): the others are ended all the same.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not [pid for pid in session_members(session) if pid != spare]:
                return
            time.sleep(0.05)


def wait_for_idle_threads(*, timeout: float = 2.0) -> None:
    """Return once every other thread of this process sleeps (``S`` in ``/proc/self/task/*/stat``) on two looks
    in a row, or after ``timeout`` seconds.

    py-rattler's asyncio calls hand their result back while a tokio worker may still be finishing the task (on
    about every second ``index_fs``, one still runs): an interpreter that exits meanwhile (a SIGTERM held
    until the index was written, then delivered) can have that thread touch it as it is torn down.
    """
    me = str(threading.get_native_id())
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        busy = []
        for task in (_PROC / "self" / "task").iterdir():
            with contextlib.suppress(OSError, IndexError):
                if task.name != me and (task / "stat").read_text().rsplit(")", 1)[1].split()[0] not in {
                    "S",
                    "Z",
                    "X",
                }:
                    busy.append(task.name)
        quiet = 0 if busy else quiet + 1
        time.sleep(0.005)
