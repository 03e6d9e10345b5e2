"""The packages a solve took from a remote channel, downloaded into a folder of the run's own and checked first.

py-rattler's installer installs what it downloads, unchecked. So ``channel install`` downloads each package
the solve took from a remote channel itself (the toolkit's HTTP client, :mod:`flagtree_feedstock._http`), at
most the size the channel's index gives (else :data:`MAX_PACKAGE_BYTES`), checks it against the index's sha256
and size, then checks it as every package is checked (:func:`.folder.check_package`: whole, safe, named after
itself), and hands the installer the record pointing at that checked copy (a ``file://`` URL, its sha256 set):
the installer never downloads again. A package of a local channel was checked whole before the solve.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


def use_checked_copies(
    records: Sequence[Any], folder: Path, check: Callable[[Path, str], None], *, authorize: Authorize
) -> None:
    """Download every record (py-rattler's ``RepoDataRecord``) of a remote channel into ``folder`` with
    ``authorize``, check it with ``check`` (:func:`.folder.check_package`), and point the record at the
    checked copy."""
    for number, record in enumerate(records):
        url = str(record.url)
        if urlsplit(url).scheme == "file":
            continue
        expected = record.sha256.hex() if record.sha256 else None
        copy = folder / str(number) / str(record.file_name)
        digest = checked_copy(url, copy, sha256=expected, size=record.size, check=check, authorize=authorize)
        record.url = copy.as_uri()
        record.sha256 = bytes.fromhex(digest)  # the installer's cache takes this copy, no other of its name


def checked_copy(
    url: str,
    copy: Path,
    *,
    sha256: str | None,
    size: int | None,
    check: Callable[[Path, str], None],
    authorize: Authorize,
) -> str:
    """Download ``url`` to ``copy`` (a new file), within the size the index gives and with its sha256, and
    check it with ``check``; the copy's sha256. A package refused raises :class:`ChannelError`."""
    folder, name = copy.parent, copy.name
    digest = _download(url, name, folder, sha256=sha256, size=size, authorize=authorize)
    check(copy, shown_url(url))
    return digest


def _download(
    url: str, name: str, folder: Path, *, sha256: str | None, size: int | None, authorize: Authorize
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
        with open_request("GET", asked, timeouts=TIMEOUTS, credential=credential) as answer:
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
