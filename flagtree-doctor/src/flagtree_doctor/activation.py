"""``flagtree-doctor --apply``: the recommended OpenMP environment, written into the active conda environment.

conda sources ``$CONDA_PREFIX/etc/conda/activate.d/*.sh`` (bash, zsh, other POSIX shells) or ``*.fish`` on
``conda activate``, and ``deactivate.d`` on ``conda deactivate``. Ours set each variable only where the user
has not set it (even to an empty value), remember which ones they set, and deactivation unsets exactly those,
so the user's environment comes back as it was. Writing is idempotent (an unchanged file is not rewritten)
and atomic: every file is first written beside its place, then each is renamed into it, so a failure leaves
old or new files, never a half-written one. ``--undo`` removes them. Only files that carry our header are
ever replaced or removed.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError, EnvironmentNotActiveError
from .openmp import SHELLS, Shell, fish_quote

NAME = "flagtree-doctor-openmp"
HEADER = "# Written by flagtree-doctor --apply"
MARKER = "_FLAGTREE_DOCTOR_SET_"  # MARKER + NAME is set while our activation set NAME


@dataclass(frozen=True, kw_only=True)
class Script:
    path: Path
    text: str


def conda_prefix(env: Mapping[str, str]) -> Path:
    """The active conda environment, or an error saying that none is."""
    value = env.get("CONDA_PREFIX", "")
    if not value:
        raise EnvironmentNotActiveError(
            "--apply writes into the active conda environment, and none is active (CONDA_PREFIX is not set)",
            fix="conda activate <env>, then run flagtree-doctor --apply again",
        )
    prefix = Path(value)
    if not (prefix / "conda-meta").is_dir():
        raise EnvironmentNotActiveError(
            f"CONDA_PREFIX={value} is not a conda environment (it has no conda-meta folder)",
            fix="conda activate <env>, then run flagtree-doctor --apply again",
        )
    return prefix


def _activate(values: Mapping[str, str], shell: Shell) -> list[str]:
    lines = []
    for name, value in values.items():
        if shell == "fish":
            lines += [
                f"if not set -q {name}",
                f"    set -gx {name} {fish_quote(value)}",
                f"    set -gx {MARKER}{name} 1",
                "end",
            ]
        else:
            lines += [
                f'if [ -z "${{{name}+x}}" ]; then',
                f"    export {name}={shlex.quote(value)}",
                f"    export {MARKER}{name}=1",
                "fi",
            ]
    return lines


def _deactivate(values: Mapping[str, str], shell: Shell) -> list[str]:
    lines = []
    for name in values:
        if shell == "fish":
            lines += [f"if set -q {MARKER}{name}", f"    set -e {name}", f"    set -e {MARKER}{name}", "end"]
        else:
            lines += [f'if [ -n "${{{MARKER}{name}:-}}" ]; then', f"    unset {name} {MARKER}{name}", "fi"]
    return lines


def scripts(prefix: Path, values: Mapping[str, str], why: str) -> list[Script]:
    """The four scripts (activate/deactivate, sh/fish) that set ``values`` in ``prefix``."""
    found = []
    stages: tuple[tuple[str, Callable[[Mapping[str, str], Shell], list[str]]], ...] = (
        ("activate", _activate),
        ("deactivate", _deactivate),
    )
    for stage, body in stages:
        for shell in SHELLS:
            header = [
                f"{HEADER} ({why}).",
                "# Undo: flagtree-doctor --apply --undo. A variable you set yourself is left as it is.",
            ]
            if shell == "sh":
                header.insert(0, "# shellcheck shell=sh")
            text = "\n".join([*header, *body(values, shell)]) + "\n"
            found.append(Script(path=_path(prefix, stage, shell), text=text))
    return found


def _path(prefix: Path, stage: str, shell: Shell) -> Path:
    return prefix / "etc" / "conda" / f"{stage}.d" / f"{NAME}.{shell}"


def _ours(path: Path) -> bool:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(line.startswith(HEADER) for line in lines[:2])


def _check_replaceable(path: Path) -> None:
    if path.exists() and not _ours(path):
        raise ConfigurationError(
            f"{path} was not written by flagtree-doctor",
            fix="move it away, then run flagtree-doctor --apply again",
        )


def write(wanted: list[Script]) -> list[Path]:
    """Put ``wanted`` in place; return the paths that changed (none when every file was current)."""
    changed = [s for s in wanted if not (s.path.exists() and s.path.read_text(encoding="utf-8") == s.text)]
    for script in changed:
        _check_replaceable(script.path)
    staged: list[tuple[Path, Path]] = []
    try:
        for script in changed:
            script.path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=script.path.parent, prefix=f".{NAME}.", suffix=".tmp")
            staged.append((Path(name), script.path))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(script.text)
        for staged_path, path in staged:
            staged_path.chmod(0o644)
            staged_path.replace(path)
    finally:
        for staged_path, _ in staged:
            staged_path.unlink(missing_ok=True)
    return [s.path for s in changed]


def remove(prefix: Path) -> list[Path]:
    """Remove our four scripts from ``prefix``; return those that were there."""
    found = [_path(prefix, stage, shell) for stage in ("activate", "deactivate") for shell in SHELLS]
    present = [path for path in found if path.exists()]
    for path in present:
        _check_replaceable(path)
    for path in present:
        path.unlink()
    return present
