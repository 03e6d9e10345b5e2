"""`flagtree-feedstock staged-recipes`: the recipe folder of a conda-forge staged-recipes pull request.

Through the console script: the layout it writes (every file the staged recipe.yaml and its build scripts
reference, inside the folder; nothing feedstock-only), the maintainers, the pins conda-forge's global pinning
does not supply (checked against ../shared/data/conda-forge-pinning.yaml where it exists), a staged recipe the
engine renders to the same packages, the files followed from a changed recipe, and bad input. conda-smithy's
`recipe-lint --conda-forge` on the folder is in the conda_build tier below (tests/test_conda_forge_yml.py has
the rerender).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml

from _hostile_inputs import feedstock_copy
from _recipe_support import ROOT, SHARED, VARIANT_FILES
from _smithy import run_smithy
from flagtree_feedstock._own_files import OwnFile
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe import staged_recipes

PINNING = SHARED / "data" / "conda-forge-pinning.yaml"
FEEDSTOCK = [sys.executable, "-m", "flagtree_feedstock"]


def _staged(tmp_path: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FEEDSTOCK, "staged-recipes", *args], capture_output=True, text=True, check=False, cwd=cwd
    )


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("staged") / "staged-recipes"
    done = _staged(output, "--maintainer", "alice", "--maintainer", "bob-2", "--output", str(output))
    assert done.returncode == 0, done.stderr
    folder = output / "recipes" / "flagtree-cpu"
    assert done.stdout.startswith(f"wrote {folder} (")
    return folder


def _recipe(folder: Path) -> dict[str, object]:
    recipe: dict[str, object] = yaml.safe_load((folder / "recipe.yaml").read_text())
    return recipe


def test_every_file_the_staged_recipe_references_is_inside_it(staged: Path) -> None:
    recipe = _recipe(staged)
    outputs = recipe["outputs"]
    assert isinstance(outputs, list)
    patches = [
        p for o in outputs for s in o.get("source", []) if isinstance(s, dict) for p in s.get("patches", [])
    ]
    assert len(patches) == len(list((ROOT / "patches").glob("*/*.patch")))
    for patch in patches:
        assert not patch.startswith("../"), patch
        assert (staged / patch).read_bytes() == (ROOT / patch).read_bytes(), patch
    scripts = ["build-llvm.sh", "build-flagtree.sh"]
    for script in scripts:
        assert (staged / script).read_bytes() == (ROOT / "recipe" / script).read_bytes()
    # What the build scripts read from ${RECIPE_DIR}, the activation scripts of build-flagtree.sh's loop too.
    read = set(re.findall(r"\$\{RECIPE_DIR\}/([\w.-]+)", "".join((staged / s).read_text() for s in scripts)))
    assert read <= {p.name for p in staged.iterdir()}, read
    for kind, ext in [(k, e) for k in ("activate", "deactivate") for e in ("sh", "fish")]:
        assert (staged / f"{kind}.{ext}").is_file()
    for test in ("test_flagtree_cpu.py", "test_rms_norm.py", "test_flagtree_doctor.py"):
        assert (staged / test).is_file()
    # flagtree-doctor is built from this repository: its distribution and licence, as a path source inside.
    doctor = next(o for o in outputs if o["package"]["name"] == "flagtree-doctor")
    assert doctor["source"] == [{"path": "flagtree-feedstock", "target_directory": "flagtree-feedstock"}]
    assert (staged / "flagtree-feedstock/LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert (staged / "flagtree-feedstock/flagtree-doctor/pyproject.toml").is_file()
    assert (staged / "flagtree-feedstock/flagtree-doctor/src/flagtree_doctor/cpu_check.py").is_file()


def test_nothing_feedstock_only(staged: Path) -> None:
    names = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "meta.yaml" not in names  # staged-recipes builds recipe.yaml
    assert "README.md" not in names
    assert not [n for n in names if "flagtree_feedstock/" in n or n.startswith("flagtree-feedstock/src")]
    assert not [n for n in names if "__pycache__" in n or ".egg-info" in n]
    assert not (staged.parent.parent / "conda_build_config.yaml").exists()
    assert [p.name for p in staged.parent.iterdir()] == ["flagtree-cpu"]  # no scratch folder left
    # The packages' SOURCE_DATE_EPOCH is read by this repository's toolkit alone, which conda-forge's CI does not run.
    context = _recipe(staged)["context"]
    assert isinstance(context, dict) and "version" in context and "source_date_epoch" not in context, context


def test_the_maintainers_are_the_ones_given_and_the_feedstock_is_flagtree_cpu(staged: Path) -> None:
    """The recipe's name is flagtree-cpu-split; the feedstock, named after the recipe unless `feedstock-name`
    says otherwise, is flagtree-cpu-feedstock, as the folder is recipes/flagtree-cpu."""
    assert _recipe(staged)["recipe"] == {"name": "flagtree-cpu-split", "version": "${{ version }}"}
    assert _recipe(staged)["extra"] == {
        "feedstock-name": "flagtree-cpu",
        "recipe-maintainers": ["alice", "bob-2"],
    }


def test_the_pins_are_those_conda_forges_global_pinning_does_not_supply(staged: Path) -> None:
    own = yaml.safe_load((staged / "conda_build_config.yaml").read_text())
    assert own == yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    if not PINNING.is_file():
        pytest.skip(
            f"{PINNING} is absent (conda-forge's global pinning, beside the repository in this workplace)"
        )
    pinning = yaml.safe_load(PINNING.read_text())
    # The root conda_build_config.yaml stands in for the global pinning outside conda-forge: every key of it is
    # one conda-forge supplies, so the staged folder leaves it out.
    for key in yaml.safe_load(VARIANT_FILES[0].read_text()):
        assert key in pinning, key
    # Each pin the folder carries is one the global pinning lacks, or one this recipe overrides on purpose.
    for key, values in own.items():
        assert key not in pinning or [str(v) for v in values] != [str(v) for v in pinning[key]], key


def test_the_staged_recipe_renders_the_packages_the_repositorys_does(staged: Path) -> None:
    from flagtree_feedstock.recipe.render import render  # noqa: PLC0415 - py-rattler-build, loaded once here

    def names(recipe_dir: Path) -> list[tuple[str, str, str]]:
        files = [VARIANT_FILES[0], recipe_dir / "conda_build_config.yaml"]
        return sorted(o.key for o in render(recipe_dir / "recipe.yaml", files, target="linux-aarch64"))

    assert names(staged) == names(ROOT / "recipe")


def test_the_files_are_followed_from_the_recipe_not_listed(tmp_path: Path) -> None:
    """A new patch, a helper a build script sources and a file an inline script reads come along; a file nothing
    references does not."""
    copy = feedstock_copy(tmp_path)
    recipe = copy / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    last = "          - ../patches/flagtree/0012-Lower-and-cache-CPU-kernels-for-the-features-every-c.patch\n"
    assert last in text
    recipe.write_text(text.replace(last, last + "          - ../patches/flagtree/0013-New.patch\n"))
    (copy / "patches/flagtree/0013-New.patch").write_text("a new patch\n")
    script = copy / "recipe" / "build-llvm.sh"
    script.write_text(script.read_text() + '. "${RECIPE_DIR}/sbom_helper.sh"\n')
    (copy / "recipe" / "sbom_helper.sh").write_text('python "${RECIPE_DIR}/sbom.py"\n')
    (copy / "recipe" / "sbom.py").write_text("")
    (copy / "recipe" / "unused.sh").write_text("")
    doctor_script = "        - cd flagtree-feedstock/flagtree-doctor && "
    text = recipe.read_text()
    assert text.count(doctor_script) == 1
    recipe.write_text(
        text.replace(doctor_script, '        - python "${RECIPE_DIR}/inline_helper.py"\n' + doctor_script)
    )
    (copy / "recipe" / "inline_helper.py").write_text("")
    output = tmp_path / "out"
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(output), cwd=copy)
    assert done.returncode == 0, done.stderr
    folder = output / "recipes" / "flagtree-cpu"
    assert (folder / "patches/flagtree/0013-New.patch").read_text() == "a new patch\n"
    assert "          - patches/flagtree/0013-New.patch\n" in (folder / "recipe.yaml").read_text()
    assert (folder / "sbom_helper.sh").is_file() and (folder / "sbom.py").is_file()
    assert (folder / "inline_helper.py").is_file()  # read by an inline build script
    assert not (folder / "unused.sh").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--maintainer", "flagos-ai/core"],
            "--maintainer flagos-ai/core is an organisation or team, not a user",
        ),
        (["--maintainer=-bad-"], "--maintainer '-bad-' is not a GitHub user name"),
        (["--maintainer", "bad_name"], "--maintainer 'bad_name' is not a GitHub user name"),
        (["--maintainer", "a" * 40], f"--maintainer {'a' * 40!r} is not a GitHub user name"),
        (["--maintainer", "alice", "alice"], "--maintainer alice is given twice"),
    ],
)
def test_a_bad_maintainer_is_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = _staged(tmp_path, *args, "--output", str(tmp_path / "out"))
    assert done.returncode == ConfigurationError.return_code
    assert done.stderr.startswith(f"flagtree-feedstock: error: {message}")
    assert done.stderr.count("\n") == 1 and "(fix: " in done.stderr
    assert not (tmp_path / "out").exists()


def test_help_says_users_not_organisations() -> None:
    done = subprocess.run(
        [*FEEDSTOCK, "staged-recipes", "--help"], capture_output=True, text=True, check=True
    )
    assert "conda-smithy takes users, not organisations" in " ".join(done.stdout.split())


def test_an_existing_recipe_folder_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "out" / "recipes" / "flagtree-cpu"
    target.mkdir(parents=True)
    (target / "mine.txt").write_text("mine")
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "out"))
    assert done.returncode == ConfigurationError.return_code
    assert (
        done.stderr
        == f"flagtree-feedstock: error: {target} already exists (fix: remove it, or pass another --output)\n"
    )
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
    assert [p.name for p in target.parent.iterdir()] == ["flagtree-cpu"]


@pytest.mark.parametrize("linked", ["recipes", "recipes/flagtree-cpu", "recipes/flagtree-cpu, dangling"])
def test_a_linked_recipes_folder_is_refused_and_nothing_is_written_where_it_leads(
    tmp_path: Path, linked: str
) -> None:
    """Issue 47: a staged-recipes clone (someone else's repository) whose recipes/ or recipes/flagtree-cpu is a
    link: one line, and nothing written at the link's target, nor beside the link."""
    output = tmp_path / "staged-recipes"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = output / linked.split(",", maxsplit=1)[0]
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere / "gone" if "dangling" in linked else elsewhere)
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(output))
    assert done.returncode == ConfigurationError.return_code, done.stdout
    assert done.stderr == (
        f"flagtree-feedstock: error: {link} is a symbolic link (to {link.readlink()}): staged-recipes writes "
        "only into real folders of --output, never where a link leads (fix: remove the link (a staged-recipes "
        "clone has none there), or pass another --output)\n"
    )
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in link.parent.iterdir()) == [link.name]


