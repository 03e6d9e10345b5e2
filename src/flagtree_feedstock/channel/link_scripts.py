"""Link and activation scripts: a package's own code that the installer or the build runs, refused unless the
package is allowed by name.

After linking a package into a prefix, py-rattler's installer (``execute_link_scripts=True``) and the
rattler-build engine (always, for a build's environments) run ``bin/.<name>-post-link.sh`` with bash when that
file exists in the prefix, ``<name>`` being the package's (``Scripts/.<name>-post-link.bat`` on Windows), and
``-pre-unlink`` before removing one; conda runs ``-pre-link`` too. The file is looked up in the prefix, not in
the package: any package may put one there under another package's name, and a noarch python package's
``python-scripts/`` lands in ``bin/``. So every path a package would put into the prefix whose file name is a
link script's, for any name and in any folder (:func:`link_scripts`), makes the package one that runs code; it
is refused in one line naming it and the option that allows it (:class:`LinkScriptPolicy`), unless the user
allowed that package by name. No check of the script's text could tell what it will do.

Activation scripts are the same kind of code, run at another moment: the engine activates a build's build and
host environments before it runs the build script, and activation runs every file of the prefix's
``etc/conda/activate.d/`` (``deactivate.d/`` when it deactivates) with the build's rights, and sets the
variables of ``etc/conda/env_vars.d/*.json`` and ``conda-meta/state`` (``LD_PRELOAD`` or ``BASH_ENV`` is code
too). They are looked up in the prefix as well, whoever put them there, and a symlink named ``etc``,
``etc/conda`` or one of those folders would bring another folder's files in: every such path a package would put
into the prefix (:func:`activation_scripts`) is one. One allow list covers both kinds: a package allowed to run
its code may run it either way, and keeping them apart would buy nothing, since a post-link script can write
into ``activate.d`` and an activation script can run anything a post-link script can.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from flagtree_feedstock.errors import ChannelError

# The option of `build` and `channel install` that allows a package's link scripts, by package name.
OPTION = "--allow-link-scripts"
# A link script's file name, whichever package's name it carries; compared without case, as on a file system
# that ignores case.
_SCRIPT = re.compile(r"\..+-(?:pre-link|post-link|pre-unlink)\.(?:sh|bat)", re.IGNORECASE)


# The folders whose files activation runs (or reads as variables), and the folders above them, as a package's
# paths name them; compared without case, as link scripts are.
_ACTIVATION_FOLDERS = ("etc/conda/activate.d", "etc/conda/deactivate.d", "etc/conda/env_vars.d")
_ACTIVATION_FILES = frozenset(("etc", "etc/conda", "conda-meta/state", *_ACTIVATION_FOLDERS))


def link_scripts(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths among ``paths`` whose file name is a link script's (of any package), sorted."""
    return tuple(sorted({path for path in paths if _SCRIPT.fullmatch(path.rsplit("/", 1)[-1])}))


def activation_scripts(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths among ``paths`` that activating a prefix holding them runs or reads: any file below
    ``etc/conda/activate.d/``, ``deactivate.d/`` or ``env_vars.d/`` (any extension, any depth),
    ``conda-meta/state``, and ``etc``, ``etc/conda`` or one of those folders themselves (a symlink there leads
    activation elsewhere), sorted."""
    return tuple(sorted({path for path in paths if _is_activation(path.lower().strip("/"))}))


def _is_activation(path: str) -> bool:
    return path in _ACTIVATION_FILES or path.startswith(tuple(f"{folder}/" for folder in _ACTIVATION_FOLDERS))


@dataclass(frozen=True, kw_only=True)
class LinkScriptPolicy:
    """The packages, by name, whose link and activation scripts may run: the user's (``--allow-link-scripts
    NAME``) and, for a build, those the recipe's folder lists (:mod:`flagtree_feedstock.recipe.package_scripts`)."""

    allowed: frozenset[str] = frozenset()

    @classmethod
    def allowing(cls, names: Collection[str]) -> LinkScriptPolicy:
        return cls(allowed=frozenset(name.strip().lower() for name in names if name.strip()))

    def admit(
        self, name: str, scripts: Collection[str], *, where: str, activation: Collection[str] = ()
    ) -> bool:
        """Whether the package ``name`` (the file ``where``) runs link scripts once installed: True when it
        carries ``scripts`` and is allowed. Raise :class:`ChannelError` when it carries link ``scripts``, or
        ``activation`` scripts (the build activates its environments), and is not allowed."""
        if not scripts and not activation:
            return False
        if name.lower() in self.allowed:
            return bool(scripts)
        if scripts:
            what, when = "link script", "the installer would run as it installs it"
        else:
            what, when = "activation script", "the build would run as it activates its environment"
        first, *more = sorted(scripts or activation)
        also = f" (and {len(more)} more)" if more else ""
        raise ChannelError(
            f"{where} ({name}) carries the {what} {first!r}{also}, which {when}: refused, and was not used",
            fix=f"if you trust {name} to run its own code on this machine, allow it: {OPTION} {name}",
        )


# The default: no package's link scripts run.
NONE_ALLOWED = LinkScriptPolicy()
