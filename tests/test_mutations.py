"""mutations/run.py, run on a tiny repository of its own (a package, its tests, a small catalogue), and the
repository's own catalogue checked against this checkout without running it (that takes minutes:
`python mutations/run.py`, tests/README.md)."""

from __future__ import annotations

import collections
import importlib.util
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from functools import cache
from pathlib import Path

import pytest

from _timing import POLL, seconds, seconds_arg
from _tools import require_executable

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "mutations" / "run.py"

TOY_PACKAGE = """def add(a, b):
    return a + b


def unused():
    return 1
"""
TOY_TESTS = """import os
import time
from pathlib import Path

import pytest

import toypkg

POLL = 0.05  # how often the meeting is looked at: an interval, not a bound


@pytest.fixture(autouse=True)
def meet():
    # With TOY_MEETING set, each test notes when it ran there, and the first waits (TOY_MEETING_SECONDS at most)
    # for a second to start: runs at once overlap, runs one after the other cannot.
    meeting = os.environ.get("TOY_MEETING")
    start, mine = time.time(), Path(meeting or ".", str(os.getpid()))
    if meeting:
        mine.write_text(str(start))
        deadline = time.monotonic() + float(os.environ["TOY_MEETING_SECONDS"])
        while len(list(Path(meeting).iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(POLL)
    yield
    if meeting:
        mine.write_text(f"{start} {time.time()}")


def test_add():
    assert toypkg.add(2, 3) == 5


def test_broken():
    assert False


def test_skips():
    pytest.skip("no such tool here")
"""
CATALOGUE = """
[[mutation]]
id = "add-subtracts"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a - b"
tests = ["tests/test_toy.py::test_add"]
why = "a caught one"

[[mutation]]
id = "unused-changes"
file = "src/toypkg/__init__.py"
find = "return 1"
replace = "return 2"
tests = ["tests/test_toy.py::test_add"]
why = "nothing tests it"

[[mutation]]
id = "twice"
file = "src/toypkg/__init__.py"
find = "return"
replace = "yield"
tests = ["tests/test_toy.py::test_add"]
why = "find occurs twice"

[[mutation]]
id = "needs-a-source"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return b"
tests = ["tests/test_toy.py::test_add"]
why = "skipped without its variable"
requires = ["TOY_SOURCE_THAT_IS_NOT_SET"]

[[mutation]]
id = "tests-fail-anyway"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a * b"
tests = ["tests/test_toy.py::test_broken"]
why = "its tests fail unmutated"

[[mutation]]
id = "shadowed"
file = "src/time.py"
find = "X = 1"
replace = "X = 2"
tests = ["tests/test_toy.py::test_add"]
why = "Python imports its builtin time, never this file"

[[mutation]]
id = "unused-but-equivalent"
file = "src/toypkg/__init__.py"
find = "return 1"
replace = "return 3"
tests = ["tests/test_toy.py::test_add"]
why = "an equivalent one"
equivalent = "nothing calls unused()"

[[mutation]]
id = "wrongly-equivalent"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a + b + 1"
tests = ["tests/test_toy.py::test_add"]
why = "marked equivalent, yet caught"
equivalent = "a wrong reason"

[[mutation]]
id = "tests-skip-here"
file = "src/toypkg/__init__.py"
find = "return a + b"
replace = "return a"
tests = ["tests/test_toy.py::test_skips"]
why = "every test of its selection skips on this machine"
"""


