"""The ``build`` command's options: defaults in one place, one frozen object, a start-up summary."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal, get_args

from .errors import ConfigurationError
from .platforms import DEFAULT_TARGET, PlatformName, parse_platform

Tool = Literal["rattler-build", "conda-build", "boa"]
TOOLS: frozenset[str] = frozenset(get_args(Tool))

# FLAGTREE_FEEDSTOCK_<NAME> environment variables may set these; the command line wins over them.
ENV_PREFIX = "FLAGTREE_FEEDSTOCK_"


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    recipe_dir: Path = Path("recipe")
    variant_config: Path = Path("conda_build_config.yaml")
    target_platform: PlatformName = DEFAULT_TARGET
    build_platform: PlatformName | None = None
    output_dir: Path = Path("build_artifacts")
    channels: tuple[str, ...] = ("conda-forge",)
    pythons: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    tool: Tool = "rattler-build"
    test: bool = True
    keep_build: bool = False

    def summary(self) -> str:
        """One line per option; those that differ from the defaults are marked with ``*``."""
        default = BuildOptions()
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            mark = "*" if value != getattr(default, f.name) else " "
            shown = ", ".join(value) if isinstance(value, tuple) else value
            lines.append(f" {mark} {f.name}: {shown if shown not in ('', None) else '-'}")
        return "\n".join(lines)


def _parse_tool(value: str) -> Tool:
    if value not in TOOLS:
        raise ConfigurationError(
            f"--tool {value!r} is not supported", fix=f"use one of {', '.join(sorted(TOOLS))}"
        )
    return value  # type: ignore[return-value]


# The options an environment variable may set (FLAGTREE_FEEDSTOCK_OUTPUT_DIR=...), and the other variables
# the toolkit reads. Any other FLAGTREE_FEEDSTOCK_* variable is a typo, reported with the nearest name.
ENV_OPTIONS = (
    "recipe_dir", "variant_config", "target_platform", "build_platform", "output_dir",
    "channels", "pythons", "outputs", "tool",
)  # fmt: skip
ENV_OTHER = ("DEBUG",)


def check_environment(env: Mapping[str, str]) -> None:
    """Reject a ``FLAGTREE_FEEDSTOCK_*`` variable the toolkit does not read, naming the one meant."""
    known = [ENV_PREFIX + name.upper() for name in (*ENV_OPTIONS, *ENV_OTHER)]
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
            raise ConfigurationError(f"unknown environment variable {name}", fix=hint)


def from_cli(values: Mapping[str, object], env: Mapping[str, str]) -> BuildOptions:
    """Build the options from parsed arguments (``None`` = not given) over ``FLAGTREE_FEEDSTOCK_*`` env vars."""

    check_environment(env)

    def pick(name: str) -> object:
        given = values.get(name)
        if given not in (None, (), []):
            return given
        return env.get(ENV_PREFIX + name.upper())

    default = BuildOptions()
    target = pick("target_platform")
    build = pick("build_platform")
    channels = pick("channels")
    pythons = pick("pythons")
    tool = pick("tool")
    return BuildOptions(
        recipe_dir=Path(str(pick("recipe_dir") or default.recipe_dir)),
        variant_config=Path(str(pick("variant_config") or default.variant_config)),
        target_platform=parse_platform(str(target), option="--target-platform")
        if target
        else default.target_platform,
        build_platform=parse_platform(str(build), option="--build-platform") if build else None,
        output_dir=Path(str(pick("output_dir") or default.output_dir)),
        channels=_as_tuple(channels) or default.channels,
        pythons=_as_tuple(pythons),
        outputs=_as_tuple(pick("outputs")),
        tool=_parse_tool(str(tool)) if tool else default.tool,
        test=not values.get("no_test"),
        keep_build=bool(values.get("keep_build")),
    )


def _as_tuple(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.replace(",", " ").split() if v)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    raise ConfigurationError(
        f"cannot read {value!r} as a list", fix="pass values separated by spaces or commas"
    )
