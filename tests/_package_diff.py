"""Where two package files differ: the first member whose bytes differ, and its first differing bytes.

A ``.conda`` is a zip of tar.zst archives, a ``.tar.bz2`` one tar: both are opened down to their members, so a
difference is named as ``pkg-...tar.zst:lib/x.so`` with the offset and a few bytes of each side, rather than as
two different sha256. diffoscope (PyPI), where installed, is run on the two files for a fuller report.
"""

from __future__ import annotations

import bz2
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Collection, Iterator
from pathlib import Path

import zstandard

CONTEXT = 16  # bytes shown from each side, from the first that differs
# What still differs between two builds in different folders (docs/building.md, "Reproducible packages"):
# the .pyc files the engine compiles in the host prefix, whose path (its length with it) is in each code
# object, and so their sha256 in info/paths.json. The checks name every other difference.
KNOWN_REMAINING = (".pyc",)


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


def differing_members(one: Path, other: Path) -> list[str]:
    """The names of the members whose bytes differ between the two packages (both sides' members)."""
    left, right = dict(members(one)), dict(members(other))
    return sorted(name for name in set(left) | set(right) if left.get(name) != right.get(name))


def _same_paths_but_pyc(one: Path, other: Path) -> bool:
    """The two packages' info/paths.json list the same files the same way, but for the .pyc files' hashes."""

    def listed(package: Path) -> list[dict[str, object]]:
        (data,) = [d for name, d in members(package) if name.endswith(":info/paths.json")]
        entries = json.loads(data)["paths"]
        return [
            {k: v for k, v in e.items() if not str(e["_path"]).endswith(KNOWN_REMAINING) or k == "_path"}
            for e in entries
        ]

    return listed(one) == listed(other)


def unexplained(one: Path, other: Path) -> list[str]:
    """The members that differ for none of the reasons of :data:`KNOWN_REMAINING`."""
    found = []
    for name in differing_members(one, other):
        bare = name.removesuffix(" (tar header)")
        if bare.endswith(KNOWN_REMAINING) or (
            bare.endswith("info/paths.json") and _same_paths_but_pyc(one, other)
        ):
            continue
        found.append(name)
    return found


def first_difference(one: Path, other: Path, among: Collection[str] | None = None) -> str:
    """One paragraph naming the first member that differs (of ``among``, when given) and its first differing
    bytes; "" when the two files are the same bytes."""
    if one.read_bytes() == other.read_bytes():
        return ""
    left, right = dict(members(one)), dict(members(other))
    if list(left) != list(right):
        only = sorted(set(left) ^ set(right))
        if only:
            return f"{one.name}: members in one build only: {', '.join(only[:5])}"
        return f"{one.name}: the same members in another order"
    for name, data in left.items():
        theirs = right[name]
        if data != theirs and (among is None or name in among):
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
    scheduled `reproducible` workflow); print each package's first unexplained difference; 1 when any."""
    first, second = Path(argv[0]), Path(argv[1])
    status = 0
    for one in sorted(first.glob("*/*.conda")):
        other = second / one.parent.name / one.name
        if not other.is_file():
            print(f"{one.name}: the second build made no such package")
            status = 1
            continue
        found = unexplained(one, other)
        same = "same bytes" if one.read_bytes() == other.read_bytes() else "same but for KNOWN_REMAINING"
        print(f"{one.name}: {first_difference(one, other, among=found) if found else same}")
        if found:
            print(diffoscope_report(one, other))
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
