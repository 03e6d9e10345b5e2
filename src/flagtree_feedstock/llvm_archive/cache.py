"""The archive cache (``~/.cache/flagtree-feedstock/llvm-archives``): files written whole, and their sha256."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock.errors import ConfigurationError

CHUNK = 1 << 20
INCOMING = ".incoming-"  # a file being written: .incoming-<pid>-<random>.tmp


def cache_dir(env: Mapping[str, str]) -> Path:
    """Where archives, packed folders and their inspections are kept: ~/.cache/flagtree-feedstock/...

    The cache folder (``XDG_CACHE_HOME``, else ``$HOME/.cache``) is made only where its parent exists: a
    ``HOME`` that does not (``HOME=/nonexistent`` of a service account) is refused, never created.
    """
    base = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
    if not base.parent.is_dir():
        named = "XDG_CACHE_HOME" if env.get("XDG_CACHE_HOME") else "HOME"
        raise ConfigurationError(
            f"no place for the LLVM archive cache: {base.parent} ({named}) is not a folder",
            fix="set XDG_CACHE_HOME to a folder to keep it in (export XDG_CACHE_HOME=$PWD/.cache)",
        )
    return base / "flagtree-feedstock" / "llvm-archives"


def human_size(size: int) -> str:
    """``4.0 GiB``, ``512.0 MiB``: a size for a message."""
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size / (1 << 20):.1f} MiB"


def file_sha256(path: Path) -> str:
    return file_digest(path).hex()


class _HashingWriter:
    """A binary file being written, hashed as it is written (tarfile and gzip write through it)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


@dataclass
class _Spooled:
    writer: _HashingWriter
    path: Path | None = None

    @property
    def sha256(self) -> str:
        return self.writer.digest.hexdigest()


@contextmanager
def spool(folder: Path, name: Callable[[str], str]) -> Iterator[_Spooled]:
    """A new file in ``folder``, hashed as it is written and renamed to ``name(sha256)`` once complete.

    Nothing half-written stays: the temporary file is removed on any failure and any signal the process
    handles. One that a SIGKILL left (its name holds its process's id) is removed by the next spool there.
    """
    folder.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(folder)
    temporary: str | None = None
    try:
        # A signal is held from the file's creation until its name is kept here, so the removal below knows it.
        with deferred_interrupts():
            descriptor, temporary = tempfile.mkstemp(
                dir=folder, prefix=f"{INCOMING}{os.getpid()}-", suffix=".tmp"
            )
        with os.fdopen(descriptor, "wb") as handle:
            spooled = _Spooled(_HashingWriter(handle))
            yield spooled
        spooled.path = folder / name(spooled.sha256)
        Path(temporary).replace(spooled.path)
    except BaseException:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        raise


def _remove_abandoned(folder: Path) -> None:
    """Remove the files being written by processes that are gone (killed before they could clean up)."""
    for path in folder.glob(f"{INCOMING}*-*.tmp"):
        pid = path.name.removeprefix(INCOMING).split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
