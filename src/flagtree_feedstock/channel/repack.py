"""Foreign packages repacked before the installer sees them: the installer gets only what the toolkit read.

A check beside the installer stays open to the next way the two read one file differently (issue 41: a third
``*.tar.zst`` entry of a ``.conda`` that rattler unpacks and the check never opened). So every package that
reaches rattler from outside (a channel folder, a remote channel, a build's build and host environments) reaches
it as a file the toolkit wrote itself: :func:`repacked` reads the original with the toolkit's reader
(:func:`flagtree_feedstock._archive.open_package`, which refuses what has two readings), writes the members it
read, and only those, with the toolkit's writer at :data:`LEVEL` into a new file of the same name and format,
each member's mode made normal (files 0644, or 0755 where any executable bit was set; folders 0755; symlinks
their own: nothing setuid, setgid, sticky, group- or world-writable reaches a package cache or a prefix), reads
that copy again with the same reader, whose members must be those written, one for one (else it is refused in
one line), makes the copy's record from that reading, and checks that copy whole (:func:`.package_check.check_package`: paths, links, ``info/``, entry points, named after
itself) before anyone uses it. The records handed to rattler point at the copy (its sha256, md5 and size).
docs/security.md argues the choice against checking rattler's own extraction.

The copies are cached by the rules they were made by, the original's sha256 and file name
(``<cache>/rules-<REPACK_RULES>/<sha256>/<file name>``, its record beside it as ``<file name>.json``): a package
is repacked once under one set of rules. A copy is written in a scratch folder of the cache named after its owner
(``.incoming-<pid>.<start>-...``, removed on any failure or signal, and by the next repack once its owner is
gone), as a whole entry folder (copy and record), checked there, and that folder is renamed into place: an entry
is whole or absent. What the record keeps besides the digests is what the border needs again without reading the
copy: the package's name, its link scripts and its activation scripts (:mod:`.link_scripts`). The key is the original's sha256 as hashed
before it is read: a file changed meanwhile is cached under its old digest, still a copy of what was read and
checked.

The cache proves an entry before it is used (:func:`cached`), because its record is what the border trusts
(a record that hides a link script lets that script run): every folder from the cache root down to the entry,
the copy and its record are opened without following a link (``O_NOFOLLOW``, each from its folder's
descriptor), each is owned by this user and writable by nobody else (checked with ``fstat`` on the open
descriptor), and the copy is hashed: its sha256, md5 and size must be its record's. So nobody but this user
(and root) can put or change an entry, and the path handed to the installer leads to what was checked. A cache
root or rules folder that fails is refused in one line (another user's folder, or one others may write in, is
not ours to trust, nor to clean), and so is one that is a link; a folder of yours that others may write in is
made yours alone first. A bad entry inside a sound cache (a wrong digest, a link, another's, a stray mode) is
not used: it is set aside and a fresh copy takes its place, as a copy cut short is.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import zip_longest
from pathlib import Path

from flagtree_feedstock._archive import INFO_BYTES, PackageMember, UnsafePackage, open_package
from flagtree_feedstock._archive.package_write import write_package
from flagtree_feedstock._archive.tar_stream import shown
from flagtree_feedstock._archive.tar_write import normal_mode
from flagtree_feedstock._digest import file_digest
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import OWNER, owner, owner_gone
from flagtree_feedstock.errors import ChannelError, FileAccessError

from .link_scripts import activation_scripts, link_scripts
from .package_check import check_package, refusals
from .package_reader import LINK, load_json

LOGGER = logging.getLogger(__name__)
# The zstd (.conda) or bzip2 (.tar.bz2) level a copy is written at: the fastest, since a copy is read once
# by the installer and kept only in a cache.
LEVEL = 1
# The version of the rules a copy is made by: the reader's refusals, the writer's form, the checks of the copy,
# the record's fields and what they mean. Bump it whenever one of them changes (a fixed refusal, a new field):
# each version has its own folder of the cache (``rules-<N>/``), so no copy made under older rules is used.
REPACK_RULES = 1
_RULES = f"rules-{REPACK_RULES}"
# A record is digests, a name and link scripts' paths: one larger was not written by repacked().
_RECORD_BYTES = 1 << 20
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# NONBLOCK: a FIFO planted as a file is refused (not a regular file), not waited on.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_INCOMING = ".incoming-"
_SET_ASIDE = ".set-aside-"
_ABANDONED = re.compile(rf"{re.escape(_INCOMING)}{OWNER}-.*")
# A record without one of them (written before it was added) is no entry: the copy is made again.
_RECORD_FIELDS = ("sha256", "md5", "size", "name", "link_scripts", "activation_scripts")
CHUNK = 1 << 20
INDEX = "info/index.json"
# The info files a copy's record is made from, read from the copy (each at most INFO_BYTES, the reader's bound).
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


class _BadEntry(Exception):
    """An entry of the cache that is not used, and why."""


def cached(original_sha256: str, file_name: str, cache: Path) -> Repacked | None:
    """The copy ``cache`` holds of the package ``file_name`` whose sha256 is ``original_sha256``, if whole and
    proven (module docstring); None when there is none, or it is not used. Raise
    :class:`flagtree_feedstock.errors.FileAccessError` when the cache itself is refused."""
    with _rules_folder(cache, make=False) as rules:
        return None if rules is None else _proven(rules, cache, original_sha256, file_name)


def _problem(status: os.stat_result) -> str | None:
    """What makes a file or folder of the cache, as ``fstat`` gives it, one this user cannot trust alone."""
    if status.st_uid != os.geteuid():
        return f"owned by uid {status.st_uid}, not by you (uid {os.geteuid()})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (mode {stat.S_IMODE(status.st_mode):04o})"
    return None


@contextlib.contextmanager
def _rules_folder(cache: Path, *, make: bool) -> Iterator[int | None]:
    """A descriptor of ``cache``'s folder for the current :data:`REPACK_RULES`, made when missing if ``make``
    (None when missing otherwise). The cache root and it are opened without following a link: either a link,
    not a folder or another user's is refused in one line; one of yours that others may write in is made
    writable by you alone before anything in it is read (what they may have put there is another's, or a link,
    and is not used)."""
    if make:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            cache.mkdir(mode=0o700)
    with contextlib.ExitStack() as stack:
        folder: int | None = None
        for name, shown in ((str(cache), cache), (_RULES, cache / _RULES)):
            if make and folder is not None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=folder)
            try:
                folder = os.open(name, _FOLDER, dir_fd=folder)
            except FileNotFoundError:
                if make:
                    raise
                yield None
                return
            except OSError as exc:
                if exc.errno not in {errno.ELOOP, errno.ENOTDIR}:
                    raise
                kind = "a symbolic link" if shown.is_symlink() else "not a folder"
                raise _refused(cache, shown, kind) from None
            stack.callback(os.close, folder)
            status = os.fstat(folder)
            if status.st_uid != os.geteuid():
                raise _refused(cache, shown, f"owned by uid {status.st_uid}, not by you (uid {os.geteuid()})")
            # Yours: made yours alone, and each entry is proven below.
            if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                os.fchmod(folder, stat.S_IMODE(status.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
                LOGGER.info("%s was writable by others: it is now writable by you alone", shown)
        yield folder


def _refused(cache: Path, folder: Path, problem: str) -> FileAccessError:
    where = " is" if folder == cache else f": its folder {folder} is"
    return FileAccessError(
        f"the cache of repacked packages {cache}{where} {problem}: a copy there could "
        "be put or changed by someone else, so none is used",
        fix=f"check who made {folder} and why, then remove it (it is made again, yours alone); or use another "
        "cache: --output-dir for a build, XDG_CACHE_HOME for channel install",
    )


def _proven(rules: int, cache: Path, digest: str, name: str) -> Repacked | None:
    """The entry ``digest``/``name`` of the rules folder ``rules`` (a descriptor) as :class:`Repacked`, once
    proven; None when it is missing or bad (a bad one is logged, and written again by :func:`repacked`)."""
    path = cache / _RULES / digest / name
    try:
        with contextlib.ExitStack() as stack:
            try:
                entry = os.open(digest, _FOLDER, dir_fd=rules)
            except FileNotFoundError:
                return None
            stack.callback(os.close, entry)
            _check(os.fstat(entry), "its folder", folder=True)
            record = _read_record(stack, entry, f"{name}.json")
            held = os.open(name, _FILE, dir_fd=entry)
            stack.callback(os.close, held)
            _check(os.fstat(held), "the copy")
            sha256, md5, size = _hashed(held)
    except _BadEntry as exc:
        LOGGER.warning("the cached copy %s is not used (%s): it is repacked again", path, exc)
        return None
    except OSError as exc:  # a link (ELOOP), a folder for a file, a file gone: not an entry to use
        LOGGER.warning("the cached copy %s is not used (%s): it is repacked again", path, exc.strerror or exc)
        return None
    if (
        not isinstance(record, dict)
        or any(key not in record for key in _RECORD_FIELDS)
        or (record["sha256"], record["md5"], record["size"]) != (sha256, md5, size)
    ):
        LOGGER.warning("the cached copy %s is not what its record says: it is repacked again", path)
        return None
    # What was proven: every folder on the way is this user's alone, so the path leads to what was checked.
    copy = path
    return Repacked(
        path=copy,
        sha256=str(record["sha256"]),
        md5=str(record["md5"]),
        size=size,
        name=str(record["name"]),
        link_scripts=tuple(str(p) for p in record["link_scripts"]),
        activation_scripts=tuple(str(p) for p in record["activation_scripts"]),
    )


def _check(status: os.stat_result, what: str, *, folder: bool = False) -> None:
    """Raise :class:`_BadEntry` naming ``what`` unless ``status`` (``fstat``'s) is this user's and writable by
    nobody else, and a folder (``folder``) or a regular file."""
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(status.st_mode):
        raise _BadEntry(f"{what} is not a {'folder' if folder else 'regular file'}")
    problem = _problem(status)
    if problem is not None:
        raise _BadEntry(f"{what} is {problem}")


def _read_record(stack: contextlib.ExitStack, entry: int, name: str) -> object:
    """The JSON of the record ``name`` in the entry folder ``entry`` (a descriptor), checked as :func:`_check`."""
    handle = stack.enter_context(os.fdopen(os.open(name, _FILE, dir_fd=entry), "rb"))
    _check(os.fstat(handle.fileno()), "its record")
    data = handle.read(_RECORD_BYTES + 1)
    if len(data) > _RECORD_BYTES:
        raise _BadEntry(f"its record is larger than {_RECORD_BYTES} bytes")
    try:
        return json.loads(data)
    except ValueError:
        raise _BadEntry("its record is not JSON") from None


def _hashed(descriptor: int) -> tuple[str, str, int]:
    """The sha256, md5 and size of what the open file ``descriptor`` holds, read from its start."""
    sha256, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    while chunk := os.pread(descriptor, CHUNK, size):
        sha256.update(chunk)
        md5.update(chunk)
        size += len(chunk)
    return sha256.hexdigest(), md5.hexdigest(), size


def repacked(
    original: Path, cache: Path, *, file_name: str | None = None, source: str | None = None
) -> Repacked:
    """The toolkit's own copy of the package at ``original`` (``file_name`` in its channel, its own name by
    default), from ``cache`` or written there now; raise :class:`flagtree_feedstock.errors.ChannelError`
    naming ``original`` (or ``source``, the URL it was downloaded from) when it is refused or damaged."""
    name = file_name or original.name
    if "/" in name or name.startswith("."):
        raise ChannelError(f"{name!r} ({original}) is not a package file name", fix="rename the package file")
    digest = file_digest(original).hex()
    found = cached(digest, name, cache)
    if found is not None:
        return found
    _make(cache)
    _remove_abandoned(cache)
    scratch = Path(tempfile.mkdtemp(prefix=f"{_INCOMING}{owner()}-", dir=cache))
    try:
        copy = scratch / digest / name
        copy.parent.mkdir()
        try:
            written = write_copy(original, copy, name=name, source=source)
        except ChannelError:
            check_package(original, source)  # the check's own refusal, where the original has one, says more
            raise
        # The record is made from the copy as written, read again as the installer will get it.
        package_name, paths = read_copy(copy, written, name=name, shown_as=original, source=source)
        check_package(copy, source, shown_as=original)  # every check, on what the installer will get
        record = Repacked(
            path=cache / _RULES / digest / name,
            sha256=file_digest(copy).hex(),
            md5=file_digest(copy, "md5").hex(),
            size=copy.stat().st_size,
            name=package_name,
            link_scripts=link_scripts(paths),
            activation_scripts=activation_scripts(paths),
        )
        fields = {k: v for k, v in asdict(record).items() if k in _RECORD_FIELDS}
        copy.with_name(f"{name}.json").write_text(json.dumps(fields), encoding="utf-8")
        record = _put_in_place(copy.parent, record, cache)
        LOGGER.debug("repacked %s into %s", original, record.path)
        return record
    finally:
        with deferred_interrupts():
            shutil.rmtree(scratch, ignore_errors=True)


def _make(cache: Path) -> None:
    """Make the cache and its folder for the current rules where missing (this user's alone), and check both."""
    with _rules_folder(cache, make=True):
        pass


def _put_in_place(entry: Path, record: Repacked, cache: Path) -> Repacked:
    """Rename the whole entry folder ``entry`` (copy and record) into the cache's rules folder; what was there by
    its name, not proven, is set aside first. A whole entry another process put there meanwhile is used as it
    is."""
    for path in (entry, entry / record.path.name, entry / f"{record.path.name}.json"):
        path.chmod(0o755 if path == entry else 0o644)  # its own whatever the umask: cached() checks modes
    digest = entry.name
    for _attempt in range(2):
        with _rules_folder(cache, make=False) as rules:
            assert rules is not None  # made before the copy was written; for mypy
            try:
                os.rename(entry, digest, dst_dir_fd=rules)
            except OSError as exc:
                if exc.errno not in {errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR}:
                    raise
            else:
                return record
            found = _proven(rules, cache, digest, record.path.name)
            if found is not None:
                return found
            _set_aside(rules, cache / _RULES, digest)
    raise ChannelError(
        f"the copy {record.path} could not be put into the cache: something else takes its place there",
        fix=f"check what else writes in {cache}, and run again",
    )


def _set_aside(rules: int, folder: Path, digest: str) -> None:
    """Move the bad entry ``digest`` of the rules folder ``rules`` (a descriptor of ``folder``, this user's
    alone) out of the way and remove it (a link is removed, never followed)."""
    aside = f"{_SET_ASIDE}{owner()}-{digest}-{os.urandom(4).hex()}"
    with contextlib.suppress(FileNotFoundError):
        os.rename(digest, aside, src_dir_fd=rules, dst_dir_fd=rules)
    try:
        is_folder = stat.S_ISDIR(os.stat(aside, dir_fd=rules, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return
    if is_folder:
        shutil.rmtree(folder / aside, ignore_errors=True)
    else:
        os.unlink(aside, dir_fd=rules)


def _remove_abandoned(cache: Path) -> None:
    """Remove the scratch folders of repacks whose process is gone (a SIGKILL leaves them)."""
    for path in cache.glob(f"{_INCOMING}*"):
        if owner_gone(_ABANDONED.fullmatch(path.name)):
            shutil.rmtree(path, ignore_errors=True)


def write_copy(original: Path, copy: Path, *, name: str, source: str | None) -> tuple[PackageMember, ...]:
    """Write the members of ``original`` (``name`` in its channel) that the toolkit's reader reads, and only
    those, into the new package ``copy``, at :data:`LEVEL`, each with its mode made normal
    (:func:`flagtree_feedstock._archive.tar_write.normal_mode`): the members as written. A refusal of the reader
    is one :class:`ChannelError` naming ``original`` (or ``source``)."""
    written: list[PackageMember] = []
    with (
        refusals(original, source),
        open_package(original, name) as package,
        write_package(copy, stem=package.stem, epoch=0, fmt=package.format, level=LEVEL) as out,
    ):
        payload = False
        for member in package:
            payload |= member.section == "pkg"
            if payload and member.section == "info":  # a .tar.bz2's (a .conda's info tar is read first)
                raise UnsafePackage(
                    f"member {shown(member.name)} of info/ comes after payload members: the copy has its "
                    "info/ first, as every conda-build since 3 writes it"
                )
            normal = replace(member, mode=normal_mode(member))
            written.append(normal)
            out.add(normal, iter(lambda: package.read(CHUNK), b""))
    return tuple(written)


def read_copy(
    copy: Path, written: Sequence[PackageMember], *, name: str, shown_as: Path, source: str | None
) -> tuple[str, tuple[str, ...]]:
    """The copy ``copy`` read again, by the same reader, as the installer will get it: the name its
    ``info/index.json`` gives, and the paths it would put into a prefix (every member's, and ``bin/`` of each
    noarch python entry point), from which its record is made. Its members must be ``written``, the members as
    read from the original and written: else one :class:`ChannelError` naming ``shown_as`` (or ``source``)."""
    read: list[PackageMember] = []
    kept: dict[str, bytes] = {}
    with refusals(shown_as, source), open_package(copy, name) as package:
        for member in package:
            read.append(member)
            if member.name in _KEPT and member.kind == "file":
                if member.size > INFO_BYTES:
                    raise UnsafePackage(
                        f"member {shown(member.name)} declares {member.size} bytes, above the {INFO_BYTES} an info "
                        "file may have"
                    )
                kept[member.name] = b"".join(iter(lambda: package.read(CHUNK), b""))
        difference = _first_difference(written, read)
        if difference is not None:
            raise UnsafePackage(f"its copy, read again, is not what was written: {difference}")
        index = load_json(INDEX, kept.get(INDEX, b"{}"))
        link = load_json(LINK, kept[LINK]) if LINK in kept else {}
    package_name = index.get("name") if isinstance(index, dict) else None
    noarch = link.get("noarch") if isinstance(link, dict) else None
    points = noarch.get("entry_points") if isinstance(noarch, dict) else None
    paths = [member.name for member in read]
    paths += [f"bin/{p.split('=', 1)[0].strip()}" for p in points or () if isinstance(p, str)]
    return str(package_name or ""), tuple(paths)


def _first_difference(written: Sequence[PackageMember], read: Sequence[PackageMember]) -> str | None:
    """Where the members ``read`` back first differ from those ``written``, said in words; None if nowhere."""
    for number, (wrote, got) in enumerate(zip_longest(written, read), start=1):
        if wrote != got:
            return f"member {number} was written as {_described(wrote)} and reads as {_described(got)}"
    return None


def _described(member: PackageMember | None) -> str:
    if member is None:
        return "nothing"
    target = f" to {shown(member.target)}" if member.target else ""
    return f"{shown(member.name)} ({member.kind}{target}, {member.size} bytes, mode {member.mode:04o})"
