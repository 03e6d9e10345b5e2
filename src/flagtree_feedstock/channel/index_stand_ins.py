"""A channel indexed by py-rattler from stand-ins of its packages: each one's ``info/`` alone, then its own
digests put back. Why: py-rattler's indexer holds every package it reads in memory twice.

py-rattler 0.28's indexer (``rattler.index.index_fs``) reads each package it indexes into memory whole and
then copies its bytes (its ``max_parallel`` is "the maximum number of packages to process in-memory
simultaneously"): indexing a 200 MB ``.conda`` took 430 MB, a 410 MB one 830 MB, so the toolkit, whose
landing holds a few pieces of a package whatever its size, peaked at twice its largest package
(docs/testing.md, "Landing a package: the cost of size"). What the indexer takes from a package is its
``info/index.json`` and ``info/run_exports.json`` and the file's sha256, md5 and size. So:

1. :func:`stand_in_channel` makes a scratch channel with the same subdirs, each with the channel's own
   ``repodata.json`` (the indexer keeps each package's first-indexed time from it, by file name), and
   :func:`stand_in_for` puts in it, under each package's file name, a stand-in: the package's ``info/`` members as they are, in its format,
   with no payload, written by the archive layer's writer (:mod:`flagtree_feedstock._archive.package_write`);
2. the indexer indexes the scratch channel, reading kilobytes;
3. :func:`with_package_digests` puts each package's own sha256, md5 and size (read in pieces,
   :func:`file_digests`) in place of its stand-in's in the repodata it wrote, and that goes into the channel;
4. the indexer runs on the channel itself, where every package is already listed: it reads none, and writes
   the repodata in its own form.

``tests/test_index_stand_ins.py`` checks that the result is byte for byte what the indexer writes from the
packages themselves, and ``tests/test_landing.py`` that landing and indexing a package four times larger
takes no more memory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flagtree_feedstock._archive import Package, open_package
from flagtree_feedstock._archive.package_write import write_package
from flagtree_feedstock.errors import ChannelError

REPODATA = "repodata.json"
_PIECE = 1 << 20


@dataclass(frozen=True)
class FileDigests:
    """What a channel's index says of a package's file: its sha256 and md5 (hex) and its size."""

    sha256: str
    md5: str
    size: int


def file_digests(path: Path) -> FileDigests:
    """The digests of the file at ``path``, read once, in pieces."""
    sha256, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with path.open("rb") as handle:
        while piece := handle.read(_PIECE):
            sha256.update(piece)
            md5.update(piece)
            size += len(piece)
    return FileDigests(sha256.hexdigest(), md5.hexdigest(), size)


def _pieces(package: Package) -> Iterator[bytes]:
    while piece := package.read(_PIECE):
        yield piece


def write_stand_in(package: Path, stand_in: Path) -> None:
    """``stand_in``: the package ``package`` with its ``info/`` members only, as they are, in its format.

    Read by the archive layer's reader, which refuses a damaged or ambiguous package (``DamagedPackage``). A
    ``.conda``'s info tar comes first, so its payload is not read; a ``.tar.bz2`` is read to its end (every
    writer puts ``info/`` first there, but the format does not require it)."""
    with (
        open_package(package) as source,
        write_package(stand_in, stem=source.stem, epoch=0, fmt=source.format, level=1) as writer,
    ):
        for member in source:
            if member.section == "info":
                writer.add(member, _pieces(source))
            elif source.format == "conda":
                break


@dataclass(frozen=True)
class StandIn:
    """A package of the channel and its stand-in, with the digests of each."""

    package: Path
    path: Path
    own: FileDigests
    stand_in: FileDigests


def stand_in_channel(channel_dir: Path, scratch: Path) -> None:
    """``scratch`` made a channel like ``channel_dir`` before its stand-ins go in: each of its folders, with
    its ``repodata.json`` if it has one."""
    for folder in channel_dir.iterdir():
        if folder.is_dir():
            (scratch / folder.name).mkdir()
            if (folder / REPODATA).is_file():
                shutil.copyfile(folder / REPODATA, scratch / folder.name / REPODATA)


def stand_in_for(package: Path, scratch: Path) -> StandIn:
    """The stand-in of ``package`` (a file of a channel's subdir) in the channel ``scratch``, at its subdir
    and file name (:func:`write_stand_in`), with the digests of each."""
    path = scratch / package.parent.name / package.name
    write_stand_in(package, path)
    return StandIn(package, path, file_digests(package), file_digests(path))


def with_package_digests(repodata: bytes, stand_ins: Mapping[str, StandIn], where: Path) -> bytes:
    """``repodata`` (the indexer's, for the stand-ins of one subdir, ``stand_ins`` by file name) with each
    package's own digests in place of its stand-in's, wherever the indexer put its record (a record is an
    object keyed by the file name). ``where`` names the subdir in the error raised when a stand-in's digest is
    left: a layout of the indexer's this does not know."""
    document = json.loads(repodata)

    def fix(node: Any) -> None:  # noqa: ANN401 - JSON
        if isinstance(node, dict):
            for key, value in node.items():
                stand_in = stand_ins.get(key)
                if stand_in is not None and isinstance(value, dict) and "sha256" in value:
                    value.update(sha256=stand_in.own.sha256, md5=stand_in.own.md5, size=stand_in.own.size)
                else:
                    fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(document)
    fixed = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    for name, stand_in in stand_ins.items():
        if stand_in.stand_in.sha256.encode() in fixed:
            raise ChannelError(
                f"py-rattler's indexer recorded {where / name} where the toolkit does not look for it: its index "
                "would give the sha256 of a stand-in, not of the package",
                fix="report it (flagtree-feedstock's channel/index_stand_ins.py does not know this repodata "
                "layout); index the channel with rattler-index meanwhile",
            )
    return fixed