@cache
def _runner() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("mutations_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def toy_repository(tmp_path: Path) -> Path:
    git = require_executable("git", "git")
    repo = tmp_path / "toy"
    for name, text in {
        "src/toypkg/__init__.py": TOY_PACKAGE,
        "src/time.py": "X = 1\n",
        "tests/test_toy.py": TOY_TESTS,
        "mutations/toy.toml": CATALOGUE,
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    return repo


def _run(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # PYTEST_ADDOPTS as .ci/run exports it, and worse: the runner must not pass it on to its pytest runs.
    env = {**os.environ, "PYTEST_ADDOPTS": "--collect-only", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, str(RUNNER), "--root", str(repo), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(300),
    )


def test_the_runner_reports_each_kind_of_result(toy_repository: Path) -> None:
    before = {p: p.read_text() for p in toy_repository.rglob("*") if p.is_file() and ".git" not in p.parts}
    done = _run(toy_repository, "--json")
    assert done.returncode == 1, done.stderr
    results = {r["id"]: (r["status"], r["detail"]) for r in json.loads(done.stdout)}
    assert results == {
        "add-subtracts": ("caught", "tests/test_toy.py::test_add"),
        "unused-changes": ("survived", "pytest exit status 0: tests/test_toy.py::test_add passed"),
        "twice": ("stale", "its find text occurs 2 times in src/toypkg/__init__.py, not once"),
        "needs-a-source": ("skipped", "TOY_SOURCE_THAT_IS_NOT_SET unset"),
        "tests-fail-anyway": ("baseline-fails", "fails unmutated: tests/test_toy.py::test_broken"),
        "shadowed": ("not-live", "imports time from built-in"),
        "unused-but-equivalent": ("equivalent", "nothing calls unused()"),
        "wrongly-equivalent": (
            "not-equivalent",
            "caught by tests/test_toy.py::test_add, yet marked equivalent: drop its equivalent key",
        ),
        "tests-skip-here": ("skipped", "its tests skip here: no such tool here"),
    }
    after = {p: p.read_text() for p in toy_repository.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before  # the mutations went to a scratch copy


def test_only_one_mutation_and_the_table(toy_repository: Path) -> None:
    done = _run(toy_repository, "--only", "add-subtracts")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "add-subtracts" in line]
    assert len(rows) == 1 and "caught" in rows[0] and "tests/test_toy.py::test_add" in rows[0]
    assert done.stdout.splitlines()[-1] == (
        "1 caught, 0 survived, 0 equivalent, 0 skipped, "
        "0 could not run or were wrongly marked (stale, baseline-fails, not-live, timeout, not-equivalent)"
    )


def test_list_runs_nothing_and_bad_input_is_one_line(toy_repository: Path) -> None:
    listed = _run(toy_repository, "--list")
    assert listed.returncode == 0
    assert all(f"{m}" in listed.stdout for m in ("add-subtracts", "shadowed", "TOY_SOURCE_THAT_IS_NOT_SET"))
    unknown = _run(toy_repository, "--only", "nosuch")
    assert (unknown.returncode, unknown.stderr) == (
        2,
        "mutations/run.py: error: no mutation nosuch (see --list)\n",
    )
    first = CATALOGUE.split("[[mutation]]")[1]
    (toy_repository / "mutations" / "again.toml").write_text(f"[[mutation]]{first}")
    duplicate = _run(toy_repository, "--list")
    assert (duplicate.returncode, duplicate.stderr) == (
        2,
        "mutations/run.py: error: toy.toml: mutation add-subtracts: id add-subtracts is also in again.toml\n",
    )


def test_the_repositorys_catalogue_applies_to_this_checkout() -> None:
    """Every mutation of mutations/*.toml is well formed, its find text is in its file exactly once, and its
    tests name files that exist, so `python mutations/run.py` can run each one."""
    runner = _runner()
    mutations = runner.load(sorted((ROOT / "mutations").glob("*.toml")))
    assert mutations
    problems = [f"{m.id}: {reason}" for m in mutations if (reason := runner.stale(m, ROOT))]
    problems += [
        f"{m.id}: no {test}"
        for m in mutations
        for test in m.tests
        if not (ROOT / test.split("::")[0]).exists()
    ]
    assert problems == []


def _results(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    return [(r["id"], r["status"], r["detail"]) for r in json.loads(done.stdout)]


def test_parallel_results_are_the_serial_ones_and_each_baseline_runs_once(
    toy_repository: Path, tmp_path: Path
) -> None:
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    serial = _run(toy_repository, "--json", "--jobs", "1")
    parallel = _run(
        toy_repository,
        "--json",
        "--jobs",
        "3",
        env={"TOY_MEETING": str(meeting), "TOY_MEETING_SECONDS": seconds_arg(60)},
    )
    # The three jobs ran at once: some two of their tests' runs overlapped.
    runs = sorted(tuple(map(float, p.read_text().split())) for p in meeting.iterdir())
    assert len(runs) == 7 and all(len(run) == 2 for run in runs), runs  # 3 baselines, 4 mutations
    assert any(later[0] < earlier[1] for earlier, later in itertools.combinations(runs, 2)), runs
    assert (serial.returncode, parallel.returncode) == (1, 1), serial.stderr + parallel.stderr
    assert _results(parallel) == _results(serial)
    assert len(_results(serial)) == CATALOGUE.count("[[mutation]]")
    # Six mutations of test_add that are not stale: its one baseline; test_broken's fails, test_skips' skips.
    for done in (serial, parallel):
        progress = done.stderr.splitlines()
        assert sum("baseline passed: tests/test_toy.py::test_add" in line for line in progress) == 1
        assert (
            sum("baseline baseline-fails: tests/test_toy.py::test_broken" in line for line in progress) == 1
        )
        assert sum("baseline skipped: tests/test_toy.py::test_skips" in line for line in progress) == 1
        assert sum("baseline" in line for line in progress) == 3
        assert re.search(r"^\[\d+/\d+, \d+ s, about \d+ s left\] ", progress[-1]), progress[-1]
    assert "3 at a time" in parallel.stderr


def test_shards_take_every_entry_exactly_once() -> None:
    """The repository's catalogue cut into 1 to 7 shards: every entry in one of them, a selection's entries
    in the same one (its baseline runs once), the shards within one selection's runs of each other."""
    runner = _runner()
    mutations = runner.load(sorted((ROOT / "mutations").glob("*.toml")))
    runs = collections.Counter(runner.selection(m) for m in mutations)
    for n in range(1, 8):
        shards = [runner.shard(mutations, k, n) for k in range(1, n + 1)]
        assert sorted(m.id for part in shards for m in part) == sorted(m.id for m in mutations)
        where = {runner.selection(m): k for k, part in enumerate(shards) for m in part}
        assert all(where[runner.selection(m)] == k for k, part in enumerate(shards) for m in part)
        weights = [sum(runs[key] + 1 for key in {runner.selection(m) for m in part}) for part in shards]
        assert max(weights) - min(weights) <= max(runs.values()) + 1, (n, weights)
    assert runner.shard(mutations, 2, 3) == runner.shard(list(mutations), 2, 3)


def test_shard_on_the_command_line(toy_repository: Path) -> None:
    parts = [_run(toy_repository, "--list", "--json", "--shard", f"{k}/3") for k in (1, 2, 3)]
    ids = [entry["id"] for part in parts for entry in json.loads(part.stdout)]
    assert sorted(ids) == sorted(re.findall(r'^id = "(.+)"$', CATALOGUE, flags=re.MULTILINE))
    for bad in ("0/2", "3/2", "1", "a/b"):
        done = _run(toy_repository, "--list", "--shard", bad)
        assert (done.returncode, done.stderr) == (
            2,
            f"mutations/run.py: error: --shard {bad}: give K/N with 1 <= K <= N, e.g. 2/4\n",
        )
    jobs = _run(toy_repository, "--jobs", "0")
    assert (jobs.returncode, jobs.stderr) == (2, "mutations/run.py: error: --jobs 0: give 1 or more\n")


def test_an_equivalent_mutation_that_survives_passes_the_run(toy_repository: Path) -> None:
    done = _run(toy_repository, "--only", "unused-but-equivalent", "--only", "add-subtracts")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        "1 caught, 0 survived, 1 equivalent, 0 skipped, 0 could not"
    )


# A run that hangs, with a child that outlives it unless its group is ended (its output elsewhere: a child
# that held the run's pipe would hold the runner too, until it ended by itself).
HANGS = """import os, subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", sys.argv[2]],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(float(sys.argv[2]))
"""


def _ends(pid: int) -> bool:
    """Whether ``pid`` ends (a zombie not yet reaped counts as ended) within a minute of SIGKILL's way."""
    deadline = time.monotonic() + seconds(
        60
    )  # a bound for a process that will not end, not a timing asserted
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in {"Z", "X"}:
            return True
        time.sleep(POLL)
    return False


def test_a_run_past_its_timeout_ends_with_what_it_started(tmp_path: Path) -> None:
    """The timeout ends the pytest run's whole process group: a test's children too, not pytest alone."""
    pid_file = tmp_path / "grandchild"
    with pytest.raises(subprocess.TimeoutExpired):
        _runner().Children().run(
            [sys.executable, "-c", HANGS, str(pid_file), seconds_arg(600)],
            tmp_path,
            dict(os.environ),
            seconds(2),
        )
    assert _ends(int(pid_file.read_text()))


def test_sigterm_ends_the_runner_and_the_runs_it_started(toy_repository: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    catalogue = toy_repository / "mutations" / "toy.toml"
    catalogue.write_text(
        catalogue.read_text()
        + f"""
[[mutation]]
id = "hangs"
file = "src/toypkg/__init__.py"
find = "    return a + b"
replace = '''    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep({seconds(600)})"])
    open({str(pid_file)!r}, "w").write(str(child.pid))
    time.sleep({seconds(600)})'''
tests = ["tests/test_toy.py::test_add"]
why = "a mutation whose test hangs, with a child of its own"
"""
    )
    scratch = tmp_path / "tmp"  # where the runner makes its scratch copies
    scratch.mkdir()
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), "--root", str(toy_repository), "--only", "hangs", "--json"],
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + seconds(
            300
        )  # no timing is asserted: it only bounds a broken runner's wait
        while not (pid_file.is_file() and pid_file.read_text()) and runner.poll() is None:
            assert time.monotonic() < deadline, "the hanging test never started"
            time.sleep(POLL)
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=seconds(120))
    finally:
        runner.kill()
    assert runner.returncode == 128 + signal.SIGTERM, out + err
    assert _ends(int(pid_file.read_text()))
    assert list(scratch.iterdir()) == []
