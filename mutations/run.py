"""Mutation testing: break the repository in realistic ways, one mutation at a time, and see the tests catch it.

    python mutations/run.py                  # every mutation of mutations/*.toml, a job per core
    python mutations/run.py --only ID        # one (repeat --only for more)
    python mutations/run.py --shard 2/4      # the second of four parts of the catalogue (CI's matrix)
    python mutations/run.py --list           # the catalogue; nothing runs

Each mutation (an entry of a ``mutations/*.toml`` file, tests/README.md has the format) replaces its ``find``
text, which must occur exactly once, in a scratch copy of the repository (the files git tracks or would track,
as they are in the working tree), runs its ``tests`` there with pytest, and puts the file back. It is caught
when those tests fail. First the same tests run on the unmutated copy and must pass, so a failure is the
mutation's: once per test selection, however many mutations share it. The copy's code is the code that runs:
its ``src`` and ``flagtree-doctor/src`` come first on PYTHONPATH (the editable install points at this working
tree), and for every mutated module the runner checks that Python imports it from the copy. No bytecode is
written (a stale ``.pyc`` could hide a mutation), and PYTEST_ADDOPTS is dropped (.ci/run's report option is not
a mutation's).

``--jobs N`` (default: the cores) runs N pytest runs at once, each in a scratch copy of its own; a copy is put
back after each mutation, so any free job takes the next run. Progress and an estimate of the time left go to
stderr. ``--shard K/N`` takes the K-th of N parts of the catalogue: whole test selections (so a baseline is
never run in two shards), balanced by their runs, the same parts for the same catalogue on any machine.

The result is a table: caught (and the first test that failed), survived, equivalent (an entry that says why no
behaviour can tell it apart, in its ``equivalent`` key, and that survived), not-equivalent (it says so, yet a
test caught it: drop the key), skipped (an environment variable in ``requires`` is unset, or every test of its
selection skips on this machine), stale (the ``find`` text is not in its file exactly once), baseline-fails,
not-live (Python would import the mutated module from elsewhere) or timeout. Exit status 0 when every mutation
that ran was caught or is equivalent, 1 otherwise, 2 for a catalogue or command-line error. Not part of
`python -m pytest` (tests/test_mutations.py runs this script on a tiny catalogue).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomllib's backport, which the test extra installs there
    try:
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]  # 3.10 only
    except ModuleNotFoundError:
        sys.exit('mutations/run.py needs Python 3.11 or newer, or tomli (pip install -e ".[test]")')

ROOT = Path(__file__).resolve().parents[1]
# The folders of the repository's import packages (pyproject.toml's [tool.setuptools.packages.find]).
IMPORT_ROOTS = ("src", "flagtree-doctor/src")
KEYS = {"id", "file", "find", "replace", "tests", "why"}
OPTIONAL_KEYS = {"requires", "also", "equivalent"}
ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
SHARD = re.compile(r"(?P<k>[1-9][0-9]*)/(?P<n>[1-9][0-9]*)")

Status = Literal[
    "caught",
    "survived",
    "equivalent",
    "not-equivalent",
    "skipped",
    "stale",
    "baseline-fails",
    "not-live",
    "timeout",
]


class CatalogueError(Exception):
    """A catalogue entry that cannot be run as written; the message names the file and the mutation."""


@dataclass(frozen=True, kw_only=True)
class Change:
    file: str
    find: str
    replace: str


@dataclass(frozen=True, kw_only=True)
class Mutation:
    id: str
    changes: tuple[Change, ...]
    tests: tuple[str, ...]
    why: str
    requires: tuple[str, ...]
    catalogue: str
    equivalent: str = ""  # why no behaviour can tell it apart; empty for a mutation a test must catch


@dataclass(kw_only=True)
class Result:
    id: str
    status: Status
    detail: str = ""
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)


def _change(where: str, entry: dict[str, Any]) -> Change:
    for key in ("file", "find", "replace"):
        if not isinstance(entry.get(key), str):
            raise CatalogueError(f"{where}: {key} must be a string")
    if entry["find"] == entry["replace"]:
        raise CatalogueError(f"{where}: replace is the same as find")
    return Change(file=entry["file"], find=entry["find"], replace=entry["replace"])


def load(paths: Iterable[Path]) -> list[Mutation]:
    """Every mutation of the catalogue files, checked for shape and unique ids (not yet against the files)."""
    mutations: list[Mutation] = []
    seen: dict[str, str] = {}
    for path in paths:
        try:
            entries = tomllib.loads(path.read_text(encoding="utf-8")).get("mutation", [])
        except tomllib.TOMLDecodeError as error:
            raise CatalogueError(f"{path.name}: not valid TOML: {error}") from None
        for number, entry in enumerate(entries, start=1):
            where = f"{path.name}: mutation {entry.get('id', f'#{number}')}"
            unknown, lacking = sorted(set(entry) - KEYS - OPTIONAL_KEYS), sorted(KEYS - set(entry))
            if unknown or lacking:
                raise CatalogueError(f"{where}: unknown keys {unknown}, missing keys {lacking}")
            if not (isinstance(entry["id"], str) and ID.fullmatch(entry["id"])):
                raise CatalogueError(f"{where}: id must be short-kebab-case")
            if entry["id"] in seen:
                raise CatalogueError(f"{where}: id {entry['id']} is also in {seen[entry['id']]}")
            seen[entry["id"]] = path.name
            tests, requires = entry["tests"], entry.get("requires", [])
            for key, value in (("tests", tests), ("requires", requires)):
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise CatalogueError(f"{where}: {key} must be a list of strings")
            if not tests:
                raise CatalogueError(f"{where}: tests is empty")
            also = entry.get("also", [])
            if not isinstance(also, list):
                raise CatalogueError(f"{where}: also must be an array of tables (file, find, replace)")
            equivalent = entry.get("equivalent", "")
            if "equivalent" in entry and not (isinstance(equivalent, str) and equivalent.strip()):
                raise CatalogueError(f"{where}: equivalent must say why no behaviour can tell it apart")
            mutations.append(
                Mutation(
                    id=entry["id"],
                    changes=(_change(where, entry), *(_change(f"{where} (also)", a) for a in also)),
                    tests=tuple(tests),
                    why=str(entry["why"]),
                    requires=tuple(requires),
                    catalogue=path.name,
                    equivalent=equivalent,
                )
            )
    return mutations


def selection(mutation: Mutation) -> tuple[str, ...]:
    """The test selection a mutation runs, as one key for every mutation that runs the same tests."""
    return tuple(sorted(set(mutation.tests)))


def shard(mutations: Sequence[Mutation], k: int, n: int) -> list[Mutation]:
    """The ``k``-th (1-based) of ``n`` parts: whole selections, the biggest first to the part with the fewest
    pytest runs (a selection's baseline and each of its mutations), ties to the lower part. Every mutation is
    in exactly one part, and the parts depend on the catalogue alone."""
    groups: dict[tuple[str, ...], int] = {}
    for mutation in mutations:
        groups[selection(mutation)] = groups.get(selection(mutation), 0) + 1
    runs, part = [0] * n, {}
    for key, size in sorted(groups.items(), key=lambda item: (-item[1], item[0])):
        lightest = min(range(n), key=lambda index: (runs[index], index))
        part[key] = lightest
        runs[lightest] += size + 1
    return [m for m in mutations if part[selection(m)] == k - 1]


def stale(mutation: Mutation, root: Path) -> str | None:
    """Why the mutation cannot apply to ``root`` (a ``find`` not there exactly once), or None."""
    for change in mutation.changes:
        path = root / change.file
        if not path.is_file():
            return f"{change.file} does not exist"
        count = path.read_text(encoding="utf-8").count(change.find)
        if count != 1:
            return f"its find text occurs {count} times in {change.file}, not once"
    return None


def scratch_copy(root: Path, dest: Path) -> Path:
    """The repository's files as git sees them (tracked, and untracked but not ignored) copied to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file() or source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    return dest


def environment(copy: Path) -> dict[str, str]:
    """The tests' environment: the copy's import packages first, no bytecode, no PYTEST_ADDOPTS, no workers."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    # One process: pyproject's `-n auto` would start a worker per core for the few tests of one mutation.
    env["PYTEST_XDIST_AUTO_NUM_WORKERS"] = "0"
    paths = [str(copy / root) for root in IMPORT_ROOTS if (copy / root).is_dir()]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def module_name(file: str) -> str | None:
    """``flagtree_feedstock.channel.upload`` for src/flagtree_feedstock/channel/upload.py; None outside the roots."""
    path = Path(file)
    for root in IMPORT_ROOTS:
        if path.suffix == ".py" and path.is_relative_to(root):
            parts = path.relative_to(root).with_suffix("").parts
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def imported_from(copy: Path, modules: Sequence[str], env: dict[str, str]) -> list[str]:
    """Where Python finds each of ``modules`` with the tests' environment (without running the modules)."""
    probe = (
        "import importlib.util, sys\nfor m in sys.argv[1:]:\n    print(importlib.util.find_spec(m).origin)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *modules], cwd=copy, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


class Children:
    """The pytest runs under way, each the leader of its own process group, so a timeout or an interrupt
    ends the run and whatever it started (a test's servers and commands), not pytest alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self.closing = False

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
        """Run ``argv``; its exit status and stdout. TimeoutExpired after ``timeout`` s, its group killed."""
        with self._lock:
            if self.closing:
                raise KeyboardInterrupt
            child = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            self._running.add(child)
        try:
            out, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(child)
            child.communicate()
            raise
        finally:
            with self._lock:
                self._running.discard(child)
            self._kill(child)  # a test's children that outlived pytest
        return child.returncode, out

    def kill_all(self) -> None:
        with self._lock:
            self.closing = True
            running = list(self._running)
        for child in running:
            self._kill(child)

    @staticmethod
    def _kill(child: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A pytest run: its exit status, the tests that failed or errored, and, when every test it collected
    was skipped, the first one's reason (a tool or a source this machine lacks)."""

    status: int
    failed: list[str]
    all_skipped: str = ""


def pytest(
    copy: Path, tests: Sequence[str], env: dict[str, str], timeout: float, children: Children | None = None
) -> Outcome:
    """Run ``tests`` in the copy, stopping at the first failure."""
    with tempfile.TemporaryDirectory(prefix="mutation-report-") as scratch:
        report = Path(scratch) / "report.xml"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *tests,
        ]
        status, out = (children or Children()).run(argv, copy, env, timeout)
        failed, skips, cases = [], [], 0
        if report.is_file():
            for case in ET.parse(report).getroot().iter("testcase"):
                cases += 1
                if case.find("failure") is not None or case.find("error") is not None:
                    failed.append(node_id(copy, case.get("classname", ""), case.get("name", "")))
                elif (skipped := case.find("skipped")) is not None:
                    skips.append(skipped.get("message", "skipped"))
    if status not in (0, 1) and not failed:
        failed = [line for line in out.splitlines() if line.startswith(("ERROR", "FAILED"))][:1]
    every_one = status == 0 and cases > 0 and len(skips) == cases
    return Outcome(status=status, failed=failed, all_skipped=skips[0] if every_one else "")


def node_id(root: Path, classname: str, name: str) -> str:
    """pytest's node id (tests/test_x.py::TestK::test_y) of a JUnit test case, or classname::name."""
    parts = classname.split(".") if classname else []
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[end:], name])
    return "::".join(filter(None, (classname, name)))


