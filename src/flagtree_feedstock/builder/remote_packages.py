"""What the engine installs into a build's build and host environments: the toolkit's own copies only.

The engine solves, downloads and installs a step's build and host environments in the one call that builds
it; what it takes from a channel, remote (``-c conda-forge``, ``-c https://…``) or local, is never seen by the
toolkit there. So before each step whose recipe requires a build or host environment, the engine solves that
step alone (a ``solve`` call of :mod:`._worker`: its own render with solve, nothing built), and every package
of the solution, wherever it comes from (the staging folder's, a local channel's, or a remote one's, downloaded
against the index's size and sha256 with the credentials of its origin), is repacked
(:func:`..channel.repack.repacked`: read by the toolkit's reader, written by its writer, checked whole,
cached by the original's sha256 beside the output folder) into a channel folder of that step's own
(:func:`step_channel`); a package that carries link scripts the user did not allow is refused. The engine's call
then has that folder as its first channel: with strict channel priority (the engine's default), a package whose
name the folder holds is taken from there only, the copy the toolkit wrote. The solve has a package cache of its
own (it downloads packages to read their run exports), so the build's cache holds nothing that was not repacked.

What this does not cover (docs/security.md): the packages of the tests' environment, which the engine solves
and installs in the same call from the channels as given; a package the build's own solve takes that the solve
before it did not (a channel whose index changed in between). When the engine cannot solve the step, the step
runs with the channels as given and the engine reports why; when the worker ends without the engine's answer,
the build stops.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._locks import FolderLock
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.channel.folder import index_channel
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.channel.remote_packages import Authorize, download
from flagtree_feedstock.channel.repack import repacked
from flagtree_feedstock.errors import BuildFailedError, ChannelError
from flagtree_feedstock.recipe.render import RenderedOutput

from ._worker import EngineCall, run_engine, solved_packages

LOGGER = logging.getLogger(__name__)
_SUBDIR = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")


def installs_packages(output: RenderedOutput) -> bool:
    """Whether the engine installs a build or host environment for ``output`` (its recipe requires any)."""
    requirements = output.engine_variant.recipe.to_dict().get("requirements") or {}
    return bool(requirements.get("build") or requirements.get("host"))


def step_channel(scratch: Path, number: int) -> Path:
    """A new, empty channel folder in ``scratch`` for the copies of step ``number`` (its noarch index only)."""
    channel = scratch / f"step-{number}"
    (channel / "noarch").mkdir(parents=True)
    (channel / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}\n')
    return channel


def repacked_channel(
    call: EngineCall,
    channel: Path,
    *,
    cache: Path,
    env: dict[str, str],
    lock: FolderLock,
    authorize: Authorize,
    link_scripts: LinkScriptPolicy,
) -> bool:
    """Have the engine solve ``call`` alone; put the toolkit's copy (from ``cache``) of each package of its
    solution into ``channel`` and index it; remote ones are downloaded with ``authorize`` first. A package
    that carries link or activation scripts ``link_scripts`` does not allow is refused. Whether the engine could solve it
    (``channel`` is then the build call's first channel)."""
    scratch = channel.parent
    solve = replace(call, mode="solve", events=False, up_to=call.up_to or (call.key[0] if call.key else None))
    # A package cache of its own: what the solve downloads (to read run exports) is not what the build installs.
    result = run_engine(
        solve, events=None, env={**env, "RATTLER_CACHE_DIR": str(scratch / "solve-cache")}, lock=lock
    )
    if result.outcome == "crash":  # not the engine's answer: never a build that goes on unchecked
        raise BuildFailedError(
            "solving what the build would install, to repack it first, failed: the worker ended without the "
            "engine's answer",
            fix="rerun; if it fails again, report it as a bug of flagtree-feedstock with the output above",
        )
    if result.outcome == "error":  # the engine could not solve: the build's own call reports why
        LOGGER.debug("the solve before the build failed; the build reports it: %s", result.text)
        return False
    for record in solved_packages(result):
        url = str(record.get("url") or "")
        subdir, name = _place(record)
        if url.startswith("file://"):
            original, source = Path(unquote(urlsplit(url).path)), None
        else:
            original, source = scratch / "downloads" / subdir / name, shown_url(url)
            if not original.exists():
                sha256, size = record.get("sha256"), record.get("size")
                original.parent.mkdir(parents=True, exist_ok=True)
                download(
                    url,
                    original,
                    sha256=sha256 if isinstance(sha256, str) else None,
                    size=size if isinstance(size, int) else None,
                    authorize=authorize,
                )
        copy = repacked(original, cache, file_name=name, source=source)
        # The engine activates the build and host environments: their activation scripts are refused too.
        link_scripts.admit(
            copy.name, copy.link_scripts, where=source or str(original), activation=copy.activation_scripts
        )
        _link(copy.path, channel / subdir / name)
    index_channel(channel, check=False)  # each was checked as it was repacked
    return True


def _place(record: dict[str, Any]) -> tuple[str, str]:
    """The subdir and file name of a solved package, as its copy is put into the step's channel."""
    url = str(record.get("url") or "")
    subdir, name = str(record.get("subdir") or ""), str(record.get("fn") or url.rsplit("/", 1)[-1])
    if not _SUBDIR.fullmatch(subdir):
        raise ChannelError(
            f"the channel's index gives {shown_url(url)} the subdir {subdir!r}: not a conda subdir",
            fix="do not build with this channel; tell its owner",
        )
    if "/" in name or "\\" in name or name.startswith(".") or not name.endswith((".conda", ".tar.bz2")):
        raise ChannelError(
            f"the channel's index names the package file {name!r} for {shown_url(url)}: not a package file name",
            fix="do not build with this channel; tell its owner",
        )
    return subdir, name


def _link(copy: Path, target: Path) -> None:
    """Put the cached ``copy`` into a step's channel as ``target`` (a hard link, else a copy)."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(copy, target)
    except OSError:
        shutil.copyfile(copy, target)
