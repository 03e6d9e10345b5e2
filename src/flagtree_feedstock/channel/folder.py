"""Local channel folders: stage, publish, index (py-rattler) and smoke-install from ``file://``."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from flagtree_feedstock._engine import require
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._foreign_text import FIELD_CHARS, bounded
from flagtree_feedstock._http import Timeouts
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import check_folder, probe_writable
from flagtree_feedstock._processes import wait_for_idle_threads
from flagtree_feedstock.errors import (
    ChannelError,
    ConfigurationError,
    DependencyError,
    FeedstockError,
    FileAccessError,
)
from flagtree_feedstock.platforms import PlatformName

from .credentials import EngineChannels, split_credentials, with_own_credentials
from .index_relay import TIMEOUTS, serving
from .index_stand_ins import REPODATA, stand_in_channel, stand_in_for, with_package_digests
from .link_scripts import NONE_ALLOWED, LinkScriptPolicy
from .package_reader import DamagedPackage, UnsafePackage, load_json, read_package
from .remote_packages import use_repacked_copies
from .repack import user_cache

LOGGER = logging.getLogger(__name__)
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
# The member of a package that names it (name, version, build) and that every index is made from.
INDEX = "info/index.json"
_NAME_MAX = 255  # bytes of one file name, on every file system a channel lives on

# What a linux-aarch64 (or linux-64) machine of the supported floor offers the solver: glibc 2.17 is
# conda-forge's `c_stdlib_version` for linux-aarch64 (conda-forge-pinning), and the archspec names the
# CPU family. Used only when the target is not this host, where detection would describe the wrong machine.
_TARGET_VIRTUAL_PACKAGES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "linux-aarch64": (
        ("__unix", "0", "0"),
        ("__linux", "5.10", "0"),
        ("__glibc", "2.17", "0"),
        ("__archspec", "1", "aarch64"),
    ),
    "linux-64": (
        ("__unix", "0", "0"),
        ("__linux", "5.10", "0"),
        ("__glibc", "2.17", "0"),
        ("__archspec", "1", "x86_64"),
    ),
}


def package_files(channel_dir: Path) -> list[Path]:
    """The package files in the subdirs of a channel folder, sorted (``repodata.json`` and the rest skipped).

    A subdir (even an empty one, which a build would publish into) or a package file that is a symbolic link
    is refused (:class:`ChannelError`, naming it): py-rattler's indexer does not follow links (0.28 writes no
    ``repodata.json`` into a linked subdir and leaves a linked package out of its subdir's, without a word),
    so its packages would be reported as published and never be installable. Indexing them by other means
    would not make the folder whole either: the output folder's lock covers the folder, not a subdir that
    another channel folder may link too.
    """
    for subdir in sorted(channel_dir.iterdir()) if channel_dir.is_dir() else ():
        if subdir.is_symlink() and subdir.is_dir():  # even an empty one: a build would publish into it
            raise _linked(subdir)
    found = []
    for path in sorted(channel_dir.glob("*/*")):
        if not path.name.endswith(PACKAGE_SUFFIXES) or not path.is_file():
            continue
        if path.is_symlink():
            raise _linked(path)
        found.append(path)
    return found


def _linked(link: Path) -> ChannelError:
    """A subdir or a package file of a channel folder that is a symbolic link: what to do instead."""
    target = link.resolve()
    if link.is_dir():
        return ChannelError(
            f"the subdir {link} is a symbolic link (to {target}): py-rattler's indexer does not follow it, so "
            "its packages would never be in the channel's index",
            fix=f"make it a folder of its own: rm {_quoted(link)} && cp -a {_quoted(target)} {_quoted(link)}",
        )
    return ChannelError(
        f"the package {link} is a symbolic link (to {target}): py-rattler's indexer leaves it out of the "
        "channel's index",
        fix=f"put the file itself there: cp --remove-destination {_quoted(target)} {_quoted(link)}",
    )


def _quoted(path: Path) -> str:
    """``path`` as a shell word, so a suggested command with a space or a quote in a path can be pasted."""
    return shlex.quote(str(path))


def _build_into(folder: Path) -> str:
    return f"build into it first: flagtree-feedstock build --output-dir {_quoted(folder)}"


def local_folder(channel: str) -> Path | None:
    """The folder a channel names when it is local: a ``file://`` URL or a path (``/...``, ``./...``, ``~/...``)."""
    if channel.startswith("file://"):
        return Path(unquote(urlparse(channel).path))
    if channel.startswith(("/", "./", "../", "~")):
        return Path(channel).expanduser()
    return None


