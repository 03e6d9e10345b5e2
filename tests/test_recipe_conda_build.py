"""Tier conda_build: the real conda-build (and conda-smithy's recipe renderer) on our recipes, offline.

Skipped with a reason where they are not installed (they are not on PyPI). linux-aarch64 skips no output, so
every output is checked (a skipped output hides its errors). conda-build runs through our offline runner
(tests/_conda_tools.py): the classic solver, an index with the virtual packages, caches of its own. conda-build reads recipe/conda_build_config.yaml
(the feedstock's pins) itself, as it does for every recipe folder, before the files given with `-m`: the global
file is given that way here, read after it (the two set different keys, so the order changes no variant);
`flagtree-feedstock build` gives it with `-e`, read first.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from _conda_tools import run_conda_build, tool_python
from _recipe_support import OUTPUTS, RECIPE_DIR, RECIPE_V1, VARIANT_FILES, first_variant
from _stub_channel import make_stub_channel

pytestmark = pytest.mark.conda_build


def test_conda_build_check_accepts_meta_yaml(tmp_path: Path) -> None:
    # An empty channel: dependencies stay unsolved, and conda-build still renders and checks every output.
    channel = tmp_path / "channel"
    for subdir in ("noarch", "linux-aarch64"):
        (channel / subdir).mkdir(parents=True)
        repodata = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
        (channel / subdir / "repodata.json").write_text(json.dumps(repodata))
    argv = ["--check", str(RECIPE_DIR), "-m", str(VARIANT_FILES[0]), "--override-channels"]
    argv += ["-c", channel.as_uri(), "--croot", str(tmp_path / "croot")]
    result = run_conda_build(argv, scratch=tmp_path / "conda")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in OUTPUTS:
        assert f"finalize metadata for {name}" in output, output
    assert "Traceback" not in output


def _package_names(tmp_path: Path, recipe_dir: Path) -> list[str]:
    """The file names conda-build gives every output (`--output`), every requirement solved from stubs."""
    channel = make_stub_channel(tmp_path / "stubs")
    argv = ["--output", str(recipe_dir), "-m", str(VARIANT_FILES[0]), "--override-channels"]
    argv += ["-c", channel.as_uri()]
    result = run_conda_build(argv, scratch=tmp_path / "conda")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "non-final" not in result.stderr, result.stderr  # a requirement did not solve: no real hash
    return sorted(Path(line).name for line in result.stdout.split() if line.endswith((".conda", ".tar.bz2")))


def test_conda_build_names_each_package_once_with_a_real_hash(tmp_path: Path) -> None:
    names = _package_names(tmp_path, RECIPE_DIR)
    llvm = first_variant()["llvm_commit"][:8]
    assert len(names) == 6, names  # LLVM once, the doctor once, flagtree-cpu per python
    assert re.fullmatch(rf"flagtree-llvm-0\.6\.0-llvm{llvm}_h[0-9a-f]{{7}}_0\.conda", names[-1]), names
    assert "h1234567" not in names[-1]  # conda-build's placeholder
    for name, python in zip(names[:4], ("310", "311", "312", "313"), strict=True):
        assert re.fullmatch(rf"flagtree-cpu-0\.6\.0-py{python}h[0-9a-f]{{7}}_0\.conda", name), names


@pytest.mark.parametrize(
    "key", ["flagtree_commit", "llvm_commit", "llvm_sha256", "flagtree_cpu_commit", "sleef_commit"]
)
def test_conda_build_hashes_every_source_pin(tmp_path: Path, key: str) -> None:
    before = _package_names(tmp_path / "before", RECIPE_DIR)
    recipe_dir = tmp_path / "recipe"
    shutil.copytree(RECIPE_DIR, recipe_dir)
    own = recipe_dir / "conda_build_config.yaml"
    old = first_variant()[key]
    own.write_text(own.read_text().replace(old, "0" * len(old)))
    after = _package_names(tmp_path / "after", recipe_dir)
    for old, new in zip(before, after, strict=True):
        built_from_it = old.startswith("flagtree-cpu-") or (
            old.startswith("flagtree-llvm-") and "llvm" in key
        )
        assert (old != new) is built_from_it, (key, old, new)


def test_conda_smithys_renderer_renders_recipe_yaml() -> None:
    """conda-smithy's v1 linter and rerender render recipe.yaml with its context only (no variant keys)."""
    code = (
        "import sys\n"
        "from rattler_build_conda_compat.jinja.jinja import render_recipe_with_context\n"
        "from rattler_build_conda_compat.loader import load_yaml\n"
        "rendered = render_recipe_with_context(load_yaml(open(sys.argv[1]).read()))\n"
        "print(rendered['outputs'][0]['build']['string'])\n"
    )
    result = subprocess.run(
        [tool_python("conda-smithy"), "-c", code, str(RECIPE_V1)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("llvm")
