"""The toolkit's HTTP client (_http.py) on its own: origins, and the guard that keeps a credential home.

The commands' behaviour against real servers is tested where they are used (test_upload.py,
test_llvm_archive_download.py); here, what no command reaches today but any new caller would: a request
given a credential for another origin, or for plain http to another machine, is refused before a connection.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from _timing import seconds, seconds_arg
from flagtree_feedstock._http import Credential, HttpError, Origin, Timeouts, open_request, redact, shown_url
from flagtree_feedstock._urls import one_line

TIMEOUTS = Timeouts(connect=seconds(5), read=seconds(5))


@pytest.mark.parametrize(
    ("url", "origin", "loopback"),
    [
        ("https://prefix.dev/api/v1/upload/x", "https://prefix.dev", False),
        ("HTTPS://Prefix.Dev:443/", "https://prefix.dev", False),
        ("http://127.0.0.1:8080/x?y=1", "http://127.0.0.1:8080", True),
        ("http://127.1.2.3/", "http://127.1.2.3", True),
        ("http://localhost:9/", "http://localhost:9", True),
        ("http://[::1]:8000/", "http://[::1]:8000", True),
        ("http://192.0.2.7/", "http://192.0.2.7", False),
        ("http://localhost.example.org/", "http://localhost.example.org", False),
    ],
)
def test_an_origin_is_scheme_host_and_port(url: str, origin: str, loopback: bool) -> None:
    assert str(Origin.of(url)) == origin
    assert Origin.of(url).loopback is loopback


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.org/x", "is not an http:// or https:// URL with a host"),
        ("file:///x", "is not an http:// or https:// URL with a host"),
        ("http://host:port/", "cannot be read as a URL"),
        ("http://[::1/", "cannot be read as a URL"),
        ("http://xn--abc.example/", "has the label xn--abc in its host, which is not the punycode"),
        # the host x to rattler (WHATWG skips the slashes), none to Python
        ("https:///x", "names one server to Python's URL parser and another to rattler's"),
    ],
)
def test_what_is_not_an_http_url_with_one_reading_is_refused(url: str, why: str) -> None:
    with pytest.raises(HttpError, match=why):
        Origin.of(url)


@pytest.fixture
def listener() -> socket.socket:
    """A loopback socket that records whether anything connected (nothing ever accepts)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    yield server
    server.close()


def _connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.mark.parametrize(
    ("credential_for", "expected"),
    [
        (
            "https://prefix.dev",
            "not sending the token to http://127.0.0.1:{port}: it is https://prefix.dev's",
        ),
        (
            "http://127.0.0.1:1",
            "not sending the token to http://127.0.0.1:{port}: it is http://127.0.0.1:1's",
        ),
    ],
)
def test_a_credential_goes_to_its_own_origin_only(credential_for: str, expected: str, listener) -> None:
    port = listener.getsockname()[1]
    credential = Credential(origin=Origin.of(credential_for), authorization="Bearer s3cret", secret="s3cret")
    with (
        pytest.raises(HttpError) as raised,
        open_request("GET", f"http://127.0.0.1:{port}/x", timeouts=TIMEOUTS, credential=credential),
    ):
        pass
    assert raised.value.message == expected.format(port=port)
    assert not _connected(listener)


def test_a_credential_never_goes_over_plain_http_to_another_machine() -> None:
    """192.0.2.0/24 is TEST-NET-1: nothing answers there, and nothing is tried."""
    origin = Origin.of("http://192.0.2.7:8080")
    credential = Credential(origin=origin, authorization="token s3cret", secret="s3cret")
    with (
        pytest.raises(HttpError) as raised,
        open_request("GET", "http://192.0.2.7:8080/x", timeouts=TIMEOUTS, credential=credential),
    ):
        pass
    assert (
        raised.value.message
        == "not sending the token to http://192.0.2.7:8080: plain http to another machine"
    )
    assert not raised.value.timed_out  # refused, not tried


def test_a_url_that_names_two_hosts_is_refused_before_a_connection(listener) -> None:
    """``\\@``: rattler and browsers read the host up to the backslash (this listener), Python past the ``@``."""
    port = listener.getsockname()[1]
    url = f"http://user:PW-5ecret@127.0.0.1:{port}\\@127.0.0.2:{port}/x"
    with pytest.raises(HttpError) as raised, open_request("GET", url, timeouts=TIMEOUTS):
        pass
    assert raised.value.message == (
        "'http://…' names one server to Python's URL parser and another to rattler's (WHATWG): they read its "
        "host or port differently"
    )
    assert raised.value.fix == (
        "write the host right after the scheme's two slashes, with no backslash before the path, and a "
        "backslash or slash in a user name or password as %5C or %2F"
    )
    assert not _connected(listener)


def test_a_credential_s_repr_hides_the_token() -> None:
    credential = Credential(
        origin=Origin.of("https://prefix.dev"), authorization="Bearer s3cret", secret="s3cret"
    )
    assert "s3cret" not in repr(credential)