def check_channels(channels: Sequence[str]) -> None:
    """Fail early, naming the channel, when one is empty or a local one is not a whole, indexed channel folder.

    Every package of a local channel is checked whole (:func:`check_package`): a damaged one would otherwise
    stop the engine's solve or install with its own, longer message.
    """
    for channel in channels:
        if not channel.strip():
            raise ConfigurationError(
                f"a --channel is empty ({channel!r})",
                fix="pass --channel a channel name (conda-forge), a URL, or a file:// URL of a channel folder",
            )
        folder = local_folder(channel)
        if folder is None:
            continue
        if folder.exists() and not folder.is_dir():
            raise ConfigurationError(
                f"channel {channel}: {folder} is a file, not a channel folder",
                fix="pass --channel the folder that holds noarch/ and the platform subdirs",
            )
        if not (folder / "noarch" / "repodata.json").is_file():
            raise _not_a_channel(channel, folder)
        for package in package_files(folder):
            check_package(package)
        _check_readable_index(folder)  # a damaged index would fail the build's first solve, late


def _not_a_channel(channel: str, folder: Path) -> ConfigurationError:
    """Why ``folder`` is not an indexed channel; the fix suggests indexing only where that works."""
    if not folder.is_dir():
        return ConfigurationError(
            f"channel {channel}: folder {folder} does not exist",
            fix="pass --channel an existing channel folder or a channel name",
        )
    if not package_files(folder):
        return ConfigurationError(
            f"channel {channel} is not an indexed channel folder and holds no packages",
            fix="pass --channel a channel folder with packages, or a channel name",
        )
    return ConfigurationError(
        f"channel {channel} is not an indexed channel folder (no noarch/repodata.json)",
        fix=f"run: flagtree-feedstock channel index {_quoted(folder)}",
    )


@contextmanager
def refusals(path: Path, source: str | None = None) -> Iterator[None]:
    """Turn the reader's refusal of the package ``path`` (downloaded from ``source``, when given) into one
    :class:`ChannelError` naming it, with what to do."""
    where = source or str(path)
    owner = "do not install from this channel; tell its owner"
    try:
        yield
    except UnsafePackage as exc:
        raise ChannelError(
            f"{where} is refused, and was not used: {exc}",
            fix="do not use this package: remove it and get it from its builder again (a conda package holds "
            "relative paths only, within the limits docs/troubleshooting.md lists)"
            if source is None
            else f"{owner} (a conda package holds relative paths only, within the limits docs/troubleshooting.md "
            "lists)",
        ) from None
    except DamagedPackage as exc:
        raise ChannelError(
            f"{where} is damaged ({exc}): it is not a whole conda package",
            fix=f"remove it, then rebuild it (flagtree-feedstock build --output-dir {_quoted(path.parent.parent)}) "
            "or download it again"
            if source is None
            else f"install again later (the download may have been cut); if it stays so, {owner}",
        ) from None


