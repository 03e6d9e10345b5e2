"""A patch read as its own lines, for rules that state what a patch is for (tests/test_patch_rules.py).

A rule reads only the patch: the lines it adds and removes, and its hunks' context (upstream's lines the patch
shows), never a checkout, so it runs in the default tier. It yields one problem per broken clause. Python that
a hunk adds can be run: ``Hunk.run`` executes the new side of a hunk from a marker line in a namespace the rule
gives, so a rule can check behaviour (the value an assignment gives for each environment) where a text match
would accept a reworded bug.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FILE = re.compile(r"^diff --git a/(?P<old>\S+) b/(?P<new>\S+)$")
_HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")


@dataclass(frozen=True, kw_only=True)
class Hunk:
    file: str
    lines: tuple[tuple[str, str], ...]  # (tag, text): tag "+" added, "-" removed, " " context

    @property
    def added(self) -> list[str]:
        return [text for tag, text in self.lines if tag == "+"]

    @property
    def removed(self) -> list[str]:
        return [text for tag, text in self.lines if tag == "-"]

    @property
    def new_side(self) -> list[str]:
        """The hunk as the file reads after the patch: context and added lines."""
        return [text for tag, text in self.lines if tag != "-"]

    def run(self, start: str, namespace: dict[str, Any], *, stop: str | None = None) -> dict[str, Any]:
        """Execute the new side from the first line that starts (after indentation) with ``start`` up to the
        first later line that starts with ``stop`` (or the hunk's end), dedented, in ``namespace``; return
        the namespace."""
        side = self.new_side
        first = next(i for i, line in enumerate(side) if line.lstrip().startswith(start))
        last = next(
            (i for i, line in enumerate(side) if i > first and stop and line.lstrip().startswith(stop)),
            len(side),
        )
        exec(textwrap.dedent("\n".join(side[first:last])), namespace)  # noqa: S102 - our own patch's lines
        return namespace


@dataclass(frozen=True, kw_only=True)
class Diff:
    name: str  # series/NNNN, e.g. flagtree/0008
    hunks: tuple[Hunk, ...]

    @classmethod
    def parse(cls, name: str, text: str) -> Diff:
        """Every hunk of a `git format-patch` file, read by its header's line counts."""
        hunks, file = [], ""
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            if match := _FILE.match(lines[i]):
                file = match["new"]
            elif (match := _HUNK.match(lines[i])) and file:
                old, new = int(match["old"] or 1), int(match["new"] or 1)
                body: list[tuple[str, str]] = []
                while old > 0 or new > 0:
                    i += 1
                    line = lines[i]
                    if line.startswith("\\"):  # "\ No newline at end of file"
                        continue
                    tag = line[:1] or " "
                    body.append((tag, line[1:]))
                    old -= tag != "+"
                    new -= tag != "-"
                hunks.append(Hunk(file=file, lines=tuple(body)))
            i += 1
        return cls(name=name, hunks=tuple(hunks))

    def files(self) -> list[str]:
        return list(dict.fromkeys(h.file for h in self.hunks))

    def added(self, file: str | None = None) -> list[str]:
        return [line for h in self.hunks if file in (None, h.file) for line in h.added]

    def removed(self, file: str | None = None) -> list[str]:
        return [line for h in self.hunks if file in (None, h.file) for line in h.removed]

    def hunk(self, containing: str) -> Hunk:
        """The one hunk whose new side has a line containing ``containing``."""
        (found,) = [h for h in self.hunks if any(containing in line for line in h.new_side)]
        return found


Rule = Callable[[Diff], Iterator[str]]


def patch_name(patch: Path) -> str:
    """``flagtree/0008`` for patches/flagtree/0008-....patch: the series and the number, which a rewording
    of the subject does not change."""
    return f"{patch.parent.name}/{patch.name[:4]}"


def cmake_code(line: str) -> str:
    """A CMake line without its comment (CMake's ``#`` outside a quoted argument; this series quotes none)."""
    return line.split("#", 1)[0].rstrip()
