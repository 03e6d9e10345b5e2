"""recipe/recipe.yaml renders offline with py-rattler-build: the python matrix, one LLVM build, the pins."""

from __future__ import annotations

from functools import cache

import pytest

from _recipe_support import PIN_KEYS, PYTHONS, RECIPE_DIR, RECIPE_V1, VARIANT_FILES, first_variant
from flagtree_feedstock.recipe.render import RenderedOutput, render


@cache
def _rendered(target: str) -> tuple[RenderedOutput, ...]:
    return tuple(render(RECIPE_V1, VARIANT_FILES, target=target))  # type: ignore[arg-type]


def _by_name(target: str, name: str) -> list[RenderedOutput]:
    return [o for o in _rendered(target) if o.name == name]


def test_flagtree_cpu_renders_once_per_python():
    cpu = _by_name("linux-aarch64", "flagtree-cpu")
    assert sorted(str(o.python) for o in cpu) == list(PYTHONS)  # "3.12.* *_cpython" shown as "3.12"
    assert len({o.build_string for o in cpu}) == len(PYTHONS)
    for output in cpu:
        assert output.build_string.startswith("py3")


def test_flagtree_llvm_has_one_build_string_for_the_whole_matrix():
    llvm = _by_name("linux-aarch64", "flagtree-llvm")
    assert len(llvm) == len(PYTHONS)  # rendered once per variant ...
    assert len({o.key for o in llvm}) == 1  # ... but one package
    assert all(o.python is None for o in llvm)
    assert llvm[0].build_string.startswith(f"llvm{first_variant()['llvm_commit'][:8]}_h")


def test_flagtree_doctor_is_one_noarch_package():
    doctor = _by_name("linux-aarch64", "flagtree-doctor")
    assert len({o.key for o in doctor}) == 1
    assert doctor[0].build_string.startswith("pyh")


def test_every_source_pin_comes_from_the_variant_file():
    variant = first_variant()
    for output in _by_name("linux-aarch64", "flagtree-cpu"):
        assert dict(output.pins) == {k: variant[k] for k in PIN_KEYS}
    for output in _by_name("linux-aarch64", "flagtree-llvm"):
        assert dict(output.pins) == {"llvm_commit": variant["llvm_commit"]}


def test_pins_are_full_commits_and_hashes():
    variant = first_variant()
    for key in PIN_KEYS:
        assert len(variant[key]) == 40 and int(variant[key], 16) >= 0, key
    assert len(variant["llvm_sha256"]) == 64 and int(variant["llvm_sha256"], 16) >= 0


def test_rendered_sources_are_pinned():
    cpu = _by_name("linux-aarch64", "flagtree-cpu")[0]
    sources = cpu.engine_variant.recipe.to_dict()["source"]
    for source in sources:
        if "url" in source:
            assert len(source["sha256"]) == 64
        else:
            assert len(source["rev"]) == 40
    folders = [s.get("target_directory") for s in sources]
    assert folders == [None, "llvm-project", "third_party/flagtree-cpu", "sleef"]


def test_flagtree_cpu_pins_its_siblings_exactly():
    cpu = _by_name("linux-aarch64", "flagtree-cpu")[0]
    requirements = cpu.engine_variant.recipe.to_dict()["requirements"]
    assert {"pin_subpackage": {"name": "flagtree-llvm", "exact": True}} in requirements["host"]
    assert {"pin_subpackage": {"name": "flagtree-doctor", "exact": True}} in requirements["run"]
    assert requirements["run_constraints"] == ["triton <0.0a0"]
    variant = cpu.engine_variant.variant
    llvm = _by_name("linux-aarch64", "flagtree-llvm")[0]
    assert variant["flagtree-llvm"] == f"{llvm.version} {llvm.build_string}"


@pytest.mark.parametrize("name", ["flagtree-cpu", "flagtree-llvm"])
def test_linux_64_skips_the_aarch64_outputs(name):
    assert _by_name("linux-64", name) == []
    assert {o.name for o in _rendered("linux-64")} == {"flagtree-doctor"}


