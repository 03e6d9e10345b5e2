"""Render ``recipe/recipe.yaml`` with the variant files through py-rattler-build, offline.

The variant files are checked first (:mod:`.variants`); an error the engine still raises is reduced to one
line naming the file, the line and the expression, never its debug text.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flagtree_feedstock._engine import require
from flagtree_feedstock._own_files import RECIPE, read_own_text, repository_of
from flagtree_feedstock.errors import ConfigurationError, NothingToDoError
from flagtree_feedstock.platforms import PlatformName

from .variants import (
    MergedVariants,
    check_variant_files,
    compiler_mismatches,
    engine_text,
    ignored_note,
    merge_variants,
    pinning_keys,
    read_variant_text,
    recipe_keys,
    template_variables,
)

# The variant keys that pin an upstream source; `--render-only` shows each with the packages that use it.
PIN_KEYS: tuple[str, ...] = ("llvm_commit", "flagtree_commit", "flagtree_cpu_commit", "sleef_commit")


@dataclass(frozen=True, kw_only=True)
class RenderedOutput:
    """One output of one variant, as the engine rendered it."""

    name: str
    version: str
    build_string: str
    python: str | None
    pins: Mapping[str, str]
    variant: Mapping[str, str]
    # The outputs this one pins with pin_subpackage, as (name, version, build string).
    pinned: tuple[tuple[str, str, str], ...] = ()
    engine_variant: Any = field(compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of the package file this output produces."""
        return (self.name, self.version, self.build_string)


# The most variants the variant files may make of the keys the recipes use (the matrix is 4 today). The engine
# expands them in Rust, holding the GIL, where no signal reaches Python, and its time grows faster than the
# count (measured on 2 shared cores: 4 variants 0.08 s, 8 0.2 s, 16 0.6 s, 32 1.8 s, 256 50 s): the bound keeps
# a render, and so an interrupt, well under a second (issue 28 item 7).
MAX_VARIANTS = 8


def engine_variants(
    variant_files: Sequence[Path],
    *,
    recipe_dir: Path,
    target: PlatformName,
    build: PlatformName | None,
    strict: bool = False,
    note: Callable[[str], None] | None = None,
    root_files: Sequence[Path] = (),
) -> Any:  # noqa: ANN401 - rattler_build.VariantConfig
    """The variant files, checked (:func:`.variants.check_variant_files`) and merged as conda-build merges them
    (:func:`.variants.merge_variants`), their `# [selector]`s evaluated for ``target``: the one variant config
    the engine sees, whichever route (defaults, ``-e``, ``-m``) named the values.

    Keys the recipes do not use are ignored with one ``note``, a C and a C++ compiler of different versions is
    a ``note`` too; with ``strict`` both are errors. Neither calls a key that ``root_files`` (those of
    ``variant_files`` given as ``-e``: conda-forge's global pinning) set a misspelling.
    """
    rb = require("rattler_build", "py-rattler-build")
    keys = recipe_keys(recipe_dir)
    texts = {path: read_variant_text(path, recipe_dir=recipe_dir) for path in variant_files}
    known = pinning_keys(root_files, texts)
    ignored = check_variant_files(variant_files, keys, strict=strict, texts=texts, known=known)
    jinja = rb.JinjaConfig(platform=rb.PlatformConfig(target_platform=target, build_platform=build))
    loaded = []
    with tempfile.TemporaryDirectory(prefix="flagtree-variants-") as scratch:
        for index, path in enumerate(variant_files):
            text, flat = engine_text(texts[path], keys.used)
            # The engine reads the text checked above, not the path again: the file may change in between.
            copy = Path(scratch) / f"{index}.yaml"
            copy.write_text(text, encoding="utf-8")
            try:
                config = rb.VariantConfig.from_conda_build_config(copy, jinja)
            except rb.RattlerBuildError as exc:
                raise ConfigurationError(
                    f"variant file {path} is not a valid conda_build_config.yaml: {_engine_message(exc)}",
                    fix="correct the YAML (every key maps to a list of values)",
                ) from None
            loaded.append((path, config.to_dict(), [*(config.zip_keys or []), *flat]))
    merged = merge_variants(loaded, keys)
    if ignored and note is not None:
        note(ignored_note(ignored, keys, known=known))
    for mismatch in compiler_mismatches(merged):
        if strict:
            raise ConfigurationError(mismatch, fix="set c_compiler_version and cxx_compiler_version alike")
        if note is not None:
            note(f"{mismatch} (--strict makes this an error)")
    count = _variant_count(merged)
    if count > MAX_VARIANTS:
        raise ConfigurationError(
            f"the variant files make {count} variants, more than {MAX_VARIANTS}",
            fix="give the keys fewer values, or zip them (zip_keys)",
        )
    return rb.VariantConfig(dict(merged.values), zip_keys=merged.zip_keys or None)


