"""The toolkit's package in layers: each module imports only its own subpackage and the layers below it.

The rule is the one ``src/flagtree_feedstock/__init__.py`` and each subpackage's ``__init__`` state. Imports are
read from the source (every ``import`` and ``from`` statement, at any depth, relative ones resolved), so an
import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = "flagtree_feedstock"
ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE
HELPERS = frozenset(
    {
        "errors",
        "platforms",
        "_cgroups",
        "_digest",
        "_foreign_json",
        "_foreign_text",
        "_engine",
        "_http",
        "_interrupts",
        "_locks",
        "_own_files",
        "_paths",
        "_processes",
        "_progress",
        "_subprocess",
        "_urls",
        "_url_parsing",
    }
)
CLI = frozenset({"cli", "_entry", "__main__", "__init__"})
# What each part of the package may import, besides itself; the CLI may import anything.
ALLOWED: dict[str, frozenset[str]] = {
    "helpers": frozenset({"helpers"}),
    "_archive": frozenset({"helpers"}),
    "recipe": frozenset({"helpers"}),
    "channel": frozenset({"helpers", "_archive"}),
    "llvm_archive": frozenset({"helpers", "recipe", "_archive"}),
    "bump": frozenset({"helpers", "recipe", "_archive"}),
    "builder": frozenset({"helpers", "recipe", "channel", "llvm_archive", "_archive"}),
    # One module per command, above every subpackage it runs; only the CLI (cli.py) is above it.
    "commands": frozenset({"helpers", "recipe", "channel", "llvm_archive", "bump", "builder", "_archive"}),
}


def part(module: str, root: Path) -> str:
    """The layer part of ``flagtree_feedstock.X[.Y]``: a subpackage's name, ``helpers`` or ``cli``."""
    top = module.split(".")[1] if module.count(".") else "__init__"
    if top in HELPERS:
        return "helpers"
    if top in CLI:
        return "cli"
    if (root / top).is_dir():
        return top
    raise AssertionError(f"{module}: not a module of {PACKAGE}; add it to a layer in {__file__}")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """The package modules ``path`` imports, with their lines (``from . import x`` names the module x)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [(node.lineno, base)]
            # `from pkg import submodule`: the submodule is imported too
            found += [
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if (root.parent / base.replace(".", "/") / alias.name).is_dir()
                or (root.parent / base.replace(".", "/") / f"{alias.name}.py").is_file()
            ]
    return [(line, target) for line, target in found if target == PACKAGE or target.startswith(f"{PACKAGE}.")]


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        source = part(module_name(path, root), root)
        if source == "cli":
            continue
        for line, target in imports(path, root):
            if target == PACKAGE:
                continue
            destination = part(target, root)
            if destination != source and destination not in ALLOWED[source]:
                found.append(f"{path.relative_to(root)}:{line}: {source} imports {target} ({destination})")
    return found


def test_every_import_goes_down_the_layers() -> None:
    assert violations() == []


def test_an_import_up_the_layers_is_found(tmp_path: Path) -> None:
    """The check itself: a recipe module importing the build (a realistic shortcut) is reported, by line."""
    copy = tmp_path / PACKAGE
    for path in ROOT.rglob("*.py"):
        (copy / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        (copy / path.relative_to(ROOT)).write_text(path.read_text())
    render = copy / "recipe" / "render.py"
    render.write_text(render.read_text() + "\n\ndef _late() -> None:\n    from ..builder import plan\n")
    lines = render.read_text().count("\n")
    assert violations(copy) == [
        f"recipe/render.py:{lines}: recipe imports {PACKAGE}.builder (builder)",
        f"recipe/render.py:{lines}: recipe imports {PACKAGE}.builder.plan (builder)",
    ]


def test_every_folder_of_the_package_is_a_package_with_its_rule() -> None:
    """setuptools' find_packages ships only folders with an __init__.py; each says what it may import."""
    for folder in sorted(p for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder} has no __init__.py: the wheel would leave it out"
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in docstring, f"{init}: its docstring does not say what the subpackage may import"
        assert folder.name in ALLOWED, f"{folder.name}: not a layer of tests/test_layers.py"


