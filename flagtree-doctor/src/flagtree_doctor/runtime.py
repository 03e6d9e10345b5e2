"""Runtime checks: the FlagTree install (``triton/_C``, the cpu backend, ``tle_ops``), that it loads, and the
TLE ops this CPU cannot run on the baseline runtime (its manifest says which function needs what).

Loading happens in a child Python, so a SIGILL (binaries built for a CPU this one is not) or a missing
GLIBCXX stops the child, not the doctor, and the report names the signal.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .cpu import cpu_facts
from .manifest import ManifestError, UnsupportedOp, read_manifest, unsupported_ops
from .model import CheckResult, Facts, System
from .target import BASELINE_FILES, BASELINE_RUNTIME, BUILDER_METHODS, RUNTIME_LIBRARIES, Tier

# Files of an install whose absence upstream's FAQ explains (4: incomplete symlinks -> no tle_ops).
_REQUIRED_FILES: tuple[str, ...] = (
    *(f"_C/{name}" for name in (*RUNTIME_LIBRARIES, *BASELINE_FILES)),
    "backends/cpu/compiler.py",
    "backends/cpu/driver.py",
    "language/extra/cpu/tle_ops.py",
)
# Where a `--root` tree may hold site-packages/triton: conda prefixes, venvs and the system Pythons.
_ROOT_PATTERNS: tuple[str, ...] = (
    *("/" + "*/" * depth + "lib/python3*/site-packages/triton" for depth in range(4)),
    "/usr/lib/python3*/dist-packages/triton",
    "/usr/local/lib/python3*/dist-packages/triton",
)
_LOAD_TIMEOUT_SECONDS = 120

# Run by a child Python: preload the runtime libraries as the cpu driver does, libTritonCPURuntime of this CPU's
# tier (where this CPU can run one: elsewhere FlagTree's own CPU check stops before they load), import
# libtriton, list the builder methods it lacks.
_LOAD_SCRIPT = """
import ctypes, importlib, json, sys
c_dir, runtime, names = sys.argv[1], sys.argv[2], sys.argv[3:]
for lib in ("libsleef.so", runtime) if runtime else ():
    ctypes.CDLL(c_dir + "/" + lib, mode=ctypes.RTLD_GLOBAL)
builder = importlib.import_module("triton._C.libtriton").ir.builder
print(json.dumps({"missing": [n for n in names if not hasattr(builder, n)]}))
"""


@dataclass(frozen=True, kw_only=True)
class TritonInstall:
    package_dir: Path  # on the inspected system

    @property
    def c_dir(self) -> Path:
        return self.package_dir / "_C"


def find_triton(system: System) -> TritonInstall | None:
    """The ``triton`` package this Python would import (live) or the one in the ``--root`` tree."""
    if system.live:
        spec = importlib.util.find_spec("triton")
        if spec is None or not spec.submodule_search_locations:
            return None
        return TritonInstall(package_dir=Path(next(iter(spec.submodule_search_locations))))
    for pattern in _ROOT_PATTERNS:
        found = system.glob(pattern)
        if found:
            return TritonInstall(package_dir=found[0])
    return None


def triton_facts(facts: Facts) -> TritonInstall | None:
    value = facts.memo("triton", lambda: find_triton(facts.system))
    assert value is None or isinstance(value, TritonInstall)
    return value


def shared_objects(system: System, install: TritonInstall) -> list[Path]:
    """The shared libraries in ``triton/_C`` (inspected paths), each real file once."""
    seen: set[Path] = set()
    found = []
    for path in system.glob(f"{install.c_dir}/*.so*"):
        real = system.path(path).resolve()
        if real not in seen and real.is_file():
            seen.add(real)
            found.append(path)
    return found


def check_install(facts: Facts) -> CheckResult:
    system, install = facts.system, triton_facts(facts)
    check = "triton-install"
    if install is None:
        where = "in this Python" if system.live else f"in the --root tree {system.root}"
        return CheckResult(
            id=check,
            status="warn",
            message=f"FlagTree is not installed {where} (no `triton` package)",
            fix="conda install flagtree-cpu",
        )
    missing = [name for name in _REQUIRED_FILES if not _present(system, install.package_dir / name)]
    if missing:
        hint = " (incomplete symlinks, upstream FAQ 4)" if any("tle_ops" in m for m in missing) else ""
        return CheckResult(
            id=check,
            status="fail",
            message=f"{install.package_dir} lacks {', '.join(missing)}{hint}",
            fix="conda install --force-reinstall flagtree-cpu (a plain `triton` package does not carry these)",
        )
    return CheckResult(id=check, status="ok", message=f"FlagTree cpu backend in {install.package_dir}")


def check_load(facts: Facts) -> CheckResult:
    install = triton_facts(facts)
    check = "triton-load"
    if not facts.system.live:
        return CheckResult(id=check, status="skip", message="libraries are not loaded from a --root tree")
    if install is None:
        return CheckResult(id=check, status="skip", message="FlagTree is not installed (see triton-install)")
    runtime = cpu_facts(facts).choice.runtime
    runtime_too = runtime is not None
    argv = [
        sys.executable,
        "-c",
        _LOAD_SCRIPT,
        str(install.c_dir),
        runtime.library if runtime else "",
        *BUILDER_METHODS,
    ]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_LOAD_TIMEOUT_SECONDS,
            env=dict(facts.system.env),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CheckResult(
            id=check,
            status="fail",
            message=f"loading triton._C.libtriton took over {_LOAD_TIMEOUT_SECONDS} s",
            fix="run `python -X importtime -c 'import triton'` to see where it hangs",
        )
    return _load_verdict(check, done.returncode, done.stdout, done.stderr, runtime_too=runtime_too)


def _load_verdict(
    check: str, returncode: int, stdout: str, stderr: str, *, runtime_too: bool = True
) -> CheckResult:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        cause = " (an instruction this CPU lacks: see cpu-features)" if name == "SIGILL" else ""
        return CheckResult(
            id=check,
            status="fail",
            message=f"loading triton._C.libtriton was killed by {name}{cause}",
            fix="run flagtree-doctor's cpu checks and use a CPU that passes them",
        )
    if returncode != 0:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        return CheckResult(
            id=check,
            status="fail",
            message=f"triton._C.libtriton does not load: {last}",
            fix="see the glibc/glibcxx checks; GLIBCXX errors mean an older libstdc++ was loaded first",
        )
    missing = json.loads(stdout.strip().splitlines()[-1])["missing"]
    if missing:
        return CheckResult(
            id=check,
            status="fail",
            message=f"libtriton lacks the TLE builders {', '.join(missing)}",
            fix="this is not FlagTree's tle_arm64 build: conda install --force-reinstall flagtree-cpu",
        )
    skipped = "" if runtime_too else " (the runtime libraries were not loaded: this CPU cannot run them)"
    return CheckResult(
        id=check,
        status="ok",
        message=f"libtriton loads with all {len(BUILDER_METHODS)} create_cpu_* builders{skipped}",
    )


def _present(system: System, path: Path) -> bool:
    if path.name == "libsleef.so":  # the versioned file counts too
        return bool(system.glob(f"{path}*"))
    return system.path(path).exists()


@dataclass(frozen=True, kw_only=True)
class OpsVerdict:
    """The ops this CPU cannot run on its tier's runtime (none on the Armv9 tier)."""

    tier: Tier
    unsupported: tuple[UnsupportedOp, ...]


