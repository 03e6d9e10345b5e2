"""The feedstock's pins in ``recipe/conda_build_config.yaml``: read them, change values in place, write atomically.

A change rewrites only the quoted value on the line under its key (``key:`` then ``  - "value"``), so every
comment, the order and the quoting stay as they are; the result is read back and must differ from the old
file in exactly the keys changed. Several files are written all or nothing as far as the filesystem allows:
each is staged beside its target first (mkstemp), and only when every one is staged are they moved into
place (os.replace); a failure before that removes the staged copies.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from flagtree_feedstock.errors import ConfigurationError

# The feedstock's pins that a FlagTree bump moves, in the order the variant file lists them.
BUMPED_KEYS = (
    "flagtree_version",
    "flagtree_commit",
    "llvm_commit",
    "llvm_sha256",
    "flagtree_cpu_commit",
    "sleef_commit",
)


def read_pins(path: Path) -> dict[str, str]:
    """The one value of each of :data:`BUMPED_KEYS` in the variant file ``path``."""
    import yaml  # noqa: PLC0415

    if not path.is_file():
        raise ConfigurationError(
            f"variant file {path} does not exist", fix="pass --recipe-dir DIR, the folder holding recipe.yaml"
        )
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    pins = {}
    for key in BUMPED_KEYS:
        values = data.get(key)
        if not isinstance(values, list) or len(values) != 1:
            raise ConfigurationError(
                f"{path}: {key} must be a list of one value to be bumped, not {values!r}",
                fix=f'write it as `{key}:` and one line `  - "<value>"`',
            )
        pins[key] = str(values[0])
    return pins


def change_pins(text: str, changes: Mapping[str, str], *, name: str) -> str:
    """``text`` (a variant file called ``name``) with the values of ``changes`` replaced, nothing else."""
    import yaml  # noqa: PLC0415

    new = text
    for key, value in changes.items():
        pattern = re.compile(rf'^(?P<head>{re.escape(key)}:[ \t]*\n[ \t]*-[ \t]*)"[^"\n]*"', re.MULTILINE)
        if len(pattern.findall(new)) != 1:
            raise ConfigurationError(
                f'{name}: {key} is not one `{key}:` line followed by one `  - "<value>"` line',
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
    return new


def write_atomically(files: Mapping[Path, str]) -> None:
    """Write every file of ``files`` or none: all are staged beside their targets, then moved into place."""
    staged: list[tuple[Path, Path]] = []
    try:
        for target, text in files.items():
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            staged.append((Path(name), target))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as stream:
                stream.write(text)
            if target.exists():
                Path(name).chmod(target.stat().st_mode & 0o777)
        for temporary, target in staged:
            temporary.replace(target)
    except BaseException:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise
