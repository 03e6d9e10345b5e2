"""One product from either engine and in either format (issue 35 item 3), through the console script.

`tests/recipes/toy-reproducible` declares `source_date_epoch` in its context, as the real recipe does, so every package
of it is finished by the toolkit's one landing step (builder/landing/new_packages.py): its CycloneDX SBOM added and the
engine's clock and build folders taken out. Built twice by the real engine, in other folders, at another
second, under another umask and time zone, a `.conda` and a `.tar.bz2` each give the same bytes. The
`--tool conda-build` route lands its packages through the same step: here a stand-in `conda-build` runs the
same engine into the folder the toolkit gives it (the real conda-build is the conda_build tier's,
tests/test_conda_build.py), and what lands holds what the rattler-build route lands, file for file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from _package_diff import first_difference, members
from _timing import seconds
from _toy import RECIPES, build_args, make_empty_channel, native_args
from flagtree_feedstock.builder.landing.sbom import sbom_path

SCRIPT = str(Path(sys.executable).with_name("flagtree-feedstock"))
TOY = "toy-reproducible"
EPOCH = 1700000000  # the toy's context.source_date_epoch


def _build(
    out: Path,
    empty: Path,
    *extra: str,
    umask: int = 0o022,
    tz: str = "UTC",
    path: str | None = None,
    recipe: Path = RECIPES / TOY,
) -> Path:
    """Build the toy (``recipe``, a folder) into ``out`` with the console script; the one package it published."""
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", TZ=tz)
    if path is not None:
        env["PATH"] = path
    done = subprocess.run(
        [SCRIPT, *build_args(str(recipe), out, *native_args(empty), *extra)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=seconds(300),
        preexec_fn=lambda: os.umask(umask),
    )
    assert done.returncode == 0, done.stderr
    found = [p for p in out.rglob(f"{TOY}-*") if p.name.endswith((".conda", ".tar.bz2"))]
    assert len(found) == (0 if "--render-only" in extra else 1), found
    return found[0] if found else out


def _check_finished(package: Path) -> None:
    """The package carries an SBOM `flagtree-feedstock sbom` accepts, and the recipe's epoch as its time."""
    done = subprocess.run([SCRIPT, "sbom", str(package)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "  pin toy_pin = 1" in done.stdout.splitlines()
    files = {name.rsplit(":", 1)[-1]: data for name, data in members(package)}  # .conda: "<archive>:<name>"
    assert json.loads(files["info/index.json"])["timestamp"] == EPOCH * 1000
    assert sbom_path(TOY) in files
    assert files["share/toy-reproducible/work.txt"] == b"built in /usr/src/build/work\n"


@pytest.mark.parametrize("package_format", ["conda", "tar.bz2"])
def test_each_format_builds_to_the_same_bytes_twice(tmp_path: Path, package_format: str) -> None:
    empty = make_empty_channel(tmp_path / "empty")
    first = _build(tmp_path / "one", empty, "--package-format", package_format)
    time.sleep(1.1)  # another second, for anything stamped with the time
    second = _build(
        tmp_path / "second" / "deeper",
        empty,
        "--package-format",
        package_format,
        umask=0o077,
        tz="Asia/Shanghai",
    )
    assert first.name.endswith(f".{package_format}")
    assert first.name == second.name
    difference = first_difference(first, second)
    assert not difference, difference
    _check_finished(first)
    if package_format == "tar.bz2":
        with tarfile.open(first, "r:bz2") as archive:
            assert {m.mtime for m in archive.getmembers()} == {EPOCH}


def _stand_in_conda_build(folder: Path) -> Path:
    """A `conda-build` that builds the recipe folder's recipe.yaml with the real engine into its
    --output-folder, from its -e files and -c channels, in its --package-format."""
    folder.mkdir()
    script = folder / "conda-build"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, warnings\n"
        "from pathlib import Path\n"
        "import rattler_build\n"
        "args = sys.argv[1:]\n"
        "given = lambda flag: [args[i + 1] for i, a in enumerate(args) if a == flag]\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "rattler_build.build_recipes(\n"
        "    [Path(args[0]) / 'recipe.yaml'], variant_config=given('-e'), channel=given('-c'),\n"
        "    output_dir=Path(given('--output-folder')[0]), test='skip',\n"
        "    package_format=given('--package-format')[0].replace('.', '-'),\n"
        ")\n"
    )
    script.chmod(0o755)
    return folder


def test_the_conda_build_route_lands_the_same_product(tmp_path: Path) -> None:
    empty = make_empty_channel(tmp_path / "empty")
    tools = _stand_in_conda_build(tmp_path / "bin")
    path = f"{tools}:{os.environ['PATH']}"
    by_conda_build = _build(
        tmp_path / "cb", empty, "--tool", "conda-build", "--package-format", "tar.bz2", path=path
    )
    _check_finished(by_conda_build)
    time.sleep(1.1)
    by_rattler_build = _build(tmp_path / "rb", empty, "--package-format", "tar.bz2")
    assert by_conda_build.name == by_rattler_build.name
    # Every file the same, the SBOM too; the engine's record names the entry the stand-in called, which the
    # toolkit's worker does not (`extra_meta: {}`), so it is compared without that line.
    one, other = dict(members(by_conda_build)), dict(members(by_rattler_build))
    record = "info/recipe/rendered_recipe.yaml"
    assert one.pop(record).replace(b"extra_meta: {}\n", b"") == other.pop(record)
    del one[f"{record} (tar header)"], other[f"{record} (tar header)"]  # its size
    assert one == other
    # `--render-only --sbom DIR` with the same route writes the very document the package carries.
    _build(
        tmp_path / "rendered",
        empty,
        "--tool",
        "conda-build",
        "--render-only",
        "--sbom",
        str(tmp_path / "sbom"),
    )
    (rendered,) = (tmp_path / "sbom").glob("*.cdx.json")
    assert rendered.name == by_conda_build.name.removesuffix(".tar.bz2") + ".cdx.json"
    (document,) = [data for name, data in one.items() if name == sbom_path(TOY)]
    assert rendered.read_bytes() == document


@pytest.mark.conda_build
@pytest.mark.skipif(
    shutil.which("conda-build") is None,
    reason="conda-build is not installed here (tier conda_build; it is not on PyPI: conda install conda-build)",
)
@pytest.mark.parametrize("package_format", ["conda", "tar.bz2"])
def test_real_conda_build_packages_are_the_same_product(tmp_path: Path, package_format: str) -> None:
    """The real conda-build, twice, from two copies of the recipe made seconds apart (conda-build records the
    recipe folder and its time), into other folders: the same bytes, with the SBOM `--render-only --sbom`
    writes; every file the rattler-build route's package installs, the same."""
    empty = make_empty_channel(tmp_path / "empty")
    (tmp_path / "condarc").touch()
    conda = {"CONDA_SOLVER": "classic", "CONDARC": str(tmp_path / "condarc")}
    conda |= {"CONDA_PKGS_DIRS": str(tmp_path / "pkgs"), "CONDA_BLD_PATH": str(tmp_path / "bld")}
    route = ("--tool", "conda-build", "--package-format", package_format)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in conda.items():
            patch.setenv(name, value)
        copy = shutil.copytree(RECIPES / TOY, tmp_path / "a" / TOY, copy_function=shutil.copy)
        first = _build(tmp_path / "one", empty, *route, recipe=copy)
        time.sleep(1.1)
        copy = shutil.copytree(RECIPES / TOY, tmp_path / "b" / "c" / TOY, copy_function=shutil.copy)
        second = _build(
            tmp_path / "two" / "deeper", empty, *route, umask=0o077, tz="Asia/Shanghai", recipe=copy
        )
    assert first.name.endswith(f".{package_format}")
    difference = first_difference(first, second)
    assert not difference, difference
    _check_finished(first)
    _build(tmp_path / "r", empty, *route, "--render-only", "--sbom", str(tmp_path / "sbom"))
    (rendered,) = (tmp_path / "sbom").glob("*.cdx.json")
    files = {name.rsplit(":", 1)[-1]: data for name, data in members(first) if "(" not in name}
    assert rendered.read_bytes() == files[sbom_path(TOY)]
    by_rattler_build = _build(tmp_path / "rb", empty, "--package-format", package_format)
    theirs = {name.rsplit(":", 1)[-1]: data for name, data in members(by_rattler_build) if "(" not in name}
    # The files the package installs (not its info/ records, nor the .conda's metadata.json, spelt otherwise).
    shipped = {name: data for name, data in theirs.items() if not name.startswith(("info/", "metadata.json"))}
    assert {name: files.get(name) for name in shipped} == shipped