def test_an_output_folder_given_as_a_link_is_followed(tmp_path: Path) -> None:
    """DIR itself is the user's to name: a link there is followed, as cp follows it."""
    real = tmp_path / "clones" / "staged-recipes"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "link"))
    assert done.returncode == 0, done.stderr
    assert (real / "recipes" / "flagtree-cpu" / "recipe.yaml").is_file()


def test_a_script_reading_a_file_it_does_not_name_is_refused(tmp_path: Path) -> None:
    copy = feedstock_copy(tmp_path)
    script = copy / "recipe" / "build-llvm.sh"
    script.write_text(script.read_text() + 'cp "${RECIPE_DIR}/${helper}" .\n')
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "out"), cwd=copy)
    assert done.returncode == ConfigurationError.return_code
    assert "reads ${RECIPE_DIR}/${helper}, and $helper is set by no `for` loop there" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "link", ["recipe/recipe.yaml", "recipe/test_rms_norm.py", "patches/flagtree-cpu", "LICENSE"]
)
def test_a_link_out_of_the_repository_is_refused_and_nothing_written(tmp_path: Path, link: str) -> None:
    """The recipe, or a file the staged recipe copies (a test file, a patch under a linked folder, a file of the
    path source), that is a symbolic link out of the repository: one line, and no pull request holding this machine's file."""
    copy = feedstock_copy(tmp_path)
    outside = tmp_path / "outside"
    shutil.move(copy / link, outside)
    (copy / link).symlink_to(outside)
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "out"), cwd=copy)
    assert done.returncode == ConfigurationError.return_code, done.stdout
    assert done.stderr.startswith("flagtree-feedstock: error: "), done.stderr
    assert f"is a link to {outside}" in done.stderr and "outside this repository" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "(fix: " in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_link_inside_the_repository_is_copied_as_its_file(tmp_path: Path) -> None:
    copy = feedstock_copy(tmp_path)
    test_file = copy / "recipe" / "test_rms_norm.py"
    shutil.move(test_file, copy / "test_rms_norm.py")
    test_file.symlink_to("../test_rms_norm.py")
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "out"), cwd=copy)
    assert done.returncode == 0, done.stderr
    staged = tmp_path / "out" / "recipes" / "flagtree-cpu" / "test_rms_norm.py"
    assert not staged.is_symlink()
    assert staged.read_bytes() == (ROOT / "recipe" / "test_rms_norm.py").read_bytes()


