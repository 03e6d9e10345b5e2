"""Reading a file the doctor did not write: only a regular file, never more than a cap, never waiting.

A ``--root`` tree, an environment's activation folders and a package's files may hold anything: a FIFO (an
``open`` that waits for a writer forever), a device or a link to one (``/dev/zero`` reads without end), a
sparse file of gigabytes. :func:`read_bounded` opens without blocking (and, asked to, without following a
link), checks that what it opened is a regular file (the files of ``/proc`` and ``/sys`` are), and reads at
most ``limit`` bytes: a longer file is refused, never read whole.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# The most read of any one file the doctor inspects (a /proc/cpuinfo of 1024 cores is about 1 MiB).
MAX_FILE = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class RefusedFile(Exception):
    """``path`` is no regular file, or a link where none may be, or longer than the cap: ``reason`` says which."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def read_bounded(path: Path, limit: int = MAX_FILE, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises :class:`RefusedFile` for a link (with ``follow_symlinks=False``), anything but a regular file, or
    a file longer than ``limit``; an OSError when it cannot be opened or read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks and path.is_symlink():
            raise RefusedFile(path, f"is a symbolic link (to {path.readlink()})") from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(
                path, f"is {_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular file"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(descriptor, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise RefusedFile(path, f"is longer than {limit} bytes, more than any file of its kind")
        return b"".join(chunks)
    finally:
        os.close(descriptor)
