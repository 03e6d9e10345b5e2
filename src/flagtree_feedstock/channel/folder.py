"""A local channel folder: its package files listed (no links), and the channels a command is given checked
(each local one a whole, indexed channel folder, every package of it checked whole)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from flagtree_feedstock._engine import first_line
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock.errors import ChannelError, ConfigurationError
from flagtree_feedstock.platforms import PlatformName

from .package_check import PACKAGE_SUFFIXES, check_package, shell_word


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
            fix=f"make it a folder of its own: rm {shell_word(link)} && cp -a {shell_word(target)} {shell_word(link)}",
        )
    return ChannelError(
        f"the package {link} is a symbolic link (to {target}): py-rattler's indexer leaves it out of the "
        "channel's index",
        fix=f"put the file itself there: cp --remove-destination {shell_word(target)} {shell_word(link)}",
    )


def build_into(folder: Path) -> str:
    """The fix for a channel folder with no packages yet: build into it."""
    return f"build into it first: flagtree-feedstock build --output-dir {shell_word(folder)}"


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
        check_readable_index(folder)  # a damaged index would fail the build's first solve, late


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
        fix=f"run: flagtree-feedstock channel index {shell_word(folder)}",
    )


def check_readable_index(folder: Path, platform: PlatformName | None = None) -> None:
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
                f"the channel index {repodata} is damaged: {first_line(exc)}",
                fix=f"run: flagtree-feedstock channel index {shell_word(folder)}",
            ) from None
