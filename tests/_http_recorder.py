"""A loopback HTTP server that records every request and answers as a test scripted it, for the upload tests.

It stands in for prefix.dev's and anaconda.org's upload APIs, which cannot be reached here. It accepts any
token and keeps what it was given, as those servers do (server_files.py says what they answer, and from
where that is known): a file name it holds is refused with 409 and listed with its sha256, so a rerun can be
tested against what an earlier run uploaded. It cannot show a real server's other rules (scopes, quotas,
validation of the package), nor prefix.dev's subdirs (every file it holds is listed in every subdir's
repodata). Run as a separate process (``python _http_recorder.py LOG [RULES]``): py-rattler-build's upload
functions hold the GIL while they wait for the network, so a server thread inside the test process never
answers. It prints its port on the first line of stdout, then appends one JSON line per request to LOG:
method, path, headers (lower-case names), the body (base64, de-chunked) and ``at``, when the request was read, on
the system's monotonic clock (``time.monotonic()``, the same in every process here: a test times the client
from its request, not from its start).

RULES is a JSON list of ``{"method": ..., "path": ..., "status": ..., "body": ..., "body_contains": ...,
"times": ...}``; the first rule whose method matches, whose path is a prefix of the request's, whose
``body_contains`` (if given) is in the request body and whose ``times`` (if given) is not used up answers it
(``body`` is sent as JSON). A rule may also give ``headers`` (more response headers, e.g. a redirect's
``Location``), ``delay`` (seconds to wait before answering: a server that never answers), ``raw`` (bytes
sent instead of an HTTP answer, then the connection is closed: a bad status line, a short read) or ``reset``
(the connection is reset instead of answered); in ``headers`` and ``raw``, ``{authorization}`` stands for the
request's Authorization header (a server that echoes the token), and in ``headers`` ``{port}`` for the server's own
port (a redirect to another spelling of itself). ``file`` sends that file's bytes as the body (a channel's
repodata and packages). ``raw_latin1`` is ``raw`` sent as Latin-1
(a header byte that is not ASCII, ``Content-Length: \xb2``); ``trickle`` sends the answer's body one byte every
that many seconds (a server that keeps a slow read alive); ``interim`` sends ``100 Continue`` again and again
for that many seconds, and never a final answer. Each of these stops by itself (the body is short, the
interim answers end), so no test's server runs on once the client gave up. ``--host`` binds another loopback address
(127.0.0.2 is another origin than 127.0.0.1; ``::1``), ``--tls CERT KEY`` serves https. A request in absolute form
(``GET http://host:port/path``, as a client sends it to a proxy) is recorded and matched with that whole target as its
path: the recorder then stands in for an http proxy, and shows which host a client asked for, with which headers. Without a matching rule:

- prefix.dev: ``POST /api/v1/upload/CHANNEL`` keeps the file's name and sha256 (its part's ``X-File-Name`` and
  ``X-File-SHA256``) and answers 200, or 409 for a name it holds; ``GET /CHANNEL/SUBDIR/repodata.json`` lists
  the files it holds (``packages.conda``, with their sha256).
- anaconda.org: ``POST /stage/OWNER/NAME/VERSION/SUBDIR/FILE`` answers an upload form whose ``post_url``
  points back at this server (``/s3``), or 409 for a file it holds; ``POST /commit/...`` keeps the file with
  the staged sha256 and labels; ``GET /dist/OWNER/NAME/VERSION/SUBDIR%2FFILE`` answers that record or 404.
- anything else: 200 and ``{}``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import re
import socket
import ssl
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

PART_HEADER = re.compile(rb"^(X-File-Name|X-File-SHA256): *(\S+)\r?$", re.IGNORECASE | re.MULTILINE)


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path: Path
    rules: list[dict[str, Any]]
    # What the server holds: class-wide, as one server process answers every request.
    lock: ClassVar[threading.Lock] = threading.Lock()
    prefix_files: ClassVar[dict[str, dict[str, str]]] = {}  # channel -> file name -> sha256
    anaconda_files: ClassVar[dict[str, dict[str, Any]]] = {}  # "owner/subdir/file" -> its record
    staged: ClassVar[dict[str, dict[str, Any]]] = {}

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while chunk := int(self.rfile.readline().strip() or b"0", 16):
                chunks.append(self.rfile.read(chunk))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _rule(self, body: bytes) -> dict[str, Any] | None:
        for rule in self.rules:
            if rule.get("method", self.command) != self.command or not self.path.startswith(rule["path"]):
                continue
            if "body_contains" in rule and rule["body_contains"].encode() not in body:
                continue
            if rule.get("times", 1) <= 0:
                continue
            if "times" in rule:
                rule["times"] -= 1
            return rule
        return None

    def _prefix(self, body: bytes) -> tuple[int, object] | None:
        parts = self.path.strip("/").split("/")
        if self.command == "POST" and parts[:3] == ["api", "v1", "upload"]:
            fields = {k.decode().lower(): v.decode() for k, v in PART_HEADER.findall(body)}
            held = self.prefix_files.setdefault(parts[3], {})
            if fields["x-file-name"] in held:
                return 409, {"detail": "package already exists"}
            held[fields["x-file-name"]] = fields["x-file-sha256"]
            return 200, {}
        if self.command == "GET" and len(parts) == 3 and parts[2] == "repodata.json":
            held = self.prefix_files.get(parts[0], {})
            files = {name: {"sha256": sha256} for name, sha256 in held.items()}
            return 200, {"info": {"subdir": parts[1]}, "packages": {}, "packages.conda": files}
        return None

    def _anaconda(self, body: bytes) -> tuple[int, object] | None:
        parts = self.path.strip("/").split("/")
        if parts[0] in ("stage", "commit") and self.command == "POST" and len(parts) == 6:
            key = f"{parts[1]}/{parts[4]}/{parts[5]}"
            if parts[0] == "stage":
                if key in self.anaconda_files:
                    return 409, {"error": "file already exists"}
                payload = json.loads(body)
                self.staged[key] = {"sha256": payload["sha256"], "labels": payload["channels"]}
                host, port = self.server.server_address[:2]
                return 200, {"post_url": f"http://{host}:{port}/s3", "form_data": {}, "dist_id": "recorded"}
            self.anaconda_files[key] = {"basename": f"{parts[4]}/{parts[5]}", **self.staged.pop(key)}
            return 200, {}
        if parts[0] == "dist" and self.command == "GET" and len(parts) == 5:
            subdir, _, name = unquote(parts[4]).partition("/")
            record = self.anaconda_files.get(f"{parts[1]}/{subdir}/{name}")
            return (200, record) if record else (404, {"error": "not found"})
        return None

    def _answer(self) -> None:
        body = self._body()
        record = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": base64.b64encode(body).decode(),
            "at": time.monotonic(),
        }
        with self.lock:
            with self.log_path.open("a") as log:
                log.write(json.dumps(record) + "\n")
            rule = self._rule(body)
            if rule is None:
                status, answer = self._prefix(body) or self._anaconda(body) or (200, {})
                rule = {"status": status, "body": answer}
        time.sleep(rule.get("delay", 0))
        authorization = self.headers.get("Authorization", "")
        if rule.get("reset"):  # closed at once with SO_LINGER 0: a TCP reset, not the server's usual FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.wfile.close()
            self.connection.close()
            self.close_connection = True
            return
        if "raw" in rule or "raw_latin1" in rule:
            raw = rule.get("raw", rule.get("raw_latin1", ""))
            encoding = "utf-8" if "raw" in rule else "latin-1"
            with contextlib.suppress(OSError):
                self.wfile.write(raw.replace("{authorization}", authorization).encode(encoding))
            self.close_connection = True
            return
        if "interim" in rule:
            ends = time.monotonic() + float(rule["interim"])
            with contextlib.suppress(OSError):  # the client hung up: done
                while time.monotonic() < ends:
                    self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    self.wfile.flush()
                    time.sleep(0.01)
            self.close_connection = True
            return
        payload = (
            Path(rule["file"]).read_bytes() if "file" in rule else json.dumps(rule.get("body", {})).encode()
        )
        self.send_response(int(rule["status"]))
        for name, value in rule.get("headers", {}).items():
            port = str(self.server.server_address[1])
            self.send_header(name, value.replace("{authorization}", authorization).replace("{port}", port))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if "trickle" in rule:
            with contextlib.suppress(OSError):  # the client hung up: done
                for byte in payload:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(float(rule["trickle"]))
            self.close_connection = True
            return
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:  # silence per-request lines on stderr
        del format, args


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("rules", nargs="?", default="[]")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = parser.parse_args()
    Recorder.log_path = args.log
    Recorder.rules = json.loads(args.rules)
    if ":" in args.host:  # an IPv6 address (::1)
        ThreadingHTTPServer.address_family = socket.AF_INET6
    server = ThreadingHTTPServer((args.host, 0), Recorder)
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*args.tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
