"""Publish a built channel folder: upload each of its packages to prefix.dev or anaconda.org.

The upload itself is py-rattler-build's (``rattler_build.upload``); this module finds the packages, reads the
token from the environment (never from the command line, where it would land in logs and shell history) and
turns failures into one-line errors that never contain the token.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from ._engine import require
from .channel import package_files
from .errors import ChannelError, ConfigurationError, NothingToDoError

LOGGER = logging.getLogger(__name__)

Server = Literal["prefix", "anaconda"]
SERVERS: frozenset[str] = frozenset(get_args(Server))

# Where each server's token is read from; CI maps a repository secret of the same name onto it.
TOKEN_VARIABLES: Mapping[Server, str] = {"prefix": "PREFIX_API_KEY", "anaconda": "ANACONDA_API_KEY"}
# The public instances; --url points at a self-hosted one (or, in the tests, a local recorder).
DEFAULT_URLS: Mapping[Server, str] = {"prefix": "https://prefix.dev", "anaconda": "https://api.anaconda.org"}


@dataclass(frozen=True, kw_only=True)
class UploadRequest:
    """What to upload where. ``channel`` is the prefix.dev channel, or the anaconda.org owner."""

    channel_dir: Path
    server: Server
    channel: str
    url: str | None = None
    labels: tuple[str, ...] = ("main",)  # anaconda.org only: the labels (sub-channels) to upload to

    @property
    def effective_url(self) -> str:
        return self.url or DEFAULT_URLS[self.server]


def parse_server(value: str) -> Server:
    """Return ``value`` as a known server or raise a one-line configuration error."""
    if value not in SERVERS:
        raise ConfigurationError(
            f"--to {value!r} is not a server the feedstock uploads to",
            fix=f"use one of {', '.join(sorted(SERVERS))}",
        )
    return value  # type: ignore[return-value]


def find_packages(channel_dir: Path) -> list[Path]:
    """Every package file in the subdirs of a channel folder, sorted (``repodata.json`` and the rest skipped)."""
    if not channel_dir.is_dir():
        raise ConfigurationError(
            f"channel folder {channel_dir} does not exist",
            fix="pass the folder a build wrote (`flagtree-feedstock build --output-dir DIR`), or the merged CI artifacts",
        )
    return package_files(channel_dir)


def upload_channel(request: UploadRequest, env: Mapping[str, str]) -> list[Path]:
    """Upload every package of ``request.channel_dir``; return the uploaded files."""
    if not request.channel.strip():
        raise ConfigurationError(
            "the target channel name is empty",
            fix="pass --channel NAME (in CI: set the repository variable CHANNEL_NAME)",
        )
    packages = find_packages(request.channel_dir)
    if not packages:
        raise NothingToDoError(
            f"no packages (*.conda, *.tar.bz2) in the subdirs of {request.channel_dir}",
            fix="build into it first: flagtree-feedstock build --output-dir DIR",
        )
    variable = TOKEN_VARIABLES[request.server]
    token = env.get(variable, "")
    if not token:
        raise ConfigurationError(
            f"{variable} is not set: uploading to {request.server} needs its API token",
            fix=f"export {variable}=<token> (in CI: a repository secret of that name)",
        )
    upload = require("rattler_build.upload", "py-rattler-build")
    rb = require("rattler_build", "py-rattler-build")
    LOGGER.info(
        "uploading %d package(s) to %s channel %s at %s",
        len(packages),
        request.server,
        request.channel,
        request.effective_url,
    )
    # One package per call: after a failure the error says which packages are on the server, and the one
    # that failed (perhaps half-uploaded: staged but not committed) is never reported as uploaded.
    done: list[Path] = []
    for package in packages:
        try:
            if request.server == "prefix":
                upload.upload_package_to_prefix(
                    [str(package)], request.effective_url, request.channel, api_key=token
                )
            else:
                upload.upload_package_to_anaconda(
                    [str(package)],
                    request.channel,
                    channel=list(request.labels),
                    api_key=token,
                    url=request.url,
                )
        except rb.RattlerBuildError as exc:
            raise _upload_error(
                request, variable, token, package, done, total=len(packages), exc=exc
            ) from None
        done.append(package)
    return done


def _upload_error(
    request: UploadRequest,
    variable: str,
    token: str,
    package: Path,
    done: list[Path],
    *,
    total: int,
    exc: Exception,
) -> ChannelError:
    """One line: the package that failed, the server's answer (never the token), what is already uploaded."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = reason.replace(token, "***")
    before = f"{len(done)} uploaded before it: {', '.join(p.name for p in done)}" if done else "none uploaded"
    status = re.search(r"(?:HTTP |\()([45]\d\d)\b", reason)
    if status and status.group(1).startswith("5"):
        fix = "the server failed: retry later, or check --url"
    else:
        fix = f"check {variable} (its scopes), the channel name and --url"
    return ChannelError(
        f"uploading {package.name} ({len(done) + 1} of {total}) to {request.server} channel {request.channel} "
        f"at {request.effective_url} failed: {reason}; {before}",
        fix=fix,
    )
