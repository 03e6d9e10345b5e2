"""Text from outside reaches a message cut, masked and in time linear in its length (issues 34 and 37).

Through the console script, in its own process: an attestation bundle whose predicate type is a megabyte is
refused at once in one short line that says how long the field was (it took 20 s at 100 KB before); a
SIGTERM ends a command busy with such input within a second; a token a server echoes ``\\u``-escaped or split
by a line break is masked; JSON nested too deep from the OIDC endpoint, the key exchange or an attestation is
one line, not a RecursionError traceback; a package whose index.json names no file is one line; the bump's
commit subject is cut. And :func:`flagtree_feedstock._urls.shown_text`, which every printed line goes through,
in process: it cuts what it is given and works in CPU time linear in what it reads.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from contextlib import ExitStack
from functools import cache
from pathlib import Path

import pytest

from _publish_standins import Reply, Request, StandIn
from _timing import cost_after_signal, seconds
from flagtree_feedstock._foreign_text import MESSAGE_CHARS
from flagtree_feedstock._urls import one_line, shown_text

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"


@cache
def _benchmark() -> types.ModuleType:
    """benchmarks/foreign_inputs.py: its cases make the hostile inputs these tests run on."""
    spec = importlib.util.spec_from_file_location("foreign_inputs", ROOT / "benchmarks" / "foreign_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def _run(case: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **case.env}  # type: ignore[attr-defined]
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *case.argv],  # type: ignore[attr-defined]
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=False,
    )


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("flagtree-feedstock: error:")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


# ---- item 1: a long field is cut before the message is made, its length said ---------------------------------


def test_a_megabyte_predicate_type_is_refused_at_once_in_one_short_line(
    tmp_path: Path, stack: ExitStack
) -> None:
    case = _benchmark().attestation(tmp_path, _benchmark().hostile(1_000_000), stack)
    started = time.monotonic()
    done = _run(case)
    assert time.monotonic() - started < seconds(
        20
    )  # it took 20 s at a tenth of this size, growing with the square
    assert done.returncode == 2
    line = _error_line(done.stderr)
    assert len(line) < 2000
    assert "has the predicate type 'aaaaaaaaaa" in line
    assert "'… (1,000,000 characters), not CEP 27's" in line


def test_a_package_whose_index_names_no_file_is_one_line(tmp_path: Path, stack: ExitStack) -> None:
    """A name holding "/" cannot be a file name: the fix says so instead of a ValueError traceback."""
    done = _run(_benchmark().index_field(tmp_path, _benchmark().hostile(10_000), stack))
    assert done.returncode == 9
    line = _error_line(done.stderr)
    assert "is not named after the package it holds (aaaaaaaaaa" in line
    assert "… (10,004 characters)): conda finds a package by its file name" in line
    assert line.endswith(
        "(fix: do not use it: the name-version-build its info/index.json gives is no file name; remove it)"
    )
    assert len(line) < 1000


def test_the_bump_shows_a_long_commit_subject_cut(tmp_path: Path, stack: ExitStack) -> None:
    done = _run(_benchmark().bump_header(tmp_path, "[bold]" + _benchmark().hostile(10_000), stack))
    assert done.returncode == 0, done.stderr
    headline = done.stdout.splitlines()[0]
    assert headline.startswith("nothing to bump: FlagTree ")
    assert "([bold]aaaa" in headline  # the upstream's text, not markup
    assert "… (10,006 characters)) is the pinned commit" in headline
    assert len(headline) < 400


# ---- item 1: what every printed line goes through: cut first, then linear --------------------------------------

# What the cut keeps (a line's first MESSAGE_CHARS characters): a run of letters that ends in no "://" (each
# could start a URL's scheme), a URL ending in closing brackets, one ending in full stops, URL after URL.
KEPT = MESSAGE_CHARS - 20
SHAPES = {
    "letters": "a" * KEPT + "_",
    "closing-brackets": "http://x" + ")" * KEPT,
    "full-stops": "http://x" + "." * KEPT,
    "schemes": "a1://" * (KEPT // 5),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_printed_line_is_cut_and_read_in_linear_time(shape: str) -> None:
    text = SHAPES[shape] + " " + "a" * 1_000_000  # a megabyte more, cut away
    start = time.process_time()
    shown = one_line(text)
    cpu = time.process_time() - start
    assert len(shown) <= MESSAGE_CHARS + 40
    assert shown.endswith(f"… ({len(text):,} characters)")
    # linear: a few milliseconds here; the quadratic forms took 1 to 6 s on what the cut keeps
    assert cpu < seconds(0.15)


def test_a_url_the_cut_goes_through_shows_no_part_of_its_password() -> None:
    text = "x " * (MESSAGE_CHARS // 2 - 10) + "https://user:PASSWORD@host/path"
    shown = shown_text(text)
    assert "PASS" not in shown and "user" not in shown
    assert shown.endswith(f"https://… ({len(text):,} characters)")


# ---- item 2: a signal ends a command whatever it reads --------------------------------------------------------


def _popen(case: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(CONSOLE_SCRIPT), *case.argv],  # type: ignore[attr-defined]
        env={**os.environ, **case.env},  # type: ignore[attr-defined]
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_ends_a_command_busy_with_foreign_input_within_a_second(
    tmp_path: Path, stack: ExitStack
) -> None:
    """A bundle whose predicate type is 10 MB: the signal comes a second after the command is past its start-up
    (as long after its start as the same command on a one-character field took, here and now, to end), when
    the refusal's message is being made: the version before this one went on for a minute after it."""
    make, field = _benchmark().attestation, _benchmark().hostile(10_000_000)
    (tmp_path / "small").mkdir()
    started = time.monotonic()
    _popen(make(tmp_path / "small", "x", stack)).communicate(timeout=seconds(60))
    start_up = time.monotonic() - started
    (tmp_path / "large").mkdir()
    case = make(tmp_path / "large", field, stack)
    with _popen(case) as process:
        try:
            time.sleep(start_up + seconds(1))
            cpu, ended = cost_after_signal(process, signal.SIGTERM, seconds(60))
            _, stderr = process.communicate(timeout=seconds(30))
        finally:
            process.kill()
    # ended by the signal (143), or done before it came (the refusal, 2)
    assert process.returncode in (143, 2), stderr
    # Its own CPU time: on the clock a loaded machine stretches that second; no wait beyond it either.
    assert cpu < seconds(1), f"{cpu:.1f} s of CPU time after SIGTERM ({start_up:.1f} s after its start)"
    assert ended < seconds(10), f"{ended:.1f} s after SIGTERM, {cpu:.1f} s of it working"


