"""What the engine installs into a build's environments: the toolkit's own copies only, or no build.

The engine solves, downloads and installs a step's environments in the one call that builds it; what it would
take from a channel, remote (``-c conda-forge``, ``-c https://…``) or local, is never seen by the toolkit
there. So before each step whose recipe requires a build or host environment (its own, or a staging output's
it inherits from), the engine solves that step alone (a ``solve`` call of :mod:`._worker`: its own render
with solve, and each staging output's requirements solved as an output of their own, nothing built), from
the channels :func:`presolve_channels` names, through the toolkit's relay. Every package of the solution,
wherever it comes from (the staging folder's, a local channel's, or a remote one's, downloaded against the
index's size and sha256 with the credentials of its origin), is repacked (:func:`..channel.repack.repacked`:
read by the toolkit's reader, written by its writer, checked whole, cached by the original's sha256 beside
the output folder) into a channel folder of that step's own (:func:`step_channel`); a package that carries
link scripts the user did not allow is refused. The solve reads run exports from the packages it solved,
fetched into a package cache of its own: the relay serves it the copies (:meth:`..channel.index_relay.Relay.
copy`), never the originals, so a package our reader refuses stops the build in the relay's line before the
engine reads it, and the copies made then are the step's (each package downloaded once).

The build call then reads that folder and the staging folder only (:func:`build_channels`): no remote URL, no
channel folder of the user's, no credentials. A package its solve needs that the copies lack (a solve that
differs from the one before it) stops the build in one line naming it (:func:`missing_copy`). It fails
closed: whatever fails while the copies are made (the solve before the build, a download, a package that
cannot be read, a link script not allowed) stops the build with its reason; the build never runs with the
channels as given. A step without build or host requirements gets the same two channels, its copies empty.

What this does not cover (docs/security.md): the packages of the tests' environment, which the engine solves
and installs in the build's call (from the same two channels: a test requirement the copies lack is missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._locks import FolderLock
from flagtree_feedstock._urls import shown_text, shown_url
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.channel.index_relay import Relay
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.channel.repack import repacked
from flagtree_feedstock.errors import BuildFailedError, ChannelError, DependencyError
from flagtree_feedstock.recipe.render import RenderedOutput

from ._worker import EngineCall, needs_environments, run_engine, solved_packages

_SUBDIR = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
# The package name a rendered requirement (a match spec: "name >=1.0 build*") starts with.
_SPEC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def installs_packages(output: RenderedOutput) -> bool:
    """Whether the engine installs a build or host environment for ``output``: its recipe requires one, or a
    staging output's it inherits from does (the engine makes that one's environments in the build call too)."""
    recipe = output.engine_variant.recipe.to_dict()
    return any(
        needs_environments(part.get("requirements"))
        for part in (recipe, *(recipe.get("staging_caches") or ()))
        if isinstance(part, dict)
    )


def presolve_channels(staging: Path, relay: Relay) -> tuple[str, ...]:
    """The channels the solve before a build reads: the staging folder (the packages built and held), then the
    user's channels as the toolkit's relay on loopback serves them (:mod:`..channel.index_relay`: every
    upstream byte fetched by the toolkit's client, with the credentials of its origin; the engine gets none).
    The one place that says which channels reach the engine's solve."""
    return (staging.as_uri(), *relay.urls)


def build_channels(copies: Path, staging: Path) -> tuple[str, ...]:
    """The channels of a build call: the step's copies, then the staging folder. Nothing remote, no folder of
    the user's: what the engine installs is the toolkit's own copy, or a package it built."""
    return (copies.as_uri(), staging.as_uri())


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
    relay: Relay,
    link_scripts: LinkScriptPolicy,
    name: str,
    given: Sequence[str],
) -> None:
    """Have the engine solve ``call`` (``name``: the step, as messages show it) alone; put the toolkit's copy
    (from ``cache``) of each package of its solution into ``channel`` and index it: a channel's, the copy the
    ``relay`` served the engine (or makes now); the staging folder's, repacked here. A package that carries
    link or activation scripts ``link_scripts`` does not allow is refused.
    Raised (no build without the copies): the engine cannot solve it, its worker ends without its answer, or
    a package cannot be fetched, read or admitted. ``given`` are the channels as the user gave them, whose
    secrets a message masks."""
    scratch = channel.parent
    solve = replace(call, mode="solve", events=False, up_to=call.up_to or (call.key[0] if call.key else None))
    # A package cache of its own: the relay's copies the solve fetches (to read run exports) are the build's
    # to install only through ``channel``.
    result = run_engine(
        solve, events=None, env={**env, "RATTLER_CACHE_DIR": str(scratch / "solve-cache")}, lock=lock
    )
    if result.outcome != "ok":  # no copies, no build: never one from the channels as given
        relay.check()  # the relay's own line (a channel refused or unreadable), not the engine's
        raise presolve_error(name, relay.shown(result.text), given, crashed=result.outcome == "crash")
    relay.check()  # fail closed: a channel the relay could not read is never left out of a solve
    records = solved_packages(result)
    for record in records:
        url = str(record.get("url") or "")
        subdir, file_name = place_of(record)
        if url.startswith("file://"):  # the staging folder's
            original = Path(unquote(urlsplit(url).path))
            copy, where = repacked(original, cache, file_name=file_name), str(original)
        else:  # a channel's: the copy the relay served the engine, downloaded once (else refused: not its URL)
            copy, where = relay.copy(url), relay.source(url)
        # The engine activates the build and host environments: their activation scripts are refused too.
        link_scripts.admit(copy.name, copy.link_scripts, where=where, activation=copy.activation_scripts)
        link_copy(copy.path, channel / subdir / file_name)
    if records:  # else it stays as step_channel made it, empty
        index_channel(channel, check=False)  # each was checked as it was repacked