def _variant_count(merged: MergedVariants) -> int:
    """How many variants the merged keys make at most: a zip_keys group counts once."""
    zipped = {name for group in merged.zip_keys for name in group}
    count = math.prod(len(merged.values[group[0]]) for group in merged.zip_keys)
    return count * math.prod(len(v) for name, v in merged.values.items() if name not in zipped)


def variants_yaml(config: Any) -> str:  # noqa: ANN401 - rattler_build.VariantConfig
    """``config`` as a variants.yaml text (JSON, which YAML reads), for the engine's entries that take files
    (``build_recipes``): they then see the variant :func:`engine_variants` made, not the files again."""
    document: dict[str, object] = dict(config.to_dict())
    if config.zip_keys:
        document["zip_keys"] = config.zip_keys
    return json.dumps(document, indent=1)


def render(
    recipe: Path,
    variant_files: Sequence[Path],
    *,
    target: PlatformName,
    build: PlatformName | None = None,
    strict: bool = False,
    note: Callable[[str], None] | None = None,
    root_files: Sequence[Path] = (),
) -> list[RenderedOutput]:
    """Render every output of every variant of ``recipe`` for ``target``; no network is used.

    ``variant_files`` are checked against the variables of the recipes beside ``recipe`` and merged before the
    engine sees them (:func:`engine_variants`; ``root_files``: those given as ``-e``).
    """
    rb = require("rattler_build", "py-rattler-build")
    text = read_own_text(recipe, RECIPE, inside=repository_of(recipe.parent))
    variants = engine_variants(
        variant_files,
        recipe_dir=recipe.parent,
        target=target,
        build=build,
        strict=strict,
        note=note,
        root_files=root_files,
    )
    try:
        stage0 = _parsed(text, recipe)
        rendered = stage0.render(
            variant_config=variants,
            render_config=rb.RenderConfig(
                platform=rb.PlatformConfig(target_platform=target, build_platform=build)
            ),
        )
    except rb.RattlerBuildError as exc:
        raise render_error(recipe, target, exc) from None
    outputs = _inherit_pins([_to_output(v) for v in rendered])
    if not outputs:
        raise NothingToDoError(
            f"every output of {recipe} is skipped for {target}", fix="choose another --target-platform"
        )
    return outputs


def _parsed(text: str, recipe: Path) -> Any:  # noqa: ANN401 - rattler_build.stage0.Stage0Recipe
    """``Stage0Recipe.from_file(recipe)``, given the text the toolkit read.

    py-rattler-build 0.73's public entries either open ``recipe`` again by name (``from_file``: unbounded, and
    blocking on a FIFO) or write the text into a folder of their own (``from_yaml``), which then becomes the
    recipe path that the build scripts, patches and test files are found from. This is ``from_file``'s own body
    (stage0.py) without its read: the engine's binding parses the text, and the recipe path stays ``recipe``.
    """
    from rattler_build import RepodataRevision  # noqa: PLC0415 - the engine is the [build] extra's (_engine.require)
    from rattler_build._rattler_build import stage0  # type: ignore[import-not-found]  # noqa: PLC0415 - no stub
    from rattler_build.stage0 import MultiOutputRecipe, SingleOutputRecipe  # noqa: PLC0415 - as above

    path = recipe.resolve()
    revision = RepodataRevision.LEGACY
    wrapper = stage0.Stage0Recipe.from_yaml(text, repodata_revision=revision)
    if wrapper.is_single_output():
        return SingleOutputRecipe(wrapper.as_single_output(), wrapper, path, repodata_revision=revision)
    return MultiOutputRecipe(wrapper.as_multi_output(), wrapper, path, repodata_revision=revision)


