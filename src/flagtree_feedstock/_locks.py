"""A channel folder's lock: one command writes into it at a time, and one that waits says who holds it.

The lock is an ``flock`` on a small file: ``.<name>.lock`` beside the folder (where a build's staging folder
and package cache go too), or ``.flagtree-feedstock.lock`` inside it when the folder's parent cannot hold a
new file (a channel folder in a read-only place; no build can write there, it needs its staging folder
beside). The system releases an flock when the last process holding it ends, in any way: a killed command
never leaves the folder locked. A build's engine worker and its watchdog hold it with the toolkit
(:mod:`.build._worker`), so it is released only when they are gone too.

The file records who holds it: the command, and the engine worker it runs, each as a pid, a start time and a
command line (:class:`._processes.Process`). A command that has to wait names the process it waits for; a
build can tell that processes of an earlier build, whose command was killed, still run
(:meth:`FolderLock.left_running`).

The file is opened without following a symbolic link (a planted ``.<name>.lock`` link is refused, and what
it points to is never opened), must be a regular file, and is never truncated: the record is written over
the file's start, padded to the file's length, and only into a file this process created or one that holds
a lock record (or nothing); a file with other content, or longer than any record (:data:`MAX_RECORD`), is
refused, not overwritten, and never read whole. What a record says is shown with its control characters
escaped (:meth:`._processes.Process.describe`).

A lock file deleted or replaced while it is held does not let a second command in: after locking, the
descriptor must still be the file at its path (else it is opened again), and the folder itself is locked
too (made for that when it is missing, and removed again when nothing went in).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ._processes import Process, session_members
from ._urls import shown_text
from .errors import FileAccessError

LOGGER = logging.getLogger(__name__)
INSIDE = ".flagtree-feedstock.lock"
_HEADER = "flagtree-feedstock lock"
# What the lock file of flagtree-feedstock before the record (issue 23) held: `process <pid>`.
_OLD_RECORD = re.compile(r"process \d+")
_RECORD_LINE = re.compile(r"(?P<role>holder|worker) (?P<pid>\d+) (?P<start>\d+) (?P<command>.*)")
# A folder's parent that cannot hold a new file: the lock goes inside the folder.
_CANNOT_CREATE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
# The longest lock file read: a record is a few hundred bytes (a header and two lines of at most 160
# characters of command line), so a longer file is no lock file of ours, and is refused unread.
MAX_RECORD = 64 * 1024


def lock_path(folder: Path) -> Path:
    """Where the lock of ``folder`` is kept, when its parent can hold it: ``.<name>.lock`` beside it."""
    resolved = folder.resolve()
    return resolved.parent / f".{resolved.name}.lock"


@dataclass(kw_only=True)
class FolderLock:
    """The lock of ``folder``, held: its file and descriptor, and what the file said when it was taken."""

    folder: Path
    path: Path
    descriptor: int
    writable: bool
    # The folder's own descriptor, locked too: a deleted or replaced lock file cannot let a second command in.
    folder_descriptor: int | None = None
    # The record found when the lock was taken: the last holder's, and the engine worker it ran.
    previous: list[tuple[str, Process]] = field(default_factory=list)
    holder: Process | None = None

    def fileno(self) -> int:
        return self.descriptor

    def descriptors(self) -> list[int]:
        """Every descriptor that holds the lock (a process that inherits them all holds it too)."""
        return [self.descriptor, *([self.folder_descriptor] if self.folder_descriptor is not None else [])]

    def record_worker(self, pid: int) -> None:
        """Add the engine worker ``pid`` (the id of its session) to the record, after the holder."""
        worker = Process.of(pid)
        entries = [("holder", self.holder)] if self.holder is not None else []
        _write_record(self, [*entries, *([("worker", worker)] if worker is not None else [])])

    def left_running(self) -> list[Process]:
        """The processes of the last holder's engine worker session that still run.

        They outlived the command that started them (it was killed, and so was its watchdog), hold no lock
        and may still be building: in the staging folder and the package cache beside the folder.
        """
        return _left_running(self.previous)


@contextmanager
def folder_lock(folder: Path) -> Iterator[FolderLock]:
    """Hold ``folder``'s lock; while another process holds it, wait, naming that process."""
    lock = _locked_file(folder)
    made = not folder.exists()
    try:
        lock.folder_descriptor = _locked_folder(folder)
        lock.previous = _read_record(lock)
        if lock.writable:
            lock.holder = Process.of(os.getpid())
            # The workers of the last holder that still run stay named, so every later command sees them.
            still = [
                ("worker", p) for role, p in lock.previous if role == "worker" and _left_running([(role, p)])
            ]
            _write_record(lock, [*([("holder", lock.holder)] if lock.holder is not None else []), *still])
        yield lock
    finally:
        if made:
            # Made for the lock alone, and nothing went in: not left behind.
            with contextlib.suppress(OSError):
                folder.rmdir()
        # Closing, not LOCK_UN: an engine worker that inherited the descriptors still holds the lock until
        # it is gone (an unlock would release it for every holder at once).
        for descriptor in lock.descriptors():
            os.close(descriptor)