def test_redaction_masks_each_form_a_server_may_echo() -> None:
    odd = 'pfx_ab/cd+ef"gh'
    assert redact(f"a {odd} b pfx_ab%2Fcd%2Bef%22gh c", odd) == "a *** b *** c"
    assert redact("a b c", " ") == "a b c"


class _Redirecting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(302)
        if self.path != "/nowhere":
            self.send_header("Location", f"{self.path}x")  # always one more hop, on this server
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture
def redirecting(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/loop", "{url} redirected more than 5 times"),
        ("/nowhere", "{url} answered HTTP 302 Found without saying where to"),
    ],
)
def test_a_redirect_that_leads_nowhere_is_one_line(path: str, expected: str, redirecting: str) -> None:
    with (
        pytest.raises(HttpError) as raised,
        open_request("GET", f"{redirecting}{path}", timeouts=TIMEOUTS),
    ):
        pass
    assert raised.value.message == expected.format(url=redirecting)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://host.example/a/b.tar.gz?sig=SECRET&se=2026", "https://host.example/a/b.tar.gz?…"),
        ("https://user:SECRET@host.example:8443/b.tar.gz", "https://…@host.example:8443/b.tar.gz"),
        ("https://host.example/b.tar.gz#SECRET", "https://host.example/b.tar.gz"),
        ("https://host.example/b.tar.gz", "https://host.example/b.tar.gz"),
        ("/home/me/llvm?.tar.gz", "/home/me/llvm?.tar.gz"),
        ("http://user:PW@host/t/TOKEN/chan?sig=Q", "http://…@host/t/…/chan?…"),
        ("https://conda.anaconda.org/t/tk-1-2/chan/linux-64", "https://conda.anaconda.org/t/…/chan/linux-64"),
        ("https://user:pa/ss@host/x", "https://…"),
        ("http://user:PW@a.test\\@b.test/chan", "http://…"),
        ("conda-forge", "conda-forge"),
        ("http://user:PW@2130706433:8/c?s=1", "http://…@127.0.0.1:8/c?…"),
        ("HTTPS://BÜCHER.example:443/t/TK/c", "https://xn--bcher-kva.example/t/…/c"),
        ("http://h/a/../t/TOKEN/c", "http://h/t/…/c"),
        ("http://h/%74/TOKEN/c", "http://h/%74/…/c"),
        ("http://[0:0::1]:80", "http://[::1]"),
    ],
    ids=[
        "query",
        "password",
        "fragment",
        "plain",
        "a-path",
        "anaconda",
        "token-path",
        "broken",
        "two-hosts",
        "a-name",
        "decimal-ipv4",
        "idn-upper-case-default-port",
        "dot-segments",
        "encoded-t",
        "ipv6",
    ],
)
def test_a_url_is_shown_without_what_may_sign_it(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    ("text", "cut", "shown"),
    [
        ("denied: 0123456789abcdef", False, "denied: ***"),
        ("denied: 01234567", True, "denied: ***"),  # the read stopped inside the token
        ("denied: 01234567", False, "denied: 01234567"),  # whole text: a prefix alone is no token
        ("denied: nothing", True, "denied: nothing"),
    ],
    ids=["whole", "cut-inside", "not-cut", "cut-elsewhere"],
)
def test_redaction_masks_a_token_cut_by_the_end_of_the_text(text: str, cut: bool, shown: str) -> None:
    assert redact(text, "0123456789abcdef", cut=cut) == shown


def test_redaction_takes_a_token_with_a_stray_byte() -> None:
    assert redact("a t\udc85k b", "t\udc85k") == "a *** b"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("from http://u:p@h:1/t/T0K3N/c?s=1: not found", "from http://…@h:1/t/…/c?…: not found"),
        ("see (https://h/x?sig=abc).", "see (https://h/x?…)."),
        ("use https://[2001:db8::1] (plain", "use https://[2001:db8::1] (plain"),
        ("name x\r\nX-Injected: 1\x1b[2J", "name x\\r\\nX-Injected: 1\\x1b[2J"),
    ],
    ids=["url-with-secrets", "punctuation-after", "ipv6", "control-characters"],
)
def test_an_error_line_is_one_line_without_a_url_s_secrets(text: str, shown: str) -> None:
    assert one_line(text) == shown


class _Interim(BaseHTTPRequestHandler):
    """Answers with ``102 Processing`` and nothing after: an interim answer as the final one."""

    def do_GET(self) -> None:
        self.wfile.write(b"HTTP/1.1 102 Processing\r\n\r\n")
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def test_an_interim_answer_is_never_taken_for_the_final_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Interim)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(HttpError) as raised, open_request("GET", f"{url}/x", timeouts=TIMEOUTS):
            pass
    finally:
        server.shutdown()
        server.server_close()
    assert (
        raised.value.message
        == f"{url} answered HTTP 102 Processing, an interim answer, where a final one was due"
    )


