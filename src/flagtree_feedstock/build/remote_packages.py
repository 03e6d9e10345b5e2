"""What the engine installs into a build's build and host environments from a remote channel, checked first.

The engine solves, downloads and installs a step's build and host environments in the one call that builds
it; what it downloads from a remote channel (``-c conda-forge``, ``-c https://…``) is never seen by the
toolkit there. So before each step that has a remote channel, the engine solves that step alone (a ``solve``
call of :mod:`._worker`: its own render with solve, nothing built), each package of the solution that comes
from a remote channel is downloaded into a channel folder of the run's own (:func:`checked_channel`), against
the index's size and sha256, and checked as every package is (:func:`..channel.folder.check_package`), and the
engine's call then has that folder as its second channel, after the staging folder and before the remote
ones: with strict channel priority (the engine's default), a package whose name the folder holds is taken
from there only, the checked copy. The solve has a package cache of its own (it downloads packages to read
their run exports), so the build's cache holds nothing of the remote channel that was not checked here.

What this does not cover: a package the build's own solve takes that the solve before it did not (a channel
whose index changed in between). When the engine cannot solve the step, the step runs as before and the engine
reports why; when the worker ends without the engine's answer, the build stops.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._locks import FolderLock
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.channel.folder import check_package, index_channel, local_folder, package_link_scripts
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.channel.remote_packages import Authorize, checked_copy
from flagtree_feedstock.errors import BuildFailedError, ChannelError
from flagtree_feedstock.recipe.render import RenderedOutput

from ._worker import EngineCall, run_engine, solved_packages

LOGGER = logging.getLogger(__name__)
_SUBDIR = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")


def remote(channels: tuple[str, ...]) -> bool:
    """Whether any of ``channels`` is a remote one (a name such as conda-forge, or a URL but ``file://``)."""
    return any(local_folder(channel) is None for channel in channels)


def installs_packages(output: RenderedOutput) -> bool:
    """Whether the engine installs a build or host environment for ``output`` (its recipe requires any)."""
    requirements = output.engine_variant.recipe.to_dict().get("requirements") or {}
    return bool(requirements.get("build") or requirements.get("host"))


def checked_channel(scratch: Path) -> Path:
    """An empty channel folder in ``scratch`` (its noarch index only), for the checked copies."""
    channel = scratch / "channel"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}\n')
    return channel


def check_remote_packages(
    call: EngineCall,
    channel: Path,
    *,
    env: dict[str, str],
    lock: FolderLock,
    authorize: Authorize,
    link_scripts: LinkScriptPolicy,
) -> None:
    """Have the engine solve ``call`` alone; put a checked copy of each package its solution takes from a
    remote channel into ``channel`` (the build call's second channel), downloaded with ``authorize``, and
    index it. A package of the solution that carries link scripts ``link_scripts`` does not allow, from any
    channel, is refused."""
    solve = replace(call, mode="solve", events=False, up_to=call.up_to or (call.key[0] if call.key else None))
    # A package cache of its own: what the solve downloads (to read run exports) is not what the build installs.
    result = run_engine(
        solve, events=None, env={**env, "RATTLER_CACHE_DIR": str(channel.parent / "cache")}, lock=lock
    )
    if result.outcome == "crash":  # not the engine's answer: never a build that goes on unchecked
        raise BuildFailedError(
            "solving what the build would install from a remote channel, to check it first, failed: the "
            "worker ended without the engine's answer",
            fix="rerun; if it fails again, report it as a bug of flagtree-feedstock with the output above",
        )
    if result.outcome == "error":  # the engine could not solve: the build's own call reports why
        LOGGER.debug("the solve before the build failed; the build reports it: %s", result.text)
        return
    added = False
    for record in solved_packages(result):
        url = str(record.get("url") or "")
        if url.startswith("file://"):
            package = _local_file(url)
        else:
            package = _copy_path(record, channel)
            if not package.exists():
                _copy_checked(record, package, authorize)
                added = True
        name, scripts = package_link_scripts(package, str(record.get("fn") or package.name))
        link_scripts.admit(name, scripts, where=str(package) if url.startswith("file://") else shown_url(url))
    if added:
        index_channel(channel, check=False)  # each was checked as it was downloaded


def _local_file(url: str) -> Path:
    """The package file a ``file://`` URL of the solution names (a local channel's, checked as the build
    started, or the staging folder's)."""
    return Path(unquote(urlsplit(url).path))


def _copy_path(record: dict[str, Any], channel: Path) -> Path:
    """Where the checked copy of the remote ``record``'s package goes in ``channel``."""
    url = str(record.get("url") or "")
    subdir, name = str(record.get("subdir") or ""), str(record.get("fn") or url.rsplit("/", 1)[-1])
    if not _SUBDIR.fullmatch(subdir):
        raise ChannelError(
            f"the channel's index gives {url} the subdir {subdir!r}: not a conda subdir",
            fix="do not build with this channel; tell its owner",
        )
    return channel / subdir / name


def _copy_checked(record: dict[str, Any], copy: Path, authorize: Authorize) -> None:
    """Download ``record``'s package to ``copy`` and check it."""
    sha256 = record.get("sha256")
    size = record.get("size")
    checked_copy(
        str(record.get("url") or ""),
        copy,
        sha256=sha256 if isinstance(sha256, str) else None,
        size=size if isinstance(size, int) else None,
        check=check_package,
        authorize=authorize,
    )