def _locked_file(folder: Path) -> FolderLock:
    """The lock file of ``folder``, flocked: waiting, naming its holder, while another process holds it.

    Locked, it must still be the file at its path: one deleted or replaced meanwhile (its holder may have
    held it while that happened) is let go, and the file now at the path is locked instead.
    """
    while True:
        lock = _open(folder)
        try:
            try:
                fcntl.flock(lock.descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                LOGGER.warning(
                    "waiting for %s to finish writing into %s (one command writes into a folder at a time)",
                    _holder(lock),
                    folder,
                )
                fcntl.flock(lock.descriptor, fcntl.LOCK_EX)
            if _still_at(lock.descriptor, lock.path):
                return lock
        except BaseException:
            os.close(lock.descriptor)
            raise
        os.close(lock.descriptor)


def _locked_folder(folder: Path) -> int:
    """A descriptor of ``folder`` (made when missing), flocked: waiting while another command holds it."""
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if not _flock_soon(descriptor):
                LOGGER.warning(
                    "waiting for another command to finish writing into %s (its lock file %s was deleted or "
                    "replaced while it held it)",
                    folder,
                    lock_path(folder),
                )
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            if _still_at(descriptor, folder, follow=True):
                return descriptor
        except BaseException:
            os.close(descriptor)
            raise
        os.close(descriptor)


def _flock_soon(descriptor: int, *, within: float = 1.0) -> bool:
    """Whether ``descriptor`` could be flocked within ``within`` seconds: the last holder closes the lock file
    and the folder one after the other, so the folder may stay held a moment after the file is free."""
    deadline = time.monotonic() + within
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        else:
            return True


def _still_at(descriptor: int, path: Path, *, follow: bool = False) -> bool:
    """Whether ``descriptor`` is still the file (or folder) at ``path``."""
    try:
        now = path.stat() if follow else path.lstat()
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _open(folder: Path) -> FolderLock:
    """Open (or create) the lock file of ``folder``: beside it, or inside it when the parent cannot hold it."""
    beside = lock_path(folder)
    beside.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _open_file(folder, beside)
    except OSError as exc:
        if exc.errno not in _CANNOT_CREATE or not folder.is_dir():
            raise
        reason = exc.strerror
    inside = folder.resolve() / INSIDE
    try:
        return _open_file(folder, inside)
    except OSError as exc:
        if exc.errno not in _CANNOT_CREATE:
            raise
        raise FileAccessError(
            f"cannot lock {folder}: no lock file can be made beside it ({beside}: {reason}) "
            f"or in it ({inside}: {exc.strerror})",
            fix=f"make {beside.parent} or {folder} writable for you",
        ) from None


def _open_file(folder: Path, path: Path) -> FolderLock:
    """Open ``path`` as a lock file: made here (0600) or an existing regular file; never through a link.

    The record names command lines, which only their user should read: a file this process may write is
    made, or set, mode 0600 (one an older version made 0644 too).

    An existing file this process may not write (another user's, or on a read-only file system) is opened
    for reading: that is enough to lock it, not to record the holder. A file that cannot be made raises
    the OSError (EACCES, EROFS, ...).
    """
    flags = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK  # O_NONBLOCK: a FIFO there must not hang the open
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno not in _CANNOT_CREATE or not os.path.lexists(path):
            raise
    else:
        return FolderLock(folder=folder, path=path, descriptor=descriptor, writable=True)
    writable = True
    try:
        try:
            descriptor = os.open(path, os.O_RDWR | flags)
        except OSError as exc:
            if exc.errno not in _CANNOT_CREATE:
                raise
            descriptor, writable = os.open(path, os.O_RDONLY | flags), False
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise FileAccessError(
                f"the lock file {path} is a symbolic link (to {path.readlink()}): a lock is never taken "
                "through a link",
                fix=f"remove {path} (flagtree-feedstock makes its lock file there), then rerun",
            ) from None
        if exc.errno == errno.EISDIR:
            raise _not_a_file(path) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise _not_a_file(path)
    if writable and os.fstat(descriptor).st_uid == os.getuid():
        os.fchmod(descriptor, 0o600)
    return FolderLock(folder=folder, path=path, descriptor=descriptor, writable=writable)


def _not_a_file(path: Path) -> FileAccessError:
    return FileAccessError(
        f"the lock file {path} is not a regular file",
        fix=f"move {path} away (flagtree-feedstock makes its lock file there), then rerun",
    )


def _read_record(lock: FolderLock) -> list[tuple[str, Process]]:
    """The holder and worker the lock file records; refuses a file that is not a lock file, unread when it is
    longer than any record."""
    size = os.fstat(lock.descriptor).st_size
    if size > MAX_RECORD:
        raise FileAccessError(
            f"{lock.path} is not a lock file of flagtree-feedstock: it is {size} bytes long, and a lock record "
            f"is never longer than {MAX_RECORD} (it is left as it is, unread)",
            fix=f"move {lock.path} away (flagtree-feedstock makes its lock file for {lock.folder} there), "
            "then rerun",
        )
    text = os.pread(lock.descriptor, MAX_RECORD, 0).decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0] != _HEADER and not (len(lines) == 1 and _OLD_RECORD.fullmatch(lines[0])):
        raise FileAccessError(
            f"{lock.path} is not a lock file of flagtree-feedstock (it holds other data, which is left as it is)",
            fix=f"move {lock.path} away (flagtree-feedstock makes its lock file for {lock.folder} there), "
            "then rerun",
        )
    found = []
    for line in lines[1:]:
        match = _RECORD_LINE.fullmatch(line)
        if match:
            # A record an older version wrote, or a planted one, may hold a channel's secret.
            command = shown_text(match["command"])
            process = Process(pid=int(match["pid"]), start=int(match["start"]), command=command)
            found.append((match["role"], process))
    return found


