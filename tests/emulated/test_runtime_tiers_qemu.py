"""The two runtimes under qemu-user: which one each CPU runs, what each of its functions needs, the loaders.

The stand-in runtime (tests/emulated/standin_runtime.c: dotprod, i8mm, bf16, fp16, an SVE loop, i8mm reached
through a local function, an OpenMP region and the PLT) is cross-compiled the two ways patches 0008 and 0010 build
the real one, into a stand-in ``triton/_C`` (``libTritonCPURuntime.so``, ``baseline/libTritonCPURuntime.so``, one
soname, and the manifest recipe/runtime_manifest.py writes from the baseline one's instructions). On each CPU:

- every function of the baseline build, called with no check, runs exactly where the manifest says every core
  has what it needs, and stops with SIGILL elsewhere: the manifest checked against the instructions;
- with ``FLAGTREE_SRC``, FlagTree's driver with our series (patch 0009) loads kernels that call each function,
  linked with ``-lTritonCPURuntime`` as the JIT links them: the CPU runs its tier's build (the kernel binds to
  the one the driver preloaded, whatever it was linked against), and a kernel calling a function the CPU cannot
  run raises the CPU check's error naming the function and the missing feature, never SIGILL; upstream's driver
  binds the Armv9 build and dies with SIGILL;
- the patched compiler.py (0012) lowers for what every core has and gives each CPU its own kernel cache key,
  where upstream's key is the same everywhere; runtime/build.py (0011) assembles ``kernel.s`` with flags the
  assembler refuses an instruction the CPU lacks with; with ``FLAGTREE_CPU_SRC``, neon.py (flagtree-cpu 0002)
  compiles the TLE NEON objects, whose real source is then checked to need only what the CPU has.

What stands in: ``triton`` is a few files around the one being tested (libtriton, LLVM and the JIT are FlagTree's
build); LLVM's host features are a stand-in claiming every extension, so that the filtering shows.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from _qemu import PYTHON, require_libgomp, run_aarch64

from _conda_forge_flags import CFLAGS, CPPFLAGS, LDFLAGS
from _runtime_standin import FLAGS, STANDIN_C, TIER_MARK, binutils, build, write_manifest
from _tools import aarch64_gcc, upstream_source
from flagtree_doctor.target import ARMV9_KERNEL_FLAGS, ARMV9_TLE_NEON_MARCH, BASELINE_RUNTIME
from test_patches import apply_series, series_patches

pytestmark = pytest.mark.emulated
CONDA_FORGE_FLAGS = (*CPPFLAGS, *CFLAGS, *LDFLAGS)

ARMV9_16 = "max,sve-default-vector-length=16"  # 128-bit SVE: the Armv9 tier
MAX_256 = "max,sve-default-vector-length=32"  # Armv9's features, 256-bit vectors: baseline
# qemu CPU -> the tier flagtree-doctor picks (None: refused, no dotprod).
TIERS = {
    "cortex-a76": "baseline",
    "neoverse-n1": "baseline",
    "a64fx": None,
    MAX_256: "baseline",
    ARMV9_16: "armv9",
}

# Each stand-in function, called as a kernel or the caller calls it, and its result (computed here).
A = [(i % 13) - 6 for i in range(32)]
B = [(i % 5) - 2 for i in range(32)]


def _dot(x: list[int], y: list[int]) -> int:
    return sum(p * q for p, q in zip(x, y, strict=True))


def _tile(a: list[int], b: list[int]) -> int:  # the sum of the 2x2 SMMLA tile of a (2x8) times b (2x8)^T
    return _dot(
        [p + q for p, q in zip(a[:8], a[8:16], strict=True)],
        [p + q for p, q in zip(b[:8], b[8:16], strict=True)],
    )


CALLS: dict[str, tuple[str, int | None]] = {
    "standin_dotprod": ("standin_dotprod(A, B, 5)", 5 + _dot(A[:16], B[:16])),
    "standin_i8mm": ("standin_i8mm(A, B)", _tile(A, B)),
    "standin_bf16": ("standin_bf16(H1, H2)", 16000),  # 8 x 1.0 x 2.0
    "standin_fp16": ("standin_fp16(F1, F2)", 6000),  # 8 x (0.5 + 0.25)
    "standin_sve_loop": (
        "standin_sve_loop(OUT, IN, 64)",
        sum(v * 3 if v > 0 else -v for v in range(-32, 32)),
    ),
    "standin_omp_i8mm": ("standin_omp_i8mm(A, B)", _tile(A, B) + _tile(A[16:], B[16:])),
    "standin_calls_i8mm": ("standin_calls_i8mm(A, B)", 1 + _tile(A, B)),
    "standin_plain": ("standin_plain(7)", 22),
    "standin_tier": ("standin_tier()", None),  # the build's mark
}
DECLARATIONS = f"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
int32_t standin_dotprod(const int8_t *, const int8_t *, int32_t);
int32_t standin_i8mm(const int8_t *, const int8_t *);
int32_t standin_bf16(const uint16_t *, const uint16_t *);
int32_t standin_fp16(const float *, const float *);
int32_t standin_sve_loop(int32_t *, const int32_t *, int);
int32_t standin_omp_i8mm(const int8_t *, const int8_t *);
int32_t standin_calls_i8mm(const int8_t *, const int8_t *);
int32_t standin_plain(int32_t);
int32_t standin_tier(void);
static const int8_t A[32] = {{{", ".join(map(str, A))}}};
static const int8_t B[32] = {{{", ".join(map(str, B))}}};
static const uint16_t H1[8] = {{{", ".join(["0x3f80"] * 8)}}}, H2[8] = {{{", ".join(["0x4000"] * 8)}}};
static const float F1[8] = {{{", ".join(["0.5f"] * 8)}}}, F2[8] = {{{", ".join(["0.25f"] * 8)}}};
static const int32_t IN[64] = {{{", ".join(str(v) for v in range(-32, 32))}}};
static int32_t OUT[64];
"""


