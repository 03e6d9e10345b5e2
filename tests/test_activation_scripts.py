"""Package code runs only where named (issue 47, its hole 8): a package of a build's environments whose activation
scripts (``etc/conda/activate.d/*``, ``deactivate.d/*``, ``env_vars.d/*``) the engine would run as it activates
the environment is refused by `build` in one line, as one with link scripts is, unless it is allowed by name:
by ``--allow-link-scripts NAME`` or by the recipe folder's ``allowed_package_scripts.txt``.

The reproduction: toy-host's host requirement toy-dep carries ``etc/conda/activate.d/x.sh``, which writes a
file outside the prefix, where the test looks for it. The rehearsal's stand-in compilers carry activation
scripts as conda-forge's do, so the repository's own list is exercised by every rehearsal build, and a list
that lacks one of them stops the build in one line.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from rattler.index import index_fs

from _hostile_packages import channel_with, package_with_files
from _rehearsal import build, copy_recipe, write_variants
from _rehearsal_sources import Sources
from _toy import RECIPES, build_args, error_line, native_args, run_toolkit
from flagtree_feedstock.channel.link_scripts import activation_scripts
from flagtree_feedstock.channel.repack import REPACK_RULES
from flagtree_feedstock.errors import ChannelError, ConfigurationError
from flagtree_feedstock.recipe.package_scripts import FILE_NAME, allowed_by_recipe

SCRIPT = "etc/conda/activate.d/x.sh"


def _toy_dep(tmp_path: Path, planted: Path, script: str = SCRIPT) -> tuple[Path, Path]:
    """A local channel holding toy-dep (toy-host's host requirement), whose ``script`` writes ``planted``
    when the environment is activated; it holds ``share/toy-dep.txt`` too (toy-host copies it)."""
    files = {
        script: f'printf "activated %s\\n" "$PKG_NAME" > "{planted}"\n'.encode(),
        "share/toy-dep.txt": b"dep\n",
    }
    channel, package = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", package_with_files("toy-dep", files))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel, package


def _refusal(where: Path, script: str) -> str:
    return (
        f"flagtree-feedstock: error: {where} (toy-dep) carries the activation script {script!r}, which the build "
        "would run as it activates its environment: refused, and was not used (fix: if you trust toy-dep to run "
        "its own code on this machine, allow it: --allow-link-scripts toy-dep)"
    )


def test_activation_scripts_match_every_form_and_nothing_else() -> None:
    paths = [
        "etc/conda/activate.d/x.sh",
        "etc/conda/activate.d/x.fish",
        "etc/conda/deactivate.d/x.bat",
        "etc/conda/env_vars.d/x.json",
        "etc/conda/activate.d/deep/y",
        "ETC/Conda/Activate.d/x.SH",
        "etc/conda/activate.d",  # a symlink there brings another folder's files in
        "etc/conda",
        "etc",
        "conda-meta/state",
        "etc/conda/activate.dx/x.sh",
        "etc/conda/other.d/x.sh",
        "share/etc/conda/activate.d/x.sh",
        "etc/x.sh",
        "bin/tool",
    ]
    assert activation_scripts(paths) == tuple(sorted(paths[:10]))


@pytest.mark.parametrize("allow", ["option", "environment"])
def test_a_build_refuses_a_host_requirement_with_an_activation_script_and_lets_it_run_when_allowed(
    allow: str, tmp_path: Path
) -> None:
    """The engine activates the host environment before the build script: the build refuses the package before
    the engine installs it; allowed by name, the engine runs its script."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = _toy_dep(tmp_path, planted)
    out = tmp_path / "out"
    argv = build_args("toy-host", out, *native_args(channel))
    refused = run_toolkit(argv, tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, SCRIPT)
    assert not planted.exists()
    assert not list(out.rglob("*.conda"))
    if allow == "option":
        allowed = run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path)
    else:
        allowed = run_toolkit(argv, tmp_path, FLAGTREE_FEEDSTOCK_ALLOW_LINK_SCRIPTS="toy-dep")
    assert allowed.returncode == 0, allowed.stderr
    assert planted.read_text() == "activated toy-host\n"


