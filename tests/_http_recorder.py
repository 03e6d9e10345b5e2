"""A loopback HTTP server that records every request, for the upload tests.

Run as a separate process (``python _http_recorder.py LOG STATUS``): py-rattler-build's upload functions
hold the GIL while they wait for the network, so a server thread inside the test process never answers.
It prints its port on the first line of stdout, then appends one JSON line per request to LOG: method,
path, headers (lower-case names) and body size. Every request gets STATUS; for anaconda.org's protocol a
successful ``/stage/...`` answers with an upload form that points back at this server (``/s3``).
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path: Path
    status: int

    def _body_size(self) -> int:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            size = 0
            while chunk := int(self.rfile.readline().strip() or b"0", 16):
                size += len(self.rfile.read(chunk))
                self.rfile.readline()
            self.rfile.readline()
            return size
        return len(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _answer(self) -> None:
        record = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body_size": self._body_size(),
        }
        with self.log_path.open("a") as log:
            log.write(json.dumps(record) + "\n")
        body: dict[str, object] = {}
        if self.status < 300 and self.path.startswith("/stage/"):
            host, port = self.server.server_address[:2]
            body = {"post_url": f"http://{host}:{port}/s3", "form_data": {}, "dist_id": "recorded"}
        payload = json.dumps(body if self.status < 300 else {"error": "refused by the recorder"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:  # silence per-request lines on stderr
        del format, args


def main() -> None:
    Recorder.log_path = Path(sys.argv[1])
    Recorder.status = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
