"""A channel's credentials taken out of its URL, held by the toolkit, never handed to rattler.

A ``--channel`` (a build's, ``channel install``'s ``-c``) may carry a secret: a password
(``https://user:PW@host/chan``) or anaconda.org's token (``https://conda.anaconda.org/t/TOKEN/chan``). Given
to rattler in the URL, it would be written where others can read it: into rattler's repodata cache (each
subdir's ``.info.json`` and shard cache record the URL, mode 0644, kept between runs), the channels recorded
in each built package and each installed package's ``conda-meta`` record. So no channel reaches rattler or the
engine at all: every solve reads the channels through the toolkit's server on loopback
(:mod:`.index_relay`), which fetches each byte with the toolkit's client and the credential of its origin
(:meth:`EngineChannels.authorize`), and the packages are downloaded the same way
(:mod:`.download`). Nothing secret is written to a file, so nothing is left when a command is killed.
A ``RATTLER_AUTH_FILE`` of your own is read (:func:`with_own_credentials`) for the hosts of the channels you
name (for a host both name, the channel's credentials win); the engine never gets it.

A credential is keyed by the host as the WHATWG standard canonicalises it (``2130706433``, ``0x7f.0.0.1``,
``127.1`` and ``127.0.0.%31`` are ``127.0.0.1``; a unicode name is its punycode), as rattler reads a URL: every
channel URL is read that way, once (:func:`.._url_parsing.parse_url`, rattler's own rule deciding what is a URL:
``scheme://``). A credential belongs to the origin it was given for (scheme, host and port, as
:class:`.._http.Origin` says), so a channel on that host at an origin the credential was not given for
(``http://host:8080`` beside ``https://user:PW@host``: the password would cross the network in clear text;
``http://2130706433:8080`` beside ``http://user:PW@127.0.0.1``) is refused in one line, naming both; so are a
channel with both a password and a token, two channels of one host with different credentials, a secret in a
channel URL that is not http(s), and a URL that cannot be read one way only (:class:`.._url_parsing.UrlRefused`:
a backslash before its path names one host to Python and another to rattler).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._http import Credential, HttpError, Origin
from flagtree_feedstock._own_files import AUTH, read_own
from flagtree_feedstock._url_parsing import DEFAULT_PORTS, Url, UrlRefused, parse_url
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ConfigurationError

AUTH_VARIABLE = "RATTLER_AUTH_FILE"
# What rattler takes for a URL rather than a channel name or a path (rattler_conda_types' parse_scheme): a
# letter, then at most ten letters or digits, then ``://``.
_URL_SCHEME = re.compile(r"[^\W\d_][^\W_]{0,10}://")


@dataclass(frozen=True, kw_only=True)
class EngineChannels:
    """The channels for rattler (no secret in any), and the credentials they need, by host."""

    channels: tuple[str, ...]
    credentials: Mapping[str, object] = field(default_factory=dict)
    # host -> the origins its credentials were given for (the only ones they are sent to)
    origins: Mapping[str, frozenset[Origin]] = field(default_factory=dict)

    def authorize(self, url: str) -> tuple[str, Credential | None]:
        """How to ask for ``url`` (a package of one of the channels, as the solve gives it: no secret in it)
        with the credentials given for its origin, as rattler would: the URL with the ``/t/`` token in its
        path, or the URL and HTTP Basic with the user and password; the URL alone for an origin given none."""
        read = _read(url, url)
        origin = _origin(url, read)
        if read is None or origin is None or origin not in self.origins.get(origin.host, frozenset()):
            return url, None
        entry = self.credentials.get(origin.host)
        if not isinstance(entry, dict):
            return url, None
        if "CondaToken" in entry:
            token = quote(str(entry["CondaToken"]), safe="")
            return read.replaced(pathname=f"/t/{token}{read.path}").href, None
        url = read.href
        basic, bearer = entry.get("BasicHTTP"), entry.get("BearerToken")
        if isinstance(bearer, str) and bearer:
            return url, Credential(origin=origin, authorization=f"Bearer {bearer}", secret=bearer)
        if not isinstance(basic, dict):
            return url, None  # a kind of entry no http(s) channel uses (S3): nothing to send
        user, password = str(basic.get("username", "")), str(basic.get("password", ""))
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return url, Credential(origin=origin, authorization=f"Basic {pair}", secret=password or pair)


def with_own_credentials(engine: EngineChannels, env: Mapping[str, str]) -> EngineChannels:
    """``engine`` with the entries of the user's own ``RATTLER_AUTH_FILE`` (read from ``env``) for the hosts
    of its channels that carry no credentials in their URL, each sent to the origins of the channels the user
    gave on that host only (rattler would send it to any port and scheme of the host): what the toolkit's
    client (the relay, :mod:`.index_relay`, and the downloads) sends where rattler read the file itself."""
    own = _own_entries(env)
    if not own:
        return engine
    credentials, origins = dict(engine.credentials), {h: set(o) for h, o in engine.origins.items()}
    for channel in engine.channels:
        origin = _origin(channel, _read(channel, channel))
        if origin is None or origin.host in engine.credentials or origin.host not in own:
            continue
        credentials[origin.host] = own[origin.host]
        origins.setdefault(origin.host, set()).add(origin)
    return EngineChannels(
        channels=engine.channels,
        credentials=credentials,
        origins={host: frozenset(found) for host, found in origins.items()},
    )


def split_credentials(channels: Sequence[str]) -> EngineChannels:
    """``channels`` without their secrets, and those secrets as rattler authentication entries by host.

    Refused (:class:`ConfigurationError`): a URL that cannot be read one way only (a backslash before its
    path), one with both a password and a token, a secret in a URL that is not http(s), two channels of one
    host with different credentials, and a channel on a host that has credentials, at an origin they were not
    given for (the hosts compared as rattler canonicalises them).
    """
    bare: list[str] = []
    credentials: dict[str, object] = {}
    given: dict[
        str, tuple[str, set[Origin]]
    ] = {}  # host -> a channel that gave its credentials, their origins
    for channel in channels:
        url, host, entry = _split(channel)
        bare.append(url)
        if entry is None:
            continue
        if not host:
            raise ConfigurationError(
                f"channel {shown_url(channel)} carries a password or a /t/ token, but it is not an http:// or "
                "https:// URL with a host: rattler would not send it",
                fix="give the channel without it, and its credentials in your RATTLER_AUTH_FILE",
            )
        if credentials.get(host, entry) != entry:
            raise ConfigurationError(
                f"channel {shown_url(channel)}: another --channel of {host} has other credentials, and rattler "
                "takes one per host",
                fix="give each host's channels the same credentials, or put them in your RATTLER_AUTH_FILE",
            )
        credentials[host] = entry
        origins = given.setdefault(host, (channel, set()))[1]
        origins.update(filter(None, [_origin(channel, _read(channel, url))]))
    for channel, url in zip(channels, bare, strict=True):
        origin = _origin(channel, _read(channel, url))
        if origin is None or origin.host not in given:
            continue
        owner, origins = given[origin.host]
        if origin not in origins:
            clear = " in clear text" if origin.scheme == "http" else ""
            raise ConfigurationError(
                f"channel {shown_url(channel)} is on the host of channel {shown_url(owner)} at another origin "
                f"({origin}, not {', '.join(sorted(map(str, origins)))}), and rattler keys credentials by host "
                f"alone: it would be sent that channel's credentials{clear}",
                fix=f"give the credentials with this channel's URL too if {origin} should have them, "
                "else serve both channels from one origin or leave one out",
            )
    return EngineChannels(
        channels=tuple(bare),
        credentials=credentials,
        origins={host: frozenset(origins) for host, (_, origins) in given.items()},
    )


def _read(channel: str, url: str) -> Url | None:
    """``url`` (``channel`` as given, or without its secrets) read as rattler reads it, where rattler takes it
    for a URL (``scheme://``); None for a channel name or a path. A URL that cannot be read one way only is
    refused, naming ``channel`` as it may be shown."""
    if _URL_SCHEME.match(url) is None:
        return None
    try:
        return parse_url(url)
    except UrlRefused as exc:
        raise ConfigurationError(f"channel {shown_url(channel)} {exc}", fix=exc.fix) from None


def _origin(channel: str, read: Url | None) -> Origin | None:
    """The origin of ``read`` (``channel`` read) when it is an http(s) URL; None for a channel name, a file://
    URL or another scheme."""
    if read is None or read.scheme not in DEFAULT_PORTS or not read.host:
        return None
    try:
        return Origin.of_url(read)
    except HttpError as exc:
        raise ConfigurationError(f"channel {shown_url(channel)}: {exc}", fix=exc.fix) from None


def _split(channel: str) -> tuple[str, str, object | None]:
    """``channel`` without its secrets, in the canonical form rattler reads (a name or a path as it is), the
    host its credentials are keyed by ("" for a URL that is not http(s)), and its authentication entry (None
    without a secret)."""
    read = _read(channel, channel)
    if read is None or read.scheme == "file":
        return channel, "", None
    segments = read.path.split("/")
    token = None
    if len(segments) > 2 and unquote(segments[1]) == "t":  # /t/<token>/<channel>
        token, segments = unquote(segments[2]), ["", *segments[3:]]
    bare = read.replaced(username="", password="", search="", hash="", pathname="/".join(segments)).href
    host = read.host if read.scheme in DEFAULT_PORTS else ""
    if (read.username or read.password) and token is not None:
        raise ConfigurationError(
            f"channel {shown_url(channel)} has both a password and a /t/ token, and rattler takes one "
            "credential per host",
            fix="keep one of them (anaconda.org: the token)",
        )
    if token is not None:
        return bare, host, {"CondaToken": token}
    if read.username or read.password:
        user, password = unquote(read.username), unquote(read.password)
        return bare, host, {"BasicHTTP": {"username": user, "password": password}}
    return bare, host, None


def _own_entries(env: Mapping[str, str]) -> dict[str, object]:
    """The entries of the user's own ``RATTLER_AUTH_FILE``, if one is set."""
    own = env.get(AUTH_VARIABLE)
    if not own:
        return {}
    # The user's file (named by the variable): no FIFO, no device, at most 1 MiB (_own_files.AUTH).
    data = read_own(Path(own), AUTH).data
    try:
        document = parse_json(data, limit=AUTH.limit)
    except ValueError as exc:
        raise ConfigurationError(
            f"{AUTH_VARIABLE} {own} cannot be read: {exc}",
            fix=f"fix or unset {AUTH_VARIABLE} (a channel's credentials are added to it for the build)",
        ) from None
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"{AUTH_VARIABLE} {own} is not a JSON object of hosts", fix=f"fix or unset {AUTH_VARIABLE}"
        )
    return document
