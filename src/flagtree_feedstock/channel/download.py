"""A remote channel's package downloaded by the toolkit itself, checked against the channel's index.

The toolkit's HTTP client (:mod:`flagtree_feedstock._http`, with the credentials of the package's origin) writes
it into a folder of the run's own, at most the size the channel's index gives (else :data:`MAX_PACKAGE_BYTES`),
and checks it against the index's sha256 and size (:func:`download`). Its users: ``channel install``
(:mod:`.install`), the relay's shards (:mod:`.index_relay`), a build's step copies and package tests.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from flagtree_feedstock._http import Credential, HttpError, Timeouts, open_request, status_text
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ChannelError

LOGGER = logging.getLogger(__name__)
# A package file larger than this is not downloaded when the channel's index gives no size. The largest
# package this feedstock builds, flagtree-llvm, is well under 1 GB as a .conda.
MAX_PACKAGE_BYTES = 8 << 30
TIMEOUTS = Timeouts(connect=30, read=60)
_SUFFIXES = (".conda", ".tar.bz2")


# How a package's URL is asked for with its channel's credentials (credentials.EngineChannels.authorize): the
# solve's URLs carry no secret, so they come from the channels as the user gave them, for their origin only.
Authorize = Callable[[str], tuple[str, Credential | None]]


def download(
    url: str,
    copy: Path,
    *,
    sha256: str | None,
    size: int | None,
    authorize: Authorize,
    timeouts: Timeouts = TIMEOUTS,
) -> str:
    """Download ``url`` to ``copy`` (a new file), within the size the index gives and with its sha256, each
    request within ``timeouts``; the copy's sha256."""
    return _download(
        url, copy.name, copy.parent, sha256=sha256, size=size, authorize=authorize, timeouts=timeouts
    )


def _download(
    url: str,
    name: str,
    folder: Path,
    *,
    sha256: str | None,
    size: int | None,
    authorize: Authorize,
    timeouts: Timeouts,
) -> str:
    """``url`` downloaded into ``folder/name``, within the size the index gives; its sha256."""
    shown = shown_url(url)
    if "/" in name or "\\" in name or not name.endswith(_SUFFIXES) or name.startswith("."):
        raise ChannelError(
            f"the channel's index names the package file {name!r} for {shown}: not a package file name",
            fix="do not install from this channel; tell its owner",
        )
    limit = size if size else MAX_PACKAGE_BYTES
    too_large = ChannelError(
        f"{shown} is larger than the {limit} bytes "
        f"{'its channel index gives' if size else 'a package may have'}: not downloaded further, not used",
        fix="do not install from this channel; tell its owner",
    )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    digest = hashlib.sha256()
    received = 0
    LOGGER.info("downloading %s", shown)
    try:
        asked, credential = authorize(url)
        with open_request("GET", asked, timeouts=timeouts, credential=credential) as answer:
            if answer.status != 200:
                raise ChannelError(
                    f"{shown} could not be downloaded: the server answered {status_text(answer.status)}",
                    fix="check the channel, or install without that -c channel",
                )
            body = answer.bounded_chunks(limit, too_large)
            with target.open("xb") as out:
                for chunk in body:
                    received += len(chunk)
                    digest.update(chunk)
                    out.write(chunk)
    except HttpError as exc:
        raise ChannelError(f"{shown} could not be downloaded: {exc}", fix=exc.fix) from None
    if size and received != size:
        raise ChannelError(
            f"{shown} has {received} bytes, its channel index says {size}: not used",
            fix="download again later (the channel may be changing); if it stays so, tell the channel's owner",
        )
    if sha256 is not None and digest.hexdigest() != sha256:
        raise ChannelError(
            f"{shown} has the sha256 {digest.hexdigest()}, its channel index says {sha256}: not used",
            fix="download again later (the channel may be changing); if it stays so, tell the channel's owner",
        )
    return digest.hexdigest()