def check_package(path: Path, source: str | None = None, *, shown_as: Path | None = None) -> None:
    """Raise :class:`ChannelError` naming ``path`` (or ``source``, the URL it was downloaded from, or
    ``shown_as``, the file ``path`` is the toolkit's copy of) unless it is a whole conda package named after
    itself.

    Whole and safe: see :func:`package_stem` (a path leading out of the prefix, a bomb or an archive two
    readers read differently is refused, naming the member). Named after itself: ``<name>-<version>-<build>``
    of its own ``info/index.json``, the name by which conda finds it (py-rattler's indexer leaves a file out of the
    index without a word when its name does not read as name-version-build).
    """
    shown_path = shown_as or path
    where = source or str(shown_path)
    owner = "do not install from this channel; tell its owner"
    with refusals(shown_path, source):
        stem = package_stem(path)
    suffix = ".conda" if path.name.endswith(".conda") else ".tar.bz2"
    if path.name != f"{stem}{suffix}":
        named = stem + suffix
        # A name its index.json gives may be no file name at all (a "/" in it, longer than a file system takes).
        fits = (
            "/" not in named
            and "\0" not in named
            and len(named.encode(errors="surrogateescape")) <= _NAME_MAX
        )
        raise ChannelError(
            f"{where} is not named after the package it holds ({bounded(stem, FIELD_CHARS)}): conda finds a "
            "package by its file name, name-version-build",
            fix=owner
            if source is not None
            else f"rename it: mv {_quoted(shown_path)} {_quoted(shown_path.with_name(named))}"
            if fits
            else f"do not use it: the name-version-build its {INDEX} gives is no file name; remove it",
        )


def package_stem(path: Path, name: str | None = None) -> str:
    """``<name>-<version>-<build>`` of the package at ``path``, from its ``info/index.json``, once the whole file
    was read and found whole and safe (:func:`read_info`); else raise :class:`DamagedPackage` saying why.
    ``name``, the file name it has in a channel (``path``'s own by default), says which of the two formats it is.
    """
    index = read_info(path, (INDEX,), name).get(INDEX)
    if index is None:
        raise DamagedPackage(f"it holds no {INDEX}")
    record = load_json(INDEX, index)
    record = record if isinstance(record, dict) else {}
    fields = []
    for key in ("name", "version", "build"):
        field = record.get(key)
        if not isinstance(field, str) or not field:
            raise DamagedPackage(f"its {INDEX} lacks the {key} (or leaves it empty)")
        fields.append(field)
    # The indexer needs it too: without it, it stops with a message that does not name the package.
    number = record.get("build_number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise DamagedPackage(f"its {INDEX} lacks the build_number (a whole number, 0 or more)")
    return "-".join(fields)


# The one package reader: bounded, every member and paths.json entry checked (package_reader's docstring).
read_info = read_package


_Result = TypeVar("_Result")


def _settled(call: Coroutine[Any, Any, _Result]) -> _Result:
    """``asyncio.run`` of a py-rattler call (its solve, install or index), returning or raising only once
    py-rattler's tokio workers are idle again.

    The call hands its result or its error back while one or two of its workers still run (after every solve
    and install here, after about every second index); the command prints its table or its error line and
    ends right after, and an interpreter torn down under such a thread crashes: a solve that fails, then the
    exit, ended in a SIGSEGV or an abort in 195 of 400 processes without the wait, in none of 400 with it.
    """
    try:
        return asyncio.run(call)
    finally:
        wait_for_idle_threads()


def index_channel(channel_dir: Path, *, check: bool = True) -> list[Path]:
    """Write ``repodata.json`` for every subdir of ``channel_dir`` (py-rattler's indexer); return them.

    Every package is checked whole first (``check=False`` when the caller has just checked them). A Ctrl-C
    meanwhile is held until the index is written; the indexer's scratch folder is removed in any case.
    """
    rattler_index = require("rattler.index", "py-rattler")
    if channel_dir.exists() and not channel_dir.is_dir():
        raise ConfigurationError(
            f"{channel_dir} is a file, not a channel folder",
            fix="pass the folder that holds noarch/ and the platform subdirs",
        )
    if not channel_dir.is_dir():
        raise ConfigurationError(f"channel folder {channel_dir} does not exist", fix=_build_into(channel_dir))
    packages = package_files(channel_dir)
    if not packages:
        raise ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs) to index",
            fix=_build_into(channel_dir),
        )
    if check:
        for package in packages:
            check_package(package)
    for package in packages:
        _check_subdir(package)
    # py-rattler's indexer, refused a write, can abort the interpreter as it exits: find out first.
    for folder in sorted({channel_dir, *(p.parent for p in packages)}):
        try:
            probe_writable(folder)
        except OSError as exc:
            raise FileAccessError(  # the file system's answer: exit 10, as for every command
                f"cannot index {channel_dir}: cannot write in {folder}: {exc.strerror or exc}",
                fix=f"make {folder} writable for you, or index a copy of the folder",
            ) from None
    (channel_dir / "noarch").mkdir(exist_ok=True)  # a conda channel always has noarch/
    # py-rattler's indexer reads the packages' stand-ins, not the packages: it holds each in memory twice.
    # Removed below, or at the interpreter's exit should a signal come before the try.
    scratch_folder = tempfile.TemporaryDirectory(prefix="flagtree-feedstock-index-")
    try:
        scratch = Path(scratch_folder.name)
        stand_in_channel(channel_dir, scratch)
        stand_ins = []
        for package in packages:
            try:
                stand_ins.append(stand_in_for(package, scratch))
            except DamagedPackage:  # UnsafePackage too
                check_package(package)  # names it, saying what to do
                raise
        with deferred_interrupts():
            _index_fs(rattler_index, scratch, channel_dir, force=True)
            indexed = {
                subdir.name: with_package_digests(
                    (subdir / REPODATA).read_bytes(),
                    {s.package.name: s for s in stand_ins if s.package.parent.name == subdir.name},
                    channel_dir / subdir.name,
                )
                for subdir in sorted(scratch.iterdir())
                if (subdir / REPODATA).is_file()
            }  # every subdir's first: one the toolkit cannot put right leaves the channel's index as it was
            for subdir, repodata in indexed.items():
                _replace(channel_dir / subdir / REPODATA, repodata, channel_dir)
            _index_fs(rattler_index, channel_dir, channel_dir, force=False)  # every package listed: none read
    finally:
        with deferred_interrupts():  # a second signal does not leave half the stand-ins
            scratch_folder.cleanup()
    return sorted(channel_dir.glob("*/repodata.json"))


