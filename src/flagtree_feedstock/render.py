"""Render ``recipe/recipe.yaml`` with ``conda_build_config.yaml`` through py-rattler-build, offline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._engine import require
from .errors import ConfigurationError, NothingToDoError
from .platforms import PlatformName

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


def _variant_config(variant_file: Path, target: PlatformName, build: PlatformName | None) -> Any:  # noqa: ANN401
    rb = require("rattler_build", "py-rattler-build")
    if not variant_file.is_file():
        raise ConfigurationError(
            f"variant file {variant_file} does not exist",
            fix="pass --variant-config PATH to a conda_build_config.yaml",
        )
    platform = rb.PlatformConfig(target_platform=target, build_platform=build)
    try:
        return rb.VariantConfig.from_conda_build_config(variant_file, rb.JinjaConfig(platform=platform))
    except rb.RattlerBuildError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigurationError(
            f"variant file {variant_file} is not a valid conda_build_config.yaml: {reason}",
            fix="correct the YAML (every key maps to a list of values)",
        ) from None


def render(
    recipe: Path,
    variant_file: Path,
    *,
    target: PlatformName,
    build: PlatformName | None = None,
) -> list[RenderedOutput]:
    """Render every output of every variant of ``recipe`` for ``target``; no network is used."""
    rb = require("rattler_build", "py-rattler-build")
    if not recipe.is_file():
        raise ConfigurationError(
            f"recipe {recipe} does not exist", fix="pass --recipe-dir DIR, the folder holding recipe.yaml"
        )
    variants = _variant_config(variant_file, target, build)
    try:
        stage0 = rb.Stage0Recipe.from_file(recipe)
        rendered = stage0.render(
            variant_config=variants,
            render_config=rb.RenderConfig(
                platform=rb.PlatformConfig(target_platform=target, build_platform=build)
            ),
        )
    except rb.RattlerBuildError as exc:
        raise ConfigurationError(
            f"recipe {recipe} does not render for {target}: {_first_line(exc)}",
            fix="check the recipe and variant file (rattler-build's message is above)",
        ) from None
    outputs = _inherit_pins([_to_output(v) for v in rendered])
    if not outputs:
        raise NothingToDoError(
            f"every output of {recipe} is skipped for {target}", fix="choose another --target-platform"
        )
    return outputs


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _to_output(variant: Any) -> RenderedOutput:  # noqa: ANN401
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
            sorted(
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
