"""Toolchain checks: what the JIT needs to build kernels and their launchers at run time.

``runtime/build.py`` compiles each kernel with ``$CC`` (else gcc, else clang) and ``-fopenmp``; the
launcher is C++ that includes ``<omp.h>`` and ``<Python.h>`` and links ``gomp``; ``neon.py`` archives the
TLE objects with ``ar``. Files are looked up, nothing is run, so ``--root`` trees are checked alike.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from .model import CheckResult, Facts, System


def find_compiler(system: System) -> tuple[str, Path] | None:
    """The compiler the JIT would run, as (name as configured, inspected path)."""
    names = [system.env["CC"].split()[0]] if system.env.get("CC") else ["gcc", "clang"]
    for name in names:
        found = system.which(name)
        if found is not None:
            return name, found
    return None


def _tool_prefix(compiler: Path | None) -> str:
    """``aarch64-conda-linux-gnu-`` for ``.../aarch64-conda-linux-gnu-cc``: conda's binutils carry it."""
    if compiler is None:
        return ""
    head, sep, _ = compiler.name.rpartition("-")
    return head + sep if head.count("-") >= 2 else ""


def _folders(system: System, *names: str) -> list[str]:
    return [system.env[n] for n in names if system.env.get(n)]


def check_jit_compiler(facts: Facts) -> CheckResult:
    found = find_compiler(facts.system)
    check = "jit-compiler"
    if found is None:
        tried = facts.system.env.get("CC") or "gcc, clang"
        return CheckResult(
            id=check,
            status="fail",
            message=f"no C compiler for the JIT (tried {tried})",
            fix="conda install -c conda-forge c-compiler cxx-compiler (or apt-get install gcc g++)",
        )
    return CheckResult(id=check, status="ok", message=f"{found[0]} ({found[1]})")


def check_binutils(facts: Facts) -> CheckResult:
    system = facts.system
    found = find_compiler(system)
    prefix = _tool_prefix(found[1] if found else None)
    missing = [
        tool
        for tool in ("as", "ld", "ar")
        if system.which(tool) is None and not (prefix and system.which(prefix + tool))
    ]
    check = "binutils"
    if missing:
        return CheckResult(
            id=check,
            status="fail",
            message=f"{', '.join(missing)} not on PATH (the JIT assembles, links and archives kernels)",
            fix="conda install -c conda-forge binutils (or apt-get install binutils)",
        )
    return CheckResult(id=check, status="ok", message="as, ld and ar found")


def check_openmp(facts: Facts) -> CheckResult:
    system = facts.system
    prefixes = _folders(system, "CONDA_PREFIX", "TRITON_SYS_PATH")
    header_patterns = [
        *(f"{p}/lib/gcc/*/*/include/omp.h" for p in prefixes),
        *(f"{p}/include/omp.h" for p in prefixes),
        "/usr/lib/gcc/*/*/include/omp.h",
        "/usr/lib/llvm-*/lib/clang/*/include/omp.h",
        "/usr/include/omp.h",
        "/usr/local/include/omp.h",
    ]
    library_patterns = [
        *(f"{p}/lib/libgomp.so*" for p in prefixes),
        "/usr/lib/*-linux-gnu/libgomp.so*",
        "/lib/*-linux-gnu/libgomp.so*",
        "/usr/lib64/libgomp.so*",
        "/usr/lib/libgomp.so*",
        "/usr/lib/gcc/*/*/libgomp.so*",
    ]
    header = next((h for pat in header_patterns for h in system.glob(pat)), None)
    library = next((lib for pat in library_patterns for lib in system.glob(pat)), None)
    check = "openmp"
    missing = [what for what, got in (("omp.h", header), ("libgomp", library)) if got is None]
    if missing:
        return CheckResult(
            id=check,
            status="fail",
            message=f"{' and '.join(missing)} not found (the kernel launcher is built with -fopenmp)",
            fix="conda install -c conda-forge libgomp gcc (or apt-get install libgomp1 gcc)",
        )
    return CheckResult(id=check, status="ok", message=f"{header} and {library}")


def check_python_headers(facts: Facts) -> CheckResult:
    system = facts.system
    if system.live:
        candidates = [Path(sysconfig.get_paths()["include"]) / "Python.h"]
    else:
        candidates = [
            *(
                Path(p)
                for pre in _folders(system, "CONDA_PREFIX")
                for p in system.glob(f"{pre}/include/python3*/Python.h")
            ),
            *system.glob("/usr/include/python3*/Python.h"),
            *system.glob("/usr/local/include/python3*/Python.h"),
        ]
    found = next((c for c in candidates if system.path(c).is_file()), None)
    check = "python-headers"
    if found is None:
        return CheckResult(
            id=check,
            status="fail",
            message="Python.h not found (the kernel launcher includes it)",
            fix="conda install python (conda's python ships its headers), or apt-get install python3-dev",
        )
    return CheckResult(id=check, status="ok", message=str(found))
