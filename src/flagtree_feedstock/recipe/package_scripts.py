"""The packages the recipe's folder allows to run their own code in a build's environments, each with its reason.

A build refuses every package of its build and host environments that carries link or activation scripts
unless it is allowed by name (:mod:`flagtree_feedstock.channel.link_scripts`). The compilers a recipe needs
carry activation scripts (conda-forge's ``gcc_linux-aarch64`` sets ``CC`` and its flags in
``etc/conda/activate.d``), so the recipe names them beside itself, in :data:`FILE_NAME`: that file is as trusted
as the recipe and its build scripts, which already run with the build's rights, and is read like them, through
:func:`flagtree_feedstock._own_files.read_own` (a regular file, no link out of the repository, within its bound).

Its format: one package a line, ``NAME: REASON``; ``#`` starts a comment line; blank lines are skipped. Every
package needs its reason, once. The format is read here, line by line (it is also YAML, which nothing needs).
"""

from __future__ import annotations

import re
from pathlib import Path

from flagtree_feedstock._own_files import RECIPE_FILE, NotThere, read_own_text, repository_of
from flagtree_feedstock.errors import ConfigurationError

# Beside recipe.yaml. A recipe folder without it allows no package (the toy recipes of the tests).
FILE_NAME = "allowed_package_scripts.txt"
# A conda package name (conda's own rule, lowercase), then the reason.
_LINE = re.compile(r"(?P<name>[a-z0-9_][a-z0-9_.-]*):(?P<reason>.*)")
_FIX = f"write one package a line in {FILE_NAME}, as 'NAME: why it may run its scripts'"


def allowed_by_recipe(recipe_dir: Path) -> dict[str, str]:
    """The packages (name -> reason) that ``recipe_dir``'s :data:`FILE_NAME` allows to run their link and
    activation scripts; none when the folder has no such file. A line that is not ``NAME: REASON``, a package
    named twice or without a reason is one :class:`ConfigurationError` naming the file and the line."""
    path = recipe_dir / FILE_NAME
    try:
        text = read_own_text(path, RECIPE_FILE, inside=repository_of(recipe_dir))
    except NotThere:
        return {}
    allowed: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = _LINE.fullmatch(line.strip())
        if found is None:
            raise ConfigurationError(
                f"{path}, line {number}: {line.strip()[:80]!r} is not 'NAME: REASON' (a lowercase package name)",
                fix=_FIX,
            )
        name, reason = found["name"], found["reason"].strip()
        if not reason:
            raise ConfigurationError(f"{path}, line {number}: {name} has no reason", fix=_FIX)
        if name in allowed:
            raise ConfigurationError(f"{path}, line {number}: {name} is listed twice", fix=_FIX)
        allowed[name] = reason
    return allowed
