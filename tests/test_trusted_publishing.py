"""``flagtree-feedstock upload --to prefix`` by trusted publishing and with CEP 27 attestations.

The real console script, in its own process, against loopback stand-ins (``_publish_standins.py``) of GitHub's
OIDC token endpoint and of prefix.dev, two origins: a GitHub job's environment (``ACTIONS_ID_TOKEN_REQUEST_URL``
and ``_TOKEN``, no ``PREFIX_API_KEY``) makes the upload request an OIDC token, exchange it for a key and
upload with that key, each package with its attestation. The three secrets (the request token, the OIDC
token, the key) are checked to go where each belongs and nowhere else: not in another request, not in stdout
or stderr, not in any file the command could write.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from _hostile_inputs import FORMS, damage, refused, run_capped
from _publish_standins import Answer, Reply, Request, StandIn
from _timing import seconds, seconds_arg
from _toy import build_toy_multi
from flagtree_feedstock._own_files import ATTESTATION

CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
PREDICATE_TYPE = "https://schemas.conda.org/attestations-publish-1.schema.json"
REQUEST_TOKEN = "Xq4Rw9Tz2LpV7mNc8KsB3dHf"  # as random as the real ones: no word of a message
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJwcmVmaXguZGV2In0.c2lnbmVkLWJ5LWdpdGh1Yg"
KEY = "pfx-jwt.Mq7Vt2KbX9rLw4Zs0YdJ6hGe"
SECRETS = {"request token": REQUEST_TOKEN, "OIDC token": JWT, "key": KEY}
CHANNEL = "flagtree"

Servers = Callable[..., tuple[StandIn, StandIn]]


@pytest.fixture(scope="module")
def toy_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel folder with two real packages (toy-llvm, toy-py for python 3.11), built by the main job."""
    return build_toy_multi(tmp_path_factory.mktemp("trusted"))


@pytest.fixture
def packages(toy_channel: Path) -> list[Path]:
    found = sorted((toy_channel / "linux-64").glob("*.conda"))
    assert len(found) == 2
    return found


def github(request: Request) -> Reply:
    """GitHub's OIDC endpoint: a token for a request that carries the request token."""
    if request.headers.get("authorization", "").lower() != f"bearer {REQUEST_TOKEN}".lower():
        return Reply(401, b'{"message": "bad request token"}')
    return Reply(200, json.dumps({"count": 1, "value": JWT}).encode())


def prefix(mint: Reply | None = None) -> Answer:
    """prefix.dev: a key for the right OIDC token (or ``mint``), uploads and lookups only with that key."""

    def answer(request: Request) -> Reply:  # noqa: PLR0911 - one answer per route and refusal
        path = urlsplit(request.path).path
        if request.method == "POST" and path == "/api/oidc/mint_token":
            if mint is not None:
                return mint
            if json.loads(request.body) != {"token": JWT}:
                return Reply(401, b'{"detail": "invalid OIDC token"}')
            return Reply(200, KEY.encode(), "text/plain")
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return Reply(401, b'{"detail": "unauthorized"}')
        if request.method == "GET" and path.endswith("/repodata.json"):
            return Reply(404, b'{"detail": "no such subdir"}')
        if request.method == "POST" and path == f"/api/v1/upload/{CHANNEL}":
            return Reply(200, b"{}")
        return Reply(404, b"{}")

    return answer


@pytest.fixture
def servers() -> Iterator[Servers]:
    started: list[StandIn] = []

    def start(oidc: Answer = github, server: Answer | None = None) -> tuple[StandIn, StandIn]:
        pair = StandIn(oidc), StandIn(server or prefix())
        started.extend(pair)
        return pair

    yield start
    for stand_in in started:
        stand_in.stop()


def bundle(package: Path, channel_url: str, **changes: object) -> bytes:
    """A Sigstore bundle as actions/attest writes it (one JSON line), of ``package``'s CEP 27 statement."""
    subject = {"name": package.name, "digest": {"sha256": hashlib.sha256(package.read_bytes()).hexdigest()}}
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": changes.get("subject", [subject]),
        "predicateType": changes.get("predicate_type", PREDICATE_TYPE),
        "predicate": {"targetChannel": changes.get("channel", channel_url)},
    }
    document = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"certificate": {"rawBytes": "MIIC"}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": base64.b64encode(json.dumps(statement).encode()).decode(),
            "payloadType": "application/vnd.in-toto+json",
            "signatures": [{"sig": "MEUCIQ"}],
        },
    }
    return (json.dumps(document) + "\n").encode()