def run_one(
    mutation: Mutation, copy: Path, env: dict[str, str], timeout: float, children: Children | None = None
) -> Result:
    """Apply the mutation to the copy, run its tests, put the files back."""
    files = [change.file for change in mutation.changes]
    originals = {change.file: (copy / change.file).read_text(encoding="utf-8") for change in mutation.changes}
    start = time.monotonic()
    try:
        for change in mutation.changes:
            path = copy / change.file
            path.write_text(path.read_text(encoding="utf-8").replace(change.find, change.replace, 1))
        python = [(file, module) for file in files if (module := module_name(file))]
        where = imported_from(copy, [module for _, module in python], env) if python else []
        outside = [
            f"{module} from {found}"
            for (file, module), found in zip(python, where, strict=True)
            if Path(found).resolve() != (copy / file).resolve()
        ]
        if outside:
            return Result(
                id=mutation.id, status="not-live", detail=f"imports {', '.join(outside)}", files=files
            )
        try:
            outcome = pytest(copy, mutation.tests, env, timeout, children)
        except subprocess.TimeoutExpired:
            return Result(id=mutation.id, status="timeout", detail=f"after {timeout:.0f} s", files=files)
    finally:
        for name, text in originals.items():
            (copy / name).write_text(text, encoding="utf-8")
    seconds = time.monotonic() - start
    status, failed = outcome.status, outcome.failed
    if status in (1, 2) and failed:  # 2: collection failed, e.g. a module the mutation broke
        if mutation.equivalent:
            detail = f"caught by {failed[0]}, yet marked equivalent: drop its equivalent key"
            return Result(
                id=mutation.id, status="not-equivalent", detail=detail, seconds=seconds, files=files
            )
        return Result(id=mutation.id, status="caught", detail=failed[0], seconds=seconds, files=files)
    if mutation.equivalent:
        return Result(
            id=mutation.id, status="equivalent", detail=mutation.equivalent, seconds=seconds, files=files
        )
    return Result(
        id=mutation.id,
        status="survived",
        detail=f"pytest exit status {status}: {', '.join(mutation.tests)} passed",
        seconds=seconds,
        files=files,
    )


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{seconds:.0f} s" if seconds < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """One stderr line per finished pytest run: how many of how many, the time so far, and an estimate of the
    time left (the mean wall-clock time per finished run so far, with every job busy, times the runs left)."""

    def __init__(self, console: Console, runs: int) -> None:
        self.console, self.runs, self.done, self.start = console, runs, 0, time.monotonic()

    def finished(self, what: str, dropped: int = 0) -> None:
        """A run ended (``dropped``: runs that no longer will, the mutations of a failing baseline)."""
        self.done, self.runs = self.done + 1, self.runs - dropped
        elapsed = time.monotonic() - self.start
        left = elapsed / self.done * (self.runs - self.done)
        self.console.print(
            f"[{self.done}/{self.runs}, {_duration(elapsed)}, about {_duration(left)} left] {what}",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )


def sort_out(
    mutations: list[Mutation], root: Path
) -> tuple[dict[str, Result], dict[tuple[str, ...], list[Mutation]]]:
    """The results known without running (skipped, stale), and the rest grouped by test selection."""
    results: dict[str, Result] = {}
    groups: dict[tuple[str, ...], list[Mutation]] = {}
    for mutation in mutations:
        unset = [name for name in mutation.requires if not os.environ.get(name)]
        if unset:
            results[mutation.id] = Result(
                id=mutation.id, status="skipped", detail=f"{', '.join(unset)} unset"
            )
        elif reason := stale(mutation, root):
            results[mutation.id] = Result(id=mutation.id, status="stale", detail=reason)
        else:
            groups.setdefault(selection(mutation), []).append(mutation)
    return results, groups


class Copies:
    """One scratch copy of the repository per job, each handed to whichever pytest run starts next (a run
    leaves its copy as it found it)."""

    def __init__(self, root: Path, scratch: Path, jobs: int, timeout: float, children: Children) -> None:
        self.timeout, self.children = timeout, children
        self._free: queue.Queue[tuple[Path, dict[str, str]]] = queue.Queue()
        for number in range(jobs):
            copy = scratch_copy(root, scratch / f"job{number}")
            self._free.put((copy, environment(copy)))

    def baseline(self, group: list[Mutation]) -> Result | None:
        """None when the selection's tests pass unmutated; else why its mutations cannot run (no id yet)."""
        copy, env = self._free.get()
        try:
            outcome = pytest(copy, group[0].tests, env, self.timeout, self.children)
        except subprocess.TimeoutExpired:
            return Result(id="", status="timeout", detail=f"unmutated, after {self.timeout:.0f} s")
        finally:
            self._free.put((copy, env))
        if outcome.status != 0:
            failed = outcome.failed[0] if outcome.failed else f"exit status {outcome.status}"
            return Result(id="", status="baseline-fails", detail=f"fails unmutated: {failed}")
        if outcome.all_skipped:  # nothing to catch a mutation with here
            return Result(id="", status="skipped", detail=f"its tests skip here: {outcome.all_skipped}")
        return None

    def mutate(self, mutation: Mutation) -> Result:
        copy, env = self._free.get()
        try:
            return run_one(mutation, copy, env, self.timeout, self.children)
        finally:
            self._free.put((copy, env))


