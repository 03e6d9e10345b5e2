"""A built package landed in one streaming pass: read once, rewritten member by member, written once.

The engine's package (``.conda`` or ``.tar.bz2``, either engine's) is read by the archive layer's reader,
``info/`` first. Its records are rewritten in memory (they are small): the build machine's folders out of
``info/about.json`` and ``info/recipe/*`` (:mod:`.local_paths`), then, when the recipe declares
``context.source_date_epoch``, the engine's clock and folders out and the SBOM in (:mod:`.epoch_rewrite`).
Each payload file then streams through its rewrite (:mod:`.payload_rewrite`: the host prefix's placeholder, the
build folder, the ELF build-id from the content) into a spool file beside the package, hashed as it passes.
Only then are the ``RECORD`` files (which sort before the files they hash) and ``info/paths.json`` (which
lists every rewritten file's sha256) known, and the package is written, ``info/`` first, each tar sorted by
name, from the records and the spool (:func:`flagtree_feedstock._archive.package_write.write_package`,
compressed once, at the final levels).

Memory holds the records and one piece of one member, whatever the package's size; the spool holds the
payload uncompressed on disk. It is an unlinked temporary file: nothing of it is left after a failure, a
signal or even a SIGKILL; the package is replaced only once its new file is whole.

A recipe without ``source_date_epoch`` (the toolkit's toy recipes) keeps the engine's times, modes and
order; only its records are scrubbed, and it is compressed again at the final levels (the engine compresses
at its fastest, :data:`ENGINE_FORMATS`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from flagtree_feedstock._archive import INFO_BYTES, DamagedPackage, Package, PackageMember, open_package
from flagtree_feedstock._archive.package_write import write_package

from .engine_record import RATTLER_RECORD, engine_record
from .epoch_rewrite import (
    HAS_PREFIX,
    HASH_INPUT,
    INDEX,
    PATHS,
    SbomWriter,
    add_path,
    build_folders,
    canonical_prefix,
    final_packaging,
    finish_index,
    finish_paths,
    json_record,
    normal_mode,
    placeholders,
    restamp_records,
    source_date_epoch,
)
from .local_paths import recorded, scrub_record
from .payload_rewrite import (
    BUILD_FOLDER,
    ELF64_LE,
    TextSniffer,
    content_build_id,
    fix_record,
    is_record,
    replaced,
)
from .sbom import sbom_path

# What the engine is asked to write (its fastest level: the landing compresses once, at the final level).
ENGINE_FORMATS = {"conda": "conda:1", "tar.bz2": "tar-bz2:1"}
_PIECE = 1 << 20
# What of info/ is read into memory: the records the landing rewrites (the rest is spooled as it is).
_RECORDS = frozenset({INDEX, PATHS, HAS_PREFIX, HASH_INPUT})

# Progress: (what is done, bytes so far, bytes in all).
Progress = Callable[[str, int, int], None]


class _Spool:
    """The payload's members, rewritten, in an unlinked file beside the package: appended, read back."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.size = 0

    def append(self, pieces: Iterable[bytes]) -> tuple[int, int]:
        """``pieces`` written at the end (they may be read from this very spool); where they start, and their
        size."""
        start = self.size
        for piece in pieces:
            self.file.seek(self.size)
            self.file.write(piece)
            self.size += len(piece)
        return start, self.size - start

    def read_at(self, offset: int, size: int) -> bytes:
        self.file.seek(offset)
        return self.file.read(size)

    def write_at(self, offset: int, data: bytes) -> None:
        self.file.seek(offset)
        self.file.write(data)

    def pieces(self, offset: int, size: int) -> Iterator[bytes]:
        while size > 0:
            piece = self.read_at(offset, min(_PIECE, size))
            offset, size = offset + len(piece), size - len(piece)
            yield piece


@dataclass
class _Held:
    """A member to write: its header, and its data in memory (``data``) or in the spool (``at``)."""

    member: PackageMember
    data: bytes | None = None
    at: tuple[int, int] | None = None


@dataclass
class _Rules:
    """How the payload's files are rewritten, from the records: nothing for a recipe without an epoch."""

    epoch: int | None = None
    prefixes: dict[str, str] = field(default_factory=dict)  # path -> the host prefix it is relocated by
    folders: list[str] = field(default_factory=list)  # the build's host prefix and build folder


