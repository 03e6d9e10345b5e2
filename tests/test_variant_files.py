"""The variant files: both are read, in conda-build's order, and checked before anything renders.

Every bad input goes through the CLI (`flagtree_feedstock.cli.main`) on a copy of the real recipe folder and
variant files, and must end in exactly one line and exit status 2.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from _recipe_support import RECIPE_DIR, ROOT, SHARED, VARIANT_FILES, variants
from flagtree_feedstock.cli import main
from flagtree_feedstock.recipe.render import render

GLOBAL, OWN = VARIANT_FILES
PINNING = SHARED / "data" / "conda-forge-pinning.yaml"
FEEDSTOCK_PINS = (
    "flagtree_version",
    "flagtree_commit",
    "llvm_commit",
    "llvm_sha256",
    "flagtree_cpu_commit",
    "sleef_commit",
)


class Copy:
    """The recipe folder (recipe.yaml, meta.yaml, its conda_build_config.yaml) and the global file, in tmp."""

    def __init__(self, root: Path) -> None:
        self.recipe_dir = root / "recipe"
        self.recipe_dir.mkdir()
        for name in ("recipe.yaml", "meta.yaml", "conda_build_config.yaml"):
            shutil.copy(RECIPE_DIR / name, self.recipe_dir / name)
        self.global_file = root / "conda_build_config.yaml"
        shutil.copy(GLOBAL, self.global_file)
        self.own = self.recipe_dir / "conda_build_config.yaml"
        self.recipes = f"{self.recipe_dir / 'recipe.yaml'} and {self.recipe_dir / 'meta.yaml'}"

    def edit(self, path: Path, old: str, new: str) -> int:
        """Replace ``old`` (once) in ``path``; return the 1-based line where ``new`` starts."""
        text = path.read_text()
        assert text.count(old) == 1, old
        path.write_text(text.replace(old, new))
        return text[: text.index(old)].count("\n") + 1

    def append(self, path: Path, text: str) -> int:
        """Append ``text`` to ``path``; return the 1-based line where it starts."""
        before = path.read_text()
        path.write_text(before + text)
        return before.count("\n") + 1

    def run(self, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
        code = main(
            [
                "build",
                "--render-only",
                "--recipe-dir",
                str(self.recipe_dir),
                "--exclusive-config-file",
                str(self.global_file),
                "--target-platform",
                "linux-aarch64",
                *extra,
            ]
        )
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("flagtree-feedstock: error:")]
        assert len(errors) <= 1, err
        assert "Traceback" not in err
        return code, (errors[0] if errors else "")

    def fails(self, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
        """The one error line of a run that must exit 2 (bad input)."""
        code, line = self.run(capsys, *extra)
        assert code == 2, line
        return line


@pytest.fixture
def copy(tmp_path: Path) -> Copy:
    return Copy(tmp_path)


def _line_of(path: Path, key: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(f"{key}:"))


def test_the_copy_renders(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    assert copy.run(capsys) == (0, "")


def test_misspelt_key_names_the_file_line_and_the_key_meant(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    line = copy.append(copy.own, 'sleef_comit:\n  - "93f04d869471ce4d007abaebb8c6a7bc62749f61"\n')
    assert copy.fails(capsys, "--strict") == (
        f"flagtree-feedstock: error: {copy.own}:{line}: unknown variant key sleef_comit "
        f"(fix: did you mean sleef_commit, which {copy.recipes} use?)"
    )


def test_a_key_set_twice_in_a_file_is_named_at_both_lines(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    """rattler-build refuses it at a line of its own count (line 16 for a key at lines 20 and 49): our check
    comes first and names both lines."""
    first = _line_of(copy.own, "flagtree_commit")
    pinned = yaml.safe_load(copy.own.read_text())["flagtree_commit"][0]
    line = copy.append(copy.own, f'flagtree_commit:\n  - "{pinned}"\n')
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: {copy.own}:{line}: flagtree_commit is set a second time in this file "
        f"(first at line {first}) (fix: keep one flagtree_commit: entry)"
    )


def test_unknown_key_in_the_global_file(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    line = copy.append(copy.global_file, 'numpy:\n  - "2"\n')
    assert copy.fails(capsys, "--strict") == (
        f"flagtree-feedstock: error: {copy.global_file}:{line}: unknown variant key numpy "
        f"(fix: remove it: {copy.recipes} do not use it)"
    )


def test_missing_pin_names_the_key_and_what_it_must_be(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    copy.edit(copy.own, 'flagtree_cpu_commit:\n  - "19cede7e753ca6eed75c15f8ae782bf41eb00c3d"\n', "")
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: no variant file sets flagtree_cpu_commit, which {copy.recipes} use "
        f"(fix: add flagtree_cpu_commit with a full git commit (40 hex digits) to {copy.global_file} or "
        f"{copy.own})"
    )


def test_missing_python_list(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    text = copy.global_file.read_text()
    block = re.search(r"python:\n(  - .*\n)+", text)
    assert block is not None
    copy.edit(copy.global_file, block[0], "")
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: no variant file sets python, which {copy.recipes} use "
        f'(fix: add python with a list of python versions, e.g. "3.12.* *_cpython" to {copy.global_file} or '
        f"{copy.own})"
    )


def test_empty_python_list(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    text = copy.global_file.read_text()
    block = re.search(r"python:\n(  - .*\n)+", text)
    assert block is not None
    line = copy.edit(copy.global_file, block[0], "python: []\n")
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: {copy.global_file}:{line}: python is an empty list "
        '(fix: make python a list of python versions, e.g. "3.12.* *_cpython")'
    )


COMMIT = "a full git commit (40 hex digits)"
SHA256 = "a sha256 (64 hex digits)"
SLEEF = "93f04d869471ce4d007abaebb8c6a7bc62749f61"  # the real pin, for near misses of it


@pytest.mark.parametrize(
    ("key", "value", "expected", "reason"),
    [
        ("sleef_commit", "93f04d8", COMMIT, ": it has 7 hex digits"),
        ("flagtree_commit", "v0.6.0", COMMIT, ""),
        ("llvm_sha256", SLEEF, SHA256, ": it has 40 hex digits, the length of a git commit"),
        # Near misses: a sha256 where a commit belongs, upper case, a trailing space, a digit short.
        ("sleef_commit", "10eb1d36aabbc5d31c9d2af27844f51638d40be28975a4ab20ad13609f7da23d", COMMIT,
         ": it has 64 hex digits, the length of a sha256"),
        ("sleef_commit", SLEEF.upper(), COMMIT, ": it has upper-case letters (write it in lower case)"),
        ("sleef_commit", f"{SLEEF} ", COMMIT, ": it has spaces around it"),
        ("sleef_commit", SLEEF[:39], COMMIT, ": it has 39 hex digits"),
    ],
    ids=["short", "tag", "commit-as-sha256", "sha256-as-commit", "upper-case", "trailing-space", "39-digits"],
)  # fmt: skip
def test_pin_that_is_not_a_full_hash(
    copy: Copy, capsys: pytest.CaptureFixture[str], *, key: str, value: str, expected: str, reason: str
) -> None:
    line = _line_of(copy.own, key) + 1
    copy.edit(copy.own, f'{key}:\n  - "{variants()[key][0]}"\n', f'{key}:\n  - "{value}"\n')
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: {copy.own}:{line}: {key} is {value!r}, not {expected}{reason} "
        f"(fix: pin {key} to {expected})"
    )


def test_every_problem_is_reported_on_one_line(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    misspelt = copy.append(copy.own, 'llvm_comit:\n  - "a66376b0dc3b2ea8a84fda26faca287980986f78"\n')
    copy.edit(copy.own, 'sleef_commit:\n  - "93f04d869471ce4d007abaebb8c6a7bc62749f61"\n', "")
    code, line = copy.run(capsys, "--strict")
    assert code == 2
    assert line == (
        f"flagtree-feedstock: error: {copy.own}:{misspelt - 2}: unknown variant key llvm_comit "
        f"(fix: did you mean llvm_commit, which {copy.recipes} use?); "
        f"no variant file sets sleef_commit, which {copy.recipes} use "
        f"(fix: add sleef_commit with a full git commit (40 hex digits) to {copy.global_file} or {copy.own})"
    )


def test_zip_keys_of_key_names(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    line = copy.append(copy.global_file, "zip_keys:\n  - python\n  - [python_min]\n")
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: {copy.global_file}:{line + 1}: zip_keys is not a list of lists of keys "
        "(fix: write each group of zipped keys as a list, e.g. - [c_compiler_version, cxx_compiler_version])"
    )


def test_engine_error_is_one_line_with_file_line_and_variable(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    # A filter the engine does not know: nothing a variant file check can see, so the engine reports it.
    line = copy.edit(
        copy.recipe_dir / "recipe.yaml",
        "  version: ${{ version }}\n",
        "  version: ${{ flagtree_version | no_such_filter }}\n",
    )
    code, message = copy.run(capsys)
    assert code == 2
    recipe = copy.recipe_dir / "recipe.yaml"
    assert message.startswith(f"flagtree-feedstock: error: {recipe}:{line}:")
    assert "${{ flagtree_version | no_such_filter }}" in message
    assert "flagtree_version" in message.split("(fix:")[1]
    for debug in ("Marker", "JinjaError", "Span", "Some(", "message is above"):
        assert debug not in message


def test_both_files_are_read_and_give_todays_pins(copy: Copy) -> None:
    rendered = render(copy.recipe_dir / "recipe.yaml", (copy.global_file, copy.own), target="linux-aarch64")
    cpu = [o for o in rendered if o.name == "flagtree-cpu"]
    assert [o.python for o in cpu] == ["3.10", "3.11", "3.12", "3.13"]
    for output in cpu:
        for key in FEEDSTOCK_PINS:
            assert output.variant[key] == variants()[key][0], key


def test_global_file_holds_only_what_conda_forge_pins_globally() -> None:
    own = yaml.safe_load(OWN.read_text())
    ours = yaml.safe_load(GLOBAL.read_text())
    assert set(FEEDSTOCK_PINS) <= set(own)
    assert not set(FEEDSTOCK_PINS) & set(ours)
    assert not set(own) & set(ours), "each key once"
    if not PINNING.is_file():
        pytest.skip(f"{PINNING} is absent (only the project's shared folder has it, not a user's clone)")
    pinning = yaml.safe_load(PINNING.read_text())
    assert set(ours) <= set(pinning), set(ours) - set(pinning)


@pytest.mark.parametrize("path", VARIANT_FILES, ids=["global", "recipe"])
def test_every_key_has_a_reason_and_quoted_values(path: Path) -> None:
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        if re.match(r"^\w+:", line):
            assert lines[number - 1].startswith("#"), f"{path.name}: {line} has no comment above it"
        if line.startswith("  - "):
            assert re.fullmatch(r'  - "[^"]+"', line), f"{path.name}: unquoted value {line}"


def test_the_recipe_folder_file_is_where_conda_smithy_reads_it() -> None:
    assert OWN == ROOT / "recipe" / "conda_build_config.yaml"
    assert OWN.is_file()


def test_both_variant_loaders_hash_the_same() -> None:
    """rattler-build's variants.yaml reader (`from_file`, merged file by file: what conda-build's hand-off of
    recipe.yaml does, conda_build/_rattler_build/compat.py) and its conda_build_config.yaml reader see the
    same values, so the build strings agree."""
    import rattler_build as rb  # noqa: PLC0415

    platform = rb.PlatformConfig(target_platform="linux-aarch64")
    by_cbc = rb.VariantConfig({})
    for path in VARIANT_FILES:
        by_cbc = by_cbc.merge(
            rb.VariantConfig.from_conda_build_config(path, rb.JinjaConfig(platform=platform))
        )
    by_file = rb.VariantConfig({})
    for path in VARIANT_FILES:
        by_file = by_file.merge(rb.VariantConfig.from_file(path))
    assert by_file.to_dict() == by_cbc.to_dict()

    def build_strings(config: object) -> list[tuple[str, str]]:
        rendered = rb.Stage0Recipe.from_file(RECIPE_DIR / "recipe.yaml").render(
            variant_config=config, render_config=rb.RenderConfig(platform=platform)
        )
        return [(v.recipe.package.name, str(v.recipe.build.string)) for v in rendered]

    assert build_strings(by_file) == build_strings(by_cbc)


def test_a_pin_that_is_not_a_list(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    line = copy.edit(
        copy.own,
        'sleef_commit:\n  - "93f04d869471ce4d007abaebb8c6a7bc62749f61"\n',
        'sleef_commit: "93f04d869471ce4d007abaebb8c6a7bc62749f61"\n',
    )
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: {copy.own}:{line}: sleef_commit is not a list "
        "(fix: make sleef_commit a list with a full git commit (40 hex digits))"
    )


def test_broken_yaml_names_the_file_and_where(copy: Copy, capsys: pytest.CaptureFixture[str]) -> None:
    copy.global_file.write_text('python:\n  - "3.10"\n  "3.11"\n   - : [\n')
    assert copy.fails(capsys) == (
        f"flagtree-feedstock: error: variant file {copy.global_file} is not a valid conda_build_config.yaml: "
        "could not find expected ':' at line 4, column 4 (fix: correct the YAML (every key maps to a list of values))"
    )


def test_a_key_the_recipes_read_only_with_a_default_may_be_set_or_left_out(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    """github_url: the recipes read it as `github_url | default(...)`, so no file must set it, any file may."""
    assert copy.run(capsys)[0] == 0
    copy.append(copy.own, 'github_url:\n  - "file:///srv/github-mirror"\n')
    assert copy.run(capsys)[0] == 0


def test_a_key_read_with_a_default_and_also_without_one_is_still_needed(
    copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = copy.recipe_dir / "recipe.yaml"
    copy.edit(recipe, "documentation: https://mlir.llvm.org/\n", "documentation: ${{ github_url }}\n")
    code, line = copy.run(capsys)
    assert code == 2
    assert "no variant file sets github_url" in line


# ---- --variant-config adds; --exclusive-config-file replaces the root file (issue 24 item 3) ----------------


def _render_json(
    capsys: pytest.CaptureFixture[str], *args: str, env: dict[str, str] | None = None
) -> list[dict]:
    """``build --render-only --json`` of the repository's recipe with ``args``, from the repository's root."""
    assert main(["build", "--render-only", "--json", *args], env=env) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["outputs"]


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # where the root conda_build_config.yaml and recipe/ are found by default


@pytest.mark.usefixtures("at_root")
def test_a_file_holding_only_python_renders_that_python_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    every = _render_json(capsys)
    only = tmp_path / "py312.yaml"
    only.write_text('python:\n  - "3.12"\n')
    outputs = _render_json(capsys, "--variant-config", str(only))
    assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.12"}
    assert len({o["python"] for o in every if o["name"] == "flagtree-cpu"}) > 1
    # Every other key still comes from the two default files: the same pins, the same LLVM package.
    assert {o["build_string"] for o in outputs if o["name"] == "flagtree-llvm"} == {
        o["build_string"] for o in every if o["name"] == "flagtree-llvm"
    }


@pytest.mark.usefixtures("at_root")
def test_a_file_holding_only_a_pin_overrides_that_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit = "0123456789abcdef" * 2 + "01234567"
    pin = tmp_path / "pin.yaml"
    pin.write_text(f'flagtree_commit:\n  - "{commit}"\n')
    outputs = _render_json(capsys, "--variant-config", str(pin))
    assert {o["pins"]["flagtree_commit"] for o in outputs if o["name"] == "flagtree-cpu"} == {commit}
    pinned = yaml.safe_load(OWN.read_text())["llvm_commit"][0]
    assert {o["pins"]["llvm_commit"] for o in outputs if o["name"] == "flagtree-cpu"} == {pinned}


@pytest.mark.usefixtures("at_root")
def test_later_files_win_and_the_environment_may_name_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a b, c.yaml", tmp_path / "second.yaml"
    first.write_text('python:\n  - "3.11"\n  - "3.12"\n')
    second.write_text('python:\n  - "3.13"\n')
    for args, env in (
        (["--variant-config", str(first), "-m", str(second)], None),
        ([], {"FLAGTREE_FEEDSTOCK_VARIANT_CONFIG": f"{first}:{second}"}),
    ):
        outputs = _render_json(capsys, *args, env=env)
        assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.13"}, args
    outputs = _render_json(capsys, "--variant-config", str(second), "--variant-config", str(first))
    assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.11", "3.12"}


@pytest.mark.usefixtures("at_root")
def test_the_exclusive_config_file_replaces_the_root_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = tmp_path / "py312.yaml"
    partial.write_text('python:\n  - "3.12"\n')
    # In place of the root file, the same partial file lacks what only the root file sets.
    assert main(["build", "--render-only", "--exclusive-config-file", str(partial)]) == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert "no variant file sets python_min, which " in line
    assert f"to {partial} or recipe/conda_build_config.yaml)" in line
    # A whole root file in its place renders, with its values.
    root = tmp_path / "conda_build_config.yaml"
    root.write_text(GLOBAL.read_text().replace('"2.17"', '"2.28"'))
    outputs = _render_json(capsys, "--exclusive-config-file", str(root))
    assert {o["variant"]["c_stdlib_version"] for o in outputs if "c_stdlib_version" in o["variant"]} == {
        "2.28"
    }


def test_help_says_the_files_are_added() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flagtree_feedstock", "build", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    # Python 3.13's argparse names the metavar once (``-m, --variant-config FILE``), older ones after each
    # option string (``-m FILE, --variant-config FILE``): either is argparse's own layout, not our text.
    text = re.sub(r"-([me]) FILE, --", r"-\1, --", " ".join(done.stdout.split()))
    assert "-m, --variant-config FILE a variant file added over the root conda_build_config.yaml" in text
    assert 'a file holding only python: ["3.12"] builds for 3.12 alone' in text
    assert "-e, --exclusive-config-file FILE the root variant file, read first" in text


def test_conda_build_gets_the_root_file_as_e_and_the_added_ones_as_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flagtree_feedstock.builder import conda_build  # noqa: PLC0415

    requests: list[conda_build.CondaBuildRequest] = []
    monkeypatch.setattr(conda_build, "build", lambda request: requests.append(request) or [])
    monkeypatch.setattr(conda_build._subprocess, "which", lambda name, install_hint: f"/bin/{name}")
    monkeypatch.setattr("flagtree_feedstock.builder.command.host_platform", lambda: "linux-aarch64")
    added = tmp_path / "py312.yaml"
    added.write_text('python:\n  - "3.12"\n')
    argv = [
        "build",
        "--tool",
        "conda-build",
        "--recipe-dir",
        str(RECIPE_DIR),
        "--output-dir",
        str(tmp_path / "out"),
    ]
    argv += ["--exclusive-config-file", str(GLOBAL), "--variant-config", str(added)]
    assert main(argv) == 0
    (request,) = requests
    assert (request.exclusive_config_files, request.variant_files) == ((GLOBAL,), (added,))
    argv = conda_build.command(replace(request, recipe_dir=RECIPE_DIR), output_folder=tmp_path / "staging")
    assert argv[2:6] == ["-e", str(GLOBAL), "-m", str(added)]
