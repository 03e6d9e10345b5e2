"""recipe.yaml and meta.yaml describe the same packages: sources, pins, patches, requirements, tests and their
environments, licences.

recipe.yaml is rendered by py-rattler-build, meta.yaml by jinja2 + selectors (tests/_recipe_support.py);
each side is reduced to plain values and the two are compared for linux-aarch64, every python variant.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
import yaml

from _recipe_support import (
    OUTPUTS,
    PYTHONS,
    RECIPE_V1,
    TARGET,
    VARIANT_FILES,
    as_list,
    meta_outputs,
    render_meta,
    requirement_strings,
)
from flagtree_feedstock.recipe.render import render


@cache
def _v1_outputs(python: str) -> dict[str, dict[str, Any]]:
    """The rendered v1 outputs of one python variant, as plain dicts."""
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=TARGET)  # native, whatever this host is
    chosen = {}
    for output in rendered:
        if output.python in (None, python):
            chosen[output.name] = output.engine_variant.recipe.to_dict()
    return chosen


def _source(entry: dict[str, Any]) -> tuple[Any, ...]:
    """One source, whichever format: (kind, location, pin, folder, patches)."""
    if "url" in entry:
        kind, location, pin = "url", entry["url"], entry["sha256"]
    elif "git" in entry or "git_url" in entry:
        kind, location, pin = (
            "git",
            entry.get("git", entry.get("git_url")),
            entry.get("rev", entry.get("git_rev")),
        )
    else:
        kind, location, pin = "path", entry["path"], None
    folder = entry.get("target_directory", entry.get("folder"))
    return (kind, location, pin, folder, tuple(entry.get("patches", [])))


def _script(lines: Any) -> list[str]:
    text = lines if isinstance(lines, str) else "\n".join(as_list(lines))
    return [line.replace("${{ PYTHON }}", "$PYTHON") for line in text.splitlines()]


def _v1_tests(output: dict[str, Any]) -> dict[str, Any]:
    tests: dict[str, Any] = {"imports": [], "pip_check": False, "commands": [], "files": [], "contents": []}
    tests["absent"] = []
    for test in output.get("tests", []):
        if "python" in test:
            tests["imports"] += test["python"]["imports"]
            tests["pip_check"] = test["python"].get("pip_check", True)
        if "package_contents" in test:
            files = test["package_contents"]["files"]
            if isinstance(files, dict):  # {exists: [...], not_exists: [...]}
                tests["contents"] += files.get("exists", [])
                tests["absent"] += files.get("not_exists", [])
            else:
                tests["contents"] += files
        if "script" in test:
            script = test["script"]
            tests["commands"] += as_list(script["content"] if isinstance(script, dict) else script)
            tests["files"] += test.get("files", {}).get("recipe", [])
            if isinstance(script, dict):
                tests["env"] = script.get("env", {})
    return tests


_SP_DIR = "lib/python*/site-packages/"


def _meta_tests(output: dict[str, Any]) -> dict[str, Any]:
    """conda-build's test section in the same shape: `ls ${SP_DIR}/x` and `test -f $PREFIX/x` are contents,
    `test ! -e $PREFIX/x` is an absent file."""
    test = output.get("test", {})
    tests: dict[str, Any] = {"imports": test.get("imports", []), "pip_check": False, "commands": []}
    tests |= {"files": test.get("files", []), "contents": [], "absent": []}
    for command in test.get("commands", []):
        if command == "pip check":
            tests["pip_check"] = True
        elif match := re.fullmatch(r"ls \$\{SP_DIR\}/(\S+)", command):
            tests["contents"].append(_SP_DIR + match[1])
        elif match := re.fullmatch(r"test -f \$PREFIX/(\S+)", command):
            tests["contents"].append(match[1])
        elif match := re.fullmatch(r'export (\w+)="\$\{\1:-(.*)\}"', command):
            tests.setdefault("env", {})[match[1]] = match[2]  # the caller's value, else this default
        elif match := re.fullmatch(r"test ! -e \$PREFIX/(\S+)", command):
            tests["absent"].append(match[1])
        else:
            tests["commands"].append(command)
    return tests


@pytest.mark.parametrize("python", PYTHONS)
def test_same_outputs(python):
    assert list(_v1_outputs(python)) == list(OUTPUTS)
    assert list(meta_outputs(python=python)) == list(OUTPUTS)


def test_same_sources_pins_and_patches():
    v1 = _v1_outputs(PYTHONS[0])
    v1_sources = [_source(s) for name in OUTPUTS for s in v1[name].get("source", [])]
    meta_sources = [_source(s) for s in render_meta()["source"]]
    # conda-build shares one source list between the outputs; rattler-build gives each output its own.
    assert sorted(set(v1_sources)) == sorted(meta_sources)
    cpu_sources = [_source(s) for s in v1["flagtree-cpu"]["source"]]
    assert cpu_sources == [s for s in meta_sources if s[0] != "path"]


@pytest.mark.parametrize("name", OUTPUTS)
@pytest.mark.parametrize("python", PYTHONS)
def test_same_requirements(name, python):
    v1 = _v1_outputs(python)[name].get("requirements", {})
    meta = meta_outputs(python=python)[name].get("requirements", {})
    for section in ("build", "host", "run"):
        assert requirement_strings(v1.get(section, [])) == requirement_strings(meta.get(section, [])), section
    assert v1.get("run_constraints", []) == meta.get("run_constrained", [])


@pytest.mark.parametrize("name", OUTPUTS)
def test_same_build_settings(name):
    v1 = _v1_outputs(PYTHONS[0])[name]
    meta = meta_outputs()[name]
    assert v1["build"].get("noarch") == (meta.get("build") or {}).get("noarch")
    v1_script = v1["build"].get("script")
    meta_script = meta.get("script") or (meta.get("build") or {}).get("script")
    # The variables passed into the build: v1's script env (`env.get`, as written: an empty value renders to
    # nothing), conda-build's script_env.
    written = next(
        o for o in yaml.safe_load(RECIPE_V1.read_text())["outputs"] if o["package"]["name"] == name
    )
    script = written["build"].get("script")
    v1_env = list(script.get("env", {})) if isinstance(script, dict) else []
    assert v1_env == (meta.get("build") or {}).get("script_env", [])
    if isinstance(v1_script, dict) and "file" in v1_script:
        v1_script = v1_script["file"]
    if isinstance(v1_script, str) and v1_script.endswith(".sh"):
        assert v1_script == meta_script
    else:
        assert _script(v1_script) == _script(meta_script)


@pytest.mark.parametrize("name", OUTPUTS)
def test_same_tests(name):
    v1 = _v1_tests(_v1_outputs(PYTHONS[0])[name])
    meta = _meta_tests(meta_outputs()[name])
    # recipe.yaml takes the caller's variables when rendered, meta.yaml when tested: here only the names that
    # are always set; their values in test_same_test_variables.
    for tests in (v1, meta):
        tests["env"] = sorted(set(tests.get("env", {})) - {"FLAGTREE_REQUIRE_KERNELS"})
    assert v1 == meta


@pytest.mark.parametrize("build", ["linux-64", TARGET])
def test_same_test_variables(build, monkeypatch):
    monkeypatch.delenv("QEMU_CPU", raising=False)
    monkeypatch.delenv("FLAGTREE_REQUIRE_KERNELS", raising=False)
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=build)
    v1 = _v1_tests(next(o for o in rendered if o.name == "flagtree-cpu").engine_variant.recipe.to_dict())
    meta = _meta_tests(meta_outputs(build=build)["flagtree-cpu"])
    assert v1["env"] == meta["env"]
    assert v1["env"]["QEMU_CPU"] == "max,sve-default-vector-length=16"
    assert v1["env"].get("FLAGTREE_REQUIRE_KERNELS") == ("1" if build != TARGET else None)


def _v1_test_environments(output: dict[str, Any]) -> list[list[str]]:
    """What rattler-build adds to each python test environment besides the package: python (one environment
    per python_version), pip for pip check, and the script tests' requirements."""
    pythons: list[str | None] = [None]
    specs: list[str] = []
    for test in output.get("tests", []):
        if "python" in test:
            versions = test["python"].get("python_version")
            pythons = as_list(versions) or [None]
            specs += ["pip"] if test["python"].get("pip_check", True) else []
        if "script" in test:
            specs += as_list(test.get("requirements", {}).get("run"))
    return [sorted(specs + ([f"python {version}"] if version else [])) for version in pythons]


