"""flagtree_feedstock.bump.patching: the recipe's order, and GNU patch's verdicts turned into outcomes, on trees
synthesized from the patches' pre-images (tests/_rehearsal_sources.py; no upstream file)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from _rehearsal_sources import preimages, render_preimage
from _tools import require_executable
from flagtree_feedstock.bump.patching import DirectoryTree, apply_series, parse_diff, recipe_series

ROOT = Path(__file__).resolve().parents[1]
SERIES = sorted((ROOT / "patches" / "flagtree").glob("*.patch"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """FlagTree's patched files as the series expects them: its pre-images at their line numbers."""
    require_executable("patch", "patch")
    root = tmp_path / "tree"
    for path, lines in preimages(SERIES).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(render_preimage(lines))
    return root


def test_the_order_is_the_recipes() -> None:
    series = recipe_series(ROOT / "recipe" / "recipe.yaml")
    assert [p.name for p in series["flagtree"]] == [p.name for p in SERIES]
    assert series["flagtree-cpu"] == [] or all(
        p.parent.name == "flagtree-cpu" for p in series["flagtree-cpu"]
    )


def test_the_series_applies_exactly_to_its_preimages(tree: Path) -> None:
    assert {o.status for o in apply_series(SERIES, DirectoryTree(tree))} == {"exact"}


def test_a_patch_already_in_the_tree_fails_and_stops_the_series(tree: Path) -> None:
    werror = next(p for p in SERIES if p.name.startswith("0006"))
    subprocess.run(["patch", "-p1", "-s", "-i", str(werror)], cwd=tree, check=True)
    outcomes = apply_series(SERIES, DirectoryTree(tree))
    statuses = [(o.patch.name[:4], o.status) for o in outcomes]
    assert statuses[5:] == [("0006", "failed")] + [(p.name[:4], "not tried") for p in SERIES[6:]]
    assert len(statuses) > 6  # the patches after the failed one are there to be not tried
    failure = outcomes[5].failure
    assert failure is not None and failure.file == "CMakeLists.txt" and failure.hunk == 1
    assert "already in the tree" in failure.reason


def test_a_missing_file_fails_with_the_patch_and_its_first_hunk(tmp_path: Path) -> None:
    require_executable("patch", "patch")
    (outcome,) = apply_series(SERIES[:1], DirectoryTree(tmp_path))
    assert outcome.status == "failed" and outcome.failure is not None
    assert outcome.failure.describe() == "hunk #1 (python/setup.py) file does not exist"
    assert outcome.failure.text == parse_diff(SERIES[0].read_text()).hunks[0].text


def test_a_hunk_that_no_longer_matches_is_named_with_its_line(tree: Path) -> None:
    build = tree / "python/triton/runtime/build.py"
    first = parse_diff(SERIES[2].read_text()).hunks[0]
    removed = next(line[1:] for line in first.text.splitlines()[1:] if line.startswith("-"))
    build.write_text(build.read_text().replace(removed, removed + " # changed upstream", 1))
    outcomes = apply_series(SERIES, DirectoryTree(tree))
    failed = outcomes[2]
    assert failed.failure is not None
    assert failed.failure.describe() == (
        f"hunk #1 (python/triton/runtime/build.py:{first.start}) does not match (GNU patch -F0: no fuzz)"
    )
    assert failed.failure.text == first.text


def test_a_changed_context_line_is_not_fuzzed_over(tree: Path) -> None:
    """GNU patch's default fuzz would apply a hunk whose outer context line changed; -F0 does not."""
    werror = next(p for p in SERIES if p.name.startswith("0006"))
    hunk = parse_diff(werror.read_text()).hunks[0]
    context = hunk.text.splitlines()[1][1:]
    cmake = tree / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace(context, context + " # edited upstream", 1))
    fuzzy = subprocess.run(
        ["patch", "-p1", "--dry-run", "--batch", "-i", str(werror)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "with fuzz" in fuzzy.stdout  # what a patch without -F0 would accept
    failed = apply_series(SERIES, DirectoryTree(tree))[5]
    assert failed.status == "failed" and failed.failure is not None
    assert failed.failure.describe().startswith("hunk #1 (CMakeLists.txt:")
