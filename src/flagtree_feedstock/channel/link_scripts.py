"""Link scripts: a package's own code that the installer runs as it installs it, refused unless allowed by name.

After linking a package into a prefix, py-rattler's installer (``execute_link_scripts=True``) and the
rattler-build engine (always, for a build's environments) run ``bin/.<name>-post-link.sh`` with bash when that
file exists in the prefix, ``<name>`` being the package's (``Scripts/.<name>-post-link.bat`` on Windows), and
``-pre-unlink`` before removing one; conda runs ``-pre-link`` too. The file is looked up in the prefix, not in
the package: any package may put one there under another package's name, and a noarch python package's
``python-scripts/`` lands in ``bin/``. So every path a package would put into the prefix whose file name is a
link script's, for any name and in any folder (:func:`link_scripts`), makes the package one that runs code; it
is refused in one line naming it and the option that allows it (:class:`LinkScriptPolicy`), unless the user
allowed that package by name. No check of the script's text could tell what it will do.
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


def link_scripts(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths among ``paths`` whose file name is a link script's (of any package), sorted."""
    return tuple(sorted({path for path in paths if _SCRIPT.fullmatch(path.rsplit("/", 1)[-1])}))


@dataclass(frozen=True, kw_only=True)
class LinkScriptPolicy:
    """The packages, by name, whose link scripts the user allowed to run (``--allow-link-scripts NAME``)."""

    allowed: frozenset[str] = frozenset()

    @classmethod
    def allowing(cls, names: Collection[str]) -> LinkScriptPolicy:
        return cls(allowed=frozenset(name.strip().lower() for name in names if name.strip()))

    def admit(self, name: str, scripts: Collection[str], *, where: str) -> bool:
        """Whether the package ``name`` (the file ``where``) runs link scripts once installed: True when it
        carries ``scripts`` and is allowed; raise :class:`ChannelError` when it carries them unallowed."""
        if not scripts:
            return False
        if name.lower() in self.allowed:
            return True
        first, *more = sorted(scripts)
        also = f" (and {len(more)} more)" if more else ""
        raise ChannelError(
            f"{where} ({name}) carries the link script {first!r}{also}, which the installer would run as it "
            "installs it: refused, and was not used",
            fix=f"if you trust {name} to run its own code on this machine, allow it: {OPTION} {name}",
        )


# The default: no package's link scripts run.
NONE_ALLOWED = LinkScriptPolicy()
