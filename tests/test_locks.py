"""A channel folder's lock (flagtree_feedstock._locks): what its file may be, what it records, where it goes.

The lock file is opened without following a link and must be a regular file; it is never truncated, and a
file that is not a lock record is refused, not overwritten; when the folder's parent cannot hold it, it goes
inside the folder. The commands that take it (`build`, `channel index`) are run as a user reaches them; the
read-only parent as a user without root's right to write anywhere (tests/_tools.as_a_user).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _peak_memory import MEMORY_LIMIT_KIB, run_measured
from _timing import POLL, seconds, seconds_arg
from _tools import as_a_user
from _toy import build_args, error_line, make_empty_channel, native_args, published
from flagtree_feedstock._locks import INSIDE, MAX_RECORD, folder_lock, lock_path
from flagtree_feedstock._processes import Process
from flagtree_feedstock.cli import main

CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
LINUX_64 = ("--target-platform", "linux-64")


@pytest.fixture(scope="module")
def toy_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel folder holding toy-quick (built once), in a folder of its own."""
    base = tmp_path_factory.mktemp("toy")
    out = base / "channel"
    empty = make_empty_channel(base / "empty")
    assert main(build_args("toy-slow", out, *native_args(empty), "--output", "toy-quick")) == 0
    return out


@pytest.fixture
def channel(tmp_path: Path, toy_channel: Path) -> Path:
    """A copy of toy_channel, unindexed, in tmp_path."""
    copy = tmp_path / "channel"
    (copy / "linux-64").mkdir(parents=True)
    for package in (toy_channel / "linux-64").glob("*.conda"):
        os.link(package, copy / "linux-64" / package.name)
    return copy