def write_bundles(folder: Path, packages: list[Path], channel_url: str) -> dict[str, bytes]:
    folder.mkdir(exist_ok=True)
    written = {}
    for package in packages:
        written[package.name] = bundle(package, channel_url)
        (folder / f"{package.name}.sigstore.json").write_bytes(written[package.name])
    return written


def job_env(tmp_path: Path, oidc_url: str | None, **extra: str) -> dict[str, str]:
    """A GitHub job's environment (with id-token: write where ``oidc_url`` is given)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "PREFIX_", "ANACONDA_"))}
    (tmp_path / "tmp").mkdir(exist_ok=True)  # HOME and TMPDIR in tmp_path: every file written there is read
    env.update(GITHUB_ACTIONS="true", HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"), NO_COLOR="1")
    env.update(no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    if oidc_url is not None:
        env.update(ACTIONS_ID_TOKEN_REQUEST_URL=oidc_url, ACTIONS_ID_TOKEN_REQUEST_TOKEN=REQUEST_TOKEN)
    env.update(extra)
    return env


def upload(channel: Path, url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    args = [str(CONSOLE_SCRIPT), "upload", str(channel), "--to", "prefix", "--channel", CHANNEL, "--url", url]
    return subprocess.run(
        [*args, *extra], env=env, capture_output=True, text=True, timeout=seconds(120), check=False
    )


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def assert_no_secret_escapes(done: subprocess.CompletedProcess[str], *folders: Path) -> None:
    """No piece of the three secrets (any 8 characters of one) in the command's output or in any file under
    ``folders``: a secret shown in part, "to help debugging", is a leak too."""
    files = [path.read_bytes() for folder in folders for path in folder.rglob("*") if path.is_file()]
    for what, secret in SECRETS.items():
        for piece in {secret[start : start + 8] for start in range(len(secret) - 7)}:
            assert piece not in done.stdout, (what, piece)
            assert piece not in done.stderr, (what, piece)
            assert not [data for data in files if piece.encode() in data], (what, piece)


def form_parts(request: Request) -> dict[str, tuple[dict[str, str], bytes]]:
    """A multipart/form-data body as {field name: (part headers, content)}."""
    boundary = request.headers["content-type"].split("boundary=", 1)[1].encode()
    assert request.body.endswith(b"--" + boundary + b"--\r\n")
    parts = {}
    for chunk in request.body.split(b"--" + boundary)[1:-1]:
        head, _, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in head.decode().split("\r\n"))}
        name = headers["content-disposition"].split('name="', 1)[1].split('"', 1)[0]
        parts[name] = (headers, content.removesuffix(b"\r\n"))
    return parts


@pytest.mark.parametrize("key", [None, ""], ids=["no-key", "unset-secret"])
def test_trusted_publishing_uploads_each_package_with_its_attestation(
    key: str | None, toy_channel: Path, packages: list[Path], servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers()
    bundles = write_bundles(tmp_path / "attestations", packages, f"{server.url}/{CHANNEL}")
    extra = {} if key is None else {"PREFIX_API_KEY": key}  # GitHub expands an unset secret to ""
    env = job_env(tmp_path, f"{oidc.url}/token?api-version=2.0", **extra)
    done = upload(toy_channel, server.url, env, "--attestations", str(tmp_path / "attestations"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"uploaded 2 package(s) to prefix channel {CHANNEL}:",
        *(f"  {p}" for p in packages),
    ]
    # GitHub's endpoint: one request, the audience prefix.dev added to the query GitHub gave, the request token.
    (asked,) = oidc.requests
    assert (asked.method, urlsplit(asked.path).path) == ("GET", "/token")
    assert parse_qs(urlsplit(asked.path).query) == {"api-version": ["2.0"], "audience": ["prefix.dev"]}
    assert asked.headers["authorization"] == f"bearer {REQUEST_TOKEN}"
    # prefix.dev: the exchange first (the OIDC token in its body, no Authorization), then lookups and uploads.
    exchange, *rest = server.requests
    assert (exchange.method, exchange.path) == ("POST", "/api/oidc/mint_token")
    assert exchange.headers["content-type"] == "application/json"
    assert json.loads(exchange.body) == {"token": JWT}
    assert "authorization" not in exchange.headers
    assert [(r.method, r.path) for r in rest] == [
        call
        for _ in packages
        for call in (("GET", f"/{CHANNEL}/linux-64/repodata.json"), ("POST", f"/api/v1/upload/{CHANNEL}"))
    ]
    assert {r.headers["authorization"] for r in rest} == {f"Bearer {KEY}"}
    for request, package in zip(rest[1::2], packages, strict=True):
        parts = form_parts(request)
        assert list(parts) == ["file", "attestation"]
        assert parts["file"][1] == package.read_bytes()
        assert parts["attestation"][1] == bundles[package.name]
    # Each secret went where it belongs only.
    assert REQUEST_TOKEN not in repr(server.requests)
    assert [r for r in server.requests if JWT.encode() in r.body or JWT in repr(r.headers)] == [exchange]
    assert KEY not in repr(oidc.requests) and KEY not in repr(exchange)
    assert_no_secret_escapes(done, tmp_path, toy_channel)


def test_a_set_key_is_used_and_no_oidc_token_is_requested(
    toy_channel: Path, packages: list[Path], servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers()
    env = job_env(tmp_path, f"{oidc.url}/token?api-version=2.0", PREFIX_API_KEY=KEY)
    done = upload(toy_channel, server.url, env)
    assert done.returncode == 0, done.stderr
    assert oidc.requests == []
    assert [r.path for r in server.requests if r.method == "POST"] == [f"/api/v1/upload/{CHANNEL}"] * 2
    # without --attestations the upload is the file alone
    assert all(list(form_parts(r)) == ["file"] for r in server.requests if r.method == "POST")


def test_a_refused_exchange_is_one_line_with_the_token_masked(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    # prefix.dev refuses a repository that is not a trusted publisher of the channel; this stand-in's reason
    # quotes the token it was given, as a careless server might.
    refusal = json.dumps({"detail": f"OIDCPublisherNotFound: no publisher for token {JWT}"}).encode()
    oidc, server = servers(server=prefix(mint=Reply(403, refusal)))
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 9
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: {server.url} answered the trusted-publishing exchange "
        "(POST /api/oidc/mint_token) with HTTP 403 Forbidden: "
        '{"detail": "OIDCPublisherNotFound: no publisher for token ***"} (the OIDC token was refused) '
        "(fix: add this repository and workflow as a trusted publisher in the channel's settings on "
        "prefix.dev (docs/ci-and-publishing.md), or set PREFIX_API_KEY)"
    )
    assert done.stdout == ""
    assert [r.path for r in server.requests] == ["/api/oidc/mint_token"]  # nothing uploaded
    assert_no_secret_escapes(done, tmp_path, toy_channel)


def test_an_exchange_that_fails_on_the_servers_side_says_to_retry(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers(server=prefix(mint=Reply(502, b"<html>bad gateway</html>", "text/html")))
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 9
    assert error_line(done.stderr).endswith(
        "with HTTP 502 Bad Gateway: <html>bad gateway</html> "
        "(fix: prefix.dev failed: retry later, or set PREFIX_API_KEY)"
    )
    assert_no_secret_escapes(done, tmp_path, toy_channel)


MALFORMED_KEYS = {
    "empty": b"",
    "html": b"<html><body>Sign in</body></html>",
    "json-without-token": b'{"detail": "ok"}',
    "two-words": b"pfx key",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_KEYS))
def test_an_exchange_answer_that_is_not_a_key_is_refused_without_uploading(
    case: str, toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    body = MALFORMED_KEYS[case]
    oidc, server = servers(server=prefix(mint=Reply(200, body, "text/plain")))
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 9
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: {server.url} answered the trusted-publishing exchange "
        f"(POST /api/oidc/mint_token) with something that is not an API key ({len(body)} bytes) "
        "(fix: retry; if it persists, check --url: it must name prefix.dev or a server of its kind)"
    )
    assert [r.path for r in server.requests] == ["/api/oidc/mint_token"]
    assert_no_secret_escapes(done, tmp_path, toy_channel)


def test_an_exchange_answer_of_the_older_json_form_is_read(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    # rattler-build's upload before it moved into rattler read {"token": "<key>"}.
    def older(request: Request) -> Reply:
        if request.path == "/api/oidc/mint_token":
            return Reply(200, json.dumps({"token": KEY}).encode())
        return prefix()(request)

    oidc, server = servers(server=older)
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 0, done.stderr
    assert {r.headers.get("authorization") for r in server.requests[1:]} == {f"Bearer {KEY}"}


OIDC_FAILURES = {
    "refused": (
        Reply(403, b'{"message": "Resource not accessible by integration"}'),
        (
            "GitHub's OIDC endpoint ({url}) answered the request for an OIDC token with HTTP 403 Forbidden "
            "(fix: check that the publishing job has `permissions: id-token: write`; retry if GitHub is failing)"
        ),
    ),
    "not-json": (
        Reply(200, b"<html>maintenance</html>", "text/html"),
        (
            "GitHub's OIDC endpoint ({url}) answered without an OIDC token (not a JSON object with a token in "
            '"value"; 24 bytes) (fix: retry; if it persists, GitHub\'s OIDC endpoint is failing)'
        ),
    ),
    "blank-value": (
        Reply(200, b'{"value": ""}'),
        (
            "GitHub's OIDC endpoint ({url}) answered without an OIDC token (not a JSON object with a token in "
            '"value"; 13 bytes) (fix: retry; if it persists, GitHub\'s OIDC endpoint is failing)'
        ),
    ),
    "no-value": (
        Reply(200, b'{"count": 0}'),
        (
            "GitHub's OIDC endpoint ({url}) answered without an OIDC token (not a JSON object with a token in "
            '"value"; 12 bytes) (fix: retry; if it persists, GitHub\'s OIDC endpoint is failing)'
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(OIDC_FAILURES))
def test_an_oidc_endpoint_that_gives_no_token_stops_before_prefix_dev(
    case: str, toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    reply, message = OIDC_FAILURES[case]
    oidc, server = servers(oidc=lambda _: reply)
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 9
    assert error_line(done.stderr) == "flagtree-feedstock: error: " + message.format(url=oidc.url)
    assert len(oidc.requests) == 1
    assert server.requests == []
    assert_no_secret_escapes(done, tmp_path, toy_channel)


@pytest.mark.parametrize("key", [None, ""], ids=["no-key", "unset-secret"])
def test_without_a_key_or_the_id_token_permission_nothing_is_sent(
    key: str | None, toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers()
    env = job_env(tmp_path, None, **({} if key is None else {"PREFIX_API_KEY": key}))
    done = upload(toy_channel, server.url, env)
    assert done.returncode == 2
    state = "is not set" if key is None else "is empty"
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: PREFIX_API_KEY {state} and no OIDC token can be requested here "
        "(ACTIONS_ID_TOKEN_REQUEST_URL is not set): uploading to prefix needs an API token or trusted "
        "publishing (fix: in a GitHub job, add `permissions: id-token: write` to it to publish by trusted "
        "publishing (docs/ci-and-publishing.md); elsewhere export PREFIX_API_KEY=<token>)"
    )
    assert oidc.requests == [] and server.requests == []


def test_half_of_the_oidc_variables_is_refused(toy_channel: Path, servers: Servers, tmp_path: Path) -> None:
    oidc, server = servers()
    env = job_env(tmp_path, None, ACTIONS_ID_TOKEN_REQUEST_URL=f"{oidc.url}/token?api-version=2.0")
    done = upload(toy_channel, server.url, env)
    assert done.returncode == 2
    assert error_line(done.stderr).startswith(
        "flagtree-feedstock: error: ACTIONS_ID_TOKEN_REQUEST_TOKEN is not set though "
        "ACTIONS_ID_TOKEN_REQUEST_URL is"
    )
    assert oidc.requests == [] and server.requests == []


def test_the_request_token_never_goes_over_plain_http_to_another_machine(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    _, server = servers()
    # 192.0.2.1 (TEST-NET-1) is not this machine: nothing may be sent there, and nothing is tried.
    env = job_env(tmp_path, "http://192.0.2.1/token?api-version=2.0")
    done = upload(toy_channel, server.url, env)
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        "flagtree-feedstock: error: ACTIONS_ID_TOKEN_REQUEST_URL (http://192.0.2.1/token?…) is plain http to "
        "another machine: the OIDC request token would cross the network unencrypted, so nothing is sent "
        "(fix: let GitHub set it (an https URL): do not set it yourself)"
    )
    assert server.requests == []
    assert_no_secret_escapes(done, tmp_path, toy_channel)


def test_the_oidc_token_never_goes_over_plain_http_to_another_machine(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    oidc, _ = servers()
    done = upload(toy_channel, "http://192.0.2.1", job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        "flagtree-feedstock: error: --url http://192.0.2.1 is plain http to another machine: the job's OIDC "
        "token would cross the network unencrypted, so nothing is sent (fix: use https://192.0.2.1 (plain http "
        "only to this machine: localhost, 127.0.0.1, ::1))"
    )
    assert oidc.requests == []  # refused before the OIDC token is even requested


def test_a_redirect_of_the_oidc_request_to_another_origin_is_not_followed(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    elsewhere = StandIn(github)  # would answer, were the request token sent there
    try:
        oidc, server = servers(oidc=lambda _: Reply(302, headers={"Location": f"{elsewhere.url}/token"}))
        done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    finally:
        elsewhere.stop()
    assert done.returncode == 9
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: requesting an OIDC token: {oidc.url} redirected to another origin, "
        f"{elsewhere.url}: not followed (fix: if {elsewhere.url} is the server you mean, give its URL yourself)"
    )
    assert elsewhere.requests == [] and server.requests == []


def test_a_redirect_of_the_exchange_is_not_followed(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers(server=prefix(mint=Reply(307, headers={"Location": "/api/oidc/mint_token/v2"})))
    done = upload(toy_channel, server.url, job_env(tmp_path, f"{oidc.url}/token?api-version=2.0"))
    assert done.returncode == 9
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: the trusted-publishing exchange: {server.url} answered POST "
        "/api/oidc/mint_token with HTTP 307 Temporary Redirect, a redirect, which is not followed"
    )
    assert [r.path for r in server.requests] == ["/api/oidc/mint_token"]  # the OIDC token went nowhere else
    assert_no_secret_escapes(done, tmp_path, toy_channel)


def test_an_oidc_endpoint_that_does_not_answer_ends_at_the_timeout(
    toy_channel: Path, servers: Servers, tmp_path: Path
) -> None:
    """The time is counted from the request, not from the command's start (which a loaded machine makes long)."""
    gave_up = threading.Event()
    asked: list[float] = []

    def silent(request: Request) -> Reply:
        asked.append(time.monotonic())
        gave_up.wait(seconds(8))  # the answer comes 8 s on, or once the test is done with the toolkit
        return github(request)

    oidc, server = servers(oidc=silent)
    env = job_env(tmp_path, f"{oidc.url}/token?api-version=2.0")
    done = upload(toy_channel, server.url, env, "--timeout", seconds_arg(1))
    ended = time.monotonic()
    gave_up.set()
    assert ended - asked[0] < seconds(8)  # the toolkit gave up before the answer came
    assert done.returncode == 9
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: requesting an OIDC token: {oidc.url} did not finish the request within {seconds_arg(1)} s: gave up"
    )
    assert server.requests == []


