"""Local channel folders: stage, publish, index (py-rattler) and smoke-install from ``file://``."""

from __future__ import annotations

import asyncio
import filecmp
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ._engine import require
from .errors import ChannelError, ConfigurationError
from .platforms import PlatformName

LOGGER = logging.getLogger(__name__)
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")

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
    """The package files in the subdirs of a channel folder, sorted (``repodata.json`` and the rest skipped)."""
    return sorted(p for p in channel_dir.glob("*/*") if p.is_file() and p.name.endswith(PACKAGE_SUFFIXES))


def _build_into(folder: Path) -> str:
    return f"build into it first: flagtree-feedstock build --output-dir {folder}"


def _folder(channel: str) -> Path:
    """The folder of a ``file://`` channel URL."""
    return Path(unquote(urlparse(channel).path))


def check_local_channels(channels: Sequence[str]) -> None:
    """Fail early, naming the channel, when a ``file://`` channel is not an indexed channel folder."""
    for channel in channels:
        if not channel.startswith("file://"):
            continue
        folder = _folder(channel)
        if (folder / "noarch" / "repodata.json").is_file():
            continue
        # Suggest indexing only where it works: a folder that exists and holds packages.
        if not folder.is_dir():
            raise ConfigurationError(
                f"channel {channel}: folder {folder} does not exist",
                fix="pass --channel an existing channel folder or a channel name",
            )
        if not package_files(folder):
            raise ConfigurationError(
                f"channel {channel} is not an indexed channel folder and holds no packages",
                fix="pass --channel a channel folder with packages, or a channel name",
            )
        raise ConfigurationError(
            f"channel {channel} is not an indexed channel folder (no noarch/repodata.json)",
            fix=f"run: flagtree-feedstock channel index {folder}",
        )


@contextmanager
def staging_dir(channel_dir: Path, *, keep_on_failure: bool = False) -> Iterator[Path]:
    """A scratch folder beside ``channel_dir`` (same file system, so publishing is a rename).

    It is removed, except after a failure when ``keep_on_failure`` asks to keep the engine's work folders in
    it for inspection (``--keep-build``); its path is then logged.
    """
    parent = channel_dir.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create {parent}: {exc.strerror}", fix="choose another --output-dir"
        ) from None
    path = Path(tempfile.mkdtemp(prefix=f".{channel_dir.name}-staging-", dir=parent))
    try:
        yield path
    except BaseException:
        if keep_on_failure:
            LOGGER.warning("kept the failed build's work folders for inspection: %s", path)
            raise
        shutil.rmtree(path, ignore_errors=True)
        raise
    shutil.rmtree(path, ignore_errors=True)


def seed_staging(channel_dir: Path, staging: Path) -> frozenset[str]:
    """Link the packages ``channel_dir`` already holds into ``staging`` and index it.

    The engine's ``skip_existing="local"`` then skips them: an LLVM output built by an earlier run (or an
    earlier CI job whose channel was downloaded here) is reused, not rebuilt. Returns the seeded file names.
    """
    seeded: set[str] = set()
    for package in package_files(channel_dir):
        target_dir = staging / package.parent.name
        target_dir.mkdir(parents=True, exist_ok=True)
        try:
            os.link(package, target_dir / package.name)
        except OSError:
            shutil.copy2(package, target_dir / package.name)
        seeded.add(package.name)
    if seeded:
        index_channel(staging)
    return frozenset(seeded)


def publish_packages(staging: Path, channel_dir: Path, *, seeded: frozenset[str] = frozenset()) -> list[Path]:
    """Move every new or rebuilt package file of ``staging/<subdir>/`` into ``channel_dir/<subdir>/`` by rename.

    A seeded package the engine left as it was is not published again. One it rebuilt under the same file
    name (conda-build does not skip existing packages) replaces the channel folder's file, with a warning:
    the channel never keeps an older build in place of the one just made.
    """
    published: list[Path] = []
    for package in package_files(staging):
        target_dir = channel_dir / package.parent.name
        target = target_dir / package.name
        if package.name in seeded and _unchanged(package, target):
            continue
        if target.exists():
            LOGGER.warning("replacing %s: this run built a different package under the same name", target)
        target_dir.mkdir(parents=True, exist_ok=True)
        package.chmod(0o644)  # the engine writes 0600 files; a channel is read by others
        package.replace(target)
        published.append(target)
    return published


def _unchanged(staged: Path, published: Path) -> bool:
    """The staged file is still the channel's: the same file (a hard link) or the same bytes (a copy)."""
    if not published.is_file():
        return False
    return staged.samefile(published) or filecmp.cmp(staged, published, shallow=False)


def index_channel(channel_dir: Path) -> list[Path]:
    """Write ``repodata.json`` for every subdir of ``channel_dir`` (py-rattler's indexer); return them."""
    rattler_index = require("rattler.index", "py-rattler")
    rattler_errors = require("rattler.exceptions", "py-rattler")
    if not channel_dir.is_dir():
        raise ConfigurationError(f"channel folder {channel_dir} does not exist", fix=_build_into(channel_dir))
    if not package_files(channel_dir):
        raise ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs) to index",
            fix=_build_into(channel_dir),
        )
    (channel_dir / "noarch").mkdir(exist_ok=True)  # a conda channel always has noarch/
    try:
        asyncio.run(rattler_index.index_fs(channel_dir, write_zst=False, write_shards=False, force=True))
    except (
        OSError,
        rattler_errors.IoError,
        rattler_errors.ExtractError,
        rattler_errors.ConversionError,
    ) as exc:
        raise ChannelError(
            f"indexing {channel_dir} failed: {exc}", fix="remove the damaged package files and index again"
        ) from None
    leftover = channel_dir / ".tmp"  # py-rattler's indexer leaves its empty scratch folder behind
    if leftover.is_dir() and not any(leftover.iterdir()):
        leftover.rmdir()
    return sorted(channel_dir.glob("*/repodata.json"))