def caller_source() -> str:
    """A program that calls the function its argument names, with the library loaded at start-up, unchecked."""
    branches = "".join(f'  if (!strcmp(argv[1], "{n}")) {{ printf("%d\\n", {call}); return 0; }}\n'
                       for n, (call, _) in CALLS.items())  # fmt: skip
    return DECLARATIONS + f"int main(int argc, char **argv) {{\n  (void)argc;\n{branches}  return 2;\n}}\n"


def kernel_source(name: str) -> str:
    """A kernel as the JIT makes one: a shared object calling a runtime function it takes from the runtime."""
    return DECLARATIONS + f"int32_t kernel_{name}(void) {{ return {CALLS[name][0]}; }}\n"


def _site(site: Path, *extra: str) -> Path:
    """A stand-in ``triton`` package with ``_C``: both builds (``extra``: flags after the runtime's own), the
    baseline one's manifest, a libsleef."""
    require_libgomp()
    binutils()
    c_dir = site / "triton" / "_C"
    for tier, flags in FLAGS.items():
        folder = c_dir if tier == "armv9" else c_dir / "baseline"
        build(
            STANDIN_C, folder / "libTritonCPURuntime.so", flags, f"-DSTANDIN_TIER={TIER_MARK[tier]}", *extra
        )
    done = write_manifest(c_dir / BASELINE_RUNTIME.library, BASELINE_RUNTIME.march)
    assert done.returncode == 0, done.stderr
    (site / "sleef.c").write_text("int standin_sleef;\n")
    subprocess.run([aarch64_gcc(), "-shared", "-fPIC", str(site / "sleef.c"), "-o", str(c_dir / "libsleef.so")],
                   check=True)  # fmt: skip
    return site


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both builds with upstream's flags (-O3 -fPIC, OpenMP)."""
    return _site(tmp_path_factory.mktemp("tiers") / "site")


