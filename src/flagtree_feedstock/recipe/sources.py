"""What each rendered output is built from: its sources as the engine will fetch them, for ``--render-only``.

Every source of an output, in the recipe's order: a ``url`` with its ``sha256``, a ``git`` repository with its
``rev`` (and how many patches the engine applies), or a ``path`` of this repository; each with the folder of the
work folder it lands in. The table prints them whole, so a user sees which LLVM a build uses and can compare
the sha256 with the one they trust; ``--json`` carries the same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .render import RenderedOutput

SourceKind = Literal["url", "git", "path"]


@dataclass(frozen=True, kw_only=True)
class Source:
    kind: SourceKind
    location: str
    # The sha256 of a url, the rev of a git source; None for a path.
    pin: str | None
    folder: str | None
    patches: int = 0

    def as_json(self) -> dict[str, object]:
        """``{"url", "sha256"}``, ``{"git", "rev", "patches"}`` or ``{"path"}``, each with its ``folder``."""
        found: dict[str, object] = {self.kind: self.location}
        if self.kind == "url":
            found["sha256"] = self.pin
        elif self.kind == "git":
            found |= {"rev": self.pin, "patches": self.patches}
        return found | {"folder": self.folder}

    def lines(self) -> list[str]:
        """The folder and kind, then the location and the pin whole, each on a line of its own (a URL longer
        than the terminal folds)."""
        patched = f", {self.patches} patch{'es' if self.patches > 1 else ''}" if self.patches else ""
        lines = [f"    {self.folder or '.'} ({self.kind}{patched})", f"      {self.location}"]
        if self.pin:
            lines.append(f"      {'sha256' if self.kind == 'url' else 'rev'} {self.pin}")
        return lines


def output_sources(output: RenderedOutput) -> tuple[Source, ...]:
    """The sources of one rendered output, as its recipe lists them after the render."""
    found = []
    for source in output.engine_variant.recipe.sources:
        entry = source.to_dict()
        folder = entry.get("target_directory")
        if "url" in entry:
            url = entry["url"]
            location = str(url[0] if isinstance(url, list) else url)
            found.append(Source(kind="url", location=location, pin=str(entry.get("sha256")), folder=folder))
        elif "git" in entry:
            patches = len(entry.get("patches") or ())
            found.append(
                Source(
                    kind="git",
                    location=str(entry["git"]),
                    pin=str(entry.get("rev")),
                    folder=folder,
                    patches=patches,
                )
            )
        else:
            found.append(Source(kind="path", location=str(entry.get("path")), pin=None, folder=folder))
    return tuple(found)


def source_lines(outputs: Sequence[RenderedOutput]) -> list[str]:
    """Each output name's sources once (its python variants share them), for the table's text."""
    lines = ["sources (the engine checks each sha256 and rev; --json has them too):"]
    seen: dict[tuple[str, tuple[Source, ...]], list[str]] = {}
    for output in outputs:
        seen.setdefault((output.name, output_sources(output)), []).append(output.build_string)
    for (name, sources), builds in seen.items():
        unique = list(dict.fromkeys(builds))
        built = unique[0] if len(unique) == 1 else f"{len(unique)} packages"
        lines.append(
            f"  {name} ({built}):" if sources else f"  {name} ({built}): none, built from the recipe alone"
        )
        for source in sources:
            lines += source.lines()
    return lines
