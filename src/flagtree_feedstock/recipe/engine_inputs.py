"""The files the engine reads itself, checked by the one reader before the engine is called.

py-rattler-build reads, by name, each output's build script and the patches of its sources while it builds,
and copies the whole recipe folder into each package (``info/recipe/``) as it is (measured with 0.73, on a toy
recipe): a symbolic link there, even one inside the repository, becomes a link in the package, which the
package check refuses after the build ("a package's info/ holds files only"), hours into flagtree-llvm's;
a link out of the repository would put a file of this machine into the package; a FIFO or a device ends the
build in the engine's own words ("is not a file!"), ``.gitignore`` or not. So, before any engine call (and by
``--render-only``, which checks every input):

- every entry of the recipe folder is a folder or a regular file (:func:`check_recipe_folder`: ``lstat`` of
  each entry, nothing read, for the engine copies them whatever their kind);
- each selected output's build script and each patch of its sources that is there is read by the one reader
  (:func:`~flagtree_feedstock._own_files.read_own`): a regular file inside the repository, within its bound
  (one that is not there the engine names itself, where the recipe names it).

The engine then reads these files again, by name: a file changed in between is the user's own change to their
recipe, not a file of another machine.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flagtree_feedstock._own_files import PATCH, SCRIPT, Kind, NotThere, read_own, repository_of
from flagtree_feedstock.errors import ConfigurationError

if TYPE_CHECKING:
    from .render import RenderedOutput

# What each entry of the recipe folder that is neither a folder nor a regular file is, for the message.
_OTHER_KINDS = (
    (stat.S_ISFIFO, "a pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_engine_inputs(recipe_dir: Path, outputs: Sequence[RenderedOutput]) -> None:
    """Refuse, in one line, a recipe folder or a build script or patch of ``outputs`` the engine cannot take."""
    check_recipe_folder(recipe_dir)
    repository = repository_of(recipe_dir)
    for path, kind in dict.fromkeys(_read_by_engine(recipe_dir, outputs)):  # each file once
        try:
            read_own(path, kind, inside=repository)
        except NotThere:  # the engine says which file is missing, where the recipe names it
            continue


def check_recipe_folder(recipe_dir: Path) -> None:
    """Each entry under ``recipe_dir`` is a folder or a regular file (see the module's docstring)."""
    pending = [recipe_dir]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = Path(entry.path)
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise ConfigurationError(
                        f"{path} is a symbolic link (to {path.readlink()}): the engine copies the recipe folder "
                        "into each package as it is, and a package's info/ holds no links",
                        fix="replace the link with the file it points to",
                    )
                if stat.S_ISDIR(mode):
                    pending.append(path)
                    continue
                kind = next((what for test, what in _OTHER_KINDS if test(mode)), None)
                if kind is not None:
                    raise ConfigurationError(
                        f"{path} is {kind}: the engine copies the recipe folder into each package, and "
                        "takes files and folders only",
                        fix=f"move {path.name} out of the recipe folder",
                    )


def _read_by_engine(recipe_dir: Path, outputs: Sequence[RenderedOutput]) -> Iterator[tuple[Path, Kind]]:
    """The build script file and the patches of each output, with their kinds, as the engine will read them."""
    for output in outputs:
        recipe = output.engine_variant.recipe
        for script in script_files(recipe.to_dict()):
            yield recipe_dir / script, SCRIPT
        for source in recipe.sources:
            for patch in source.to_dict().get("patches") or ():
                yield recipe_dir / str(patch), PATCH


def script_files(parts: dict[str, Any]) -> Iterator[str]:
    """The build script files an output names (``script: X.sh`` or ``script: {file: X}``)."""
    script = (parts.get("build") or {}).get("script")
    if isinstance(script, dict) and "file" in script:
        name = str(script["file"])
        yield name if Path(name).suffix else f"{name}.sh"
    elif isinstance(script, str) and "\n" not in script and script.endswith((".sh", ".bat")):
        yield script
