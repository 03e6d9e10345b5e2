"""Environment checks: the variables FlagTree's cpu backend reads at run time.

``FLAGTREE_BACKEND`` (``runtime/build.py``, read at import), ``TRITON_SYS_PATH`` (``backend/driver.py``,
include/lib folders, default ``/usr/local``) and ``CC`` (the JIT compiler; else gcc, else clang).
"""

from __future__ import annotations

from .model import CheckResult, Facts
from .runtime import triton_facts
from .target import PATCHED_DEFAULTS


def has_packaged_default(facts: Facts, variable: str) -> bool:
    """Whether the installed FlagTree carries the feedstock's patch that makes ``variable`` optional."""
    install = triton_facts(facts)
    if install is None:
        return False
    relative, marker = PATCHED_DEFAULTS[variable]
    text = facts.system.read_text(install.package_dir / relative)
    return text is not None and marker in text


def check_flagtree_backend(facts: Facts) -> CheckResult:
    value = facts.system.env.get("FLAGTREE_BACKEND")
    check = "env-flagtree-backend"
    if value == "cpu":
        return CheckResult(id=check, status="ok", message="FLAGTREE_BACKEND=cpu")
    if value is None and has_packaged_default(facts, "FLAGTREE_BACKEND"):
        return CheckResult(
            id=check,
            status="ok",
            message="FLAGTREE_BACKEND unset: the installed cpu backend selects the CPU build",
        )
    shown = "unset" if value is None else f"FLAGTREE_BACKEND={value!r}"
    return CheckResult(
        id=check,
        status="fail",
        message=f"{shown}: kernels are assembled without the aarch64 flags "
        "('kernel.s: Error: junk at end of line', upstream FAQ 3)",
        fix="export FLAGTREE_BACKEND=cpu (conda activate sets it: re-activate the environment)",
    )


def check_triton_sys_path(facts: Facts) -> CheckResult:
    env, system = facts.system.env, facts.system
    value = env.get("TRITON_SYS_PATH")
    check = "env-triton-sys-path"
    prefix = env.get("CONDA_PREFIX")
    suggestion = f"export TRITON_SYS_PATH={prefix or '<your prefix>'}"
    if value is None and has_packaged_default(facts, "TRITON_SYS_PATH"):
        return CheckResult(
            id=check, status="ok", message="TRITON_SYS_PATH unset: the driver uses this Python's prefix"
        )
    if value is None:
        return CheckResult(
            id=check,
            status="warn",
            message="TRITON_SYS_PATH unset: the driver looks in /usr/local/include and /usr/local/lib",
            fix=suggestion,
        )
    if not system.path(value).is_dir():
        return CheckResult(
            id=check, status="fail", message=f"TRITON_SYS_PATH={value} is not a folder", fix=suggestion
        )
    lacking = [sub for sub in ("include", "lib") if not system.path(f"{value}/{sub}").is_dir()]
    if lacking:
        return CheckResult(
            id=check,
            status="warn",
            message=f"TRITON_SYS_PATH={value} has no {' or '.join(lacking)} folder",
            fix=suggestion,
        )
    return CheckResult(id=check, status="ok", message=f"TRITON_SYS_PATH={value}")


def check_cc(facts: Facts) -> CheckResult:
    value = facts.system.env.get("CC")
    check = "env-cc"
    if not value:
        return CheckResult(id=check, status="ok", message="CC unset: the JIT uses gcc, else clang")
    compiler = value.split()[0]
    found = facts.system.which(compiler)
    if found is None:
        return CheckResult(
            id=check,
            status="fail",
            message=f"CC={value} but {compiler} is not found",
            fix="unset CC, or point it at an installed C compiler",
        )
    return CheckResult(id=check, status="ok", message=f"CC={value} ({found})")
