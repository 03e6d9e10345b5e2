"""The baseline runtime's manifest: which CPU features each of its exported functions needs.

``recipe/runtime_manifest.py`` writes it at build time, beside ``baseline/libTritonCPURuntime.so``, from the
library's own instructions (the toolchain's objdump: every exported function and every function it reaches).
This module reads it; :mod:`.cpu_check` refuses, with the op, the function and the missing feature named, a call
this CPU cannot run. Standard library only.

Format (schema_version 1)::

    {"schema_version": 1, "library": "libTritonCPURuntime.so", "march": "armv8.2-a+dotprod",
     "load": {"needs": [], "evidence": {}},
     "functions": {"fused_mlp_bf16": {"needs": ["asimddp"], "evidence": {"asimddp": "sdot ... (in ...)"}}}}

Feature names are /proc/cpuinfo's (hwcaps): ``asimddp``, ``i8mm``, ``bf16``, ``fphp``, ``asimdhp``, ...
``load`` is what the library's initialisers need: nothing of it runs where they cannot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .bounded import RefusedFile, read_bounded
from .target import RUNTIME_MODULE_FUNCTIONS, TLE_OP_FUNCTIONS

SCHEMA_VERSION = 1


class ManifestError(RuntimeError):
    """The manifest is missing, unreadable or not one this reader knows: the install is damaged."""


class _DamagedError(Exception):
    """What is wrong inside a manifest that parses as JSON (read_manifest turns it into a ManifestError)."""


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a function (or the library's load) needs, and for each feature one instruction that needs it."""

    features: frozenset[str]
    evidence: dict[str, str]

    def missing(self, features: frozenset[str]) -> list[str]:
        return sorted(self.features - features)

    def why(self, feature: str) -> str:
        return self.evidence.get(feature, "")


@dataclass(frozen=True, kw_only=True)
class RuntimeManifest:
    path: Path
    library: str
    march: str
    load: Needs
    functions: dict[str, Needs]

    def needs(self, function: str) -> Needs | None:
        """What ``function`` needs; ``None`` when the library does not export it."""
        return self.functions.get(function)


def _needs(value: object, where: str) -> Needs:
    if not isinstance(value, dict):
        raise _DamagedError(f"{where} is not an object")
    needs, evidence = value.get("needs"), value.get("evidence", {})
    if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
        raise _DamagedError(f"{where}.needs is not a list of feature names")
    if not isinstance(evidence, dict) or not all(isinstance(v, str) for v in evidence.values()):
        raise _DamagedError(f"{where}.evidence is not an object of strings")
    return Needs(features=frozenset(needs), evidence={str(k): v for k, v in evidence.items()})


def read_manifest(path: Path) -> RuntimeManifest:
    """The manifest at ``path``, or :class:`ManifestError` saying what is wrong with it and how to fix it."""
    fix = "reinstall flagtree-cpu (conda install --force-reinstall flagtree-cpu)"
    try:
        data = json.loads(read_bounded(path).decode("utf-8"))
    except RefusedFile as exc:
        raise ManifestError(f"the runtime manifest {exc}; {fix}") from None
    except OSError as exc:
        raise ManifestError(
            f"cannot read the runtime manifest {path} ({exc.strerror or exc}); {fix}"
        ) from None
    except ValueError as exc:
        raise ManifestError(f"the runtime manifest {path} is not JSON ({exc}); {fix}") from None
    try:
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            version = data.get("schema_version") if isinstance(data, dict) else None
            raise _DamagedError(f"schema_version {version!r}, this reader knows {SCHEMA_VERSION}")
        functions = data.get("functions")
        if not isinstance(functions, dict) or not functions:
            raise _DamagedError("no functions")
        return RuntimeManifest(
            path=path,
            library=str(data.get("library", "")),
            march=str(data.get("march", "")),
            load=_needs(data.get("load"), "load"),
            functions={str(name): _needs(value, f"functions.{name}") for name, value in functions.items()},
        )
    except _DamagedError as exc:
        raise ManifestError(f"the runtime manifest {path} is damaged: {exc}; {fix}") from None


@dataclass(frozen=True, kw_only=True)
class UnsupportedOp:
    """An op this CPU cannot run on the baseline runtime: the runtime function it calls and what that lacks."""

    op: str  # tle_ops.X or runtime.Y
    function: str
    missing: tuple[str, ...]
    evidence: str  # one instruction per missing feature

    def describe(self) -> str:
        return f"{self.op} ({self.function} needs {', '.join(self.missing)}: {self.evidence})"


def unsupported_ops(manifest: RuntimeManifest, features: frozenset[str]) -> list[UnsupportedOp]:
    """Every TLE op and runtime-module function whose runtime function needs a feature ``features`` lacks."""
    calls = [(f"tle_ops.{op}", f) for op, f in TLE_OP_FUNCTIONS.items()]
    calls += [(f"runtime.{name}", f) for name, f in RUNTIME_MODULE_FUNCTIONS.items()]
    found = []
    for op, function in calls:
        needs = manifest.needs(function)
        if needs is None:
            continue
        missing = needs.missing(features)
        if missing:
            evidence = "; ".join(f"{feature}: {needs.why(feature)}" for feature in missing)
            found.append(UnsupportedOp(op=op, function=function, missing=tuple(missing), evidence=evidence))
    return found
