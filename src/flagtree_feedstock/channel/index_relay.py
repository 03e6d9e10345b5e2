"""A server of the toolkit's own on loopback that every solve reads instead of the channels (issue 47, item 3).

Rattler fetches a remote channel's index with its own client: no deadline on a body (a server sending one byte
every 5 s holds the solve for ever), credentials keyed by host, and an ``info.base_url`` followed wherever it
leads (another port, another host, https down to http, with the channel's password). So a solve is never given
a channel: :func:`serving` starts a server on ``127.0.0.1`` that serves the ``n``-th channel at
``http://127.0.0.1:PORT/KEY/<n>/`` (``KEY`` a secret of the run's, so another user of the machine reads
nothing through it; no credentials needed, none given to rattler), and fetches every byte it serves
from upstream with the toolkit's one HTTP client (:mod:`flagtree_feedstock._http`): a connect, a read and a
total deadline for each request (a trickle ends at the total), credentials for their own origin only
(``EngineChannels.authorize``), redirects within the origin. A local channel (``file://`` or a path) is served
from its folder the same way, so no solve reads a user's folder directly.

What it serves, for ``/KEY/<n>/<subdir>/<file>`` (``subdir`` a conda subdir):

- ``repodata.json``: upstream's, parsed within bounds (:mod:`flagtree_feedstock._foreign_json`); its
  ``info.base_url``, resolved against the subdir's URL the WHATWG way, must stay at the channel's origin (a
  local channel's: inside its folder), else the channel is refused in one line; the answer rattler gets has no
  ``base_url``, so it asks this server for each package at ``/<n>/<subdir>/<file name>``.
- ``repodata_shards.msgpack.zst`` (CEP 16): rattler (py-rattler 0.28, rattler_repodata_gateway's
  ``SubdirBuilder``) asks every http(s) channel for it first (``SourceConfig.sharded_enabled`` defaults to true,
  for every host), and falls back to ``repodata.json`` on a 404 or 501. Upstream's index is decompressed within
  a bound, read (msgpack), its ``base_url`` and ``shards_base_url`` held to the channel's origin, and served
  again pointing both at this server. ``shards/<sha256>.msgpack.zst``: only a shard the index lists, fetched
  when rattler asks for it (so a solve still fetches only the shards it needs), and served only when its bytes
  have the sha256 its name says. A local channel answers 404 (rattler reads a local one's ``repodata.json``).
- a package file the index lists, never the original: downloaded from upstream once into the scratch folder
  (the index's size and sha256 checked, :func:`.download.download`), or a local channel's file, then
  the toolkit's copy of it (:func:`.repack.repacked`: read by our reader, written by our writer, cached in
  ``copies``) is served. A copy's bytes are not the original's, so the records served (in ``repodata.json``
  and in each shard, re-encoded under the name the index gives it: rattler does not hash a shard) carry none
  of :data:`DIGESTS`: rattler checks the copy against nothing, and the relay keeps the index's sha256 and
  size to check the download. A relay without ``copies`` (``channel install``'s, whose solve reads indexes
  only) serves no package and leaves the records as they are (its install checks downloads against them).
- anything else, ``repodata.json.zst``/``.bz2``/``.jlap`` and ``run_exports.json`` included: 404. Rattler then
  takes plain ``repodata.json`` (compression would save nothing on loopback, and one form is one reading to
  check), and reads run exports from the packages: the copies.

A refusal or a failure (an upstream that answers 403 or 503, a trickle, a ``base_url`` elsewhere, a package
our reader refuses) is kept as
:attr:`Relay.failure`, the first one, and rattler is answered 403, which it does not retry: its solve fails,
and the caller raises :attr:`Relay.failure`, one line, instead of rattler's message (fail closed: a channel
that cannot be read never leaves a solve to go on without it). A subdir upstream does not have (404) is a 404.

The interface (``channel install`` and a build's solves, ``builder/run.py``, call it so)::

    with serving(channels, authorize=engine.authorize, scratch=folder, copies=cache) as relay:
        solve with relay.urls (one per channel, in order; no auth file, no remote URL)
        relay.client_config()               # py-rattler's configuration: the relay, directly, and nothing else
        relay.check()                       # the first failure, if any: raise it
        relay.upstream(record_url)          # a solved package's loopback URL -> upstream URL or file:// URI
        relay.copy(record_url)              # -> the toolkit's copy the relay served (or makes now): Repacked
        relay.source(record_url)            # -> where it came from, as a message shows it
        relay.given(channel)                # a loopback channel URL -> the channel as the user gave it
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import ada_url

from flagtree_feedstock._archive.compressed import ZstdFrame, zstd_writer
from flagtree_feedstock._archive.tar_stream import ArchiveDamaged, ArchiveRefused
from flagtree_feedstock._engine import require
from flagtree_feedstock._foreign_json import MAX_DEPTH, ForeignJsonError, nesting, parse_json
from flagtree_feedstock._http import HttpError, Origin, Timeouts, open_request, status_text
from flagtree_feedstock._urls import shown_url
from flagtree_feedstock.errors import ChannelError, FeedstockError

from .download import Authorize, download
from .repack import Repacked, repacked

LOGGER = logging.getLogger(__name__)
# Each request to a channel: 30 s to connect, 60 s for each wait on it, 10 minutes for the whole answer
# (conda-forge's largest repodata.json, some 250 MB, takes under a minute on a slow line).
TIMEOUTS = Timeouts(connect=30, read=60, total=600)


def timeouts_within(total: float | None) -> Timeouts:
    """:data:`TIMEOUTS`, each request ending within ``total`` seconds whole (``build --channel-timeout``)."""
    if total is None:
        return TIMEOUTS
    return Timeouts(connect=min(TIMEOUTS.connect, total), read=min(TIMEOUTS.read, total), total=total)


# The most an index may hold, decompressed (conda-forge's linux-64 repodata.json is about 250 MB).
MAX_INDEX_BYTES = 512 << 20
# The most one shard may hold (conda-forge's largest are a few MB) and its compressed form.
MAX_SHARD_BYTES = 64 << 20
_ZSTD_WINDOW = 1 << 27
_SUBDIR = re.compile(r"noarch|[a-z0-9]+-[a-z0-9_]+")
_SHARD = re.compile(r"shards/([0-9a-f]{64})\.msgpack\.zst")
_PACKAGE = re.compile(r"[^/\\]+\.(?:conda|tar\.bz2)")
REPODATA = "repodata.json"
SHARDS = "repodata_shards.msgpack.zst"
DEFAULT_CHANNEL_HOST = "https://conda.anaconda.org/"
_FIX = "do not use this channel; tell its owner"
# What a record says of its package file's bytes: left out of the records served where the relay serves the
# toolkit's copies, whose bytes differ (the relay keeps sha256 and size itself, to check the download).
DIGESTS = ("sha256", "md5", "size", "legacy_bz2_md5", "legacy_bz2_size")


class _Refused(Exception):
    """A request the relay answers 403: ``error`` is kept as the relay's failure."""

    def __init__(self, error: FeedstockError) -> None:
        super().__init__(error.message)
        self.error = error


