"""Signals in flagtree-doctor and flagtree-verify: a real SIGINT, SIGTERM or SIGHUP to the real console script,
at chosen moments.

tests/interrupt_hook/sitecustomize.py (on PYTHONPATH) pauses the command inside the chosen operation (an
import, the open of a file, a rename) and says so; the test then sends the signal. Every one must end in one
line (``<prog>: interrupted``, exit 130, for SIGINT; ``<prog>: terminated (SIGTERM)``, 143, and
``(SIGHUP)``, 129), no traceback; an ``--apply`` or ``--undo`` a signal ended leaves the environment as it
was, or with the whole new set of scripts, never part of it, and no temporary file.

Not covered: Python's own start-up (``site``, before any code of the command runs), where an interrupt is
Python's fatal "init_import_site" error, and the first lines of the wrapper pip or conda writes, before it
imports ``flagtree_doctor._entry``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _doctor_machine import as_this_machine
from _timing import FINE_POLL, seconds
from _tools import TORCH_INSTALL, require_module

DATA = Path(__file__).parent / "data" / "doctor"
CIX = DATA / "cix-p1-orion-o6"
# --apply on the CIX P1 tree as this machine (tests/interrupt_hook, which start() puts on PYTHONPATH).
MACHINE = {"FLAGTREE_TEST_MACHINE": str(CIX)}
HOOK = Path(__file__).parent / "interrupt_hook"
BIN = Path(sys.executable).parent
# Seconds an operation pauses at most (while Ctrl-C is held back too): the test's signal lands in the pause,
# which ends as it arrives (tests/interrupt_hook), so this only bounds a signal that never comes.
HELD = seconds(30)


def _script(name: str) -> str:
    script = BIN / name
    assert script.is_file(), f"{name} is not installed next to {sys.executable} (pip install -e .)"
    return str(script)


def start(
    argv: list[str],
    pause: str,
    tmp_path: Path,
    *,
    hold: float = HELD,
    env: dict[str, str] | None = None,
    pythonpath: tuple[Path, ...] = (),
) -> subprocess.Popen[str]:
    """``argv`` paused (for at most ``hold`` seconds) at the first audit event ``pause`` (``EVENT:TEXT``);
    returns once it is there."""
    ready = tmp_path / "ready"
    ready.unlink(missing_ok=True)
    full_env = {
        **os.environ,
        # The hook first; what PYTHONPATH held stays after it (mutations/run.py puts its copy's code there).
        "PYTHONPATH": os.pathsep.join(
            [str(p) for p in (HOOK, *pythonpath)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
        "FLAGTREE_TEST_PAUSE": pause,
        "FLAGTREE_TEST_READY": str(ready),
        "FLAGTREE_TEST_PAUSE_SECONDS": str(hold),
        "NO_COLOR": "1",
        **(env or {}),
    }
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=tmp_path
    )
    deadline = time.monotonic() + seconds(60)
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            out, err = process.communicate()
            pytest.fail(f"{argv} never reached {pause} (exit {process.returncode}):\n{out}{err}")
        time.sleep(FINE_POLL)
    return process


# The line and exit status each signal ends a command with.
ENDINGS = {
    signal.SIGINT: ("interrupted", 130),
    signal.SIGTERM: ("terminated (SIGTERM)", 143),
    signal.SIGHUP: ("terminated (SIGHUP)", 129),
}
SIGNALS = pytest.mark.parametrize("signum", list(ENDINGS), ids=["INT", "TERM", "HUP"])


def interrupt(
    process: subprocess.Popen[str], after: float = 0, signum: int = signal.SIGINT
) -> tuple[int, str, str]:
    time.sleep(after)
    process.send_signal(signum)
    out, err = process.communicate(timeout=seconds(60))
    return process.returncode, out, err


def assert_interrupted(prog: str, outcome: tuple[int, str, str], signum: int = signal.SIGINT) -> None:
    status, out, err = outcome
    word, code = ENDINGS[signal.Signals(signum)]
    assert (status, err) == (code, f"{prog}: {word}\n"), out + err
    assert out == ""


@SIGNALS
@pytest.mark.parametrize(
    ("prog", "argv"),
    [
        ("flagtree-doctor", ["--root", str(CIX)]),
        ("flagtree-verify", []),
    ],
)
def test_an_interrupt_while_the_command_imports(
    prog: str, argv: list[str], tmp_path: Path, signum: int
) -> None:
    process = start([_script(prog), *argv], "import:rich.console", tmp_path)
    assert_interrupted(prog, interrupt(process, signum=signum), signum)


def test_an_interrupt_while_verify_imports_flagtree(tmp_path: Path) -> None:
    """The import of FlagTree (a stand-in ``triton`` here) after the install checks found it (and torch)."""
    require_module("torch", TORCH_INSTALL)
    fake = tmp_path / "site"
    (fake / "triton").mkdir(parents=True)
    # FlagTree's package imports its own modules (runtime, compiler, language, libtriton) as it loads.
    (fake / "triton" / "__init__.py").write_text("from . import compiler\n")
    (fake / "triton" / "compiler.py").write_text("")
    process = start([_script("flagtree-verify")], "import:triton.compiler", tmp_path, pythonpath=(fake,))
    assert_interrupted("flagtree-verify", interrupt(process))


def test_an_interrupt_while_the_doctor_reads_the_machine(tmp_path: Path) -> None:
    process = start([_script("flagtree-doctor"), "--root", str(CIX)], "open:proc/cpuinfo", tmp_path)
    assert_interrupted("flagtree-doctor", interrupt(process))


def conda_env(path: Path) -> Path:
    (path / "conda-meta").mkdir(parents=True)
    return path


def tree(prefix: Path) -> dict[str, str]:
    """Every file and folder under ``prefix``: folders as ``/``, files by their text."""
    return {
        p.relative_to(prefix).as_posix(): "/" if p.is_dir() else p.read_text()
        for p in sorted(prefix.rglob("*"))
    }


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What an uninterrupted ``--apply`` of the CIX P1 tree makes in an environment with nothing in etc/."""
    prefix = conda_env(tmp_path_factory.mktemp("applied") / "env")
    done = subprocess.run(
        [_script("flagtree-doctor"), "--apply"],
        env={**as_this_machine(CIX), "CONDA_PREFIX": str(prefix)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    made = tree(prefix)
    assert len([name for name, text in made.items() if "flagtree-doctor-openmp." in name]) == 4
    return made


@SIGNALS
@pytest.mark.parametrize("moment", ["os.mkdir:", "open:.tmp", "os.rename:"])
def test_an_interrupt_while_apply_writes_lands_the_whole_set(
    moment: str, tmp_path: Path, applied: dict[str, str], signum: int
) -> None:
    """The signal is held back while the scripts are written (folders, temporary files, renames): all four
    land, then the line; no temporary file is left (tree() lists every file, hidden ones too)."""
    prefix = conda_env(tmp_path / "env")
    argv = [_script("flagtree-doctor"), "--apply"]
    process = start(argv, moment, tmp_path, env={"CONDA_PREFIX": str(prefix), **MACHINE})
    assert_interrupted("flagtree-doctor", interrupt(process, signum=signum), signum)
    assert tree(prefix) == applied


@SIGNALS
def test_an_interrupted_undo_removes_all_or_nothing(
    tmp_path: Path, applied: dict[str, str], signum: int
) -> None:
    prefix = conda_env(tmp_path / "env")
    env = {"CONDA_PREFIX": str(prefix), **MACHINE}
    argv = [_script("flagtree-doctor"), "--apply"]
    assert subprocess.run(argv, env=as_this_machine(CIX, {**os.environ, **env}), capture_output=True,
                          check=False).returncode == 0  # fmt: skip
    assert tree(prefix) == applied
    process = start([*argv, "--undo"], "os.remove:", tmp_path, env=env)
    assert_interrupted("flagtree-doctor", interrupt(process, signum=signum), signum)
    assert tree(prefix) == {"conda-meta": "/"}


@pytest.mark.parametrize("after", [0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16])
def test_an_interrupt_at_any_moment_of_apply(after: float, tmp_path: Path, applied: dict[str, str]) -> None:
    """From the moment the command's own code runs: the one line (or a finished run), never a traceback; the
    environment as it was or with the whole set."""
    prefix = conda_env(tmp_path / "env")
    argv = [_script("flagtree-doctor"), "--apply"]
    # argparse is the first module the command's own code imports (importlib.import_module raises no audit
    # event for flagtree_doctor.cli itself).
    process = start(argv, "import:argparse", tmp_path, hold=0, env={"CONDA_PREFIX": str(prefix), **MACHINE})
    status, out, err = interrupt(process, after)
    if status == 130:
        # The one line; stdout may already list scripts written before the SIGINT landed (while it says so).
        assert err == "flagtree-doctor: interrupted\n", out + err
        assert all(line.startswith(f"wrote {prefix}/etc/conda/") for line in out.splitlines()), out
        if out:
            assert tree(prefix) == applied
    else:
        assert (status, err) == (0, ""), out + err
        assert out.splitlines()[-1].endswith("takes effect at the next `conda activate`")
    assert tree(prefix) in ({"conda-meta": "/"}, applied)