def _source_pieces(package: Package) -> Iterator[bytes]:
    while piece := package.read(_PIECE):
        yield piece


class _Landing:
    """One package's pass: the info records, then the payload into the spool, then the package written."""

    def __init__(self, spool: _Spool, folders: Sequence[Path], build_root: Path | None) -> None:
        self.spool = spool
        self.folders = folders
        self.build_root = build_root
        self.info: list[_Held] = []
        self.pkg: list[_Held] = []
        self.rules: _Rules | None = None
        self.files: dict[str, bytes] = {}  # the info records, by name
        self.changed: dict[str, tuple[bytes, int]] = {}  # payload file -> its new sha256 digest and size

    def take_info(self, member: PackageMember, package: Package) -> None:
        if self.rules is not None:
            raise DamagedPackage(
                f"{member.name} comes after the payload: not as either engine writes a package"
            )
        record = recorded(member.name) or member.name in _RECORDS
        if member.kind == "file" and member.size <= INFO_BYTES and record:
            data = b"".join(_source_pieces(package))
            if recorded(member.name):
                data = scrub_record(data, self.folders)
            self.files[member.name] = final_packaging(data) if member.name == RATTLER_RECORD else data
            self.info.append(_Held(member))
        else:
            self.info.append(_Held(member, at=self.spool.append(_source_pieces(package))))

    def _rules(self) -> _Rules:
        """The rules of the payload's rewrite, read from the records once ``info/`` is whole."""
        if self.rules is None:
            rendered = engine_record(self.files)
            self.rendered = rendered
            epoch = source_date_epoch(rendered)
            if epoch is None:
                self.rules = _Rules()
            else:
                paths = json.loads(self.files.get(PATHS) or b"{}")
                directories = (rendered.get("build_configuration") or {}).get("directories") or {}
                self.rules = _Rules(
                    epoch=epoch,
                    prefixes=placeholders(paths),
                    folders=build_folders(directories, self.build_root),
                )
        return self.rules

    def take_payload(self, member: PackageMember, package: Package) -> None:
        rules = self._rules()
        if member.kind != "file":
            self.pkg.append(_Held(member))
        elif rules.epoch is None:
            self.pkg.append(_Held(member, at=self.spool.append(_source_pieces(package))))
        else:
            self.pkg.append(self._rewritten(member, _source_pieces(package), rules))

    def _rewritten(self, member: PackageMember, source: Iterator[bytes], rules: _Rules) -> _Held:
        """A payload file through its rewrite into the spool (normalise.py), its new hash noted if it changed."""
        first = next(source, b"")
        sniffer = TextSniffer()
        sniffer.see(first)
        pieces: Iterable[bytes] = (first,)
        if len(first) < member.size and sniffer.text:  # undecided: the raw file first, then its rewrite
            pieces = self.spool.pieces(*self.spool.append(_chained(first, source, sniffer)))
        elif len(first) < member.size:
            pieces = _chained(first, source)
        text = sniffer.done()
        hits = [0]
        prefix = rules.prefixes.get(member.name)
        if prefix is not None and prefix != canonical_prefix(prefix):
            pieces = replaced(pieces, prefix.encode(), canonical_prefix(prefix).encode(), hits)
        for folder in rules.folders:
            new = BUILD_FOLDER if text else canonical_prefix(folder)
            pieces = replaced(pieces, folder.encode(), new.encode(), hits)
        offset, size = self.spool.append(pieces)
        changed = hits[0] > 0
        if self.spool.read_at(offset, len(ELF64_LE)) == ELF64_LE:
            found = content_build_id(lambda at, length: self.spool.read_at(offset + at, length), size)
            if found is not None and self.spool.read_at(offset + found[0], len(found[1])) != found[1]:
                self.spool.write_at(offset + found[0], found[1])
                changed = True
        if changed:  # hashed from the spool, where it just went (most files do not change)
            digest = hashlib.sha256()
            for piece in self.spool.pieces(offset, size):
                digest.update(piece)
            self.changed[member.name] = (digest.digest(), size)
        return _Held(replace(member, size=size), at=(offset, size))

    def finish(self, write_sbom: SbomWriter) -> int | None:
        """The records once the payload is read: RECORDs, paths.json, index.json, the engine's records, the
        SBOM; the epoch (None: a recipe without one, whose records are only scrubbed)."""
        rules = self._rules()
        if rules.epoch is None:
            return None
        epoch = rules.epoch
        names = {held.member.name for held in self.pkg if held.member.kind == "file"}
        for held in self.pkg:
            if is_record(held.member.name) and held.at is not None:
                data = self.spool.read_at(*held.at)
                fixed = fix_record(held.member.name, data, names, self.changed)
                if fixed != data:
                    held.data, held.at = fixed, None
                    held.member = replace(held.member, size=len(fixed))
                    self.changed[held.member.name] = (hashlib.sha256(fixed).digest(), len(fixed))
        paths = json.loads(self.files.get(PATHS) or b"{}")
        finish_paths(paths, {name: (digest.hex(), size) for name, (digest, size) in self.changed.items()})
        index = json.loads(self.files.get(INDEX) or b"{}")
        finish_index(index, epoch)
        restamp_records(self.files, str(index["name"]), epoch, rules.prefixes)
        document = write_sbom(index, self.rendered, epoch).encode("utf-8")
        where = sbom_path(str(index["name"]))
        add_path(paths, where, hashlib.sha256(document).hexdigest(), len(document))
        sbom = PackageMember(
            section="pkg", name=where, kind="file", size=len(document), target="", mode=0o644, mtime=epoch
        )
        self.pkg = [held for held in self.pkg if held.member.name != where] + [_Held(sbom, data=document)]
        self.files[INDEX], self.files[PATHS] = json_record(index), json_record(paths)
        return epoch

    def members(self, epoch: int | None) -> Iterator[tuple[PackageMember, Iterable[bytes]]]:
        """Every member to write with its data: ``info/`` then the payload, each sorted by name and stamped
        ``epoch`` (without one: as the engine wrote them)."""
        for held in (*_ordered(self.info, epoch), *_ordered(self.pkg, epoch)):
            member, data = held.member, held.data
            if data is None and held.at is None and member.name in self.files:
                data = self.files[member.name]
            if data is not None:
                member = replace(member, size=len(data))
            if epoch is not None:
                member = replace(member, mtime=epoch, mode=normal_mode(member.kind, member.mode))
            yield member, ((data,) if data is not None else self.spool.pieces(*held.at) if held.at else ())


