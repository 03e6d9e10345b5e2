"""A console script run as a child, with its own peak memory and its time measured: the one peak-memory helper
of the tests (issue 28's bounds).

The peak is the child's own ``VmHWM`` (``/proc/self/status``), read by the child itself as it exits:
``tests/interrupt_hook/sitecustomize.py``, put first on its ``PYTHONPATH``, writes it to the file
``FLAGTREE_TEST_PEAK`` names (the same hook pauses a command for a signal or reads a recorded machine, so those
can be given through ``env`` too). ``VmHWM`` starts afresh at ``exec``, so nothing of pytest's own size leaks in
(``ru_maxrss`` would: Linux carries it over from the parent at fork).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _timing import seconds

# What a command may cost on any input, bomb or not (issue 28's "Done when").
MEMORY_LIMIT_KIB = 600 << 10
TIME_LIMIT_S = seconds(60)

ROOT = Path(__file__).resolve().parents[1]
HOOK = Path(__file__).resolve().parent / "interrupt_hook"


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    peak_kib: int
    seconds: float

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "error:" in line]


def console_script(name: str) -> str:
    """The console script ``name`` of the environment running the tests."""
    path = Path(sys.executable).with_name(name)
    assert path.is_file(), f"{path}: install the package (pip install -e .)"
    return str(path)


def run_measured(
    argv: list[str],
    scratch: Path,
    env: dict[str, str] | None = None,
    *,
    whole_env: bool = False,
    address_space: int | None = None,
) -> Measured:
    """Run ``argv`` (``argv[0]`` a console script name) as a child in the repository (its ``recipe/``
    found), its scratch files in ``scratch``, ``env`` added to the environment (``whole_env``: ``env`` is the
    whole environment); what it did and cost. ``address_space``: the child's RLIMIT_AS, so that a read without
    a bound ends in its MemoryError, not in the machine's memory."""
    scratch.mkdir(parents=True, exist_ok=True)
    peak_file = scratch / "peak-kib"
    peak_file.unlink(missing_ok=True)
    base = dict(env or {}) if whole_env else {**os.environ, **(env or {})}
    child_env = {
        **base,
        # The hook first; the rest of PYTHONPATH kept (the mutation runner's copy comes first on it).
        "PYTHONPATH": os.pathsep.join(p for p in (str(HOOK), base.get("PYTHONPATH", "")) if p),
        "FLAGTREE_TEST_PEAK": str(peak_file),
        "XDG_CACHE_HOME": str(scratch / "cache"),
        "NO_COLOR": "1",
    }
    start = time.monotonic()
    done = subprocess.run(
        [console_script(argv[0]), *argv[1:]],
        env=child_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=seconds(120),  # twice the limit: a command that hangs is stopped, and fails its bound
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=None
        if address_space is None
        else lambda: resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space)),
    )
    took = time.monotonic() - start
    peak = int(peak_file.read_text()) if peak_file.is_file() else -1
    return Measured(done.returncode, done.stdout, done.stderr, peak, took)