def run(
    mutations: list[Mutation], root: Path, timeout: float, console: Console, jobs: int = 1
) -> list[Result]:
    """Every mutation, ``jobs`` pytest runs at a time, each in a scratch copy of ``root`` of its own: the tests
    of each selection first run once unmutated (its baseline), then, if they passed, each of its mutations."""
    results, groups = sort_out(mutations, root)
    if not groups:
        return [results[m.id] for m in mutations]
    jobs = max(1, min(jobs, sum(len(g) for g in groups.values())))
    progress = Progress(console, len(groups) + sum(len(g) for g in groups.values()))
    console.print(
        f"{len(mutations)} mutations: {len(groups)} test selections to run unmutated, then their mutations; "
        f"{jobs} at a time",
        style="dim",
        highlight=False,
    )
    children = Children()
    with (
        tempfile.TemporaryDirectory(prefix="flagtree-mutations-") as scratch,
        ThreadPoolExecutor(jobs) as pool,
    ):
        copies = Copies(root, Path(scratch), jobs, timeout, children)
        # At most one run per job in the pool, the mutations of a passed baseline before the next baseline,
        # so results come from the start and an interrupt leaves nothing queued.
        waiting, to_mutate = list(groups.values()), deque[Mutation]()
        baselines: dict[Future[Result | None], list[Mutation]] = {}
        runs: set[Future[Result]] = set()
        try:
            while True:
                while len(baselines) + len(runs) < jobs and (to_mutate or waiting):
                    if to_mutate:
                        runs.add(pool.submit(copies.mutate, to_mutate.popleft()))
                    else:
                        group = waiting.pop(0)
                        baselines[pool.submit(copies.baseline, group)] = group
                if not (baselines or runs):
                    break
                pending: list[Future[Any]] = [*baselines, *runs]
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    if future in runs:
                        result = future.result()
                        runs.discard(future)
                        results[result.id] = result
                        progress.finished(f"{result.id}: {result.status} {result.detail}".rstrip())
                        continue
                    group = baselines.pop(future)
                    tests = " ".join(group[0].tests)
                    if (failing := future.result()) is None:
                        progress.finished(f"baseline passed: {tests}")
                        to_mutate.extend(group)
                        continue
                    for mutation in group:
                        results[mutation.id] = Result(
                            id=mutation.id, status=failing.status, detail=failing.detail
                        )
                    progress.finished(
                        f"baseline {failing.status}: {tests}: {failing.detail}", dropped=len(group)
                    )
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            children.kill_all()
            raise
    return [results[m.id] for m in mutations]