def presolve_error(
    name: str, text: str, given: Sequence[str], *, crashed: bool
) -> DependencyError | BuildFailedError:
    """The one line for a solve before the build of ``name`` that failed with the engine's message ``text``
    (``crashed``: the worker ended without the engine's answer); the secrets of ``given`` masked. The engine
    reports a channel it cannot read (refused, unreachable, a damaged index) as a solve that failed."""
    reason = text.strip().splitlines()[0] if text.strip() else "no message"
    reason = shown_text(reason.removeprefix("PyRattlerBuildError: "), given)
    if not crashed and "solve" in reason.lower():
        return DependencyError(
            f"the build/host requirements of {name} could not be solved from "
            f"{', '.join(shown_url(c) for c in given[1:]) or 'no channel'}",
            fix="pass --channel with a reachable channel that has them (conda-forge needs network access)",
        )
    return BuildFailedError(
        f"solving what the build of {name} would install, to repack it first, failed: {reason}; nothing was "
        "built",
        fix="rerun; if it fails again, report it as a bug of flagtree-feedstock with the output above",
    )


def missing_copy(
    name: str, output: RenderedOutput, text: str, given: Sequence[str], *, copies: Path
) -> DependencyError | None:
    """The one line for a build call of ``name`` (its rendered ``output``) whose solve failed (the engine's
    message ``text``): it reads only the step's ``copies`` and the staging folder, so what it lacked was not in
    the solve before it. The engine's message names no package: the line names each requirement of the step
    that ``copies`` holds no package of. None: not a solve's failure."""
    reason = text.strip().splitlines()[0] if text.strip() else ""
    if "solve" not in reason.lower():
        return None
    held = {
        str(record.get("name"))
        for index in copies.glob("*/repodata.json")
        for key in ("packages", "packages.conda")
        for record in (json.loads(index.read_text(encoding="utf-8")).get(key) or {}).values()
    }
    lacking = sorted(_required(output) - held)
    return DependencyError(
        f"the build of {name} needs "
        f"{', '.join(lacking) if lacking else 'a package'}, which the solve before it did not take (the build "
        f"installs only the toolkit's copies of that solve's packages): "
        f"{shown_text(reason.removeprefix('PyRattlerBuildError: '), given)}",
        fix="rerun: both solves read the channels again; if it fails again, report it with the recipe",
    )


def _required(output: RenderedOutput) -> set[str]:
    """The package names the build and host requirements of ``output`` and of its staging outputs name."""
    recipe = output.engine_variant.recipe.to_dict()
    return {
        match.group()
        for part in (recipe, *(recipe.get("staging_caches") or ()))
        if isinstance(part, dict)
        for environment in ("build", "host")
        for spec in (part.get("requirements") or {}).get(environment) or ()
        if isinstance(spec, str) and (match := _SPEC_NAME.match(spec))
    }


def place_of(record: dict[str, Any]) -> tuple[str, str]:
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


def link_copy(copy: Path, target: Path) -> None:
    """Put the cached ``copy`` into a step's channel as ``target`` (a hard link, else a copy)."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(copy, target)
    except OSError:
        shutil.copyfile(copy, target)
