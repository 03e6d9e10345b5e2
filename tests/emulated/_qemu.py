"""Running aarch64 code under qemu-user for the emulated tier: the sysroot of tests/emulated/setup.sh.

The tests run ``qemu-aarch64-static -L SYSROOT -cpu <model> ...`` explicitly (no binfmt_misc). The sysroot's
python3.11 imports ``flagtree_doctor`` from the repository and rich from this environment (pure Python).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import rich

from _timing import seconds
from _tools import missing, require_executable

REPO = Path(__file__).resolve().parents[2]
SYSROOT = Path(
    os.environ.get("FLAGTREE_AARCH64_SYSROOT")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flagtree-feedstock/aarch64-sysroot"
)
QEMU = shutil.which("qemu-aarch64-static")
PYTHON = SYSROOT / "usr/bin/python3.11"
DOCTOR_SRC = REPO / "flagtree-doctor" / "src"
RICH_SITE = Path(rich.__file__).parents[1]  # rich is pure Python: the host's copy imports under qemu too


def require_emulator() -> None:
    """qemu-user and the aarch64 sysroot, which tests/emulated/setup.sh provides."""
    require_executable("qemu-aarch64-static", "qemu-user-static")
    if not PYTHON.exists():
        missing(f"the aarch64 sysroot {SYSROOT} has no python3.11", "bash tests/emulated/setup.sh")


def require_libgomp() -> None:
    """The sysroot's libgomp, which the stand-in runtimes (built with OpenMP, as the real one is) load."""
    require_emulator()
    if not (SYSROOT / "usr/lib/aarch64-linux-gnu/libgomp.so.1").exists():
        missing(f"the aarch64 sysroot {SYSROOT} has no libgomp.so.1", "bash tests/emulated/setup.sh")


def run_aarch64(
    cpu: str, *argv: str, env: dict[str, str] | None = None, pythonpath: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``argv`` (an aarch64 program and its arguments) on the emulated ``cpu``."""
    assert QEMU is not None
    path = ":".join(str(p) for p in (*pythonpath, DOCTOR_SRC, RICH_SITE))
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": path, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [QEMU, "-L", str(SYSROOT), "-cpu", cpu, *argv],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=seconds(120),
        check=False,
    )
