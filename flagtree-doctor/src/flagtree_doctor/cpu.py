"""CPU checks: features (HWCAPs), SVE vector length, big/little cores, cpufreq governor.

Features and the SVE vector length come from :mod:`.capabilities` live, and with ``--root`` from the tree
(the features every block of ``proc/cpuinfo`` lists, ``proc/sys/abi/sve_default_vector_length``); the
runtime chosen on them is :func:`.tier.choose_tier`'s, the one FlagTree's CPU check uses too.
Cores always come from ``sys/devices/system/cpu`` and every processor block of ``proc/cpuinfo``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import openmp
from .capabilities import KNOWN_FEATURES, Capabilities, live_capabilities
from .model import CheckResult, Facts, System
from .target import ARMV9_RUNTIME, BASELINE_RUNTIME
from .tier import TierChoice, choose_tier

IMPLEMENTER_ARM = 0x41
IMPLEMENTER_FUJITSU = 0x46

# (implementer, part) -> (name, tier). Part numbers: Linux arch/arm64/include/asm/cputype.h.
# Tier orders core classes within one SoC: 1 = little, 2 = big/medium (and server cores), 3 = prime.
CORE_MODELS: dict[tuple[int, int], tuple[str, int]] = {
    (IMPLEMENTER_ARM, 0xD03): ("Cortex-A53", 1),
    (IMPLEMENTER_ARM, 0xD05): ("Cortex-A55", 1),
    (IMPLEMENTER_ARM, 0xD46): ("Cortex-A510", 1),
    (IMPLEMENTER_ARM, 0xD80): ("Cortex-A520", 1),
    (IMPLEMENTER_ARM, 0xD08): ("Cortex-A72", 2),
    (IMPLEMENTER_ARM, 0xD0B): ("Cortex-A76", 2),
    (IMPLEMENTER_ARM, 0xD0D): ("Cortex-A77", 2),
    (IMPLEMENTER_ARM, 0xD41): ("Cortex-A78", 2),
    (IMPLEMENTER_ARM, 0xD47): ("Cortex-A710", 2),
    (IMPLEMENTER_ARM, 0xD4D): ("Cortex-A715", 2),
    (IMPLEMENTER_ARM, 0xD81): ("Cortex-A720", 2),
    (IMPLEMENTER_ARM, 0xD87): ("Cortex-A725", 2),
    (IMPLEMENTER_ARM, 0xD44): ("Cortex-X1", 3),
    (IMPLEMENTER_ARM, 0xD48): ("Cortex-X2", 3),
    (IMPLEMENTER_ARM, 0xD4E): ("Cortex-X3", 3),
    (IMPLEMENTER_ARM, 0xD82): ("Cortex-X4", 3),
    (IMPLEMENTER_ARM, 0xD85): ("Cortex-X925", 3),
    (IMPLEMENTER_ARM, 0xD0C): ("Neoverse-N1", 2),
    (IMPLEMENTER_ARM, 0xD40): ("Neoverse-V1", 2),
    (IMPLEMENTER_ARM, 0xD49): ("Neoverse-N2", 2),
    (IMPLEMENTER_ARM, 0xD4F): ("Neoverse-V2", 2),
    (IMPLEMENTER_ARM, 0xD84): ("Neoverse-V3", 2),
    (IMPLEMENTER_ARM, 0xD8E): ("Neoverse-N3", 2),
    (IMPLEMENTER_FUJITSU, 0x001): ("A64FX", 2),
}

_CPU_DIR = "/sys/devices/system/cpu"


@dataclass(frozen=True, kw_only=True)
class CpuinfoBlock:
    """One ``processor`` block of ``/proc/cpuinfo``."""

    processor: int
    features: frozenset[str]
    implementer: int | None
    part: int | None


@dataclass(frozen=True, kw_only=True)
class Core:
    cpu: int
    capacity: int | None
    implementer: int | None
    part: int | None
    governor: str | None

    @property
    def model(self) -> str:
        if self.implementer is None or self.part is None:
            return "unknown core"
        known = CORE_MODELS.get((self.implementer, self.part))
        return known[0] if known else f"part {self.implementer:#04x}:{self.part:#05x}"

    @property
    def tier(self) -> int | None:
        if self.implementer is None or self.part is None:
            return None
        known = CORE_MODELS.get((self.implementer, self.part))
        return known[1] if known else None


@dataclass(frozen=True, kw_only=True)
class CoreLayout:
    """Big and little cores; ``taskset`` is the ``taskset -c`` list of the big ones (``None``: all alike)."""

    big: tuple[int, ...]
    little: tuple[int, ...]
    basis: str  # what told the classes apart: "core types", "cpu_capacity" or "all alike"

    @property
    def taskset(self) -> str | None:
        return format_cpu_list(self.big) if self.little else None


@dataclass(frozen=True, kw_only=True)
class CpuFacts:
    capabilities: Capabilities
    cores: tuple[Core, ...]
    layout: CoreLayout

    @property
    def machine(self) -> str:
        return self.capabilities.machine

    @property
    def features(self) -> frozenset[str]:
        return self.capabilities.features

    @property
    def sve_vector_bits(self) -> int | None:
        return self.capabilities.sve_vector_bits

    @property
    def choice(self) -> TierChoice:
        return choose_tier(self.capabilities)


def parse_cpuinfo(text: str) -> tuple[CpuinfoBlock, ...]:
    """Every ``processor`` block of an aarch64 ``/proc/cpuinfo`` (x86 blocks parse with no features)."""
    blocks: list[CpuinfoBlock] = []
    for chunk in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if not fields.get("processor", "").isdigit():
            continue  # a trailing block such as "Hardware : ..." or "Serial : ..."
        blocks.append(
            CpuinfoBlock(
                processor=int(fields["processor"]),
                features=frozenset(fields.get("features", "").split()),
                implementer=_hex(fields.get("cpu implementer")),
                part=_hex(fields.get("cpu part")),
            )
        )
    return tuple(blocks)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``0-2,5,7-8`` (the form ``taskset -c`` and ``cpupower -c`` take)."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = prev = None
    for cpu in [*ordered, None]:
        if start is not None and prev is not None and (cpu is None or cpu != prev + 1):
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(ranges)


def classify(cores: tuple[Core, ...]) -> CoreLayout:
    """Little cores are the lowest class (by core type, else by ``cpu_capacity``); big cores are the rest."""
    everyone = tuple(sorted(c.cpu for c in cores))
    tiers = [c.tier for c in cores]
    capacities = [c.capacity for c in cores]
    if cores and None not in tiers and len(set(tiers)) > 1:
        lowest_tier = min(t for t in tiers if t is not None)
        little = tuple(sorted(c.cpu for c in cores if c.tier == lowest_tier))
        basis = "core types"
    elif cores and None not in capacities and len(set(capacities)) > 1:
        lowest_capacity = min(c for c in capacities if c is not None)
        little = tuple(sorted(c.cpu for c in cores if c.capacity == lowest_capacity))
        basis = "cpu_capacity"
    else:
        return CoreLayout(big=everyone, little=(), basis="all alike")
    return CoreLayout(big=tuple(c for c in everyone if c not in little), little=little, basis=basis)


def find_cores(system: System, blocks: tuple[CpuinfoBlock, ...]) -> tuple[Core, ...]:
    """One record per ``cpuN`` of sysfs (or per cpuinfo block where sysfs lists none)."""
    by_processor = {b.processor: b for b in blocks}
    numbers = sorted(
        int(p.name[3:]) for p in system.glob(f"{_CPU_DIR}/cpu[0-9]*") if p.name[3:].isdigit()
    ) or sorted(by_processor)
    cores = []
    for cpu in numbers:
        base = f"{_CPU_DIR}/cpu{cpu}"
        implementer, part = _midr(system.read_text(f"{base}/regs/identification/midr_el1"))
        block = by_processor.get(cpu)
        if implementer is None and block is not None:
            implementer, part = block.implementer, block.part
        capacity = system.read_text(f"{base}/cpu_capacity")
        cores.append(
            Core(
                cpu=cpu,
                capacity=int(capacity) if capacity and capacity.isdigit() else None,
                implementer=implementer,
                part=part,
                governor=system.read_text(f"{base}/cpufreq/scaling_governor") or None,
            )
        )
    return tuple(cores)


def tree_capabilities(system: System, blocks: tuple[CpuinfoBlock, ...]) -> Capabilities:
    """The capabilities a recorded tree shows: the features every processor lists, the default SVE length."""
    aarch64 = any(b.features & {"asimd", "fp"} for b in blocks)
    common = frozenset.intersection(*(b.features for b in blocks)) if blocks else frozenset()
    default_vl = system.read_text("/proc/sys/abi/sve_default_vector_length")
    return Capabilities(
        machine="aarch64" if aarch64 else "unknown",
        features=common & KNOWN_FEATURES,
        source=f"{system.path('/proc/cpuinfo')} (features common to all {len(blocks)} processors)",
        sve_vector_bits=int(default_vl) * 8 if default_vl and default_vl.isdigit() else None,
    )


def find_cpu(system: System) -> CpuFacts:
    """Everything the CPU checks need, from the live process or from the ``--root`` tree."""
    blocks = parse_cpuinfo(system.read_text("/proc/cpuinfo") or "")
    capabilities = live_capabilities() if system.live else tree_capabilities(system, blocks)
    cores = find_cores(system, blocks)
    return CpuFacts(capabilities=capabilities, cores=cores, layout=classify(cores))


def cpu_facts(facts: Facts) -> CpuFacts:
    value = facts.memo("cpu", lambda: find_cpu(facts.system))
    assert isinstance(value, CpuFacts)
    return value


def check_features(facts: Facts) -> CheckResult:
    cpu = cpu_facts(facts)
    choice, check = cpu.choice, "cpu-features"
    # macOS names Apple silicon arm64; Linux on it, in a VM or a container, says aarch64.
    if cpu.machine == "arm64":
        return CheckResult(
            id=check,
            status="fail",
            message="this is macOS on Apple silicon (arm64): macOS is not a target platform of flagtree-cpu, a "
            "linux-aarch64 package",
            fix="run it in a Linux VM or container on this Mac: there Apple silicon runs the baseline runtime",
        )
    if cpu.machine != "aarch64":
        return CheckResult(
            id=check,
            status="fail",
            message=f"this machine is {cpu.machine}; flagtree-cpu runs on aarch64 (Arm64) only",
            fix="run on an aarch64 machine with dotprod (Armv8.2 or newer, e.g. Neoverse N1 or Cortex-A76)",
        )
    if choice.runtime is None:
        return CheckResult(
            id=check,
            status="fail",
            message=f"{'; '.join(choice.blockers)}: no build of the runtime runs here (below dotprod its code "
            "stops with SIGILL)",
            fix="use an aarch64 CPU with dotprod (Armv8.2 or newer, e.g. Neoverse N1/V1/N2, Cortex-A76, or a Linux VM "
            "or container on Apple silicon)",
        )
    if choice.tier == "armv9":
        return CheckResult(
            id=check,
            status="ok",
            message=f"Armv9 runtime (-march={ARMV9_RUNTIME.march}): every core has "
            f"{', '.join(sorted(ARMV9_RUNTIME.features))} (from {cpu.capabilities.source})",
        )
    return CheckResult(
        id=check,
        status="ok",
        message=f"baseline runtime (-march={BASELINE_RUNTIME.march}), not the Armv9 one: "
        f"{'; '.join(choice.not_armv9)} (from {cpu.capabilities.source}); tle-ops lists the ops it runs here",
    )


def check_sve_vector_length(facts: Facts) -> CheckResult:
    cpu = cpu_facts(facts)
    choice, check = cpu.choice, "sve-vector-length"
    want = ARMV9_RUNTIME.sve_vector_bits or 128
    if "sve" not in cpu.features:
        return CheckResult(id=check, status="skip", message="no SVE on this CPU (see cpu-features)")
    # not a version order: CPU feature names
    lacks = sorted(ARMV9_RUNTIME.features - cpu.features)
    if lacks:  # no vector length makes up for a missing feature: say so, suggest nothing
        seen = f"SVE vectors are {cpu.sve_vector_bits} bits, but " if cpu.sve_vector_bits else ""
        runs = "the baseline runtime, which uses no SVE, runs" if choice.runtime else "nothing runs"
        return CheckResult(
            id=check,
            status="skip",
            message=f"{seen}without {', '.join(lacks)} no SVE vector length lets the Armv9 runtime run here; "
            f"{runs} (see cpu-features)",
        )
    if cpu.sve_vector_bits is None:
        return CheckResult(
            id=check,
            status="warn",
            message=f"SVE vector length unknown, so the baseline runtime is used; the Armv9 one assumes {want} bits",
            fix="cat /proc/sys/abi/sve_default_vector_length (bytes) should print 16",
        )
    if cpu.sve_vector_bits != want:
        return CheckResult(
            id=check,
            status="warn",
            message=f"SVE vectors are {cpu.sve_vector_bits} bits; the Armv9 runtime is built with "
            f"-msve-vector-bits={want}, whose code is only right at {want} bits, so the slower baseline runtime "
            "is used",
            fix=f"echo {want // 8} | sudo tee /proc/sys/abi/sve_default_vector_length, then start a new shell",
        )
    return CheckResult(
        id=check, status="ok", message=f"SVE vectors are {want} bits, as the Armv9 runtime is built"
    )


def check_core_types(facts: Facts) -> CheckResult:
    cpu = cpu_facts(facts)
    check, layout = "core-types", cpu.layout
    by_cpu = {c.cpu: c for c in cpu.cores}
    if not cpu.cores:
        return CheckResult(id=check, status="skip", message=f"no CPUs listed under {_CPU_DIR}")
    if layout.taskset is None:
        models = sorted({c.model for c in cpu.cores})
        return CheckResult(
            id=check, status="ok", message=f"{len(cpu.cores)} cores, all alike ({', '.join(models)})"
        )
    big_models = ", ".join(sorted({by_cpu[c].model for c in layout.big}))
    little_models = ", ".join(sorted({by_cpu[c].model for c in layout.little}))
    cores = (
        f"big.LITTLE ({layout.basis}): big {big_models} on CPUs {layout.taskset}, little {little_models} on "
        f"CPUs {format_cpu_list(layout.little)}"
    )
    recommended = openmp.recommend(layout.big, layout.little)
    if openmp.is_applied(recommended, facts.system.env):
        return CheckResult(
            id=check,
            status="ok",
            message=f"{cores}; OpenMP runs on the big cores (OMP_PLACES, OMP_NUM_THREADS)",
        )
    return CheckResult(
        id=check,
        status="warn",
        message=f"{cores}; threads on little cores slow every kernel",
        fix=f"flagtree-doctor --apply (OpenMP on the big cores whenever this environment is active), or "
        f"OMP_NUM_THREADS={len(layout.big)} taskset -c {layout.taskset} python ...",
    )


def check_governor(facts: Facts) -> CheckResult:
    cpu = cpu_facts(facts)
    check = "cpufreq-governor"
    big = [c for c in cpu.cores if c.cpu in cpu.layout.big]
    governors = {c.governor for c in big if c.governor is not None}
    if not governors:
        return CheckResult(id=check, status="skip", message="no cpufreq governor exposed (firmware-managed)")
    slow = sorted(c.cpu for c in big if c.governor not in (None, "performance"))
    if slow:
        listing = format_cpu_list(slow)
        return CheckResult(
            id=check,
            status="warn",
            message=f"governor {', '.join(sorted(governors))} on CPUs {listing}; clocks ramp up late",
            fix=f"sudo cpupower -c {listing} frequency-set -g performance",
        )
    return CheckResult(id=check, status="ok", message="performance")


def _hex(value: str | None) -> int | None:
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def _midr(value: str | None) -> tuple[int | None, int | None]:
    midr = _hex(value)
    if midr is None:
        return None, None
    return midr >> 24 & 0xFF, midr >> 4 & 0xFFF
