"""GLIBC and GLIBCXX: the versions the installed ``triton/_C`` binaries need against what the host has.

Needs come from each binary's version references (``.gnu.version_r``). Each referenced library is found
as the dynamic loader would (an already-loaded copy in this process first, then ``DT_RPATH``,
``LD_LIBRARY_PATH``, ``DT_RUNPATH`` with ``$ORIGIN``, then the default folders; ``ld.so.conf`` is not read)
and its version definitions (``.gnu.version_d``) must hold every needed name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import elf
from .model import CheckResult, Facts, System
from .runtime import shared_objects, triton_facts

_TRIPLETS = {elf.EM_AARCH64: "aarch64-linux-gnu", elf.EM_X86_64: "x86_64-linux-gnu"}
# The GCC runtime libraries; every other versioned reference is the C library's.
_CXX_RUNTIME_PREFIXES = ("libstdc++", "libgcc_s", "libgomp", "libatomic")


@dataclass(frozen=True, kw_only=True)
class Requirement:
    binary: Path  # inspected path of the binary that needs it
    library: str  # soname, e.g. libstdc++.so.6
    versions: frozenset[str]
    provider: Path | None  # where the loader would find `library` (inspected path)
    missing: frozenset[str]
    provided: frozenset[str]


def resolve_library(
    system: System, soname: str, binary: Path, info: elf.DynamicInfo, loaded: Iterable[Path] = ()
) -> Path | None:
    """Where the dynamic loader would find ``soname`` for ``binary`` (an inspected path), or ``None``."""
    for path in loaded:
        if path.name == soname:
            return path
    origin = str(binary.parent)

    def expand(folders: Iterable[str]) -> list[str]:
        return [f.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for f in folders]

    triplet = _TRIPLETS.get(info.machine, "")
    defaults = [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    library_path = [p for p in system.env.get("LD_LIBRARY_PATH", "").split(":") if p]
    folders = [
        *expand(info.rpath if not info.runpath else ()),
        *library_path,
        *expand(info.runpath),
        *defaults,
    ]
    for folder in folders:
        candidate = Path(folder) / soname
        if system.path(candidate).is_file():
            return candidate
    return None


def loaded_libraries(system: System) -> list[Path]:
    """Libraries already mapped into this process (live only): the loader reuses them by soname."""
    if not system.live:
        return []
    maps = system.read_text("/proc/self/maps") or ""
    return sorted({Path(line.split()[-1]) for line in maps.splitlines() if ".so" in line.split()[-1]})


def find_requirements(system: System, binaries: Iterable[Path]) -> list[Requirement]:
    """One record per (binary, referenced library) with what is missing from the library found."""
    loaded = loaded_libraries(system)
    found: list[Requirement] = []
    for binary in binaries:
        host_path = system.path(binary)
        info = elf.dynamic_info(host_path)
        # not a version order: by library file name
        for library, versions in sorted(elf.version_needs(host_path).items()):
            provider = resolve_library(system, library, binary, info, loaded)
            provided = elf.version_definitions(system.path(provider)) if provider else frozenset()
            found.append(
                Requirement(
                    binary=binary,
                    library=library,
                    versions=versions,
                    provider=provider,
                    missing=versions - provided,
                    provided=provided,
                )
            )
    return found


def requirement_facts(facts: Facts) -> list[Requirement] | None:
    """``None`` when FlagTree is not installed."""

    def compute() -> list[Requirement] | None:
        install = triton_facts(facts)
        if install is None:
            return None
        return find_requirements(facts.system, shared_objects(facts.system, install))

    value = facts.memo("requirements", compute)
    assert value is None or isinstance(value, list)
    return value


def _newest(names: Iterable[str], prefix: str) -> str | None:
    matching = [n for n in names if n.startswith(prefix) and elf.version_key(n)]
    return max(matching, key=elf.version_key) if matching else None


def _verdict(check: str, requirements: list[Requirement] | None, *, cxx: bool) -> CheckResult:
    label = "the C++ runtime (libstdc++, libgcc_s, libgomp)" if cxx else "the C library"
    if requirements is None:
        return CheckResult(id=check, status="skip", message="FlagTree is not installed (see triton-install)")
    mine = [r for r in requirements if r.library.startswith(_CXX_RUNTIME_PREFIXES) == cxx]
    if not mine:
        return CheckResult(id=check, status="ok", message=f"the binaries reference no versions of {label}")
    for r in mine:
        if r.provider is None:
            return CheckResult(
                id=check,
                status="fail",
                message=f"{r.library} (needed by {r.binary.name}) is not found",
                fix=f"install the package providing {r.library} into this environment",
            )
    broken = [r for r in mine if r.missing]
    if broken:
        r = broken[0]
        wanted = sorted(r.missing, key=elf.version_key)
        prefix = wanted[-1].rpartition("_")[0] + "_"
        has = _newest(r.provided, prefix) or "none"
        fix = (
            "conda install -c conda-forge libstdcxx-ng libgcc-ng, and keep older libstdc++ folders off "
            "LD_LIBRARY_PATH (or import triton before other C++ extensions)"
            if cxx
            else f"use a host or container whose glibc provides {wanted[-1]} (or a build for an older glibc)"
        )
        return CheckResult(
            id=check,
            status="fail",
            message=f"{r.binary.name} needs {', '.join(wanted)} from {r.provider}, which has up to {has}",
            fix=fix,
        )
    parts = []
    for library in sorted({r.library for r in mine}):
        needed = set().union(*(r.versions for r in mine if r.library == library))
        provider = next(r for r in mine if r.library == library)
        newest_needed = max(needed, key=elf.version_key)
        prefix = newest_needed.rpartition("_")[0] + "_"
        parts.append(f"{library} {newest_needed} <= {_newest(provider.provided, prefix) or newest_needed}")
    return CheckResult(id=check, status="ok", message="; ".join(parts))


def check_glibc(facts: Facts) -> CheckResult:
    return _verdict("glibc", requirement_facts(facts), cxx=False)


def check_glibcxx(facts: Facts) -> CheckResult:
    return _verdict("glibcxx", requirement_facts(facts), cxx=True)
