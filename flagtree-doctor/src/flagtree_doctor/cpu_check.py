"""The CPU check FlagTree's CPU backend runs before it loads its runtime or a kernel (patch 0008).

A CPU without what the package is compiled for stops a kernel with SIGILL, or (with SVE vectors of another
length) lets it compute wrong results. :func:`require_supported_cpu` turns that into an exception naming
what is missing and pointing at flagtree-doctor. It judges with :func:`.capabilities.judge`, as
flagtree-doctor's cpu checks, flagtree-verify and the package tests do, so none of them can disagree.

Environment:

- ``FLAGTREE_SKIP_CPU_CHECK=1`` skips the check (for a CPU this cannot judge; at the user's risk).
- ``FLAGTREE_REQUIRE_KERNELS=1`` is set by jobs that are meant to run kernels (native Arm runners, the
  emulated package tests): flagtree-verify and the package test then fail, instead of skipping the kernels,
  where this CPU cannot run them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .capabilities import judge, live_capabilities
from .errors import ConfigurationError

SKIP_CPU_CHECK = "FLAGTREE_SKIP_CPU_CHECK"
REQUIRE_KERNELS = "FLAGTREE_REQUIRE_KERNELS"


class UnsupportedCpuError(RuntimeError):
    """This CPU cannot run the flagtree-cpu package's kernels; the message says why and what to do."""


class SettingError(ConfigurationError, ValueError):
    """An environment variable of ours holds a value it cannot take (exit status 2 in the commands)."""


def flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the on/off variable ``name`` is on: ``1`` on; ``0``, empty or unset off; anything else an error."""
    value = (os.environ if env is None else env).get(name, "")
    if value not in ("", "0", "1"):
        raise SettingError(f"{name}={value!r} is neither 1 nor 0", fix=f"set {name}=1, or unset it")
    return value == "1"


def kernel_blockers() -> list[str]:
    """Why this process's CPU cannot run the package's kernels; empty when it can."""
    return judge(live_capabilities()).blockers


def kernels_required(env: Mapping[str, str] | None = None) -> bool:
    """Whether this job is meant to run kernels (``FLAGTREE_REQUIRE_KERNELS=1``), so a skip is a failure."""
    return flag(REQUIRE_KERNELS, env)


def require_supported_cpu(env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`UnsupportedCpuError` unless this CPU can run the kernels (or the check is skipped)."""
    if flag(SKIP_CPU_CHECK, env):
        return
    blockers = kernel_blockers()
    if blockers:
        raise UnsupportedCpuError(
            f"flagtree-cpu cannot run kernels on this CPU: {'; '.join(blockers)}. Run `flagtree-doctor` "
            f"for what it found and how to fix it; {SKIP_CPU_CHECK}=1 skips this check (kernels may then "
            "stop with SIGILL or compute wrong results)."
        )