class _Missing(Exception):
    """A request the relay answers 404 (rattler falls back, or the subdir is not there)."""


@dataclass
class _Subdir:
    """What the relay learnt of one subdir of one channel from the index it served."""

    packages_base: str = ""  # where its packages are (upstream URL, or a folder's file:// URL), ends in /
    shards_base: str = ""  # where its shards are upstream, ends in /
    shards: frozenset[str] = frozenset()  # the sha256s (hex) of the shards the index lists
    # file name -> (sha256 hex or None, size or None), from the index and the shards served
    records: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Channel:
    given: str  # as the user gave it (no secret: EngineChannels.channels)
    url: str  # its URL, ends in /: http(s) or file://
    folder: Path | None  # a local channel's folder


def channel_url(channel: str) -> tuple[str, Path | None]:
    """The URL (ending in ``/``) a channel names, as rattler reads it, and its folder when it is local: a
    ``file://`` URL or a path; a name is ``https://conda.anaconda.org/<name>/``."""
    if channel.startswith("file://"):
        folder = Path(unquote(urlsplit(channel).path))
    elif channel.startswith(("/", "./", "../", "~")):
        folder = Path(channel).expanduser()
    elif "://" in channel:
        return channel.rstrip("/") + "/", None
    else:
        return f"{DEFAULT_CHANNEL_HOST}{channel.strip('/')}/", None
    folder = folder.resolve()
    return folder.as_uri().rstrip("/") + "/", folder


