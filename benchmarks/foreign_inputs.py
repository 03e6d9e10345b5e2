"""What one hostile field costs each path by which text from outside reaches flagtree-feedstock (issue 34).

    python benchmarks/foreign_inputs.py [--sizes 10K,1M,10M] [--only CASE ...]

Each case writes (or serves, from a loopback stand-in) the same hostile field, :func:`hostile`, at each size,
then runs the real console script on it as a child and prints its time on the clock, the CPU time it and the
processes it ran took, and its own peak memory (``VmHWM``, ``tests/_peak_memory.py``). The cases: the
attestation bundle's predicate type, a prefix.dev answer refusing an upload, the trusted-publishing exchange's
answer, an ``info/index.json`` field, an ``info/paths.json`` path, an archive member's name, a variant file's
key, a lock record's command and the bump's commit subject. The field is a run of letters (each could start a
URL's scheme) that ends in no ``://``, then a URL that ends in closing brackets: the two shapes that once made
the URL masking of every message grow with the square of its length. docs/testing.md has the table of one run
here; the exit status is 1 when a case at 10 MB takes 1 s or more, or 100 MB or more.

``tests/test_foreign_cost.py`` runs the same cases in process at 10 KB, 1 MB and 4 MB and checks that the
time grows about linearly.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# The tests' own helpers (not a package, so not type-checked from here): packages, the peak, the servers.
from _hostile_packages import INDEX, STEM, channel_with, conda, info_members, member, pax  # type: ignore[import-not-found]
from _peak_memory import run_measured  # type: ignore[import-not-found]
from _publish_standins import Reply, Request, StandIn  # type: ignore[import-not-found]

TOKEN = "pfx-Xq4Rw9Tz2LpV7mNc8KsB3dHf"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJwcmVmaXguZGV2In0.c2lnbmVkLWJ5LWdpdGh1Yg"
SIZES = {"10K": 10_000, "1M": 1_000_000, "4M": 4_000_000, "10M": 10_000_000}
# What each case's command may cost at 10 MB of input, here (issue 34's target).
TARGET_SECONDS = 1.0
TARGET_KIB = 100 << 10


def hostile(size: int) -> str:
    """``size`` characters, one word of ASCII without a quote: half of them letters that end in no ``://`` (each
    could start a URL's scheme), then ``_http://x`` and closing brackets (what a URL's end is stripped of)."""
    letters = size // 2
    return "a" * letters + "_http://x" + ")" * (size - letters - 9)


@dataclass
class Case:
    """A command to run (its argv without the console script's path), its environment, the status it ends
    with, and what to stop after it (a stand-in server)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    status: int | None = 0  # None: whichever (the lock record's command ends as its folder allows)


Maker = Callable[[Path, str, ExitStack], Case]


def _package(
    scratch: Path,
    *,
    index: dict[str, object] | None = None,
    paths: tuple[str, ...] = (),
    pkg: tuple[bytes, ...] = (),
) -> Path:
    """A channel folder holding one small .conda package; its folder."""
    info = info_members(paths, index=None if index is None else json.dumps(index).encode())
    channel: Path = channel_with(scratch, f"{STEM}.conda", conda(info, list(pkg)))[0]
    return channel


def _http_env() -> dict[str, str]:
    return {"no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1", "PREFIX_API_KEY": TOKEN}


def _serve(stack: ExitStack, answer: Callable[[Request], Reply]) -> StandIn:
    server = StandIn(answer)
    stack.callback(server.stop)
    return server


def attestation(scratch: Path, text: str, stack: ExitStack) -> Case:
    channel = _package(scratch)
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [],
        "predicateType": text,
        "predicate": {},
    }
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    bundle = {"dsseEnvelope": {"payload": payload, "payloadType": "application/vnd.in-toto+json"}}
    folder = scratch / "attestations"
    folder.mkdir()
    (folder / f"{STEM}.conda.sigstore.json").write_text(json.dumps(bundle))
    argv = ["upload", str(channel), "--to", "prefix", "--channel", "c", "--url", "http://127.0.0.1:9"]
    return Case([*argv, "--attestations", str(folder)], _http_env(), status=2)


def upload_answer(scratch: Path, text: str, stack: ExitStack) -> Case:
    def answer(request: Request) -> Reply:
        if request.method == "GET":
            return Reply(404, b"{}")
        return Reply(401, json.dumps({"detail": f"{text} {TOKEN}"}).encode())

    server = _serve(stack, answer)
    argv = ["upload", str(_package(scratch)), "--to", "prefix", "--channel", "c", "--url", server.url]
    return Case(argv, _http_env(), status=9)


def exchange_answer(scratch: Path, text: str, stack: ExitStack) -> Case:
    github = _serve(stack, lambda _: Reply(200, json.dumps({"value": JWT}).encode()))
    prefix = _serve(stack, lambda _: Reply(401, json.dumps({"detail": f"{text} {JWT}"}).encode()))
    env = {**_http_env(), "GITHUB_ACTIONS": "true", "PREFIX_API_KEY": ""}
    env.update(
        ACTIONS_ID_TOKEN_REQUEST_URL=f"{github.url}/token?v=1", ACTIONS_ID_TOKEN_REQUEST_TOKEN="Rq4Rw9Tz2LpV"
    )
    argv = ["upload", str(_package(scratch)), "--to", "prefix", "--channel", "c", "--url", prefix.url]
    return Case(argv, env, status=9)


