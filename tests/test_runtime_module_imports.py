"""What keeps `import triton` working on every aarch64 CPU now that flagtree-cpu's runtime module checks the CPU.

patches/flagtree-cpu/0001 makes ``triton.language.extra.cpu.runtime`` raise ``UnsupportedCpuError`` at import
on a CPU that cannot run the runtime. That is safe only while nothing on the way of ``import triton`` (or of
the TLE ops a kernel imports) imports that module: upstream's files at the pinned commits, read here, import
it nowhere. A bump that makes one of them import it fails this test (the README's "What it builds" promise).
Needs FLAGTREE_SRC (FlagTree) and FLAGTREE_CPU_SRC (flagtree-cpu); each part is skipped without its source.
"""

from __future__ import annotations

import ast

import pytest

from _tools import sources_required, upstream_source

# FlagTree: the package `triton.language` imports `extra`, whose __init__ imports every subpackage, cpu among
# them (third_party/cpu/language/cpu, linked at python/triton/language/extra/cpu by the build).
FLAGTREE_FILES = (
    "python/triton/__init__.py",
    "python/triton/language/__init__.py",
    "python/triton/language/extra/__init__.py",
    "third_party/cpu/language/cpu/__init__.py",
    "third_party/cpu/backend/compiler.py",
    "third_party/cpu/backend/driver.py",
)
# flagtree-cpu: the TLE ops kernels import, and the NEON helper the cpu compiler imports.
FLAGTREE_CPU_FILES = ("third_party/cpu/language/cpu/tle_ops.py", "third_party/cpu/language/cpu/neon.py")


def imports_of_runtime(source: str, *, in_package: bool) -> list[str]:
    """The import statements of ``source`` that load the cpu language package's ``runtime`` module.

    ``in_package``: ``source`` is a module of that package, so a relative ``.runtime`` is that module (elsewhere
    it is another, e.g. ``triton.runtime`` in ``triton/__init__.py``).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [ast.unparse(node) for a in node.names if a.name.endswith("extra.cpu.runtime")]
        elif isinstance(node, ast.ImportFrom):
            module, names = node.module or "", [a.name for a in node.names]
            relative = in_package and node.level == 1
            if (
                module.endswith("extra.cpu.runtime")
                or (module.endswith("extra.cpu") and "runtime" in names)
                or (relative and (module == "runtime" or (not module and "runtime" in names)))
            ):
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("relative", FLAGTREE_FILES)
def test_flagtree_imports_no_runtime_module(relative: str) -> None:
    path = upstream_source("FLAGTREE_SRC") / relative
    assert path.is_file(), f"{relative} is not in FLAGTREE_SRC: the import chain this test reads has moved"
    in_package = relative.startswith("third_party/cpu/language/cpu/")
    assert imports_of_runtime(path.read_text(), in_package=in_package) == []


def test_extra_imports_only_packages() -> None:
    """triton/language/extra/__init__.py imports the packages of its folder, never a module like runtime.py."""
    text = (upstream_source("FLAGTREE_SRC") / "python/triton/language/extra/__init__.py").read_text()
    assert "if not is_pkg:" in text


@pytest.mark.parametrize("relative", FLAGTREE_CPU_FILES)
def test_flagtree_cpu_imports_no_runtime_module(relative: str) -> None:
    path = upstream_source("FLAGTREE_CPU_SRC") / relative
    if not path.is_file():
        reason = f"FLAGTREE_CPU_SRC holds no {relative} (a copy of the patched file alone)"
        if sources_required():  # the workflow clones the whole tree
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    assert imports_of_runtime(path.read_text(), in_package=True) == []


@pytest.mark.parametrize(
    ("source", "in_package", "found"),
    [
        ("from . import runtime", True, True),
        ("from .runtime import fused_mlp_bf16", True, True),
        ("from triton.language.extra.cpu.runtime import rope_bf16", False, True),
        ("from triton.language.extra.cpu import runtime, tle_ops", False, True),
        ("import triton.language.extra.cpu.runtime", False, True),
        ("from .runtime import driver", False, False),  # triton/__init__.py: triton.runtime
        ("from triton.runtime import driver", True, False),
        ("from . import neon, utils", True, False),
        ("from .utils import vnni_decode", True, False),
    ],
)
def test_the_reader_finds_each_spelling(source: str, in_package: bool, found: bool) -> None:
    assert bool(imports_of_runtime(source, in_package=in_package)) is found
