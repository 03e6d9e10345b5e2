"""Every file the toolkit reads from the repository or from the user, made hostile, through the console scripts
(issue 41 item 4: one bounded reading of our own inputs, ``flagtree_feedstock._own_files``).

Each input is made, in turn, each of ``tests/_hostile_inputs.py``'s five forms: a link to ``/dev/zero``, a FIFO, a
folder, a link to a file outside the repository, a file one byte over its kind's bound. The real console script
must end with exit status 2 and one error line naming the file and what it is, within ``tests/_peak_memory.py``'s
memory and time bounds, having written nothing. A file the user names (``-m``, ``-e``) may lead anywhere: a link
out of the repository is followed and read. The attestations ``upload`` reads are in
``tests/test_trusted_publishing.py``, beside the stand-in servers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from _bump_sources import Standins, copy_feedstock, make_standins
from _hostile_inputs import FORMS, damage, feedstock_copy, refused, run_capped
from _peak_memory import Measured
from _stub_channel import write_package
from _toy import RECIPES, build_args, make_empty_channel, native_args
from flagtree_feedstock import _own_files
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
PATCH_0006 = "patches/flagtree/0006-Do-not-build-with-Werror.patch"
CPU_PATCH = "patches/flagtree-cpu/0001-Check-the-CPU-before-runtime.py-loads-libTritonCPURu.patch"


def _cases(
    inputs: list[tuple[str, _own_files.Kind]], forms: tuple[str, ...] = FORMS
) -> list[Any]:  # pytest.param's
    return [
        pytest.param(name, kind, form, id=f"{Path(name).name}-{form}")
        for name, kind in inputs
        for form in forms
    ]


# ---- staged-recipes: every file it copies into the pull request -------------------------------------------------

STAGED = [
    ("recipe/recipe.yaml", _own_files.RECIPE),
    ("recipe/build-llvm.sh", _own_files.SCRIPT),
    ("recipe/cmake_options.sh", _own_files.SCRIPT),  # read through ${RECIPE_DIR} by build-flagtree.sh
    (PATCH_0006, _own_files.PATCH),
    ("recipe/conda_build_config.yaml", _own_files.VARIANT),
    ("conda-forge.yml", _own_files.SETTINGS),
    ("recipe/test_rms_norm.py", _own_files.RECIPE_FILE),
    ("LICENSE", _own_files.RECIPE_FILE),  # a file of the path source the licence list names
]


# A folder where the path source's LICENSE was is a folder of the source, copied as it is: not a case.
@pytest.mark.parametrize(
    ("name", "kind", "form"), [case for case in _cases(STAGED) if case.id != "LICENSE-folder"]
)
def test_staged_recipes_refuses_each_input_made_hostile(
    name: str, kind: _own_files.Kind, form: str, tmp_path: Path
) -> None:
    copy = feedstock_copy(tmp_path)
    words = damage(copy / name, form, kind, tmp_path / "outside")
    out = tmp_path / "out"
    done = run_capped(
        ["flagtree-feedstock", "staged-recipes", "--maintainer", "alice", "--output", str(out),
         "--recipe-dir", str(copy / "recipe")],
        tmp_path,
    )  # fmt: skip
    refused(done, copy / name, words)
    assert not out.exists()


def test_the_five_refusals_of_the_recipe_in_full(tmp_path: Path) -> None:
    """Each rule's line as the user reads it: what the file is, and what to do."""
    lines, expected = {}, {}
    for form in FORMS:
        copy = feedstock_copy(tmp_path / form)
        recipe = copy / "recipe" / "recipe.yaml"
        damage(recipe, form, _own_files.RECIPE, tmp_path / form / "outside")
        done = run_capped(
            ["flagtree-feedstock", "staged-recipes", "--maintainer", "alice", "--output", str(tmp_path / "out"),
             "--recipe-dir", str(copy / "recipe")],
            tmp_path,
        )  # fmt: skip
        lines[form] = refused(done, recipe, "").removeprefix("flagtree-feedstock: error: ")
        itself = f"(fix: put the recipe itself at {recipe}, a regular file)"
        link_fix = f"(fix: replace the link with the file it points to, or with a link inside {copy})"
        expected[form] = {
            "dev-zero": f"recipe {recipe} is a link to /dev/zero, outside this repository {link_fix}",
            "fifo": f"recipe {recipe} is a pipe (FIFO), not a file {itself}",
            "folder": f"recipe {recipe} is a folder, not a file {itself}",
            "outside": f"recipe {recipe} is a link to {tmp_path / form / 'outside' / 'recipe.yaml'}, outside this "
            f"repository {link_fix}",
            "too-large": f"recipe {recipe} is larger than 1 MiB (fix: a recipe is a few tens of KB: check that the "
            "file is the recipe)",
        }[form]
    assert lines == expected


