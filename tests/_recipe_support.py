"""What the recipe tests share: the paths, the variant files, and meta.yaml rendered the way conda-build does.

meta.yaml is rendered with jinja2 and a small selector evaluator (enough for this recipe's selectors:
platform names combined with and/or/not), with conda-build's jinja functions reduced to the strings
rattler-build renders for the same call, so the two recipes compare field by field. ``PKG_HASH`` is left as
the text ``{{ PKG_HASH }}``: only conda-build knows the hash (tests/test_recipe_conda_build.py asks it).
This stands in for conda-build's render, which is not on PyPI: it cannot show conda-build's own reading of
jinja and selectors beyond what this recipe uses, its hash inputs or its solves; the conda_build tier asks
the real conda-build where it is installed.
"""

from __future__ import annotations

import importlib.util
import re
import types
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPE_DIR = ROOT / "recipe"
RECIPE_V1 = RECIPE_DIR / "recipe.yaml"
META = RECIPE_DIR / "meta.yaml"
# The global variant file, then the recipe's own (the feedstock's pins), in the order every engine reads them.
VARIANT_FILES = (ROOT / "conda_build_config.yaml", RECIPE_DIR / "conda_build_config.yaml")
SHARED = ROOT.parent / "shared"

TARGET = "linux-aarch64"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
OUTPUTS = ("flagtree-llvm", "flagtree-doctor", "flagtree-cpu")
PIN_KEYS = ("llvm_commit", "flagtree_commit", "flagtree_cpu_commit", "sleef_commit")

# conda-build's selector namespace for the platforms we render.
_PLATFORM_NAMES: dict[str, dict[str, bool]] = {
    "linux-aarch64": {"linux": True, "unix": True, "aarch64": True, "arm64": False, "x86_64": False},
    "linux-64": {"linux": True, "unix": True, "aarch64": False, "arm64": False, "x86_64": True},
}
_SELECTOR = re.compile(r"^(?P<text>.*?)\s*#\s*\[(?P<expr>[^\[\]]+)\]\s*$")


@cache
def variants() -> dict[str, list[Any]]:
    """The variant files as plain YAML (they have no selectors), merged: a later file's key wins."""
    merged: dict[str, list[Any]] = {}
    for path in VARIANT_FILES:
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, dict), path
        merged |= data
    return merged


def first_variant(python: str = PYTHONS[0]) -> dict[str, Any]:
    """One value per key: the python given, the only value of every other key."""
    chosen: dict[str, Any] = {}
    for key, values in variants().items():
        if key == "zip_keys":
            continue
        if key == "python":
            chosen[key] = next(v for v in values if str(v).startswith(f"{python}."))
        else:
            assert len(values) == 1, f"{key} has several values; the tests expect one"
            chosen[key] = values[0]
    return chosen


def select_lines(text: str, target: str, build: str | None = None) -> str:
    """Drop each line whose `# [selector]` is false for ``target`` (built on ``build``), as conda-build does."""
    namespace: dict[str, object] = {"osx": False, "win": False, **_PLATFORM_NAMES[target]}
    namespace |= {"target_platform": target, "build_platform": build or target}
    kept = []
    for line in text.splitlines():
        match = _SELECTOR.match(line)
        if match is None:
            kept.append(line)
        elif eval(match["expr"], {"__builtins__": {}}, namespace):  # our own recipe's selectors
            kept.append(match["text"])
    return "\n".join(kept) + "\n"


def render_meta(
    target: str = TARGET, python: str = PYTHONS[0], build: str | None = None, extra: Mapping[str, Any] = {}
) -> dict[str, Any]:
    """meta.yaml for ``target`` (built on ``build``, default: natively) and one python variant, as a dict;
    ``extra`` variant keys (one value each) over the variant files'."""
    import jinja2  # noqa: PLC0415 - a test dependency only

    variant = first_variant(python) | dict(extra)
    subdir = target

    def compiler(language: str) -> str:
        return f"{variant[f'{language}_compiler']}_{subdir} {variant[f'{language}_compiler_version']}.*"

    def stdlib(language: str) -> str:
        return f"{variant[f'{language}_stdlib']}_{subdir} {variant[f'{language}_stdlib_version']}.*"

    def pin_subpackage(name: str, exact: bool = False) -> str:
        return f"pin_subpackage({name}, exact={exact})"

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    text = env.from_string(META.read_text()).render(
        **variant,
        compiler=compiler,
        stdlib=stdlib,
        pin_subpackage=pin_subpackage,
        PKG_HASH="{{ PKG_HASH }}",
        PYTHON="$PYTHON",
        target_platform=target,
        build_platform=build or target,
    )
    data = yaml.safe_load(select_lines(text, target, build))
    assert isinstance(data, dict)
    return data


def meta_outputs(
    target: str = TARGET, python: str = PYTHONS[0], build: str | None = None
) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in render_meta(target, python, build)["outputs"]}


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def requirement_strings(values: list[Any]) -> list[str]:
    """Requirements with pin_subpackage written the way render_meta writes it."""
    out = []
    for value in values:
        if isinstance(value, Mapping) and "pin_subpackage" in value:
            pin = value["pin_subpackage"]
            out.append(f"pin_subpackage({pin['name']}, exact={bool(pin.get('exact', False))})")
        else:
            out.append(str(value))
    return out


@cache
def llvm_distribution() -> types.ModuleType:
    """recipe/llvm_distribution.py, the script build-llvm.sh runs, imported as a module."""
    spec = importlib.util.spec_from_file_location("llvm_distribution", RECIPE_DIR / "llvm_distribution.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dot_graph(shapes: Mapping[str, str], links: list[tuple[str, str]]) -> str:
    """A link graph written the way `cmake --graphviz` writes it: libraries by name and shape, links by name."""
    ids = {name: f"node{number}" for number, name in enumerate(shapes)}
    lines = ['digraph "LLVM" {\nnode [\n  fontsize = "12"\n];']
    lines += [f'    "{ids[name]}" [ label = "{name}", shape = {shape} ];' for name, shape in shapes.items()]
    lines += [f'    "{ids[a]}" -> "{ids[b]}" [ style = dotted ] // {a} -> {b}' for a, b in links]
    return "\n".join([*lines, "}", ""])