@pytest.fixture(scope="module")
def conda_forge_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both builds with conda-forge's aarch64 CPPFLAGS, CFLAGS and LDFLAGS after them (-fno-plt: the call of
    another exported function goes through the GOT)."""
    return _site(tmp_path_factory.mktemp("tiers-cf") / "site", *CONDA_FORGE_FLAGS)


def _features(cpu: str) -> frozenset[str]:
    code = "from flagtree_doctor.capabilities import live_capabilities; print(' '.join(live_capabilities().features))"
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", code)
    assert done.returncode == 0, done.stderr
    return frozenset(done.stdout.split())


@pytest.mark.parametrize("cpu", sorted(TIERS))
def test_each_function_runs_exactly_where_the_manifest_says(cpu: str, runtime: Path, tmp_path: Path) -> None:
    """Called with no check: a function runs where every core has what the manifest says it needs (and gives
    the right result), and stops with SIGILL elsewhere. The manifest was read from the binary alone."""
    _functions_run_where_the_manifest_says(cpu, runtime, tmp_path)


@pytest.mark.parametrize("cpu", sorted(TIERS))
def test_under_conda_forges_flags_too(cpu: str, conda_forge_runtime: Path, tmp_path: Path) -> None:
    """The same with the builds conda-forge's flags make: no function is charged for a call it does not make,
    and none runs where the manifest says it cannot."""
    _functions_run_where_the_manifest_says(cpu, conda_forge_runtime, tmp_path)


def _functions_run_where_the_manifest_says(cpu: str, runtime: Path, tmp_path: Path) -> None:
    c_dir = runtime / "triton" / "_C"
    manifest = json.loads((c_dir / str(BASELINE_RUNTIME.manifest)).read_text())
    (tmp_path / "caller.c").write_text(caller_source())
    caller = tmp_path / "caller"
    subprocess.run([aarch64_gcc(), str(tmp_path / "caller.c"), "-o", str(caller), f"-L{c_dir / 'baseline'}",
                    "-lTritonCPURuntime", f"-Wl,-rpath,{c_dir / 'baseline'}"], check=True)  # fmt: skip
    features = _features(cpu)
    for name, (_, result) in CALLS.items():
        runs = set(manifest["functions"][name]["needs"]) <= features
        done = run_aarch64(cpu, str(caller), name)
        if runs:
            expected = TIER_MARK["baseline"] if result is None else result
            assert (done.returncode, done.stdout) == (0, f"{expected}\n"), (name, done.stderr)
        else:
            assert done.returncode == -signal.SIGILL, (name, done.returncode, done.stdout)


# ---- FlagTree's driver with patch 0009 ----------------------------------------------------------------------

STAND_IN = {
    "triton/__init__.py": "",
    "triton/_C/__init__.py": "",
    "triton/_C/libtriton.py": "llvm = None\n",
    "triton/backends/__init__.py": "",
    "triton/backends/driver.py": "class DriverBase:\n    def __init__(self):\n        pass\n",
    "triton/backends/compiler.py": (
        "from collections import namedtuple\nGPUTarget = namedtuple('GPUTarget', 'backend arch warp_size')\n"
        "class BaseBackend:\n    def __init__(self, target):\n        self.target = target\n"
    ),
    "triton/backends/cpu/__init__.py": "",
}
LAUNCH = """
import ctypes, sys
from triton.backends.cpu.driver import CPUUtils
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[1][len("lib"):-len(".so")]
    try:
        lib, function, _, _ = CPUUtils().load_binary(name, open(path, "rb").read(), 0, 0)
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
        continue
    print(f"{name}: {ctypes.CFUNCTYPE(ctypes.c_int32)(function)()}", flush=True)
"""


def _package(runtime: Path, tmp: Path, patched: dict[str, Path]) -> Path:
    """A copy of the stand-in package with FlagTree's files (``patched``: package path -> file) in it."""
    site = tmp / "site"
    subprocess.run(["cp", "-a", str(runtime), str(site)], check=True)
    for relative, text in STAND_IN.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    for relative, source in patched.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(source.read_text())
    return site