def _index(channel: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["channel", "index", str(channel)])
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "target"),
    [("channel index", "a-file"), ("channel index", "nothing"), ("build", "a-file"), ("build", "nothing")],
)
def test_a_planted_lock_link_is_refused_and_its_target_untouched(
    tmp_path: Path, channel: Path, empty_channel: Path, command: str, target: str
) -> None:
    """Someone who may write beside the folder plants `.channel.lock -> a file of yours`: opening it to lock
    would write through the link (the record) or create the file it names. Run as a user runs it (a lock
    taken through the link is never the file at its path, so the command could go on opening it for ever:
    the deadline ends that)."""
    victim = tmp_path / "victim.txt"
    if target == "a-file":
        victim.write_text("precious\n")
    link = tmp_path / ".channel.lock"
    link.symlink_to(victim)
    argv = ["channel", "index", str(channel)]
    if command == "build":
        argv = build_args("toy-slow", channel, *native_args(empty_channel))
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), *argv], capture_output=True, text=True, check=False, timeout=seconds(120)
    )
    assert done.returncode == 10, done.stderr
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: the lock file {link} is a symbolic link (to {victim}): a lock is never "
        f"taken through a link (fix: remove {link} (flagtree-feedstock makes its lock file there), then rerun)"
    )
    assert link.is_symlink()
    if target == "a-file":
        assert victim.read_text() == "precious\n"
    else:
        assert not victim.exists()
    assert not (channel / "linux-64" / "repodata.json").exists()  # nothing else was done


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_lock_path_that_is_no_file_is_refused(
    tmp_path: Path, channel: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A FIFO there does not hang the command (it is opened without waiting for a writer)."""
    lock = tmp_path / ".channel.lock"
    if kind == "folder":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    status, err = _index(channel, capsys)
    assert status == 10
    assert error_line(err) == (
        f"flagtree-feedstock: error: the lock file {lock} is not a regular file (fix: move {lock} away "
        "(flagtree-feedstock makes its lock file there), then rerun)"
    )


@pytest.mark.parametrize(
    "foreign",
    [
        "my notes, which happen to have this name\n",
        "my notes, which happen to have this name,\nand go on\n\nfor a while\n",
        # The first line is what an old lock file held (`process <pid>`), but that was all it ever held.
        "process 12\nand then my notes\n",
    ],
    ids=["one-line", "lines", "old-record-then-more"],
)
def test_a_file_that_is_not_a_lock_record_is_refused_not_overwritten(
    tmp_path: Path, channel: Path, capsys: pytest.CaptureFixture[str], foreign: str
) -> None:
    lock = tmp_path / ".channel.lock"
    lock.write_text(foreign)
    status, err = _index(channel, capsys)
    assert status == 10
    assert error_line(err) == (
        f"flagtree-feedstock: error: {lock} is not a lock file of flagtree-feedstock (it holds other data, "
        f"which is left as it is) (fix: move {lock} away (flagtree-feedstock makes its lock file for {channel} "
        "there), then rerun)"
    )
    assert lock.read_text() == foreign


def test_a_lock_file_is_written_in_place_never_truncated(tmp_path: Path, channel: Path) -> None:
    """An earlier run's record, longer than this run's: the new one is written over it and padded, the file
    keeps its length. A lock file of the toolkit before the record (`process N`) is taken over too."""
    lock = lock_path(channel)
    for earlier in ("process 12345\n", f"flagtree-feedstock lock\nholder 1 1 {'x' * 400}\nworker 2 2 y\n"):
        lock.write_text(earlier)
        with folder_lock(channel) as held:
            me = Process.of(os.getpid())
            assert me is not None
            assert held.holder == me
            text = lock.read_text()
        assert lock.stat().st_size == max(len(earlier), len(text.rstrip(" ")))
        assert text.rstrip(" ").splitlines() == [
            "flagtree-feedstock lock",
            f"holder {me.pid} {me.start} {me.command}",
        ]


def test_a_channel_folder_in_a_read_only_place_is_indexed_with_its_lock_inside(channel: Path) -> None:
    """`channel index` on a folder whose parent this user may not write (a real permission, not root's)."""
    parent = channel.parent
    before = sorted(p.name for p in parent.iterdir())
    parent.chmod(0o555)
    try:
        done = subprocess.run(
            as_a_user([str(CONSOLE_SCRIPT), "channel", "index", str(channel)]),
            capture_output=True,
            text=True,
            check=False,
        )
        installed = subprocess.run(
            as_a_user([str(CONSOLE_SCRIPT), "channel", "install", str(channel), "toy-quick", *LINUX_64]),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        parent.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"indexed {channel / 'linux-64' / 'repodata.json'}",
        f"indexed {channel / 'noarch' / 'repodata.json'}",
    ]
    assert (channel / INSIDE).is_file()
    assert sorted(p.name for p in parent.iterdir()) == before  # nothing beside the folder
    assert len(published(channel)) == 1
    assert installed.returncode == 0, installed.stderr
    assert "toy-quick" in installed.stdout


def test_a_folder_that_no_lock_file_can_go_into_is_one_line(channel: Path) -> None:
    parent = channel.parent
    for folder in (channel, parent):
        folder.chmod(0o555)
    try:
        done = subprocess.run(
            as_a_user([str(CONSOLE_SCRIPT), "channel", "index", str(channel)]),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        for folder in (parent, channel):
            folder.chmod(0o755)
    assert done.returncode == 10, done.stderr
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: cannot lock {channel}: no lock file can be made beside it "
        f"({lock_path(channel)}: Permission denied) or in it ({channel / INSIDE}: Permission denied) "
        f"(fix: make {parent} or {channel} writable for you)"
    )


def test_a_recorded_worker_whose_pid_another_process_has_now_is_not_named(
    tmp_path: Path, channel: Path
) -> None:
    """The lock file names the worker of a build long gone; its pid now belongs to another session's leader
    (a different start time): that session is not the build's, and nothing is named."""
    hold = seconds_arg(30)  # until it is killed
    other = subprocess.Popen(["sleep", hold], start_new_session=True)
    try:
        # Popen may return before the new program's arguments show in /proc (the kernel sets them last).
        deadline = time.monotonic() + seconds(10)
        while (now := Process.of(other.pid)) is None or now.command != f"sleep {hold}":
            assert time.monotonic() < deadline, now
            time.sleep(POLL)
        lock = lock_path(channel)
        lock.write_text(f"flagtree-feedstock lock\nholder 1 1 gone\nworker {now.pid} {now.start - 1} gone\n")
        with folder_lock(channel) as held:
            assert held.left_running() == []
        # The same record with the start time it has: that session is the build's, and it runs.
        lock.write_text(f"flagtree-feedstock lock\nholder 1 1 gone\nworker {now.pid} {now.start} gone\n")
        with folder_lock(channel) as held:
            assert held.left_running() == [now]
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()


def _index_in_background(channel: Path, err: Path) -> subprocess.Popen[str]:
    """`flagtree-feedstock channel index` of ``channel`` as a real process, its stderr into ``err``."""
    with err.open("w") as stream:
        return subprocess.Popen(
            [str(CONSOLE_SCRIPT), "channel", "index", str(channel)],
            stdout=subprocess.DEVNULL,
            stderr=stream,
            text=True,
        )


def _waiting_line(process: subprocess.Popen[str], err: Path) -> str:
    """The line ``process`` prints as it starts to wait for the lock (it must wait, not end)."""
    timeout = seconds(60)
    deadline = time.monotonic() + timeout
    while "waiting for " not in err.read_text():
        if process.poll() is not None:
            pytest.fail(f"it did not wait (status {process.returncode}): {err.read_text()}")
        assert time.monotonic() < deadline, f"no waiting line within {timeout:g} s"
        time.sleep(POLL)
    (line,) = [line for line in err.read_text().splitlines() if "waiting for " in line]
    return line


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_lock_file_deleted_or_replaced_while_held_keeps_a_second_command_out(
    tmp_path: Path, channel: Path, how: str
) -> None:
    """A build holds the lock; someone removes its file (or puts another in its place): a second command
    makes (or finds) a new file that nobody holds, yet it waits: the folder itself is locked too."""
    lock = lock_path(channel)
    err = tmp_path / "index.err"
    with folder_lock(channel):
        lock.unlink()
        if how == "replaced":
            lock.write_text("flagtree-feedstock lock\n")
        index = _index_in_background(channel, err)
        line = _waiting_line(index, err)
        time.sleep(seconds(0.3))  # a while in which it would write, were it not to wait
        assert index.poll() is None
        assert not (channel / "linux-64" / "repodata.json").exists()  # nothing written beside the holder
    assert index.wait(timeout=seconds(60)) == 0, err.read_text()
    assert line.endswith(
        f"waiting for another command to finish writing into {channel} (its lock file {lock} was deleted or "
        "replaced while it held it)"
    )
    assert (channel / "linux-64" / "repodata.json").is_file()
    assert "flagtree-feedstock lock" in lock.read_text()  # the new file holds the index's record


def test_a_lock_file_replaced_while_a_command_waits_is_let_go_for_the_new_one(
    tmp_path: Path, channel: Path
) -> None:
    """The second command waits on the file the holder locked; that file is replaced meanwhile: once the
    holder lets go, the second locks the file now at the path (checked after locking), so its record is
    where a third command looks."""
    lock = lock_path(channel)
    err = tmp_path / "index.err"
    with folder_lock(channel):
        index = _index_in_background(channel, err)
        _waiting_line(index, err)
        replacement = tmp_path / "replacement"
        replacement.write_text("flagtree-feedstock lock\n")
        replacement.replace(lock)
    assert index.wait(timeout=seconds(60)) == 0, err.read_text()
    assert lock.read_text().splitlines()[1].startswith(f"holder {index.pid} ")


def test_a_huge_lock_file_is_refused_unread(tmp_path: Path, channel: Path) -> None:
    """A 3 GiB sparse file where the lock file goes (a lock record's header, then nothing): refused in one
    line, neither read nor padded whole (the command's own peak memory stays far below its size)."""
    lock = lock_path(channel)
    with lock.open("wb") as stream:
        stream.write(b"flagtree-feedstock lock\n")
        stream.truncate(3 << 30)
    done = run_measured(["flagtree-feedstock", "channel", "index", str(channel)], tmp_path / "peak")
    assert done.returncode == 10, done.stderr
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: {lock} is not a lock file of flagtree-feedstock: it is {3 << 30} bytes "
        f"long, and a lock record is never longer than {MAX_RECORD} (it is left as it is, unread) (fix: move "
        f"{lock} away (flagtree-feedstock makes its lock file for {channel} there), then rerun)"
    )
    assert "Traceback" not in done.stderr
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"{done.peak_kib} kB"
    assert lock.stat().st_size == 3 << 30
    assert lock.stat().st_blocks * 512 < 1 << 20  # still sparse: nothing was written over it
    assert not (channel / "linux-64" / "repodata.json").exists()


def test_a_planted_record_is_shown_with_its_control_characters_escaped(tmp_path: Path, channel: Path) -> None:
    """The record names a running process (this test's) with a command line full of terminal escapes: the
    waiting line shows them escaped, never raw."""
    lock = lock_path(channel)
    err = tmp_path / "index.err"
    with folder_lock(channel) as held:
        assert held.holder is not None
        planted = "evil\x1b]0;pwned\x07\x1b[2J\x9b31m"
        lock.write_text(f"flagtree-feedstock lock\nholder {held.holder.pid} {held.holder.start} {planted}\n")
        index = _index_in_background(channel, err)
        line = _waiting_line(index, err)
    assert index.wait(timeout=seconds(60)) == 0, err.read_text()
    assert f"waiting for process {os.getpid()} (evil\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m) to finish" in line
    assert not any(c in err.read_text() for c in "\x1b\x07\x9b")