def _index_fs(rattler_index: Any, folder: Path, channel_dir: Path, *, force: bool) -> None:  # noqa: ANN401 - py-rattler
    """py-rattler's indexer run on ``folder`` (``channel_dir`` or its stand-ins), its scratch folder removed."""
    try:
        # py-rattler's workers done before a held signal (or the error's exit) may end the interpreter
        _settled(rattler_index.index_fs(folder, write_zst=False, write_shards=False, force=force))
    except Exception as exc:  # noqa: BLE001 - py-rattler raises many classes, a panic in a task among them
        raise ChannelError(
            f"indexing {channel_dir} failed: {_first_line(exc).replace(str(folder), str(channel_dir))}",
            fix=f"check that you can write in {channel_dir}, and its package files",
        ) from None
    finally:
        shutil.rmtree(folder / ".tmp", ignore_errors=True)  # py-rattler's indexer's scratch folder


def _replace(path: Path, data: bytes, channel_dir: Path) -> None:
    """``path`` (an index of ``channel_dir``) holds ``data``, written under a temporary name and renamed: never
    half of it. What is in the way of the rename (a folder of that name) fails the index in one line."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        Path(name).chmod(0o644)
        Path(name).replace(path)
    except BaseException as exc:
        Path(name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ChannelError(
                f"indexing {channel_dir} failed: cannot write {path}: {exc.strerror or exc}",
                fix=f"remove or move what is at {path}, and check that you can write in {channel_dir}",
            ) from None
        raise


def _not_indexed(channel_dir: Path) -> FeedstockError:
    """Why ``channel_dir`` cannot be installed from; the fix suggests indexing only where that works."""
    if not channel_dir.is_dir():  # a path that names nothing is bad input (2), as for `channel index`
        return ConfigurationError(
            f"channel folder {channel_dir} does not exist", fix=_build_into(channel_dir)
        )
    if not package_files(channel_dir):
        return ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs)",
            fix=_build_into(channel_dir),
        )
    return ChannelError(
        f"{channel_dir} is not an indexed channel (no noarch/repodata.json)",
        fix=f"run: flagtree-feedstock channel index {_quoted(channel_dir)}",
    )


def _match_specs(rattler: Any, errors: Any, specs: Sequence[str]) -> list[Any]:  # noqa: ANN401 - py-rattler
    """``specs`` read as py-rattler's solver reads a string (strictly); a spec it cannot read is bad input.

    Strictly: ``flagtree cpu`` is refused (the lenient reading is ``flagtree ==cpu``, a package
    called flagtree at version cpu), and the solver is given these very specs.
    """
    parsed = []
    for spec in specs:
        try:
            parsed.append(rattler.MatchSpec(spec, strict=True))
        except errors.InvalidMatchSpecError as exc:
            raise ConfigurationError(
                f"{spec!r} is not a match spec: {_first_line(exc)}",
                fix="write NAME, 'NAME >=VERSION' or 'NAME ==VERSION BUILD', e.g. 'flagtree-cpu >=0.6'; "
                "a space ends the name",
            ) from None
    return parsed


def _unreachable(exc: Exception, names: Sequence[str], channels: Sequence[Any]) -> ChannelError:
    """A channel whose index could not be fetched: name it (the one in the engine's message, else all)."""
    reason = _first_line(exc)
    named = [n for n, c in zip(names, channels, strict=True) if c.base_url in reason] or list(names)
    return ChannelError(
        f"channel {', '.join(named)} is unreachable: {_with_cause(exc)}",
        fix="check the network and the http(s)_proxy variables, or install without that -c channel",
    )


def _check_readable_index(folder: Path, platform: PlatformName | None = None) -> None:
    """A local channel's index that is not JSON is damaged, not unreachable: say so, and how to rewrite it
    (``channel index`` rewrites it from the packages; with none it says so). ``platform``: its subdir and
    noarch's; else every subdir's."""
    subdirs = (
        (platform, "noarch") if platform else sorted(p.parent.name for p in folder.glob("*/repodata.json"))
    )
    for subdir in subdirs:
        repodata = folder / subdir / "repodata.json"
        if not repodata.is_file():
            continue
        try:
            parse_json(repodata.read_bytes())
        except ValueError as exc:
            raise ChannelError(
                f"the channel index {repodata} is damaged: {_first_line(exc)}",
                fix=f"run: flagtree-feedstock channel index {_quoted(folder)}",
            ) from None


_SUBDIR = re.compile(r"noarch|(linux|osx|win|emscripten|wasi|zos|freebsd)-[a-z0-9_]+")


def _check_subdir(path: Path) -> None:
    """py-rattler's indexer files a package under the subdir it lies in, whatever its own ``info/index.json``
    says: a linux-aarch64 package in ``noarch/`` would be offered to every platform. Refuse it, naming both."""
    try:
        index = read_info(path, (INDEX,), whole=False).get(INDEX)
        record = parse_json(index) if index is not None else None
    except (DamagedPackage, ValueError):
        return  # check_package names a damaged package
    subdir = record.get("subdir") if isinstance(record, dict) else None
    # Only a channel subdir's name is compared: the engine keeps packages whose test failed in `broken/`.
    if isinstance(subdir, str) and _SUBDIR.fullmatch(path.parent.name) and subdir != path.parent.name:
        home = path.parent.parent / subdir
        raise ChannelError(
            f"{path} is a package for {subdir}, in the subdir {path.parent.name}/",
            fix=f"move it where it belongs: mkdir -p {_quoted(home)} && mv {_quoted(path)} {_quoted(home)}/",
        )


def _unsolvable(
    exc: Exception, channel_dir: Path, specs: Sequence[str], names: set[str], platform: PlatformName
) -> DependencyError:
    """A failed solve; when the folder holds the asked-for packages only for another platform, say which."""
    held: dict[str, set[str]] = {}
    for package in package_files(channel_dir):
        held.setdefault(package.parent.name, set()).add(package.name.rsplit("-", 2)[0])
    here = held.get(platform, set()) | held.get("noarch", set())
    elsewhere = sorted(
        subdir for subdir, found in held.items() if found & names and subdir not in (platform, "noarch")
    )
    if elsewhere and not names & here:
        return DependencyError(  # what cannot be solved is 7, in every command (build's solve too)
            f"{channel_dir} holds {', '.join(sorted(names))} for {', '.join(elsewhere)}, not for {platform}",
            fix=f"pass --target-platform {elsewhere[0]}",
        )
    return DependencyError(
        f"cannot solve {' '.join(specs)} from {channel_dir} for {platform}: {_first_line(exc)}",
        fix="check the package name and that its dependencies are in the channel or in --channel",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _with_cause(exc: BaseException) -> str:
    """The first line of py-rattler's message and, when it has a chain of causes, the last cause."""
    first = _first_line(exc)
    cause = str(exc).strip().splitlines()[-1].removeprefix("Caused by: ").strip() if str(exc).strip() else ""
    return f"{first} ({cause})" if cause and cause != first else first


@dataclass(frozen=True, kw_only=True)
class InstalledPackage:
    """A package a smoke install put into the scratch prefix."""

    name: str
    version: str
    build: str
    channel: str


def smoke_install(
    channel_dir: Path,
    specs: Sequence[str],
    *,
    prefix: Path,
    platform: PlatformName,
    extra_channels: Sequence[str] = (),
    link_scripts: LinkScriptPolicy = NONE_ALLOWED,
    cache: Path | None = None,
    timeout: float | None = None,
) -> list[InstalledPackage]:
    """Solve ``specs`` against the local channel (plus ``extra_channels``) and install into ``prefix``.

    Every package installed is checked first (:func:`check_package`): a local channel's before the solve, a
    remote channel's once the solve took it, downloaded into a folder of the run's own and installed from that
    checked copy (:mod:`.remote_packages`). One that carries link scripts is refused unless ``link_scripts``
    allows it; the scripts of those it allows run. The extra channels reach the solve through the toolkit's
    server on loopback (:mod:`.index_relay`), each request to them within ``timeout`` seconds whole (else
    :data:`.index_relay.TIMEOUTS`); a channel it cannot read stops the install in one line.
    """
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    if channel_dir.exists() and not channel_dir.is_dir():
        raise ConfigurationError(
            f"{channel_dir} is a file, not a channel folder",
            fix="pass the folder that holds noarch/ and the platform subdirs",
        )
    if not (channel_dir / "noarch" / "repodata.json").is_file():
        raise _not_indexed(channel_dir)
    check_channels(extra_channels)
    # rattler never sees a channel's secret (in its URL, or in your RATTLER_AUTH_FILE): the relay sends it
    engine = with_own_credentials(split_credentials(extra_channels), os.environ)
    for package in package_files(channel_dir):
        check_package(package)
    local_folders = [channel_dir, *(f for f in map(local_folder, extra_channels) if f is not None)]
    for folder in local_folders:
        _check_readable_index(folder, platform)
    match_specs = _match_specs(rattler, errors, specs)
    names = {spec.name.normalized for spec in match_specs}
    check_folder(prefix, option="--prefix")
    if prefix.exists() and any(prefix.iterdir()):
        raise ConfigurationError(f"prefix {prefix} is not empty", fix="pass a new or empty --prefix")
    local = rattler.Channel(channel_dir.resolve().as_uri())
    virtual = [
        rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b))
        for n, v, b in _TARGET_VIRTUAL_PACKAGES[platform]
    ]
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(
            f"--timeout {timeout:g} is not a positive number of seconds", fix="give e.g. --timeout 600"
        )
    timeouts = (
        TIMEOUTS
        if timeout is None
        else Timeouts(connect=min(TIMEOUTS.connect, timeout), read=min(TIMEOUTS.read, timeout), total=timeout)
    )
    with (
        tempfile.TemporaryDirectory(prefix="flagtree-feedstock-relay-") as scratch,
        # rattler reads the extra channels from the toolkit's server on loopback only: no remote URL, no
        # credentials, no user's folder (index_relay.py); its cache of them is the run's own.
        serving(
            engine.channels, authorize=engine.authorize, scratch=Path(scratch), timeouts=timeouts
        ) as relay,
    ):
        extra = [rattler.Channel(url) for url in relay.urls]
        try:
            records = _settled(
                rattler.solve(
                    [local, *extra],
                    match_specs,
                    gateway=rattler.Gateway(
                        cache_dir=Path(scratch) / "rattler-cache",
                        client=rattler.Client.from_config(rattler.Config.from_toml(relay.client_config())),
                    ),
                    platforms=[platform, "noarch"],
                    virtual_packages=virtual,
                )
            )
        except (errors.GatewayError, errors.FetchRepoDataError) as exc:
            relay.check()  # the relay's own line, not rattler's, when it refused or could not fetch
            raise _unreachable(exc, [str(channel_dir), *extra_channels], [local, *extra]) from None
        except errors.SolverError as exc:
            relay.check()
            raise _unsolvable(exc, channel_dir, specs, names, platform) from None
        relay.check()  # fail closed: a channel the relay could not read is never left out of a solve
        shown = {str(r.channel): relay.given(str(r.channel)) for r in records}
        for record in records:
            if not str(record.url).startswith("file://"):
                record.url = relay.upstream(str(record.url))  # fetched with the credentials of its origin
        _install(
            records,
            prefix,
            platform=platform,
            engine=engine,
            channel_dir=channel_dir,
            link_scripts=link_scripts,
            cache=cache or user_cache(os.environ),
        )
    return [
        InstalledPackage(
            name=r.name.normalized,
            version=str(r.version),
            build=str(r.build),
            channel=shown.get(str(r.channel), str(r.channel)),
        )
        for r in sorted(records, key=lambda r: r.name.normalized)
    ]


