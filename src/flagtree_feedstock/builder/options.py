"""The ``build`` command's options: defaults in one place, one frozen object, a start-up summary."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal, get_args

from flagtree_feedstock._http import shown_url
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.platforms import DEFAULT_TARGET, PlatformName, parse_platform

Tool = Literal["rattler-build", "conda-build", "boa"]
TOOLS: frozenset[str] = frozenset(get_args(Tool))
# The package format either engine writes; the toolkit finishes both alike (builder/landing/epoch_rewrite.py).
PackageFormat = Literal["conda", "tar.bz2"]
PACKAGE_FORMATS: tuple[str, ...] = get_args(PackageFormat)

# FLAGTREE_FEEDSTOCK_<NAME> environment variables may set these (see ENV_OPTIONS); the command line wins.
ENV_PREFIX = "FLAGTREE_FEEDSTOCK_"


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    recipe_dir: Path = Path("recipe")
    # The root variant files (what conda-forge's global pinning supplies), read first; --exclusive-config-file
    # (repeatable) names others in their place, as conda-build's -e does. The recipe folder's own is read after
    # them, then the --variant-config files, in order: later files win (recipe.variants.variant_files).
    exclusive_config_files: tuple[Path, ...] = (Path("conda_build_config.yaml"),)
    variant_configs: tuple[Path, ...] = ()
    target_platform: PlatformName = DEFAULT_TARGET
    build_platform: PlatformName | None = None
    output_dir: Path = Path("build_artifacts")
    channels: tuple[str, ...] = ("conda-forge",)
    pythons: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    tool: Tool = "rattler-build"
    package_format: PackageFormat = "conda"
    test: bool = True
    keep_build: bool = False
    force: bool = False
    # flagtree-llvm from Triton's prebuilt LLVM archive (a file, an unpacked folder or a URL): llvm_archive/.
    llvm_archive: str | None = None
    llvm_archive_sha256: str | None = None
    llvm_archive_max_size: str | None = None  # the most its download may take (llvm_archive.fetch's default)
    llvm_archive_timeout: str | None = None  # the longest its download may take, whole (seconds)
    # Variant keys the recipes do not use, and a C and a C++ compiler of different versions, are errors
    # rather than notes (recipe.variants).
    strict: bool = False
    # The packages (by name) whose link scripts may run as the engine installs them into the build's
    # environments, and whose activation scripts may run as it activates them (channel.link_scripts), besides
    # those the recipe's folder lists (recipe.package_scripts); a package that carries any is refused otherwise.
    allow_link_scripts: tuple[str, ...] = ()
    # The longest one request of the relay to a --channel may take, whole (seconds; channel.index_relay's
    # default when None): the solves before the build and the tests read the channels through it alone.
    channel_timeout: float | None = None

    def summary(self) -> str:
        """One line per option; those that differ from the defaults are marked with ``*``."""
        default = BuildOptions()
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            mark = "*" if value != getattr(default, f.name) else " "
            # A URL (a channel, --llvm-archive) without a password or a query, which may sign it.
            shown = ", ".join(shown_url(str(v)) for v in value) if isinstance(value, tuple) else value
            shown = shown_url(shown) if isinstance(shown, str) else shown
            lines.append(f" {mark} {f.name}: {shown if shown not in ('', None) else '-'}")
        return "\n".join(lines)


def _parse_tool(value: str) -> Tool:
    if value not in TOOLS:
        raise ConfigurationError(
            f"--tool {value!r} is not supported", fix=f"use one of {', '.join(sorted(TOOLS))}"
        )
    return value  # type: ignore[return-value]


# The options an environment variable may set, FLAGTREE_FEEDSTOCK_<name> named for the option users type
# (--python -> FLAGTREE_FEEDSTOCK_PYTHON), and the other variables the toolkit reads. Any other
# FLAGTREE_FEEDSTOCK_* variable is a typo, reported with the nearest name.
ENV_OPTIONS: Mapping[str, str] = {
    "recipe_dir": "RECIPE_DIR",
    "exclusive_config_files": "EXCLUSIVE_CONFIG_FILE",
    "variant_configs": "VARIANT_CONFIG",
    "target_platform": "TARGET_PLATFORM",
    "build_platform": "BUILD_PLATFORM",
    "output_dir": "OUTPUT_DIR",
    "channels": "CHANNEL",
    "pythons": "PYTHON",
    "outputs": "OUTPUT",
    "tool": "TOOL",
    "llvm_archive": "LLVM_ARCHIVE",
    "llvm_archive_sha256": "LLVM_ARCHIVE_SHA256",
    "llvm_archive_max_size": "LLVM_ARCHIVE_MAX_SIZE",
    "llvm_archive_timeout": "LLVM_ARCHIVE_TIMEOUT",
    "allow_link_scripts": "ALLOW_LINK_SCRIPTS",
    "channel_timeout": "CHANNEL_TIMEOUT",
}
# The plural names these had before they followed the options; still read, never suggested.
ENV_OLD_NAMES: Mapping[str, str] = {"channels": "CHANNELS", "pythons": "PYTHONS", "outputs": "OUTPUTS"}
ENV_OTHER = ("DEBUG",)


def check_environment(env: Mapping[str, str]) -> None:
    """Reject a ``FLAGTREE_FEEDSTOCK_*`` variable the toolkit does not read, naming the one meant."""
    suggested = [ENV_PREFIX + name for name in (*ENV_OPTIONS.values(), *ENV_OTHER)]
    known = {*suggested, *(ENV_PREFIX + name for name in ENV_OLD_NAMES.values())}
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            # Compared without the prefix every name shares, which alone would make FOO a near miss of TOOL.
            short = [n.removeprefix(ENV_PREFIX) for n in suggested]
            close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), short, n=1, cutoff=0.7)
            hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else f"known: {', '.join(suggested)}"
            raise ConfigurationError(f"unknown environment variable {name}", fix=hint)
    for option, old in ENV_OLD_NAMES.items():
        new = ENV_PREFIX + ENV_OPTIONS[option]
        if new in env and ENV_PREFIX + old in env:
            raise ConfigurationError(
                f"both {new} and its old name {ENV_PREFIX + old} are set", fix=f"unset {ENV_PREFIX + old}"
            )


def from_cli(values: Mapping[str, object], env: Mapping[str, str]) -> BuildOptions:
    """Build the options from parsed arguments (``None`` = not given) over ``FLAGTREE_FEEDSTOCK_*`` env vars."""

    check_environment(env)

    def pick(name: str) -> object:
        given = values.get(name)
        if given not in (None, (), []):
            return given
        old = ENV_OLD_NAMES.get(name)
        # An empty variable counts as unset; an empty option on the command line is refused (_path).
        return env.get(ENV_PREFIX + ENV_OPTIONS[name], env.get(ENV_PREFIX + old) if old else None) or None

    default = BuildOptions()
    target = pick("target_platform")
    build = pick("build_platform")
    channels = pick("channels")
    pythons = pick("pythons")
    tool = pick("tool")
    return BuildOptions(
        recipe_dir=_path(pick("recipe_dir"), "--recipe-dir") or default.recipe_dir,
        exclusive_config_files=_paths(pick("exclusive_config_files")) or default.exclusive_config_files,
        variant_configs=_paths(pick("variant_configs")),
        target_platform=parse_platform(str(target), option="--target-platform")
        if target
        else default.target_platform,
        build_platform=parse_platform(str(build), option="--build-platform") if build else None,
        output_dir=_path(pick("output_dir"), "--output-dir") or default.output_dir,
        channels=_as_tuple(channels) or default.channels,
        pythons=_as_tuple(pythons),
        outputs=_as_tuple(pick("outputs")),
        tool=_parse_tool(str(tool)) if tool else default.tool,
        package_format=values.get("package_format") or default.package_format,  # type: ignore[arg-type]
        test=not values.get("no_test"),
        keep_build=bool(values.get("keep_build")),
        force=bool(values.get("force")),
        strict=bool(values.get("strict")),
        llvm_archive=str(pick("llvm_archive") or "") or None,
        llvm_archive_sha256=str(pick("llvm_archive_sha256") or "") or None,
        llvm_archive_max_size=str(pick("llvm_archive_max_size") or "") or None,
        llvm_archive_timeout=str(pick("llvm_archive_timeout") or "") or None,
        allow_link_scripts=_as_tuple(pick("allow_link_scripts")),
        channel_timeout=_seconds(pick("channel_timeout"), "--channel-timeout"),
    )


def _seconds(value: object, option: str) -> float | None:
    """A number of seconds above zero; ``None`` when not given. ``nan`` and ``inf`` are no deadline."""
    if value is None:
        return None
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ConfigurationError(
            f"{option} {str(value)!r} is not a number of seconds above 0", fix=f"give e.g. {option} 600"
        )
    return seconds


def _path(value: object, option: str) -> Path | None:
    """A path option's value; ``None`` when not given. An empty one is refused: ``Path("")`` is the current
    folder, never what was meant."""
    if value is None:
        return None
    if not str(value).strip():
        raise ConfigurationError(f"{option} is empty", fix=f"give {option} a path, or leave the option out")
    if "\0" in str(value):
        raise ConfigurationError(
            f"{option} {str(value)!r} holds a NUL byte", fix=f"give {option} a real path"
        )
    return Path(str(value))


def _paths(value: object) -> tuple[Path, ...]:
    """Paths from the command line (a list), or from the environment: separated by ``:``, as in ``PATH``, since
    a path may hold spaces and commas."""
    if isinstance(value, str):
        return tuple(Path(v) for v in value.split(os.pathsep) if v)
    given = _as_tuple(value)
    if any(not v.strip() or "\0" in v for v in given):
        raise ConfigurationError(
            "a variant file option is empty or holds a NUL byte", fix="give each -m/-e option a real path"
        )
    return tuple(Path(v) for v in given)


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