@pytest.mark.parametrize("script", ["etc/conda/deactivate.d/x.sh", "etc/conda/env_vars.d/x.json"])
def test_a_build_refuses_deactivation_scripts_and_activation_variables(script: str, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    channel, package = _toy_dep(tmp_path, planted, script)
    refused = run_toolkit(build_args("toy-host", tmp_path / "out", *native_args(channel)), tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, script)


def _recipe_with_list(tmp_path: Path, listed: str) -> list[str]:
    """A copy of toy-host's folder whose allowed_package_scripts.txt holds ``listed``, built by the toolkit."""
    recipe = tmp_path / "repository" / "recipe"
    shutil.copytree(RECIPES / "toy-host", recipe)
    (recipe / FILE_NAME).write_text(f"# the recipe's own list\n\n{listed}")
    argv = build_args("toy-host", tmp_path / "out")
    argv[argv.index("--recipe-dir") + 1] = str(recipe)
    argv[argv.index("--exclusive-config-file") + 1] = str(recipe / "conda_build_config.yaml")
    return argv


def test_the_recipe_folder_s_list_allows_a_package_with_no_option(tmp_path: Path) -> None:
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, _ = _toy_dep(tmp_path, planted)
    argv = _recipe_with_list(tmp_path, "toy-dep: the toy's host requirement, activated on purpose\n")
    allowed = run_toolkit([*argv, *native_args(channel)], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert planted.read_text() == "activated toy-host\n"


@pytest.mark.parametrize(
    ("listed", "why"),
    [
        ("toy-dep\n", "'toy-dep' is not 'NAME: REASON' (a lowercase package name)"),
        ("toy-dep:   \n", "toy-dep has no reason"),
        ("toy-dep: one\ntoy-dep: two\n", "toy-dep is listed twice"),
    ],
)
def test_a_malformed_list_stops_the_build_in_one_line(listed: str, why: str, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    channel, _ = _toy_dep(tmp_path, planted)
    argv = _recipe_with_list(tmp_path, listed)
    refused = run_toolkit([*argv, *native_args(channel)], tmp_path)
    assert refused.returncode == 2, refused.stderr
    line = listed.count("\n") + 2  # after the comment and the blank line
    path = tmp_path / "repository" / "recipe" / FILE_NAME
    assert error_line(refused.stderr).startswith(
        f"flagtree-feedstock: error: {path}, line {line}: {why} (fix: "
    )
    assert not planted.exists()


def test_a_list_that_leads_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    """The list is read as every repository file is (_own_files.py): a link that leaves the repository is not
    followed, so a list elsewhere cannot allow a package. The build refuses any link in the recipe folder first
    (engine_inputs.py); the reader refuses it on its own as well."""
    planted = tmp_path / "planted"
    channel, _ = _toy_dep(tmp_path, planted)
    argv = _recipe_with_list(tmp_path, "")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("toy-dep: from outside the repository\n")
    listed = tmp_path / "repository" / "recipe" / FILE_NAME
    listed.unlink()
    listed.symlink_to(elsewhere)
    refused = run_toolkit([*argv, *native_args(channel)], tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "a package's info/ holds no links" in error_line(refused.stderr)
    assert not planted.exists()
    with pytest.raises(ConfigurationError, match=f"^recipe file {re.escape(str(listed))} .*this repository"):
        allowed_by_recipe(listed.parent)


def test_a_cached_copy_whose_record_predates_activation_scripts_is_made_again(tmp_path: Path) -> None:
    """A cache entry written before its record said which activation scripts the copy carries is no entry: a
    build does not take its silence for none."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = _toy_dep(tmp_path, planted)
    out = tmp_path / "out"
    argv = build_args("toy-host", out, *native_args(channel))
    assert run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path).returncode == 0
    (record,) = (tmp_path / f".{out.name}-repacked").glob(f"rules-{REPACK_RULES}/*/toy-dep-1-0.tar.bz2.json")
    kept = json.loads(record.read_text())
    assert kept["activation_scripts"] == [SCRIPT]
    record.write_text(json.dumps({key: value for key, value in kept.items() if key != "activation_scripts"}))
    planted.unlink()
    refused = run_toolkit([*argv, "--force"], tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, SCRIPT)
    assert not planted.exists()


@pytest.mark.rehearsal
def test_the_rehearsal_stops_in_one_line_when_the_repository_s_list_lacks_a_compiler(
    tmp_path: Path, stub_channel: Path, sources: Sources
) -> None:
    """The stand-in gxx_linux-aarch64 carries activate-gxx_linux-aarch64.sh, as conda-forge's does: without its
    line in recipe/allowed_package_scripts.txt, the first build of the real recipe stops before the engine
    installs anything."""
    root = copy_recipe(tmp_path / "copy")
    listed = root / "recipe" / FILE_NAME
    lines = listed.read_text().splitlines(keepends=True)
    listed.write_text("".join(line for line in lines if not line.startswith("gxx_linux-aarch64:")))
    variant_file = write_variants(root, sources, tmp_path / "variants.yaml")
    with pytest.raises(ChannelError) as refused:
        build(root, variant_file, tmp_path / "channel", stub_channel, names=["flagtree-llvm"], test=False)
    message = str(refused.value)
    assert "\n" not in message
    assert "(gxx_linux-aarch64) carries the activation script " in message
    assert "'etc/conda/activate.d/activate-gxx_linux-aarch64.sh'" in message
    assert not list((tmp_path / "channel").rglob("*.conda"))


def test_a_package_only_a_test_requires_is_refused_for_its_activation_script_and_runs_when_allowed(
    tmp_path: Path,
) -> None:
    """The engine activates each test's environment too (builder/package_tests.py): toy-test-dep's test alone
    requires toy-dep, whose activation script writes outside every prefix; refused in one line before the test
    call, and run by the test once allowed by name."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = _toy_dep(tmp_path, planted)
    out = tmp_path / "out"
    argv = build_args("toy-test-dep", out, "--target-platform", "linux-64", "--channel", channel.as_uri())
    refused = run_toolkit(argv, tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, SCRIPT)
    assert not planted.exists()
    assert not list(out.rglob("*.conda")), "an untested package is not published"
    allowed = run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert (
        planted.read_text() == "activated toy-test-dep\n"
    )  # the test's environment, activated for its package