def _install(
    records: Sequence[Any],
    prefix: Path,
    *,
    platform: PlatformName,
    engine: EngineChannels,
    channel_dir: Path,
    link_scripts: LinkScriptPolicy,
    cache: Path,
) -> None:
    """Link ``records`` into ``prefix``, each remote one from a checked copy downloaded with ``engine``'s
    credentials for its origin (:mod:`.remote_packages`), none with link scripts ``link_scripts`` does not
    allow; a failure or a Ctrl-C leaves no half-installed prefix."""
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    try:
        with tempfile.TemporaryDirectory(prefix="flagtree-feedstock-packages-") as scratch:
            # The installer installs the toolkit's own copies only (remote ones downloaded with the
            # credentials of their origin), and no package's link scripts but the allowed ones.
            runs_scripts = use_repacked_copies(
                records, Path(scratch), cache, authorize=engine.authorize, link_scripts=link_scripts
            )
            _settled(
                rattler.install(
                    list(records),
                    prefix,
                    platform=rattler.Subdir(platform),
                    execute_link_scripts=runs_scripts,  # only the allowed packages carry any
                    show_progress=False,
                )
            )
    except (OSError, errors.InstallerError, errors.LinkError, errors.TransactionError, errors.IoError) as exc:
        with deferred_interrupts():
            shutil.rmtree(prefix, ignore_errors=True)
        raise ChannelError(
            f"installing into {prefix} failed: {_with_cause(exc)}",
            fix=f"check free disk space; if the packages of {channel_dir} changed since it was indexed, index it "
            f"again (flagtree-feedstock channel index {_quoted(channel_dir)})",
        ) from None
    except BaseException:  # a Ctrl-C: no half-installed prefix is left
        with deferred_interrupts():
            shutil.rmtree(prefix, ignore_errors=True)
        raise
