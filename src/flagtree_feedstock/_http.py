"""The one HTTP client of the toolkit: the upload server's lookups and uploads, the LLVM archive's download.

The standard library's ``http.client``, one connection per request, with the rules every request follows:

- Every URL (each redirect's too) is read once, the WHATWG way rattler reads it (:mod:`._url_parsing`): the
  request goes to its canonical form, and one it cannot read one way only is refused.
- A credential (the ``Authorization`` header's value) belongs to one origin (scheme, canonical host, port: the
  same for ``127.0.0.1`` and ``2130706433``, ``:80`` written or not) and is sent there only, and only over
  https or to a loopback host (``127.0.0.0/8``, ``::1``, ``localhost``, named as such in the URL: a name is
  never resolved to decide it).
- A redirect is followed only by a GET or HEAD, only within the origin, at most :data:`MAX_REDIRECTS` times;
  one to another origin (another host, port or scheme: https down to http too) is an error naming both. A
  3xx answer to any other method (an upload) is an error: it is never followed, and never a success.
- Every request has a connect timeout and a read timeout (each wait on the server: for the connection and
  the TLS handshake; then for each send the server does not take, for the whole head of its answer, the
  status line and headers, ``1xx`` interim answers included, and for each read of the body it does not
  answer). A request given a total (:attr:`Timeouts.total`) ends when that time is up, whatever it is doing
  (connecting, sending, waiting, reading a body trickling in byte by byte): the socket is shut down at the
  deadline. A final ``1xx`` answer is an error.
- Every failure is an :class:`HttpError`: one line that names the server's origin and, where it helps, what
  to do; a malformed answer (a header http.client cannot read, a ``Content-Length`` that is not ASCII digits)
  too. It is made of the origin, numbers and the standard library's words only, never of a header, the
  server's status text or its body, so the token cannot be in it (and is masked, should a proxy echo it).
- ``http_proxy``/``https_proxy``/``no_proxy`` are honoured as urllib reads them (an https request tunnels
  through the proxy with CONNECT), except for a loopback host, which is always reached directly.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

import ada_url

from ._foreign_text import masked
from ._url_parsing import DEFAULT_PORTS, Url, UrlRefused, parse_url
from ._urls import shown_url as shown_url  # noqa: PLC0414 - re-exported: the one rule for showing a URL

MAX_REDIRECTS = 5
CHUNK = 1 << 20
USER_AGENT = "flagtree-feedstock"
# The most a JSON answer may hold: a channel's repodata.json for one subdir is far smaller.
MAX_ANSWER_BYTES = 256 << 20
_DIGITS = re.compile(r"[0-9]+")

Phase = Literal["connect", "send", "answer"]
# A request body: byte strings and files, sent in this order.
Body = Sequence[bytes | Path]


class HttpError(Exception):
    """A request failed: one line naming the server, never a credential, and a fix."""

    def __init__(self, message: str, *, fix: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.timed_out = timed_out  # the server did not connect, take or answer within a timeout

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Origin:
    """Where a URL points: scheme, host and port, as the WHATWG standard reads them (the host canonical: the
    key of rattler's authentication file, an IPv6 address in brackets); two URLs of one origin may share a
    credential."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        """The origin of ``url`` (read by :func:`read`)."""
        return cls.of_url(read(url))

    @classmethod
    def of_url(cls, url: Url) -> Origin:
        """The origin of a URL read already; one that is not http(s) with a host is an :class:`HttpError`."""
        if url.scheme not in DEFAULT_PORTS or not url.host:
            raise HttpError(
                f"{shown_url(url.href)!r} is not an http:// or https:// URL with a host",
                fix="give a URL such as https://host/path",
            )
        return cls(url.scheme, url.host, DEFAULT_PORTS[url.scheme] if url.port is None else url.port)

    @property
    def address(self) -> str:
        """The host as a connection is made to it: an IPv6 address without its brackets."""
        return self.host.removeprefix("[").removesuffix("]")

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.address).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        port = "" if self.port == DEFAULT_PORTS[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{self.host}{port}"


def read(url: str) -> Url:
    """``url`` read the WHATWG way (:func:`._url_parsing.parse_url`); a refusal is an :class:`HttpError`."""
    try:
        return parse_url(url)
    except UrlRefused as exc:
        raise HttpError(f"{shown_url(url)!r} {exc}", fix=exc.fix) from None


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect (TCP and TLS), each wait on the server after that (the head of its answer is one
    wait), and, when given, the whole request, redirects included: connecting, sending, the whole answer."""

    connect: float
    read: float
    total: float | None = None


@dataclass(frozen=True, repr=False)
class Credential:
    """An ``Authorization`` header's value and the one origin it may be sent to."""

    origin: Origin
    authorization: str
    secret: str  # the token itself, masked wherever a message could carry it

    def __repr__(self) -> str:
        return f"Credential(origin={self.origin}, authorization=***)"


def unencrypted(origin: Origin) -> bool:
    """Whether a credential sent to ``origin`` would cross the network unencrypted (plain http, not loopback)."""
    return origin.scheme == "http" and not origin.loopback


def redact(text: str, secret: str, *, cut: bool = False) -> str:
    """``text`` with ``secret`` replaced, in each form a server may echo it in (as sent, JSON- or ``\\u``-escaped,
    URL-quoted, split by line breaks: :func:`._foreign_text.masked`). Only the secret: a blank one (never read
    as a token) changes nothing.

    ``cut``: ``text`` is the start of something longer (a read stopped there), so an end of it that begins
    one of those forms (a token straddling the cut) is masked too. Mask first, then shorten what is shown.
    """
    return masked(text, (secret,), hidden="***", cut=cut)


def status_text(status: int) -> str:
    """``HTTP 401 Unauthorized``: the standard phrase, never the server's own (which may echo a header)."""
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


class _Alarm:
    """Shuts ``sock`` down (both ways) after ``seconds``, so every read or send blocked on it ends at once;
    ``fired`` says whether its time is up. ``None`` seconds: never."""

    def __init__(self, sock: socket.socket | None, seconds: float | None) -> None:
        self._gone_off = False
        self._ends = None if seconds is None else time.monotonic() + seconds
        self._timer: threading.Timer | None = None
        if sock is not None and seconds is not None:
            self._timer = threading.Timer(max(seconds, 0.0), self._fire, args=(sock,))
            self._timer.daemon = True
            self._timer.start()

    @property
    def fired(self) -> bool:
        """Whether the time is up: by the clock too, as a timeout of another alarm that ends a wait at about
        the same instant can come before this one's thread has run (on a loaded machine)."""
        return self._gone_off or (self._ends is not None and time.monotonic() >= self._ends)

    def _fire(self, sock: socket.socket) -> None:
        self._gone_off = True
        # The plain socket's shutdown (an SSLSocket's own would drop its TLS state under a reader); a socket
        # closed meanwhile has nothing blocked on it.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


@dataclass
class Answer:
    """A response whose body is read on demand (:meth:`chunks`, :meth:`read_all`)."""

    status: int
    headers: http.client.HTTPMessage
    _response: http.client.HTTPResponse
    _origin: Origin
    _timeouts: Timeouts
    _deadline: _Alarm | None = None  # the request's total, which the body's reads are bound by too

    @property
    def length(self) -> int | None:
        """The body's length the server announced, or None (also for one that is not ASCII digits)."""
        value = self.headers.get("Content-Length", "").strip()
        return int(value) if _DIGITS.fullmatch(value) else None

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The body, chunk by chunk; a short read or a reset is an :class:`HttpError`."""
        received = 0
        while True:
            try:
                chunk = self._response.read(size)
            except http.client.IncompleteRead as exc:
                _check_deadline(self._deadline, self._origin, self._timeouts)
                raise self._short(received + len(exc.partial)) from None
            except (OSError, http.client.HTTPException, ValueError) as exc:
                _check_deadline(self._deadline, self._origin, self._timeouts)
                raise _failure(exc, self._origin, "answer", self._timeouts) from None
            _check_deadline(self._deadline, self._origin, self._timeouts)
            if not chunk:
                if self.length is not None and received < self.length:  # http.client ends such a body quietly
                    raise self._short(received)
                return
            received += len(chunk)
            yield chunk

    def bounded_chunks(self, limit: int, too_large: Exception) -> Iterator[bytes]:
        """The body, chunk by chunk (:meth:`chunks`), refused with ``too_large`` where it announces more than
        ``limit`` bytes (at once, before the caller opens anything to write to) or passes them: a download
        that would fill the disk."""
        if self.length is not None and self.length > limit:
            raise too_large
        return self._capped(limit, too_large)

    def _capped(self, limit: int, too_large: Exception) -> Iterator[bytes]:
        received = 0
        for chunk in self.chunks():
            received += len(chunk)
            if received > limit:
                raise too_large
            yield chunk

    def _short(self, received: int) -> HttpError:
        announced = f" of the {self.length} it announced" if self.length is not None else ""
        return HttpError(
            f"{self._origin}'s answer broke off after {received} bytes{announced} (a short read)",
            fix="retry; if it persists, the server or a proxy on the way is failing",
        )

    def read_all(self, limit: int = MAX_ANSWER_BYTES) -> bytes:
        """The whole body, at most ``limit`` bytes."""
        data = bytearray()
        for chunk in self.chunks():
            data += chunk
            if len(data) > limit:
                raise HttpError(
                    f"{self._origin} answered with more than {limit} bytes where a short answer was expected",
                    fix="check the URL",
                )
        return bytes(data)


@contextmanager
def open_request(
    method: str,
    url: str,
    *,
    timeouts: Timeouts,
    credential: Credential | None = None,
    headers: Mapping[str, str] | None = None,
    body: Body = (),
) -> Iterator[Answer]:
    """Send one request (following the redirects a GET or HEAD may follow) and yield its answer.

    Every answer that is not a redirect is yielded, whatever its status: the caller decides what a 404 or
    a 500 means. The connection is closed when the block ends.
    """
    try:
        with _request(
            method=method,
            url=url,
            timeouts=timeouts,
            credential=credential,
            headers=headers or {},
            body=body,
        ) as answer:
            yield answer
    except HttpError as exc:
        if credential is not None and redact(exc.message, credential.secret) != exc.message:
            raise HttpError(
                redact(exc.message, credential.secret), fix=exc.fix, timed_out=exc.timed_out
            ) from None
        raise


@contextmanager
def _request(
    *,
    method: str,
    url: str,
    timeouts: Timeouts,
    credential: Credential | None,
    headers: Mapping[str, str],
    body: Body,
) -> Iterator[Answer]:
    start = Origin.of(url)
    ends = None if timeouts.total is None else time.monotonic() + timeouts.total
    for _ in range(MAX_REDIRECTS + 1):
        target = read(url)  # what is checked, below, is what the request goes to: its canonical form
        origin = Origin.of_url(target)
        if credential is not None and (origin != credential.origin or unencrypted(origin)):
            why = "plain http to another machine" if unencrypted(origin) else f"it is {credential.origin}'s"
            raise HttpError(f"not sending the token to {origin}: {why}", fix="check the URL")
        sent = dict(headers)
        if credential is not None:
            sent["Authorization"] = credential.authorization
        connection, deadline = _send(
            method=method, url=target, origin=origin, timeouts=timeouts, headers=sent, body=body, ends=ends
        )
        try:
            response = _response_head(connection, origin, timeouts, deadline)
            if 300 <= response.status < 400 and response.status != HTTPStatus.NOT_MODIFIED:
                url = _redirect_target(method, target, origin, response)
                continue
            yield Answer(response.status, response.headers, response, origin, timeouts, deadline)
            return
        finally:
            deadline.cancel()
            connection.close()
    raise HttpError(
        f"{start} redirected more than {MAX_REDIRECTS} times", fix="check the URL; the server loops"
    )


def _redirect_target(method: str, url: Url, origin: Origin, response: http.client.HTTPResponse) -> str:
    """Where a redirect of ``url`` may be followed to, within ``origin`` (the ``Location`` resolved against
    ``url`` as the WHATWG standard resolves it, as reqwest would); anything else is an error."""
    location = response.headers.get("Location")
    if method not in ("GET", "HEAD"):
        raise HttpError(
            f"{origin} answered {method} {url.path} with {status_text(response.status)}, a "
            "redirect, which is not followed for an upload",
            fix="check the URL: it must name the server's upload API itself",
        )
    if not location:
        raise HttpError(
            f"{origin} answered {status_text(response.status)} without saying where to",
            fix="check the URL",
        )
    try:
        target = ada_url.join_url(url.href, location.strip())
        destination = Origin.of(target)
    except (ValueError, HttpError):
        raise HttpError(
            f"{origin} redirected to something that is not an http(s) URL", fix="check the URL"
        ) from None
    if destination != origin:
        raise HttpError(
            f"{origin} redirected to another origin, {destination}: not followed",
            fix=f"if {destination} is the server you mean, give its URL yourself",
        )
    return target


def _left(ends: float | None) -> float | None:
    """Seconds until ``ends`` (a ``time.monotonic`` instant), or None for no end."""
    return None if ends is None else max(ends - time.monotonic(), 0.0)


def _check_deadline(deadline: _Alarm | None, origin: Origin, timeouts: Timeouts) -> None:
    """The error for a request whose total time is up (its socket was shut down), if it is."""
    if deadline is not None and deadline.fired:
        raise HttpError(
            f"{origin} did not finish the request within {timeouts.total:g} s: gave up",
            fix=_RETRY,
            timed_out=True,
        )


def _response_head(
    connection: http.client.HTTPConnection, origin: Origin, timeouts: Timeouts, deadline: _Alarm
) -> http.client.HTTPResponse:
    """The answer's status line and headers, all within the read timeout (however slowly they trickle in, and
    however many ``100 Continue`` come first); a final ``1xx`` answer is an error."""
    head = _Alarm(connection.sock, timeouts.read)
    try:
        response = connection.getresponse()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        _check_deadline(deadline, origin, timeouts)
        if head.fired:
            raise _failure(TimeoutError(), origin, "answer", timeouts) from None
        raise _failure(exc, origin, "answer", timeouts) from None
    finally:
        head.cancel()
    _check_deadline(deadline, origin, timeouts)
    if response.status < 200:
        raise HttpError(
            f"{origin} answered {status_text(response.status)}, an interim answer, where a final one was due",
            fix="check the URL: that is not an HTTP server this client can talk to",
        )
    return response


def _send(
    *,
    method: str,
    url: Url,
    origin: Origin,
    timeouts: Timeouts,
    headers: Mapping[str, str],
    body: Body,
    ends: float | None,
) -> tuple[http.client.HTTPConnection, _Alarm]:
    """A connection with the request sent (headers and body), and the alarm that ends it at ``ends``; the
    answer is not read yet."""
    left = _left(ends)
    if left == 0:  # a redirect's next hop, with no time left for it
        _check_deadline(_fired(), origin, timeouts)
    connect = timeouts.connect if left is None else min(timeouts.connect, left)
    connection, target, extra = _connection(url, origin, Timeouts(connect=connect, read=timeouts.read))
    deadline = _Alarm(None, None)
    try:
        try:
            connection.connect()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if left is not None and left < timeouts.connect and isinstance(exc, TimeoutError):
                _check_deadline(_fired(), origin, timeouts)  # the total, not the connect timeout, ran out
            raise _failure(exc, origin, "connect", timeouts) from None
        assert connection.sock is not None
        connection.sock.settimeout(timeouts.read)
        deadline = _Alarm(connection.sock, _left(ends))
        length = sum(part.stat().st_size if isinstance(part, Path) else len(part) for part in body)
        try:
            connection.putrequest(method, target, skip_accept_encoding=True)
            for name, value in {"User-Agent": USER_AGENT, **extra, **headers}.items():
                connection.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                connection.putheader("Content-Length", str(length))
            connection.endheaders()
            for part in body:
                if isinstance(part, Path):
                    with part.open("rb") as source:
                        while chunk := source.read(CHUNK):
                            connection.send(chunk)
                else:
                    connection.send(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading, perhaps to answer (a 401, a 413): the answer tells
        except (OSError, http.client.HTTPException, ValueError) as exc:
            _check_deadline(deadline, origin, timeouts)
            raise _failure(exc, origin, "send", timeouts) from None
    except BaseException:
        deadline.cancel()
        connection.close()
        raise
    return connection, deadline


def _fired() -> _Alarm:
    """An alarm that has gone off: the total time was up before a connection could be made."""
    return _Alarm(None, 0)


def _connection(
    url: Url, origin: Origin, timeouts: Timeouts
) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """An unconnected connection to ``origin`` (or its proxy), the request target (``url``'s canonical path
    and query), and proxy headers."""
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    proxy, proxy_headers = _proxy(origin)
    if origin.scheme == "https":
        context = ssl.create_default_context()
        if proxy is None:
            return (
                http.client.HTTPSConnection(
                    origin.address, origin.port, timeout=timeouts.connect, context=context
                ),
                path,
                {},
            )
        connection = http.client.HTTPSConnection(
            proxy.address, proxy.port, timeout=timeouts.connect, context=context
        )
        connection.set_tunnel(origin.address, origin.port, headers=proxy_headers)
        return connection, path, {}
    if proxy is None:
        return http.client.HTTPConnection(origin.address, origin.port, timeout=timeouts.connect), path, {}
    absolute = f"{origin}{path}"
    return (
        http.client.HTTPConnection(proxy.address, proxy.port, timeout=timeouts.connect),
        absolute,
        proxy_headers,
    )


def _proxy(origin: Origin) -> tuple[Origin | None, dict[str, str]]:
    """The proxy the environment names for ``origin`` (never for loopback), and its authorization header."""
    if origin.loopback:
        return None, {}
    url = urllib.request.getproxies().get(origin.scheme)
    if not url or urllib.request.proxy_bypass(origin.address):
        return None, {}
    parts = read(url if "://" in url else f"http://{url}")
    proxy = Origin.of_url(parts)
    if proxy.scheme != "http":
        raise HttpError(
            f"the {origin.scheme}_proxy variable names {proxy}: only an http:// proxy is supported",
            fix=f"set {origin.scheme}_proxy to the proxy's http:// URL",
        )
    if not (parts.username or parts.password):
        return proxy, {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password)}".encode()
    return proxy, {"Proxy-Authorization": f"Basic {base64.b64encode(pair).decode()}"}


_RETRY = "retry later; if it persists, check the URL and the server"
# What an exception raised talking to a server means, the first class that matches; {origin}, {host} and
# {detail} (the TLS library's or the system's reason, never the server's words) are filled in.
_MEANINGS: tuple[tuple[type[BaseException], str, str], ...] = (
    (
        ssl.SSLCertVerificationError,
        "{origin}'s TLS certificate is not trusted ({detail})",
        "check the URL; a server with a private CA needs that CA in SSL_CERT_FILE",
    ),
    (ssl.SSLError, "TLS with {origin} failed ({detail})", _RETRY),
    (http.client.RemoteDisconnected, "{origin} closed the connection without an answer", _RETRY),
    (http.client.BadStatusLine, "{origin} answered with a malformed status line: not an HTTP server", _RETRY),
    (http.client.LineTooLong, "{origin} answered with an overlong header or status line", _RETRY),
    (http.client.HTTPException, "{origin} answered in a malformed way ({detail})", _RETRY),
    (ValueError, "{origin} answered in a malformed way ({detail})", _RETRY),
    (ConnectionRefusedError, "{origin} refused the connection", "check the URL; is the server up?"),
    (ConnectionResetError, "{origin} reset the connection", _RETRY),
    (
        socket.gaierror,
        "{host} could not be resolved ({detail})",
        "check the URL, the network and the http(s)_proxy variables",
    ),
    (OSError, "talking to {origin} failed ({detail})", _RETRY),
)


def _failure(exc: BaseException, origin: Origin, phase: Phase, timeouts: Timeouts) -> HttpError:
    """``exc`` (raised talking to ``origin``) as one line; no text of the server's goes into it."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        if phase == "connect":
            message = f"{origin} did not accept a connection within {timeouts.connect:g} s"
        else:
            what = "took no more of the request" if phase == "send" else "did not answer"
            message = f"{origin} {what} for {timeouts.read:g} s: gave up"
        return HttpError(message, fix=_RETRY, timed_out=True)
    if isinstance(exc, ssl.SSLError):
        detail = getattr(exc, "verify_message", None) or exc.reason
    elif isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        # a proxy's refusal of the tunnel is an OSError with its status line (the proxy never sees the token)
        detail = exc.strerror or (str(exc).splitlines() or [""])[0]
    else:
        detail = None
    for kind, words, fix in _MEANINGS:
        if isinstance(exc, kind):
            text = words.format(origin=origin, host=origin.host, detail=detail or type(exc).__name__)
            return HttpError(text, fix=fix)
    return HttpError(f"talking to {origin} failed ({type(exc).__name__})", fix=_RETRY)
