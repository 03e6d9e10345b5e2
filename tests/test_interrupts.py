"""Ctrl-C in flagtree-feedstock: a real SIGINT to a real process, at the moments a user meets.

Whatever the moment, the command ends with one line, ``flagtree-feedstock: interrupted``, exit status 130
and no traceback; during a build, the engine's processes (the build script and its children) are ended, the
packages finished before are kept and indexed, and nothing else is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _toy import RECIPES, build_args, leftovers, native_args, published
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock.build import output_dir

VENV_BIN = Path(sys.executable).parent
# pip's generated wrapper: it imports flagtree_feedstock._entry before the guard there can run.
CONSOLE_SCRIPT = VENV_BIN / "flagtree-feedstock"

# A sitecustomize that stops the process inside one import (named by TOY_PAUSE_AT), after touching
# TOY_PAUSE_MARKER: the interrupt then lands while that module loads.
PAUSE_AT_IMPORT = """\
import importlib.abc
import os
import sys
import time


class _Pause(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["TOY_PAUSE_AT"]:
            sys.meta_path.remove(self)
            open(os.environ["TOY_PAUSE_MARKER"], "w").close()
            time.sleep(60)
        return None


sys.meta_path.insert(0, _Pause())
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the command ended (status {process.returncode}) first:\n{process.communicate()[1]}")
        if time.monotonic() > deadline:
            process.send_signal(signal.SIGINT)  # ends its engine's processes too
            process.communicate(timeout=60)
            pytest.fail(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def _interrupted(process: subprocess.Popen[str], *, group: bool) -> str:
    """Send SIGINT (to the process, or to its whole process group as a terminal's Ctrl-C does); its stderr."""
    if group:
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "flagtree-feedstock: interrupted", stderr
    assert "Traceback" not in stderr
    assert "flagtree-feedstock: error" not in stderr
    return stderr


@pytest.mark.parametrize("group", [False, True], ids=["kill-INT-pid", "ctrl-c-at-a-terminal"])
def test_ctrl_c_during_a_build_script(tmp_path: Path, empty_channel: Path, group: bool) -> None:
    marker = tmp_path / "marker"
    log = tmp_path / "builds.log"
    out = tmp_path / "channel"
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), *build_args("toy-slow", out, *native_args(empty_channel))],
        env={**os.environ, "TOY_MARKER": str(marker), "TOY_BUILD_LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, which a terminal's Ctrl-C signals whole
    )
    _wait_for(marker, process)
    shell, child = (int(pid) for pid in marker.read_text().split())
    stderr = _interrupted(process, group=group)
    assert "Script failed" not in stderr
    assert not _alive(shell), "the build script still runs"
    assert not _alive(child), "a process the build script started still runs"
    assert log.read_text().splitlines() == ["toy-quick", "toy-slow"]
    # toy-quick, finished before the interrupt, is kept and indexed; nothing of toy-slow, no staging folder.
    (quick,) = published(out)
    assert quick.startswith("toy-quick-1.0-")
    assert sorted(leftovers(out)) == sorted(
        ["linux-64", "noarch", f"linux-64/{quick}", "linux-64/repodata.json", "noarch/repodata.json"]
    )


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("console-script", "rich.console"),  # while the wrapper's import of the CLI loads
        ("python -m", "rich.console"),
        ("build --render-only", "flagtree_feedstock.recipe.render"),
        ("channel index", "rattler.index"),
        ("channel install", "rattler"),
        ("upload", "flagtree_feedstock.channel.upload"),
    ],
)
def test_ctrl_c_while_a_command_loads(tmp_path: Path, command: str, module: str) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(PAUSE_AT_IMPORT)
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
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")])
            ),
            "TOY_PAUSE_AT": module,
            "TOY_PAUSE_MARKER": str(marker),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(marker, process)
    _interrupted(process, group=False)
    # Nothing written; `channel index` took the folder's lock (a lock file beside it, kept by design).
    lock = [".channel.lock"] if command == "channel index" else []
    assert sorted(p.name for p in tmp_path.iterdir()) == [*lock, "channel", "paused", "site"]
    assert sorted(p.name for p in channel.rglob("*")) == ["noarch"]


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
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, after the packages were renamed into place
        time.sleep(0.1)
        return real_index(channel, check=check)

    monkeypatch.setattr(output_dir, "index_channel", interrupted_index)
    out = tmp_path / "channel"
    with pytest.raises(KeyboardInterrupt):
        output_dir.publish_new(staging, out, known=set(), subdirs=("linux-64", "noarch"))
    assert len(published(out)) == 2  # both packages, and an index that lists them


def test_deferred_interrupts_hold_a_sigint_until_the_block_ends() -> None:
    finished = []
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # the handler has run by now: it only noted the signal
        finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_the_console_script_is_the_guarded_entry() -> None:
    """pyproject's console script names the module whose entrypoint guards the imports."""
    assert "from flagtree_feedstock._entry import entrypoint" in CONSOLE_SCRIPT.read_text()
    assert (RECIPES / "toy-slow" / "recipe.yaml").is_file()
