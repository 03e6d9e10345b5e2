"""The activation scripts in real shells: set what the JIT needs, then give the user's environment back exactly.

Each of FLAGTREE_BACKEND, TRITON_SYS_PATH and CC starts set (to a value with spaces), empty, or unset; the
environment after `deactivate` must equal the one before `activate`, byte for byte (`env -0`). What each
variable is while active, and whether a value the user set is kept, is read from docs/using.md's table: the
scripts must do what the docs tell users.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from _recipe_support import RECIPE_DIR
from _timing import seconds
from _tools import require_executable

USING = Path(__file__).resolve().parents[1] / "docs" / "using.md"
VARIABLES = ("FLAGTREE_BACKEND", "TRITON_SYS_PATH", "CC")
STATES = ("set", "empty", "unset")
USER_VALUE = "user's value with spaces"

# How each shell sources a script; conda runs the .sh scripts in bash and zsh, the .fish ones in fish.
SHELLS = {
    "bash": (["bash", "--noprofile", "--norc", "-c"], "sh", "."),
    "zsh": (["zsh", "-f", "-c"], "sh", "."),
    "fish": (["fish", "--no-config", "-c"], "fish", "source"),
}

# fish 3.6 re-encodes every non-ASCII value it exports (the prefix's Chinese characters) unless the locale is
# UTF-8, as a terminal's is; conda's own activation would garble CONDA_PREFIX first. bash and zsh run in C.
_LOCALE = {"bash": {}, "zsh": {}, "fish": {"LANG": "C.UTF-8"}}


def readme_rules() -> dict[str, tuple[str, bool]]:
    """docs/using.md's activation table: variable -> (the value it is set to, whether a user's value is kept)."""
    readme = USING.read_text()
    header = "| variable | set to | a value you set before activating is |"
    assert header in readme, "docs/using.md: the activation table is missing"
    rules = {}
    for line in readme.split(header, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, value, user = (cell.strip() for cell in line.strip("|").split("|"))
        kept = user.startswith("kept")
        assert kept or user.startswith("replaced"), line
        rules[name.strip("`")] = (value.split("`")[1], kept)
    return rules


def _expected(value: str, prefix: Path) -> str:
    return value.replace("$CONDA_PREFIX", str(prefix))


def test_the_readme_table_covers_every_variable_the_scripts_set() -> None:
    scripts = "".join((RECIPE_DIR / f"activate.{ext}").read_text() for ext in ("sh", "fish"))
    exported = set(re.findall(r"(?:export |set -gx )([A-Z][A-Z_]+)", scripts))
    assert set(readme_rules()) == {name for name in exported if not name.startswith("_FLAGTREE_CPU")}
    assert set(readme_rules()) == set(VARIABLES)


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
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "CONDA_PREFIX": str(prefix), **start, **_LOCALE[shell]}
    subprocess.run([*argv, script], env=env, check=True, timeout=seconds(60), cwd=out)
    return {stage: _parse((out / stage).read_bytes()) for stage in ("before", "during", "after")}


def _parse(raw: bytes) -> dict[str, str]:
    entries = [item.decode() for item in raw.split(b"\0") if item]
    return dict(entry.split("=", 1) for entry in entries)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A conda environment with a gcc in bin/, as the package's run dependencies install it; a space and Chinese
    characters in its path."""
    gcc = tmp_path / "env with space 环境" / "bin" / "gcc"
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
    for name, (value, kept) in readme_rules().items():
        # A user's empty value counts as unset where docs/using.md says so; a replaced one never survives.
        users = start.get(name)
        expected = users if kept and users else _expected(value, prefix)
        assert env["during"][name] == expected, name
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
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "CONDA_PREFIX": str(prefix), "CC": "", **_LOCALE[shell]}
    subprocess.run([*argv, script], env=env, check=True, timeout=seconds(60), cwd=out)
    assert _parse((out / "after").read_bytes()) == _parse((out / "before").read_bytes())
