"""``flagtree-doctor --apply``: the recommended OpenMP environment, written into the active conda environment.

conda sources ``$CONDA_PREFIX/etc/conda/activate.d/*.sh`` (bash, zsh, other POSIX shells) or ``*.fish`` on
``conda activate``, and ``deactivate.d`` on ``conda deactivate``. Ours set each variable only where the user
has not set it (even to an empty value), remember which ones they set, and deactivation unsets exactly those,
so the user's environment comes back as it was. Writing is idempotent (an unchanged file is not rewritten)
and atomic: every file is first written beside its place, then each is renamed into it, with SIGINT, SIGTERM
and SIGHUP held back until the whole set is in place, so a signal leaves the old set or the new one and a
failure never a half-written file; what a failed write created (temporary files, folders) is removed.
``--undo`` removes the scripts, and the folders ``--apply`` made for them (each holds a marker file saying
so) once they are empty. Only files that carry our header are ever replaced or removed. A folder that cannot be written (a
read-only or another user's environment) is one error naming it.

Only regular files inside the environment are read, written or removed: ``etc``, ``etc/conda`` and the two
``.d`` folders must be folders of their own (a link there, to a folder outside the environment, is refused,
as is a file), and a script's place must hold nothing or a regular file (a link, a FIFO, a device is refused
before anything is read or written). A script is read without following a link, without waiting, and only up
to :data:`MAX_SCRIPT` bytes (ours are a few hundred): a longer file is not ours.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .bounded import RefusedFile, read_bounded
from .errors import ConfigurationError, EnvironmentNotActiveError, EnvironmentWriteError
from .interrupts import deferred_interrupts
from .openmp import SHELLS, Shell, fish_quote

NAME = "flagtree-doctor-openmp"
HEADER = "# Written by flagtree-doctor --apply"
MARKER = "_FLAGTREE_DOCTOR_SET_"  # MARKER + NAME is set while our activation set NAME
# In each folder --apply had to make (activate.d, deactivate.d, and etc/conda or etc when missing), so that
# --undo removes exactly those once they are empty again. conda sources only *.sh / *.fish files.
MADE_MARKER = ".flagtree-doctor-made-this-folder"
# The longest file read where one of our scripts goes: ours are a few hundred bytes.
MAX_SCRIPT = 64 * 1024
# A folder we may not write: another user's or a read-only environment.
_NOT_OURS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


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


def _read_script(path: Path) -> str | None:
    """The text at a script's place, or None when nothing is there; refused when it is no regular file (a
    link, a FIFO, a device) or longer than any script of ours."""
    try:
        return read_bounded(path, MAX_SCRIPT, follow_symlinks=False).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except RefusedFile as exc:
        raise ConfigurationError(
            f"{exc}: flagtree-doctor --apply reads and writes only regular files inside the environment",
            fix="move it away, then run flagtree-doctor --apply again",
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read {path} ({exc.strerror or exc})",
            fix="move it away, then run flagtree-doctor --apply again",
        ) from None


def _check_replaceable(path: Path) -> None:
    text = _read_script(path)
    if text is not None and not any(line.startswith(HEADER) for line in text.splitlines()[:2]):
        raise ConfigurationError(
            f"{path} was not written by flagtree-doctor",
            fix="move it away, then run flagtree-doctor --apply again",
        )


def _check_folders(prefix: Path) -> None:
    """``etc``, ``etc/conda`` and its two ``.d`` folders of ``prefix``: each missing, or a folder of its own
    (not a link to a folder elsewhere, not a file)."""
    conda = prefix / "etc" / "conda"
    for folder in (conda.parent, conda, conda / "activate.d", conda / "deactivate.d"):
        try:
            mode = folder.lstat().st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise ConfigurationError(
                f"{folder} is a symbolic link (to {folder.readlink()}): flagtree-doctor --apply writes only "
                "regular files inside the environment, never through a link",
                fix=f"make {folder} a folder of its own (or remove the link), then run flagtree-doctor --apply again",
            )
        if not stat.S_ISDIR(mode):
            raise ConfigurationError(
                f"{folder} is not a folder: flagtree-doctor --apply writes only regular files inside the environment",
                fix="move it away, then run flagtree-doctor --apply again",
            )


@contextmanager
def _writing(folder: Path, what: str, command: str = "flagtree-doctor --apply") -> Iterator[None]:
    """Turn an OSError while ``what``-ing in ``folder`` into one error line that names the folder."""
    try:
        yield
    except EnvironmentWriteError:
        raise
    except OSError as exc:
        if exc.errno in _NOT_OURS:
            fix = (
                f"run {command} as the environment's owner, or in an environment you can write to "
                "(flagtree-doctor --env prints the settings to export yourself)"
            )
        else:
            fix = f"resolve that, then run {command} again"
        raise EnvironmentWriteError(f"cannot {what} {folder} ({exc.strerror or exc})", fix=fix) from None


def _make_folder(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents up to the environment's ``etc``; return those made, deepest last."""
    missing = [p for p in (folder.parent.parent, folder.parent, folder) if not p.exists()]
    made: list[Path] = []
    try:
        for path in missing:
            path.mkdir()
            made.append(path)
            (path / MADE_MARKER).write_text("flagtree-doctor --apply made this folder; --undo removes it.\n")
    except BaseException:
        _remove_made(made)
        raise
    return made