def ops_verdict(facts: Facts) -> OpsVerdict | None:
    """The verdict on the TLE ops, or ``None`` where it cannot be known (no runtime fits, no install)."""
    value = facts.memo("ops", lambda: _ops_verdict(facts))
    assert value is None or isinstance(value, OpsVerdict)
    return value


def _ops_verdict(facts: Facts) -> OpsVerdict | None:
    choice = cpu_facts(facts).choice
    if choice.tier is None:
        return None
    if choice.tier == "armv9":
        return OpsVerdict(tier="armv9", unsupported=())
    install = triton_facts(facts)
    if install is None:
        return None
    manifest = read_manifest(facts.system.path(install.c_dir / str(BASELINE_RUNTIME.manifest)))
    return OpsVerdict(tier=choice.tier, unsupported=tuple(unsupported_ops(manifest, choice.features)))


def check_tle_ops(facts: Facts) -> CheckResult:
    check = "tle-ops"
    choice = cpu_facts(facts).choice
    if choice.tier is None:
        return CheckResult(
            id=check, status="skip", message="no build of the runtime runs here (see cpu-features)"
        )
    if choice.tier == "baseline" and triton_facts(facts) is None:
        return CheckResult(id=check, status="skip", message="FlagTree is not installed (see triton-install)")
    try:
        verdict = ops_verdict(facts)
    except ManifestError as exc:
        return CheckResult(
            id=check,
            status="fail",
            message=str(exc).partition("; reinstall")[0],
            fix="conda install --force-reinstall flagtree-cpu",
        )
    assert verdict is not None
    if verdict.tier == "armv9":
        return CheckResult(id=check, status="ok", message="every TLE op runs here (the Armv9 runtime)")
    if not verdict.unsupported:
        return CheckResult(id=check, status="ok", message="every TLE op runs here on the baseline runtime")
    # not a version order: CPU feature names
    missing = sorted({feature for op in verdict.unsupported for feature in op.missing})
    return CheckResult(
        id=check,
        status="warn",
        message=f"on the baseline runtime this CPU cannot run {'; '.join(op.describe() for op in verdict.unsupported)}"
        "; the other ops run (each of these raises UnsupportedCpuError naming what is missing)",
        fix=f"these ops need a CPU with {', '.join(missing)} (every core)",
    )
