"""Our patch series against an upstream tree: recipe order, GNU patch without fuzz, and refreshes.

A series is applied in the order the recipe lists it, with GNU patch ``-p1 -F0`` to a scratch copy of the
files it touches, so a hunk applies exactly where it says, a few lines away (an offset: the patch is
refreshed), or not at all (the patch fails, and the hunk is reported). rattler-build applies patches with a
looser matcher of its own (tests/README.md), which is why the check uses GNU patch: what passes here applies
under every engine.

A refresh regenerates the patch the way patches/README.md makes them: the file before and after the patch
committed in a scratch repository with the original author, date and message (``git mailinfo``), then
``git format-patch -N --no-signature`` with the original's hash abbreviation, so only the hunk positions and
the ``index`` lines change.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from flagtree_feedstock._own_files import PATCH, RECIPE, read_own_text, repository_of
from flagtree_feedstock._subprocess import which
from flagtree_feedstock.errors import ConfigurationError, ToolMissingError

# The recipe's git sources whose `patches:` lists are series: the series name, the end of the git URL.
SOURCES = {"flagtree": "/FlagTree.git", "flagtree-cpu": "/flagtree-cpu.git"}
PatchStatus = Literal["exact", "offset", "failed", "not tried"]

_DIFF = re.compile(r"diff --git a/(?P<old>\S+) b/(?P<new>\S+)$")
_HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<length>\d+))? \+\d+(?:,(?P<new_length>\d+))? @@")
_INDEX = re.compile(r"^index (?P<old>[0-9a-f]+)\.\.(?P<new>[0-9a-f]+)")
_PATCHING = re.compile(r"^patching file (?P<file>.+)$")
_OFFSET = re.compile(r"^Hunk #(?P<hunk>\d+) succeeded at (?P<line>\d+) \(offset (?P<offset>-?\d+) lines?\)")
_FAILED = re.compile(r"^Hunk #(?P<hunk>\d+) FAILED at (?P<line>\d+)")
_REVERSED = "Reversed (or previously applied) patch detected"
# Sorts with no locale or global git configuration of the machine: a refresh is the same everywhere.
_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


class SourceTree(Protocol):
    """Where a series is applied: the files of an upstream tree, read by path."""

    def read_bytes(self, path: str) -> bytes | None: ...


@dataclass(frozen=True)
class DirectoryTree:
    """A checkout on disk (only read; the series is applied to a copy)."""

    root: Path

    def read_bytes(self, path: str) -> bytes | None:
        file = self.root / path
        return file.read_bytes() if file.is_file() else None


@dataclass(frozen=True, kw_only=True)
class Hunk:
    """One hunk of one file of a patch: GNU patch numbers hunks per file, from 1."""

    file: str
    number: int
    start: int
    text: str


@dataclass(frozen=True, kw_only=True)
class ParsedDiff:
    files: tuple[str, ...]  # every path the patch reads or writes, in order
    created: frozenset[str]
    hunks: tuple[Hunk, ...]
    abbrev: int  # the length of the hashes on its `index` lines


def parse_diff(text: str) -> ParsedDiff:
    """The files and hunks of a `git format-patch` file (the hunks' own line counts say where they end)."""
    lines = text.splitlines()
    files: list[str] = []
    created: set[str] = set()
    hunks: list[Hunk] = []
    abbrev = 7
    current = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if diff := _DIFF.match(line):
            current = diff["new"]
            files.extend(p for p in (diff["old"], diff["new"]) if p not in files)
        elif line == "--- /dev/null":
            created.add(current)
        elif hash_line := _INDEX.match(line):
            abbrev = len(hash_line["old"])
        elif hunk := _HUNK.match(line):
            old_left, new_left = int(hunk["length"] or 1), int(hunk["new_length"] or 1)
            body = [line]
            while (old_left > 0 or new_left > 0) and index < len(lines):
                body_line = lines[index]
                index += 1
                body.append(body_line)
                if body_line.startswith("\\"):
                    continue
                old_left -= body_line[:1] in {" ", "-", ""}
                new_left -= body_line[:1] in {" ", "+", ""}
            number = 1 + sum(h.file == current for h in hunks)
            hunks.append(Hunk(file=current, number=number, start=int(hunk["start"]), text="\n".join(body)))
    return ParsedDiff(files=tuple(files), created=frozenset(created), hunks=tuple(hunks), abbrev=abbrev)


def recipe_series(recipe: Path) -> dict[str, list[Path]]:
    """Each series of the recipe (`flagtree`, `flagtree-cpu`), its patch files in the recipe's order.

    The order is the `patches:` list of the output source whose git URL ends as in :data:`SOURCES`;
    paths are relative to the recipe, as the engine reads them.
    """
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    data = yaml.safe_load(read_own_text(recipe, RECIPE, inside=repository_of(recipe.parent)))
    series: dict[str, list[Path]] = {name: [] for name in SOURCES}
    for output in data.get("outputs", []):
        sources = output.get("source", [])
        for source in sources if isinstance(sources, list) else [sources]:
            url = str(source.get("git", "")) if isinstance(source, dict) else ""
            for name, tail in SOURCES.items():
                if url.endswith(tail) and not series[name]:
                    # As the recipe names them, not resolved: the reader then sees a link that leads out.
                    series[name] = [
                        Path(os.path.normpath(recipe.parent.absolute() / p))
                        for p in source.get("patches", [])
                    ]
    return series


@dataclass(frozen=True, kw_only=True)
class Failure:
    """Why a patch does not apply: the hunk GNU patch rejected (or the file it could not find)."""

    file: str
    hunk: int
    line: int | None
    reason: str
    text: str

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"hunk #{self.hunk} ({where}) {self.reason}"


@dataclass(frozen=True, kw_only=True)
class PatchOutcome:
    """One patch of a series: exact, applied at an offset (and its refreshed text), failed, or not tried."""

    patch: Path
    status: PatchStatus
    offsets: tuple[str, ...] = ()
    failure: Failure | None = None
    refreshed: str | None = None
    diff: str = ""  # from the patch file as it was to ``refreshed``


def patch_diff(patch: Path, old: str, new: str) -> str:
    """The unified diff of a patch file from ``old`` to ``new``, named as patches/<series>/<file>."""
    name = f"patches/{patch.parent.name}/{patch.name}"
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )


