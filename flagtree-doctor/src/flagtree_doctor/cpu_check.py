"""The CPU check FlagTree's CPU backend runs before it loads its runtime or a kernel (patches 0009, 0010, 0011
and flagtree-cpu's 0001, 0002).

The package carries libTritonCPURuntime twice (:mod:`.target`): for Armv9, and for every aarch64 CPU with
dotprod (``baseline/``). :func:`.tier.choose_tier` picks the one this CPU loads; below dotprod
:func:`require_supported_cpu` raises :class:`UnsupportedCpuError` naming what the CPU lacks, instead of the
SIGILL (or, with SVE vectors of another length, the wrong results) the code would give. On the baseline tier a
runtime function this CPU cannot run (the manifest says which, :mod:`.manifest`) is refused before it is
called: :func:`check_kernel` before a kernel that calls it is loaded, :func:`load_runtime` when the runtime
module's wrapper calls it; the error names the op, the function and the missing feature. flagtree-doctor's cpu
checks, flagtree-verify and the package tests judge the CPU with the same code, so none of them can disagree.

Environment:

- ``FLAGTREE_SKIP_CPU_CHECK=1`` skips the checks (for a CPU this cannot judge; at the user's risk): the tier's
  runtime is loaded (the baseline one where none fits), and nothing is refused.
- ``FLAGTREE_REQUIRE_KERNELS=1`` is set by jobs that are meant to run kernels (native Arm runners, the
  emulated package tests): flagtree-verify and the package test then fail, instead of skipping the kernels,
  where this CPU cannot run them.

Standard library only: FlagTree imports this at ``import triton``, and runs it before every kernel it loads.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from .capabilities import live_capabilities
from .errors import ConfigurationError
from .manifest import RuntimeManifest, read_manifest
from .target import BASELINE_RUNTIME, TLE_OP_FUNCTIONS, RuntimeBuild, runtime_ops
from .tier import KernelTarget, TierChoice, choose_tier

SKIP_CPU_CHECK = "FLAGTREE_SKIP_CPU_CHECK"
REQUIRE_KERNELS = "FLAGTREE_REQUIRE_KERNELS"
_DOCTOR = (
    f"Run `flagtree-doctor` for what it found and how to fix it; {SKIP_CPU_CHECK}=1 skips this check "
    "(kernels may then stop with SIGILL or compute wrong results)."
)


class UnsupportedCpuError(RuntimeError):
    """This CPU cannot run the flagtree-cpu package's kernels, or one op of them; the message says why."""


class SettingError(ConfigurationError, ValueError):
    """An environment variable of ours holds a value it cannot take (exit status 2 in the commands)."""


def flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the on/off variable ``name`` is on: ``1`` on; ``0``, empty or unset off; anything else an error."""
    value = (os.environ if env is None else env).get(name, "")
    if value not in ("", "0", "1"):
        raise SettingError(f"{name}={value!r} is neither 1 nor 0", fix=f"set {name}=1, or unset it")
    return value == "1"


def live_choice() -> TierChoice:
    """The runtime this process's CPU loads (every core's features, the SVE vector length)."""
    return choose_tier(live_capabilities())


def kernel_blockers() -> list[str]:
    """Why this process's CPU cannot run the package's kernels; empty when it can (on either tier)."""
    return list(live_choice().blockers)


def kernels_required(env: Mapping[str, str] | None = None) -> bool:
    """Whether this job is meant to run kernels (``FLAGTREE_REQUIRE_KERNELS=1``), so a skip is a failure."""
    return flag(REQUIRE_KERNELS, env)


def require_supported_cpu(env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`UnsupportedCpuError` unless this CPU can run a runtime (or the check is skipped)."""
    if flag(SKIP_CPU_CHECK, env):
        return
    blockers = kernel_blockers()
    if blockers:
        raise UnsupportedCpuError(
            f"flagtree-cpu cannot run kernels on this CPU: {'; '.join(blockers)}. {_DOCTOR}"
        )


def kernel_target() -> KernelTarget:
    """What the JIT compiles for on this CPU (runtime/build.py, compiler.py, neon.py)."""
    return KernelTarget(choice=live_choice())


def kernel_assembler_flags() -> list[str]:
    """The flags FlagTree's runtime/build.py assembles ``kernel.s`` with (patch 0010)."""
    return list(kernel_target().assembler_flags)


def tle_neon_march() -> str:
    """The ``-march`` flagtree-cpu's neon.py compiles the TLE NEON objects with (patch flagtree-cpu/0002)."""
    return kernel_target().tle_neon_march


def _runtime_build(choice: TierChoice) -> RuntimeBuild:
    # Refused (or skipped) below the floor: the least demanding build.
    return choice.runtime or BASELINE_RUNTIME


def runtime_library_dirs(c_dir: Path) -> list[Path]:
    """The driver's library folders for ``triton/_C``: the tier's runtime first (patch 0009).

    The driver preloads the first ``libTritonCPURuntime.so`` these hold, and a kernel links it by this list;
    both builds have the soname ``libTritonCPURuntime.so``, so a kernel binds to the preloaded one. Never
    raises: FlagTree calls it at ``import triton``, on any machine.
    """
    folder = (c_dir / _runtime_build(live_choice()).library).parent
    return [c_dir] if folder == c_dir else [folder, c_dir]


