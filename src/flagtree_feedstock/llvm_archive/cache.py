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

CHUNK = 1 << 20


def cache_dir(env: Mapping[str, str]) -> Path:
    """Where archives, packed folders and their inspections are kept: ~/.cache/flagtree-feedstock/..."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "flagtree-feedstock" / "llvm-archives"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


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

    Nothing half-written stays: the temporary file is removed on any failure.
    """
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".incoming-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            spooled = _Spooled(_HashingWriter(handle))
            yield spooled
        spooled.path = folder / name(spooled.sha256)
        Path(temporary).replace(spooled.path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