# What py-rattler-build 0.73 puts in a render error: Rust's debug text of the error, e.g.
# `Render error: Parse(JinjaError { message: "...", span: Span { start: Some(Marker { ..., line: 126,
# column: 14 }), end: None } })`, and for a variant file `InvalidConfig("...")`.
_DEBUG_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_DEBUG_MARKER = re.compile(r"line: (\d+), column: (\d+)")
_DEBUG_WRAPPED = re.compile(r'^\w+\("((?:[^"\\]|\\.)*)"\)$')
_TEMPLATE = re.compile(r"\(template: (.*)\)$")


def render_error(recipe: Path, target: PlatformName, exc: BaseException) -> ConfigurationError:
    """The engine's render error as one line: where in ``recipe``, what, and which variables it reads."""
    text = str(exc).strip()
    message = _engine_message(exc)
    marker = _DEBUG_MARKER.search(text)
    where = f"{recipe}:{marker[1]}:{marker[2]}" if marker else str(recipe)
    template = _TEMPLATE.search(message)
    if template is None:
        return ConfigurationError(
            f"{where}: does not render for {target}: {message}", fix=f"correct {recipe} there"
        )
    expression = template[1]
    message = message[: template.start()].removeprefix("Template rendering failed: ")
    message = re.sub(r"\s*\(in <string>:\d+\)", "", message).strip()
    names = sorted(template_variables(expression))
    return ConfigurationError(
        f"{where}: does not render for {target}: {message} in {expression}",
        fix=f"set {', '.join(names) or 'its variables'} in a variant file or the recipe's context, or correct "
        f"{recipe} there",
    )


def _engine_message(exc: BaseException) -> str:
    """The human part of the engine's error text, without Rust's debug wrapping."""
    text = str(exc).strip()
    found = _DEBUG_MESSAGE.search(text)
    if found:
        return found[1].replace('\\"', '"')
    first = text.splitlines()[0] if text else type(exc).__name__
    first = re.sub(r"^[\w ]+ error: ", "", first)
    wrapped = _DEBUG_WRAPPED.match(first)
    return wrapped[1].replace('\\"', '"') if wrapped else first


def _to_output(variant: Any) -> RenderedOutput:  # noqa: ANN401 - py-rattler-build's RenderedVariant, imported lazily
    used = {str(k): str(v) for k, v in variant.variant.items()}
    recipe = variant.recipe
    return RenderedOutput(
        name=recipe.package.name,
        version=str(recipe.package.version),
        build_string=str(recipe.build.string),
        python=_short_python(used.get("python")),
        pins={k: used[k] for k in PIN_KEYS if k in used},
        variant=used,
        pinned=tuple(
            sorted(  # not a version order: a canonical order of (name, version, build), to compare renders
                (info.name, str(info.version), str(info.build_string))
                for info in variant.pin_subpackages.values()
            )
        ),
        engine_variant=variant,
    )


def _short_python(value: str | None) -> str | None:
    """``3.12.* *_cpython`` (conda-forge's variant value) -> ``3.12``; the full value stays in ``variant``."""
    if value is None:
        return None
    return value.split()[0].removesuffix(".*")


def _inherit_pins(outputs: list[RenderedOutput]) -> list[RenderedOutput]:
    """Give each output the source pins of the outputs it pins exactly (flagtree-cpu shows LLVM's commit)."""
    by_key = {o.key: o for o in outputs}
    result = []
    for output in outputs:
        pins = dict(output.pins)
        todo = list(output.pinned)
        seen: set[tuple[str, str, str]] = set()
        while todo:
            key = todo.pop()
            dependency = by_key.get(key)
            if key in seen or dependency is None:
                continue
            seen.add(key)
            for name, value in dependency.pins.items():
                pins.setdefault(name, value)
            todo.extend(dependency.pinned)
        result.append(replace(output, pins={k: pins[k] for k in PIN_KEYS if k in pins}))
    return result