@pytest.fixture(scope="module")
def kernels(runtime: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kernel linked as compiler.py's make_so links one: -lTritonCPURuntime from _C (the Armv9 build), no
    rpath: what it binds to at load is the driver's doing."""
    folder = tmp_path_factory.mktemp("kernels")
    found = {}
    for name in CALLS:
        (folder / f"{name}.c").write_text(kernel_source(name))
        found[name] = folder / f"libkernel_{name}.so"
        subprocess.run([aarch64_gcc(), "-O2", "-fPIC", "-shared", str(folder / f"{name}.c"), "-o", str(found[name]),
                        f"-L{runtime / 'triton' / '_C'}", "-lTritonCPURuntime"], check=True)  # fmt: skip
    return found


@pytest.fixture(scope="module")
def drivers(runtime: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"patched": the package with FlagTree's driver and our series, "upstream": without patch 0009}."""
    src = upstream_source("FLAGTREE_SRC")
    tmp = tmp_path_factory.mktemp("drivers")
    series = series_patches("flagtree")
    sites = {}
    for label, patches in (
        ("patched", series),
        ("upstream", [p for p in series if not p.name.startswith("0009-")]),
    ):
        apply_series(patches, src, tmp / label / "flagtree")
        driver = tmp / label / "flagtree" / "third_party/cpu/backend/driver.py"
        sites[label] = _package(runtime, tmp / label, {"triton/backends/cpu/driver.py": driver})
    return sites


def _launch(cpu: str, site: Path, kernels: list[Path]) -> dict[str, str]:
    done = run_aarch64(cpu, str(PYTHON), "-S", "-c", LAUNCH, *map(str, kernels), pythonpath=(site,))
    assert done.returncode == 0, done.stderr
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


@pytest.mark.parametrize("cpu", sorted(TIERS))
def test_the_driver_runs_the_tiers_build_and_refuses_by_name(
    cpu: str, runtime: Path, kernels: dict[str, Path], drivers: dict[str, Path]
) -> None:
    features = _features(cpu)
    manifest = json.loads((runtime / "triton/_C" / str(BASELINE_RUNTIME.manifest)).read_text())
    seen = _launch(cpu, drivers["patched"], list(kernels.values()))
    tier = TIERS[cpu]
    for name, (_, result) in CALLS.items():
        outcome = seen[f"kernel_{name}"]
        if tier is None:
            assert outcome.startswith("UnsupportedCpuError: flagtree-cpu cannot run kernels on this CPU: the CPU lacks "
                                      "asimddp (baseline runtime: -march=armv8.2-a+dotprod)"), outcome  # fmt: skip
            continue
        missing = sorted(set(manifest["functions"][name]["needs"]) - features)
        if tier == "baseline" and missing:
            assert outcome.startswith(
                f"UnsupportedCpuError: a TLE op (kernel kernel_{name}) cannot run on this CPU: it calls the runtime "
                f"function {name}, which needs {', '.join(missing)} ("
            ), outcome
        else:  # the tier's build: its mark from standin_tier, the computed value from the others
            assert outcome == str(TIER_MARK[tier] if result is None else result), (name, outcome)


def test_upstreams_driver_binds_the_armv9_build_and_dies(
    runtime: Path, kernels: dict[str, Path], drivers: dict[str, Path]
) -> None:
    """Without patch 0009, on a Cortex-A76, the kernel binds the Armv9 build (9), and its SVE loop is SIGILL."""
    assert _launch("cortex-a76", drivers["upstream"], [kernels["standin_tier"]]) == {
        "kernel_standin_tier": "9"
    }
    done = run_aarch64("cortex-a76", str(PYTHON), "-S", "-c", LAUNCH, str(kernels["standin_sve_loop"]),
                       pythonpath=(drivers["upstream"],))  # fmt: skip
    assert done.returncode == -signal.SIGILL, done.stderr


# ---- compiler.py (patch 0012): lowering and the kernel cache key --------------------------------------------

LIBTRITON = """
import types

class _Passes:
    def __init__(self):
        self.added = []
    def __getattr__(self, name):
        if name.startswith("add_"):
            return lambda *args: self.added.append(name)
        raise AttributeError(name)

ttcpuir = _Passes()
ttcpuir.VecLib = types.SimpleNamespace(__members__={})
ttcpuir.Ukernels = types.SimpleNamespace(__members__={})
cpu = types.SimpleNamespace(passes=types.SimpleNamespace(ttcpuir=ttcpuir), enable_amx=lambda: False)
ir = types.SimpleNamespace(pass_manager=lambda context: types.SimpleNamespace(run=lambda mod: None))
passes = types.SimpleNamespace(common=_Passes(), ttir=_Passes(), convert=_Passes(), llvmir=_Passes())
# LLVM's host features, claiming every extension the lowering tests: what survives is flagtree-doctor's doing.
llvm = types.SimpleNamespace(
    get_cpu_name=lambda: "generic",
    get_cpu_features=lambda: {"neon", "fp-armv8", "dotprod", "fullfp16", "i8mm", "bf16", "sve", "sve2"},
)
"""
COMPILE = """
import json, types
from triton.backends.compiler import GPUTarget
from triton.backends.cpu.compiler import CPUBackend
from triton._C.libtriton import cpu
backend = CPUBackend(GPUTarget("cpu", "aarch64", 0))
backend.make_tttcir(types.SimpleNamespace(context=None), {}, backend.parse_options({}))
dots = [name for name in cpu.passes.ttcpuir.added if name.startswith("add_convert_dot_to_") or name == "add_convert_dot_product"]
print(json.dumps({"hash": backend.hash(), "dots": dots}))
"""


@pytest.fixture(scope="module")
def compilers(runtime: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"patched", "upstream" (without 0012)}: compiler.py and the patched driver in the stand-in package."""
    src = upstream_source("FLAGTREE_SRC")
    tmp = tmp_path_factory.mktemp("compilers")
    series = series_patches("flagtree")
    sites = {}
    for label, patches in (
        ("patched", series),
        ("upstream", [p for p in series if not p.name.startswith("0012-")]),
    ):
        tree = tmp / label / "flagtree"
        apply_series(patches, src, tree)  # copies only the files the patches touch: the others are upstream's

        def patched(relative: str, tree: Path = tree) -> Path:
            return tree / relative if (tree / relative).exists() else src / relative

        sites[label] = _package(runtime, tmp / label, {
            "triton/backends/cpu/driver.py": patched("third_party/cpu/backend/driver.py"),
            "triton/backends/cpu/compiler.py": patched("third_party/cpu/backend/compiler.py"),
        })  # fmt: skip
        (sites[label] / "triton/_C/libtriton.py").write_text(LIBTRITON)
    return sites


# qemu CPU -> the dot lowerings the patched compiler.py adds for it: BFDOT only with bf16 on every core, the SVE2
# i8mm conversion only on the Armv9 tier (128-bit vectors).
DOTS = {
    "cortex-a76": [],
    "neoverse-n1": [],
    "a64fx": [],
    MAX_256: ["add_convert_dot_product"],
    ARMV9_16: ["add_convert_dot_product", "add_convert_dot_to_sve2_i8mm"],
}


def test_kernels_are_lowered_for_each_cpu_and_cached_apart(compilers: dict[str, Path]) -> None:
    seen = {}
    for cpu in sorted(DOTS):
        done = run_aarch64(cpu, str(PYTHON), "-S", "-c", COMPILE, pythonpath=(compilers["patched"],))
        assert done.returncode == 0, done.stderr
        seen[cpu] = json.loads(done.stdout)
        assert seen[cpu]["dots"] == DOTS[cpu], cpu
    # CPUs that differ in what every core has, or in tier, never share a key (a kernel cached on one is never
    # found on another); the Cortex-A76 and Neoverse N1 models have the same features here, and share one
    # (real LLVM's CPU name, in the key too, tells them apart; the stand-in LLVM says "generic").
    facts = {cpu: (_features(cpu), TIERS[cpu]) for cpu in DOTS}
    for cpu, other in ((a, b) for a in DOTS for b in DOTS if a < b):
        assert (seen[cpu]["hash"] == seen[other]["hash"]) == (facts[cpu] == facts[other]), (cpu, other)
    assert len({report["hash"] for report in seen.values()}) == len(DOTS) - 1
    again = run_aarch64("cortex-a76", str(PYTHON), "-S", "-c", COMPILE, pythonpath=(compilers["patched"],))
    assert json.loads(again.stdout)["hash"] == seen["cortex-a76"]["hash"]
    assert "-baseline-" in seen["cortex-a76"]["hash"] and "-armv9-" in seen[ARMV9_16]["hash"]


def test_upstreams_key_is_the_same_on_every_cpu(compilers: dict[str, Path]) -> None:
    """Why 0012: upstream's backend key is platform.machine(), and it lowers BFDOT and SVE2 i8mm anywhere LLVM
    says so (qemu-user's /proc/cpuinfo is the host's, so its Features supplement adds nothing here)."""
    keys = set()
    for cpu in ("cortex-a76", MAX_256, ARMV9_16):
        done = run_aarch64(cpu, str(PYTHON), "-S", "-c", COMPILE, pythonpath=(compilers["upstream"],))
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        keys.add(report["hash"])
        assert report["dots"] == ["add_convert_dot_product", "add_convert_dot_to_sve2_i8mm"]
    assert keys == {"aarch64"}


# ---- runtime/build.py (patch 0011): kernel.s is assembled for what the CPU runs -----------------------------

BUILD = """
import json, subprocess, sys
from triton.runtime import build
calls = []
build.subprocess.check_call = lambda argv, **kw: calls.append(argv)
open(sys.argv[1], "w").write("")
build._build("kernel", sys.argv[1], sys.argv[2], [], [], [])
print(json.dumps([a for a in calls[0] if a.startswith(("-march", "-msve"))]))
"""
# qemu CPU -> the flags kernel.s gets: upstream's on the Armv9 tier, else dotprod and what every core has.
KERNEL_FLAGS = {
    "cortex-a76": ["-march=armv8.2-a+dotprod+fp16"],
    "neoverse-n1": ["-march=armv8.2-a+dotprod+fp16"],
    "a64fx": ["-march=armv8.2-a+dotprod+fp16+sve"],
    MAX_256: ["-march=armv8.2-a+dotprod+fp16+bf16+i8mm+sve+sve2"],
    ARMV9_16: list(ARMV9_KERNEL_FLAGS),
}
I8MM_KERNEL = "\t.text\n\t.globl\tkernel\nkernel:\n\tsmmla\tv0.4s, v1.16b, v2.16b\n\tret\n"


def test_kernel_s_is_assembled_for_what_the_cpu_runs(tmp_path: Path) -> None:
    """The flags for each CPU (patched build.py under qemu); with them, the assembler refuses an i8mm kernel on a
    CPU without i8mm and takes it on one with (Debian's cross gcc assembles, as $CC does on the machine)."""
    src = upstream_source("FLAGTREE_SRC")
    require_libgomp()
    tree = tmp_path / "flagtree"
    apply_series(series_patches("flagtree"), src, tree)
    site = tmp_path / "site"
    for relative in ("triton/__init__.py", "triton/runtime/__init__.py", "triton/backends/cpu/__init__.py"):
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text("")
    (site / "triton/runtime/build.py").write_text((tree / "python/triton/runtime/build.py").read_text())
    (tmp_path / "kernel.s").write_text(I8MM_KERNEL)
    for cpu, expected in KERNEL_FLAGS.items():
        done = run_aarch64(
            cpu, str(PYTHON), "-S", "-c", BUILD, str(tmp_path / "k.s"), str(tmp_path), pythonpath=(site,)
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected, cpu
        assembled = subprocess.run([aarch64_gcc(), "-c", *expected, str(tmp_path / "kernel.s"), "-o",
                                    str(tmp_path / "kernel.o")], capture_output=True, text=True, check=False)  # fmt: skip
        has_i8mm = "i8mm" in _features(cpu)
        assert (assembled.returncode == 0) == has_i8mm, (cpu, assembled.stderr)


# ---- neon.py (flagtree-cpu patch 0002): the TLE NEON objects follow the CPU --------------------------------

NEON = """
import json, os, sys
from triton.language.extra.cpu import neon
calls = []
neon.subprocess.check_call = lambda argv, **kw: calls.append(argv)
os.environ["CC"] = "cc"
neon.compile_c_to_object(neon._SDOT_GEMV_SOURCE, [], cache=False)
source = [a for a in calls[0] if a.endswith(".c")][0]
obj = calls[0][calls[0].index("-o") + 1]
print(json.dumps({"march": [a for a in calls[0] if a.startswith("-march")], "source": source, "object": obj}))
"""
NEON_MARCH = {
    "cortex-a76": "armv8.2-a+dotprod",
    "neoverse-n1": "armv8.2-a+dotprod",
    MAX_256: "armv8.2-a+dotprod+i8mm+bf16",
    ARMV9_16: ARMV9_TLE_NEON_MARCH,
}


def test_the_tle_neon_objects_need_only_what_the_cpu_has(tmp_path: Path) -> None:
    """neon.py's real source, compiled with the -march the patched neon.py passes on each CPU: the manifest of the
    result (its functions, through their OpenMP regions) needs nothing that CPU lacks; the object's place in the
    persistent cache (one TMPDIR for every CPU here, as a shared /tmp or image would be) follows the -march, so an
    object compiled for one CPU is not reused on another."""
    src = upstream_source("FLAGTREE_CPU_SRC")
    require_libgomp()
    tree = tmp_path / "flagtree-cpu"
    apply_series(series_patches("flagtree-cpu"), src, tree)
    site = tmp_path / "site"
    package = site / "triton/language/extra/cpu"
    package.mkdir(parents=True)
    for folder in (site / "triton", site / "triton/language", site / "triton/language/extra", package):
        (folder / "__init__.py").write_text("")
    (package / "neon.py").write_text((tree / "third_party/cpu/language/cpu/neon.py").read_text())
    objects: dict[str, set[str]] = {}
    for cpu, march in NEON_MARCH.items():
        done = run_aarch64(
            cpu, str(PYTHON), "-S", "-c", NEON, pythonpath=(site,), env={"TMPDIR": str(tmp_path)}
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["march"] == [f"-march={march}"], cpu
        objects.setdefault(march, set()).add(report["object"])
        library = build(Path(report["source"]), tmp_path / cpu / "libtle_neon.so", (f"-march={march}",))
        written = write_manifest(library, march)
        assert written.returncode == 0, written.stderr
        manifest = json.loads(library.with_name("libtle_neon.isa.json").read_text())
        assert set(manifest["functions"]) >= {"tle_sdot_gemv_m1", "tle_sdot_gemv_m1_fused_bf16"}
        needs = {feature for entry in manifest["functions"].values() for feature in entry["needs"]}
        assert needs <= _features(cpu), (cpu, needs)
    # One object per -march (cortex-a76 and neoverse-n1 share one), none shared between two.
    assert all(len(paths) == 1 for paths in objects.values()), objects
    # (max at 256 bits and the Armv9 tier share upstream's armv8.2-a+dotprod+i8mm+bf16)
    assert len({path for paths in objects.values() for path in paths}) == len(objects) == 2