# The folders GitHub's Python .gitignore template ignores at any depth (github/gitignore, Python.gitignore): a
# subpackage of one of these names is left out of a contributor's commits and drawn as generated by the tools
# that map a project's structure.
OUTPUT_FOLDERS = frozenset(
    {"build", "develop-eggs", "dist", "downloads", "eggs", ".eggs", "lib", "lib64", "parts", "sdist", "var"}
    | {"wheels", "env", "venv", "ENV", "htmlcov", "site"}
)


def test_no_subpackage_is_named_as_tool_output() -> None:
    """The main job lives in ``builder/``, not ``build/``: no folder of the package takes a name tools use for
    their output."""
    named = sorted(
        str(folder.relative_to(ROOT))
        for folder in ROOT.rglob("*")
        if folder.is_dir() and folder.name in OUTPUT_FOLDERS
    )
    assert named == []


def unmapped(root: Path = ROOT) -> list[str]:
    """The modules (and nested folders of modules) of each subpackage that its ``__init__`` docstring's map does
    not name as ``:mod:`.NAME```, as ``folder/NAME``."""
    found = []
    for init in sorted(root.rglob("__init__.py")):
        folder = init.parent
        if folder == root:
            continue  # the package's own docstring maps the layers, by subpackage
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        held = sorted(
            [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
            + [p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.py"))]
        )
        found += [f"{folder.relative_to(root)}/{name}" for name in held if f":mod:`.{name}`" not in docstring]
    return found


def test_every_subpackage_s_map_names_every_module_it_holds() -> None:
    """A maintainer reads a subpackage's ``__init__`` first: its map names each module it holds, nested
    subpackages too, so no module is found only by listing the folder."""
    assert unmapped() == []


def test_a_module_left_out_of_its_map_is_found(tmp_path: Path) -> None:
    """The check itself: a module added to a nested subpackage without a line in its map is reported."""
    copy = tmp_path / PACKAGE
    for path in ROOT.rglob("*.py"):
        (copy / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        (copy / path.relative_to(ROOT)).write_text(path.read_text())
    (copy / "builder" / "landing" / "late_rewrite.py").write_text('"""A rewrite added late."""\n')
    assert unmapped(copy) == ["builder/landing/late_rewrite"]


def test_step_6_of_the_architecture_names_the_landing_s_modules_in_its_map_s_order() -> None:
    """docs/architecture.md's step 6 ("Land") and ``builder/landing/__init__.py`` list the same modules in the
    same order, the order the landing runs them: a module moved, added or renamed changes both."""
    architecture = (ROOT.parents[1] / "docs" / "architecture.md").read_text()
    step = architecture[architecture.index("6. **Land**") : architecture.index("7. **Index**")]
    in_docs = list(dict.fromkeys(re.findall(r"`builder/landing/(\w+)\.py`", step)))
    init = ROOT / "builder" / "landing" / "__init__.py"
    in_map = re.findall(r":mod:`\.(\w+)`", ast.get_docstring(ast.parse(init.read_text())) or "")
    held = sorted(p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py")
    assert in_docs == in_map
    assert sorted(in_map) == held


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports, at any depth (a function's imports too:
    an import moved into a function to dodge a loop keeps the loop)."""
    return {
        module_name(path, root): {target for _, target in imports(path, root)}
        for path in sorted(root.rglob("*.py"))
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module, or of one that
    imports itself (Tarjan's algorithm, iterative), each sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        while work:
            node, targets = work[-1]
            target = next((t for t in targets if t in graph), None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(component) > 1 or node in graph[node]:
                        found.append(sorted(component))
            elif target not in order:
                order[target] = low[target] = len(order)
                stack.append(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], order[target])
    return found


def test_no_import_circle() -> None:
    """No module reaches itself through imports (STYLE.md 18): each shared piece has a home below both."""
    assert cycles(import_graph()) == []


def test_a_circle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    """The check itself: the circle issue 48 found, one link hidden in a function (the copies' module asking the
    installer's at call time), is found: one circle, both modules in it."""
    copy = tmp_path / PACKAGE
    for path in ROOT.rglob("*.py"):
        (copy / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        (copy / path.relative_to(ROOT)).write_text(path.read_text())
    repack = copy / "channel" / "repack.py"
    repack.write_text(
        repack.read_text() + "\n\ndef _late() -> None:\n    from .install import smoke_install\n"
    )
    (circle,) = cycles(import_graph(copy))  # one circle, through every module between the two
    assert {f"{PACKAGE}.channel.install", f"{PACKAGE}.channel.repack"} <= set(circle)