@pytest.mark.parametrize(("build", "cross"), [("linux-64", True), ("linux-aarch64", False)])
def test_cross_python_only_when_cross_compiling(build, cross):
    rendered = render(RECIPE_V1, VARIANT_FILES, target="linux-aarch64", build=build)
    cpu = next(o for o in rendered if o.name == "flagtree-cpu")
    requirements = [str(r) for r in cpu.engine_variant.recipe.to_dict()["requirements"]["build"]]
    added = ["python", "cross-python_linux-aarch64", "pybind11 >=2.13.1,<3"]
    assert all(r in requirements for r in added) is cross
    assert any(r in requirements for r in added) is cross


_SOURCE_PINS = ("flagtree_commit", "llvm_commit", "llvm_sha256", "flagtree_cpu_commit", "sleef_commit")


@pytest.mark.parametrize("key", _SOURCE_PINS)
def test_every_source_pin_reaches_the_build_strings_of_what_is_built_from_it(tmp_path, key):
    """A new pin is a new file name: a channel that holds the old package cannot mistake it for the new."""
    own = tmp_path / "conda_build_config.yaml"
    text = VARIANT_FILES[1].read_text()
    old = first_variant()[key]
    own.write_text(text.replace(old, "0" * len(old)))
    bumped = render(RECIPE_V1, (VARIANT_FILES[0], own), target="linux-aarch64")
    before = {(o.name, o.python): o.build_string for o in _rendered("linux-aarch64")}
    after = {(o.name, o.python): o.build_string for o in bumped}
    for (name, python), build_string in after.items():
        changed = build_string != before[(name, python)]
        built_from_it = name == "flagtree-cpu" or (name == "flagtree-llvm" and key.startswith("llvm_"))
        assert changed is built_from_it, (name, python, key)


def test_flagtree_llvm_declares_the_python_its_build_runs():
    # LLVM's CMake stops without a Python 3 interpreter, and build-llvm.sh runs llvm_distribution.py with it.
    assert "python3 " in (RECIPE_DIR / "build-llvm.sh").read_text()
    llvm = _by_name("linux-aarch64", "flagtree-llvm")[0]
    build = [str(r) for r in llvm.engine_variant.recipe.to_dict()["requirements"]["build"]]
    assert "python >=3.8" in build


def test_flagtree_llvm_is_tested_in_its_own_prefix():
    llvm = _by_name("linux-aarch64", "flagtree-llvm")[0]
    (contents,) = [t["package_contents"]["files"] for t in llvm.engine_variant.recipe.to_dict()["tests"]]
    assert all(path.startswith("lib/flagtree-llvm/") for path in contents["exists"])
    # Static only and nothing but the distribution; nothing where conda-forge's llvmdev and mlir install.
    assert {"lib/flagtree-llvm/lib/libLTO.so", "lib/flagtree-llvm/lib/libRemarks.so"} <= set(
        contents["not_exists"]
    )
    assert {"lib/libMLIRIR.a", "bin/mlir-tblgen"} <= set(contents["not_exists"])


def test_flagtree_cpu_gets_the_compiler_cache_of_the_environment(monkeypatch):
    # rattler-build runs build scripts in a clean environment: only what the recipe passes reaches them.
    monkeypatch.setenv("CCACHE_DIR", "/ci/ccache")
    rendered = render(RECIPE_V1, VARIANT_FILES, target="linux-aarch64")
    cpu = next(o for o in rendered if o.name == "flagtree-cpu").engine_variant.recipe.to_dict()
    assert cpu["build"]["script"]["file"] == "build-flagtree.sh"
    assert cpu["build"]["script"]["env"] == {"CCACHE_DIR": "/ci/ccache"}
    assert "ccache" in [str(r) for r in cpu["requirements"]["build"]]
    # ... and nothing of it where the variable is unset; the package is the same either way.
    monkeypatch.delenv("CCACHE_DIR")
    plain = [o for o in render(RECIPE_V1, VARIANT_FILES, target="linux-aarch64") if o.name == "flagtree-cpu"]
    assert "env" not in plain[0].engine_variant.recipe.to_dict()["build"]["script"]
    cached = [o for o in rendered if o.name == "flagtree-cpu"]
    assert [o.build_string for o in plain] == [o.build_string for o in cached]
