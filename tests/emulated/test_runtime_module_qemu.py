"""flagtree-cpu's ``triton.language.extra.cpu.runtime`` with patches/flagtree-cpu applied, as aarch64 code under qemu.

The module loads ``libTritonCPURuntime.so`` with ctypes at import; the library is built for Armv9 with SVE2, so
it loads on any aarch64 CPU and the first call of one of its functions stops a CPU without SVE with SIGILL.
With the patch the import runs flagtree-doctor's CPU check first and raises ``UnsupportedCpuError`` naming what
the CPU lacks. Needs ``FLAGTREE_CPU_SRC`` (flagtree-cpu at ``flagtree_cpu_commit``, or a copy of its
``third_party/cpu/language/cpu/runtime.py`` at that path): the module is upstream's file, never stored here.

The stand-in ``triton`` package is an empty ``__init__.py`` (the module only reads ``triton.__file__``) and a
``_C/libTritonCPURuntime.so`` built here with the package's flags, defining the five functions the module
binds; tensors are stand-ins with ``data_ptr()``. It cannot show the real runtime's code or torch.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, require_emulator, run_aarch64
from test_cpu_check import LACKS_SVE, PREFIX, VERDICTS

from _tools import aarch64_gcc, upstream_source
from flagtree_doctor.target import ARMV9_RUNTIME
from test_patches import apply_series, series_patches

pytestmark = pytest.mark.emulated

MODULE = "third_party/cpu/language/cpu/runtime.py"
# The five symbols the module binds at import (its "Signatures" block), one with an SVE-vectorised loop.
RUNTIME_C = r"""
#include <stdint.h>
void fused_mlp_bf16(void) {}
void flash_attn_decode_bf16(void) {}
void standalone_kv_cache_write_bf16(void) {}
void standalone_rope_bf16(void) {}
void standalone_residual_add_bf16(int32_t *out, const int32_t *residual, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (residual[i] > 0) out[i] += residual[i];
}
"""
CALL = """
import ctypes
from triton.language.extra.cpu import runtime

class Buffer:
    def __init__(self, values):
        self.array = (ctypes.c_int32 * len(values))(*values)
    def data_ptr(self):
        return ctypes.addressof(self.array)

out, residual = Buffer([1] * 1000), Buffer(range(-500, 500))
runtime.residual_add_bf16(out, residual, 1000)
print(sum(out.array))
"""
RESULT = str(1000 + sum(range(1, 500)))


def _site(tmp: Path, patched: bool, src: Path) -> Path:
    """A ``triton`` stand-in holding flagtree-cpu's runtime module (with or without the series) and library."""
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
    (site / "triton/_C").mkdir()
    source = tmp / "runtime.c"
    source.write_text(RUNTIME_C)
    subprocess.run([aarch64_gcc(), "-O3", "-fPIC", "-shared", *ARMV9_RUNTIME.flags,
                    str(source), "-o", str(site / "triton/_C/libTritonCPURuntime.so")], check=True)  # fmt: skip
    return site


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the module as upstream has it, the module with patches/flagtree-cpu), each in a stand-in package."""
    require_emulator()
    src = upstream_source("FLAGTREE_CPU_SRC")
    tmp = tmp_path_factory.mktemp("runtime-module")
    return _site(tmp, False, Path(src)), _site(tmp, True, Path(src))


@pytest.mark.parametrize("cpu", ["cortex-a76", "neoverse-n1", "max", "max,sve-default-vector-length=16"])
def test_the_patched_module_raises_before_it_loads_the_runtime(cpu: str, sites: tuple[Path, Path]) -> None:
    upstream, patched = sites
    before = run_aarch64(cpu, str(PYTHON), "-S", "-c", CALL, pythonpath=(upstream,))
    after = run_aarch64(cpu, str(PYTHON), "-S", "-c", CALL, pythonpath=(patched,))
    first = VERDICTS[cpu]
    if first is None:  # an Armv9 CPU with 128-bit vectors: the runtime runs, checked or not
        assert before.stdout == after.stdout == RESULT + "\n", after.stderr
        return
    last = after.stderr.strip().splitlines()[-1]
    assert after.returncode == 1, after.stderr
    assert last.startswith("flagtree_doctor.cpu_check.UnsupportedCpuError: " + PREFIX + first)
    if first == LACKS_SVE:  # unchecked, the module loads and its first call stops the process
        assert before.returncode == -signal.SIGILL, before.stderr


def test_the_check_is_skipped_on_request(sites: tuple[Path, Path]) -> None:
    """FLAGTREE_SKIP_CPU_CHECK=1 lets the import through (and the user meets the SIGILL the check prevents)."""
    _, patched = sites
    done = run_aarch64(
        "cortex-a76",
        str(PYTHON),
        "-S",
        "-c",
        CALL,
        env={"FLAGTREE_SKIP_CPU_CHECK": "1"},
        pythonpath=(patched,),
    )
    assert done.returncode == -signal.SIGILL, done.stderr
