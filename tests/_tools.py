"""The machine's tools a test tier needs: skipped with the Debian package to install in a user's clone,
an error under ``CI=true``, where `.ci/run` installs every one of them and a skip would hide a missing step.

A tool counts as present only when it does its job here (a cross compiler that compiles *and links*, an
``unshare -n`` the kernel permits), never on ``shutil.which`` alone.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}

AARCH64_GCC = "aarch64-linux-gnu-gcc"
# gcc-aarch64-linux-gnu only Recommends the target's libc headers and start files: both packages are needed.
AARCH64_GCC_PACKAGES = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"


def missing(what: str, install: str) -> NoReturn:
    """Skip (a user's clone) or fail (``CI=true``) because ``what`` is missing; ``install`` says how to get it."""
    message = f"{what} (install: {install})"
    if CI:
        pytest.fail(f"CI=true, and {message}: .ci/run must provide it", pytrace=False)
    pytest.skip(message)


def require_module(name: str, install: str) -> None:
    """At the top of a test module: skip it (a user's clone) or fail (``CI=true``) where ``name`` is missing."""
    if importlib.util.find_spec(name) is None:
        message = f"{name} is not installed (install: {install})"
        if CI:
            pytest.fail(f"CI=true, and {message}: .ci/run must provide it", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def require_executable(name: str, package: str) -> str:
    """The path of ``name``, or a skip/failure naming the Debian ``package`` that provides it."""
    found = shutil.which(name)
    if found is None:
        missing(f"{name} is not installed", f"apt-get install {package}")
    return found


@cache
def _cross_link_error(compiler: str) -> str | None:
    """Why ``compiler`` cannot build and link a C program that uses libc and libm, or None when it can."""
    with tempfile.TemporaryDirectory(prefix="flagtree-cc-") as scratch:
        source = Path(scratch) / "probe.c"
        source.write_text(
            '#include <math.h>\n#include <stdio.h>\nint main(void) { return printf("%f", exp(1.0)) < 0; }\n'
        )
        done = subprocess.run(
            [compiler, str(source), "-lm", "-o", str(source.with_suffix(""))],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode == 0:
        return None
    lines = (
        [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines() or ["?"]
    )
    return lines[0].strip()


def aarch64_gcc() -> str:
    """Debian's aarch64 cross compiler, checked to compile and link, or a skip/failure naming its packages."""
    compiler = require_executable(AARCH64_GCC, AARCH64_GCC_PACKAGES)
    error = _cross_link_error(compiler)
    if error is not None:
        missing(
            f"{AARCH64_GCC} cannot compile and link a program ({error})",
            f"apt-get install {AARCH64_GCC_PACKAGES}",
        )
    return compiler


@cache
def _network_namespace() -> tuple[str, ...] | None:
    for argv in (("unshare", "-n"), ("unshare", "-rn")):
        done = subprocess.run([*argv, "true"], capture_output=True, check=False, timeout=30)
        if done.returncode == 0:
            return argv
    return None


def network_jail() -> list[str]:
    """An ``unshare`` prefix that runs a command without network, or a skip/failure saying what is missing."""
    require_executable("unshare", "util-linux")
    argv = _network_namespace()
    if argv is None:
        missing(
            "unshare -n is not permitted here (needs root or unprivileged user namespaces; a container needs "
            "--privileged)",
            "run as root, or start the container with --privileged",
        )
    return list(argv)