STYLE = {"caught": "green", "survived": "bold red", "equivalent": "cyan", "skipped": "yellow"}


def table(mutations: list[Mutation], results: list[Result]) -> Table:
    out = Table(title="mutations", title_justify="left")
    for column in ("mutation", "file", "result", "caught by / why not", "s"):
        out.add_column(column, overflow="fold")
    for mutation, result in zip(mutations, results, strict=True):
        style = STYLE.get(result.status, "red")
        files = ", ".join(change.file for change in mutation.changes)
        seconds = f"{result.seconds:.0f}" if result.seconds else ""
        out.add_row(mutation.id, files, f"[{style}]{result.status}[/]", result.detail, seconds)
    return out


def catalogue_table(mutations: list[Mutation]) -> Table:
    out = Table(title="mutation catalogue", title_justify="left")
    for column in ("mutation", "catalogue", "file", "tests", "why", "requires"):
        out.add_column(column, overflow="fold")
    for m in mutations:
        files = ", ".join(change.file for change in m.changes)
        why = f"{m.why} (equivalent: {m.equivalent})" if m.equivalent else m.why
        out.add_row(m.id, m.catalogue, files, "\n".join(m.tests), why, ", ".join(m.requires))
    return out


def _catalogue_json(mutations: list[Mutation]) -> list[dict[str, Any]]:
    return [
        {
            "id": m.id,
            "catalogue": m.catalogue,
            "files": [change.file for change in m.changes],
            "tests": list(m.tests),
            "why": m.why,
            "requires": list(m.requires),
            "equivalent": m.equivalent,
        }
        for m in mutations
    ]