def index_field(scratch: Path, text: str, stack: ExitStack) -> Case:
    channel = _package(scratch, index={**INDEX, "license": text, "name": text})
    return Case(["channel", "index", str(channel)], status=9)


def paths_field(scratch: Path, text: str, stack: ExitStack) -> Case:
    return Case(["channel", "index", str(_package(scratch, paths=(text,)))], status=9)


def member_name(scratch: Path, text: str, stack: ExitStack) -> Case:
    channel = _package(scratch, pkg=(*pax({"path": "/" + text}), *member("placeholder", b"")))
    return Case(["channel", "index", str(channel)], status=9)


def variant_file(scratch: Path, text: str, stack: ExitStack) -> Case:
    variants = scratch / "variants.yaml"
    variants.write_text(f"{text}:\n  - '{text}'\n")
    argv = ["build", "--render-only", "-m", str(variants), "--output-dir", str(scratch / "out")]
    return Case(argv, status=2)


def lock_record(scratch: Path, text: str, stack: ExitStack) -> Case:
    channel = _package(scratch)
    record = f"flagtree-feedstock lock\nholder 4194303 1 {text}\n"
    (channel.parent / f".{channel.name}.lock").write_text(record)
    return Case(["channel", "index", str(channel)], status=None)


def bump_header(scratch: Path, text: str, stack: ExitStack) -> Case:
    repo = scratch / "flagtree"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=n", "-c", "user.email=e@x", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    (scratch / "message").write_text(f"{text}\n")
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-F", str(scratch / "message")], check=True)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    recipe = scratch / "recipe"
    shutil.copytree(ROOT / "recipe", recipe)
    _pin(recipe / "conda_build_config.yaml", commit)
    return Case(["bump", "--flagtree-src", str(repo), "--recipe-dir", str(recipe), "--dry-run"], status=0)


def _pin(config: Path, commit: str) -> None:
    """Pin ``commit`` as flagtree_commit in the variant file ``config`` (its one list item after the key)."""
    lines = config.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("flagtree_commit:"))
    item = next(i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("- "))
    lines[item] = lines[item].split("- ")[0] + f'- "{commit}"\n'
    config.write_text("".join(lines))


CASES: dict[str, Maker] = {
    "attestation bundle": attestation,
    "upload answer": upload_answer,
    "exchange answer": exchange_answer,
    "index.json field": index_field,
    "paths.json path": paths_field,
    "archive member name": member_name,
    "variant file": variant_file,
    "lock record": lock_record,
    "bump's git header": bump_header,
}


@contextmanager
def prepared(name: str, size: int) -> Iterator[tuple[Case, Path]]:
    """Case ``name`` at ``size`` characters, in a scratch folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="foreign-") as scratch, ExitStack() as stack:
        folder = Path(scratch) / "case"
        folder.mkdir()
        yield CASES[name](folder, hostile(size), stack), Path(scratch)


def measure(name: str, size: int) -> tuple[float, float, int, int]:
    """Run case ``name`` at ``size`` through the console script: its seconds (on the clock, and of CPU, the
    processes it ran included), peak KiB and exit status."""
    with prepared(name, size) as (case, scratch):
        env = {**os.environ, **case.env}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = run_measured(["flagtree-feedstock", *case.argv], scratch, env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done.seconds, cpu, done.peak_kib, done.returncode


@contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(changes)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cpu_seconds(name: str, size: int) -> tuple[float, int]:
    """Run case ``name`` at ``size`` in this process through the CLI's ``main`` (from the repository root):
    the process CPU time it took (its start-up, imports and the case's setup left out) and its exit status."""
    from flagtree_feedstock.cli import main as cli  # noqa: PLC0415

    with (
        prepared(name, size) as (case, _),
        _environment(case.env),
        redirect_stdout(io.StringIO()),
        redirect_stderr(io.StringIO()),
    ):
        start = time.process_time()
        status = cli(case.argv)
        seconds = time.process_time() - start
    return seconds, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10K,1M,10M", help="comma-separated: 10K, 1M, 4M, 10M")
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="run this case (repeatable)")
    parser.add_argument(
        "--in-process",
        type=int,
        metavar="REPEAT",
        help="time each case in this process instead (CPU time, the least of REPEAT runs), one JSON line each",
    )
    args = parser.parse_args(argv)
    sizes = [SIZES[s] for s in args.sizes.split(",")]
    names = args.only or list(CASES)
    if args.in_process:
        for name in names:
            runs = {size: [cpu_seconds(name, size) for _ in range(args.in_process)] for size in sizes}
            line = {
                "case": name,
                **{str(size): [min(r[0] for r in got), got[0][1]] for size, got in runs.items()},
            }
            print(json.dumps(line), flush=True)
        return 0
    print("| path | " + " | ".join(f"{s // 1000:,} KB: s (CPU s), MB" for s in sizes) + " | exit |")
    print("| --- | " + " | ".join("---" for _ in sizes) + " | --- |")
    worst = True
    for name in names:
        cells, statuses = [], set()
        for size in sizes:
            seconds, cpu, peak, status = measure(name, size)
            statuses.add(status)
            cells.append(f"{seconds:.2f} ({cpu:.2f}), {peak / 1024:.0f}")
            if size == SIZES["10M"]:
                worst &= seconds < TARGET_SECONDS and peak < TARGET_KIB
        print(
            f"| {name} | " + " | ".join(cells) + f" | {', '.join(map(str, sorted(statuses)))} |", flush=True
        )
    return 0 if worst else 1


if __name__ == "__main__":
    sys.exit(main())
