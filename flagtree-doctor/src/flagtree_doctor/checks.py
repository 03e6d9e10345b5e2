"""The registry of checks, selection by name, and the isolated runner."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from flagtree_doctor.errors import ConfigurationError

from . import cpu, environment, glibc, runtime, toolchain
from .model import Check, CheckResult, Facts, Group, System

CHECKS: tuple[Check, ...] = (
    Check(
        id="cpu-features",
        group="cpu",
        summary="CPU features the binaries use",
        run=cpu.check_features,
        off_aarch64=True,
    ),
    Check(
        id="sve-vector-length",
        group="cpu",
        summary="SVE vector length the binaries assume",
        run=cpu.check_sve_vector_length,
    ),
    Check(
        id="core-types", group="cpu", summary="big and little cores, taskset list", run=cpu.check_core_types
    ),
    Check(
        id="cpufreq-governor",
        group="cpu",
        summary="cpufreq governor of the big cores",
        run=cpu.check_governor,
    ),
    Check(
        id="env-flagtree-backend",
        group="environment",
        summary="FLAGTREE_BACKEND=cpu",
        run=environment.check_flagtree_backend,
    ),
    Check(
        id="env-triton-sys-path",
        group="environment",
        summary="TRITON_SYS_PATH include/lib folders",
        run=environment.check_triton_sys_path,
    ),
    Check(id="env-cc", group="environment", summary="CC names a compiler", run=environment.check_cc),
    Check(
        id="jit-compiler",
        group="toolchain",
        summary="a C compiler for the JIT",
        run=toolchain.check_jit_compiler,
    ),
    Check(id="binutils", group="toolchain", summary="as, ld, ar", run=toolchain.check_binutils),
    Check(id="openmp", group="toolchain", summary="omp.h and libgomp", run=toolchain.check_openmp),
    Check(id="python-headers", group="toolchain", summary="Python.h", run=toolchain.check_python_headers),
    Check(
        id="triton-install",
        group="runtime",
        summary="triton/_C, cpu backend, tle_ops",
        run=runtime.check_install,
    ),
    Check(
        id="tle-ops",
        group="runtime",
        summary="TLE ops this CPU cannot run, and why",
        run=runtime.check_tle_ops,
    ),
    Check(id="glibc", group="glibc", summary="GLIBC versions the binaries need", run=glibc.check_glibc),
    Check(id="glibcxx", group="glibc", summary="GLIBCXX/GCC runtime versions", run=glibc.check_glibcxx),
    Check(id="triton-load", group="runtime", summary="triton/_C libraries load", run=runtime.check_load),
)
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)


def select(names: Sequence[str]) -> tuple[Check, ...]:
    """The checks named (all when none are), in registry order; an unknown name is one error."""
    unknown = [n for n in names if n not in CHECK_IDS]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, CHECK_IDS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigurationError(f"no check named {name!r}", fix=f"{hint}see flagtree-doctor --list")
    return tuple(c for c in CHECKS if not names or c.id in names)


def _machine(facts: Facts) -> str | None:
    try:
        return cpu.cpu_facts(facts).machine
    except Exception:  # noqa: BLE001 - the cpu checks report the crash; the others then just run
        return None


# The checks of these groups read the machine the doctor runs on (its environment variables, PATH, compilers),
# not a --root tree, which holds only proc/ and sys/ (docs/using.md: "Recording a machine").
READS_THIS_MACHINE: frozenset[Group] = frozenset({"environment", "toolchain"})


def skip_reason(check: Check, facts: Facts, machine: str | None) -> str | None:
    """Why ``check`` cannot help here (the same words for every check it applies to), or ``None``."""
    if machine not in (None, "aarch64") and not check.off_aarch64:
        return f"this machine is {machine} and flagtree-cpu runs on aarch64 only (see cpu-features)"
    if not facts.system.live and check.group in READS_THIS_MACHINE:
        return "environment and toolchain checks read the machine the doctor runs on, not a --root tree"
    return None


def run_checks(checks: Iterable[Check], facts: Facts) -> list[CheckResult]:
    """Run each check on its own: one that crashes becomes a ``fail`` row carrying the exception.

    A check that cannot help is a ``skip`` row instead (:func:`skip_reason`): off aarch64, where the package
    cannot run, every check but the machine's; on a ``--root`` tree, those that read this machine.
    """
    results = []
    machine = _machine(facts)
    for check in checks:
        reason = skip_reason(check, facts, machine)
        if reason is not None:
            results.append(CheckResult(id=check.id, status="skip", message=reason))
            continue
        try:
            results.append(check.run(facts))
        except Exception as exc:  # noqa: BLE001 - isolation is the point: report it and go on
            results.append(
                CheckResult(
                    id=check.id,
                    status="fail",
                    message=f"the check crashed: {type(exc).__name__}: {exc}",
                    fix="report this to the flagtree-cpu feedstock with flagtree-doctor --json",
                )
            )
    return results


def diagnose(system: System, names: Sequence[str] = ()) -> tuple[Facts, list[CheckResult]]:
    facts = Facts(system)
    return facts, run_checks(select(names), facts)
