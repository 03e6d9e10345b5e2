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


ARMV9 = ["asimd", "asimddp", "asimdhp", "bf16", "fphp", "i8mm", "sve", "sve2", "svebf16", "svei8mm"]

# qemu -cpu model -> (features, SVE bits, cpu-features status, sve-vector-length status)
VERDICTS = {
    "cortex-a76": (["asimd", "asimddp", "asimdhp", "fphp"], None, "fail", "skip"),
    # No SVE2: the vector length check is skipped (no length would help), cpu-features says why.
    "a64fx": (["asimd", "asimdhp", "fphp", "sve"], 512, "fail", "skip"),
    "max": ([*ARMV9[:6], "sme", *ARMV9[6:]], 512, "ok", "fail"),
    "max,sve-default-vector-length=16": ([*ARMV9[:6], "sme", *ARMV9[6:]], 128, "ok", "ok"),
}


@pytest.mark.parametrize("cpu", sorted(VERDICTS))
def test_doctor_live_verdict(cpu: str) -> None:
    features, bits, feature_status, vl_status = VERDICTS[cpu]
    done = run_aarch64(
        cpu, str(PYTHON), "-m", "flagtree_doctor", "--json", "cpu-features", "sve-vector-length"
    )
    report = json.loads(done.stdout)
    assert report["machine"] == "aarch64"
    assert report["features"] == features
    assert report["sve_vector_bits"] == bits
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
GATE_REASONS = {
    "cortex-a76": "the CPU lacks bf16, i8mm, sve, sve2, svebf16, svei8mm",
    "a64fx": "the CPU lacks asimddp, bf16, i8mm, sve2, svebf16, svei8mm",
    "max": "SVE vectors are 512 bits; the code assumes 128",
}


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


def test_package_test_runs_kernels_on_an_armv9_cpu_with_128_bit_sve() -> None:
    done = run_aarch64(
        "max,sve-default-vector-length=16",
        str(PYTHON),
        str(REPO / "recipe" / "test_rms_norm.py"),
        env={"FLAGTREE_REQUIRE_KERNELS": "1"},
    )
    assert "SKIP" not in done.stdout
    # It went past the gate into run(), and stopped at `import torch`: no aarch64 torch in this sysroot.
    assert ", in run\n" in done.stderr
    assert "torch" in done.stderr.splitlines()[-1]