def _mismatched(packages: list[Path], url: str) -> dict[str, tuple[bytes | None, str]]:
    """A bundle that does not fit packages[0], by case, and the problem the upload names."""
    first, other = packages
    name = f"{first.name}.sigstore.json"
    wrong_digest = [{"name": first.name, "digest": {"sha256": "0" * 64}}]
    return {
        "missing": (None, f"no {name}"),
        "another-package": (bundle(other, url), f"{name} attests {other.name!r}, another file"),
        "another-build": (
            bundle(first, url, subject=wrong_digest),
            (
                f"{name} attests another sha256 (000000000000… there, "
                f"{hashlib.sha256(first.read_bytes()).hexdigest()[:12]}… here): another build"
            ),
        ),
        "another-channel": (
            bundle(first, url, channel="https://prefix.dev/elsewhere"),
            f"{name} names the target channel 'https://prefix.dev/elsewhere', not {url}",
        ),
        "two-subjects": (
            bundle(first, url, subject=[*wrong_digest, *wrong_digest]),
            f"{name} does not name exactly one subject (CEP 27: the package file alone)",
        ),
        "slsa-provenance": (
            bundle(first, url, predicate_type="https://slsa.dev/provenance/v1"),
            f"{name} has the predicate type 'https://slsa.dev/provenance/v1', not CEP 27's",
        ),
        "not-a-bundle": (
            b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}',
            f"{name} is not a Sigstore bundle of an in-toto statement (a DSSE envelope's payload)",
        ),
    }


