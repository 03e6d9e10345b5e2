"""The packages a solve took, each installed from the toolkit's own copy; a remote one downloaded first.

py-rattler's installer installs what it downloads, unchecked, read its own way. So ``channel install`` hands it
records pointing at copies the toolkit wrote (:func:`use_repacked_copies`, :mod:`.repack`): a local channel's
package is repacked from its file; a remote channel's is first downloaded by the toolkit itself (its HTTP client,
:mod:`flagtree_feedstock._http`, with the credentials of its origin) into a folder of the run's own, at most the
size the channel's index gives (else :data:`MAX_PACKAGE_BYTES`), and checked against the index's sha256 and size
(:func:`download`). The records carry the copy's ``file://`` URL, sha256, md5 and size: the installer never
downloads again, and takes no other file of that name from its cache.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._http import Credential, HttpError, Timeouts, open_request, status_text
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ChannelError

from .link_scripts import LinkScriptPolicy
from .repack import repacked

LOGGER = logging.getLogger(__name__)
# A package file larger than this is not downloaded when the channel's index gives no size. The largest
# package this feedstock builds, flagtree-llvm, is well under 1 GB as a .conda.
MAX_PACKAGE_BYTES = 8 << 30
TIMEOUTS = Timeouts(connect=30, read=60)
_SUFFIXES = (".conda", ".tar.bz2")


# How a package's URL is asked for with its channel's credentials (credentials.EngineChannels.authorize): the
# solve's URLs carry no secret, so they come from the channels as the user gave them, for their origin only.
Authorize = Callable[[str], tuple[str, Credential | None]]


def use_repacked_copies(
    records: Sequence[Any],
    folder: Path,
    cache: Path,
    *,
    authorize: Authorize,
    link_scripts: LinkScriptPolicy,
) -> bool:
    """Point every record (py-rattler's ``RepoDataRecord``) at the toolkit's own copy of its package
    (:func:`.repack.repacked`, cached in ``cache``): a local channel's from its file, a remote channel's
    downloaded into ``folder`` first with ``authorize``. Whether any of them runs link scripts, which
    ``link_scripts`` allowed (one it does not allow is refused)."""
    runs_scripts = False
    for number, record in enumerate(records):
        url = str(record.url)
        if urlsplit(url).scheme == "file":
            original, source = Path(unquote(urlsplit(url).path)), None
        else:
            original, source = folder / str(number) / str(record.file_name), shown_url(url)
            expected = record.sha256.hex() if record.sha256 else None
            download(url, original, sha256=expected, size=record.size, authorize=authorize)
        copy = repacked(original, cache, file_name=str(record.file_name), source=source)
        runs_scripts |= link_scripts.admit(copy.name, copy.link_scripts, where=source or str(original))
        record.url = copy.path.as_uri()
        # The installer's cache takes this copy, no other of its name, and checks it against these.
        record.sha256 = bytes.fromhex(copy.sha256)
        record.md5 = bytes.fromhex(copy.md5)
        record.size = copy.size
    return runs_scripts


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