@pytest.mark.parametrize("name", OUTPUTS)
@pytest.mark.parametrize("python", PYTHONS)
def test_same_test_environments(name, python):
    """meta.yaml's test.requires against recipe.yaml's python_version, pip_check and script requirements.

    conda-build has one test environment per output: it must be recipe.yaml's first (the python_min one of
    the noarch output, which rattler-build also tests at the newest python).
    """
    v1 = _v1_test_environments(_v1_outputs(python)[name])
    meta = sorted(as_list((meta_outputs(python=python)[name].get("test") or {}).get("requires")))
    assert v1[0] == meta


@pytest.mark.parametrize("name", OUTPUTS)
def test_same_licences(name):
    v1 = _v1_outputs(PYTHONS[0])[name]["about"]
    meta = meta_outputs()[name]["about"]
    assert v1["license"] == meta["license"]
    assert v1["license_file"] == meta["license_file"]
    assert v1["summary"] == meta["summary"]


def test_same_outputs_skipped_on_linux_64():
    v1 = {o.name for o in render(RECIPE_V1, VARIANT_FILES, target="linux-64")}
    meta = {
        name for name, o in meta_outputs(target="linux-64").items() if not (o.get("build") or {}).get("skip")
    }
    assert v1 == meta == {"flagtree-doctor"}


def test_same_cross_requirements():
    # linux-64 -> linux-aarch64, as conda-forge cross-compiles: both recipes add the same build requirements.
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build="linux-64")
    v1 = next(o for o in rendered if o.name == "flagtree-cpu").engine_variant.recipe.to_dict()["requirements"]
    meta = meta_outputs(build="linux-64")["flagtree-cpu"]["requirements"]
    assert requirement_strings(v1["build"]) == requirement_strings(meta["build"])
    assert "cross-python_linux-aarch64" in requirement_strings(meta["build"])