def _refusal(op: str, function: str, manifest: RuntimeManifest, features: frozenset[str]) -> str | None:
    needs = manifest.needs(function)
    missing = needs.missing(features) if needs is not None else []
    if not missing:
        return None
    why = "; ".join(f"{feature}: {needs.why(feature)}" for feature in missing if needs and needs.why(feature))
    return (
        f"{op} cannot run on this CPU: it calls the runtime function {function}, which needs "
        f"{', '.join(missing)} ({why}), and this CPU lacks {'it' if len(missing) == 1 else 'them'}. "
        "Run `flagtree-doctor` for the TLE ops this CPU runs; "
        f"{SKIP_CPU_CHECK}=1 skips this check (the op may then stop with SIGILL)."
    )


def _baseline_manifest(c_dir: Path, choice: TierChoice) -> RuntimeManifest | None:
    """The manifest of the runtime this CPU loads, when that is one whose functions need more than the CPU's
    tier guarantees (the baseline one); ``None`` on the Armv9 tier."""
    build = _runtime_build(choice)
    return None if build.manifest is None else read_manifest(c_dir / build.manifest)


def _refuse_load(manifest: RuntimeManifest, features: frozenset[str]) -> None:
    missing = manifest.load.missing(features)
    if missing:
        raise UnsupportedCpuError(
            f"libTritonCPURuntime ({manifest.march}) cannot load on this CPU: its initialisers need "
            f"{', '.join(missing)}, which this CPU lacks. {_DOCTOR}"
        )


def check_kernel(name: str, kernel: bytes, c_dir: Path, env: Mapping[str, str] | None = None) -> None:
    """Before the driver loads a kernel: the CPU check, then every runtime function the kernel calls.

    ``kernel`` is the kernel's shared object (``name`` its kernel name), ``c_dir`` the ``triton/_C`` folder.
    """
    if flag(SKIP_CPU_CHECK, env):
        return
    require_supported_cpu(env)
    choice = live_choice()
    manifest = _baseline_manifest(c_dir, choice)
    if manifest is None:
        return
    _refuse_load(manifest, choice.features)
    from .elf import undefined_symbols  # noqa: PLC0415 - only on the baseline tier

    for function in sorted(undefined_symbols(kernel, f"kernel {name}") & set(manifest.functions)):
        ops = [op for op in runtime_ops(function) if op.startswith("tle_ops.")] or ["a TLE op"]
        refusal = _refusal(f"{' or '.join(ops)} (kernel {name})", function, manifest, choice.features)
        if refusal:
            raise UnsupportedCpuError(refusal)


def op_refusal(c_dir: Path, op: str) -> str | None:
    """Why this CPU cannot run ``tle_ops.<op>`` (its runtime function needs what it lacks), or ``None``."""
    choice = live_choice()
    if choice.blockers:
        return "; ".join(choice.blockers)
    manifest = _baseline_manifest(c_dir, choice)
    function = TLE_OP_FUNCTIONS.get(op)
    if manifest is None or function is None:
        return None
    return _refusal(f"tle_ops.{op}", function, manifest, choice.features)


class RefusedFunction:
    """A runtime function this CPU cannot run, in place of its ctypes function: it takes ``argtypes`` and
    ``restype`` as ctypes' does, and raises :class:`UnsupportedCpuError` when called."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.argtypes: object = None
        self.restype: object = None

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise UnsupportedCpuError(self.message)


class GuardedRuntime:
    """libTritonCPURuntime as ``ctypes.CDLL`` gives it, but each function this CPU cannot run refused."""

    def __init__(self, library: ctypes.CDLL, refused: Mapping[str, str]) -> None:
        self._library = library
        self._refused = {function: RefusedFunction(message) for function, message in refused.items()}

    def __getattr__(self, name: str) -> object:
        refused = self.__dict__.get("_refused", {}).get(name)
        return refused if refused is not None else getattr(self._library, name)


def load_runtime(path: Path, env: Mapping[str, str] | None = None) -> GuardedRuntime:
    """libTritonCPURuntime for triton.language.extra.cpu.runtime (patch flagtree-cpu/0001).

    ``path`` is ``triton/_C/libTritonCPURuntime.so``; this CPU's tier decides which build is loaded. Below the
    floor this raises, as :func:`require_supported_cpu`; on the baseline tier the functions this CPU cannot run
    are refused when called, naming the module's wrapper.
    """
    skip = flag(SKIP_CPU_CHECK, env)
    require_supported_cpu(env)
    choice = live_choice()
    c_dir = path.parent
    manifest = None if skip else _baseline_manifest(c_dir, choice)
    if manifest is not None:
        _refuse_load(manifest, choice.features)
    library = ctypes.CDLL(str(c_dir / _runtime_build(choice).library))
    return GuardedRuntime(library, {} if manifest is None else _module_refusals(manifest, choice.features))


def _module_refusals(manifest: RuntimeManifest, features: frozenset[str]) -> dict[str, str]:
    """The runtime module's refusal of each function this CPU cannot run, naming the module's wrapper."""
    refused = {}
    for function in manifest.functions:
        wrappers = [
            f"triton.language.extra.cpu.{op}()" for op in runtime_ops(function) if op.startswith("runtime.")
        ]
        if refusal := _refusal(
            " or ".join(wrappers) or f"libTritonCPURuntime's {function}", function, manifest, features
        ):
            refused[function] = refusal
    return refused
