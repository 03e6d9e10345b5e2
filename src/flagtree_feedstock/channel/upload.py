"""Publish a built channel folder: upload each of its packages to prefix.dev or anaconda.org.

This module finds the packages, reads the token from the environment (never from the command line, where it
would land in logs and shell history; a blank one, or one with whitespace or another character no token has, is
refused before any request, and so is a ``--url`` of plain http to a host that is not this machine, or one
holding a user name or password, which would not be used), asks the server what it already holds
(:mod:`.server_files`: a rerun skips what is there with the same content and refuses a different file under
the same name), uploads the rest (:mod:`.upload_api`, the requests py-rattler-build's upload makes, with
timeouts and without following redirects) and turns failures into one-line errors that never contain the
token. To prefix.dev, a GitHub job without a key publishes by trusted publishing (:mod:`.trusted_publishing`)
and each package may go with its CEP 27 attestation (:mod:`.attestations`, ``--attestations DIR``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from flagtree_feedstock._http import Credential, HttpError, Origin, Timeouts, read, shown_url, unencrypted
from flagtree_feedstock.errors import ChannelError, ConfigurationError, NothingToDoError

from .attestations import read_attestations
from .folder import package_files
from .package_check import check_package
from .server_files import AUTH_SCHEMES, Server, ServerFiles
from .trusted_publishing import exchange_for_key, missing_credentials_error, oidc_request
from .upload_api import Api, UploadFailed, upload_to_anaconda, upload_to_prefix

LOGGER = logging.getLogger(__name__)

SERVERS: frozenset[str] = frozenset(get_args(Server))

# Where each server's token is read from; CI maps a repository secret of the same name onto it.
TOKEN_VARIABLES: Mapping[Server, str] = {"prefix": "PREFIX_API_KEY", "anaconda": "ANACONDA_API_KEY"}
# The public instances; --url points at a self-hosted one (or, in the tests, a local recorder).
DEFAULT_URLS: Mapping[Server, str] = {"prefix": "https://prefix.dev", "anaconda": "https://api.anaconda.org"}
# `upload --timeout`: the longest one request may take, whole: connecting, sending (a package), and the server's
# whole answer, however slowly it trickles in. A server answers an upload once it has stored and checked the
# whole file, a few seconds for the largest package here (flagtree-llvm, some hundred MB, sent in well under a
# minute from a CI runner): five minutes leaves room for a slow link and still ends a dead or trickling
# connection long before a CI job's own limit.
DEFAULT_TIMEOUT = 300.0
# Connecting (TCP and TLS) takes a second where the server is up; at most this long, or --timeout if shorter.
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True, kw_only=True)
class UploadRequest:
    """What to upload where. ``channel`` is the prefix.dev channel, or the anaconda.org owner."""

    channel_dir: Path
    server: Server
    channel: str
    url: str | None = None
    labels: tuple[str, ...] = ("main",)  # anaconda.org only: the labels (sub-channels) to upload to
    timeout: float | None = None  # seconds, each request whole [DEFAULT_TIMEOUT]
    attestations: Path | None = None  # prefix.dev only: a folder of <package file>.sigstore.json bundles

    @property
    def effective_url(self) -> str:
        return self.url or DEFAULT_URLS[self.server]

    @property
    def shown_url(self) -> str:
        """The server's URL as messages show it (:func:`.._urls.shown_url`)."""
        return shown_url(self.effective_url)


def parse_server(value: str) -> Server:
    """Return ``value`` as a known server or raise a one-line configuration error."""
    if value not in SERVERS:
        raise ConfigurationError(
            f"--to {value!r} is not a server the feedstock uploads to",
            fix=f"use one of {', '.join(sorted(SERVERS))}",
        )
    return value  # type: ignore[return-value]