MISMATCHES = [
    "missing",
    "another-package",
    "another-build",
    "another-channel",
    "two-subjects",
    "slsa-provenance",
    "not-a-bundle",
]


@pytest.mark.parametrize("case", MISMATCHES)
def test_an_attestation_that_does_not_fit_its_package_stops_everything(
    case: str, toy_channel: Path, packages: list[Path], servers: Servers, tmp_path: Path
) -> None:
    oidc, server = servers()
    url = f"{server.url}/{CHANNEL}"
    folder = tmp_path / "attestations"
    write_bundles(folder, packages, url)
    content, problem = _mismatched(packages, url)[case]
    target = folder / f"{packages[0].name}.sigstore.json"
    if content is None:
        target.unlink()
    else:
        target.write_bytes(content)
    env = job_env(tmp_path, f"{oidc.url}/token?api-version=2.0")
    done = upload(toy_channel, server.url, env, "--attestations", str(folder))
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: the attestations in {folder} do not fit the packages: "
        f"{packages[0].name}: {problem} (fix: attest each package file of this folder (actions/attest, "
        f"predicate type {PREDICATE_TYPE}, targetChannel {url}) and name its bundle "
        "<package file>.sigstore.json)"
    )
    # checked before any request: not even the OIDC token was asked for
    assert oidc.requests == [] and server.requests == []