def _not_indexed(channel_dir: Path) -> ChannelError:
    """Why ``channel_dir`` cannot be installed from; the fix suggests indexing only where that works."""
    if not channel_dir.is_dir():
        return ChannelError(f"channel folder {channel_dir} does not exist", fix=_build_into(channel_dir))
    if not package_files(channel_dir):
        return ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs)",
            fix=_build_into(channel_dir),
        )
    return ChannelError(
        f"{channel_dir} is not an indexed channel (no noarch/repodata.json)",
        fix=f"run: flagtree-feedstock channel index {channel_dir}",
    )


def _spec_names(rattler: Any, errors: Any, specs: Sequence[str]) -> set[str]:  # noqa: ANN401 - py-rattler
    """The package names ``specs`` ask for; a spec py-rattler cannot read is bad input."""
    names = set()
    for spec in specs:
        try:
            names.add(rattler.MatchSpec(spec).name.normalized)
        except errors.InvalidMatchSpecError as exc:
            raise ConfigurationError(
                f"{spec!r} is not a match spec: {_first_line(exc)}",
                fix="write NAME, 'NAME >=VERSION' or 'NAME ==VERSION BUILD', e.g. 'flagtree-cpu >=0.6'",
            ) from None
    return names


def _unreachable(exc: Exception, names: Sequence[str], channels: Sequence[Any]) -> ChannelError:
    """A channel whose index could not be fetched: name it (the one in the engine's message, else all)."""
    reason = _first_line(exc)
    named = [n for n, c in zip(names, channels, strict=True) if c.base_url in reason] or list(names)
    cause = str(exc).strip().splitlines()[-1].removeprefix("Caused by: ")
    return ChannelError(
        f"channel {', '.join(named)} is unreachable: {reason}" + (f" ({cause})" if cause != reason else ""),
        fix="check the network and the http(s)_proxy variables, or install without that -c channel",
    )


def _check_readable_index(folder: Path, platform: PlatformName) -> None:
    """A local channel's index that is not JSON is damaged, not unreachable: say so, and how to rewrite it."""
    for subdir in (platform, "noarch"):
        repodata = folder / subdir / "repodata.json"
        if not repodata.is_file():
            continue
        try:
            json.loads(repodata.read_bytes())
        except ValueError as exc:
            raise ChannelError(
                f"the channel index {repodata} is damaged: {_first_line(exc)}",
                fix=f"run: flagtree-feedstock channel index {folder}"
                if package_files(folder)
                else _build_into(folder),
            ) from None


def _unsolvable(
    exc: Exception, channel_dir: Path, specs: Sequence[str], names: set[str], platform: PlatformName
) -> ChannelError:
    """A failed solve; when the folder holds the asked-for packages only for another platform, say which."""
    held: dict[str, set[str]] = {}
    for package in package_files(channel_dir):
        held.setdefault(package.parent.name, set()).add(package.name.rsplit("-", 2)[0])
    here = held.get(platform, set()) | held.get("noarch", set())
    elsewhere = sorted(
        subdir for subdir, found in held.items() if found & names and subdir not in (platform, "noarch")
    )
    if elsewhere and not names & here:
        return ChannelError(
            f"{channel_dir} holds {', '.join(sorted(names))} for {', '.join(elsewhere)}, not for {platform}",
            fix=f"pass --target-platform {elsewhere[0]}",
        )
    return ChannelError(
        f"cannot solve {' '.join(specs)} from {channel_dir} for {platform}: {_first_line(exc)}",
        fix="check the package name and that its dependencies are in the channel or in --channel",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
) -> list[InstalledPackage]:
    """Solve ``specs`` against the local channel (plus ``extra_channels``) and install into ``prefix``."""
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    if not (channel_dir / "noarch" / "repodata.json").is_file():
        raise _not_indexed(channel_dir)
    check_local_channels(extra_channels)
    for folder in [channel_dir, *(_folder(c) for c in extra_channels if c.startswith("file://"))]:
        _check_readable_index(folder, platform)
    names = _spec_names(rattler, errors, specs)
    if prefix.exists() and any(prefix.iterdir()):
        raise ConfigurationError(f"prefix {prefix} is not empty", fix="pass a new or empty --prefix")
    local = rattler.Channel(channel_dir.resolve().as_uri())
    extra = [rattler.Channel(c) for c in extra_channels]
    virtual = [
        rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b))
        for n, v, b in _TARGET_VIRTUAL_PACKAGES[platform]
    ]
    try:
        records = asyncio.run(
            rattler.solve(
                [local, *extra], list(specs), platforms=[platform, "noarch"], virtual_packages=virtual
            )
        )
    except (errors.GatewayError, errors.FetchRepoDataError) as exc:
        raise _unreachable(exc, [str(channel_dir), *extra_channels], [local, *extra]) from None
    except errors.SolverError as exc:
        raise _unsolvable(exc, channel_dir, specs, names, platform) from None
    try:
        asyncio.run(
            rattler.install(
                records,
                prefix,
                platform=rattler.Subdir(platform),
                execute_link_scripts=False,
                show_progress=False,
            )
        )
    except (OSError, errors.InstallerError, errors.LinkError, errors.TransactionError, errors.IoError) as exc:
        shutil.rmtree(prefix, ignore_errors=True)
        raise ChannelError(
            f"installing into {prefix} failed: {exc}", fix="check free disk space and the package files"
        ) from None
    return [
        InstalledPackage(
            name=r.name.normalized, version=str(r.version), build=str(r.build), channel=str(r.channel)
        )
        for r in sorted(records, key=lambda r: r.name.normalized)
    ]