def _ordered(held: list[_Held], epoch: int | None) -> list[_Held]:
    return sorted(held, key=lambda h: h.member.name) if epoch is not None else held


def _chained(first: bytes, rest: Iterable[bytes], sniffer: TextSniffer | None = None) -> Iterator[bytes]:
    yield first
    for piece in rest:
        if sniffer is not None:
            sniffer.see(piece)
        yield piece


def land_package(
    package: Path,
    *,
    folders: Sequence[Path],
    write_sbom: SbomWriter,
    build_root: Path | None = None,
    progress: Progress | None = None,
) -> None:
    """Land ``package`` (a ``.conda`` or a ``.tar.bz2`` the engine just wrote) in one pass, as the module
    says; ``folders``: the build machine's folders its records may name (:func:`.local_paths.local_folders`),
    ``build_root``: the engine's output folder (the staging folder), which its record names ``local`` by then.
    """
    with (
        tempfile.TemporaryFile(dir=package.parent, prefix=f".{package.name}.", suffix=".spool") as file,
        open_package(package) as source,
    ):
        landing = _Landing(_Spool(file), folders, build_root)
        total = package.stat().st_size
        for member in source:
            if member.section == "info":
                landing.take_info(member, source)
            else:
                landing.take_payload(member, source)
            if progress is not None:
                progress("read", min(source.position, total), total)
        epoch = landing.finish(write_sbom)
        members = list(landing.members(epoch))  # their headers, and where their data will be read from
        total, written = sum(member.size for member, _ in members), 0
        with write_package(package, stem=source.stem, epoch=epoch or 0) as writer:
            for member, data in members:
                writer.add(member, data)
                written += member.size
                if progress is not None:
                    progress("written", written, total)