def _write_record(lock: FolderLock, entries: list[tuple[str, Process]]) -> None:
    """Write the record over the file's start, padded with spaces to its length: it is never truncated."""
    if not lock.writable:
        return
    lines = [_HEADER, *(f"{role} {p.pid} {p.start} {p.command}" for role, p in entries)]
    data = ("\n".join(lines) + "\n").encode()
    # The file was checked to be at most MAX_RECORD long as it was read (_read_record).
    os.pwrite(lock.descriptor, data.ljust(min(os.fstat(lock.descriptor).st_size, MAX_RECORD), b" "), 0)


def _left_running(record: list[tuple[str, Process]]) -> list[Process]:
    """The running processes of the engine worker sessions ``record`` names."""
    left = []
    for role, worker in record:
        if role != "worker":
            continue
        now = Process.of(worker.pid)
        if now is not None and now.start != worker.start:
            continue  # the pid, and so the session id, is another process's now: that session ended
        left += [p for pid in session_members(worker.pid) if (p := Process.of(pid)) is not None]
    return [p for p in left if p.pid != os.getpid()]


def _holder(lock: FolderLock) -> str:
    """The running process the lock file names: its holder, else a process of the worker it ran."""
    try:
        record = _read_record(lock)
    except FileAccessError:
        record = []
    for role, process in record:
        if role == "holder" and process.alive():
            return process.describe()
    running = _left_running(record)
    return running[0].describe() if running else "another process"
