"""The main job end to end on toy recipes: real py-rattler-build renders and builds, offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _toy import RECIPES, build_args, error_line, leftovers, native_args
from flagtree_feedstock import _engine
from flagtree_feedstock.cli import main
from flagtree_feedstock.errors import ToolMissingError
from flagtree_feedstock.recipe.render import render
from flagtree_feedstock.recipe.sources import Source
from flagtree_feedstock.recipe.variants import variant_files

ROOT = Path(__file__).resolve().parents[1]
TOY = RECIPES / "toy-multi"


def _table_rows(text: str) -> list[list[list[str]]]:
    """The body rows of each table rich printed, as lists of cell texts (folded cells joined)."""
    tables: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("┡"):
            rows = []
            tables.append(rows)
        elif line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            if cells[0] or not rows:
                rows.append(cells)
            else:  # a folded continuation line
                rows[-1] = [f"{a}{b}" if b else a for a, b in zip(rows[-1], cells, strict=True)]
    return tables


def test_render_only_lists_each_package_once_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, "--render-only")) == 0
    stdout = capsys.readouterr().out
    packages, pins = _table_rows(stdout)
    assert [(r[0], r[3], r[4]) for r in packages] == [
        ("toy-llvm", "-", "4"),
        *(("toy-py", python, "1") for python in ("3.10", "3.11", "3.12", "3.13")),
    ]
    assert all(r[2].startswith(f"py{r[3].replace('.', '')}h") for r in packages[1:])
    assert pins == [
        ["llvm_commit", "1234567890ab", "toy-llvm, toy-py"],
        ["flagtree_commit", "abcdefabcdef", "toy-py"],
    ]
    assert stdout.splitlines()[-1] == "8 rendered outputs -> 5 packages to build"
    assert not out.exists()


CHOICES = {
    "python": (
        ("--python", "3.9"),
        "--python 3.9 is not in the variant file's python matrix (fix: choose from 3.10, 3.11, 3.12, 3.13)",
    ),
    "output": (
        ("--output", "nosuchpkg"),
        "--output nosuchpkg is not an output of the recipe (fix: choose from toy-llvm, toy-py)",
    ),
}


@pytest.mark.parametrize("choice", list(CHOICES))
@pytest.mark.parametrize(
    "mode", [("--render-only",), ("--render-only", "--json"), ()], ids=["render", "json", "build"]
)
def test_python_and_output_choices_are_checked_before_anything_else(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    choice: str,
    mode: tuple[str, ...],
) -> None:
    """As a render, and as a build on a host that cannot build the target: the choice is named first."""
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-64")
    options, message = CHOICES[choice]
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *mode, *options)) == 2
    captured = capsys.readouterr()
    assert error_line(captured.err) == f"flagtree-feedstock: error: {message}"
    assert captured.out == ""
    assert leftovers(out) == []


def test_render_only_shows_only_the_python_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, "--render-only", "--python", "3.12")) == 0
    stdout = capsys.readouterr().out
    packages, _ = _table_rows(stdout)
    assert [(r[0], r[3]) for r in packages] == [("toy-llvm", "-"), ("toy-py", "3.12")]
    assert stdout.splitlines()[-1] == (
        "8 rendered outputs, 5 selected by --python/--output -> 2 packages to build"
    )
    args = build_args("toy-multi", out, "--render-only", "--json", "--python", "3.12", "--output", "toy-py")
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(o["name"], o["python"]) for o in document["outputs"]] == [("toy-py", "3.12")]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--json",), "--json works only with --render-only (fix: add --render-only or drop --json)"),
        (
            ("--tool", "conda-build", "--output", "toy-py"),
            "--output works only with --tool rattler-build, not conda-build (fix: drop --output)",
        ),
        (
            ("--tool", "mamba"),
            "--tool 'mamba' is not supported (fix: use one of boa, conda-build, rattler-build)",
        ),
        (
            ("--tool", "conda-build", "--channel", "file:///nonexistent-channel"),
            (
                "channel file:///nonexistent-channel: folder /nonexistent-channel does not exist "
                "(fix: pass --channel an existing channel folder or a channel name)"
            ),
        ),
    ],
    ids=["json-without-render-only", "output-with-conda-build", "unknown-tool", "missing-channel-folder"],
)
def test_options_that_cannot_work_are_named_before_the_host_check(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    options: tuple[str, ...],
    message: str,
) -> None:
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-64")
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *options)) == 2
    assert error_line(capsys.readouterr().err) == f"flagtree-feedstock: error: {message}"
    assert leftovers(out) == []


@pytest.mark.parametrize("recipe", ["toy", "real"])
def test_render_table_is_not_wrapped_when_piped(recipe: str, tmp_path: Path) -> None:
    """As a user sees it through a pipe (`| less`, CI logs): one line per package, every cell whole, however
    narrow COLUMNS says the terminal is (a pipe has none)."""
    args = ["build", "--render-only"]
    if recipe == "toy":
        args = build_args("toy-multi", tmp_path / "channel", "--render-only")
    env = {**os.environ, "COLUMNS": "40"}
    result = subprocess.run(
        [sys.executable, "-m", "flagtree_feedstock", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=True,
    )
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert all(line.split("│")[1].strip() for line in rows), result.stdout  # no folded continuation line
    packages, _ = _table_rows(result.stdout)
    recipe_dir = TOY if recipe == "toy" else ROOT / "recipe"
    matrix = render(
        recipe_dir / "recipe.yaml",
        variant_files(recipe_dir, ((TOY if recipe == "toy" else ROOT) / "conda_build_config.yaml",)),
        target="linux-aarch64",
    )
    expected = {}
    for output in matrix:
        expected[output.name, output.build_string] = expected.get((output.name, output.build_string), 0) + 1
    assert {(r[0], r[2]): int(r[4]) for r in packages} == expected
    assert len(packages) == len(expected)  # one row per distinct package


def test_render_only_json_is_versioned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(build_args("toy-multi", tmp_path / "channel", "--render-only", "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    assert next(iter(document)) == "schema_version"  # first, as in flagtree-doctor's and flagtree-verify's
    assert document["schema_version"] == "2"
    assert "version" not in document  # the old name of the key is gone, not kept beside it
    llvm = {o["build_string"] for o in document["outputs"] if o["name"] == "toy-llvm"}
    pythons = [o["python"] for o in document["outputs"] if o["name"] == "toy-py"]
    assert len(llvm) == 1
    assert pythons == ["3.10", "3.11", "3.12", "3.13"]
    pins = {(o["name"], tuple(sorted(o["pins"].items()))) for o in document["outputs"]}
    llvm_pin = ("llvm_commit", "1234567890abcdef1234567890abcdef12345678")
    # toy-py pins toy-llvm exactly, so it shows LLVM's pin too.
    assert pins == {
        ("toy-llvm", (llvm_pin,)),
        ("toy-py", (("flagtree_commit", "abcdefabcdefabcdefabcdefabcdefabcdefabcd"), llvm_pin)),
    }


def test_build_makes_the_shared_output_once_and_indexes_the_channel(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *native_args(empty_channel))) == 0
    assert log.read_text().splitlines() == [
        "toy-llvm",
        "toy-py 3.10",
        "toy-py 3.11",
        "toy-py 3.12",
        "toy-py 3.13",
    ]
    packages = sorted(p.name for p in (out / "linux-64").glob("*.conda"))
    assert len(packages) == 5
    assert sum(name.startswith("toy-llvm-") for name in packages) == 1
    repodata = json.loads((out / "linux-64" / "repodata.json").read_text())
    assert sorted(repodata["packages.conda"]) == packages
    assert (out / "noarch" / "repodata.json").is_file()
    captured = capsys.readouterr()
    assert f"conda install -c {out.as_uri()} -c conda-forge toy-llvm toy-py" in captured.out
    for package in packages:  # each landing shown as the build is, its bar (MiB done/total) left at its end
        assert re.search(rf"^landed {re.escape(package)} +\d+/\d+ ", captured.err, re.MULTILINE), captured.err
    assert leftovers(out) == sorted(
        [
            "linux-64",
            "noarch",
            "linux-64/repodata.json",
            "noarch/repodata.json",
            *(f"linux-64/{p}" for p in packages),
        ]
    )


def test_a_second_run_reuses_what_the_channel_holds(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *native_args(empty_channel), "--python", "3.11")) == 0
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.11"]
    capsys.readouterr()
    # A later run (another CI job with this channel downloaded, say) builds only the missing python.
    assert (
        main(
            build_args("toy-multi", out, *native_args(empty_channel), "--python", "3.11", "--python", "3.13")
        )
        == 0
    )
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.11", "toy-py 3.13"]
    assert "built 1 package(s)" in capsys.readouterr().out


def test_outputs_build_in_separate_runs_like_ci_jobs(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, *native_args(empty_channel), "--output", "toy-llvm")) == 0
    assert log.read_text().splitlines() == ["toy-llvm"]
    assert (
        main(
            build_args(
                "toy-multi", out, *native_args(empty_channel), "--output", "toy-py", "--python", "3.12"
            )
        )
        == 0
    )
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.12"]


def test_bad_variant_file_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("bad-variants", out, "--render-only")) == 2
    line = error_line(capsys.readouterr().err)
    assert "bad-variants/conda_build_config.yaml is not a valid conda_build_config.yaml" in line
    assert line.endswith("(fix: correct the YAML (every key maps to a list of values))")
    assert leftovers(out) == []


def test_missing_variant_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_args("toy-multi", tmp_path / "channel", "--render-only")
    args[args.index("--exclusive-config-file") + 1] = str(tmp_path / "nope.yaml")
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: variant file {tmp_path / 'nope.yaml'} does not exist "
        "(fix: correct the path (--variant-config FILE adds a file; the root conda_build_config.yaml is read "
        "from the current folder, or from --exclusive-config-file FILE))"
    )


def test_bad_recipe_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(build_args("bad-recipe", tmp_path / "channel", "--render-only")) == 2
    assert "does not render for linux-aarch64: missing required field 'version'" in error_line(
        capsys.readouterr().err
    )


def test_unfetchable_source_names_the_url_and_leaves_nothing(
    tmp_path: Path, empty_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("bad-source", out, *native_args(empty_channel))) == 6
    line = error_line(capsys.readouterr().err)
    assert "a source of toy-bad-source 1.0" in line
    assert "http://127.0.0.1:9/toy-bad-source-1.0.tar.gz" in line
    assert leftovers(out) == []


def test_patch_that_does_not_apply_is_named(
    tmp_path: Path, empty_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("bad-patch", out, *native_args(empty_channel))) == 8
    line = error_line(capsys.readouterr().err)
    assert "a patch of toy-bad-patch 1.0" in line
    assert "(drifted.patch)" in line
    assert "could not find context" in line
    assert leftovers(out) == []


def test_licence_file_the_script_moved_is_named(
    tmp_path: Path, empty_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("bad-licence", out, *native_args(empty_channel))) == 8
    line = error_line(capsys.readouterr().err)
    assert "building toy-bad-licence 1.0" in line
    assert "not in the work folder after the build script: sub/LICENSE.txt (fix: " in line
    assert leftovers(out) == []


def test_keep_build_keeps_the_failed_work_folder(
    tmp_path: Path, empty_channel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "channel"
    assert main(build_args("bad-script", out, *native_args(empty_channel), "--keep-build")) == 8
    err = capsys.readouterr().err
    (kept,) = tmp_path.glob(".channel-staging-*")
    assert f"kept the failed build's work folders for inspection: {kept}" in err
    assert list(kept.glob("bld/*/work")), "the engine's work folder is there to inspect"
    # The first output, finished before the failure, is in the channel folder; nothing of the second.
    assert [p.name.split("-1.0-")[0] for p in (out / "linux-64").glob("*.conda")] == ["toy-good-first"]


def test_host_that_cannot_build_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-64")
    out = tmp_path / "channel"
    assert main(build_args("toy-multi", out, "--target-platform", "linux-aarch64")) == 5
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: this host is linux-64 and cannot build linux-aarch64 natively "
        "(fix: run on a linux-aarch64 machine, or pass --build-platform linux-64 for a cross build)"
    )
    assert leftovers(out) == []


def test_unindexed_local_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    out = tmp_path / "channel"
    assert (
        main(build_args("toy-multi", out, "--target-platform", "linux-64", "--channel", bare.as_uri())) == 2
    )
    assert f"channel {bare.as_uri()} is not an indexed channel folder" in error_line(capsys.readouterr().err)
    assert leftovers(out) == []


def test_missing_engine_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(module: str, distribution: str) -> None:
        raise ToolMissingError(
            f"{distribution} is not installed", fix="pip install 'flagtree-feedstock[build]'"
        )

    monkeypatch.setattr(_engine, "require", missing)
    monkeypatch.setattr("flagtree_feedstock.recipe.render.require", missing)
    assert main(build_args("toy-multi", tmp_path / "channel", "--render-only")) == 4
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: py-rattler-build is not installed (fix: pip install 'flagtree-feedstock[build]')"
    )


def test_conda_build_tool_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no conda, no conda-build on this PATH
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-64")
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text("package: {name: toy, version: '1.0'}\n")
    (recipe / "recipe.yaml").write_text((RECIPES / "toy-multi" / "recipe.yaml").read_text())
    out = tmp_path / "channel"
    args = [
        "build",
        "--recipe-dir",
        str(recipe),
        "--exclusive-config-file",
        str(RECIPES / "toy-multi" / "conda_build_config.yaml"),
        "--output-dir",
        str(out),
        "--target-platform",
        "linux-64",
        "--tool",
        "conda-build",
    ]
    assert main(args) == 4
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: conda-build is not on PATH "
        "(fix: conda install -n base conda-build, or use the default --tool rattler-build)"
    )
    assert leftovers(out) == []


@pytest.mark.parametrize(
    ("extra", "emulator", "strategy"),
    [
        ((), None, "native"),
        (("--no-test",), "/usr/bin/qemu-aarch64-static", "skip"),
        (("--target-platform", "linux-aarch64", "--build-platform", "linux-64"), None, "native"),
        (
            ("--target-platform", "linux-aarch64", "--build-platform", "linux-64"),
            "/usr/bin/qemu-aarch64-static",
            "native-and-emulated",
        ),
    ],
)
def test_cross_builds_run_their_tests_only_under_an_emulator(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: tuple[str, ...],
    emulator: str | None,
    strategy: str,
) -> None:
    from flagtree_feedstock.builder import run as build_run  # noqa: PLC0415

    seen = []
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-64")
    monkeypatch.setattr(build_run, "run_plan", lambda plan, settings, **_: seen.append(settings) or [])
    if emulator:
        monkeypatch.setenv("CROSSCOMPILING_EMULATOR", emulator)
    else:
        monkeypatch.delenv("CROSSCOMPILING_EMULATOR", raising=False)
    args = build_args("toy-multi", tmp_path / "channel", "--target-platform", "linux-64", *extra)
    assert main(args) == 0
    (settings,) = seen
    assert settings.test_strategy == strategy
    import rattler_build  # noqa: PLC0415

    rattler_build.ToolConfiguration(test_strategy=settings.test_strategy)  # the engine accepts the name


def test_python_variable_is_validated_like_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLAGTREE_FEEDSTOCK_PYTHON", "3.9")
    assert main(build_args("toy-multi", tmp_path / "channel", "--render-only")) == 2
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: --python 3.9 is not in the variant file's python matrix "
        "(fix: choose from 3.10, 3.11, 3.12, 3.13)"
    )
    monkeypatch.setenv("FLAGTREE_FEEDSTOCK_PYTHON", "3.11")
    assert main(build_args("toy-multi", tmp_path / "channel", "--render-only")) == 0
    packages, _ = _table_rows(capsys.readouterr().out)
    assert [r[3] for r in packages] == ["-", "3.11"]


def test_missing_recipe_names_the_option_that_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_args("toy-multi", tmp_path / "channel", "--render-only")
    args[args.index("--recipe-dir") + 1] = str(tmp_path / "nope")
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: recipe {tmp_path / 'nope' / 'recipe.yaml'} does not exist "
        "(fix: pass --recipe-dir DIR, the folder holding recipe.yaml)"
    )


def test_a_build_script_gets_only_what_the_recipe_passes(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rattler-build's clean build environment, as flagtree-cpu's compiler cache relies on it."""
    report = tmp_path / "env.txt"
    monkeypatch.setenv("TOY_ENV_REPORT", str(report))
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    monkeypatch.setenv("TOY_NOT_PASSED", "leaked")
    assert main(build_args("toy-script-env", tmp_path / "channel", *native_args(empty_channel))) == 0
    seen = dict(line.split("=", 1) for line in report.read_text().splitlines())
    assert seen["CCACHE_DIR"] == str(tmp_path / "ccache")  # passed by the recipe's script env
    assert seen["TOY_NOT_PASSED"] == "<unset>"  # the rest of the caller's environment is not
    # One folder per build holds the work folder and both prefixes: build-flagtree.sh's CCACHE_BASEDIR.
    parents = {Path(seen[name]).parent for name in ("SRC_DIR", "PREFIX", "BUILD_PREFIX")}
    assert len(parents) == 1


def test_render_only_names_each_patched_source_with_its_patch_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sources section of the real recipe: FlagTree with its series, flagtree-cpu with its own, in English."""
    monkeypatch.chdir(ROOT)
    assert main(["build", "--render-only", "--python", "3.12"]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = {
        name: len(list((ROOT / "patches" / name).glob("*.patch"))) for name in ("flagtree", "flagtree-cpu")
    }
    assert counts["flagtree-cpu"] > 1 and counts["flagtree"] > 1
    assert f"    . (git, {counts['flagtree']} patches)" in lines
    assert f"    third_party/flagtree-cpu (git, {counts['flagtree-cpu']} patches)" in lines
    assert "    sleef (git)" in lines


def test_a_source_with_one_patch_says_patch() -> None:
    """The singular, which the real recipe no longer shows (each series has more than one patch)."""
    source = Source(kind="git", location="file:///x", pin="0" * 40, folder="third_party/x", patches=1)
    assert source.lines()[0] == "    third_party/x (git, 1 patch)"
