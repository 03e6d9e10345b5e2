"""The seam between FlagTree and flagtree-cpu, read from their files: what must agree for the two to build.

- FlagTree's ``python/scripts/link_flagtree_cpu.sh`` links 12 paths of flagtree-cpu (and one of its own) into
  its tree: each target must exist.
- FlagTree's ``third_party/tle_arm64`` plugin defines the ``create_cpu_*`` builder methods (their argument
  counts, and the TritonCPU op each creates); flagtree-cpu's ``tle_ops.py`` calls them, and its
  ``TritonCPUOps.td`` defines the ops, with as many arguments as the method passes.
- FlagTree's ``builtin`` decorator (``python/triton/language/core.py``) hands every builtin either
  ``_builder`` (Triton 3.3) or ``_semantic`` (Triton 3.4 on); flagtree-cpu's builtins must take that one.

These are the checks that chose flagtree-cpu 19cede7e by hand (recipe/README.md). The parsers read the
shapes those files have (pybind11 ``.def("name", [](TritonOpBuilder &self, ...) {...})``, TableGen
``def TTC_XOp : TTC_Op<"x", ...> { let arguments = (ins ...); }``, Python ``@builtin`` functions through
:mod:`ast`), not C++ or TableGen in general.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

LINK_SCRIPT = "python/scripts/link_flagtree_cpu.sh"
TLE_ARM64 = "third_party/tle_arm64/python/triton_tle_arm64.cc"
IR_BINDINGS = "python/src/ir.cc"
CORE = "python/triton/language/core.py"
# In flagtree-cpu:
TLE_OPS = "third_party/cpu/language/cpu/tle_ops.py"
OPS_TD = "include/triton/Dialect/TritonCPU/IR/TritonCPUOps.td"
# Where the link script expects flagtree-cpu inside FlagTree's tree.
FLAGTREE_CPU_MOUNT = "third_party/triton-cpu"
KEYWORDS = ("_builder", "_semantic")

_SYMLINKS = re.compile(r"^SYMLINKS=\((?P<body>.*?)^\)", re.MULTILINE | re.DOTALL)
_ENTRY = re.compile(r'^\s*"(?P<path>[^"|]+)\|(?P<target>[^"|]+)"', re.MULTILINE)
_DEF = re.compile(r'\.def\(\s*"(?P<name>\w+)"\s*,')
_CREATE = re.compile(r"\bcreate<\s*cpu::(?P<op>\w+)\s*>")
_OP_DEF = re.compile(r"^def\s+(?P<def>\w+)\s*:\s*\w+<\s*\"[\w.]+\"", re.MULTILINE)
_INS = re.compile(r"let\s+arguments\s*=\s*\(\s*ins\b(?P<body>.*?)\)\s*;", re.DOTALL)
_OPERAND = re.compile(r":\s*\$\w+")
_KEYWORD_TEST = re.compile(r'"(?P<keyword>_builder|_semantic)"\s+not\s+in\s+kwargs')


@dataclass(frozen=True, kw_only=True)
class Link:
    """One entry of the link script: ``path`` (in FlagTree) points at ``target`` (relative to its folder)."""

    path: str
    target: str

    @property
    def resolved(self) -> str:
        """The target as a path from FlagTree's root."""
        return posixpath.normpath(posixpath.join(posixpath.dirname(self.path), self.target))

    @property
    def in_flagtree_cpu(self) -> str | None:
        """The target as a path inside flagtree-cpu, or None when it points into FlagTree itself."""
        resolved = self.resolved
        prefix = f"{FLAGTREE_CPU_MOUNT}/"
        return resolved.removeprefix(prefix) if resolved.startswith(prefix) else None


def links(script: str) -> list[Link]:
    """The ``SYMLINKS=( "path|target" ... )`` entries of link_flagtree_cpu.sh, in order."""
    block = _SYMLINKS.search(script)
    if block is None:
        return []
    return [Link(path=m["path"], target=m["target"]) for m in _ENTRY.finditer(block["body"])]