@pytest.mark.parametrize("form", FORMS)
def test_an_attestation_that_is_no_file_of_its_folder_is_refused_unread(
    form: str, toy_channel: Path, packages: list[Path], servers: Servers, tmp_path: Path
) -> None:
    """A bundle linked to /dev/zero, a FIFO, a folder, a link to a bundle outside the attestations folder (its
    bytes would be sent as they are), one over 16 MiB: one line, within the memory and time bounds, and nothing
    asked of any server (issue 41 item 4)."""
    oidc, server = servers()
    url = f"{server.url}/{CHANNEL}"
    folder = tmp_path / "attestations"
    write_bundles(folder, packages, url)
    target = folder / f"{packages[0].name}.sigstore.json"
    words = damage(target, form, ATTESTATION, tmp_path / "elsewhere")
    env = job_env(tmp_path, f"{oidc.url}/token?api-version=2.0")
    args = ["upload", str(toy_channel), "--to", "prefix", "--channel", CHANNEL, "--url", server.url]
    done = run_capped(
        ["flagtree-feedstock", *args, "--attestations", str(folder)], tmp_path, env, whole_env=True
    )
    line = refused(done, target, words)
    if form == "outside":
        assert f"is a link to {tmp_path / 'elsewhere' / target.name}, outside the folder {folder}" in line
    assert oidc.requests == [] and server.requests == []


def test_attestations_are_refused_for_anaconda(toy_channel: Path, tmp_path: Path) -> None:
    (tmp_path / "attestations").mkdir()
    env = job_env(tmp_path, None, ANACONDA_API_KEY=KEY)
    args = [str(CONSOLE_SCRIPT), "upload", str(toy_channel), "--to", "anaconda", "--channel", "flagos"]
    args += ["--url", "http://127.0.0.1:9", "--attestations", str(tmp_path / "attestations")]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=seconds(120), check=False)
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        "flagtree-feedstock: error: --attestations: anaconda takes no attestation with an upload "
        "(fix: drop --attestations (users verify the packages with gh attestation verify))"
    )
