"""The feedstock's pins in ``recipe/conda_build_config.yaml``: read them, change values in place, write atomically.

A change rewrites only the quoted value on the line under its key (``key:`` then ``  - "value"``), so every
comment, the order, the quoting, the line endings (LF or CRLF) and a UTF-8 byte order mark stay as they are;
the result is read back and must differ from the old file in exactly the keys changed.

Several files are written all or nothing (:func:`write_atomically`): each is staged beside its target first
(mkstemp); only when every one is staged are they moved into place (os.replace), each target's old file kept
under a hard link beside it until all have moved. A failure while staging leaves every target as it was; a
failure while moving, or an interrupt, puts back the ones already moved: a signal (SIGINT, SIGTERM, SIGHUP)
is held while each staged file is created, while they move and while they are put back, so it never cuts a
file from its bookkeeping (tests/test_bump_interrupts.py sends one at every moment). Once the last has moved,
the write is done: a signal while the old files are removed ends the command with every file new. What could
not be written (and, should putting back fail too, what holds the new text) is a :class:`FilesNotWritten`,
exit status 10.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._own_files import RECIPE, NotThere, read_own_text, repository_of
from flagtree_feedstock.errors import ConfigurationError, FileAccessError, file_access_error

from .variants import parse_variant_text, read_variant_text

# The feedstock's pins that a FlagTree bump moves, in the order the variant file lists them.
BUMPED_KEYS = (
    "flagtree_version",
    "flagtree_commit",
    "llvm_commit",
    "llvm_sha256",
    "flagtree_cpu_commit",
    "sleef_commit",
)
_BOM = "\ufeff"


def read_pins(path: Path) -> tuple[dict[str, str], str]:
    """The one value of each of :data:`BUMPED_KEYS` in the variant file ``path`` (the recipe folder's), and the
    file's text as it was read once (:func:`change_pins` rewrites that text, not the file read again)."""
    try:
        text = read_variant_text(path, recipe_dir=path.parent)
        entries = parse_variant_text(path, text)
    except NotThere:
        raise ConfigurationError(
            f"variant file {path} does not exist", fix="pass --recipe-dir DIR, the folder holding recipe.yaml"
        ) from None
    pins = {}
    for key in BUMPED_KEYS:
        entry = entries.get(key)
        shape = f'write it as `{key}:` and one line `  - "<value>"`'
        if entry is None:
            raise ConfigurationError(f"{path}: {key} is not set: the bump cannot move it", fix=shape)
        value = entry.values[0][0] if entry.is_list and len(entry.values) == 1 else None
        if value is None:
            shown = ", ".join(entry.shown) or "an empty list"
            raise ConfigurationError(
                f"{path}:{entry.line}: {key} must be a list of one value to be bumped, not {shown}", fix=shape
            )
        pins[key] = str(value)
    return pins, text


def read_recipe(path: Path) -> str:
    """The text of the recipe ``path`` (``recipe.yaml`` or ``meta.yaml``), as it is on disk: line endings
    untranslated, a byte order mark kept; read by the one reader, which refuses a file that is no regular file,
    leads out of the repository or is larger than a recipe's bound."""
    return read_own_text(path, RECIPE, inside=repository_of(path.parent))


def change_pins(text: str, changes: Mapping[str, str], *, name: str) -> str:
    """``text`` (a variant file called ``name``) with the values of ``changes`` replaced, nothing else."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    bom = _BOM if text.startswith(_BOM) else ""
    new = text.removeprefix(bom)
    for key, value in changes.items():
        pattern = re.compile(
            rf'^(?P<head>{re.escape(key)}:[ \t]*\r?\n[ \t]*-[ \t]*)"[^"\r\n]*"', re.MULTILINE
        )
        if len(pattern.findall(new)) != 1:
            lines = [n for n, line in enumerate(new.splitlines(), 1) if line.startswith(f"{key}:")]
            where = f"{name}:{lines[0]}" if lines else name
            raise ConfigurationError(
                f'{where}: {key} is not one `{key}:` line followed by one `  - "<value>"` line',
                fix=f"write {key} in that shape, as the other pins are",
            )
        new = pattern.sub(lambda match: f'{match["head"]}"{value}"', new)  # noqa: B023 - used at once
    before, after = yaml.safe_load(text), yaml.safe_load(new)
    expected = {**before, **{key: [value] for key, value in changes.items()}}
    if after != expected:
        raise ConfigurationError(
            f"{name}: changing {', '.join(changes)} would change other keys too",
            fix="report this: the variant file has a shape the bump does not know",
        )
    return bom + new


# The recipes' source_date_epoch (the committer date of flagtree_commit), one line each: recipe.yaml's
# `context: source_date_epoch: <seconds>`, meta.yaml's `{% set source_date_epoch = <seconds> %}`.
_EPOCH = re.compile(
    r"^(?:[ \t]+source_date_epoch:|\{%-?[ \t]*set[ \t]+source_date_epoch[ \t]*=)[ \t]*(?P<value>\d+)"
    r"[ \t]*(?:-?%\})?[ \t]*\r?$",
    re.MULTILINE,
)


def _epoch_line(text: str, name: str) -> re.Match[str]:
    found = list(_EPOCH.finditer(text))
    if len(found) != 1:
        raise ConfigurationError(
            f"{name}: holds no one source_date_epoch line (recipe.yaml's context: `source_date_epoch: <seconds>`, "
            "meta.yaml's `{% set source_date_epoch = <seconds> %}`)",
            fix="write it on one line, as the recipes have it (docs/building.md)",
        )
    return found[0]


def declared_epoch(text: str) -> int | None:
    """The recipe ``text``'s ``source_date_epoch`` when it declares one, on one line; else None."""
    found = list(_EPOCH.finditer(text))
    return int(found[0]["value"]) if len(found) == 1 else None


def read_epoch(text: str, *, name: str) -> str:
    """The recipe ``text``'s ``source_date_epoch`` (named ``name`` in an error)."""
    return _epoch_line(text, name)["value"]


def change_epoch(text: str, value: int, *, name: str) -> str:
    """The recipe ``text`` (``recipe.yaml`` or ``meta.yaml``) with its ``source_date_epoch`` set to ``value``,
    nothing else."""
    line = _epoch_line(text, name)
    return text[: line.start("value")] + str(value) + text[line.end("value") :]


class FilesNotWritten(FileAccessError):
    """A file of an all-or-nothing write could not be written: which one, why, and where the others stand."""

    def __init__(
        self, failed: Path, exc: OSError, *, put_back: tuple[Path, ...], stuck: Mapping[Path, Path | None]
    ) -> None:
        self.failed = failed
        self.reason = exc.strerror or str(exc) or type(exc).__name__
        self.put_back = put_back  # moved into place, then put back as they were
        self.written = tuple(stuck)  # moved into place, and putting the old file back failed too
        if stuck:
            state = "; ".join(
                f"{new} holds the new text ({f'the old one is {old}' if old else 'it was not there before'})"
                for new, old in stuck.items()
            )
        elif put_back:
            state = f"nothing written ({', '.join(map(str, put_back))} put back as before)"
        else:
            state = "nothing written"
        super().__init__(
            f"{failed} could not be written ({self.reason}): {state}", fix=file_access_error(exc).fix
        )


def write_atomically(files: Mapping[Path, str]) -> None:
    """Write every file of ``files`` or none (see the module's docstring); raise :class:`FilesNotWritten`."""
    staged: dict[Path, Path] = {}  # target -> its new text, staged beside it
    kept: dict[Path, Path | None] = {}  # target -> its old file, kept beside it (None: there was none)
    moved: list[Path] = []
    stuck: dict[Path, Path | None] = {}  # moved, and its old file could not be put back: it stays beside it
    target = next(iter(files), Path())
    try:
        for target, text in files.items():
            # Held from the creation of the staged file to its record in ``staged``: a signal in between would
            # leave it beside the target, created and not yet known to the cleanup below.
            with deferred_interrupts():
                fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
                staged[target] = Path(name)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as stream:
                stream.write(text)
            if target.exists():
                staged[target].chmod(target.stat().st_mode & 0o777)
        # A signal is held while the files move (and delivered once they all have, which puts them back):
        # one cannot land between a rename and its record in ``moved``, which would leave that file new
        # and its old one removed below.
        with deferred_interrupts():
            for target, temporary in staged.items():
                kept[target] = _keep(target)
                temporary.replace(target)
                moved.append(target)
    except BaseException as exc:
        with deferred_interrupts():
            stuck = _put_back(moved, kept)
        if not isinstance(exc, OSError):
            raise
        put_back = tuple(p for p in moved if p not in stuck)
        raise FilesNotWritten(target, exc, put_back=put_back, stuck=stuck) from None
    finally:
        with deferred_interrupts():
            for path in (
                *staged.values(),
                *(k for k in kept.values() if k is not None and k not in stuck.values()),
            ):
                path.unlink(missing_ok=True)


def _keep(target: Path) -> Path | None:
    """A hard link to ``target``'s file beside it (a copy where links are refused), or None without one."""
    if not target.exists():
        return None
    keep = target.with_name(f".{target.name}.{secrets.token_hex(4)}.orig")
    try:
        os.link(target, keep)
    except OSError:
        shutil.copy2(target, keep)
    return keep


def _put_back(moved: list[Path], kept: Mapping[Path, Path | None]) -> dict[Path, Path | None]:
    """Put each moved target back as it was; the ones that could not be, with where their old file is."""
    stuck: dict[Path, Path | None] = {}
    for target in moved:
        old = kept.get(target)
        try:
            if old is None:
                target.unlink()
            else:
                old.replace(target)
        except OSError:
            stuck[target] = old
    return stuck
