"""conda-smithy's conda-forge lint of this repository's own recipes, each format alone (tier conda_build), and
what of it the default tier can check without conda-smithy: the keys under ``extra``.

conda-smithy lints ``recipe.yaml`` when a recipe folder has it, else ``meta.yaml``: each format is linted from a
feedstock copy that holds only that one, as a conda-forge feedstock would hold it (recipe/, conda-forge.yml, the
licence and patches). conda-smithy also checks that the feedstock was rerendered (``.ci_support/*.yaml``, which
its rerender writes and this repository does not commit: tests/test_conda_forge_yml.py rerenders it): the copy
gets the one file the rerender writes for linux-aarch64, stood in for by the feedstock's pins. The one lint
expected is the maintainer check, which needs GitHub; offline it says it could not verify the maintainer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from _recipe_support import ROOT
from _smithy import run_smithy

# conda-smithy's allowed subsections of extra (conda_smithy/linter/utils.py: FIELDS["extra"], conda-smithy
# 2026.8.5); any other key is the lint "The extra section contained an unexpected subsection name".
EXTRA_KEYS = {"recipe-maintainers", "feedstock-name"}
# The maintainer check, the one lint conda-smithy cannot make offline.
UNVERIFIED_MAINTAINER = re.compile(
    r'Could not verify that recipe maintainer "[\w-]+" exists due to a transient GitHub error\. .*'
)


def lints(output: str) -> list[str]:
    """The lints of ``conda-smithy recipe-lint`` (the indented lines under "recipe has some lint:")."""
    block = output.split("recipe has some lint:\n", 1)
    if len(block) == 1:
        return []
    found = []
    for line in block[1].splitlines():
        if not line.startswith("  "):
            break
        found.append(line.strip())
    return found


def _feedstock(tmp_path: Path, recipe: str) -> Path:
    """A feedstock copy holding the recipe folder with ``recipe`` as its only recipe file."""
    feedstock = tmp_path / "flagtree-cpu-feedstock"
    other = {"recipe.yaml": "meta.yaml", "meta.yaml": "recipe.yaml"}[recipe]
    ignored = shutil.ignore_patterns("__pycache__", other)
    shutil.copytree(ROOT / "recipe", feedstock / "recipe", ignore=ignored)
    shutil.copytree(ROOT / "patches", feedstock / "patches")
    for name in ("conda-forge.yml", "LICENSE"):
        shutil.copy2(ROOT / name, feedstock / name)
    (feedstock / ".ci_support").mkdir()
    shutil.copy2(
        ROOT / "recipe" / "conda_build_config.yaml", feedstock / ".ci_support" / "linux_aarch64_.yaml"
    )
    subprocess.run(["git", "init", "-q", str(feedstock)], check=True)
    return feedstock


@pytest.mark.conda_build
@pytest.mark.parametrize("recipe", ["recipe.yaml", "meta.yaml"])
def test_each_recipe_lints_clean_but_for_the_maintainer_check(tmp_path: Path, recipe: str) -> None:
    feedstock = _feedstock(tmp_path, recipe)
    done = run_smithy(["recipe-lint", "--conda-forge", "recipe"], cwd=feedstock)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-3000:]
    found = lints(done.stdout)
    assert found, output[-3000:]  # offline, the maintainer check always says it could not verify
    assert [line for line in found if not UNVERIFIED_MAINTAINER.fullmatch(line)] == [], output[-3000:]


def test_lints_are_read_from_conda_smithys_report() -> None:
    report = "recipe has some lint:\n  one lint\n  another lint\nrecipe has some suggestions:\n  a hint\n"
    assert lints(report) == ["one lint", "another lint"]
    assert lints("recipe is in fine form\n") == []


@pytest.mark.parametrize("recipe", ["recipe.yaml", "meta.yaml"])
def test_extra_holds_only_what_conda_forges_lint_allows(recipe: str) -> None:
    """No toolkit setting under extra (the build epoch is in recipe.yaml's context and meta.yaml's `{% set %}`)."""
    text = (ROOT / "recipe" / recipe).read_text()
    block = re.search(r"^extra:\n((?:[ #].*\n|\n)*)", text, flags=re.MULTILINE)
    assert block is not None, recipe
    keys = set(re.findall(r"^  ([\w-]+):", block[1], flags=re.MULTILINE))
    assert "recipe-maintainers" in keys, block[1]
    assert keys <= EXTRA_KEYS, keys - EXTRA_KEYS
