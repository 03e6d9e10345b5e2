"""Trusted publishing to prefix.dev: the GitHub job's OIDC token exchanged for a short-lived API key.

A GitHub job with ``permissions: id-token: write`` gets two variables, ``ACTIONS_ID_TOKEN_REQUEST_URL`` and
``ACTIONS_ID_TOKEN_REQUEST_TOKEN``. With them, and no ``PREFIX_API_KEY``, the upload authenticates as rattler's
does (conda/rattler ``crates/rattler_upload/src/upload/trusted_publishing.rs``, ``get_github_oidc_token`` and
``get_publish_token``; ``crates/rattler_networking/src/oidc_exchange.rs``, ``prefix_mint``):

1. ``GET {ACTIONS_ID_TOKEN_REQUEST_URL}&audience=prefix.dev`` with ``Authorization: bearer {REQUEST_TOKEN}``;
   GitHub answers ``{"value": "<JWT>"}``, an OIDC token for the audience ``prefix.dev`` (prefix.dev's servers
   check that audience).
2. ``POST {server}/api/oidc/mint_token`` with ``{"token": "<JWT>"}``; prefix.dev checks the token's claims
   (repository, workflow) against the channel's trusted publishers and answers with a short-lived API key as
   the whole body. (rattler-build before its upload moved into rattler read ``{"token": "<key>"}`` instead,
   ``src/upload/trusted_publishing.rs``'s ``PublishToken``: that form is read too.)
3. The upload sends that key as ``Authorization: Bearer``, as it sends a ``PREFIX_API_KEY``.

Both requests go through the toolkit's HTTP client (:mod:`flagtree_feedstock._http`): the request token is a
credential of GitHub's endpoint's origin only, the JWT goes in a body to the upload server's origin only (a
POST never follows a redirect), each over https or to a loopback host, with the upload's deadlines. None of
the three secrets is printed, logged, written to a file or passed to a process: every error is made of
origins, numbers and the standard library's words; a server's refusal is quoted with the JWT masked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._foreign_text import bounded
from flagtree_feedstock._http import (
    Credential,
    HttpError,
    Origin,
    Timeouts,
    open_request,
    read,
    redact,
    shown_url,
    status_text,
    unencrypted,
)
from flagtree_feedstock.errors import ChannelError, ConfigurationError

REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
AUDIENCE = "prefix.dev"  # the `aud` claim prefix.dev's mint endpoint accepts
MINT_PATH = "/api/oidc/mint_token"
# An OIDC answer or an API key is a few KB; anything far longer is not one.
MAX_TOKEN_ANSWER = 64 << 10
SNIPPET = 200  # characters of a refusal quoted in the error
# A bearer token as RFC 6750 spells it (a JWT is base64url parts joined by dots): nothing else is a key.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
SETUP_FIX = (
    "add this repository and workflow as a trusted publisher in the channel's settings on prefix.dev "
    "(docs/ci-and-publishing.md), or set PREFIX_API_KEY"
)


def oidc_request(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The OIDC request URL and token of a GitHub job with ``id-token: write``, or None where neither is set.

    One of them without the other is a configuration error: the job is not what trusted publishing needs.
    """
    url, token = env.get(REQUEST_URL, ""), env.get(REQUEST_TOKEN, "")
    if not url and not token:
        return None
    if not url or not token:
        missing, present = (REQUEST_URL, REQUEST_TOKEN) if not url else (REQUEST_TOKEN, REQUEST_URL)
        raise ConfigurationError(
            f"{missing} is not set though {present} is: GitHub sets both in a job that may request an OIDC "
            "token, so trusted publishing cannot start",
            fix="give the publishing job `permissions: id-token: write` (and do not set those variables "
            "yourself), or set PREFIX_API_KEY",
        )
    return url, token


def missing_credentials_error(variable: str, env: Mapping[str, str]) -> ConfigurationError:
    """No key in ``variable`` and no OIDC token to request: what to do about either."""
    state = "is empty" if variable in env else "is not set"
    return ConfigurationError(
        f"{variable} {state} and no OIDC token can be requested here ({REQUEST_URL} is not set): uploading to "
        "prefix needs an API token or trusted publishing",
        fix=f"in a GitHub job, add `permissions: id-token: write` to it to publish by trusted publishing "
        f"(docs/ci-and-publishing.md); elsewhere export {variable}=<token>",
    )


