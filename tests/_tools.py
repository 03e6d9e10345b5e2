"""The machine's tools a test tier needs: skipped with the Debian package to install in a user's clone,
an error under ``CI=true``, where `.ci/run` installs every one of them and a skip would hide a missing step.

A tool counts as present only when it does its job here (a cross compiler that compiles *and links*, an
``unshare -n`` the kernel permits), never on ``shutil.which`` alone.

The upstream checkouts the source-backed tests read (``FLAGTREE_SRC``, ...) are skipped without them, and fail
under ``FLAGTREE_REQUIRE_SOURCES=1``, which the workflow's tests job sets after cloning them
(`.ci/sources.py`). `.ci/run` elsewhere cannot fetch them: its last lines name the skipped ones
(`.ci/skipped.py` reads each skip reason's ``<VARIABLE>_SRC is not set``).
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
import yaml

from _timing import seconds

_TRUE = {"1", "true", "yes"}
CI = os.environ.get("CI", "").strip().lower() in _TRUE

# The upstream checkout each variable names, and its pin in recipe/conda_build_config.yaml.
SOURCES = {
    "FLAGTREE_SRC": ("FlagTree", "flagtree_commit"),
    "FLAGTREE_CPU_SRC": ("flagtree-cpu", "flagtree_cpu_commit"),
    "SLEEF_SRC": ("sleef", "sleef_commit"),
}
_PINS = Path(__file__).resolve().parents[1] / "recipe" / "conda_build_config.yaml"

AARCH64_GCC = "aarch64-linux-gnu-gcc"
# gcc-aarch64-linux-gnu only Recommends the target's libc headers and start files: both packages are needed.
AARCH64_GCC_PACKAGES = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross"


def missing(what: str, install: str) -> NoReturn:
    """Skip (a user's clone) or fail (``CI=true``) because ``what`` is missing; ``install`` says how to get it."""
    message = f"{what} (install: {install})"
    if CI:
        pytest.fail(f"CI=true, and {message}: .ci/run must provide it", pytrace=False)
    pytest.skip(message)


# torch: the verify references and the commands that import it (.ci/run installs the CPU wheel of 2.13.0).
TORCH_INSTALL = "conda install pytorch-cpu, or pip install torch"


def require_module(name: str, install: str) -> None:
    """At the top of a test module, or of a test: skip it (a user's clone) or fail (``CI=true``) where
    ``name`` is missing."""
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
        done = subprocess.run([*argv, "true"], capture_output=True, check=False, timeout=seconds(30))
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


@cache
def _mount_namespace() -> tuple[str, ...] | None:
    for argv in (("unshare", "-m"), ("unshare", "-rm")):
        probe = [*argv, "sh", "-c", "mount --bind /dev/null /dev/null"]
        if subprocess.run(probe, capture_output=True, check=False, timeout=seconds(30)).returncode == 0:
            return argv
    return None


def with_file_mounted_on_itself(path: Path, argv: list[str]) -> list[str]:
    """``argv`` run in a mount namespace of its own where ``path`` is bind-mounted on itself: the file reads as
    before, but renaming another file over it fails with EBUSY, as over a file a container bind-mounts (the
    namespace ends with the command; nothing outside sees the mount). A skip/failure where that is not
    permitted."""
    require_executable("unshare", "util-linux")
    prefix = _mount_namespace()
    if prefix is None:
        missing(
            "unshare -m is not permitted here (needs root or unprivileged user namespaces)",
            "run as root, or allow user namespaces (sysctl kernel.unprivileged_userns_clone=1)",
        )
    return [*prefix, "sh", "-euc", 'mount --bind "$1" "$1"; shift; exec "$@"', "sh", str(path), *argv]


def sources_required() -> bool:
    """Whether ``FLAGTREE_REQUIRE_SOURCES`` says a source-backed check may not skip (1, true or yes)."""
    return os.environ.get("FLAGTREE_REQUIRE_SOURCES", "").strip().lower() in _TRUE


def upstream_source(variable: str) -> Path:
    """The checkout ``variable`` (a key of SOURCES) names: a skip where it is unset, a failure where
    ``FLAGTREE_REQUIRE_SOURCES=1`` (the workflow, which clones them) or where it names no folder."""
    what, pin_key = SOURCES[variable]
    value = os.environ.get(variable, "")
    if not value:
        (pin,) = yaml.safe_load(_PINS.read_text())[pin_key]
        reason = f"{variable} is not set (a checkout of {what} at {pin_key} {pin})"
        if sources_required():
            pytest.fail(
                f"FLAGTREE_REQUIRE_SOURCES=1, and {reason}: the workflow's tests job must clone it "
                "(.ci/sources.py)",
                pytrace=False,
            )
        pytest.skip(reason)
    path = Path(value)
    if not path.is_dir():
        pytest.fail(f"{variable}={value} is not a folder (point it at a checkout of {what})", pytrace=False)
    return path


def as_a_user(argv: list[str]) -> list[str]:
    """``argv`` run without root's right to write anywhere: as root, as `nobody` in a user namespace (files
    owned by root are then its own, and their mode bits hold); as any other user, as it is."""
    if os.geteuid() != 0:
        return argv
    unshare = require_executable("unshare", "util-linux")
    user = [unshare, "--user", "--map-user=65534", "--map-group=65534"]
    if subprocess.run([*user, "true"], capture_output=True, check=False).returncode != 0:
        missing(
            "unshare --user is not permitted here", "run as a user other than root, or allow user namespaces"
        )
    return [*user, *argv]
