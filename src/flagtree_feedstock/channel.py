"""Local channel folders: stage, publish, index (py-rattler) and smoke-install from ``file://``."""

from __future__ import annotations

import asyncio
import filecmp
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
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


def check_local_channels(channels: Sequence[str]) -> None:
    """Fail early, naming the channel, when a ``file://`` channel is not an indexed channel folder."""
    for channel in channels:
        if not channel.startswith("file://"):
            continue
        folder = Path(unquote(urlparse(channel).path))
        if not (folder / "noarch" / "repodata.json").is_file():
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
        raise ConfigurationError(
            f"channel folder {channel_dir} does not exist",
            fix="build into it first or pass an existing folder",
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
        raise ChannelError(
            f"{channel_dir} is not an indexed channel",
            fix=f"run: flagtree-feedstock channel index {channel_dir}",
        )
    if prefix.exists() and any(prefix.iterdir()):
        raise ConfigurationError(f"prefix {prefix} is not empty", fix="pass a new or empty --prefix")
    channels = [
        rattler.Channel(channel_dir.resolve().as_uri()),
        *(rattler.Channel(c) for c in extra_channels),
    ]
    virtual = [
        rattler.GenericVirtualPackage(rattler.PackageName(n), rattler.Version(v), rattler.BuildString(b))
        for n, v, b in _TARGET_VIRTUAL_PACKAGES[platform]
    ]
    try:
        records = asyncio.run(
            rattler.solve(channels, list(specs), platforms=[platform, "noarch"], virtual_packages=virtual)
        )
    except (
        errors.SolverError,
        errors.GatewayError,
        errors.InvalidMatchSpecError,
        errors.FetchRepoDataError,
    ) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ChannelError(
            f"cannot solve {' '.join(specs)} from {channel_dir}: {first}",
            fix="check the package name and that its dependencies are in the channel or in --channel",
        ) from None
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