def test_a_fifo_in_the_path_source_is_refused_not_left_out(tmp_path: Path) -> None:
    copy = feedstock_copy(tmp_path)
    words = damage(
        copy / "flagtree-doctor" / "pyproject.toml", "fifo", _own_files.RECIPE_FILE, tmp_path / "outside"
    )
    done = run_capped(
        ["flagtree-feedstock", "staged-recipes", "--maintainer", "alice", "--output", str(tmp_path / "out"),
         "--recipe-dir", str(copy / "recipe")],
        tmp_path,
    )  # fmt: skip
    refused(done, copy / "flagtree-doctor" / "pyproject.toml", words)


# ---- build --render-only: the recipe, the variant files, and what the engine reads itself ----------------------

RENDERED = [
    ("recipe/recipe.yaml", _own_files.RECIPE),
    ("recipe/meta.yaml", _own_files.RECIPE),
    ("recipe/build-flagtree.sh", _own_files.SCRIPT),
    (CPU_PATCH, _own_files.PATCH),
    ("recipe/conda_build_config.yaml", _own_files.VARIANT),
]


def _render_only(recipe_dir: Path, tmp_path: Path, *extra: str) -> Measured:
    return run_capped(
        ["flagtree-feedstock", "build", "--render-only", "--recipe-dir", str(recipe_dir),
         "-e", str(ROOT / "conda_build_config.yaml"), "--output-dir", str(tmp_path / "out"), *extra],
        tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize(("name", "kind", "form"), _cases(RENDERED))
def test_render_only_refuses_each_input_made_hostile(
    name: str, kind: _own_files.Kind, form: str, tmp_path: Path
) -> None:
    copy = feedstock_copy(tmp_path)
    words = damage(copy / name, form, kind, tmp_path / "outside")
    refused(_render_only(copy / "recipe", tmp_path), copy / name, words)
    assert not (tmp_path / "out").exists()


def test_a_file_the_engine_copies_but_the_recipe_never_names(tmp_path: Path) -> None:
    """The engine copies the whole recipe folder into each package and fails on a FIFO there, named or not."""
    copy = feedstock_copy(tmp_path)
    os.mkfifo(copy / "recipe" / "stray")
    line = refused(_render_only(copy / "recipe", tmp_path), copy / "recipe" / "stray", "a pipe (FIFO)")
    assert line == (
        f"flagtree-feedstock: error: {copy / 'recipe' / 'stray'} is a pipe (FIFO): the engine copies the recipe "
        "folder into each package, and takes files and folders only (fix: move stray out of the recipe folder)"
    )


def test_a_link_inside_the_recipe_folder_is_refused_before_the_engine_builds(tmp_path: Path) -> None:
    """Even a link within the repository: the engine copies it into info/recipe as a link, which the package check
    refuses once the build is done ("a package's info/ holds files only"); here it is refused before."""
    recipe = tmp_path / "toy"
    shutil.copytree(RECIPES / "toy-multi", recipe)
    (tmp_path / "notes.txt").write_text("notes\n")
    (recipe / "notes.txt").symlink_to("../notes.txt")
    out = tmp_path / "channel"
    args = build_args(
        "toy-multi", out, *native_args(make_empty_channel(tmp_path / "empty")), "--python", "3.11"
    )
    args[args.index("--recipe-dir") + 1] = str(recipe)
    args[args.index("--exclusive-config-file") + 1] = str(recipe / "conda_build_config.yaml")
    done = run_capped(["flagtree-feedstock", *args], tmp_path)
    line = refused(done, recipe / "notes.txt", "is a symbolic link (to ../notes.txt)")
    assert line.endswith("(fix: replace the link with the file it points to)")
    assert not out.exists()
    assert not list(tmp_path.glob(".channel-staging-*"))


USER_NAMED = [("-m", _own_files.VARIANT), ("-e", _own_files.VARIANT)]


@pytest.mark.parametrize(
    ("option", "kind", "form"), _cases(USER_NAMED, ("dev-zero", "fifo", "folder", "too-large"))
)
def test_a_variant_file_the_user_names_is_refused_by_what_it_is(
    option: str, kind: _own_files.Kind, form: str, tmp_path: Path
) -> None:
    given = tmp_path / "given.yaml"
    shutil.copy(ROOT / "conda_build_config.yaml", given)
    words = damage(given, form, kind, tmp_path / "outside")
    copy = feedstock_copy(tmp_path)
    line = refused(_render_only(copy / "recipe", tmp_path, option, str(given)), given, words)
    if form == "dev-zero":  # no repository to leave: a device, and the link that leads to it
        assert f"variant file {given} is a character device, not a file: it is a link to /dev/zero" in line


def test_a_variant_file_the_user_names_may_lead_out_of_the_repository(tmp_path: Path) -> None:
    """-m is the user's choice: a link to a file anywhere is followed and read (its python alone renders)."""
    elsewhere = tmp_path / "elsewhere" / "python.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text('python:\n  - "3.12"\n')
    given = tmp_path / "given.yaml"
    given.symlink_to(elsewhere)
    copy = feedstock_copy(tmp_path)
    done = _render_only(copy / "recipe", tmp_path, "-m", str(given), "--json")
    assert done.returncode == 0, done.stderr
    pythons = {output["python"] for output in yaml.safe_load(done.stdout)["outputs"] if output["python"]}
    assert pythons == {"3.12"}


# ---- bump: the pins file it rewrites, the recipe, the patches, llvm_distribution.py -----------------------------


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    return make_standins(tmp_path_factory.mktemp("upstream"), pins["llvm_commit"][0])


BUMPED = [
    ("recipe/conda_build_config.yaml", _own_files.VARIANT, FORMS),
    ("recipe/llvm_distribution.py", _own_files.RECIPE_FILE, FORMS),
    ("recipe/recipe.yaml", _own_files.RECIPE, ("fifo", "outside")),
    (
        "patches/flagtree/0001-Make-the-backend-symlinks-that-setup.py-creates-rela.patch",
        _own_files.PATCH,
        ("fifo", "outside"),
    ),
]


@pytest.mark.parametrize(
    ("name", "kind", "form"),
    [pytest.param(n, k, f, id=f"{Path(n).name}-{f}") for n, k, forms in BUMPED for f in forms],
)
def test_bump_refuses_each_input_made_hostile(
    name: str, kind: _own_files.Kind, form: str, standins: Standins, tmp_path: Path
) -> None:
    feedstock = copy_feedstock(tmp_path / "feedstock", standins.pin)
    before = {p: p.read_bytes() for p in feedstock.rglob("*") if p.is_file() and p != feedstock / name}
    words = damage(feedstock / name, form, kind, tmp_path / "outside")
    done = run_capped(
        ["flagtree-feedstock", "bump", "--recipe-dir", str(feedstock / "recipe"), "--flagtree-src",
         str(standins.flagtree), "--to", "only-flagtree"],
        tmp_path,
    )  # fmt: skip
    refused(done, feedstock / name, words)
    assert {p: p.read_bytes() for p in before} == before  # nothing written


def test_bump_reads_the_llvm_source_archive_within_its_bound(standins: Standins, tmp_path: Path) -> None:
    """GitHub's archive of llvm-project, hashed for llvm_sha256 from the one open file: a file over 2 GiB (sparse
    here) is refused before a byte of it is read."""
    feedstock = copy_feedstock(tmp_path / "feedstock", standins.pin)
    archive = tmp_path / "llvm.tar.gz"
    archive.write_bytes(b"")
    damage(archive, "too-large", _own_files.LLVM_SOURCE, tmp_path / "outside")
    done = run_capped(
        ["flagtree-feedstock", "bump", "--recipe-dir", str(feedstock / "recipe"), "--flagtree-src",
         str(standins.flagtree), "--to", "llvm", "--llvm-archive", str(archive)],
        tmp_path,
    )  # fmt: skip
    line = refused(done, archive, f"LLVM source archive {archive} is larger than 2 GiB")
    assert line.endswith("(fix: pass GitHub's archive of llvm-project (about 250 MB))")


# ---- build --llvm-archive: the user's archive, hashed and inspected as a stream ---------------------------------


@pytest.mark.parametrize("form", ["dev-zero", "fifo", "too-large"])
def test_the_llvm_archive_the_user_names_is_refused_by_what_it_is(form: str, tmp_path: Path) -> None:
    archive = tmp_path / "llvm-86b69c31-ubuntu-arm64.tar.gz"
    archive.write_bytes(b"")
    # --llvm-archive-max-size bounds the file as it bounds a download: 1 MiB here.
    small = _own_files.Kind(name=_own_files.LLVM_ARCHIVE.name, limit=1 << 20, missing="", large="")
    words = damage(archive, form, small, tmp_path / "outside")
    copy = feedstock_copy(tmp_path)
    done = _render_only(
        copy / "recipe", tmp_path, "--llvm-archive", str(archive), "--llvm-archive-max-size", "1M"
    )
    line = refused(done, archive, words)
    if form == "too-large":
        assert f"LLVM archive {archive} is larger than 1 MiB" in line


# ---- RATTLER_AUTH_FILE, read when a channel carries credentials ---------------------------------------------------


@pytest.mark.parametrize("form", ["dev-zero", "fifo", "folder", "too-large"])
def test_the_users_authentication_file_is_refused_by_what_it_is(form: str, tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    write_package(channel / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    index_channel(channel)
    auth = tmp_path / "auth.json"
    auth.write_text("{}")
    words = damage(auth, form, _own_files.AUTH, tmp_path / "outside")
    done = run_capped(
        [
            "flagtree-feedstock",
            "channel",
            "install",
            str(channel),
            "toy",
            "-c",
            "http://alice:pw@127.0.0.1:9/c",
        ],
        tmp_path,
        {"RATTLER_AUTH_FILE": str(auth)},
    )
    line = refused(done, auth, words)
    assert "RATTLER_AUTH_FILE" in line.partition("(fix: ")[2], line


# ---- the reader itself: what no console script can stage ------------------------------------------------------


def test_the_engine_renders_the_text_the_reader_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine is handed the recipe's text, not its path to open again: what it renders is what was checked
    (here the reader's text names another version than the file on disk)."""
    from flagtree_feedstock.recipe import render  # noqa: PLC0415 - py-rattler-build, for this test only

    read = render.read_own_text
    monkeypatch.setattr(
        render, "read_own_text", lambda *a, **k: read(*a, **k).replace('  version: "1.0"', '  version: "9.9"')
    )
    recipe = RECIPES / "toy-multi" / "recipe.yaml"
    assert '  version: "1.0"' in recipe.read_text()
    outputs = render.render(recipe, [recipe.parent / "conda_build_config.yaml"], target="linux-64")
    assert {output.version for output in outputs} == {"9.9"}


def test_a_link_that_changes_after_its_check_is_judged_by_what_was_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the reader closes: the link's name is checked, then the link is changed to lead out before the
    open. The place of the file is read again from the open descriptor (/proc/self/fd), never from the name."""
    repository = tmp_path / "repository"
    (repository / "recipe").mkdir(parents=True)
    (repository / "recipe" / "recipe.yaml").write_text("inside\n")
    (tmp_path / "secret").write_text("this machine's file\n")
    link = repository / "recipe" / "link.yaml"
    link.symlink_to("recipe.yaml")
    real = os.path.realpath

    def checked_then_changed(path: object) -> str:
        resolved = real(path)  # type: ignore[call-overload]
        if Path(str(path)) == link:  # the name's check sees the link as it was, then it changes
            link.unlink()
            link.symlink_to(tmp_path / "secret")
        return resolved

    monkeypatch.setattr(_own_files.os.path, "realpath", checked_then_changed)
    with pytest.raises(
        ConfigurationError, match=f"is a link to {tmp_path / 'secret'}, outside this repository"
    ):
        _own_files.read_own(link, _own_files.RECIPE, inside=repository)


def test_a_file_whose_size_the_kernel_does_not_say_is_read_to_the_bound_only() -> None:
    """Files of /proc are regular and of size 0: the bound holds on what is read, not only on what fstat says."""
    small = _own_files.Kind(name="status file", limit=64, missing="", large="a status is short")
    assert Path("/proc/self/status").stat().st_size == 0
    with pytest.raises(ConfigurationError, match="status file /proc/self/status is larger than 64 bytes"):
        _own_files.read_own(Path("/proc/self/status"), small)
