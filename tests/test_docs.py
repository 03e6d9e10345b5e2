"""The README and docs/: short where it must be, every relative link resolving, no number that drifts.

A link is checked the way GitHub renders it: a relative path must name a file or folder of the repository, and
an anchor (`page.md#a-heading`, `#a-heading`) a heading of that page, slugged as GitHub slugs headings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The README is the first screen: what it is, hardware, install, set-up, the commands, links.
README_MAX_LINES = 150
# Markdown links and images, without the URL's title: [text](target) or ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
# What the tests and benchmarks measure, and a change makes false: durations and counts of tests or checks.
MEASURED = re.compile(
    r"\b\d[\d,.]*\s*(?:[-\u2013]\s*\d[\d,.]*\s*)?"
    r"(?:s|secs?|seconds?|min|mins|minutes?|h|hrs?|hours?|tests?|checks?|mutations?|passed|skipped|failed)\b",
    flags=re.IGNORECASE,
)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor of ``page``: its headings' slugs, a repeated one with -1, -2, ... as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading is None:
            continue
        base = slug(heading[1])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``page: target: what is wrong`` for each relative link of ``page`` that does not resolve."""
    problems = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:, file:
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            problems.append(f"{page.relative_to(root)}: {target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{page.relative_to(root)}: {target}: no heading #{anchor} in {destination.name}")
    return problems


# A file or folder a table cell names: `channel/repack.py`, `tests/test_repack.py`, `_archive/`.
NAMED_PATH = re.compile(r"`((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|toml|txt|md))?|[\w-]+\.py)`")
NAMED_TEST = re.compile(r"`(test_\w+)`")


def stale_table_entries(page: Path, root: Path = ROOT) -> list[str]:
    """``page: what``, for each file a table row of ``page`` names that is neither at ``root`` nor in the
    package's source, and each test function a cell names (`test_x`) that no test file of that cell defines."""
    problems = []
    for line in FENCE.sub("", page.read_text()).splitlines():
        if not line.startswith("|"):
            continue
        for cell in line.split("|"):
            files = []
            for name in NAMED_PATH.findall(cell):
                found = [p for p in (root / name, root / "src" / "flagtree_feedstock" / name) if p.exists()]
                if not found:
                    problems.append(f"{page.name}: {name}: no such file or folder")
                files += [p for p in found if p.is_file() and p.name.startswith("test_")]
            defined = "".join(p.read_text() for p in files)
            problems += [
                f"{page.name}: {test}: not a test of {', '.join(p.name for p in files) or 'the cell'}"
                for test in NAMED_TEST.findall(cell)
                if f"def {test}(" not in defined
            ]
    return problems


def test_the_security_tables_name_files_and_tests_that_exist() -> None:
    """docs/security.md's tables say where each promise is kept and tested: what they name is there."""
    assert stale_table_entries(DOCS / "security.md") == []


def test_a_table_naming_a_missing_file_or_test_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_here() -> None:\n    pass\n")
    page = tmp_path / "page.md"
    page.write_text(
        "| promise | kept in | tested by |\n| --- | --- | --- |\n"
        "| one | `gone/module.py` | `tests/test_a.py` (`test_here`, `test_gone`) |\n"
        "```\n| `fenced/away.py` |\n```\n"
    )
    assert stale_table_entries(page, tmp_path) == [
        "page.md: gone/module.py: no such file or folder",
        "page.md: test_gone: not a test of test_a.py",
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Big.LITTLE without `taskset`\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#biglittle-without-taskset) [ok](other.md#twice-1) [ok](#page) [web](https://x.y/#z)\n"
        "[gone](missing.md) [no anchor](other.md#nothing) [not twice](other.md#twice-2)\n"
        "```\n[in a code block](ignored.md)\n```\n# Page\n"
    )
    problems = [p.split(": ", 1)[1] for p in broken_links(page, tmp_path)]
    assert problems == [
        "missing.md: no such file",
        "other.md#nothing: no heading #nothing in other.md",
        "other.md#twice-2: no heading #twice-2 in other.md",
    ]


def test_the_readme_is_one_screen_of_reading() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move depth into docs/"


def test_the_readme_holds_no_count_or_time_that_drifts() -> None:
    text = FENCE.sub("", README.read_text())
    assert MEASURED.findall(text) == [], "durations and test counts belong to .ci/run's output or benchmarks/"


@pytest.mark.parametrize(
    "sentence",
    ["took 5 min 26 s", "1,054 tests", "2.5\u20133.3 h on a runner", "31 passed", "about 90 seconds"],
)
def test_a_measured_number_is_recognised(sentence: str) -> None:
    assert MEASURED.search(sentence)


@pytest.mark.parametrize(
    "sentence", ["glibc 2.17", "python 3.10\u20133.13", "12 symlinks", "a 15-step guide"]
)
def test_a_fact_of_the_packages_is_not_mistaken_for_a_measurement(sentence: str) -> None:
    assert not MEASURED.search(sentence)


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_each_docs_page_says_who_it_is_for(page: Path) -> None:
    title, _, rest = page.read_text().partition("\n\n")
    assert title.startswith("# "), f"{page.name}: starts with its title"
    assert rest.startswith("For "), f"{page.name}: the paragraph after the title says who the page is for"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(README.read_text())}
    assert set(DOCS.glob("*.md")) <= linked, "a page of docs/ the README does not link is a page nobody finds"


def _subcommands(help_text: str) -> list[str]:
    """The subcommands ``flagtree-feedstock --help`` lists: its ``{a,b,...}`` choice."""
    choice = re.search(r"\{([\w,-]+)\}", help_text)
    assert choice is not None, help_text
    return choice[1].split(",")


def test_the_readme_table_lists_every_subcommand_of_the_help() -> None:
    """Each subcommand `flagtree-feedstock --help` lists has its row in "Commands at a glance"."""
    script = shutil.which("flagtree-feedstock", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script flagtree-feedstock is not installed beside this python"
    result = subprocess.run([script, "--help"], capture_output=True, text=True, check=True)
    section = README.read_text().split("## Commands at a glance", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\| (.+?) \|", section, flags=re.MULTILINE)
    listed = {name for cell in first_cells for name in re.findall(r"`flagtree-feedstock ([\w-]+)", cell)}
    subcommands = _subcommands(result.stdout)
    assert {"build", "staged-recipes", "sbom"} <= set(subcommands), subcommands  # the parse found the list
    assert sorted(set(subcommands) - listed) == [], section
