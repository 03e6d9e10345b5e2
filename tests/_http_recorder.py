"""A loopback HTTP server that records every request and answers as a test scripted it, for the upload tests.

It stands in for prefix.dev's and anaconda.org's upload APIs, which cannot be reached here; it knows nothing of
their rules (it accepts any token, any body), so it shows what the client sends, not whether a real server
would take it. Run as a separate process (``python _http_recorder.py LOG [RULES]``): py-rattler-build's
upload functions hold the GIL while they wait for the network, so a server thread inside the test process
never answers. It prints its port on the first line of stdout, then appends one JSON line per request to LOG:
method, path, headers (lower-case names) and the body (base64, de-chunked).

RULES is a JSON list of ``{"method": ..., "path": ..., "status": ..., "body": ...}``; the first rule whose
method matches and whose path is a prefix of the request's answers it (``body`` is sent as JSON). Without a
matching rule the answer is 200, and for anaconda.org's ``POST /stage/...`` an upload form whose ``post_url``
points back at this server (``/s3``).
"""

from __future__ import annotations

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path: Path
    rules: list[dict[str, Any]]

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while chunk := int(self.rfile.readline().strip() or b"0", 16):
                chunks.append(self.rfile.read(chunk))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _rule(self) -> tuple[int, object]:
        for rule in self.rules:
            if rule.get("method", self.command) == self.command and self.path.startswith(rule["path"]):
                return int(rule["status"]), rule.get("body", {})
        if self.command == "POST" and self.path.startswith("/stage/"):
            host, port = self.server.server_address[:2]
            return 200, {"post_url": f"http://{host}:{port}/s3", "form_data": {}, "dist_id": "recorded"}
        return 200, {}

    def _answer(self) -> None:
        record = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": base64.b64encode(self._body()).decode(),
        }
        with self.log_path.open("a") as log:
            log.write(json.dumps(record) + "\n")
        status, body = self._rule()
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:  # silence per-request lines on stderr
        del format, args


def main() -> None:
    Recorder.log_path = Path(sys.argv[1])
    Recorder.rules = json.loads(sys.argv[2]) if len(sys.argv) > 2 else []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
