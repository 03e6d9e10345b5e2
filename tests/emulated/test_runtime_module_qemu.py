"""flagtree-cpu's ``triton.language.extra.cpu.runtime`` with patches/flagtree-cpu applied, as aarch64 code under qemu.

The module loads ``libTritonCPURuntime.so`` with ctypes at import. Upstream's loads the Armv9 build, which loads
on any aarch64 CPU, and the first call of one of its functions stops a CPU without SVE with SIGILL. With the
patch it loads through flagtree-doctor's ``load_runtime()``: the build this CPU runs, ``UnsupportedCpuError``
below dotprod, and on the baseline build each function the CPU cannot run (the manifest says which) raises
``UnsupportedCpuError`` naming the module's wrapper, the function and the missing feature when called. Needs
``FLAGTREE_CPU_SRC`` (flagtree-cpu at ``flagtree_cpu_commit``, or a copy of its
``third_party/cpu/language/cpu/runtime.py`` at that path): the module is upstream's file, never stored here.

The stand-in ``triton`` package is an empty ``__init__.py`` (the module only reads ``triton.__file__``) and
``_C`` with both builds of a library defining the five functions the module binds (built here with each build's
flags; ``fused_mlp_bf16`` holds an i8mm instruction, as a target attribute puts it into the baseline build,
``standalone_residual_add_bf16`` a loop the Armv9 flags vectorize with SVE) and the baseline one's manifest
(recipe/runtime_manifest.py); tensors are stand-ins with ``data_ptr()``. It cannot show the real runtime's code
or torch.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from _qemu import PYTHON, require_libgomp, run_aarch64
from test_cpu_check import LACKS_DOTPROD, PREFIX

from _runtime_standin import FLAGS, build, write_manifest
from _tools import upstream_source
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME
from test_patches import apply_series, series_patches

pytestmark = pytest.mark.emulated

MODULE = "third_party/cpu/language/cpu/runtime.py"
# The five symbols the module binds at import (its "Signatures" block).
RUNTIME_C = r"""
#include <arm_neon.h>
#include <stdint.h>
__attribute__((target("+i8mm"))) void fused_mlp_bf16(int32_t *out) {
  int8_t a[16], b[16];
  for (int i = 0; i < 16; i++) { a[i] = (int8_t)i; b[i] = 1; }
  *out = vaddvq_s32(vmmlaq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b)));
}
void flash_attn_decode_bf16(void) {}
void standalone_kv_cache_write_bf16(void) {}
void standalone_rope_bf16(void) {}
void standalone_residual_add_bf16(int32_t *out, const int32_t *residual, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (residual[i] > 0) out[i] += residual[i];
}
"""
PRELUDE = """
import ctypes, sys
from triton.language.extra.cpu import runtime

class Buffer:
    def __init__(self, values):
        self.array = (ctypes.c_int32 * len(values))(*values)
    def data_ptr(self):
        return ctypes.addressof(self.array)
"""
CALL = (
    PRELUDE
    + """
out, residual = Buffer([1] * 1000), Buffer(range(-500, 500))
runtime.residual_add_bf16(out, residual, 1000)
print(sum(out.array))
"""
)
RESULT = str(1000 + sum(range(1, 500)))
# The module's wrapper passes eight arguments; the stand-in reads the first, where the 2x2 tile's sum goes.
CALL_I8MM = (
    PRELUDE
    + """
out = Buffer([0])
try:
    runtime.fused_mlp_bf16(out, out, out, out, out, out, 0, 0)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
else:
    print(out.array[0])
