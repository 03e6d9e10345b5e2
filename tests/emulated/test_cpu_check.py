"""FlagTree's CPU check (flagtree_doctor.cpu_check, called by patch 0009) as real aarch64 code under qemu-user.

A CPU below dotprod, the floor of the baseline runtime, raises one exception naming what it lacks (A64FX: SVE,
no dotprod; Cortex-A72: Armv8.0); every CPU with dotprod passes, on the Armv9 runtime (``max`` with 128-bit
vectors) or the baseline one (Cortex-A76 and Neoverse N1: no SVE; ``max`` with 256- or qemu's default 512-bit
vectors). The doctor's cpu checks reach the same verdict on each CPU. What each tier then loads and refuses,
the driver's launch path included: tests/emulated/test_runtime_tiers_qemu.py.
"""

from __future__ import annotations

import json

import pytest
from _qemu import PYTHON, require_emulator, run_aarch64

pytestmark = pytest.mark.emulated

LACKS_DOTPROD = "the CPU lacks asimddp (baseline runtime: -march=armv8.2-a+dotprod)"
# -cpu -> what the exception names (None: the CPU passes, on one runtime or the other)
VERDICTS: dict[str, str | None] = {
    "cortex-a76": None,
    "neoverse-n1": None,
    "a64fx": LACKS_DOTPROD,
    "cortex-a72": LACKS_DOTPROD,  # Raspberry Pi 4, Graviton1: Armv8.0, no dotprod
    "max": None,
    "max,sve-default-vector-length=32": None,
    "max,sve-default-vector-length=16": None,
}
PREFIX = "flagtree-cpu cannot run kernels on this CPU: "
SUFFIX = (
    ". Run `flagtree-doctor` for what it found and how to fix it; FLAGTREE_SKIP_CPU_CHECK=1 skips this check "
    "(kernels may then stop with SIGILL or compute wrong results)."
)
CHECK = """
import sys
from flagtree_doctor.cpu_check import UnsupportedCpuError, require_supported_cpu
try:
    require_supported_cpu()
except UnsupportedCpuError as exc:
    print(exc)
    sys.exit(3)
print("ok")
"""


@pytest.fixture(autouse=True, scope="module")
def emulator() -> None:
    require_emulator()


@pytest.mark.parametrize("cpu", sorted(VERDICTS))
def test_the_check_raises_naming_what_is_missing(cpu: str) -> None:
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", CHECK)
    first = VERDICTS[cpu]
    if first is None:
        assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
        return
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == PREFIX + first + SUFFIX


def test_the_check_can_be_skipped() -> None:
    done = run_aarch64("a64fx", str(PYTHON), "-S", "-c", CHECK, env={"FLAGTREE_SKIP_CPU_CHECK": "1"})
    assert (done.returncode, done.stdout) == (0, "ok\n")
    done = run_aarch64("a64fx", str(PYTHON), "-S", "-c", CHECK, env={"FLAGTREE_SKIP_CPU_CHECK": "yes"})
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "flagtree_doctor.cpu_check.SettingError: FLAGTREE_SKIP_CPU_CHECK='yes' is neither 1 nor 0 "
        "(fix: set FLAGTREE_SKIP_CPU_CHECK=1, or unset it)"
    )


AGREEMENT = """
import json
from flagtree_doctor.checks import diagnose
from flagtree_doctor.cpu_check import UnsupportedCpuError, require_supported_cpu
from flagtree_doctor.model import System
_, results = diagnose(System.from_root(None, {}), ["cpu-features", "sve-vector-length"])
try:
    require_supported_cpu({})
    raised = False
except UnsupportedCpuError:
    raised = True
print(json.dumps({"failed": [r.id for r in results if r.status == "fail"], "raised": raised}))
"""


@pytest.mark.parametrize("cpu", sorted(VERDICTS))
def test_the_doctor_agrees(cpu: str) -> None:
    """The doctor fails a cpu check exactly where the CPU check raises: one verdict, shared.

    (tests/emulated/test_live_detection.py runs the doctor's command on the same CPUs.)
    """
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", AGREEMENT)
    seen = json.loads(done.stdout)
    assert bool(seen["failed"]) == seen["raised"] == (VERDICTS[cpu] is not None), seen
