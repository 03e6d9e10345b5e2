"""Turn results into the ``--json`` document (schema version 1, a contract) or a readable table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich import box
from rich.table import Table

from . import openmp
from .checks import CHECKS
from .cpu import CpuFacts, cpu_facts, format_cpu_list
from .model import STATUSES, CheckResult, Facts
from .runtime import OpsVerdict, ops_verdict
from .target import BASELINE_RUNTIME, RUNTIME_BUILDS, RuntimeBuild

SCHEMA_VERSION = "1"


def _cpu_or_none(facts: Facts) -> CpuFacts | None:
    try:
        return cpu_facts(facts)
    except Exception:  # noqa: BLE001 - the cpu checks already report the crash as a fail row
        return None


def _ops_or_none(facts: Facts) -> OpsVerdict | None:
    try:
        return ops_verdict(facts)
    except Exception:  # noqa: BLE001 - the tle-ops check reports it as a fail row
        return None


def _build(build: RuntimeBuild) -> dict[str, object]:
    return {
        "tier": build.tier,
        "features": sorted(build.features),
        "sve_vector_bits": build.sve_vector_bits,
        "march": [build.march],
        "library": build.library,
    }


def recommended_env(cpu: CpuFacts | None) -> dict[str, str]:
    """The OpenMP environment for this machine (``flagtree-doctor --env``): empty where cores are alike."""
    return openmp.recommend(cpu.layout.big, cpu.layout.little) if cpu else {}


def count_line(results: Sequence[CheckResult]) -> str:
    """The line under the table: how many checks ended in each status, e.g. ``4 ok, 1 warn, 2 fail, 8 skip``."""
    counts = Counter(r.status for r in results)
    return ", ".join(f"{counts.get(status, 0)} {status}" for status in STATUSES)


def exit_status(results: Sequence[CheckResult]) -> int:
    """1 when a check failed, else 0."""
    return 1 if any(r.status == "fail" for r in results) else 0


def to_json(facts: Facts, results: Sequence[CheckResult]) -> dict[str, object]:
    cpu = _cpu_or_none(facts)
    choice = cpu.choice if cpu else None
    ops = _ops_or_none(facts) if choice and choice.runtime else None
    counts = Counter(r.status for r in results)
    return {
        "schema_version": SCHEMA_VERSION,
        "root": None if facts.system.live else str(facts.system.root),
        "machine": cpu.machine if cpu else None,
        "features": sorted(cpu.features) if cpu else [],
        "sve_vector_bits": cpu.sve_vector_bits if cpu else None,
        "big_cores": list(cpu.layout.big) if cpu else [],
        "little_cores": list(cpu.layout.little) if cpu else [],
        "taskset": cpu.layout.taskset if cpu else None,
        "env": recommended_env(cpu),
        "cores": [
            {"cpu": c.cpu, "model": c.model, "capacity": c.capacity, "governor": c.governor}
            for c in (cpu.cores if cpu else ())
        ],
        # The runtime this CPU loads (the baseline one, the floor, where none fits), then both builds.
        "compiled_for": _build((choice.runtime if choice else None) or BASELINE_RUNTIME),
        "tier": choice.tier if choice else None,
        "runtimes": [_build(build) for build in RUNTIME_BUILDS],
        # null: not known here (no runtime fits, or no FlagTree install with its manifest was found)
        "unsupported_ops": None
        if ops is None
        else [
            {"op": op.op, "function": op.function, "missing": list(op.missing), "evidence": op.evidence}
            for op in ops.unsupported
        ],
        "checks": [{"id": r.id, "status": r.status, "message": r.message, "fix": r.fix} for r in results],
        "summary": {status: counts.get(status, 0) for status in STATUSES},
    }


def summary_lines(facts: Facts, results: Sequence[CheckResult]) -> list[str]:
    """The facts above the table when a CPU check ran: features, cores, the taskset line."""
    cpu_checks = {c.id for c in CHECKS if c.group == "cpu"}
    cpu = _cpu_or_none(facts) if any(r.id in cpu_checks for r in results) else None
    if cpu is None or cpu.machine != "aarch64":  # elsewhere cpu-features says all there is to say
        return []
    vl = f", SVE {cpu.sve_vector_bits}-bit" if cpu.sve_vector_bits else ""
    lines = [f"CPU features: {' '.join(sorted(cpu.features)) or '-'}{vl}"]
    runtime = cpu.choice.runtime
    lines.append(
        f"runtime: {runtime.tier} (-march={runtime.march})" if runtime else "runtime: none runs on this CPU"
    )
    if cpu.layout.little:
        lines.append(
            f"cores: big {format_cpu_list(cpu.layout.big)}, little {format_cpu_list(cpu.layout.little)} "
            f"-> taskset -c {cpu.layout.taskset}"
        )
    elif cpu.cores:
        lines.append(f"cores: {len(cpu.cores)}, all alike")
    return lines


def shared_skips(results: Sequence[CheckResult]) -> tuple[list[CheckResult], list[str]]:
    """The rows to show one by one, and one line for each skip reason that several checks share.

    Off aarch64 every check but one is skipped for the same reason: the table shows it once, not 14 times.
    """
    by_reason: dict[str, list[str]] = {}
    for r in results:
        if r.status == "skip":
            by_reason.setdefault(r.message, []).append(r.id)
    shared = {reason: ids for reason, ids in by_reason.items() if len(ids) > 1}
    rows = [r for r in results if not (r.status == "skip" and r.message in shared)]
    return rows, [f"skipped, since {reason}: {', '.join(ids)}" for reason, ids in shared.items()]


def table(results: Sequence[CheckResult]) -> Table:
    grid = Table(box=box.SIMPLE, show_edge=False, pad_edge=False)
    grid.add_column("check", no_wrap=True)
    grid.add_column("status", no_wrap=True)
    grid.add_column("message", overflow="fold")
    grid.add_column("fix", overflow="fold")
    styles = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}
    for r in results:
        grid.add_row(r.id, f"[{styles[r.status]}]{r.status}[/]", r.message, r.fix or "")
    return grid
