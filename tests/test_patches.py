"""Checks for `patches/`: our own minimal patches against the pinned upstream sources.

Layout (see patches/README.md): one directory per target, each a numbered `git format-patch` series.

- `patches/flagtree/`      applied with `-p1` at the FlagTree source root (pinned commit 54d33a53).
- `patches/flagtree-cpu/`  applied with `-p1` at the flagtree-cpu source root (pinned commit 19cede7e).

Without a checkout the tests only read this repository. With `FLAGTREE_SRC` (and `FLAGTREE_CPU_SRC`)
pointing at a pristine tree of the pinned commit, every series is applied in order to a temporary copy
of the files it touches, with GNU patch and no fuzz, and any offset or fuzz fails the test. A tree holding
only the files a series touches, at their paths, is enough (flagtree-cpu cannot be cloned everywhere: copies
of its `third_party/cpu/language/cpu/runtime.py` and `neon.py` at the pinned commit will do for
`FLAGTREE_CPU_SRC`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from _tools import require_executable, upstream_source
from flagtree_feedstock.bump import patching

REPO = Path(__file__).resolve().parent.parent
PATCHES = REPO / "patches"
RECIPES = (REPO / "recipe" / "recipe.yaml", REPO / "recipe" / "meta.yaml")


@dataclass(frozen=True, kw_only=True)
class Series:
    """A patch series: the directory under patches/ and the variable naming a checkout of its target."""

    name: str
    env_var: str


SERIES = (
    Series(name="flagtree", env_var="FLAGTREE_SRC"),
    Series(name="flagtree-cpu", env_var="FLAGTREE_CPU_SRC"),
)
# The series that must not be empty: the FlagTree patches, and flagtree-cpu's CPU check before
# runtime.py loads libTritonCPURuntime (issue 16, item 9).
REQUIRED_SERIES = frozenset({"flagtree", "flagtree-cpu"})

# The mbox separator line `git format-patch` writes: the id of the patch commit in the series checkout.
FROM_LINE = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
SUBJECT = re.compile(r"^Subject: \[PATCH(?: \d+/\d+)?\] (?P<subject>\S.*)$")
HUNK = re.compile(
    r"^@@ -(?P<old_start>\d+)(?:,(?P<old_len>\d+))? \+(?P<new_start>\d+)(?:,(?P<new_len>\d+))? @@"
)
NUMBERED = re.compile(r"^(?P<num>\d{4})-[A-Za-z0-9._-]+\.patch$")


def series_patches(series: str) -> list[Path]:
    directory = PATCHES / series
    return sorted(directory.glob("*.patch")) if directory.is_dir() else []


def all_patches() -> list[Path]:
    return [patch for series in SERIES for patch in series_patches(series.name)]


def patch_id(patch: Path) -> str:
    return f"{patch.parent.name}/{patch.name}"


@dataclass(frozen=True, kw_only=True)
class ParsedPatch:
    subject: str
    body: str
    diff_lines: list[str]


def parse_patch(patch: Path) -> ParsedPatch:
    """Split a `git format-patch` file into subject, commit message body and diff."""
    lines = patch.read_text(encoding="utf-8").splitlines()
    assert lines, f"{patch_id(patch)} is empty"
    assert FROM_LINE.match(lines[0]), (
        f"{patch_id(patch)}: first line must be the `From <commit> Mon Sep 17 …` line of `git format-patch`"
    )
    headers_end = lines.index("")  # the blank line that ends the mail headers
    headers = lines[1:headers_end]
    assert any(h.startswith("From: ") for h in headers), f"{patch_id(patch)}: no From: header"
    assert any(h.startswith("Date: ") for h in headers), f"{patch_id(patch)}: no Date: header"
    subject_lines = [h for h in headers if h.startswith("Subject: ")]
    assert len(subject_lines) == 1, f"{patch_id(patch)}: expected one Subject: header"
    # RFC 2822 folding: a long subject continues on lines that start with a space.
    start = headers.index(subject_lines[0])
    folded = [subject_lines[0]]
    for h in headers[start + 1 :]:
        if not h.startswith(" "):
            break
        folded.append(h)
    match = SUBJECT.match("".join(folded))
    assert match, f"{patch_id(patch)}: Subject must be `[PATCH] <text>`"
    separator = lines.index("---", headers_end)
    body = "\n".join(lines[headers_end + 1 : separator]).strip()
    return ParsedPatch(subject=match["subject"].strip(), body=body, diff_lines=lines[separator + 1 :])


def touched_files(diff_lines: list[str]) -> list[str]:
    """Paths (relative to the target root) that a diff reads, in order, without duplicates."""
    paths: list[str] = []
    for line in diff_lines:
        if line.startswith("diff --git a/"):
            path = line.removeprefix("diff --git a/").split(" b/", 1)[0]
            if path not in paths:
                paths.append(path)
    return paths


def check_hunks(patch: Path, diff_lines: list[str]) -> int:
    """Verify every hunk's line counts against its header; return the number of hunks."""
    hunks = 0
    i = 0
    while i < len(diff_lines):
        match = HUNK.match(diff_lines[i])
        if not match:
            i += 1
            continue
        hunks += 1
        old_left = int(match["old_len"] or 1)
        new_left = int(match["new_len"] or 1)
        i += 1
        while old_left > 0 or new_left > 0:
            assert i < len(diff_lines), f"{patch_id(patch)}: hunk {hunks} is truncated"
            line = diff_lines[i]
            if line.startswith("\\"):  # "\ No newline at end of file"
                i += 1
                continue
            tag = line[:1]
            assert tag in {" ", "-", "+", ""}, f"{patch_id(patch)}: bad line in hunk {hunks}: {line!r}"
            if tag in {" ", ""}:
                old_left -= 1
                new_left -= 1
            elif tag == "-":
                old_left -= 1
            else:
                new_left -= 1
            assert old_left >= 0 and new_left >= 0, (
                f"{patch_id(patch)}: hunk {hunks} is longer than its header"
            )
            i += 1
    return hunks


