"""The doctor's live CPU detection as real aarch64 code: Debian's arm64 CPython under qemu-user.

Set up by ``bash tests/emulated/setup.sh``. Under qemu-user ``/proc/cpuinfo`` and ``/sys`` are the host's,
but ``getauxval`` and ``prctl(PR_SVE_GET_VL)`` answer for the emulated CPU, which is what the doctor's
live path reads. A cross-compiled C probe prints the same auxv words as a second witness.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, REPO, require_emulator, run_aarch64

from _tools import aarch64_gcc

pytestmark = pytest.mark.emulated


@pytest.fixture(autouse=True, scope="module")
def emulator() -> None:
    require_emulator()


MAX = [
    "asimd",
    "asimddp",
    "asimdfhm",
    "asimdhp",
    "bf16",
    "fphp",
    "i8mm",
    "sme",
    "sve",
    "sve2",
    "svebf16",
    "svei8mm",
]
ARMV82_DOTPROD = ["asimd", "asimddp", "asimdhp", "fphp"]

# qemu -cpu model -> (features, SVE bits, the runtime it runs, cpu-features status, sve-vector-length status)
VERDICTS = {
    "cortex-a76": (ARMV82_DOTPROD, None, "baseline", "ok", "skip"),
    "neoverse-n1": (ARMV82_DOTPROD, None, "baseline", "ok", "skip"),
    # No dotprod: refused; no vector length would help, so that check is skipped.
    "a64fx": (["asimd", "asimdhp", "fphp", "sve"], 512, None, "fail", "skip"),
    # Every Armv9 feature but longer vectors: the baseline runtime, and a warning with the fix for the Armv9 one.
    "max": (MAX, 512, "baseline", "ok", "warn"),
    "max,sve-default-vector-length=32": (MAX, 256, "baseline", "ok", "warn"),
    "max,sve-default-vector-length=16": (MAX, 128, "armv9", "ok", "ok"),
}


@pytest.mark.parametrize("cpu", sorted(VERDICTS))
def test_doctor_live_verdict(cpu: str) -> None:
    features, bits, tier, feature_status, vl_status = VERDICTS[cpu]
    done = run_aarch64(
        cpu, str(PYTHON), "-m", "flagtree_doctor", "--json", "cpu-features", "sve-vector-length"
    )
    report = json.loads(done.stdout)
    assert report["machine"] == "aarch64"
    assert report["features"] == features
    assert report["sve_vector_bits"] == bits
    assert report["tier"] == tier
    assert [c["status"] for c in report["checks"]] == [feature_status, vl_status]
    assert done.returncode == 1 if "fail" in (feature_status, vl_status) else done.returncode == 0


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = aarch64_gcc()
    source = tmp_path_factory.mktemp("probe") / "auxv.c"
    source.write_text(
        "#include <stdio.h>\n#include <sys/auxv.h>\n"
        'int main(void) { printf("%lx %lx\\n", getauxval(AT_HWCAP), getauxval(AT_HWCAP2)); return 0; }\n'
    )
    binary = source.with_suffix("")
    subprocess.run([compiler, "-O2", str(source), "-o", str(binary)], check=True)
    return binary


@pytest.mark.parametrize("cpu", ["cortex-a76", "a64fx", "max"])
def test_python_reads_the_same_auxv_as_c(cpu: str, probe: Path) -> None:
    from_c = run_aarch64(cpu, str(probe)).stdout.split()
    code = "from flagtree_doctor.capabilities import live_hwcaps; print('%x %x' % live_hwcaps())"
    from_python = run_aarch64(cpu, str(PYTHON), "-S", "-c", code).stdout.split()
    assert from_python == from_c
    assert len(from_c) == 2


# The flagtree-cpu package test's gate, run as it runs on a builder: skip, with the reason, unless the CPU
# can run the kernels (then it goes on to import torch and triton, which this sysroot does not have).
GATE_REASONS = {"a64fx": "the CPU lacks asimddp (baseline runtime: -march=armv8.2-a+dotprod)"}


@pytest.mark.parametrize("cpu", sorted(GATE_REASONS))
def test_package_test_skips_kernels_where_the_cpu_cannot_run_them(cpu: str) -> None:
    done = run_aarch64(cpu, str(PYTHON), str(REPO / "recipe" / "test_rms_norm.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"SKIP: tle_ops.rms_norm end to end: {GATE_REASONS[cpu]}")


@pytest.mark.parametrize("cpu", sorted(GATE_REASONS))
def test_package_test_fails_where_a_job_requires_kernels(cpu: str) -> None:
    """FLAGTREE_REQUIRE_KERNELS=1 (a job meant to run kernels): the skip becomes one FAIL line and exit 1."""
    done = run_aarch64(
        cpu, str(PYTHON), str(REPO / "recipe" / "test_rms_norm.py"), env={"FLAGTREE_REQUIRE_KERNELS": "1"}
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(
        "FAIL: tle_ops.rms_norm end to end: FLAGTREE_REQUIRE_KERNELS=1, but the CPU cannot run kernels: "
        + GATE_REASONS[cpu]
    )
    assert len(done.stdout.splitlines()) == 1


@pytest.mark.parametrize("cpu", ["max,sve-default-vector-length=16", "cortex-a76", "neoverse-n1", "max"])
def test_package_test_runs_kernels_on_every_cpu_with_dotprod(cpu: str) -> None:
    done = run_aarch64(
        cpu,
        str(PYTHON),
        str(REPO / "recipe" / "test_rms_norm.py"),
        env={"FLAGTREE_REQUIRE_KERNELS": "1"},
    )
    assert "SKIP" not in done.stdout
    # It went past the gate into run(), and stopped at `import torch`: no aarch64 torch in this sysroot.
    assert ", in run\n" in done.stderr
    assert "torch" in done.stderr.splitlines()[-1]