def within_channel(channel: str, url: str) -> bool:
    """Whether ``url`` (resolved already) is the channel's (``channel``: its URL, ending in ``/``) to serve
    from: a local channel's, inside its folder; a remote one's, at its origin (scheme, host and port as the
    WHATWG standard reads them: https down to http, another port or host is another origin)."""
    if channel.startswith("file:"):
        return url.startswith(channel)
    try:
        return Origin.of(url) == Origin.of(channel)
    except HttpError:
        return False


class Relay:
    """The channels, served on loopback (:func:`serving`)."""

    def __init__(
        self,
        channels: Sequence[str],
        *,
        authorize: Authorize,
        scratch: Path,
        timeouts: Timeouts,
        copies: Path | None,
    ) -> None:
        self._channels = [_Channel(c, *channel_url(c)) for c in channels]
        self._authorize = authorize
        self._scratch = scratch
        self._timeouts = timeouts
        self._copies = copies
        self._lock = threading.Lock()
        self._subdirs: dict[tuple[int, str], _Subdir] = {}
        self._downloads = 0
        # One package at a time, each downloaded and repacked once: (channel, subdir, file name) -> its copy.
        self._packages = threading.Lock()
        self._copied: dict[tuple[int, str, str], Repacked] = {}
        self.failure: FeedstockError | None = None
        self.origin = ""  # http://127.0.0.1:PORT, once serving
        # The path every URL of the relay begins with: a secret of this run's, so another user of the machine,
        # who can connect to 127.0.0.1 too, cannot read a private channel through the relay's credentials.
        self._key = secrets.token_urlsafe(24)

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT/KEY``: every URL the relay serves begins with it."""
        return f"{self.origin}/{self._key}"

    @property
    def urls(self) -> tuple[str, ...]:
        """The loopback URL of each channel, in the order given."""
        return tuple(f"{self.base}/{n}/" for n in range(len(self._channels)))

    def check(self) -> None:
        """Raise the first failure the relay met, if any (:class:`ChannelError`, one line)."""
        if self.failure is not None:
            raise self.failure

    def client_config(self) -> str:
        """A py-rattler configuration (``rattler.Config.from_toml``) whose client reaches the relay directly
        (never through an ``http_proxy`` of the environment, which py-rattler's client would otherwise take
        for ``127.0.0.1`` too), and sends every other request to the relay as its proxy, which refuses it: a
        solve with it can read nothing but the relay."""
        return (
            "[proxy-config]\n"
            f"http = {json.dumps(self.origin)}\nhttps = {json.dumps(self.origin)}\n"
            'non-proxy-hosts = ["127.0.0.1"]\n'
        )

    def fail(self, error: FeedstockError) -> None:
        """Keep ``error`` as the relay's failure, unless one came first."""
        with self._lock:
            self.failure = self.failure or error

    def given(self, url: str) -> str:
        """The channel as given for a loopback channel URL (else ``url`` itself)."""
        number = self._number(url)
        return url if number is None else self._channels[number].given

    def shown(self, text: str) -> str:
        """``text`` (a message of rattler's or the engine's) with each loopback channel URL put back as the
        channel was given, shown without its secrets: the relay's key is no part of a message."""
        for number in reversed(range(len(self._channels))):
            text = text.replace(
                f"{self.base}/{number}/", shown_url(self._channels[number].given).rstrip("/") + "/"
            )
        return text.replace(self.base, "the toolkit's relay") if self.origin else text

    def upstream(self, url: str) -> str:
        """Where a package the solve took (its loopback URL) comes from: its upstream URL (no secret in it), or a
        local channel's ``file://`` URL. A URL that is not one the relay served is refused."""
        number, subdir, name = self._solved(url)
        with self._lock:
            return self._subdirs[(number, subdir)].packages_base + quote(name)

    def source(self, url: str) -> str:
        """Where a package the solve took (its loopback URL) comes from, as a message shows it: its upstream URL
        without secrets, or the file in a local channel's folder."""
        upstream = self.upstream(url)
        return unquote(urlsplit(upstream).path) if upstream.startswith("file:") else shown_url(upstream)

    def copy(self, url: str) -> Repacked:
        """The toolkit's copy of a package the solve took (its loopback URL), as the relay serves it: the one it
        made when the engine fetched it, else made now (downloaded with the credentials of its origin, checked
        against the index's sha256 and size, repacked). Raise the refusal, one line, kept as the relay's
        failure too; a URL that is not one the relay served is refused."""
        number, subdir, name = self._solved(url)
        try:
            return self._copy(number, subdir, name)
        except _Refused as exc:
            self.fail(exc.error)
            raise exc.error from None

    def _solved(self, url: str) -> tuple[int, str, str]:
        """The channel number, subdir and file name of a package the solve took (its loopback URL)."""
        number = self._number(url)
        parts = [unquote(part) for part in url[len(self.base) :].strip("/").split("/")]
        if number is None or len(parts) != 3:
            raise ChannelError(f"the solve took {shown_url(url)}, which no channel served", fix=_FIX)
        with self._lock:
            subdir = self._subdirs.get((number, parts[1]))
        if subdir is None or not _PACKAGE.fullmatch(parts[2]) or parts[2] not in subdir.records:
            raise ChannelError(
                f"the solve took {shown_url(url)}, which its channel's index does not list", fix=_FIX
            )
        return number, parts[1], parts[2]

    def _number(self, url: str) -> int | None:
        if not self.origin or not url.startswith(f"{self.base}/"):
            return None
        head = url[len(self.base) + 1 :].split("/", 1)[0]
        return int(head) if head.isdigit() and int(head) < len(self._channels) else None

    # ---- answering ----------------------------------------------------------------------------------------

    def answer(self, path: str) -> Path | bytes:
        """What to serve for ``path`` (a file or bytes); :class:`_Missing` for a 404, :class:`_Refused` for a
        403 (its error kept as the relay's failure)."""
        key, _, path = path.split("?", 1)[0].lstrip("/").partition("/")
        if not secrets.compare_digest(key, self._key):
            raise _Missing
        parts = path.strip("/").split("/", 2)
        if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) >= len(self._channels):
            raise _Missing
        number, subdir, name = int(parts[0]), parts[1], unquote(parts[2])  # a file name as rattler encodes it
        if not _SUBDIR.fullmatch(subdir):
            raise _Missing
        channel = self._channels[number]
        try:
            if name == REPODATA:
                return self._repodata(number, channel, subdir)
            if name == SHARDS and channel.folder is None:
                return self._shard_index(number, channel, subdir)
            if (shard := _SHARD.fullmatch(name)) and channel.folder is None:
                return self._shard(number, channel, subdir, shard.group(1))
            if _PACKAGE.fullmatch(name):
                return self._package(number, subdir, name)
        except _Refused as exc:
            self.fail(exc.error)
            raise
        raise _Missing

    def _fetch(self, channel: _Channel, url: str, limit: int) -> bytes:
        """``url`` from upstream, whole, at most ``limit`` bytes; a 404 or 501 is :class:`_Missing`."""
        if channel.folder is not None:
            path = Path(unquote(urlsplit(url).path))
            if not path.is_file() or path.is_symlink():
                raise _Missing
            with path.open("rb") as file:
                data = file.read(limit + 1)
            if len(data) > limit:
                raise self._refused(channel, f"{path} is larger than {limit} bytes")
            return data
        asked, credential = self._authorize(url)
        try:
            with open_request("GET", asked, timeouts=self._timeouts, credential=credential) as answer:
                if answer.status in (HTTPStatus.NOT_FOUND, HTTPStatus.NOT_IMPLEMENTED):
                    raise _Missing
                if answer.status != HTTPStatus.OK:
                    raise self._refused(channel, f"{shown_url(url)} answered {status_text(answer.status)}")
                too_large = self._refused(channel, f"{shown_url(url)} is larger than {limit} bytes")
                return b"".join(answer.bounded_chunks(limit, too_large))
        except HttpError as exc:
            raise self._refused(channel, f"{shown_url(url)}: {exc}") from None

    def _refused(self, channel: _Channel, why: str) -> _Refused:
        return _Refused(
            ChannelError(
                f"channel {shown_url(channel.given)} cannot be read: {why}",
                fix="check the channel, the network and the http(s)_proxy variables, or leave that channel out "
                "(a channel that cannot be read is never skipped)",
            )
        )

    def _within(self, channel: _Channel, base: str, relative: object, what: str) -> str:
        """``relative`` (an index's ``base_url``) resolved against ``base`` as the WHATWG standard resolves
        it, ending in ``/``: held to the channel's origin (a local one's: its folder), else refused."""
        if not isinstance(relative, str):
            raise self._refused(channel, f"its index's {what} is not a string")
        try:
            resolved = ada_url.join_url(base, relative)
        except ValueError:
            raise self._refused(channel, f"its index's {what} {shown_url(relative)!r} is not a URL") from None
        resolved = resolved if resolved.endswith("/") else resolved + "/"
        if within_channel(channel.url, resolved):
            return resolved
        where = "outside its folder" if channel.folder is not None else "another origin than the channel's"
        raise self._refused(channel, f"its index's {what} is {shown_url(resolved)}, {where}: refused")

    def _repodata(self, number: int, channel: _Channel, subdir: str) -> bytes:
        base = f"{channel.url}{subdir}/"
        data = self._fetch(channel, base + REPODATA, MAX_INDEX_BYTES)
        try:
            document = parse_json(data, limit=MAX_INDEX_BYTES)
        except ForeignJsonError as exc:
            raise self._refused(channel, f"its {subdir}/{REPODATA} {exc}") from None
        if not isinstance(document, dict) or not isinstance(document.get("info", {}), dict):
            raise self._refused(channel, f"its {subdir}/{REPODATA} is not a channel index")
        info = document.setdefault("info", {})
        packages_base = base
        if "base_url" in info:
            packages_base = self._within(channel, base, info.pop("base_url"), "info.base_url")
        records: dict[str, tuple[str | None, int | None]] = {}
        for key in ("packages", "packages.conda"):
            entries = document.get(key, {})
            if not isinstance(entries, dict):
                raise self._refused(channel, f"its {subdir}/{REPODATA} has a {key} that is not an object")
            for name, record in entries.items():
                if isinstance(record, dict):
                    sha256, size = record.get("sha256"), record.get("size")
                    records[name] = (
                        sha256 if isinstance(sha256, str) else None,
                        size if isinstance(size, int) else None,
                    )
                    self._served(record)
        with self._lock:
            self._subdirs[(number, subdir)] = _Subdir(packages_base=packages_base, records=records)
        return _json_bytes(document)

    def _shard_index(self, number: int, channel: _Channel, subdir: str) -> bytes:
        base = f"{channel.url}{subdir}/"
        index = self._unpacked(channel, self._fetch(channel, base + SHARDS, MAX_SHARD_BYTES), SHARDS)
        info, shards = index.get("info"), index.get("shards")
        if not isinstance(info, dict) or not isinstance(shards, dict):
            raise self._refused(channel, f"its {subdir}/{SHARDS} is not a shard index")
        packages_base = self._within(channel, base, info.get("base_url", ""), "base_url")
        shards_base = self._within(channel, base, info.get("shards_base_url", ""), "shards_base_url")
        digests = frozenset(d.hex() for d in shards.values() if isinstance(d, bytes) and len(d) == 32)
        here = f"{self.base}/{number}/{subdir}/"
        info["base_url"], info["shards_base_url"] = here, f"{here}shards/"
        with self._lock:
            self._subdirs[(number, subdir)] = _Subdir(
                packages_base=packages_base, shards_base=shards_base, shards=digests
            )
        msgpack = require("msgpack", "msgpack")
        out = io.BytesIO()
        with zstd_writer(out, 3) as writer:
            writer.write(msgpack.packb(index, use_bin_type=True))
        return out.getvalue()

    def _shard(self, number: int, channel: _Channel, subdir: str, digest: str) -> bytes:
        with self._lock:
            known = self._subdirs.get((number, subdir))
        if known is None or digest not in known.shards:
            raise _Missing
        data = self._fetch(channel, f"{known.shards_base}{digest}.msgpack.zst", MAX_SHARD_BYTES)
        if hashlib.sha256(data).hexdigest() != digest:
            raise self._refused(
                channel, f"its shard {subdir}/shards/{digest[:12]}… does not have the sha256 of its name"
            )
        shard = self._unpacked(channel, data, f"shard {digest[:12]}…")
        records: dict[str, tuple[str | None, int | None]] = {}
        for key in ("packages", "packages.conda"):
            entries = shard.get(key, {})
            for name, record in entries.items() if isinstance(entries, dict) else ():
                if isinstance(name, str) and isinstance(record, dict):
                    sha256, size = record.get("sha256"), record.get("size")
                    records[name] = (
                        sha256.hex() if isinstance(sha256, bytes) else None,
                        size if isinstance(size, int) else None,
                    )
                    self._served(record)
        with self._lock:
            known.records.update(records)
        if self._copies is None:
            return data
        # Served under its name, its bytes no longer that sha256: rattler reads a shard by the name the index
        # gives it and does not hash it (the relay did, above).
        msgpack = require("msgpack", "msgpack")
        out = io.BytesIO()
        with zstd_writer(out, 3) as writer:
            writer.write(msgpack.packb(shard, use_bin_type=True))
        return out.getvalue()

    def _served(self, record: dict[Any, Any]) -> None:
        """Leave out of ``record`` (a package's, as served) what describes the original's bytes, when the relay
        serves the toolkit's copies: the copy's differ, and the engine would refuse them for the original's
        sha256, md5 or size."""
        if self._copies is not None:
            for key in DIGESTS:
                record.pop(key, None)

    def _unpacked(self, channel: _Channel, data: bytes, what: str) -> dict[Any, Any]:
        """A zstd-compressed msgpack map, decompressed within :data:`MAX_SHARD_BYTES` and nesting bounds."""
        msgpack = require("msgpack", "msgpack")
        try:
            frame = ZstdFrame(io.BytesIO(data), max_window=_ZSTD_WINDOW, what=what)
            raw = frame.read(MAX_SHARD_BYTES + 1)
            if len(raw) > MAX_SHARD_BYTES:
                raise self._refused(channel, f"its {what} holds more than {MAX_SHARD_BYTES} bytes")
            frame.finish()
            document = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except (ArchiveDamaged, ArchiveRefused, ValueError, msgpack.UnpackException) as exc:
            raise self._refused(channel, f"its {what} cannot be read: {str(exc)[:200]}") from None
        if not isinstance(document, dict) or nesting(document) > MAX_DEPTH:
            raise self._refused(channel, f"its {what} is not a map nested at most {MAX_DEPTH} deep")
        return document

    def _package(self, number: int, subdir: str, name: str) -> Path:
        """The toolkit's copy of a package the index lists, never the original: a relay without a cache of
        copies (``channel install``'s, whose solve reads indexes only) serves no package."""
        with self._lock:
            known = self._subdirs.get((number, subdir))
        if self._copies is None or known is None or name not in known.records:
            raise _Missing
        return self._copy(number, subdir, name).path

    def _copy(self, number: int, subdir: str, name: str) -> Repacked:
        """The copy of ``name`` (listed in the index of ``subdir``): the original downloaded (the index's size and
        sha256 checked) or taken from a local channel's folder, read by the toolkit's reader and written by its
        writer (:func:`.repack.repacked`, cached); a refusal is :class:`_Refused`."""
        channel, key = self._channels[number], (number, subdir, name)
        if self._copies is None:
            raise _Refused(ChannelError(f"the relay of {shown_url(channel.given)} makes no copies", fix=_FIX))
        with self._packages:
            if key in self._copied:
                return self._copied[key]
            with self._lock:
                known = self._subdirs[(number, subdir)]
            sha256, size = known.records[name]
            url = known.packages_base + quote(name)
            try:
                if channel.folder is not None:
                    original, source = Path(unquote(urlsplit(url).path)), None
                    if not original.is_file() or original.is_symlink():
                        raise self._refused(channel, f"its index lists {name}, which {original.parent} lacks")
                else:
                    self._downloads += 1
                    original, source = (
                        self._scratch / "packages" / str(self._downloads) / name,
                        shown_url(url),
                    )
                    download(
                        url,
                        original,
                        sha256=sha256,
                        size=size,
                        authorize=self._authorize,
                        timeouts=self._timeouts,
                    )
                copy = repacked(original, self._copies, file_name=name, source=source)
            except FeedstockError as exc:
                raise _Refused(exc) from None
            self._copied[key] = copy
            return copy