# ---- the repository alone ---------------------------------------------------------------------------------


@pytest.mark.parametrize("series", sorted(REQUIRED_SERIES))
def test_required_series_is_not_empty(series: str) -> None:
    assert series_patches(series), f"patches/{series}/ holds no *.patch"


def test_patches_dir_holds_only_patches_and_readme() -> None:
    # Upstream code never enters the repository beyond a patch's context lines.
    allowed_dirs = {s.name for s in SERIES}
    for path in PATCHES.rglob("*"):
        rel = path.relative_to(PATCHES)
        if path.is_dir():
            assert rel.as_posix() in allowed_dirs, f"unexpected directory patches/{rel}"
        elif len(rel.parts) == 1:
            assert rel.name == "README.md", f"unexpected file patches/{rel}"
        else:
            assert rel.parts[0] in allowed_dirs and rel.suffix == ".patch", f"unexpected file patches/{rel}"


@pytest.mark.parametrize("series", [s.name for s in SERIES])
def test_series_is_numbered_without_gaps(series: str) -> None:
    numbers = []
    for patch in series_patches(series):
        match = NUMBERED.match(patch.name)
        assert match, f"{patch_id(patch)}: name must be NNNN-<subject>.patch"
        numbers.append(int(match["num"]))
    assert numbers == list(range(1, len(numbers) + 1)), f"patches/{series}: numbers {numbers} are not 1..n"


@pytest.mark.parametrize("patch", all_patches(), ids=patch_id)
def test_patch_is_well_formed_with_header(patch: Path) -> None:
    parsed = parse_patch(patch)
    assert parsed.subject, f"{patch_id(patch)}: empty Subject"
    # The body says what and why: at least one full sentence.
    assert re.search(r"[A-Za-z].*[.!?](\s|$)", parsed.body, re.DOTALL), (
        f"{patch_id(patch)}: the commit message needs a body of at least one sentence (what and why)"
    )
    files = touched_files(parsed.diff_lines)
    assert files, f"{patch_id(patch)}: no `diff --git` section"
    for path in files:
        assert not path.startswith("/") and ".." not in Path(path).parts, (
            f"{patch_id(patch)}: bad path {path}"
        )
        assert f"--- a/{path}" in parsed.diff_lines or "--- /dev/null" in parsed.diff_lines, (
            f"{patch_id(patch)}: no `--- a/{path}` line"
        )
        assert f"+++ b/{path}" in parsed.diff_lines or "+++ /dev/null" in parsed.diff_lines, (
            f"{patch_id(patch)}: no `+++ b/{path}` line"
        )
    assert check_hunks(patch, parsed.diff_lines) >= 1, f"{patch_id(patch)}: no hunks"


@pytest.mark.parametrize("patch", all_patches(), ids=patch_id)
def test_patch_is_listed_in_readme(patch: Path) -> None:
    readme = (PATCHES / "README.md").read_text(encoding="utf-8")
    assert f"{patch.parent.name}/{patch.name}" in readme, f"patches/README.md does not list {patch_id(patch)}"


def test_readme_lists_no_missing_patch() -> None:
    readme = (PATCHES / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\b((?:flagtree|flagtree-cpu)/\d{4}-[A-Za-z0-9._-]+\.patch)", readme))
    existing = {patch_id(p) for p in all_patches()}
    assert listed <= existing, f"patches/README.md lists missing patches: {sorted(listed - existing)}"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
@pytest.mark.parametrize("patch", all_patches(), ids=patch_id)
def test_patch_is_referenced_by_recipe(patch: Path, recipe: Path) -> None:
    # Both recipes apply every patch. Paths are relative to the recipe (`../patches/...`), so look
    # for the `patches/<series>/<file>` tail.
    assert recipe.is_file(), f"{recipe.relative_to(REPO)} does not exist"
    text = recipe.read_text(encoding="utf-8")
    needle = f"patches/{patch.parent.name}/{patch.name}"
    assert needle in text, f"{recipe.relative_to(REPO)} does not reference {needle}"


# ---- against a checkout of the pinned upstream commit ------------------------------------------------------


@pytest.mark.parametrize("series", SERIES, ids=lambda s: s.name)
def test_series_applies_without_fuzz_or_offset(series: Series, tmp_path: Path) -> None:
    patches = series_patches(series.name)
    if not patches:
        pytest.skip(f"patches/{series.name}/ holds no patches")
    apply_series(patches, upstream_source(series.env_var), tmp_path)


def apply_series(patches: list[Path], src: Path, dest: Path) -> None:
    """Apply ``patches`` in order, with GNU patch and no fuzz, to a copy in ``dest`` of the files they touch.

    The application is ``flagtree_feedstock.bump.patching.apply_series``, the one ``flagtree-feedstock bump`` runs;
    the patched files are left in ``dest`` for the tests that load them.
    """
    require_executable("patch", "patch")
    dest.mkdir(parents=True, exist_ok=True)
    outcomes = patching.apply_series(
        patches, patching.DirectoryTree(src), scratch=dest, refresh=False, into=dest
    )
    for outcome in outcomes:
        assert outcome.failure is None, (
            f"{patch_id(outcome.patch)} does not apply to {src}: {outcome.failure.describe()}\n"
            f"{outcome.failure.text}"
        )
        assert outcome.status == "exact", (
            f"{patch_id(outcome.patch)} applies only with offset or fuzz: {', '.join(outcome.offsets)}"
        )
