"""Shared fixtures: no test reaches the network, and toy recipes build into tmp folders."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# DEAD_PROXY: a dead end for any HTTP client that honours proxies (rattler's does). The rehearsal tier's
# session fixtures come from there too, made once for all its modules.
from _rehearsal_fixtures import DEAD_PROXY, offline_session, rehearsal, sources, stub_channel  # noqa: F401
from _timing import scale, seconds_arg
from _toy import make_empty_channel
from _xdist_groups import GROUPS_INPUT, SharedFixtureScheduling, shared_fixture_groups, write_groups
from flagtree_doctor.interrupts import ENDING_SIGNALS

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.workermanage import WorkerController

# A test run started in the background of a non-interactive shell (`pytest &`, a script's `nohup ... &`)
# inherits SIGINT ignored, and so would every command the tests start: the Ctrl-C tests would then see none
# arrive. A user's Ctrl-C comes from a terminal, where it is not ignored; a handler, unlike SIG_IGN, is reset
# to the default in the commands the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP, for a run under `nohup ... &`: the commands rightly keep an ignored SIGHUP ignored
# (docs/building.md), so every SIGHUP test would see its signal change nothing. They stand for a command started
# from a terminal; the nohup case is a test of its own, which runs its command under nohup itself.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


# The user's cache folder, as tests/emulated/setup.sh finds it: where the emulated tier's sysroot was prepared.
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
RUN_CACHE = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """pyproject's `-n auto`: two workers per core, at most 8. Most tests wait on a child (the engine, a console
    script, a loopback server) more than they compute: the whole suite took 627 s on one worker per core of
    this 2-core machine and 417 s on two (load 3 to 5). Beyond 8 the longest fixture groups set the time.
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is pytest-xdist's own (a pytest inside a test sets it to 0)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return min(8, 2 * len(os.sched_getaffinity(0)))


def pytest_configure(config: pytest.Config) -> None:
    """Run from the repository root, wherever pytest was started (``cd tests && python -m pytest`` too): the
    commands the tests run read ``recipe/`` and ``conda_build_config.yaml`` from the working folder, as a
    user's do. The paths given on the command line were resolved where pytest started.

    Every cache the commands write under ``XDG_CACHE_HOME`` (rattler's package cache, the LLVM archive cache,
    pip's) is this run's own, a new folder removed at the end: two runs by the same user (parallel branches, a
    shared runner) never meet in ``~/.cache``, where a package of the same file name built by the other run,
    or a half-written file of it, would stand in for this run's. The emulated tier's sysroot, which
    tests/emulated/setup.sh prepared there, is read where it is, its link resolved once: a later setup.sh that
    links another one leaves this run's in place.
    """
    if Path.cwd() != config.rootpath:
        os.chdir(config.rootpath)
    sysroot = USER_CACHE / "flagtree-feedstock" / "aarch64-sysroot"
    os.environ.setdefault("FLAGTREE_AARCH64_SYSROOT", str(sysroot.resolve()))
    scale()  # FLAGTREE_TEST_TIME_SCALE: a bad value ends the run here, in one line
    # How long toy-slow's build script (and what it starts to be ended) lasts unless a test ends it first: longer
    # than every bound a test waits on after the script started (test_interrupts' two reruns beside it, 120 s
    # each at most), so it never ends by itself while its test still needs it (60 s did, at load 18). Every test
    # ends it (a signal, its release file, the fixtures' SIGKILL), so this costs nothing when it passes.
    os.environ["TOY_HOLD_SECONDS"] = seconds_arg(600)
    config.stash[RUN_CACHE] = Path(tempfile.mkdtemp(prefix="flagtree-tests-cache-"))
    os.environ["XDG_CACHE_HOME"] = str(config.stash[RUN_CACHE])
    # pyproject's `-n auto` was resolved before this hook (pytest-xdist reads this variable then). A pytest
    # started inside a test (test_without_torch.py, test_suite_anywhere.py, test_ci.py, the mutation runner)
    # runs its tests in its own process, not in workers of its own beside this run's.
    os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"] = "0"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    """pytest-xdist's controller collects no tests: each worker writes the shared-fixture groups (below) where
    it says."""
    node.workerinput[GROUPS_INPUT] = str(node.config.stash[RUN_CACHE])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> SharedFixtureScheduling | None:
    """`--dist load` (pyproject's `-n auto`): as xdist's, but the tests that share a built fixture of ours run
    on one worker, the biggest groups first (tests/_xdist_groups.py). Another --dist is xdist's own."""
    if config.getvalue("dist") != "load":
        return None
    return SharedFixtureScheduling(config, log, config.stash[RUN_CACHE])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The long differential run (test_differential_reading.py) runs only when asked for: -m differential.
    if "differential" not in (config.getoption("markexpr") or ""):
        long_runs = [item for item in items if item.get_closest_marker("differential")]
        if long_runs:
            config.hook.pytest_deselected(items=long_runs)
            items[:] = [item for item in items if item not in long_runs]
    folder = getattr(config, "workerinput", {}).get(GROUPS_INPUT)
    if folder:
        write_groups(Path(folder), shared_fixture_groups(items))


def pytest_unconfigure(config: pytest.Config) -> None:
    if RUN_CACHE in config.stash:
        shutil.rmtree(config.stash[RUN_CACHE], ignore_errors=True)


def ignored_and_blocked(pid: int | str = "self") -> tuple[list[str], list[str]]:
    """The ending signals the kernel has process ``pid`` ignore, and those its main thread blocks: what every
    command it starts inherits (an ignored or blocked signal, the command keeps)."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    ignored, blocked = (
        sorted(s.name for s in ENDING_SIGNALS if int(fields[field], 16) >> (s - 1) & 1)
        for field in ("SigIgn", "SigBlk")
    )
    return ignored, blocked


def _ending_signals_state() -> tuple[list[object], list[str], list[str]]:
    """This process's handlers of the ending signals, those it ignores and those it blocks."""
    return [signal.getsignal(s) for s in ENDING_SIGNALS], *ignored_and_blocked()


@pytest.fixture(autouse=True)
def ending_signals_as_found() -> Iterator[None]:
    """A test leaves the ending signals as it found them: a later test's command would otherwise start with
    one ignored or blocked, and a signal the test sends it would change nothing."""
    before = _ending_signals_state()
    yield
    after = _ending_signals_state()
    if after != before:
        handlers, _, blocked = before
        for signum, handler in zip(ENDING_SIGNALS, handlers, strict=True):
            signal.signal(signum, handler)  # type: ignore[arg-type]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [s for s in ENDING_SIGNALS if s.name not in blocked])
        pytest.fail(
            f"the test changed this process's ending signals (handlers, ignored, blocked): {before} before, {after} after"
        )


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Send every proxied request to a closed loopback port, so a network attempt fails at once."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, DEAD_PROXY)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    yield


@pytest.fixture
def empty_channel(tmp_path: Path) -> Path:
    """An indexed channel folder with no packages: a stand-in for conda-forge that needs no network."""
    return make_empty_channel(tmp_path / "empty-channel")
