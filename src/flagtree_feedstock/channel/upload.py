"""Publish a built channel folder: upload each of its packages to prefix.dev or anaconda.org.

The upload itself is py-rattler-build's (``rattler_build.upload``); this module finds the packages, reads the
token from the environment (never from the command line, where it would land in logs and shell history; a
blank one, or one with whitespace, is refused before any request), asks the server what it already holds
(:mod:`.server_files`: a rerun skips what is there with the same content and refuses a different file under
the same name) and turns failures into one-line errors that never contain the token.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import get_args
from urllib.parse import quote

from flagtree_feedstock._engine import require
from flagtree_feedstock.errors import ChannelError, ConfigurationError, NothingToDoError

from .folder import package_files
from .server_files import Server, ServerFiles

LOGGER = logging.getLogger(__name__)

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


def read_token(variable: str, env: Mapping[str, str], server: str) -> str:
    """The API token in ``variable``; empty, or holding whitespace (a pasted line break), is refused."""
    token = env.get(variable)
    if token is None:
        raise ConfigurationError(
            f"{variable} is not set: uploading to {server} needs its API token",
            fix=f"export {variable}=<token> (in CI: a repository secret of that name)",
        )
    if not token.strip():
        raise ConfigurationError(
            f"{variable} is empty: uploading to {server} needs its API token",
            fix=f"export {variable}=<token> (in CI: check that the secret {variable} is set and not blank)",
        )
    if any(character.isspace() for character in token):
        raise ConfigurationError(
            f"{variable} holds whitespace (a space, tab or line break): an API token has none",
            fix=f"set {variable} again without the spaces or the trailing newline (in CI: re-save the secret)",
        )
    return token


def redact(text: str, token: str) -> str:
    """``text`` with the token replaced, in each form a server may echo it in: as sent, JSON-escaped (also
    with ``\\/``), URL-quoted. Only the token: a blank one (never read as a token) changes nothing."""
    escaped = json.dumps(token)[1:-1]
    for form in sorted(
        {token, escaped, escaped.replace("/", "\\/"), quote(token, safe="")}, key=len, reverse=True
    ):
        if form.strip():
            text = text.replace(form, "***")
    return text


def upload_channel(request: UploadRequest, env: Mapping[str, str]) -> list[Path]:
    """Upload every package of ``request.channel_dir`` the server does not hold yet; return the uploaded files.

    A package the server already holds with the same content is skipped (a rerun after a partial failure
    resumes); a different file under the same name is refused, after the others are uploaded.
    """
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
    token = read_token(variable, env, request.server)
    upload = require("rattler_build.upload", "py-rattler-build")
    rb = require("rattler_build", "py-rattler-build")
    files = ServerFiles(
        server=request.server,
        url=request.effective_url,
        channel=request.channel,
        token=token,
        variable=variable,
    )
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
    there: list[Path] = []
    refused: list[tuple[Path, str]] = []
    for package in packages:
        held = files.held(package)
        if held is None:
            try:
                _upload_one(upload, request, package, token)
                done.append(package)
                continue
            except rb.RattlerBuildError as exc:
                # Both servers answer 409 for a file name they hold: uploaded meanwhile, or held but not
                # listed yet. Ask again, and report the upload's own error if that does not explain it.
                held = files.held(package) if _conflict(exc) else None
                if held is None:
                    raise _upload_error(
                        request, variable, token, package, done, total=len(packages), exc=exc
                    ) from None
        difference = held.differs_from(package, request.labels if request.server == "anaconda" else ())
        if difference is None:
            LOGGER.info("%s: already on %s channel %s, the same file; skipped", package.name, request.server,
                        request.channel)  # fmt: skip
            there.append(package)
        else:
            refused.append((package, difference))
    if refused:
        raise _refused_error(request, refused, done, there)
    return done


def _upload_one(upload: ModuleType, request: UploadRequest, package: Path, token: str) -> None:
    if request.server == "prefix":
        upload.upload_package_to_prefix([str(package)], request.effective_url, request.channel, api_key=token)
    else:
        upload.upload_package_to_anaconda(
            [str(package)], request.channel, channel=list(request.labels), api_key=token, url=request.url
        )


def _conflict(exc: Exception) -> bool:
    """Whether the engine's error is the server's 409 for a file name it holds (py-rattler-build 0.73's words:
    prefix.dev "package already exists (HTTP 409)", anaconda.org "file NAME already exists")."""
    return "already exists" in str(exc)


def _refused_error(
    request: UploadRequest, refused: list[tuple[Path, str]], done: list[Path], there: list[Path]
) -> ChannelError:
    names = "; ".join(f"{package.name}: {why}" for package, why in refused)
    others = f"{len(done)} uploaded, {len(there)} already there"
    return ChannelError(
        f"{request.server} channel {request.channel} at {request.effective_url} already holds a different file "
        f"under the same name, not replaced: {names} ({others})",
        fix="a published file name is never replaced: raise the build number in recipe/recipe.yaml and "
        "meta.yaml and rebuild, or remove that file from the channel first",
    )


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
    reason = redact(reason, token)
    before = f"{len(done)} uploaded before it: {', '.join(p.name for p in done)}" if done else "none uploaded"
    status = re.search(r"(?:HTTP |\()([45]\d\d)\b", reason)
    if status and status.group(1).startswith("5"):
        fix = "the server failed: retry later, or check --url"
    elif _conflict(exc):  # a 409 the second look did not explain: held, but not listed (yet)
        fix = "the server holds a file of that name but does not list it yet: rerun later, or remove it there"
    else:
        fix = f"check {variable} (its scopes), the channel name and --url"
    return ChannelError(
        f"uploading {package.name} ({len(done) + 1} of {total}) to {request.server} channel {request.channel} "
        f"at {request.effective_url} failed: {reason}; {before}",
        fix=fix,
    )
