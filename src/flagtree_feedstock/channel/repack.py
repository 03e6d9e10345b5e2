"""Foreign packages repacked before the installer sees them: the installer gets only what the toolkit read.

A check beside the installer stays open to the next way the two read one file differently (issue 41: a third
``*.tar.zst`` entry of a ``.conda`` that rattler unpacks and the check never opened). So every package that
reaches rattler from outside (a channel folder, a remote channel, a build's build and host environments) reaches
it as a file the toolkit wrote itself: :func:`repacked` reads the original with the toolkit's reader
(:func:`flagtree_feedstock._archive.open_package`, which refuses what has two readings), writes the members it
read, and only those, with the toolkit's writer at :data:`LEVEL` into a new file of the same name and format,
and checks that copy whole (:func:`.folder.check_package`: paths, links, ``info/``, entry points, named after
itself) before anyone uses it. The records handed to rattler point at the copy (its sha256, md5 and size).
docs/security.md argues the choice against checking rattler's own extraction.

The copies are cached by the original's sha256 and file name (``<cache>/<sha256>/<file name>``, its record
beside it as ``<file name>.json``): a package is repacked once. A copy is written in a scratch folder of the
cache named after its owner (``.incoming-<pid>.<start>-...``, removed on any failure or signal, and by the next
repack once its owner is gone), checked there, and renamed into place, its record last: an entry with a record is
whole. What the record keeps besides the digests is what the border needs again without reading the copy: the
package's name, its link scripts and its activation scripts (:mod:`.link_scripts`). The key is the original's sha256 as hashed before
it is read: a file changed meanwhile is cached under its old digest, still a copy of what was read and checked.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from flagtree_feedstock._archive import INFO_BYTES, UnsafePackage, open_package
from flagtree_feedstock._archive.package_write import write_package
from flagtree_feedstock._archive.tar_stream import shown
from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import OWNER, owner, owner_gone
from flagtree_feedstock.errors import ChannelError

from .link_scripts import activation_scripts, link_scripts
from .package_reader import LINK, load_json

LOGGER = logging.getLogger(__name__)
# The zstd (.conda) or bzip2 (.tar.bz2) level a copy is written at: the fastest, since a copy is read once
# by the installer and kept only in a cache.
LEVEL = 1
_INCOMING = ".incoming-"
_ABANDONED = re.compile(rf"{re.escape(_INCOMING)}{OWNER}-.*")
# A record without one of them (written before it was added) is no entry: the copy is made again.
_RECORD_FIELDS = ("sha256", "md5", "size", "name", "link_scripts", "activation_scripts")
CHUNK = 1 << 20
INDEX = "info/index.json"
# The info files a copy's record is made from, kept as they pass (each at most INFO_BYTES, the reader's bound).
_KEPT = (INDEX, LINK)


@dataclass(frozen=True, kw_only=True)
class Repacked:
    """A package's copy, written by the toolkit: where it is, its digests and size, the package's name (its
    ``info/index.json``'s) and the paths it would put into a prefix that are link scripts, or activation
    scripts."""

    path: Path
    sha256: str
    md5: str
    size: int
    name: str
    link_scripts: tuple[str, ...]
    activation_scripts: tuple[str, ...]


def user_cache(env: Mapping[str, str]) -> Path:
    """Where ``channel install`` keeps its copies: ``$XDG_CACHE_HOME/flagtree-feedstock/repacked`` (else
    ``$HOME/.cache/...``)."""
    base = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
    return base / "flagtree-feedstock" / "repacked"


def cached(original_sha256: str, file_name: str, cache: Path) -> Repacked | None:
    """The copy ``cache`` holds of the package ``file_name`` whose sha256 is ``original_sha256``, if whole."""
    copy = cache / original_sha256 / file_name
    try:
        record = json.loads(copy.with_name(f"{file_name}.json").read_text(encoding="utf-8"))
        size = copy.stat().st_size
    except (OSError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or any(key not in record for key in _RECORD_FIELDS)
        or record["size"] != size
    ):
        return None
    return Repacked(
        path=copy,
        sha256=str(record["sha256"]),
        md5=str(record["md5"]),
        size=size,
        name=str(record["name"]),
        link_scripts=tuple(str(p) for p in record["link_scripts"]),
        activation_scripts=tuple(str(p) for p in record["activation_scripts"]),
    )


def repacked(
    original: Path, cache: Path, *, file_name: str | None = None, source: str | None = None
) -> Repacked:
    """The toolkit's own copy of the package at ``original`` (``file_name`` in its channel, its own name by
    default), from ``cache`` or written there now; raise :class:`flagtree_feedstock.errors.ChannelError`
    naming ``original`` (or ``source``, the URL it was downloaded from) when it is refused or damaged."""
    from .folder import check_package  # noqa: PLC0415 - folder.py hands its packages here

    name = file_name or original.name
    digest = file_digest(original).hex()
    found = cached(digest, name, cache)
    if found is not None:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(cache)
    scratch = Path(tempfile.mkdtemp(prefix=f"{_INCOMING}{owner()}-", dir=cache))
    try:
        copy = scratch / name
        try:
            package_name, scripts, activation = write_copy(original, copy, name=name, source=source)
        except ChannelError:
            check_package(original, source)  # the check's own refusal, where the original has one, says more
            raise
        check_package(copy, source, shown_as=original)  # every check, on what the installer will get
        record = Repacked(
            path=cache / digest / name,
            sha256=file_digest(copy).hex(),
            md5=file_digest(copy, "md5").hex(),
            size=copy.stat().st_size,
            name=package_name,
            link_scripts=scripts,
            activation_scripts=activation,
        )
        written = {k: v for k, v in asdict(record).items() if k in _RECORD_FIELDS}
        (scratch / "record.json").write_text(json.dumps(written), encoding="utf-8")
        with deferred_interrupts():
            record.path.parent.mkdir(exist_ok=True)
            copy.replace(record.path)
            (scratch / "record.json").replace(record.path.with_name(f"{name}.json"))
        LOGGER.debug("repacked %s into %s", original, record.path)
        return record
    finally:
        with deferred_interrupts():
            shutil.rmtree(scratch, ignore_errors=True)


def _remove_abandoned(cache: Path) -> None:
    """Remove the scratch folders of repacks whose process is gone (a SIGKILL leaves them)."""
    for path in cache.glob(f"{_INCOMING}*"):
        if owner_gone(_ABANDONED.fullmatch(path.name)):
            shutil.rmtree(path, ignore_errors=True)


def write_copy(
    original: Path, copy: Path, *, name: str, source: str | None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Write the members of ``original`` (``name`` in its channel) that the toolkit's reader reads, and only
    those, into the new package ``copy``, at :data:`LEVEL`: the name its ``info/index.json`` gives, and the
    paths it would put into a prefix that are link scripts (every member's, and ``bin/`` of each noarch python
    entry point), and those that are activation scripts. A refusal of the reader is one :class:`ChannelError` naming ``original`` (or ``source``)."""
    from .folder import refusals  # noqa: PLC0415 - folder.py hands its packages here

    paths: list[str] = []
    kept: dict[str, bytes] = {}
    with refusals(original, source), open_package(original, name) as package:
        with write_package(copy, stem=package.stem, epoch=0, fmt=package.format, level=LEVEL) as out:
            payload = False
            for member in package:
                payload |= member.section == "pkg"
                if payload and member.section == "info":  # a .tar.bz2's (a .conda's info tar is read first)
                    raise UnsafePackage(
                        f"member {shown(member.name)} of info/ comes after payload members: the copy has its "
                        "info/ first, as every conda-build since 3 writes it"
                    )
                paths.append(member.name)
                pieces = iter(lambda: package.read(CHUNK), b"")
                if member.name in _KEPT and member.kind == "file":
                    if member.size > INFO_BYTES:
                        raise UnsafePackage(
                            f"member {shown(member.name)} declares {member.size} bytes, above the {INFO_BYTES} an info "
                            "file may have"
                        )
                    kept[member.name] = b"".join(pieces)
                    pieces = iter((kept[member.name],))
                out.add(member, pieces)
        index = load_json(INDEX, kept.get(INDEX, b"{}"))
        link = load_json(LINK, kept[LINK]) if LINK in kept else {}
    package_name = index.get("name") if isinstance(index, dict) else None
    noarch = link.get("noarch") if isinstance(link, dict) else None
    points = noarch.get("entry_points") if isinstance(noarch, dict) else None
    paths += [f"bin/{p.split('=', 1)[0].strip()}" for p in points or () if isinstance(p, str)]
    return str(package_name or ""), link_scripts(paths), activation_scripts(paths)
