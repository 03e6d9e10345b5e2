"""What flagtree-cpu links and imports is declared: every library FlagTree's CMake links, torch at run time.

The link check reads FlagTree's own CMake files from ``FLAGTREE_SRC`` (a checkout of flagtree_commit; and
flagtree-cpu's from ``FLAGTREE_CPU_SRC`` when set) and is skipped with a reason without it. The scan is
``flagtree_feedstock.bump.cmake_scan``, which ``flagtree-feedstock bump`` runs on a new commit against recipe.yaml.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from _recipe_support import PYTHONS, RECIPE_V1, TARGET, VARIANT_FILES, meta_outputs, requirement_strings
from _tools import upstream_source
from flagtree_feedstock.bump.checks import recipe_host
from flagtree_feedstock.bump.cmake_scan import plain_libraries, unprovided
from flagtree_feedstock.recipe.render import render

# The folders of flagtree-cpu that FlagTree's link script (python/scripts/link_flagtree_cpu.sh) links into its
# tree, and so builds; the rest of flagtree-cpu (a whole Triton fork) is not part of the build.
FLAGTREE_CPU_BUILT = ("third_party/cpu", "lib/Dialect/TritonCPU", "include/triton/Dialect/TritonCPU")


def _sources() -> list[Path]:
    flagtree = upstream_source("FLAGTREE_SRC")
    if not (flagtree / "CMakeLists.txt").is_file():
        pytest.fail(f"FLAGTREE_SRC={flagtree} has no CMakeLists.txt (not a source checkout)")
    roots = [flagtree]
    if os.environ.get("FLAGTREE_CPU_SRC"):  # optional: the flagtree-cpu folders the build links in, too
        flagtree_cpu = upstream_source("FLAGTREE_CPU_SRC")
        if not (flagtree_cpu / FLAGTREE_CPU_BUILT[0] / "CMakeLists.txt").is_file():
            pytest.fail(f"FLAGTREE_CPU_SRC={flagtree_cpu} has no {FLAGTREE_CPU_BUILT[0]}/CMakeLists.txt")
        roots += [flagtree_cpu / folder for folder in FLAGTREE_CPU_BUILT if (flagtree_cpu / folder).is_dir()]
    return roots


@cache
def _v1_cpu(python: str = PYTHONS[0]) -> dict[str, list[str]]:
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=TARGET)
    cpu = next(o for o in rendered if o.name == "flagtree-cpu" and o.python == python)
    requirements = cpu.engine_variant.recipe.to_dict()["requirements"]
    return {
        section: requirement_strings(requirements.get(section, [])) for section in ("build", "host", "run")
    }


def _meta_cpu() -> dict[str, list[str]]:
    requirements = meta_outputs()["flagtree-cpu"]["requirements"]
    return {
        section: requirement_strings(requirements.get(section, [])) for section in ("build", "host", "run")
    }


def _names(requirements: list[str]) -> set[str]:
    return {r.split()[0] for r in requirements}


def test_every_library_flagtree_links_is_provided() -> None:
    linked = plain_libraries(_sources())
    assert "z" in linked, "FlagTree's root CMakeLists.txt links libtriton with z: the scan missed it"
    for recipe, requirements in (("recipe.yaml", _v1_cpu()), ("meta.yaml", _meta_cpu())):
        sysroot = any(r.startswith("sysroot_linux-aarch64") for r in requirements["build"])
        assert unprovided(linked, _names(requirements["host"]), sysroot=sysroot) == [], recipe


def test_the_bump_reads_the_same_host_requirements_as_the_engine() -> None:
    # The bump reads recipe.yaml as YAML (no render): the names must be the engine's.
    host, sysroot = recipe_host(RECIPE_V1)
    assert host == {name for name in _names(_v1_cpu()["host"]) if not name.startswith("pin_subpackage(")}
    assert sysroot


def test_unprovided_names_each_missing_provider() -> None:
    linked = {"z": ["CMakeLists.txt"], "m": ["lib/CMakeLists.txt"], "fancy": ["third_party/x/CMakeLists.txt"]}
    assert unprovided(linked, {"python"}, sysroot=False) == [
        "third_party/x/CMakeLists.txt links libfancy: say in cmake_scan.PROVIDERS which package has it",
        "lib/CMakeLists.txt links libm: the build requirements lack stdlib('c')",
        "CMakeLists.txt links libz: add zlib to flagtree-cpu's host",
    ]
    assert unprovided({"z": ["CMakeLists.txt"]}, {"zlib"}, sysroot=True) == []


@pytest.mark.parametrize("recipe", ["v1", "meta"])
def test_zlib_is_a_host_requirement(recipe: str) -> None:
    # The same fact without FlagTree's sources: its root CMakeLists.txt links libtriton with `z`.
    requirements = _v1_cpu() if recipe == "v1" else _meta_cpu()
    assert "zlib" in requirements["host"]


@pytest.mark.parametrize("recipe", ["v1", "meta"])
def test_pytorch_is_a_run_requirement_of_any_build(recipe: str) -> None:
    # FlagTree imports torch when it compiles a kernel (python/triton/compiler/hint_manager.py), so it is a
    # run requirement; a CUDA build (NVIDIA Grace) serves as well as a CPU one.
    requirements = _v1_cpu() if recipe == "v1" else _meta_cpu()
    assert [r for r in requirements["run"] if r.split()[0] == "pytorch"] == ["pytorch"]


def test_plain_library_scan_on_a_tiny_tree(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text(
        "add_library(triton SHARED a.cc)\n"
        "target_link_libraries(triton PRIVATE ${TRITON_LIBRARIES} LLVMSupport)\n"
        "if(WIN32)\n  target_link_libraries(triton PRIVATE ${CMAKE_DL_LIBS})\nelse()\n"
        "  target_link_libraries(triton PRIVATE z) # zlib\nendif()\n"
        "add_triton_library(Foo a.cc LINK_LIBS PUBLIC triton -lm pthread)\n"
    )
    (tmp_path / "third_party" / "nvidia").mkdir(parents=True)
    (tmp_path / "third_party" / "nvidia" / "CMakeLists.txt").write_text("target_link_libraries(x cuda)\n")
    assert sorted(plain_libraries([tmp_path])) == ["m", "pthread", "z"]
