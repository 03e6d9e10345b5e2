"""A file's digest, read in chunks: a package or an archive of a gigabyte is never read into memory whole."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import IO

CHUNK = 1 << 20


def file_digest(path: Path, algorithm: str = "sha256") -> bytes:
    """The ``algorithm`` (a :mod:`hashlib` name: ``sha256``, ``md5``) digest of the file at ``path``."""
    with path.open("rb") as handle:
        return stream_digest(handle, algorithm)


def stream_digest(handle: IO[bytes], algorithm: str = "sha256") -> bytes:
    """The ``algorithm`` digest of what is left to read of ``handle`` (a file opened by the caller)."""
    digest = hashlib.new(algorithm)
    while chunk := handle.read(CHUNK):
        digest.update(chunk)
    return digest.digest()