@dataclass(frozen=True, kw_only=True)
class BuilderMethod:
    """A builder method a pybind11 plugin adds: its name, its arguments (less ``self``), the op it creates."""

    name: str
    arguments: int
    op: str | None


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside (), <>, [] and {}."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [part.strip() for part in parts]


def _closing(text: str, start: int) -> int:
    """The index just after the bracket that closes the one at ``start``."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] in "([{":
            depth += 1
        elif text[index] in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def builder_methods(source: str, prefix: str = "create_cpu_") -> dict[str, BuilderMethod]:
    """The ``.def("<prefix>...", [](TritonOpBuilder &self, ...) {...})`` methods of a pybind11 source."""
    methods: dict[str, BuilderMethod] = {}
    defs = [m for m in _DEF.finditer(source) if m["name"].startswith(prefix)]
    for index, match in enumerate(defs):
        end = defs[index + 1].start() if index + 1 < len(defs) else len(source)
        chunk = source[match.end() : end]
        lambda_start = chunk.find("](")
        if lambda_start < 0:
            continue
        params_end = _closing(chunk, lambda_start + 1)
        params = _split_top_level(chunk[lambda_start + 2 : params_end - 1])
        arguments = len([p for p in params if not re.search(r"\bself\b", p)])
        create = _CREATE.search(chunk, params_end)
        methods[match["name"]] = BuilderMethod(
            name=match["name"], arguments=arguments, op=create["op"] if create else None
        )
    return methods


def defined_methods(source: str) -> set[str]:
    """Every name a pybind11 source defines with ``.def("name", ...)`` (FlagTree's python/src/ir.cc)."""
    return {m["name"] for m in _DEF.finditer(source)}


def builtin_keyword(core: str) -> str | None:
    """The keyword FlagTree's ``builtin`` decorator requires of every builtin: ``_builder`` or ``_semantic``."""
    start = core.find("def builtin(")
    if start < 0:
        return None
    match = _KEYWORD_TEST.search(core, start, start + 2000)
    return match["keyword"] if match else None


@dataclass(frozen=True, kw_only=True)
class BuilderCall:
    """A call of a builder method in flagtree-cpu's Python: the method, its positional arguments, the line."""

    method: str
    arguments: int
    line: int


def _is_builder(node: ast.expr) -> bool:
    """``_builder`` or ``_semantic.builder``: the receivers of builder calls in tle_ops.py."""
    if isinstance(node, ast.Name):
        return node.id == "_builder"
    return isinstance(node, ast.Attribute) and node.attr == "builder" and _is_builder_root(node.value)


def _is_builder_root(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "_semantic"


def builder_calls(source: str) -> list[BuilderCall]:
    """Every ``_builder.<method>(...)`` (or ``_semantic.builder.<method>(...)``) call, in source order."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is_builder(node.func.value)
        ):
            calls.append(BuilderCall(method=node.func.attr, arguments=len(node.args), line=node.lineno))
    return sorted(calls, key=lambda call: call.line)


def _builtins(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            (isinstance(d, ast.Name) and d.id == "builtin")
            or (isinstance(d, ast.Attribute) and d.attr == "builtin")
            for d in node.decorator_list
        ):
            yield node


def builtin_parameters(source: str) -> dict[str, set[str]]:
    """For each ``@builtin`` function, which of ``_builder``/``_semantic`` it takes."""
    found = {}
    for function in _builtins(ast.parse(source)):
        names = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]}
        found[function.name] = names & set(KEYWORDS)
    return found


def dialect_ops(td: str) -> dict[str, int]:
    """The ops a TableGen file defines, by C++ class name (the def less its dialect prefix), and how many
    arguments (operands and attributes) each takes."""
    ops = {}
    defs = list(_OP_DEF.finditer(td))
    for index, match in enumerate(defs):
        end = defs[index + 1].start() if index + 1 < len(defs) else len(td)
        name = match["def"].split("_", 1)[-1]
        ins = _INS.search(td, match.end(), end)
        ops[name] = len(_OPERAND.findall(ins["body"])) if ins else 0
    return ops