def test_the_total_is_named_when_its_alarm_s_thread_runs_late(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for the answer (the read timeout) and the whole request (the total) end at about one instant;
    on a loaded machine the total's timer thread may not have run when the answer's has. The error names the
    total all the same: its time is up by the clock. The total's timer here never starts at all."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    alarms: list[threading.Timer] = []

    class Late(threading.Timer):
        def start(self) -> None:
            alarms.append(self)
            if len(alarms) > 1:  # the request's total is the first alarm: its thread never runs
                super().start()

    monkeypatch.setattr(threading, "Timer", Late)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with (
        pytest.raises(HttpError) as raised,
        open_request(
            "GET", f"{url}/x", timeouts=Timeouts(connect=seconds(5), read=seconds(0.5), total=seconds(0.5))
        ),
    ):
        pass
    assert len(alarms) == 2
    assert raised.value.message == f"{url} did not finish the request within {seconds_arg(0.5)} s: gave up"


def test_a_body_that_stops_coming_is_given_up_on_after_the_read_timeout(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each wait on the server has its own limit, well within the request's total: an answer whose body
    stops after its first bytes ends after the read timeout, named as such (not after the total)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    listener.setblocking(True)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    taken: list[socket.socket] = []

    def answer_then_stall() -> None:
        peer, _ = listener.accept()
        taken.append(peer)  # held open, silent, until the test ends
        peer.recv(65536)
        peer.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")

    server = threading.Thread(target=answer_then_stall, daemon=True)
    server.start()
    try:
        with (
            pytest.raises(HttpError) as raised,
            open_request(
                "GET",
                f"{url}/x",
                timeouts=Timeouts(connect=seconds(30), read=seconds(0.5), total=seconds(120)),
            ) as answer,
        ):
            answer.read_all()
    finally:
        server.join()
        for peer in taken:
            peer.close()
    assert raised.value.message == f"{url} did not answer for {seconds_arg(0.5)} s: gave up"


# ---- the three deadlines told apart: connect, read (each wait, the body's too) and total (issue 47) --------


def _stalling_server(listener: socket.socket, body: bytes, *, interval: float | None) -> threading.Thread:
    """Answer one request with a head announcing 1000 bytes, then ``body``: at once and then silence
    (``interval`` None), or one byte every ``interval`` seconds (a trickle that keeps each read alive)."""
    listener.setblocking(True)
    taken: list[socket.socket] = []

    def serve() -> None:
        peer, _ = listener.accept()
        taken.append(peer)
        peer.recv(65536)
        peer.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        try:
            if interval is None:
                peer.sendall(body)
                peer.recv(1)  # silent until the client hangs up
            else:
                for byte in body:
                    peer.sendall(bytes([byte]))
                    time.sleep(interval)
        except OSError:
            pass
        finally:
            peer.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def _timed(url: str, timeouts: Timeouts) -> tuple[HttpError, float]:
    """The error a GET of ``url`` whose body is read whole ends in, and the seconds it took."""
    started = time.monotonic()
    with pytest.raises(HttpError) as raised, open_request("GET", url, timeouts=timeouts) as answer:
        answer.read_all()
    return raised.value, time.monotonic() - started


def test_a_stalled_body_ends_after_the_read_timeout_not_the_connect_timeout_nor_the_total(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body's first bytes, then silence: the read timeout (0.5 s) ends it, long before the connect
    timeout (30 s, what a socket left with its connect timeout would wait) and the total (60 s)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = _stalling_server(listener, b"0123456789", interval=None)
    error, took = _timed(f"{url}/x", Timeouts(connect=seconds(30), read=seconds(0.5), total=seconds(60)))
    server.join(seconds(10))
    assert error.message == f"{url} did not answer for {seconds_arg(0.5)} s: gave up"
    assert error.timed_out
    assert seconds(0.45) <= took < seconds(10), took


def test_a_trickling_body_ends_at_the_total_whatever_its_pace(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One byte every 0.1 s keeps every read within its timeout (5 s): the total (1 s) ends it, named."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = _stalling_server(listener, b"x" * 300, interval=0.1)
    error, took = _timed(f"{url}/x", Timeouts(connect=seconds(30), read=seconds(5), total=seconds(1)))
    server.join(seconds(10))
    assert error.message == f"{url} did not finish the request within {seconds_arg(1)} s: gave up"
    assert seconds(0.9) <= took < seconds(5), took


def test_a_server_that_takes_no_connection_ends_after_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener whose queue is full (nothing accepts): the connect timeout (0.5 s) ends the wait, long
    before the read timeout (30 s) and the total (60 s)."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    queued = []
    for _ in range(4):  # fill the accept queue: a SYN beyond it is dropped, and the connect waits
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(full.getsockname())
        queued.append(client)
    url = f"http://127.0.0.1:{full.getsockname()[1]}"
    try:
        started = time.monotonic()
        with (
            pytest.raises(HttpError) as raised,
            open_request(
                "GET",
                f"{url}/x",
                timeouts=Timeouts(connect=seconds(0.5), read=seconds(30), total=seconds(60)),
            ),
        ):
            pass
        took = time.monotonic() - started
    finally:
        for client in queued:
            client.close()
        full.close()
    assert raised.value.message == f"{url} did not accept a connection within {seconds_arg(0.5)} s"
    assert took < seconds(10), took
