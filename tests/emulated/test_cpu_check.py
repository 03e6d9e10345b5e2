"""FlagTree's CPU check (flagtree_doctor.cpu_check, called by patch 0009) as real aarch64 code under qemu-user.

Every CPU that cannot run the package's kernels raises one exception naming what it lacks (Cortex-A76 and
Neoverse N1: no SVE; A64FX: no SVE2; ``max``: SVE2 with qemu's default 512-bit vectors); ``max`` with
128-bit vectors passes. The doctor's cpu checks reach the same verdict on each CPU.

With ``FLAGTREE_SRC`` (a pristine checkout of the pinned FlagTree), the patched ``driver.py`` itself is loaded
in a stand-in ``triton`` package and asked to load a cross-compiled kernel: the real code path of a launch.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, require_emulator, run_aarch64

from _tools import aarch64_gcc, upstream_source
from flagtree_doctor.target import ARMV9_RUNTIME
from test_patches import apply_series, series_patches

pytestmark = pytest.mark.emulated

LACKS_SVE = "the CPU lacks bf16, i8mm, sve, sve2, svebf16, svei8mm"
# -cpu -> the first thing the exception names (None: the CPU passes)
VERDICTS: dict[str, str | None] = {
    "cortex-a76": LACKS_SVE,
    "neoverse-n1": LACKS_SVE,
    "a64fx": "the CPU lacks asimddp, bf16, i8mm, sve2, svebf16, svei8mm",
    "max": "SVE vectors are 512 bits; the code assumes 128",
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
    message = done.stdout.strip()
    assert message.startswith(PREFIX + first)
    assert message.endswith(SUFFIX)


def test_the_check_can_be_skipped() -> None:
    done = run_aarch64("cortex-a76", str(PYTHON), "-S", "-c", CHECK, env={"FLAGTREE_SKIP_CPU_CHECK": "1"})
    assert (done.returncode, done.stdout) == (0, "ok\n")
    done = run_aarch64("cortex-a76", str(PYTHON), "-S", "-c", CHECK, env={"FLAGTREE_SKIP_CPU_CHECK": "yes"})
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


# ---- the patched driver.py (patch 0009) in a stand-in triton package --------------------------------------

# The stand-in replaces FlagTree's `triton` package (which needs the real build) with the five names
# driver.py imports; it cannot show the JIT, the launcher or anything of libtriton. The kernel, runtime and
# sleef libraries are real aarch64 shared objects built here with the package's flags.
STAND_IN = {
    "triton/__init__.py": "",
    "triton/_C/__init__.py": "",
    "triton/_C/libtriton.py": "llvm = None\n",
    "triton/backends/__init__.py": "",
    "triton/backends/driver.py": "class DriverBase:\n    def __init__(self):\n        pass\n",
    "triton/backends/compiler.py": "from collections import namedtuple\nGPUTarget = namedtuple('GPUTarget', 'backend arch warp_size')\n",
    "triton/backends/cpu/__init__.py": "",
}
KERNEL_C = r"""
static int data[1000];
int toy_kernel(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) data[i] = i - 500;
  for (int i = 0; i < n; i++)
    if (data[i] > 0) sum += data[i];
  return sum;
}
"""
LAUNCH = """
import ctypes, sys
from triton.backends.cpu.driver import CPUUtils
lib, function, _, _ = CPUUtils().load_binary("toy_kernel", open(sys.argv[1], "rb").read(), 0, 0)
print(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(function)(1000))
"""
KERNEL_RESULT = str(sum(range(1, 500)))


def _stand_in(tmp: Path, series: list[Path], src: Path) -> Path:
    """A ``triton`` package around FlagTree's driver.py with ``series`` applied; returns its parent folder."""
    patched = tmp / "flagtree"
    apply_series(series, src, patched)
    site = tmp / "site"
    for relative, text in STAND_IN.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    (site / "triton/backends/cpu/driver.py").write_text(
        (patched / "third_party/cpu/backend/driver.py").read_text()
    )
    compiler, flags = aarch64_gcc(), ARMV9_RUNTIME.flags
    for name, source in (("libTritonCPURuntime.so", "int toy_runtime;"), ("libsleef.so", "int toy_sleef;")):
        (tmp / f"{name}.c").write_text(source)
        subprocess.run([compiler, "-O2", "-fPIC", "-shared", *flags, str(tmp / f"{name}.c"), "-o",
                        str(site / "triton/_C" / name)], check=True)  # fmt: skip
    return site


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the kernel, FlagTree's driver with our whole series, the same without patch 0009)."""
    src = upstream_source("FLAGTREE_SRC")
    tmp = tmp_path_factory.mktemp("driver")
    series = series_patches("flagtree")
    without = [p for p in series if not p.name.startswith("0009-")]
    assert len(without) == len(series) - 1
    (tmp / "kernel.c").write_text(KERNEL_C)
    kernel = tmp / "kernel.so"
    subprocess.run([aarch64_gcc(), "-O2", "-fPIC", "-shared", *ARMV9_RUNTIME.flags,
                    str(tmp / "kernel.c"), "-o", str(kernel)], check=True)  # fmt: skip
    return kernel, _stand_in(tmp / "with", series, src), _stand_in(tmp / "without", without, src)


@pytest.mark.parametrize("cpu", ["cortex-a76", "neoverse-n1", "max", "max,sve-default-vector-length=16"])
def test_the_patched_driver_raises_before_it_loads_a_kernel(
    cpu: str, drivers: tuple[Path, Path, Path]
) -> None:
    kernel, patched, unpatched = drivers
    before = run_aarch64(cpu, str(PYTHON), "-S", "-c", LAUNCH, str(kernel), pythonpath=(unpatched,))
    after = run_aarch64(cpu, str(PYTHON), "-S", "-c", LAUNCH, str(kernel), pythonpath=(patched,))
    first = VERDICTS[cpu]
    if first is None:  # an Armv9 CPU with 128-bit vectors: the kernel runs, checked or not
        assert before.stdout == after.stdout == KERNEL_RESULT + "\n", after.stderr
        return
    last = after.stderr.strip().splitlines()[-1]
    assert after.returncode == 1
    assert last.startswith("flagtree_doctor.cpu_check.UnsupportedCpuError: " + PREFIX + first)
    if first == LACKS_SVE:  # unchecked, the kernel's SVE code stops the process
        assert before.returncode == -signal.SIGILL