def test_a_failed_copy_leaves_nothing(tmp_path: Path) -> None:
    plan = staged_recipes.plan(ROOT, ["alice"])
    # A file under recipe.yaml, which is a file: its folder cannot be made, once some files are written.
    broken = staged_recipes.StagedRecipe(
        recipe_text=plan.recipe_text,
        files={**plan.files, PurePosixPath("recipe.yaml/zz"): OwnFile(data=b"zz", mode=0o644)},
    )
    with pytest.raises(FileExistsError):
        staged_recipes.write(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_outside_a_feedstock_it_says_where_to_run(tmp_path: Path) -> None:
    done = _staged(tmp_path, "--maintainer", "alice", "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == ConfigurationError.return_code
    assert done.stderr == (
        f"flagtree-feedstock: error: cannot read {tmp_path / 'recipe' / 'recipe.yaml'}: No such file or directory "
        "(fix: run from the feedstock's root (it holds recipe/), or pass --recipe-dir)\n"
    )
    assert not (tmp_path / "out").exists()


# ---- conda_build tier: conda-smithy's linter -------------------------------------------------------------------


@pytest.mark.conda_build
def test_conda_smithy_lints_it_clean_but_for_the_maintainer_check_it_cannot_make_offline(
    staged: Path,
) -> None:
    done = run_smithy(["recipe-lint", "--conda-forge", str(staged)], cwd=staged.parent.parent)
    lints = [line.strip() for line in done.stdout.splitlines() if line.startswith("  ")]
    assert lints, done.stdout + done.stderr
    for line in lints:
        assert re.fullmatch(r'Could not verify that recipe maintainer "(alice|bob-2)" exists due to a transient '
                            r"GitHub error\. .*", line), line  # fmt: skip
