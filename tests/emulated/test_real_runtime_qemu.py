"""flagtree-cpu's own runtime (``FLAGTREE_CPU_SRC``), built the way conda-forge builds, run under qemu-user.

The aarch64 runtime sources flagtree-cpu's ``third_party/cpu/CMakeLists.txt`` lists are cross-compiled by
Debian's aarch64 g++ for both tiers with conda-forge's aarch64 CPPFLAGS, CXXFLAGS and LDFLAGS
(tests/_conda_forge_flags.py: ``-fno-plt``, ``-O3``, ``-fstack-protector-strong``, ...) before each tier's own
flags, as CMake puts patch 0008's target options after ``CMAKE_CXX_FLAGS``, into a ``triton/_C`` laid out as
the package lays it out; recipe/runtime_manifest.py writes the baseline build's manifest, as build-flagtree.sh
does. Then:

- no function of the baseline build needs more than its floor (dotprod) unless the sources ask for an extension
  with an intrinsic of it, and loading it needs nothing;
- flagtree-doctor's ``load_runtime`` (patch flagtree-cpu/0001) picks the build on each CPU, and a few functions
  (``sdot_pack_weights`` + ``sdot_gemv_m1_prepacked``, ``swiglu_bf16``) give the same results from the
  baseline build on ``neoverse-n1`` and ``cortex-a76`` and from both builds on ``max`` with 128-bit SVE vectors,
  the integer GEMV exactly the product computed here;
- on ``cortex-a72`` (no dotprod) ``load_runtime`` refuses, naming what the CPU lacks.

``cpu_runtime.cpp``, triton-cpu's printing runtime, needs LLVM's headers and is left out (no TLE op calls it).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, require_emulator, require_libgomp, run_aarch64

from _conda_forge_flags import CPPFLAGS, CXXFLAGS, LDFLAGS
from _runtime_standin import SONAME, binutils, write_manifest
from _tools import require_executable, upstream_source
from flagtree_doctor.manifest import read_manifest
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME

pytestmark = pytest.mark.emulated

ARMV9_16 = "max,sve-default-vector-length=16"
# The extension each feature beyond the floor needs, as a source asks for it: an ACLE intrinsic or header, or a
# target attribute/pragma naming the extension.
ASKED = {
    "i8mm": r"\bv(?:us|su)?mmlaq_|\bvusdot|\bvsudot|\+i8mm",
    "bf16": r"\bvbf(?:dot|mmla|mlal|cvt)|\bbfloat16x|\+bf16",
    "asimdhp": r"\bfloat16x\d|\+fp16",
    "fphp": r"\bfloat16_t\b|\+fp16",
    "asimdfhm": r"\bvfml[as]l|\+fp16fml",
    "sve": r"arm_sve\.h|\bsv[a-z0-9_]+_[suf]\d+|\+sve",
    "sve2": r"arm_sve\.h|\+sve2",
}
RUN = """
import ctypes, json, sys
from pathlib import Path
from flagtree_doctor.cpu_check import UnsupportedCpuError, load_runtime

c_dir, build = Path(sys.argv[1]), sys.argv[2]
try:
    lib = load_runtime(c_dir / "libTritonCPURuntime.so") if build == "chosen" else ctypes.CDLL(
        str(c_dir / ("baseline/" if build == "baseline" else "") / "libTritonCPURuntime.so"))
except UnsupportedCpuError as exc:
    print(json.dumps({"refused": str(exc)}))
    sys.exit(0)
