"""Where two package files differ: the first member whose bytes differ, and its first differing bytes.

A ``.conda`` is a zip of tar.zst archives, a ``.tar.bz2`` one tar: both are opened down to their members, so a
difference is named as ``pkg-...tar.zst:lib/x.so`` with the offset and a few bytes of each side, rather than as
two different sha256. diffoscope (PyPI), where installed, is run on the two files for a fuller report.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import zstandard

CONTEXT = 16  # bytes shown from each side, from the first that differs


def _tar_members(data: bytes, prefix: str) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive.getmembers():
            # The header (name, mode, owner, mtime, link target) as well as the content.
            header = member.tobuf(format=archive.format)
            yield f"{prefix}{member.name} (tar header)", header
            handle = archive.extractfile(member) if member.isfile() else None
            if handle is not None:
                yield f"{prefix}{member.name}", handle.read()


def members(package: Path) -> Iterator[tuple[str, bytes]]:
    """Every member of ``package``, in archive order, as (name, bytes); nested archives opened."""
    if package.name.endswith(".tar.bz2"):
        yield from _tar_members(bz2.decompress(package.read_bytes()), "")
        return
    with zipfile.ZipFile(package) as archive:
        for info in archive.infolist():
            yield (
                f"{info.filename} (zip entry)",
                repr((info.date_time, info.external_attr, info.compress_type)).encode(),
            )
            data = archive.read(info)
            if info.filename.endswith(".tar.zst"):
                raw = zstandard.ZstdDecompressor().decompressobj().decompress(data)
                yield from _tar_members(raw, f"{info.filename}:")
            else:
                yield info.filename, data


def _describes_the_payload(name: str) -> bool:
    """Whether the member :func:`members` names ``name`` is a record of the package (``metadata.json``, the
    info tar, a member under ``info/``) rather than its payload."""
    inner = name.split(":", 1)[-1]
    return inner.startswith(("info/", "info-", "metadata.json"))


def first_difference(one: Path, other: Path) -> str:
    """One paragraph naming the first member that differs, a payload member before a record, and its first
    differing bytes; "" when the two files are the same bytes."""
    if one.read_bytes() == other.read_bytes():
        return ""
    left, right = dict(members(one)), dict(members(other))
    if list(left) != list(right):
        only = sorted(set(left) ^ set(right))
        if only:
            return f"{one.name}: members in one build only: {', '.join(only[:5])}"
        return f"{one.name}: the same members in another order"
    # A payload member first: the info/ records that describe it (paths.json's sha256, the SBOM), which the
    # writer puts first, differ only because it does; each group in archive order.
    for name, data in sorted(left.items(), key=lambda item: _describes_the_payload(item[0])):
        theirs = right[name]
        if data != theirs:
            at = next(
                (i for i, (a, b) in enumerate(zip(data, theirs, strict=False)) if a != b),
                min(len(data), len(theirs)),
            )
            return (
                f"{one.name}: {name} differs at byte {at} (sizes {len(data)}, {len(theirs)}):\n"
                f"  first:  {data[at : at + CONTEXT]!r}\n  second: {theirs[at : at + CONTEXT]!r}"
            )
    return f"{one.name}: the members are the same but the compressed archives differ (compression settings)"


def diffoscope_report(one: Path, other: Path) -> str:
    """diffoscope's text report of the two files, when diffoscope is installed; else ""."""
    diffoscope = shutil.which("diffoscope")
    if diffoscope is None:
        return ""
    done = subprocess.run(
        [diffoscope, "--text", "-", str(one), str(other)], capture_output=True, text=True, check=False
    )
    return done.stdout[:4000]


def main(argv: list[str]) -> int:
    """``python tests/_package_diff.py FIRST SECOND``: compare the packages of two channel folders (the
    scheduled `reproducible` workflow); print each package's sha256 or its first difference; 1 when any."""
    first, second = Path(argv[0]), Path(argv[1])
    status = 0
    for one in sorted(first.glob("*/*.conda")):
        other = second / one.parent.name / one.name
        if not other.is_file():
            print(f"{one.name}: the second build made no such package")
            status = 1
            continue
        found = first_difference(one, other)
        print(found or f"{one.name}: the same bytes, sha256 {hashlib.sha256(one.read_bytes()).hexdigest()}")
        if found:
            print(diffoscope_report(one, other))
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
