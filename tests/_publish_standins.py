"""Loopback stand-ins of GitHub's OIDC token endpoint and of prefix.dev, for the trusted-publishing tests.

Each stand-in is an HTTP server on 127.0.0.1 whose request loop is bounded: it answers at most ``limit``
requests and gives up after ``lifetime`` seconds, so it stops by itself even if a test never stops it. It keeps
every request whole (method, path, headers with lower-case names, body) and answers through a function the
test gives, so a test scripts a refusal or a malformed answer and then reads what was sent where.

What the real servers answer, and from where that is known (the toolkit's requests follow the same sources):

- GitHub's OIDC endpoint: ``GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=...`` with ``Authorization: bearer
  $ACTIONS_ID_TOKEN_REQUEST_TOKEN`` answers ``{"count": ..., "value": "<JWT>"}`` (conda/rattler
  ``crates/rattler_upload/src/upload/trusted_publishing.rs``, ``OidcToken``).
- prefix.dev: ``POST /api/oidc/mint_token`` with ``{"token": "<JWT>"}`` answers the short-lived key as the
  whole body (``crates/rattler_networking/src/oidc_exchange.rs``, ``prefix_mint``, and its test server, which
  answers ``pfx-jwt.minted``), or an error status with a reason; ``POST /api/v1/upload/CHANNEL`` takes the
  multipart upload (parts ``file`` and ``attestation``); ``GET /CHANNEL/SUBDIR/repodata.json`` answers 404 for a
  channel without packages (``channel/server_files.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer

from _timing import seconds


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)  # more response headers (a redirect's Location)


Answer = Callable[[Request], Reply]


@dataclass
class StandIn:
    """A bounded loopback server answering with ``answer``; ``url`` is its base URL."""

    answer: Answer
    limit: int = 20
    lifetime: float = field(default_factory=lambda: seconds(60))
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = Request(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                stand_in.requests.append(request)
                reply = stand_in.answer(request)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)
                self.close_connection = True

            do_GET = do_POST = _handle

            def log_message(self, format: str, *args: object) -> None:  # nothing on the test's stderr
                del format, args

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        # a client that gave up (a timeout test) is gone when the answer is written: no report of that
        self._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self._server.timeout = 0.2  # each wait for a connection, so the loop sees `stop` and its deadline
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _loop(self) -> None:
        deadline = time.monotonic() + self.lifetime
        while len(self.requests) < self.limit and time.monotonic() < deadline and not self._stopped.is_set():
            self._server.handle_request()
        self._server.server_close()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=seconds(5))