def find_packages(channel_dir: Path) -> list[Path]:
    """Every package file in the subdirs of a channel folder, sorted (``repodata.json`` and the rest skipped),
    each checked whole and named after itself (:func:`.package_check.check_package`) before anything is sent."""
    if not channel_dir.is_dir():
        raise ConfigurationError(
            f"channel folder {channel_dir} does not exist",
            fix="pass the folder a build wrote (`flagtree-feedstock build --output-dir DIR`), or the merged CI artifacts",
        )
    packages = package_files(channel_dir)
    for package in packages:
        check_package(package)
    return packages


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
    if not (token.isascii() and token.isprintable()):
        raise ConfigurationError(
            f"{variable} holds a control character or one that is not ASCII (a stray byte): an API token has "
            "none, and it could not go into an HTTP header",
            fix=f"set {variable} again to the token as the server shows it (in CI: re-save the secret)",
        )
    return token


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
    oidc = _trusted_publishing(request.server, variable, env)
    token = read_token(variable, env, request.server) if oidc is None else ""
    origin, server = _checked_origin(request, variable if oidc is None else "the job's OIDC token")
    if oidc is not None:  # what the messages tell the user to check is then prefix.dev's setting, not a key
        variable = "the channel's trusted publishers on prefix.dev"
    timeouts = _timeouts(DEFAULT_TIMEOUT if request.timeout is None else request.timeout)
    attestations = _attestations(request, server, packages)
    if oidc is not None:
        token = exchange_for_key(server, oidc, timeouts)
        LOGGER.info(
            "trusted publishing: this job's OIDC token was exchanged for a short-lived prefix.dev key"
        )
    api = Api(
        url=server,
        credential=Credential(
            origin=origin, authorization=f"{AUTH_SCHEMES[request.server]} {token}", secret=token
        ),
        timeouts=timeouts,
    )
    files = ServerFiles(
        server=request.server,
        url=server,
        channel=request.channel,
        credential=api.credential,
        variable=variable,
        timeouts=api.timeouts,
    )
    LOGGER.info(
        "uploading %d package(s) to %s channel %s at %s",
        len(packages),
        request.server,
        request.channel,
        request.shown_url,
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
                _upload_one(api, request, package, attestations.get(package))
                done.append(package)
                continue
            except UploadFailed as exc:
                # Both servers answer 409 for a file name they hold: uploaded meanwhile, or held but not
                # listed yet. Ask again, and report the upload's own error if that does not explain it.
                held = files.held(package) if exc.conflict else None
                if held is None:
                    raise _upload_error(
                        request, variable, package, done, total=len(packages), exc=exc
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


def _trusted_publishing(server: Server, variable: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The OIDC request of a GitHub job where an upload to prefix.dev has no key (unset, or an unset secret's
    ""), so it publishes by trusted publishing; no key and no OIDC request is an error saying to give either."""
    if server != "prefix" or env.get(variable):
        return None
    oidc = oidc_request(env)
    if oidc is None:
        raise missing_credentials_error(variable, env)
    return oidc


def _attestations(request: UploadRequest, server: str, packages: list[Path]) -> dict[Path, bytes]:
    """Each package's attestation from ``--attestations``, checked against it (none without the option)."""
    if request.attestations is None:
        return {}
    if request.server != "prefix":
        raise ConfigurationError(
            f"--attestations: {request.server} takes no attestation with an upload",
            fix="drop --attestations (users verify the packages with gh attestation verify)",
        )
    channel_url = f"{server}/{request.channel}"
    return read_attestations(request.attestations, packages, channel_url)


def _checked_origin(request: UploadRequest, variable: str) -> tuple[Origin, str]:
    """The server's origin, which the token may go to, and its URL in the canonical form every request is made
    from (no trailing slash); a --url the token may not go to is refused."""
    try:
        url = read(request.effective_url)
        origin = Origin.of_url(url)
    except HttpError as exc:
        raise ConfigurationError(
            f"--url {exc}", fix=f"pass --url the server, e.g. {DEFAULT_URLS[request.server]}"
        ) from None
    if unencrypted(origin):
        raise ConfigurationError(
            f"--url {request.shown_url} is plain http to another machine: {variable} would cross the "
            "network unencrypted, so nothing is sent",
            fix=f"use {Origin('https', origin.host, 443)} (plain http only to this machine: localhost, 127.0.0.1, ::1)",
        )
    if url.username or url.password:
        raise ConfigurationError(
            f"--url {request.shown_url} holds a user name or password: it would not be used (the upload "
            f"authenticates with {variable}), and it would sit in your shell history and CI logs",
            fix=f"pass --url without it ({origin}); the token goes in {variable}",
        )
    return origin, url.href.rstrip("/")


def _timeouts(timeout: float) -> Timeouts:
    if not timeout > 0:
        raise ConfigurationError(
            f"--timeout {timeout:g} is not a positive number of seconds", fix="give e.g. --timeout 300"
        )
    return Timeouts(connect=min(CONNECT_TIMEOUT, timeout), read=timeout, total=timeout)


def _upload_one(api: Api, request: UploadRequest, package: Path, attestation: bytes | None) -> None:
    if request.server == "prefix":
        upload_to_prefix(api, request.channel, package, attestation)
    else:
        upload_to_anaconda(api, request.channel, request.labels, package)


def _refused_error(
    request: UploadRequest, refused: list[tuple[Path, str]], done: list[Path], there: list[Path]
) -> ChannelError:
    names = "; ".join(f"{package.name}: {why}" for package, why in refused)
    others = f"{len(done)} uploaded, {len(there)} already there"
    return ChannelError(
        f"{request.server} channel {request.channel} at {request.shown_url} already holds a different file "
        f"under the same name, not replaced: {names} ({others})",
        fix="a published file name is never replaced: raise the build number in recipe/recipe.yaml and "
        "meta.yaml and rebuild, or remove that file from the channel first",
    )


def _upload_error(
    request: UploadRequest,
    variable: str,
    package: Path,
    done: list[Path],
    *,
    total: int,
    exc: UploadFailed,
) -> ChannelError:
    """One line: the package that failed, the server's answer (never the token), what is already uploaded."""
    before = f"{len(done)} uploaded before it: {', '.join(p.name for p in done)}" if done else "none uploaded"
    if exc.fix is not None:  # the connection failed, or the server redirected the upload
        fix = f"{exc.fix}, or give the server longer with --timeout" if exc.timed_out else exc.fix
    elif exc.status is not None and exc.status >= 500:
        fix = "the server failed: retry later, or check --url"
    elif exc.conflict:  # a 409 the second look did not explain: held, but not listed (yet)
        fix = "the server holds a file of that name but does not list it yet: rerun later, or remove it there"
    else:
        fix = f"check {variable} (its scopes), the channel name and --url"
    return ChannelError(
        f"uploading {package.name} ({len(done) + 1} of {total}) to {request.server} channel {request.channel} "
        f"at {request.shown_url} failed: {exc.reason}; {before}",
        fix=fix,
    )
