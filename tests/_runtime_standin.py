"""The stand-in runtime (tests/emulated/standin_runtime.c) built both ways, and recipe/runtime_manifest.py on it.

Debian's aarch64 cross toolchain stands for conda's: ``aarch64-linux-gnu-gcc`` builds, ``aarch64-linux-gnu-objdump``
and ``aarch64-linux-gnu-as`` are what build-flagtree.sh passes the manifest tool as ``${OBJDUMP}`` and ``${AS}``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

from _tools import aarch64_gcc, require_executable
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME

ROOT = Path(__file__).resolve().parents[1]
STANDIN_C = ROOT / "tests" / "emulated" / "standin_runtime.c"
SONAME = "libTritonCPURuntime.so"
# The two builds of patches 0008 and 0010, by tier: the flags of flagtree_doctor.target (tests/test_patch_rules.py
# and tests/test_arch_flags.py check the patches give the same), and the stand-in's mark of each.
FLAGS = {"armv9": ARMV9_RUNTIME.flags, "baseline": BASELINE_RUNTIME.flags}
TIER_MARK = {"armv9": 9, "baseline": 8}


def binutils() -> tuple[str, str]:
    """(objdump, as) of the aarch64 cross binutils (a dependency of the cross compiler)."""
    return (
        require_executable("aarch64-linux-gnu-objdump", "binutils-aarch64-linux-gnu"),
        require_executable("aarch64-linux-gnu-as", "binutils-aarch64-linux-gnu"),
    )


def build(source: Path, output: Path, flags: tuple[str, ...], *extra: str) -> Path:
    """A shared object as the runtime is built (-fPIC, OpenMP, the runtime's soname), at -O3 so that the plain
    loop is vectorized (with SVE under the Armv9 flags) whatever GCC's -O2 cost model decides."""
    output.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [aarch64_gcc(), "-O3", "-fPIC", "-shared", "-fopenmp", *flags, *extra, f"-Wl,-soname,{SONAME}",
         str(source), "-o", str(output)],
        check=True,
    )  # fmt: skip
    return output


def tool() -> types.ModuleType:
    """recipe/runtime_manifest.py, the script build-flagtree.sh runs, imported as a module."""
    if "runtime_manifest" not in sys.modules:  # its dataclasses look their module up there
        spec = importlib.util.spec_from_file_location(
            "runtime_manifest", ROOT / "recipe" / "runtime_manifest.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["runtime_manifest"] = module
        spec.loader.exec_module(module)
    return sys.modules["runtime_manifest"]


def write_manifest(library: Path, march: str, output: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the tool as build-flagtree.sh does (a separate Python, the cross binutils)."""
    objdump, assembler = binutils()
    argv = [sys.executable, str(ROOT / "recipe" / "runtime_manifest.py"), str(library), "--objdump", objdump,
            "--as", assembler, "--march", march]  # fmt: skip
    return subprocess.run(
        [*argv, *(["--output", str(output)] if output else [])], capture_output=True, text=True, check=False
    )
