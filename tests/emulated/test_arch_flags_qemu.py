"""Patch 0008 under qemu-user: what the Armv9 flags do to a library, built upstream's way and ours.

Upstream's root CMakeLists.txt puts ``-march=armv9-a+sve2+... -msve-vector-bits=128`` into the global C/C++
flags, so libtriton.so is built for Armv9 too; patch 0008 gives them to the TritonCPURuntime target alone.
Two small shared objects stand for the two targets (the real ones need the whole FlagTree build):

- ``triton``: code run when the library is loaded (as LLVM's static initializers are) and when it is
  called; built with the global flags (upstream) or with the toolchain's defaults (patched);
- ``runtime``: the NEON runtime's shape (``vdotq_s32`` under ``__ARM_FEATURE_DOTPROD``, as flagtree-cpu's
  ``runtime_sdot.cpp`` has it, plus a scalar tail); built with the flags either way.

Each is cross-compiled with Debian's aarch64 gcc at FlagTree's ``-O2`` and loaded and called by the
sysroot's python (ctypes) on CPUs without SVE2 (Cortex-A76, Neoverse N1) and with it (``max``).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, require_emulator, run_aarch64

from _tools import aarch64_gcc
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME

pytestmark = pytest.mark.emulated

# The runtime's flags, as patch 0008 gives them (tests/test_arch_flags.py checks the patch says the same).
ARCH_FLAGS = list(ARMV9_RUNTIME.flags)
OPT = ["-O2", "-fPIC", "-shared"]  # FlagTree's TritonRelBuildWithAsserts is -O2 -g

TRITON_C = r"""
static volatile int count = 4096;
static int values[4096];
static int checksum;

__attribute__((noinline)) int toy_positive_sum(const int *v, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0)
      sum += v[i] & 255;
  return sum;
}

__attribute__((constructor)) static void toy_init(void) {
  for (int i = 0; i < 4096; i++)
    values[i] = (int)((unsigned)i * 2654435761u >> 7) - (1 << 24);
  checksum = toy_positive_sum(values, count);
}

int toy_checksum(void) { return checksum; }
"""

RUNTIME_C = r"""
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#include <stdint.h>

#if defined(__ARM_FEATURE_DOTPROD)
int32_t toy_sdot(const int8_t *a, const int8_t *b, int n) {
  int32x4_t acc = vdupq_n_s32(0);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    acc = vdotq_s32(acc, vld1q_s8(a + i), vld1q_s8(b + i));
  int32_t sum = vaddvq_s32(acc);
  for (; i < n; i++)
    if (a[i] > 0)
      sum += a[i] * b[i];
  return sum;
}
#else
int32_t toy_sdot(const int8_t *a, const int8_t *b, int n) { (void)a; (void)b; (void)n; return -1; }
#endif
"""

CALL_TRITON = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).toy_checksum())"
CALL_RUNTIME = (
    "import ctypes, sys\n"
    "a = (ctypes.c_int8 * 70)(*range(-32, 38)); b = (ctypes.c_int8 * 70)(*[3] * 70)\n"
    "print(ctypes.CDLL(sys.argv[1]).toy_sdot(a, b, 70))"
)
TRITON_CHECKSUM = "261032"
SDOT = str(3 * sum(range(-32, 38)))  # what the runtime computes when it runs
SIGILL = -signal.SIGILL

# -cpu -> what loading and calling each library does: the exit status, or the number printed.
OUTCOMES = {
    #              triton, upstream  triton, patched   runtime (flags either way)
    "cortex-a76": (SIGILL, TRITON_CHECKSUM, SIGILL),
    "neoverse-n1": (SIGILL, TRITON_CHECKSUM, SIGILL),
    "max": (TRITON_CHECKSUM, TRITON_CHECKSUM, SDOT),
}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_emulator()
    compiler = aarch64_gcc()
    work = tmp_path_factory.mktemp("arch-flags")
    (work / "triton.c").write_text(TRITON_C)
    (work / "runtime.c").write_text(RUNTIME_C)
    builds = {
        "triton-upstream": ("triton.c", ARCH_FLAGS),  # global flags reach libtriton too
        "triton-patched": ("triton.c", []),  # the toolchain's default
        "runtime": ("runtime.c", ARCH_FLAGS),  # both ways
        "runtime-baseline": ("runtime.c", list(BASELINE_RUNTIME.flags)),  # patch 0010's second build
        "runtime-without-flags": ("runtime.c", []),
    }
    for name, (source, flags) in builds.items():
        subprocess.run(
            [compiler, *OPT, *flags, str(work / source), "-o", str(work / f"{name}.so")], check=True
        )
    return {name: work / f"{name}.so" for name in builds}


def outcome(cpu: str, script: str, library: Path) -> int | str:
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", script, str(library))
    return done.stdout.strip() if done.returncode == 0 else done.returncode


@pytest.mark.parametrize("cpu", sorted(OUTCOMES))
def test_libtriton_built_each_way(cpu: str, libraries: dict[str, Path]) -> None:
    upstream, patched, _ = OUTCOMES[cpu]
    assert outcome(cpu, CALL_TRITON, libraries["triton-upstream"]) == upstream
    assert outcome(cpu, CALL_TRITON, libraries["triton-patched"]) == patched


@pytest.mark.parametrize("cpu", sorted(OUTCOMES))
def test_the_runtime_needs_an_armv9_cpu_either_way(cpu: str, libraries: dict[str, Path]) -> None:
    """What FlagTree's CPU check (patch 0009) stands in front of."""
    assert outcome(cpu, CALL_RUNTIME, libraries["runtime"]) == OUTCOMES[cpu][2]


@pytest.mark.parametrize("cpu", sorted(OUTCOMES))
def test_the_baseline_build_runs_on_every_cpu_with_dotprod(cpu: str, libraries: dict[str, Path]) -> None:
    """Patch 0010's build of the same source: its dotprod code, no SVE, runs on all three."""
    assert outcome(cpu, CALL_RUNTIME, libraries["runtime-baseline"]) == SDOT


def test_without_the_flags_the_runtime_would_be_a_stub(libraries: dict[str, Path]) -> None:
    """Why the runtime keeps them: without dotprod its NEON code is compiled out (a stub returning -1)."""
    assert outcome("max", CALL_RUNTIME, libraries["runtime-without-flags"]) == "-1"
