"""A package file's ``info/index.json`` and ``info/about.json``, read without unpacking it.

A ``.conda`` file is a zip archive whose ``info-<name>.tar.zst`` holds ``info/``; a ``.tar.bz2`` holds
``info/`` among its members. anaconda.org's upload API is given both files' content (what rattler's upload,
and anaconda-client before it, read from the package).
"""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import IO

from flagtree_feedstock._engine import require
from flagtree_feedstock.errors import ChannelError

WANTED = ("info/index.json", "info/about.json")
# An info file larger than this is not a conda package's: refused rather than read into memory.
MAX_INFO_BYTES = 16 << 20


def package_info(package: Path) -> tuple[dict[str, object], dict[str, object]]:
    """``package``'s index.json and about.json (``{}`` where it has none); a damaged one is one error."""
    try:
        found = _from_conda(package) if package.name.endswith(".conda") else _from_tar(package, None)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, ValueError) as exc:
        raise _damaged(package, (str(exc).splitlines() or [type(exc).__name__])[0]) from None
    if "info/index.json" not in found:
        raise _damaged(package, "it holds no info/index.json")
    return found["info/index.json"], found.get("info/about.json", {})


def _from_conda(package: Path) -> dict[str, dict[str, object]]:
    zstandard = require("zstandard", "zstandard")
    with zipfile.ZipFile(package) as archive:
        name = next((n for n in archive.namelist() if n.startswith("info-") and n.endswith(".tar.zst")), None)
        if name is None:
            return {}
        with archive.open(name) as compressed:
            try:
                return _from_tar(package, zstandard.ZstdDecompressor().stream_reader(compressed))
            except zstandard.ZstdError as exc:
                raise ValueError(f"{name}: {exc}") from None


def _from_tar(package: Path, stream: IO[bytes] | None) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    with (
        tarfile.open(package, mode="r:bz2")
        if stream is None
        else tarfile.open(fileobj=stream, mode="r|")  # a zstd stream reads forward only
    ) as tar:
        for member in tar:
            if member.name not in WANTED or not member.isfile():
                continue
            if member.size > MAX_INFO_BYTES:
                raise ValueError(f"its {member.name} is {member.size} bytes")
            source = tar.extractfile(member)
            assert source is not None
            document = json.load(io.BytesIO(source.read()))
            if not isinstance(document, dict):
                raise ValueError(f"its {member.name} is not a JSON object")  # noqa: TRY004 - bad content
            found[member.name] = document
            if len(found) == len(WANTED):
                break
    return found


def _damaged(package: Path, reason: str) -> ChannelError:
    return ChannelError(
        f"{package} cannot be read for the upload ({reason}): it is not a whole conda package",
        fix="rebuild it (flagtree-feedstock build --output-dir DIR), or leave it out of the folder",
    )
