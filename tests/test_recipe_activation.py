"""The activation scripts in real shells: set what the JIT needs, then give the user's environment back exactly.

Each of FLAGTREE_BACKEND, TRITON_SYS_PATH and CC starts set (to a value with spaces), empty, or unset; the
environment after `deactivate` must equal the one before `activate`, byte for byte (`env -0`).
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from _recipe_support import RECIPE_DIR
from _tools import require_executable

VARIABLES = ("FLAGTREE_BACKEND", "TRITON_SYS_PATH", "CC")
STATES = ("set", "empty", "unset")
USER_VALUE = "user's value with spaces"

# How each shell sources a script; conda runs the .sh scripts in bash and zsh, the .fish ones in fish.
SHELLS = {
    "bash": (["bash", "--noprofile", "--norc", "-c"], "sh", "."),
    "zsh": (["zsh", "-f", "-c"], "sh", "."),
    "fish": (["fish", "--no-config", "-c"], "fish", "source"),
}


def _run(shell: str, prefix: Path, out: Path, start: dict[str, str]) -> dict[str, dict[str, str]]:
    argv, ext, source = SHELLS[shell]
    require_executable(argv[0], shell)
    activate = RECIPE_DIR / f"activate.{ext}"
    deactivate = RECIPE_DIR / f"deactivate.{ext}"
    script = "; ".join(
        [
            f"env -0 > '{out}/before'",
            f"{source} '{activate}'",
            f"env -0 > '{out}/during'",
            f"{source} '{deactivate}'",
            f"env -0 > '{out}/after'",
            # Not the last command: zsh would exec it in place and report another SHLVL.
            "true",
        ]
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "CONDA_PREFIX": str(prefix), **start}
    subprocess.run([*argv, script], env=env, check=True, timeout=60, cwd=out)
    return {stage: _parse((out / stage).read_bytes()) for stage in ("before", "during", "after")}


def _parse(raw: bytes) -> dict[str, str]:
    entries = [item.decode() for item in raw.split(b"\0") if item]
    return dict(entry.split("=", 1) for entry in entries)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A conda environment with a gcc in bin/, as the package's run dependencies install it."""
    gcc = tmp_path / "env with space" / "bin" / "gcc"
    gcc.parent.mkdir(parents=True)
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    return gcc.parents[1]


@pytest.mark.parametrize("shell", list(SHELLS))
@pytest.mark.parametrize("states", list(itertools.product(STATES, repeat=len(VARIABLES))), ids="-".join)
def test_round_trip(shell, states, prefix, tmp_path):
    start = {}
    for name, state in zip(VARIABLES, states, strict=True):
        if state != "unset":
            start[name] = USER_VALUE if state == "set" else ""
    out = tmp_path / "out"
    out.mkdir()
    env = _run(shell, prefix, out, start)

    assert env["after"] == env["before"]
    during = env["during"]
    assert during["FLAGTREE_BACKEND"] == "cpu"
    assert during["TRITON_SYS_PATH"] == str(prefix)
    expected_cc = USER_VALUE if start.get("CC") else str(prefix / "bin" / "gcc")
    assert during["CC"] == expected_cc
    # Nothing of ours is left behind.
    assert not [name for name in env["after"] if name.startswith("_FLAGTREE_CPU")]


@pytest.mark.parametrize("shell", list(SHELLS))
def test_cc_is_left_alone_without_a_gcc_in_the_environment(shell, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = _run(shell, tmp_path / "no-compiler", out, {})
    assert "CC" not in env["during"]
    assert env["after"] == env["before"]


@pytest.mark.parametrize("shell", list(SHELLS))
def test_activating_twice_still_restores(shell, prefix, tmp_path):
    """conda may source activate.d again (e.g. `conda activate` of the active env): the first save wins."""
    argv, ext, source = SHELLS[shell]
    require_executable(argv[0], shell)
    out = tmp_path / "out"
    out.mkdir()
    activate = RECIPE_DIR / f"activate.{ext}"
    deactivate = RECIPE_DIR / f"deactivate.{ext}"
    script = (
        f"env -0 > '{out}/before'; {source} '{activate}'; {source} '{activate}'; "
        f"{source} '{deactivate}'; env -0 > '{out}/after'; true"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "CONDA_PREFIX": str(prefix), "CC": ""}
    subprocess.run([*argv, script], env=env, check=True, timeout=60, cwd=out)
    assert _parse((out / "after").read_bytes()) == _parse((out / "before").read_bytes())
