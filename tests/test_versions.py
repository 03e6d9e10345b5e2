"""Versions are compared as versions everywhere, never as strings (issue 23 item 8).

The toolkit compares conda versions with py-rattler's ``Version``; the doctor distribution, which users install
with the standard library and rich only, orders symbol versions (``GLIBC_2.17``, ``GLIBCXX_3.4.30``) with
``flagtree_doctor.elf.version_key``. Each case is tested with versions whose string order and version order
differ: the bump's order check in tests/test_bump.py (0.6.0.post9, 0.6.0.post10), the doctor's GLIBCXX verdicts
on real shared objects in tests/test_doctor_elf.py (3.4.9, 3.4.19), the rest here. The last test reads the
code: no ordering of values that hold versions is left without a version key.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rattler import Version

from flagtree_doctor import elf
from flagtree_doctor.glibc import Requirement, _verdict
from flagtree_feedstock import llvm_archive
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe.render import render

ROOT = Path(__file__).resolve().parents[1]


def test_the_doctor_s_version_key_orders_glibc_and_glibcxx() -> None:
    names = ["GLIBC_PRIVATE", "GLIBC_2.2.5", "GLIBC_2.9", "GLIBC_2.17", "GLIBC_2.34", "GLIBC_2.100"]
    assert sorted(names, key=elf.version_key) == names
    assert sorted(names) != names  # as strings: GLIBC_2.100 < GLIBC_2.17 < GLIBC_2.2.5 < ... < GLIBC_PRIVATE
    cxx = ["GLIBCXX_3.4", "GLIBCXX_3.4.9", "GLIBCXX_3.4.19", "GLIBCXX_3.4.30"]
    assert sorted(cxx, key=elf.version_key) == cxx
    assert sorted(cxx) != cxx
    # The same order as conda's for the numbers (the sysroot's `__glibc >=2.28` compares those).
    numbers = [name.rpartition("_")[2] for name in names[1:]]
    assert sorted(numbers, key=Version) == numbers


def test_a_missing_glibc_names_the_newest_one_in_its_fix() -> None:
    """The C library's verdict: GLIBC_2.9 and GLIBC_2.34 missing; the fix asks for 2.34, not 2.9."""
    requirement = Requirement(
        binary=Path("/site-packages/triton/_C/libtriton.so"),
        library="libc.so.6",
        versions=frozenset({"GLIBC_2.9", "GLIBC_2.34", "GLIBC_2.17"}),
        provider=Path("/lib/aarch64-linux-gnu/libc.so.6"),
        missing=frozenset({"GLIBC_2.9", "GLIBC_2.34"}),
        provided=frozenset({"GLIBC_2.17", "GLIBC_2.18", "GLIBC_2.4"}),
    )
    result = _verdict("glibc", [requirement], cxx=False)
    assert result.message == (
        "libtriton.so needs GLIBC_2.9, GLIBC_2.34 from /lib/aarch64-linux-gnu/libc.so.6, which has up to GLIBC_2.18"
    )
    assert (
        result.fix
        == "use a host or container whose glibc provides GLIBC_2.34 (or a build for an older glibc)"
    )


def _archive(glibc: str) -> llvm_archive.LlvmArchive:
    top = "llvm-a66376b0-ubuntu-arm64"
    return llvm_archive.LlvmArchive(
        origin="recorded",
        url="file:///recorded.tar.gz",
        sha256="0" * 64,
        inspection=llvm_archive.Inspection(top=top, glibc=glibc, glibc_program="llvm-tblgen"),
    )


def _render(tmp_path: Path, c_stdlib_version: str) -> list:
    keys = tmp_path / "archive.yaml"
    keys.write_text(
        f'llvm_archive_url: ["file:///x"]\nllvm_archive_sha256: ["{"0" * 64}"]\n'
        f'c_stdlib_version: ["{c_stdlib_version}"]\n'
    )
    files = (ROOT / "conda_build_config.yaml", ROOT / "recipe" / "conda_build_config.yaml", keys)
    return render(ROOT / "recipe" / "recipe.yaml", files, target="linux-aarch64")


def test_the_archive_s_glibc_floor_is_a_version_order(tmp_path: Path) -> None:
    """No aarch64 program needs a GLIBC below 2.17 (the port's first release), so these are recorded
    inspections, not archives: the decision alone, with versions whose string order is the other way round."""
    outputs = _render(tmp_path, "2.17")
    llvm_archive.check_rendered(_archive("GLIBC_2.9"), outputs)  # 2.9 < 2.17 ("2.9" > "2.17" as strings)
    with pytest.raises(ConfigurationError, match=r'needs glibc 2.28 .* set c_stdlib_version to "2.28"'):
        llvm_archive.check_rendered(_archive("GLIBC_2.28"), outputs)
    # The sysroot named is the first at least as new as the need: 2.34 for 2.30.
    outputs = _render(tmp_path, "2.9")
    with pytest.raises(ConfigurationError, match=r'set c_stdlib_version to "2.17"'):
        llvm_archive.check_rendered(_archive("GLIBC_2.10"), outputs)  # 2.10 > 2.9; "2.10" < "2.17" too