def _json_bytes(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


class _Handler(BaseHTTPRequestHandler):
    relay: Relay
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answered(body=True)

    def do_HEAD(self) -> None:
        self._answered(body=False)

    def _answered(self, *, body: bool) -> None:
        """:meth:`_serve`; a client that hung up meanwhile (rattler drops the other requests of a subdir once one
        is refused) is no failure of the relay's, and prints nothing."""
        try:
            self._serve(body=body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _serve(self, *, body: bool) -> None:
        try:
            content = self.relay.answer(self.path)
        except _Missing:
            self._empty(HTTPStatus.NOT_FOUND)
            return
        except _Refused:
            self._empty(HTTPStatus.FORBIDDEN)  # rattler does not retry a 403
            return
        except Exception as exc:  # a bug of ours: never a success, and the relay's failure
            LOGGER.debug("the relay failed on %s", self.path, exc_info=True)
            error = ChannelError(f"serving {self.path} to the solve failed: {type(exc).__name__}", fix=_FIX)
            self.relay.fail(error)
            self._empty(HTTPStatus.FORBIDDEN)
            return
        size = content.stat().st_size if isinstance(content, Path) else len(content)
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", str(size))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not body:
            return
        if isinstance(content, bytes):
            self.wfile.write(content)
            return
        with content.open("rb") as file:
            while chunk := file.read(1 << 20):
                self.wfile.write(chunk)

    def _empty(self, status: HTTPStatus) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        LOGGER.debug("relay: " + format, *args)


# How often the relay's loop looks for its shutdown, in seconds.
_SHUTDOWN_POLL = 0.05


@contextmanager
def serving(
    channels: Sequence[str],
    *,
    authorize: Authorize,
    scratch: Path,
    timeouts: Timeouts = TIMEOUTS,
    copies: Path | None = None,
) -> Iterator[Relay]:
    """Serve ``channels`` (as :func:`.credentials.split_credentials` leaves them: no secret; names, URLs,
    ``file://`` URLs and paths) on ``127.0.0.1`` while the block runs (:class:`Relay`); every upstream byte
    fetched with ``authorize``'s credentials for its origin, within ``timeouts``; packages downloaded into
    ``scratch`` (the caller's, removed by the caller) and served as the toolkit's copies, cached in ``copies``
    (None: no package is served, and the records keep their digests)."""
    relay = Relay(channels, authorize=authorize, scratch=scratch, timeouts=timeouts, copies=copies)
    handler = type("RelayHandler", (_Handler,), {"relay": relay})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    relay.origin = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll: the block's end waits for the server's loop to notice its shutdown (0.5 s by default), and a
    # command's exit should not (nor hide a thread py-rattler left running: tests/test_interrupts.py).
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": _SHUTDOWN_POLL}, name="index-relay", daemon=True
    )
    thread.start()
    try:
        yield relay
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
