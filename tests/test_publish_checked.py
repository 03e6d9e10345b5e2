"""Publishing checks a package whole before it takes its final name: a damaged one never appears in the channel
folder under that name, not even for a moment. Real builds (py-rattler-build, offline); the channel folder is
watched with inotify (Linux), which reports every name made or renamed in it, in order.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _toy import build_args, error_line, leftovers, native_args, published
from flagtree_feedstock.builder import output_dir
from flagtree_feedstock.cli import main

# <sys/inotify.h>
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class FolderWatch:
    """The names that appear in one folder (made there, or renamed into it), as inotify reports them."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self._fd, os.fsencode(folder), IN_CREATE | IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")

    def events(self) -> list[tuple[str, str]]:
        """``("made", name)`` or ``("renamed in", name)`` for each event since the last call, in order."""
        found = []
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                found.append(("renamed in" if mask & IN_MOVED_TO else "made", os.fsdecode(name)))
                offset += _EVENT.size + length

    def close(self) -> None:
        os.close(self._fd)


@pytest.fixture
def llvm_built(tmp_path: Path, empty_channel: Path) -> Path:
    """A channel folder holding toy-llvm: the toy-py build that follows publishes into its linux-64/."""
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *native_args(empty_channel), "--output", "toy-llvm")) == 0
    return out


@pytest.fixture
def watch(llvm_built: Path) -> Iterator[FolderWatch]:
    folder_watch = FolderWatch(llvm_built / "linux-64")
    yield folder_watch
    folder_watch.close()


def _damage(package: Path, how: str) -> None:
    data = package.read_bytes()
    middle = len(data) // 2
    if how == "truncated":
        package.write_bytes(data[:middle])
    else:
        package.write_bytes(
            data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :]
        )


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_a_damaged_package_never_takes_its_name_in_the_channel(
    llvm_built: Path,
    watch: FolderWatch,
    empty_channel: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    how: str,
) -> None:
    """The engine's toy-py package is damaged in the staging folder just before it is published (a disk that
    fails, a bug that writes it short): the build stops with one line, and the channel folder never held a
    file of that name, not even while the check ran. Then a whole build: it appears by one rename."""
    real = output_dir.publish_new
    damaged: list[str] = []

    def damaging(staging: Path, channel_dir: Path, **kwargs: Any) -> list[Path]:
        for package in (staging / "linux-64").glob("toy-py-*.conda"):
            _damage(package, how)
            damaged.append(package.name)
        return real(staging, channel_dir, **kwargs)

    args = build_args("toy-multi", llvm_built, *native_args(empty_channel), "--python", "3.12")
    with monkeypatch.context() as patch:
        patch.setattr(output_dir, "publish_new", damaging)
        assert main(args) == 8
    (name,) = damaged
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"flagtree-feedstock: error: {name}, just built, is damaged ("), line
    assert line.endswith(f"it was not put into {llvm_built / 'linux-64'} (fix: build again (what the channel "
                         f"folder holds is kept); if it happens again, check the disk that holds "
                         f"{llvm_built / 'linux-64'})"), line  # fmt: skip
    events = watch.events()
    assert [event for event in events if event[1] == name] == [], events
    assert any(made.startswith(f".{name}.") for _, made in events), events  # it was checked beside it
    (llvm,) = published(llvm_built)
    assert leftovers(llvm_built) == sorted(
        ["linux-64", f"linux-64/{llvm}", "linux-64/repodata.json", "noarch", "noarch/repodata.json"]
    )  # no .part file, no staging folder

    assert main(args) == 0  # the same build, whole this time
    assert [event for event in watch.events() if event[1] == name] == [("renamed in", name)]
    assert name in published(llvm_built)
