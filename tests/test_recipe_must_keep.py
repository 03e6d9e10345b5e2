"""The package tests both recipes must keep, named here: dropping one from both recipes at once fails this test,
which the equivalence test (tests/test_recipe_equivalence.py, the two recipes alike) cannot see. The same for
what flagtree-cpu must bring and keep out at run time: every module our patches import, and no triton package.

Each recipe is read as its engine reads it (recipe.yaml rendered by py-rattler-build, meta.yaml by the
jinja2 + selector stand-in of tests/_recipe_support.py) and reduced to the equivalence test's shape: imports,
pip check, test files, commands, package contents and files that must be absent. A recipe may test more.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from _recipe_support import PYTHONS, RECIPE_DIR, meta_outputs, requirement_strings
from test_patches import all_patches, parse_patch
from test_recipe_equivalence import _meta_tests, _v1_outputs, _v1_tests

SP = "lib/python*/site-packages/"
MUST_KEEP: dict[str, dict[str, Any]] = {
    "flagtree-cpu": {
        # libtriton loads (every extension module FlagTree builds is linked into it), and the package's own
        # python dependencies are consistent.
        "imports": ["triton", "triton._C.libtriton"],
        "pip_check": True,
        # The links the build makes, the backend and its launcher; a kernel run against torch; every TLE op.
        "files": ["test_flagtree_cpu.py", "test_rms_norm.py"],
        "commands": ["python test_flagtree_cpu.py", "python test_rms_norm.py", "flagtree-verify"],
        # What FlagTree's CPU driver loads from triton/_C (third_party/cpu/backend/driver.py).
        "contents": [
            f"{SP}triton/_C/libtriton.so",
            f"{SP}triton/_C/libTritonCPURuntime.so",
            f"{SP}triton/_C/libsleef.so*",
        ],
    },
    "flagtree-doctor": {
        # The CPU check patch 0009 imports before any load.
        "imports": ["flagtree_doctor", "flagtree_doctor.cpu_check"],
        "pip_check": True,
        "files": ["test_flagtree_doctor.py"],
        "commands": ["python test_flagtree_doctor.py"],
    },
    "flagtree-llvm": {
        # The libraries libtriton links on aarch64 (FlagTree's CMakeLists.txt), the CMake packages and the
        # tablegens FlagTree's build finds under LLVM_SYSPATH.
        "contents": [
            "lib/flagtree-llvm/lib/libLLVMAArch64CodeGen.a",
            "lib/flagtree-llvm/lib/libLLVMAArch64AsmParser.a",
            "lib/flagtree-llvm/lib/libLLVMPasses.a",
            "lib/flagtree-llvm/lib/libMLIRIR.a",
            "lib/flagtree-llvm/lib/cmake/llvm/LLVMConfig.cmake",
            "lib/flagtree-llvm/lib/cmake/mlir/MLIRConfig.cmake",
            "lib/flagtree-llvm/bin/mlir-tblgen",
            "lib/flagtree-llvm/bin/llvm-tblgen",
        ],
        # Nothing where conda-forge's llvmdev and mlir install: the two would overwrite each other.
        "absent": ["lib/libMLIRIR.a", "lib/cmake/llvm/LLVMConfig.cmake", "bin/mlir-tblgen"],
    },
}


def _tests(recipe: str, output: str) -> dict[str, Any]:
    if recipe == "recipe.yaml":
        return _v1_tests(_v1_outputs(PYTHONS[0])[output])
    return _meta_tests(meta_outputs()[output])


def missing(must: dict[str, Any], tests: dict[str, Any]) -> list[str]:
    """What of ``must`` a recipe's package tests (in the equivalence test's shape) do not have."""
    lost = [] if tests["pip_check"] or not must.get("pip_check") else ["pip_check"]
    for kind in ("imports", "files", "commands", "contents", "absent"):
        lost += [f"{kind}: {item}" for item in must.get(kind, []) if item not in tests.get(kind, [])]
    return lost


@pytest.mark.parametrize("output", MUST_KEEP)
@pytest.mark.parametrize("recipe", ["recipe.yaml", "meta.yaml"])
def test_the_recipe_keeps_the_package_tests_that_must_stay(recipe: str, output: str) -> None:
    lost = missing(MUST_KEEP[output], _tests(recipe, output))
    assert not lost, f"recipe/{recipe}, {output}: the package tests lost {lost}"


def test_the_named_test_scripts_exist() -> None:
    for must in MUST_KEEP.values():
        for name in must.get("files", []):
            assert (RECIPE_DIR / name).is_file(), name


@pytest.mark.parametrize(
    ("kind", "item"),
    [(kind, item) for kind in ("imports", "commands", "contents") for item in MUST_KEEP["flagtree-cpu"][kind]]
    + [("pip_check", True)],
)
def test_dropping_any_one_is_seen(kind: str, item: object) -> None:
    """The check itself: each named test, taken out of what the recipe has, is reported."""
    tests = _tests("recipe.yaml", "flagtree-cpu")
    if kind == "pip_check":
        tests = {**tests, "pip_check": False}
    else:
        tests = {**tests, kind: [i for i in tests[kind] if i != item]}
    assert missing(MUST_KEEP["flagtree-cpu"], tests) == [
        "pip_check" if kind == "pip_check" else f"{kind}: {item}"
    ]


# ---- run time ---------------------------------------------------------------------------------------------------

# flagtree-cpu installs the `triton` import package: a triton package must never be installed beside it.
MUST_CONSTRAIN = {"flagtree-cpu": ["triton <0.0a0"]}
ADDED_IMPORT = re.compile(r"^\+\s*(?:from|import)\s+(?P<module>\w+)")


def _patch_imports() -> set[str]:
    """The top-level modules the patches' added lines import, other than the standard library and triton."""
    modules = {
        match["module"]
        for patch in all_patches()
        for line in parse_patch(patch).diff_lines
        if (match := ADDED_IMPORT.match(line))
    }
    return modules - set(sys.stdlib_module_names) - {"triton"}


def _run(recipe: str, output: str) -> tuple[list[str], list[str]]:
    if recipe == "recipe.yaml":
        requirements = _v1_outputs(PYTHONS[0])[output]["requirements"]
        return requirement_strings(requirements.get("run", [])), requirements.get("run_constraints", [])
    requirements = meta_outputs()[output]["requirements"]
    return requirement_strings(requirements.get("run", [])), requirements.get("run_constrained", [])


@pytest.mark.parametrize("recipe", ["recipe.yaml", "meta.yaml"])
def test_flagtree_cpu_brings_what_the_patches_import_and_keeps_triton_out(recipe: str) -> None:
    imported = _patch_imports()
    # Patch 0009's CPU check. A patch that imports another package: add it to both recipes' run requirements,
    # and here how its module maps to the package.
    assert imported == {"flagtree_doctor"}
    run, _ = _run(recipe, "flagtree-cpu")
    for module in imported:  # an output of this recipe, built from this repository: pinned exactly
        assert f"pin_subpackage({module.replace('_', '-')}, exact=True)" in run, (recipe, module)
    for output, constrained in MUST_CONSTRAIN.items():
        assert set(constrained) <= set(_run(recipe, output)[1]), (recipe, output)