K, N = 64, 32
A = (ctypes.c_int8 * K)(*[(k * 7) % 23 - 11 for k in range(K)])
B = (ctypes.c_int8 * (K * N))(*[(i * 5) % 19 - 9 for i in range(K * N)])
packed = (ctypes.c_int8 * (K * N))()
C = (ctypes.c_int32 * N)()
i64 = ctypes.c_int64
lib.sdot_pack_weights(B, packed, i64(K), i64(N))
lib.sdot_gemv_m1_prepacked(A, packed, C, i64(K), i64(N), i64(N // 4))
L = 19  # four vectors of four and a tail of three
def bf16(x):
    return ctypes.c_uint32.from_buffer(ctypes.c_float(x)).value >> 16
gate = (ctypes.c_uint16 * L)(*[bf16((i - 9) / 4) for i in range(L)])
up = (ctypes.c_uint16 * L)(*[bf16((i % 5) / 2 - 1) for i in range(L)])
out = (ctypes.c_uint16 * L)()
lib.swiglu_bf16(gate, up, out, i64(L))
print(json.dumps({"gemv": list(C), "swiglu": list(out)}))
"""


def _sources(src: Path) -> list[Path]:
    """The runtime sources flagtree-cpu's CMakeLists.txt adds for aarch64."""
    cmake = (src / "third_party/cpu/CMakeLists.txt").read_text()
    block = cmake.split('if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")', 1)[1].split("endif()", 1)[0]
    found = [
        src / "third_party/cpu" / m
        for m in re.findall(r"\$\{CMAKE_CURRENT_SOURCE_DIR\}/(runtime/[\w.]+\.cpp)", block)
    ]
    assert found, "flagtree-cpu's CMakeLists.txt lists no aarch64 runtime source"
    return found


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """``triton/_C`` with both builds and the baseline one's manifest; the sources they were built from."""
    src = upstream_source("FLAGTREE_CPU_SRC")
    gxx = require_executable("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")
    require_emulator()
    require_libgomp()
    binutils()
    sources = _sources(src)
    c_dir = tmp_path_factory.mktemp("real-runtime") / "triton" / "_C"
    for runtime, folder in ((ARMV9_RUNTIME, c_dir), (BASELINE_RUNTIME, c_dir / "baseline")):
        objects = []
        for source in sources:
            objects.append(folder / "objects" / f"{source.stem}.o")
            objects[-1].parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([gxx, *CPPFLAGS, *CXXFLAGS, "-fopenmp", *runtime.flags, "-c", str(source), "-o",
                            str(objects[-1])], check=True)  # fmt: skip
        subprocess.run([gxx, "-shared", "-fopenmp", *LDFLAGS, f"-Wl,-soname,{SONAME}", *map(str, objects), "-o",
                        str(folder / "libTritonCPURuntime.so")], check=True)  # fmt: skip
    done = write_manifest(c_dir / BASELINE_RUNTIME.library, BASELINE_RUNTIME.march)
    assert done.returncode == 0, done.stderr
    return c_dir, sources


def test_the_baseline_build_needs_no_more_than_its_floor(runtime: tuple[Path, list[Path]]) -> None:
    c_dir, sources = runtime
    manifest = read_manifest(c_dir / str(BASELINE_RUNTIME.manifest))
    text = "\n".join(source.read_text() for source in sources)
    asked = {feature for feature, pattern in ASKED.items() if re.search(pattern, text)}
    beyond = {
        name: sorted(needs.features - BASELINE_RUNTIME.features - asked)
        for name, needs in manifest.functions.items()
        if needs.features - BASELINE_RUNTIME.features - asked
    }
    assert beyond == {}, f"functions that need more than the floor with no source asking for it: {beyond}"
    assert manifest.load.features == frozenset()
    assert {"sdot_gemv_m1_prepacked", "sdot_pack_weights", "swiglu_bf16"} <= set(manifest.functions)


def _run(cpu: str, c_dir: Path, build: str) -> dict[str, object]:
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", RUN, str(c_dir), build)
    assert done.returncode == 0, (cpu, build, done.stderr[-2000:])
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_each_build_gives_the_same_results_on_each_cpu(runtime: tuple[Path, list[Path]]) -> None:
    c_dir, _ = runtime
    results = {
        ("neoverse-n1", "chosen"): _run("neoverse-n1", c_dir, "chosen"),
        ("cortex-a76", "chosen"): _run("cortex-a76", c_dir, "chosen"),
        (ARMV9_16, "chosen"): _run(ARMV9_16, c_dir, "chosen"),
        (ARMV9_16, "baseline"): _run(ARMV9_16, c_dir, "baseline"),
        (ARMV9_16, "armv9"): _run(ARMV9_16, c_dir, "armv9"),
    }
    first = results[("neoverse-n1", "chosen")]
    assert all(result == first for result in results.values()), results
    k, n = 64, 32
    a = [(i * 7) % 23 - 11 for i in range(k)]
    b = [(i * 5) % 19 - 9 for i in range(k * n)]
    assert first["gemv"] == [sum(a[i] * b[i * n + j] for i in range(k)) for j in range(n)]
    assert len(first["swiglu"]) == 19 and any(first["swiglu"])  # type: ignore[arg-type]


def test_below_dotprod_the_loader_refuses_by_name(runtime: tuple[Path, list[Path]]) -> None:
    c_dir, _ = runtime
    result = _run("cortex-a72", c_dir, "chosen")
    assert "the CPU lacks asimddp (baseline runtime: -march=armv8.2-a+dotprod)" in str(result["refused"])
