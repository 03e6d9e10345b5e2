"""The conda platforms the feedstock knows and the one this host is."""

from __future__ import annotations

import platform as _platform
import sys
from typing import Literal, get_args

from .errors import ConfigurationError, PlatformError

PlatformName = Literal["linux-aarch64", "linux-64"]
PLATFORMS: frozenset[str] = frozenset(get_args(PlatformName))
DEFAULT_TARGET: PlatformName = "linux-aarch64"

_MACHINE_TO_PLATFORM: dict[str, PlatformName] = {
    "aarch64": "linux-aarch64",
    "arm64": "linux-aarch64",
    "x86_64": "linux-64",
    "amd64": "linux-64",
}


def parse_platform(value: str, *, option: str) -> PlatformName:
    """Return ``value`` as a known platform or raise a one-line configuration error."""
    if value not in PLATFORMS:
        known = ", ".join(sorted(PLATFORMS))
        raise ConfigurationError(
            f"{option} {value!r} is not a platform this feedstock builds", fix=f"use one of {known}"
        )
    return value  # type: ignore[return-value]


def host_platform(machine: str | None = None, system: str | None = None) -> PlatformName:
    """The conda platform of this machine (``linux-64`` on x86_64 Linux)."""
    system = system if system is not None else sys.platform
    machine = (machine if machine is not None else _platform.machine()).lower()
    if not system.startswith("linux") or machine not in _MACHINE_TO_PLATFORM:
        raise PlatformError(
            f"this host ({system}/{machine}) is not a Linux machine the feedstock can build on",
            fix="build on linux-64 or linux-aarch64",
        )
    return _MACHINE_TO_PLATFORM[machine]


def check_can_build(target: PlatformName, build: PlatformName | None, host: PlatformName) -> PlatformName:
    """Return the build platform to use, or explain in one line why this host cannot build ``target``."""
    if build is None:
        if target != host:
            raise PlatformError(
                f"this host is {host} and cannot build {target} natively",
                fix=f"run on a {target} machine, or pass --build-platform {host} for a cross build",
            )
        return host
    if build != host:
        raise PlatformError(
            f"--build-platform {build} is not this host ({host})",
            fix=f"pass --build-platform {host} or run on a {build} machine",
        )
    return build