# ---- no string comparison of versions left in the code ----------------------------------------------------------

# The code that runs: both distributions, the recipe's scripts, CI's and the benchmarks' helpers.
SOURCES = ("src", "flagtree-doctor/src", "recipe", ".ci", "benchmarks")
# A word of an identifier (split at `_` and case changes) that says its value is, or holds, versions.
FUNCTION_WORDS = frozenset(
    {"version", "versions", "glibc", "glibcxx", "cxxabi", "sysroot", "floor", "newest", "oldest", "release"}
)
# ... and of a value: the doctor's symbol versions are what a binary needs and what a library provides.
VERSION_WORDS = FUNCTION_WORDS | {"needed", "wanted", "provided", "missing"}
# Callables whose results order as versions: py-rattler's Version (and the name route.py binds it to),
# the doctor's version_key.
VERSION_KEYS = frozenset({"Version", "conda_version", "version_key"})
SAFE = re.compile(r"#\s*not a version order:\s*(?P<why>.*)$")
_NUMERIC_CALLS = frozenset({"len", "int", "float", "ord"})


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", name) if w}


def _names(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            yield child.id
        elif isinstance(child, ast.Attribute):
            yield child.attr
        elif isinstance(child, ast.arg):
            yield child.arg


def _callee(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return ""


def _looks_like_version(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(re.fullmatch(r"\d+(\.\d+)+", node.value))
    )


def _numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    return _callee(node) in _NUMERIC_CALLS or isinstance(node, ast.BinOp | ast.UnaryOp)


def _uses_version_key(node: ast.AST) -> bool:
    return any(_callee(c) in VERSION_KEYS or n in VERSION_KEYS for c in ast.walk(node) for n in _names(c))


def _orderings(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.AST, list[str]]]:
    """(the ordering, what decides its order, the enclosing functions' names) for every ``<``, ``<=``, ``>``,
    ``>=`` of values that are not numbers, and every ``max``, ``min``, ``sorted`` and ``.sort``."""

    def visit(node: ast.AST, functions: list[str]) -> Iterator[tuple[ast.AST, ast.AST, list[str]]]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions = [*functions, node.name]
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops
        ):
            operands = [node.left, *node.comparators]
            if not any(_numeric(o) for o in operands):
                yield node, node, functions
        elif _callee(node) in ("max", "min", "sorted", "sort") and isinstance(node, ast.Call):
            key = next((k.value for k in node.keywords if k.arg == "key"), None)
            if not any(_numeric(a) for a in node.args):  # max(float(...), floor): numbers
                yield node, key or node, functions
        for child in ast.iter_child_nodes(node):
            yield from visit(child, functions)

    yield from visit(tree, [])


def _marked_safe(path: Path, lines: list[str], node: ast.AST) -> bool:
    """Whether the ordering's lines, or the line above them, say why it is not a version order."""
    start, end = node.lineno, node.end_lineno or node.lineno
    for line in lines[max(start - 2, 0) : end]:
        found = SAFE.search(line)
        if found:
            assert found["why"].strip(), f"{path}:{start}: say why it is not a version order"
            return True
    return False


def version_orderings(root: Path) -> list[str]:
    """Each ordering under ``root``'s SOURCES that concerns versions and orders them without a version key."""
    found = []
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text()
            lines = text.splitlines()
            for node, decider, functions in _orderings(ast.parse(text, str(path))):
                words = set().union(*map(_words, _names(node)))
                named = words & VERSION_WORDS or set().union(*map(_words, functions)) & FUNCTION_WORDS
                versionish = named or any(_looks_like_version(c) for c in ast.walk(node))
                if not versionish or _uses_version_key(decider):
                    continue
                if not _marked_safe(path, lines, node):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_string_comparison_of_versions_is_left() -> None:
    """An ordering whose names say it holds versions uses Version/version_key, or says on its line (or the
    line above) why it is not a version order: `# not a version order: <why>`."""
    assert version_orderings(ROOT) == []


def test_the_scan_finds_a_string_comparison_of_versions(tmp_path: Path) -> None:
    """The scan itself, on the doctor's and the bump's code with their version keys dropped."""
    for folder in SOURCES:
        (tmp_path / folder).mkdir(parents=True)
    glibc = (ROOT / "flagtree-doctor/src/flagtree_doctor/glibc.py").read_text()
    (tmp_path / "flagtree-doctor/src/glibc.py").write_text(glibc.replace(", key=elf.version_key", ""))
    bump = (ROOT / "src/flagtree_feedstock/bump/run.py").read_text()
    (tmp_path / "src/run.py").write_text(
        bump.replace("rattler.Version(version) > rattler.Version(current)", "version > current")
    )
    (tmp_path / "recipe/floor.py").write_text('def ok(floor: str) -> bool:\n    return floor >= "2.17"\n')
    found = version_orderings(tmp_path)
    assert [line.split(": ", 1)[1] for line in found] == [
        "version > current",
        "max(matching)",
        "sorted(r.missing)",
        "max(needed)",
        "floor >= '2.17'",
    ], found