"""
)
I8MM_RESULT = str(2 * sum(range(16)))  # both rows of the tile hold sum(a) * 1, over both rows of b
REFUSED = (
    "UnsupportedCpuError: triton.language.extra.cpu.runtime.fused_mlp_bf16() cannot run on this CPU: it calls the "
    "runtime function fused_mlp_bf16, which needs i8mm (i8mm: smmla "
)
# -cpu -> (residual_add, fused_mlp) with the patched module: a value, REFUSED, or the import's error.
OUTCOMES = {
    "cortex-a76": (RESULT, REFUSED),
    "neoverse-n1": (RESULT, REFUSED),
    "a64fx": (PREFIX + LACKS_DOTPROD, PREFIX + LACKS_DOTPROD),
    "max,sve-default-vector-length=32": (RESULT, I8MM_RESULT),  # baseline: i8mm is there
    "max,sve-default-vector-length=16": (RESULT, I8MM_RESULT),  # Armv9
}


def _site(tmp: Path, patched: bool, src: Path) -> Path:
    """A ``triton`` stand-in holding flagtree-cpu's runtime module (with or without the series) and ``_C``."""
    name = "patched" if patched else "upstream"
    module = src / MODULE
    if patched:
        apply_series(series_patches("flagtree-cpu"), src, tmp / name)
        module = tmp / name / MODULE
    site = tmp / f"site-{name}"
    package = site / "triton" / "language" / "extra" / "cpu"
    package.mkdir(parents=True)
    for folder in (site / "triton", site / "triton/language", site / "triton/language/extra", package):
        (folder / "__init__.py").write_text("")
    (package / "runtime.py").write_text(module.read_text())
    source = tmp / "runtime.c"
    source.write_text(RUNTIME_C)
    for runtime in (ARMV9_RUNTIME, BASELINE_RUNTIME):
        build(source, site / "triton/_C" / runtime.library, FLAGS[runtime.tier])
    done = write_manifest(site / "triton/_C" / BASELINE_RUNTIME.library, BASELINE_RUNTIME.march)
    assert done.returncode == 0, done.stderr
    return site


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the module as upstream has it, the module with patches/flagtree-cpu), each in a stand-in package."""
    require_libgomp()
    src = upstream_source("FLAGTREE_CPU_SRC")
    tmp = tmp_path_factory.mktemp("runtime-module")
    return _site(tmp, False, Path(src)), _site(tmp, True, Path(src))


def _last(done_stdout: str, done_stderr: str) -> str:
    return (done_stdout.strip().splitlines() or done_stderr.strip().splitlines() or [""])[-1]


@pytest.mark.parametrize("cpu", sorted(OUTCOMES))
def test_the_patched_module_loads_the_tiers_build_and_refuses_by_name(
    cpu: str, sites: tuple[Path, Path]
) -> None:
    _, patched = sites
    residual, mlp = OUTCOMES[cpu]
    for script, expected in ((CALL, residual), (CALL_I8MM, mlp)):
        done = run_aarch64(cpu, str(PYTHON), "-S", "-c", script, pythonpath=(patched,))
        assert done.returncode != -signal.SIGILL, done.stderr
        if expected.startswith(PREFIX):  # refused at import, as before
            assert done.returncode == 1
            assert _last(
                done.stdout, done.stderr
            ) == "flagtree_doctor.cpu_check.UnsupportedCpuError: " + expected + (
                ". Run `flagtree-doctor` for what it found and how to fix it; FLAGTREE_SKIP_CPU_CHECK=1 skips this "
                "check (kernels may then stop with SIGILL or compute wrong results)."
            )
        elif expected == REFUSED:
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(REFUSED), done.stdout
            assert done.stdout.rstrip().endswith(
                "and this CPU lacks it. Run `flagtree-doctor` for the TLE ops this CPU runs; "
                "FLAGTREE_SKIP_CPU_CHECK=1 skips this check (the op may then stop with SIGILL)."
            )
        else:
            assert (done.returncode, done.stdout) == (0, expected + "\n"), done.stderr


@pytest.mark.parametrize("cpu", ["cortex-a76", "neoverse-n1"])
def test_upstreams_module_dies_where_the_patched_one_runs(cpu: str, sites: tuple[Path, Path]) -> None:
    """Upstream's module loads the Armv9 build: its SVE loop stops a CPU without SVE at the first call."""
    upstream, _ = sites
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", CALL, pythonpath=(upstream,))
    assert done.returncode == -signal.SIGILL, done.stderr


def test_the_check_is_skipped_on_request(sites: tuple[Path, Path]) -> None:
    """FLAGTREE_SKIP_CPU_CHECK=1: nothing is refused, and the user meets the SIGILL the check prevents."""
    _, patched = sites
    done = run_aarch64(
        "cortex-a76",
        str(PYTHON),
        "-S",
        "-c",
        CALL_I8MM,
        env={"FLAGTREE_SKIP_CPU_CHECK": "1"},
        pythonpath=(patched,),
    )
    assert done.returncode == -signal.SIGILL, done.stderr