def gnu_patch() -> str:
    """The path of GNU patch, or a :class:`ToolMissingError` (another patch may apply hunks differently)."""
    path = which("patch", install_hint="apt-get install patch")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    if "GNU patch" not in version:
        raise ToolMissingError(f"{path} is not GNU patch", fix="install GNU patch (apt-get install patch)")
    return path


def apply_series(
    patches: Sequence[Path],
    tree: SourceTree,
    *,
    scratch: Path | None = None,
    refresh: bool = True,
    into: Path | None = None,
    inside: Path | None = None,
) -> list[PatchOutcome]:
    """Apply ``patches`` in order to a copy of the files they touch; one outcome per patch.

    The first failing patch stops the series (the later ones are ``not tried``: they may build on it).
    With ``refresh``, every patch that applied at an offset gets its regenerated text. With ``into``, the
    files the series touches are copied there as the series left them (the tests load the patched code).
    Each patch is read once, by the one reader (``inside``: the repository it may not lead out of), and GNU
    patch and git get that text, not the file again.
    """
    patch_exe = gnu_patch()
    texts = {patch: read_own_text(patch, PATCH, inside=inside) for patch in patches}
    parsed = {patch: parse_diff(text) for patch, text in texts.items()}
    with tempfile.TemporaryDirectory(prefix="flagtree-patches-", dir=scratch) as folder:
        work = Path(folder) / "tree"
        work.mkdir()
        for diff in parsed.values():
            for path in diff.files:
                data = tree.read_bytes(path)
                if data is not None and not (work / path).exists():
                    (work / path).parent.mkdir(parents=True, exist_ok=True)
                    (work / path).write_bytes(data)
        outcomes: list[PatchOutcome] = []
        for number, patch in enumerate(patches):
            if outcomes and outcomes[-1].status in ("failed", "not tried"):
                outcomes.append(PatchOutcome(patch=patch, status="not tried"))
                continue
            before = Path(folder) / f"before-{number}"
            _copy(work, before, parsed[patch].files)
            outcome = _apply(patch_exe, patch, texts[patch], parsed[patch], work)
            if outcome.status == "offset" and refresh:
                after = Path(folder) / f"after-{number}"
                _copy(work, after, parsed[patch].files)
                text = regenerate(
                    patch, texts[patch], before, after, parsed[patch], Path(folder) / f"git-{number}"
                )
                outcome = PatchOutcome(
                    patch=patch,
                    status="offset",
                    offsets=outcome.offsets,
                    refreshed=text,
                    diff=patch_diff(patch, texts[patch], text),
                )
            outcomes.append(outcome)
        if into is not None:
            _copy(work, into, sorted({path for diff in parsed.values() for path in diff.files}))
        return outcomes


def _copy(source: Path, dest: Path, files: Sequence[str]) -> None:
    for path in files:
        if (source / path).is_file():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / path, dest / path)