def exchange_for_key(server_url: str, request: tuple[str, str], timeouts: Timeouts) -> str:
    """A short-lived prefix.dev API key for ``server_url``, from the job's OIDC token (module docstring)."""
    jwt = _oidc_token(*request, timeouts)
    return _mint(server_url.rstrip("/") + MINT_PATH, jwt, timeouts)


def _oidc_token(url: str, request_token: str, timeouts: Timeouts) -> str:
    try:
        endpoint = read(url)
        origin = Origin.of_url(endpoint)
    except HttpError as exc:
        raise ConfigurationError(
            f"{REQUEST_URL}: {exc}", fix="let GitHub set it: do not set it yourself"
        ) from None
    if unencrypted(origin):
        raise ConfigurationError(
            f"{REQUEST_URL} ({shown_url(url)}) is plain http to another machine: the OIDC request token "
            "would cross the network unencrypted, so nothing is sent",
            fix="let GitHub set it (an https URL): do not set it yourself",
        )
    query = f"{endpoint.query}&" if endpoint.query else ""
    target = endpoint.replaced(search=f"{query}audience={AUDIENCE}", hash="").href
    where = f"GitHub's OIDC endpoint ({origin})"
    credential = Credential(origin=origin, authorization=f"bearer {request_token}", secret=request_token)
    try:
        with open_request(
            "GET", target, timeouts=timeouts, credential=credential, headers={"Accept": "application/json"}
        ) as answer:
            if answer.status != 200:
                raise ChannelError(
                    f"{where} answered the request for an OIDC token with {status_text(answer.status)}",
                    fix="check that the publishing job has `permissions: id-token: write`; retry if GitHub "
                    "is failing",
                )
            data = answer.read_all(MAX_TOKEN_ANSWER)
    except HttpError as exc:
        raise ChannelError(f"requesting an OIDC token: {exc}", fix=exc.fix) from None
    try:
        value = parse_json(data).get("value")  # type: ignore[attr-defined]
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, str) or not TOKEN_SHAPE.fullmatch(value):
        raise ChannelError(
            f'{where} answered without an OIDC token (not a JSON object with a token in "value"; '
            f"{len(data)} bytes)",
            fix="retry; if it persists, GitHub's OIDC endpoint is failing",
        )
    return value


def _mint(url: str, jwt: str, timeouts: Timeouts) -> str:
    origin = Origin.of(url)
    if unencrypted(origin):  # the upload refuses such a --url before this; the JWT is a credential too
        raise ConfigurationError(
            f"not sending the OIDC token to {origin}: plain http to another machine", fix="check --url"
        )
    where = f"{origin} answered the trusted-publishing exchange (POST {MINT_PATH})"
    try:
        with open_request(
            "POST",
            url,
            timeouts=timeouts,
            headers={"Content-Type": "application/json"},
            body=(json.dumps({"token": jwt}).encode(),),
        ) as answer:
            if not 200 <= answer.status < 300:
                raise _refusal(answer.status, answer.read_all(MAX_TOKEN_ANSWER), where, jwt)
            data = answer.read_all(MAX_TOKEN_ANSWER)
    except HttpError as exc:
        raise ChannelError(
            f"the trusted-publishing exchange: {redact(exc.message, jwt)}", fix=exc.fix
        ) from None
    key = _key(data)
    if key is None:
        raise ChannelError(
            f"{where} with something that is not an API key ({len(data)} bytes)",
            fix="retry; if it persists, check --url: it must name prefix.dev or a server of its kind",
        )
    return key


def _refusal(status: int, body: bytes, where: str, jwt: str) -> ChannelError:
    """A refused exchange: one line quoting the start of the server's reason, with the JWT masked."""
    text = redact(" ".join(body.decode("utf-8", "replace").split()), jwt)
    text = bounded(text, SNIPPET)
    message = f"{where} with {status_text(status)}" + (f": {text}" if text else "")
    if status >= 500:
        return ChannelError(message, fix="prefix.dev failed: retry later, or set PREFIX_API_KEY")
    return ChannelError(message + " (the OIDC token was refused)", fix=SETUP_FIX)


def _key(data: bytes) -> str | None:
    """The API key an exchange answered: the whole body, or the ``token`` of a JSON object."""
    key: object = data.decode("ascii", "replace").strip()
    if str(key).startswith("{"):
        try:
            key = parse_json(str(key)).get("token")  # type: ignore[attr-defined]
        except (ValueError, AttributeError):
            return None
    return key if isinstance(key, str) and TOKEN_SHAPE.fullmatch(key) else None