def _remove_made(folders: list[Path]) -> None:
    """Remove each folder of ``folders`` that we made and that holds nothing else now, deepest first."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if {p.name for p in folder.iterdir()} == {MADE_MARKER}:
            (folder / MADE_MARKER).unlink()
            folder.rmdir()


def write(wanted: list[Script]) -> list[Path]:
    """Put ``wanted`` in place; return the paths that changed (none when every file was current).

    A few small files: SIGINT, SIGTERM and SIGHUP are held back until the whole set is in place (or, after
    an error, cleaned up).
    """
    for prefix in {script.path.parents[3] for script in wanted}:
        _check_folders(prefix)
    changed = [s for s in wanted if _read_script(s.path) != s.text]
    for script in changed:
        _check_replaceable(script.path)
    staged: list[tuple[Path, Path]] = []
    made: list[Path] = []
    committed = False
    with deferred_interrupts():
        try:
            for script in changed:
                folder = script.path.parent
                with _writing(folder, "write into"):
                    made += _make_folder(folder)
                    fd, name = tempfile.mkstemp(dir=folder, prefix=f".{NAME}.", suffix=".tmp")
                    staged.append((Path(name), script.path))
                    with os.fdopen(fd, "w", encoding="utf-8") as handle:
                        handle.write(script.text)
                    Path(name).chmod(0o644)
            for staged_path, path in staged:
                with _writing(path.parent, "write into"):
                    staged_path.replace(path)
            committed = True
        finally:
            for staged_path, _ in staged:
                staged_path.unlink(missing_ok=True)
            if not committed:
                _remove_made(made)
    return [s.path for s in changed]


def remove(prefix: Path) -> list[Path]:
    """Remove our four scripts from ``prefix``, and the folders --apply made for them once they are empty;
    return the scripts that were there."""
    found = [_path(prefix, stage, shell) for stage in ("activate", "deactivate") for shell in SHELLS]
    _check_folders(prefix)
    present = [path for path in found if os.path.lexists(path)]
    for path in present:
        _check_replaceable(path)
    conda = prefix / "etc" / "conda"
    folders = (conda / "activate.d", conda / "deactivate.d", conda, conda.parent)  # deepest first
    made = [folder for folder in folders if (folder / MADE_MARKER).exists()]
    with deferred_interrupts():
        for path in present:
            with _writing(path.parent, f"remove {path.name} from", "flagtree-doctor --apply --undo"):
                path.unlink()
        for folder in made:
            with _writing(folder.parent, f"remove {folder.name} from", "flagtree-doctor --apply --undo"):
                _remove_made([folder])
    return present