def _apply(patch_exe: str, patch: Path, text: str, diff: ParsedDiff, work: Path) -> PatchOutcome:
    for path in diff.files:
        if path not in diff.created and not (work / path).is_file():
            hunk = next((h for h in diff.hunks if h.file == path), None)
            return PatchOutcome(
                patch=patch,
                status="failed",
                failure=Failure(
                    file=path, hunk=1, line=None, reason="file does not exist", text=hunk.text if hunk else ""
                ),
            )
    done = subprocess.run(
        [
            patch_exe, "-p1", "-F0", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-",
        ],
        input=text,  # the patch as the reader read it, on standard input (as UTF-8, whatever the locale)
        cwd=work,
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )  # fmt: skip
    output = (done.stdout + done.stderr).splitlines()
    offsets: list[str] = []
    current = diff.files[0] if diff.files else ""
    for line in output:
        if patching := _PATCHING.match(line):
            current = patching["file"]
        elif offset := _OFFSET.match(line):
            offsets.append(f"{current} hunk #{offset['hunk']}: offset {offset['offset']}")
        elif failed := _FAILED.match(line):
            number = int(failed["hunk"])
            hunk = next((h for h in diff.hunks if h.file == current and h.number == number), None)
            failure = Failure(
                file=current,
                hunk=number,
                line=int(failed["line"]),
                reason="does not match (GNU patch -F0: no fuzz)",
                text=hunk.text if hunk else "",
            )
            return PatchOutcome(patch=patch, status="failed", failure=failure)
        elif _REVERSED in line:
            hunk = next((h for h in diff.hunks if h.file == current), None)
            failure = Failure(
                file=current,
                hunk=1,
                line=hunk.start if hunk else None,
                reason="is already in the tree (reversed or previously applied: merged upstream?)",
                text=hunk.text if hunk else "",
            )
            return PatchOutcome(patch=patch, status="failed", failure=failure)
    if done.returncode != 0:
        reason = next((line for line in output if line.strip()), f"patch exited with {done.returncode}")
        return PatchOutcome(
            patch=patch,
            status="failed",
            failure=Failure(file=current, hunk=1, line=None, reason=reason.strip(), text=""),
        )
    return PatchOutcome(patch=patch, status="offset" if offsets else "exact", offsets=tuple(offsets))


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    git = which("git", install_hint="apt-get install git")
    done = subprocess.run(
        [git, *args],
        cwd=cwd,
        env={**os.environ, **_GIT_ENV, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigurationError(
            f"git {args[0]} failed while refreshing a patch: {done.stderr.strip()}",
            fix="check that git works here (git --version)",
        )
    return done.stdout


def regenerate(  # noqa: PLR0917 - the patch, its text, the trees around it, its diff and a scratch folder
    original: Path, text: str, before: Path, after: Path, diff: ParsedDiff, repo: Path
) -> str:
    """``original`` (whose text is ``text``) made again from the files ``before`` and ``after`` it, with its
    header and message."""
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    info = _mailinfo(repo, original, text)
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    identity = {
        "GIT_AUTHOR_NAME": fields.get("Author", ""),
        "GIT_AUTHOR_EMAIL": fields.get("Email", ""),
        "GIT_AUTHOR_DATE": fields.get("Date", ""),
        "GIT_COMMITTER_NAME": fields.get("Author", ""),
        "GIT_COMMITTER_EMAIL": fields.get("Email", ""),
        "GIT_COMMITTER_DATE": fields.get("Date", ""),
    }
    _copy(before, repo, diff.files)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "the file before the patch", env=identity)
    for path in diff.files:
        (repo / path).unlink(missing_ok=True)
    _copy(after, repo, diff.files)
    _git(repo, "add", "-A")
    message = repo.parent / f"{repo.name}.message"
    body = (repo.parent / f"{repo.name}.msg").read_text(encoding="utf-8")
    message.write_text(f"{fields.get('Subject', '')}\n\n{body}", encoding="utf-8")
    _git(repo, "commit", "-q", "--cleanup", "verbatim", "-F", str(message), env=identity)
    # core.abbrev: the `index` lines' hashes as long as the original's.
    return _git(
        repo, "-c", f"core.abbrev={diff.abbrev}", "format-patch", "-1", "--stdout", "--no-signature", "-N"
    )


def _mailinfo(repo: Path, original: Path, text: str) -> str:
    git = which("git", install_hint="apt-get install git")
    done = subprocess.run(
        [git, "mailinfo", str(repo.parent / f"{repo.name}.msg"), os.devnull],
        cwd=repo,
        input=text.encode("utf-8"),
        env={**os.environ, **_GIT_ENV},
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigurationError(
            f"{original.name} is not a git format-patch mail: {done.stderr.decode().strip()}",
            fix="regenerate it with git format-patch (patches/README.md)",
        )
    return done.stdout.decode("utf-8")