def _end(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutations/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="ID", help="run this mutation (repeatable)")
    parser.add_argument(
        "--shard", metavar="K/N", help="run the K-th of N parts of the catalogue (1 <= K <= N)"
    )
    parser.add_argument("--list", action="store_true", help="print the catalogue and run nothing")
    parser.add_argument("--json", action="store_true", help="print the results (or --list) as JSON, no table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per pytest run (default 900)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="pytest runs at once (default: the cores)"
    )
    args = parser.parse_args(argv)
    # A SIGTERM or SIGHUP ends the run as Ctrl-C does: the pytest runs, each in a session of its own, with it.
    for ending in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, _end)
    # The table on stdout (JSON instead with --json), wide enough for its columns when piped; progress on stderr.
    columns = os.environ.get("COLUMNS", "")
    console = Console(
        stderr=args.json, width=int(columns) if columns.isdigit() else max(Console().width, 160)
    )
    progress = Console(stderr=True, width=console.width)
    root = args.root.resolve()
    shard_of = SHARD.fullmatch(args.shard or "1/1")
    if shard_of is None or int(shard_of["k"]) > int(shard_of["n"]):
        print(
            f"mutations/run.py: error: --shard {args.shard}: give K/N with 1 <= K <= N, e.g. 2/4",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1:
        print(f"mutations/run.py: error: --jobs {args.jobs}: give 1 or more", file=sys.stderr)
        return 2
    try:
        mutations = load(sorted((root / "mutations").glob("*.toml")))
    except CatalogueError as error:
        print(f"mutations/run.py: error: {error}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in mutations})
        if unknown:
            print(f"mutations/run.py: error: no mutation {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        mutations = [m for m in mutations if m.id in args.only]
    mutations = shard(mutations, int(shard_of["k"]), int(shard_of["n"]))
    if args.list:
        if args.json:
            print(json.dumps(_catalogue_json(mutations), indent=1))
        else:
            console.print(catalogue_table(mutations))
        return 0
    results = run(mutations, root, args.timeout, progress, args.jobs)
    counts = {status: sum(r.status == status for r in results) for status in dict.fromkeys(STYLE)}
    others = len(results) - sum(counts.values())
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=1))
    else:
        console.print(table(mutations, results))
        console.print(
            f"{counts['caught']} caught, {counts['survived']} survived, {counts['equivalent']} equivalent, "
            f"{counts['skipped']} skipped, "
            f"{others} could not run or were wrongly marked (stale, baseline-fails, not-live, timeout, not-equivalent)"
        )
    return 0 if counts["survived"] == 0 and others == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
