"""Signals in flagtree-feedstock: real SIGINT, SIGTERM, SIGHUP and SIGKILL to a real process, at the moments a
user (a terminal, a cancelled CI job, ``timeout``, a dropped ssh session) meets.

Whatever the moment, SIGINT, SIGTERM and SIGHUP end the command the same way: one line
(``flagtree-feedstock: interrupted`` for SIGINT, ``flagtree-feedstock: terminated (SIGTERM)`` for the
others), exit status 128 + the signal's number, no traceback; during a build, every process of the engine's
worker session (the build script and its children) is ended, the packages finished before are kept and
indexed, the staging folder is removed, and the output folder's lock is released only after all that. A
SIGKILL of the toolkit, which it cannot handle, does not leave its worker running either.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _timing import FINE_POLL, POLL, poll_until, seconds, seconds_arg
from _toy import RECIPES, build_args, leftovers, native_args, published
from conftest import ignored_and_blocked
from flagtree_doctor.interrupts import Interrupted, catch_signals
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._processes import Process
from flagtree_feedstock.builder import output_dir
from flagtree_feedstock.errors import FeedstockError

VENV_BIN = Path(sys.executable).parent
# pip's generated wrapper: it imports flagtree_feedstock._entry before the guard there can run.
CONSOLE_SCRIPT = VENV_BIN / "flagtree-feedstock"

HOOK = Path(__file__).parent / "interrupt_hook"
# The line and exit status each signal ends a command with.
ENDINGS = {
    signal.SIGINT: ("flagtree-feedstock: interrupted", 130),
    signal.SIGTERM: ("flagtree-feedstock: terminated (SIGTERM)", 143),
    signal.SIGHUP: ("flagtree-feedstock: terminated (SIGHUP)", 129),
}
# The worker's watchdog, as /proc/PID/comm names it (builder/_worker.py).
WATCHDOG = "flagtree-watch"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}


def _session(session: int) -> dict[int, str]:
    """The running processes of ``session`` and their names (/proc/PID/comm)."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] not in {"Z", "X"}:
            found[int(entry.name)] = name
    return found


def _until(condition: Callable[[], object], what: str) -> None:
    poll_until(condition, what, seconds(20))


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    timeout = seconds(120)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the command ended (status {process.returncode}) first:\n{process.communicate()[1]}")
        if time.monotonic() > deadline:
            process.send_signal(signal.SIGINT)  # ends its engine's processes too
            process.communicate(timeout=seconds(60))
            pytest.fail(f"{path} did not appear within {timeout:g} s")
        time.sleep(POLL)


def _ended(process: subprocess.Popen[str], signum: int, *, group: bool = False) -> str:
    """Send ``signum`` (to the process, or to its whole process group as a terminal's Ctrl-C does); check the
    one line and the exit status it ends with; its stderr."""
    if group:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    process.wait(timeout=seconds(60))
    try:
        _, stderr = process.communicate(timeout=seconds(10))
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"{process.args[1:3]} ended ({process.returncode}), a process it started holds its output"
        )
    line, status = ENDINGS[signal.Signals(signum)]
    assert process.returncode == status, stderr
    assert stderr.splitlines()[-1] == line, stderr
    assert "Traceback" not in stderr
    assert "flagtree-feedstock: error" not in stderr
    return stderr


