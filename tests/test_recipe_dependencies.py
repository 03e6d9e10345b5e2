"""What flagtree-cpu links and imports is declared: every library FlagTree's CMake links, torch at run time.

The link check reads FlagTree's own CMake files from ``FLAGTREE_SRC`` (a checkout of flagtree_commit; and
flagtree-cpu's from ``FLAGTREE_CPU_SRC`` when set) and is skipped with a reason without it.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest

from _recipe_support import PYTHONS, RECIPE_V1, TARGET, VARIANT_FILES, meta_outputs, requirement_strings
from _tools import upstream_source
from flagtree_feedstock.render import render

# Backends a FLAGTREE_BACKEND=cpu build does not add (setup.py passes TRITON_CODEGEN_BACKENDS=cpu; the root
# CMakeLists.txt adds third_party/<backend> for those only), and the unit-test helpers (TRITON_BUILD_UT=OFF).
_NOT_BUILT = {f"third_party/{b}" for b in ("amd", "nvidia", "aipu", "enflame", "iluvatar", "mthreads")} | {
    "third_party/tsingmicro",
    "third_party/xpu",
    "unittest",
    "cmake/AddTritonUnitTest.cmake",
}
SYSROOT = "the sysroot (stdlib('c'))"
# Where each plain library name comes from at link time: a host requirement, or the target's sysroot.
# A name missing here fails the test until someone says where it comes from.
PROVIDERS = {
    "z": "zlib",  # conda-forge's zlib has libz.so; its run export libzlib only libz.so.1
    **dict.fromkeys(("c", "m", "dl", "pthread", "rt", "util"), SYSROOT),  # glibc 2.17
}
_CALL = re.compile(r"\b(target_link_libraries|add_\w+)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", re.DOTALL)


def _cmake_files(root: Path) -> list[Path]:
    files = [
        p for p in root.rglob("*") if p.is_file() and (p.name == "CMakeLists.txt" or p.suffix == ".cmake")
    ]
    return [p for p in files if not any(str(p.relative_to(root)).startswith(skip) for skip in _NOT_BUILT)]


def plain_libraries(roots: list[Path]) -> dict[str, list[str]]:
    """Every plain library name (`z`, `-lz`) linked by the CMake files under ``roots``, with where.

    A plain name is a lowercase word in target_link_libraries(...) or after LINK_LIBS that no add_*() call
    of the same trees defines as a target (`triton`, `sleef`, ...): the linker looks it up as lib<name>.so.
    """
    defined: set[str] = set()
    linked: dict[str, list[str]] = {}
    for root in roots:
        for path in _cmake_files(root):
            text = re.sub(r"#[^\n]*", "", path.read_text(errors="replace"))
            for call in _CALL.finditer(text):
                name, args = call[1], call[2].split()
                if name.startswith("add_") and args:
                    defined.add(args[0])
                elif name == "target_link_libraries":
                    for token in args[1:]:
                        linked.setdefault(token, []).append(str(path.relative_to(root)))
                if "LINK_LIBS" in args:
                    for token in args[args.index("LINK_LIBS") + 1 :]:
                        linked.setdefault(token, []).append(str(path.relative_to(root)))
    plain = {}
    for token, where in linked.items():
        library = token.removeprefix("-l")
        if (token.startswith("-l") or re.fullmatch(r"[a-z][a-z0-9_+.]*", token)) and library not in defined:
            plain[library] = where
    return plain


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
        for library, where in sorted(linked.items()):
            provider = PROVIDERS.get(library)
            assert provider is not None, f"{where} link lib{library}: say in PROVIDERS which package has it"
            if provider == SYSROOT:
                assert any(r.startswith("sysroot_linux-aarch64") for r in requirements["build"]), recipe
            else:
                assert provider in _names(requirements["host"]), f"{recipe}: {where} link -l{library}"


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