# ---- issue 37 item 4: a token echoed escaped or split is masked ------------------------------------------------

TOKEN = "pfx-Xq4Rw9Tz2LpV7mNc8KsB3dHf"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJwcmVmaXguZGV2In0.c2lnbmVkLWJ5LWdpdGh1Yg"


def _echoes(secret: str) -> str:
    """A server's answer echoing ``secret`` \\u-escaped, split by a line break, and split by an escaped one."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    half = len(secret) // 2
    return f'{{"detail": "bad {escaped}", "again": "{secret[:half]}\\n{secret[half:]}"}}\n{secret[:half]}\n  {secret[half:]}'


def _revealed(text: str) -> list[str]:
    """``text`` as a reader can read it: as it is, its ``\\u`` escapes decoded, its spaces and line breaks (also
    escaped ones) dropped."""
    decoded = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    return [text, decoded, re.sub(r"\s|\\n", "", decoded)]


def _assert_hidden(secret: str, done: subprocess.CompletedProcess[str]) -> None:
    for shown in _revealed(done.stdout + done.stderr):
        for start in range(len(secret) - 7):
            assert secret[start : start + 8] not in shown, (secret[start : start + 8], shown[-2000:])


def _serve(stack: ExitStack, answer: object) -> StandIn:
    server = StandIn(answer)  # type: ignore[arg-type]
    stack.callback(server.stop)
    return server


def test_an_upload_token_echoed_escaped_or_split_is_masked(tmp_path: Path, stack: ExitStack) -> None:
    def answer(request: Request) -> Reply:
        return Reply(404, b"{}") if request.method == "GET" else Reply(401, _echoes(TOKEN).encode())

    server = _serve(stack, answer)
    case = _benchmark().upload_answer(tmp_path, "x", stack)
    case.argv[case.argv.index("--url") + 1] = server.url
    done = _run(case)
    assert done.returncode == 9
    line = _error_line(done.stderr)
    assert '{"detail": "bad ***", "again": "***"} ***' in line
    _assert_hidden(TOKEN, done)


def test_an_oidc_token_echoed_escaped_or_split_by_the_exchange_is_masked(
    tmp_path: Path, stack: ExitStack
) -> None:
    case = _benchmark().exchange_answer(tmp_path, "x", stack)
    mint = _serve(stack, lambda _: Reply(401, _echoes(JWT).encode()))
    case.argv[case.argv.index("--url") + 1] = mint.url
    done = _run(case)
    assert done.returncode == 9
    assert '{"detail": "bad ***", "again": "***"} ***' in _error_line(done.stderr)
    _assert_hidden(JWT, done)


# ---- issue 37 item 4: JSON nested too deep is one line --------------------------------------------------------

DEEP = "[" * 30_000 + "]" * 30_000  # within every size bound; deeper than Python's parser can go


def test_an_oidc_answer_nested_too_deep_is_one_line(tmp_path: Path, stack: ExitStack) -> None:
    case = _benchmark().exchange_answer(tmp_path, "x", stack)
    github = _serve(stack, lambda _: Reply(200, f'{{"value": {DEEP}}}'.encode()))
    case.env["ACTIONS_ID_TOKEN_REQUEST_URL"] = f"{github.url}/token?v=1"
    done = _run(case)
    assert done.returncode == 9, done.stderr[-2000:]
    assert "answered without an OIDC token" in _error_line(done.stderr)
    assert "Traceback" not in done.stderr


def test_a_minted_key_nested_too_deep_is_one_line(tmp_path: Path, stack: ExitStack) -> None:
    case = _benchmark().exchange_answer(tmp_path, "x", stack)
    mint = _serve(stack, lambda _: Reply(200, f'{{"token": {DEEP}}}'.encode()))
    case.argv[case.argv.index("--url") + 1] = mint.url
    done = _run(case)
    assert done.returncode == 9, done.stderr[-2000:]
    assert "with something that is not an API key" in _error_line(done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["bundle", "statement"])
def test_an_attestation_nested_too_deep_is_one_line(where: str, tmp_path: Path, stack: ExitStack) -> None:
    case = _benchmark().attestation(tmp_path, "x", stack)
    bundle = next((tmp_path / "attestations").iterdir())
    if where == "bundle":
        bundle.write_text(f'{{"dsseEnvelope": {DEEP}}}')
    else:
        payload = base64.b64encode(f'{{"predicateType": {DEEP}}}'.encode()).decode()
        envelope = {"payload": payload, "payloadType": "application/vnd.in-toto+json"}
        bundle.write_text(json.dumps({"dsseEnvelope": envelope}))
    done = _run(case)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is not a Sigstore bundle of an in-toto statement" in _error_line(done.stderr)
    assert "Traceback" not in done.stderr
