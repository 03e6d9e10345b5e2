"""The channels as the engine is given them: bare URLs, their credentials in a file of mode 0600.

A ``--channel`` may carry a secret: a password (``https://user:PW@host/chan``) or anaconda.org's token
(``https://conda.anaconda.org/t/TOKEN/chan``). Given to py-rattler-build in the URL, it would be written
where others can read it: into the engine's repodata cache beside the output folder (each subdir's
``.info.json`` records the URL, mode 0644, kept between runs) and the channels recorded in each package. So the
engine gets each channel without its userinfo, token and query (rattler does not send a channel's query
anyway), and the credentials go into a rattler authentication file (``RATTLER_AUTH_FILE``: ``BasicHTTP`` for a
user and password, ``CondaToken`` for a ``/t/`` token, which rattler puts back into the path of each request),
in a private folder that is removed when the build ends. A ``RATTLER_AUTH_FILE`` of your own is read and kept
in it (for a host both name, the channel's credentials win).

Rattler keys the file by host: a channel with both a password and a token, or two channels of one host with
different credentials, cannot be expressed, and is refused in one line.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ConfigurationError

AUTH_VARIABLE = "RATTLER_AUTH_FILE"
_MAX_AUTH_FILE = 1 << 20  # a user's own authentication file: a few entries


@dataclass(frozen=True, kw_only=True)
class EngineChannels:
    """The channels for the engine (no secret in any), and the credentials they need, by host."""

    channels: tuple[str, ...]
    credentials: Mapping[str, object] = field(default_factory=dict)


def split_credentials(channels: Sequence[str]) -> EngineChannels:
    """``channels`` without their secrets, and those secrets as rattler authentication entries by host."""
    bare: list[str] = []
    credentials: dict[str, object] = {}
    for channel in channels:
        url, host, entry = _split(channel)
        bare.append(url)
        if entry is None:
            continue
        if credentials.get(host, entry) != entry:
            raise ConfigurationError(
                f"channel {shown_url(channel)}: another --channel of {host} has other credentials, and rattler "
                "takes one per host",
                fix="give each host's channels the same credentials, or put them in your RATTLER_AUTH_FILE",
            )
        credentials[host] = entry
    return EngineChannels(channels=tuple(bare), credentials=credentials)


def _split(channel: str) -> tuple[str, str, object | None]:
    """``channel`` without its secrets, its host and its authentication entry (None without a secret)."""
    parts = urlsplit(channel)
    if not parts.scheme or not parts.netloc or parts.scheme == "file":
        return channel, "", None
    host = parts.hostname or ""
    segments = parts.path.split("/")
    token = None
    if len(segments) > 2 and segments[1] == "t":  # /t/<token>/<channel>
        token, segments = unquote(segments[2]), ["", *segments[3:]]
    netloc = parts.netloc.rpartition("@")[2]
    bare = urlunsplit((parts.scheme, netloc, "/".join(segments), "", ""))
    if parts.username is not None and token is not None:
        raise ConfigurationError(
            f"channel {shown_url(channel)} has both a password and a /t/ token, and rattler takes one "
            "credential per host",
            fix="keep one of them (anaconda.org: the token)",
        )
    if token is not None:
        return bare, host, {"CondaToken": token}
    if parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
        return bare, host, {"BasicHTTP": {"username": user, "password": password}}
    return bare, host, None


@contextmanager
def engine_environment(engine: EngineChannels, env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``env`` for the engine: with the credentials in an authentication file of mode 0600 (in a folder of
    mode 0700, removed on leaving), merged over the user's own ``RATTLER_AUTH_FILE``; ``env`` unchanged
    when no channel carries a secret."""
    if not engine.credentials:
        yield dict(env)
        return
    entries = {**_own_entries(env), **engine.credentials}
    folder = Path(tempfile.mkdtemp(prefix="flagtree-feedstock-auth-"))
    try:
        path = folder / "auth.json"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(entries, file)
        yield {**env, AUTH_VARIABLE: str(path)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _own_entries(env: Mapping[str, str]) -> dict[str, object]:
    """The entries of the user's own ``RATTLER_AUTH_FILE``, if one is set."""
    own = env.get(AUTH_VARIABLE)
    if not own:
        return {}
    try:
        with Path(own).open("rb") as file:
            document = parse_json(file.read(_MAX_AUTH_FILE + 1), limit=_MAX_AUTH_FILE)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"{AUTH_VARIABLE} {own} cannot be read: {exc}",
            fix=f"fix or unset {AUTH_VARIABLE} (a channel's credentials are added to it for the build)",
        ) from None
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"{AUTH_VARIABLE} {own} is not a JSON object of hosts", fix=f"fix or unset {AUTH_VARIABLE}"
        )
    return document