def _killed(process: subprocess.Popen[str]) -> None:
    """SIGKILL the toolkit; once it has ended, stop reading what it wrote (what it started may hold that)."""
    process.kill()
    process.wait(timeout=seconds(60))
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def toy_slow(tmp_path: Path, empty_channel: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `flagtree-feedstock build` of toy-slow into tmp_path/channel, in its own process group; returns
    once toy-slow's build script runs (its marker, tmp_path/marker, is there). After the test, whatever of
    the build still runs (the test failed) is SIGKILLed: nothing outlives a test."""
    started: list[tuple[subprocess.Popen[str], Process]] = []

    def start(**env: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [str(CONSOLE_SCRIPT), *build_args("toy-slow", tmp_path / "channel", *native_args(empty_channel))],
            env={**os.environ, "TOY_MARKER": str(tmp_path / "marker"), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, which a terminal's Ctrl-C signals whole
        )
        _wait_for(tmp_path / "marker", process)
        worker = Process.of(os.getsid(int((tmp_path / "marker").read_text().split()[0])))
        assert worker is not None
        started.append((process, worker))
        return process

    yield start
    for process, worker in started:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        _end_all(worker.pid, worker)


def _running_when_the_lock_is_free(lock: Path, watched: list[int], found: list[list[int]]) -> None:
    """Take the lock file's flock as soon as it is free (polling); note which of ``watched`` ran then."""
    with lock.open("rb") as probe:
        deadline = time.monotonic() + seconds(30)
        while time.monotonic() < deadline:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(FINE_POLL)
                continue
            found.append([pid for pid in watched if _alive(pid)])
            return


def _end_all(session: int, leader: Process) -> None:
    """SIGKILL every process of ``session`` until none is left (what a test itself left running). ``leader``
    made the session: when its pid is another process's now, so is the session, and nothing is signalled. A
    member that ends between the listing and its kill (the build ending by itself as the test ends) is gone
    already: the others are still killed."""
    now = Process.of(session)
    if now is not None and now.start != leader.start:
        return
    deadline = time.monotonic() + seconds(5)
    while (members := _session(session)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(POLL)


def test_ending_a_session_passes_over_a_member_that_ended_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test left running is killed by _end_all, which lists the session, then kills each member: one
    that ended in between (under load, a build ending by itself as its test ends) is gone already, and the
    others are killed all the same (its ProcessLookupError failed a test's teardown)."""
    live = subprocess.Popen(["sleep", seconds_arg(60)], start_new_session=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    leader = Process.of(live.pid)
    assert leader is not None
    listing = _session
    looks: list[dict[int, str]] = []

    def listed_before_it_ended(session: int) -> dict[int, str]:
        looks.append(listing(session))
        return {gone.pid: "true", **looks[-1]} if len(looks) == 1 else looks[-1]

    monkeypatch.setitem(globals(), "_session", listed_before_it_ended)
    try:
        _end_all(live.pid, leader)
        status = live.wait(timeout=seconds(10))
    finally:
        if live.poll() is None:  # the test failed: nothing outlives it
            live.kill()
            live.wait()
    assert looks[0] == {live.pid: "sleep"}
    assert status == -signal.SIGKILL
    assert len(looks) == 2  # the second look found the session empty


@pytest.mark.parametrize(
    ("signum", "group", "cgroup"),
    [
        (signal.SIGINT, False, True),
        (signal.SIGINT, True, True),
        (signal.SIGTERM, False, True),
        (signal.SIGTERM, False, False),
        (signal.SIGHUP, False, True),
    ],
    ids=["kill-INT-pid", "ctrl-c-at-a-terminal", "kill-TERM-pid", "kill-TERM-pid-no-cgroup", "kill-HUP-pid"],
)
def test_a_signal_during_a_build_script(
    tmp_path: Path, toy_slow: Callable[..., subprocess.Popen[str]], signum: int, group: bool, cgroup: bool
) -> None:
    """Each of the three ends the same way. Under SIGTERM the build script's child ignores SIGTERM (as a
    program may): the toolkit's SIGKILL after the grace period ends it, and only then is the lock released.
    Without a cgroup (a user's login session) the toolkit ends them itself, not the cgroup's kill."""
    log = tmp_path / "builds.log"
    out = tmp_path / "channel"
    stubborn = {"TOY_STUBBORN": "1"} if signum == signal.SIGTERM else {}
    process = toy_slow(TOY_BUILD_LOG=str(log), **stubborn, **({} if cgroup else NO_CGROUP))
    shell, child = (int(pid) for pid in (tmp_path / "marker").read_text().split())
    session = list(_session(os.getsid(shell)))
    assert os.getsid(shell) in session  # the worker leads the session
    running: list[list[int]] = []
    prober = threading.Thread(
        target=_running_when_the_lock_is_free, args=(tmp_path / ".channel.lock", session, running)
    )
    prober.start()
    stderr = _ended(process, signum, group=group)
    # Ended by the command before it returns (docs/building.md), not by the watchdog after it.
    assert [pid for pid in (*session, shell, child) if _alive(pid)] == [], "the build outlived the command"
    prober.join()
    assert running == [[]], (
        f"the lock was released while these processes of the worker's session ran: {running}"
    )
    assert "Script failed" not in stderr
    assert not _alive(shell), "the build script still runs"
    assert not _alive(child), "a process the build script started still runs"
    assert not [pid for pid in session if _alive(pid)], "a process of the worker's session still runs"
    assert log.read_text().splitlines() == ["toy-quick", "toy-slow"]
    # toy-quick, finished before the signal, is kept and indexed; nothing of toy-slow, no staging folder.
    (quick,) = published(out)
    assert quick.startswith("toy-quick-1.0-")
    assert sorted(leftovers(out)) == sorted(
        ["linux-64", "noarch", f"linux-64/{quick}", "linux-64/repodata.json", "noarch/repodata.json"]
    )


def test_toy_slow_holds_for_the_scaled_time(
    tmp_path: Path, toy_slow: Callable[..., subprocess.Popen[str]]
) -> None:
    """The build script's child, which the script waits on, sleeps the time tests/conftest.py gives on the tests'
    time scale (TOY_HOLD_SECONDS), not a fixed minute: a slower machine's tests still end it before it ends."""
    assert os.environ["TOY_HOLD_SECONDS"] == seconds_arg(600)  # tests/conftest.py's, for every toy-slow build
    process = toy_slow(TOY_HOLD_SECONDS=seconds_arg(601))  # another time than the recipe's own minute
    _, child = (int(pid) for pid in (tmp_path / "marker").read_text().split())
    assert Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[:2] == [
        b"sleep",
        seconds_arg(601).encode(),
    ]
    _ended(process, signal.SIGINT)


def test_a_sigkilled_toolkit_leaves_nothing_of_its_build_running(
    tmp_path: Path, toy_slow: Callable[..., subprocess.Popen[str]]
) -> None:
    """SIGKILL cannot be handled: the system kills the worker (PR_SET_PDEATHSIG), and its watchdog ends the
    rest of the session (the build script's child, which ignores SIGTERM, with SIGKILL after the grace
    period) and removes the staging folder. The worker and the watchdog hold the lock with the toolkit: it is
    free only once they are gone."""
    out = tmp_path / "channel"
    process = toy_slow(TOY_STUBBORN="1")
    shell, child = (int(pid) for pid in (tmp_path / "marker").read_text().split())
    worker = os.getsid(shell)
    session = _session(worker)
    assert WATCHDOG in session.values(), session
    assert [p.name for p in tmp_path.glob(".channel-staging-*")]
    running: list[list[int]] = []
    prober = threading.Thread(
        target=_running_when_the_lock_is_free, args=(tmp_path / ".channel.lock", list(session), running)
    )
    prober.start()
    _killed(process)
    prober.join()
    assert running == [[]], (
        f"the lock was released while these processes of the worker's session ran: {running}"
    )
    assert not _session(worker)
    assert not [pid for pid in (worker, shell, child) if _alive(pid)]
    assert not list(tmp_path.glob(".channel-staging-*"))
    assert len(published(out)) == 1  # toy-quick, finished before the SIGKILL: kept, and indexed


def test_a_worker_whose_watchdog_was_killed_dies_with_the_toolkit_and_a_rerun_names_what_it_left(
    tmp_path: Path, empty_channel: Path, toy_slow: Callable[..., subprocess.Popen[str]]
) -> None:
    """The watchdog killed too (SIGKILL of both): the system still kills the worker with the toolkit, while
    the build script waits without a word (a worker that writes to the dead toolkit's pipe ends of that). The
    build script is left running, and nothing ends it now: a rerun into the folder refuses to build beside
    it, naming its processes. The script runs on until the test is done with it: its hold outlasts every wait
    of the test (at load 18 the recipe's 60 s ran out before the second rerun)."""
    reruns, rerun_timeout = 2, seconds(120)
    waits = seconds(20) + reruns * rerun_timeout  # _until's (the worker's end), then the reruns'
    assert float(os.environ["TOY_HOLD_SECONDS"]) > waits
    out = tmp_path / "channel"
    process = toy_slow()
    shell, child = (int(pid) for pid in (tmp_path / "marker").read_text().split())
    worker = os.getsid(shell)
    (watchdog,) = [pid for pid, name in _session(worker).items() if name == WATCHDOG]
    os.kill(watchdog, signal.SIGKILL)
    _killed(process)
    _until(lambda: not _alive(worker), "the worker ended with the toolkit")
    assert _alive(shell)
    assert _alive(child)
    for _ in range(reruns):  # the refusal does not forget them: a second rerun refuses too
        rerun = subprocess.run(
            [str(CONSOLE_SCRIPT), *build_args("toy-slow", out, *native_args(empty_channel))],
            env={**os.environ, "TOY_RELEASE": str(tmp_path)},  # were it to build, at once
            capture_output=True,
            text=True,
            timeout=rerun_timeout,
            check=False,
        )
        (line,) = [
            line for line in rerun.stderr.splitlines() if line.startswith("flagtree-feedstock: error:")
        ]
        assert rerun.returncode == 12, rerun.stderr
        named = int(line.removeprefix("flagtree-feedstock: error: process ").split(" ", 1)[0])
        assert f" of an earlier build into {out} still runs" in line
        listed = line.rsplit("(kill ", 1)[1].split(")", 1)[0].split()
        assert {named, shell, child} <= {int(pid) for pid in listed}
        assert line.endswith("), then rerun)")
    assert len(published(out)) == 1  # toy-quick, from the killed build; nothing built beside its leftovers


def _recorded(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


# Run a command as on a machine that lets the user make no cgroup (tests/interrupt_hook/sitecustomize.py).
NO_CGROUP = {
    "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
    "FLAGTREE_TEST_NO_CGROUP": "1",
}


@pytest.mark.parametrize(
    "how", ["SIGTERM", "SIGTERM-no-cgroup", "done", "done-no-cgroup", "SIGKILL", "SIGKILL-no-cgroup"]
)
def test_what_the_build_script_leaves_in_a_session_of_its_own_is_ended(
    tmp_path: Path, toy_slow: Callable[..., subprocess.Popen[str]], how: str
) -> None:
    """toy-slow's script starts a process that leaves the session (setsid), ignores SIGTERM and forks a child
    ignoring it too every 20 ms. Whether the build is ended by SIGTERM or its script ends as it should, the
    worker, a child subreaper, gets what the script leaves, and none of it outlives the command: the worker's
    cgroup ends it where the toolkit can make one (always here, as root), else the worker's and the toolkit's
    rounds of SIGTERM and SIGKILL below the worker (``-no-cgroup``). When the toolkit is SIGKILLed (the worker
    dies with it), the watchdog ends it before it lets the lock go: the worker's cgroup whole, or where there
    is none, what it noted below the worker every half second (the forker has run for a second by then) and
    each child it forks until it has stopped."""
    escape = tmp_path / "escaped"
    extra = NO_CGROUP if how.endswith("-no-cgroup") else {}
    process = toy_slow(TOY_ESCAPE=str(escape), TOY_RELEASE=str(tmp_path / "release"), **extra)
    try:
        _until(lambda: len(_recorded(escape)) >= 50, "the escaped process forks for a second")
        leader = _recorded(escape)[0]
        assert os.getsid(leader) == leader != os.getsid(int((tmp_path / "marker").read_text().split()[0]))
        if how.startswith("SIGTERM"):
            _ended(process, signal.SIGTERM)
        elif how.startswith("SIGKILL"):
            _killed(process)
            free: list[list[int]] = []
            _running_when_the_lock_is_free(tmp_path / ".channel.lock", [], free)  # the watchdog is done
            assert free == [[]]
        else:
            (tmp_path / "release").touch()
            _, stderr = process.communicate(timeout=seconds(120))
            assert process.returncode == 0, stderr
        running = [pid for pid in _recorded(escape) if _alive(pid)]
        assert running == [], (
            f"{len(running)} of {len(_recorded(escape))} escaped processes still run: "
            + "; ".join(str(Process.of(pid)) for pid in running)
        )
    finally:
        first = _recorded(escape)[:1]
        if first and (leader_process := Process.of(first[0])) is not None:
            _end_all(first[0], leader_process)
    assert len(published(tmp_path / "channel")) == (2 if how.startswith("done") else 1)  # toy-quick, kept


@pytest.mark.parametrize(
    ("how", "cgroup"),
    [
        ("setsid", True),
        ("setsid", False),
        ("clean", True),
        ("group", True),
        ("group", False),
        ("group-clean", False),
    ],
    ids=[
        "setsid",
        "setsid-no-cgroup",
        "empty-environment",
        "own-group",
        "own-group-no-cgroup",
        "own-group-empty-environment-no-cgroup",
    ],
)
def test_a_process_started_after_the_watchdog_s_last_look_is_ended_after_a_sigkill(
    tmp_path: Path, toy_slow: Callable[..., subprocess.Popen[str]], how: str, cgroup: bool
) -> None:
    """The watchdog notes what runs below the worker every half second; here it is stopped (SIGSTOP) while the
    build script starts a process and the toolkit is SIGKILLed, so that process started after its last look.
    It is ended all the same: by the worker's cgroup where the machine lets the toolkit make one (always here,
    as root), else by the second sweep, which finds it by the engine's variables in its environment
    (``setsid``). One with an empty environment (``clean``) only the cgroup ends. One in a process group of
    its own that stays in the build's session and ignores SIGTERM (``group``) is ended as a member of the
    session: SIGTERM, then SIGKILL, the only end of one with an empty environment too, without a cgroup."""
    late = tmp_path / "late"
    process = toy_slow(TOY_LATE=str(late), TOY_LATE_HOW=how, **({} if cgroup else NO_CGROUP))
    shell = int((tmp_path / "marker").read_text().split()[0])
    worker = os.getsid(shell)
    (watchdog,) = [pid for pid, name in _session(worker).items() if name == WATCHDOG]
    os.kill(watchdog, signal.SIGSTOP)
    pid = 0
    try:
        Path(f"{late}.go").touch()
        _until(late.exists, "the build script started the late process")
        pid = int(late.read_text())
        _until(lambda: "sleep" in getattr(Process.of(pid), "command", ""), "it runs sleep")
        if how.startswith("group"):
            assert os.getpgid(pid) == pid != os.getpgid(shell)
            assert os.getsid(pid) == worker
        else:
            assert os.getsid(pid) == pid != worker
        _killed(process)
        os.kill(watchdog, signal.SIGCONT)
        free: list[list[int]] = []
        _running_when_the_lock_is_free(tmp_path / ".channel.lock", [pid], free)  # the watchdog is done
        assert free == [[]], f"the late process ({how}) still runs once the watchdog is done"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(watchdog, signal.SIGCONT)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_what_a_build_killed_while_it_publishes_leaves_is_removed_by_the_next(
    tmp_path: Path, empty_channel: Path
) -> None:
    """SIGKILL while toy-quick goes into the channel folder (its temporary `.part` file there, the staging
    folder beside; no engine worker runs, so no watchdog cleans up): the next build into the folder removes
    both, as their owner, named in them, is gone; a staging folder whose owner runs is left alone."""
    out = tmp_path / "channel"
    argv = [str(CONSOLE_SCRIPT), *build_args("toy-slow", out, *native_args(empty_channel))]
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        argv,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_PAUSE": "os.chmod:.part",  # the package linked beside its name, not yet checked
            "FLAGTREE_TEST_READY": str(ready),
            "FLAGTREE_TEST_PAUSE_SECONDS": seconds_arg(60),
            "TOY_RELEASE": str(tmp_path),  # toy-slow builds at once
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(ready, process)
    _killed(process)
    (part,) = out.glob("linux-64/.*.part")
    (staging,) = tmp_path.glob(".channel-staging-*")
    me = Process.of(os.getpid())
    assert me is not None
    busy = tmp_path / f".channel-staging-{me.pid}.{me.start}-busy"  # as a running build's would be named
    busy.mkdir()
    rerun = subprocess.run(
        argv,
        env={**os.environ, "TOY_RELEASE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=seconds(300),
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert not part.exists()
    assert not staging.exists()
    assert busy.is_dir()
    assert not list(out.rglob("*.part"))
    assert len(published(out)) == 2


LOADING = {
    "console-script": "rich.console",  # while the wrapper's import of the CLI loads
    "python -m": "rich.console",
    "build --render-only": "flagtree_feedstock.recipe.render",
    "channel index": "rattler.index",
    "channel install": "rattler.channel",  # the first module rattler imports as it loads
    "upload": "flagtree_feedstock.channel.upload",
}


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        *((command, signal.SIGINT) for command in LOADING),
        *(
            (command, signum)
            for command in ("console-script", "channel index", "upload")
            for signum in (signal.SIGTERM, signal.SIGHUP)
        ),
    ],
)
def test_a_signal_while_a_command_loads(tmp_path: Path, command: str, signum: int) -> None:
    """The command is held inside the import of a module it loads (tests/interrupt_hook): the signal ends it
    there, in its one line. The hold ends when the signal comes, however soon after the test is told (it once
    slept through a SIGINT that came between its marker and its sleep: the test then timed out)."""
    marker = tmp_path / "paused"
    channel = tmp_path / "channel"
    (channel / "noarch").mkdir(parents=True)
    render = build_args("toy-multi", tmp_path / "out", "--render-only")
    argv = {
        "console-script": [str(CONSOLE_SCRIPT), *render],
        "python -m": [sys.executable, "-m", "flagtree_feedstock", *render],
        "build --render-only": [str(CONSOLE_SCRIPT), *render],
        "channel index": [str(CONSOLE_SCRIPT), "channel", "index", str(channel)],
        "channel install": [str(CONSOLE_SCRIPT), "channel", "install", str(channel), "toy-py"],
        "upload": [str(CONSOLE_SCRIPT), "upload", str(channel), "--to", "prefix", "--channel", "x"],
    }[command]
    process = subprocess.Popen(
        argv,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_PAUSE": f"import:{LOADING[command]}",
            "FLAGTREE_TEST_READY": str(marker),
            "FLAGTREE_TEST_PAUSE_SECONDS": seconds_arg(60),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(marker, process)
    # A command that started with the signal ignored or blocked keeps it so (inherited from this process, which
    # tests/conftest.py's ending_signals_as_found keeps as it was): say so, not a timeout a minute later.
    assert ignored_and_blocked(process.pid) == ([], []), (ignored_and_blocked(), "in the test process")
    _ended(process, signum)
    # Nothing written; `channel index` took the folder's lock (a lock file beside it, kept by design).
    lock = [".channel.lock"] if command == "channel index" else []
    assert sorted(p.name for p in tmp_path.iterdir()) == [*lock, "channel", "paused"]
    assert sorted(p.name for p in channel.rglob("*")) == ["noarch"]


def _paused(argv: list[str], pause: str, tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    """``argv`` held for 2 s at the first audit event ``pause`` (tests/interrupt_hook); returns once there."""
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        argv,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_PAUSE": pause,
            "FLAGTREE_TEST_READY": str(ready),
            "FLAGTREE_TEST_PAUSE_SECONDS": seconds_arg(2),
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(ready, process)
    return process


@pytest.fixture(scope="module")
def toy_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel folder holding toy-quick, built once (its index is removed by each test's copy)."""
    from _toy import make_empty_channel  # noqa: PLC0415

    base = tmp_path_factory.mktemp("toy-channel")
    out = base / "channel"
    empty = make_empty_channel(base / "empty")
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *build_args("toy-slow", out, *native_args(empty), "--output", "toy-quick")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_while_channel_index_writes_waits_for_the_index_and_leaves_no_tmp(
    tmp_path: Path, toy_channel: Path, signum: int
) -> None:
    """The signal lands while the indexer's scratch folder (.tmp, py-rattler's) is there, in its last run, on
    the channel itself (the first is on the stand-ins' scratch channel): it is held until the index is written
    and the scratch folder removed."""
    channel = tmp_path / "channel"
    (channel / "linux-64").mkdir(parents=True)
    (package,) = (toy_channel / "linux-64").glob("*.conda")
    os.link(package, channel / "linux-64" / package.name)
    process = _paused(
        [str(CONSOLE_SCRIPT), "channel", "index", str(channel)], "shutil.rmtree:/channel/.tmp", tmp_path
    )
    assert (channel / ".tmp").is_dir()
    _ended(process, signum)
    assert published(channel) == [package.name]
    assert sorted(str(p.relative_to(channel)) for p in channel.rglob("*")) == sorted(
        ["linux-64", f"linux-64/{package.name}", "linux-64/repodata.json", "noarch", "noarch/repodata.json"]
    )


def _running_threads() -> list[str]:
    """This process's threads, but the calling one, that run (not asleep in the kernel): name and state."""
    me = str(threading.get_native_id())
    found = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if task.name != me and state not in {"S", "Z", "X"}:
                found.append(f"{(task / 'comm').read_text().strip()} {state}")
    return found


def test_channel_index_goes_on_only_once_py_rattlers_workers_are_idle(
    tmp_path: Path, toy_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-rattler's indexer hands its result back while one of its tokio workers still finishes the task (on
    about every second run here); a SIGTERM held until the index is written, then delivered, ends the
    interpreter under that thread (once in 110 signals: SIGSEGV after "terminated"). By the time
    index_channel removes the indexer's scratch folder, the last step before a held signal is delivered, every
    other thread sleeps: ten indexes in a row, each of their two indexer runs (the stand-ins', the channel's)
    looked at right then."""
    from flagtree_feedstock.channel import index  # noqa: PLC0415

    seen: list[list[str]] = []
    remove = shutil.rmtree

    def looked_at(path: Path, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == ".tmp":
            seen.append(_running_threads())
        remove(path, *args, **kwargs)

    monkeypatch.setattr(index.shutil, "rmtree", looked_at)
    channel = tmp_path / "channel"
    (channel / "linux-64").mkdir(parents=True)
    (package,) = (toy_channel / "linux-64").glob("*.conda")
    os.link(package, channel / "linux-64" / package.name)
    for _ in range(10):
        index.index_channel(channel, check=False)
    assert seen == [[]] * 20


def test_channel_install_returns_only_once_py_rattlers_workers_are_idle(
    tmp_path: Path, toy_channel: Path
) -> None:
    """py-rattler's solve and install hand their result back while one or two tokio workers still run (after
    each of ten installs in a row, without the wait); `channel install` ends right after, and the interpreter
    torn down under such a thread can crash (a SIGSEGV once, in test_channel_credentials' second install). As
    smoke_install returns, every other thread sleeps: ten installs, each looked at right then."""
    from flagtree_feedstock.channel.index import index_channel  # noqa: PLC0415
    from flagtree_feedstock.channel.install import smoke_install  # noqa: PLC0415

    channel = tmp_path / "channel"
    (channel / "linux-64").mkdir(parents=True)
    (package,) = (toy_channel / "linux-64").glob("*.conda")
    os.link(package, channel / "linux-64" / package.name)
    index_channel(channel, check=False)
    seen = []
    for attempt in range(10):
        smoke_install(channel, ["toy-quick"], prefix=tmp_path / f"prefix-{attempt}", platform="linux-64")
        seen.append(_running_threads())
    assert seen == [[]] * 10


@pytest.mark.parametrize(
    "step",
    ["channel index", "channel index fails", "channel install", "the solve fails", "the install fails"],
)
def test_a_thread_still_working_when_py_rattler_returns_is_waited_for(
    step: str, tmp_path: Path, toy_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two tests above catch py-rattler's own workers when they happen to be late (after every install, on
    about every second index); this one every time: a thread works on for a moment after each py-rattler call
    returns or raises, as those workers do, and the step returns, or raises its one-line error, only once it
    is done (a failed solve then the exit crashed in 65 of 100 commands when only a success was waited for:
    test_exit_statuses.py)."""
    from flagtree_feedstock.channel.index import index_channel  # noqa: PLC0415
    from flagtree_feedstock.channel.install import smoke_install  # noqa: PLC0415

    channel = tmp_path / "channel"
    (channel / "linux-64").mkdir(parents=True)
    (package,) = (toy_channel / "linux-64").glob("*.conda")
    os.link(package, channel / "linux-64" / package.name)
    if step == "channel index fails":  # py-rattler's indexer cannot read an index that is a folder
        (channel / "linux-64" / "repodata.json").mkdir()
    elif step != "channel index":
        index_channel(channel, check=False)
    if step == "the install fails":  # py-rattler's installer cannot make its package cache in a file
        (tmp_path / "a-file").touch()
        monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "a-file"))
    working = threading.Event()  # set as a call returns (in this thread), cleared by the worker once done
    stop = threading.Event()
    run = asyncio.run

    def returned(call: Any) -> Any:
        try:
            return run(call)
        finally:
            working.set()

    def late_worker() -> None:
        while not stop.is_set():
            if working.wait(POLL):
                end = time.monotonic() + 0.3  # well within the toolkit's 2 s wait for idle threads
                while time.monotonic() < end:  # busy, as a running thread is
                    pass
                working.clear()

    monkeypatch.setattr(asyncio, "run", returned)
    worker = threading.Thread(target=late_worker)
    worker.start()
    try:
        with (
            contextlib.nullcontext()
            if step in ("channel index", "channel install")
            else pytest.raises(FeedstockError, match=FAILURES.get(step, "^$"))
        ):
            if step.startswith("channel index"):
                index_channel(channel, check=False)
            else:
                spec = "nosuch" if step == "the solve fails" else "toy-quick"
                smoke_install(channel, [spec], prefix=tmp_path / "prefix", platform="linux-64")
        assert not working.is_set(), f"{step}: returned while a thread still worked"
    finally:
        stop.set()
        worker.join()


# How each failing step of the test above fails (the start of its message).
FAILURES = {
    "channel index fails": "^indexing .* failed: ",
    "the solve fails": "^cannot solve nosuch from ",
    "the install fails": "^installing into .* failed: ",
}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_while_upload_waits_for_the_server(tmp_path: Path, toy_channel: Path, signum: int) -> None:
    """A server that takes the request and never answers: the signal ends the upload at once, one line."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    asked = tmp_path / "asked"
    held: list[socket.socket] = []

    def serve() -> None:
        connection, _ = listener.accept()
        held.append(connection)
        connection.recv(65536)
        asked.touch()  # and never answers

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = [str(CONSOLE_SCRIPT), "upload", str(toy_channel), "--to", "prefix", "--channel", "x"]
    process = subprocess.Popen(
        [*argv, "--url", f"http://127.0.0.1:{port}"],
        env={**os.environ, "PREFIX_API_KEY": "secret-token", "TMPDIR": str(scratch), "no_proxy": "127.0.0.1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(asked, process)
        stderr = _ended(process, signum)
    finally:
        listener.close()
        for connection in held:
            connection.close()
    assert "secret-token" not in stderr
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    "pause", ["os.rename:", "return:os.replace"], ids=["before-the-rename", "after-the-rename"]
)
def test_a_signal_while_bump_writes_leaves_no_tmp_and_no_pin_changed(tmp_path: Path, pause: str) -> None:
    """SIGTERM as the first staged file is renamed into place (just before, or just after the rename and
    before the bump has noted it, the moment a signal once left that file new and its backup removed):
    every staged file is removed, none has moved, no backup is left."""
    import yaml  # noqa: PLC0415

    from _bump_sources import copy_feedstock, make_standins  # noqa: PLC0415

    pins = yaml.safe_load((RECIPES.parents[1] / "recipe" / "conda_build_config.yaml").read_text())
    standins = make_standins(tmp_path / "upstream", pins["llvm_commit"][0])
    feedstock = copy_feedstock(tmp_path / "feedstock", standins.pin)
    before = {p: p.read_bytes() for p in feedstock.rglob("*") if p.is_file()}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = [str(CONSOLE_SCRIPT), "bump", "--recipe-dir", str(feedstock / "recipe")]
    process = _paused(
        [*argv, "--flagtree-src", str(standins.flagtree), "--to", "only-flagtree"],
        pause,
        tmp_path,
        TMPDIR=str(scratch),
    )
    # Before: staged, being moved. After: moved, its old file kept beside it until all have moved.
    assert list((feedstock / "recipe").glob(".*.tmp" if pause == "os.rename:" else ".*.orig"))
    _ended(process, signal.SIGTERM)
    assert {p: p.read_bytes() for p in feedstock.rglob("*") if p.is_file()} == before
    assert list(scratch.iterdir()) == []  # the bump's scratch clones are removed too


def test_a_signal_ignored_at_start_stays_ignored(tmp_path: Path) -> None:
    """nohup ignores SIGHUP for the command it runs: a SIGHUP then changes nothing."""
    render = [str(CONSOLE_SCRIPT), *build_args("toy-multi", tmp_path / "out", "--render-only")]
    process = _paused(["nohup", *render], "import:flagtree_feedstock.recipe.render", tmp_path)
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=seconds(60))
    assert process.returncode == 0, err
    assert "packages to build" in out


def test_an_interrupt_while_a_package_is_published_waits_for_its_index(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGINT that arrives between putting a package in place and indexing it is held until the index is
    written: the package is never left in the folder without its index entry."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415

    assert (
        main(build_args("toy-multi", tmp_path / "built", *native_args(empty_channel), "--python", "3.12"))
        == 0
    )
    staging = tmp_path / "staging"
    (staging / "linux-64").mkdir(parents=True)
    for package in (tmp_path / "built" / "linux-64").glob("*.conda"):
        os.link(package, staging / "linux-64" / package.name)
    real_index = output_dir.index_channel

    def interrupted_index(channel: Path, *, check: bool = True) -> list[Path]:
        signal.raise_signal(
            signal.SIGINT
        )  # Ctrl-C, after the packages were renamed into place (handled at once)
        return real_index(channel, check=check)

    monkeypatch.setattr(output_dir, "index_channel", interrupted_index)
    out = tmp_path / "channel"
    with pytest.raises(KeyboardInterrupt):
        output_dir.publish_new(staging, out, known=set(), subdirs=("linux-64", "noarch"))
    assert len(published(out)) == 2  # both packages, and an index that lists them


def test_deferred_interrupts_hold_a_sigint_until_the_block_ends() -> None:
    finished = []
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        signal.raise_signal(signal.SIGINT)  # its handler has run when this returns: it only noted the signal
        finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


@pytest.fixture
def caught_signals() -> Iterator[None]:
    """The console scripts' handlers (catch_signals) in this process, for one test."""
    saved = {signum: signal.getsignal(signum) for signum in ENDINGS}
    catch_signals()
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("caught_signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_deferred_interrupts_hold_each_signal_and_deliver_the_first(signum: int) -> None:
    finished = []
    with pytest.raises(Interrupted) as raised, deferred_interrupts():
        signal.raise_signal(
            signum
        )  # each handler has run when its raise returns: they only noted the signals
        signal.raise_signal(signal.SIGINT)
        finished.append(True)
    assert finished == [True]
    assert raised.value.signum == signum
    # The command is ending now: the three are ignored, its cleanup is not cut short.
    assert {signal.getsignal(s) for s in ENDINGS} == {signal.SIG_IGN}


def test_the_console_script_is_the_guarded_entry() -> None:
    """pyproject's console script names the module whose entrypoint guards the imports."""
    assert "from flagtree_feedstock._entry import entrypoint" in CONSOLE_SCRIPT.read_text()
    assert (RECIPES / "toy-slow" / "recipe.yaml").is_file()
