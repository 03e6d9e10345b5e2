"""Folders a command will write in, checked before it starts: a folder (or one that can be made), writable;
and the owner a scratch folder's name carries, by which a later command knows what a killed one left.

Writability is tested by writing: a scratch file is made and removed. ``os.access`` answers for the real
user id and ignores what root may do, read-only mounts aside; a write is the one test that holds for every
user, ACL and mount.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from pathlib import Path

from ._interrupts import deferred_interrupts
from ._processes import Process
from .errors import ConfigurationError, FileAccessError

# A scratch name's owner (:func:`owner`), as a pattern: its pid and start time as the groups ``pid``, ``start``.
OWNER = r"(?P<pid>\d+)\.(?P<start>\d+)"


def check_folder(path: Path, *, option: str, beside: bool = False) -> None:
    """``path`` is a folder, or can be made as one, that this process can write in.

    ``beside``: the folder that holds ``path`` must be writable too (scratch folders are made next to it).
    A file where the folder or one of its parents should be is named as such. Nothing is created.
    """
    try:
        # A loop of links, a name too long, a parent not searchable: raised here, on any Python. A path not
        # there yet is made later; a file on the way is named below.
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            path.stat()
        if path.exists() and not path.is_dir():
            raise ConfigurationError(
                f"{option} {path} is a file, not a folder",
                fix=f"pass {option} a folder (it is made if missing), or move that file away",
            )
        resolved = path.resolve()
        ancestor = resolved.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
    except OSError as exc:  # a name too long, a loop of links: the file system refuses the path
        raise FileAccessError(
            f"{option} {path} cannot be used: {exc.strerror or exc}",
            fix="choose a shorter path" if exc.errno == errno.ENAMETOOLONG else f"choose another {option}",
        ) from None
    except RuntimeError:  # Python before 3.13: pathlib's resolve() meets a loop of symbolic links
        raise FileAccessError(
            f"{option} {path} cannot be used: it is a loop of symbolic links", fix=f"choose another {option}"
        ) from None
    if not ancestor.is_dir():
        raise ConfigurationError(
            f"{option} {path} cannot be made: {ancestor} is a file, not a folder",
            fix=f"pass {option} a path whose parents are folders",
        )
    exists = resolved.is_dir()
    folders = [resolved] if exists else []
    if beside or not exists:
        folders.append(ancestor)
    for folder in folders:
        try:
            probe_writable(folder)
        except OSError as exc:
            where = "" if folder == resolved else f" (it is made in {folder})" if not exists else ""
            raise FileAccessError(  # a permission, a read-only mount: the file system's answer, exit 10
                f"{option} {path}{where}: cannot write in {folder}: {exc.strerror or exc}",
                fix=f"choose another {option}, or make {folder} writable for you",
            ) from None


def probe_writable(folder: Path) -> None:
    """Make and remove a scratch file in ``folder``; raise the OSError that stops it."""
    with deferred_interrupts():  # made and removed whole: a signal in between would leave it in the folder
        descriptor, name = tempfile.mkstemp(prefix=".flagtree-write-test-", dir=folder)
        os.close(descriptor)
        Path(name).unlink()


def owner() -> str:
    """This process as a part of a scratch name: ``<pid>.<start time>`` (:class:`._processes.Process`)."""
    me = Process.of(os.getpid())
    return f"{os.getpid()}.{me.start if me is not None else 0}"


def owner_gone(match: re.Match[str] | None) -> bool:
    """Whether the owner a scratch name carries (matched by a pattern holding :data:`OWNER`) no longer runs."""
    if match is None:
        return False  # no owner in the name (not ours, or a flagtree-feedstock before names carried it)
    return not Process(pid=int(match["pid"]), start=int(match["start"]), command="").alive()
