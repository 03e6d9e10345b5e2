"""The runtime each CPU loads, what the JIT compiles for it, and the loaders' refusals, in the default tier.

The CPUs are recorded capabilities (features every core has, the SVE vector length), so the verdicts do not
depend on the machine the tests run on; the same code runs as aarch64 code under qemu in
tests/emulated/test_runtime_tiers_qemu.py. The loaders' refusals are shown on shared objects of this machine
(a kernel's undefined symbols and a ctypes load do not depend on the CPU they are for).
"""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import pytest

from _tools import require_executable
from flagtree_doctor import capabilities, cpu_check
from flagtree_doctor.capabilities import Capabilities, live_capabilities
from flagtree_doctor.cpu import parse_cpuinfo, tree_capabilities
from flagtree_doctor.cpu_check import UnsupportedCpuError
from flagtree_doctor.manifest import ManifestError
from flagtree_doctor.model import System
from flagtree_doctor.target import ARMV9_KERNEL_FLAGS, ARMV9_RUNTIME, ARMV9_TLE_NEON_MARCH, BASELINE_RUNTIME
from flagtree_doctor.tier import KernelTarget, choose_tier

ARMV9 = ARMV9_RUNTIME.features | {"asimdfhm"}
ARMV82 = frozenset({"asimd", "asimddp", "asimdhp", "fphp"})
GRAVITON3 = ARMV9 - {"sve2"}
A64FX = frozenset({"asimd", "asimdhp", "fphp", "sve"})


def caps(features: frozenset[str], bits: int | None = None, machine: str = "aarch64") -> Capabilities:
    return Capabilities(machine=machine, features=features, source="recorded", sve_vector_bits=bits)


@pytest.mark.parametrize(
    ("capabilities", "tier", "why_not_armv9"),
    [
        (caps(ARMV9, 128), "armv9", []),  # Neoverse N2/V2, Cortex-A720: every requirement on every core
        (caps(GRAVITON3, 256), "baseline", ["the CPU lacks sve2 (armv9 runtime"]),
        (caps(ARMV82), "baseline", ["the CPU lacks bf16, i8mm, sve, sve2, svebf16, svei8mm (armv9 runtime"]),
        (caps(ARMV9, 512), "baseline", ["SVE vectors are 512 bits; the Armv9 runtime assumes 128 bits"]),
        (caps(ARMV9, 256), "baseline", ["SVE vectors are 256 bits"]),
        (caps(ARMV9, None), "baseline", ["SVE vectors are unknown"]),  # a tree without its vector length
        (
            caps(A64FX, 512),
            None,
            ["the CPU lacks asimddp, bf16, i8mm, sve2, svebf16, svei8mm (armv9 runtime"],
        ),
        (caps(frozenset(), machine="x86_64"), None, ["this machine is x86_64, not aarch64"]),
    ],
)
def test_the_tier_of_each_cpu(capabilities: Capabilities, tier: str | None, why_not_armv9: list[str]) -> None:
    choice = choose_tier(capabilities)
    assert choice.tier == tier
    assert len(choice.not_armv9) == len(why_not_armv9)
    assert all(
        reason.startswith(start) for reason, start in zip(choice.not_armv9, why_not_armv9, strict=True)
    )
    assert bool(choice.blockers) == (tier is None)


def test_a_feature_one_core_lacks_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live: the hwcaps, intersected with every core's Features line where /proc/cpuinfo has them."""
    hwcap = sum(1 << b for n, b in capabilities.HWCAP_BITS.items() if n in ARMV9)
    hwcap2 = sum(1 << b for n, b in capabilities.HWCAP2_BITS.items() if n in ARMV9)
    monkeypatch.setattr(capabilities.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(capabilities, "live_hwcaps", lambda: (hwcap, hwcap2))
    monkeypatch.setattr(capabilities, "live_sve_vector_bits", lambda: 128)
    cpuinfo = tmp_path / "cpuinfo"
    line = "Features\t: fp " + " ".join(sorted(ARMV9))
    cpuinfo.write_text(f"processor\t: 0\n{line}\n\nprocessor\t: 1\n{line.replace(' i8mm', '')}\n")
    found = live_capabilities(cpuinfo)
    assert found.features == ARMV9 - {"i8mm"}
    assert found.source.endswith(f"and the Features of all 2 processors in {cpuinfo}")
    assert choose_tier(found).tier == "baseline"
    # No aarch64 Features lines (qemu-user shows the host's /proc/cpuinfo), or none to read: the hwcaps alone.
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    assert live_capabilities(cpuinfo).features == ARMV9
    assert live_capabilities(tmp_path / "missing").features == ARMV9


def test_a_recorded_tree_is_judged_by_every_core(tmp_path: Path) -> None:
    """The doctor's --root tree: the features every processor lists, not the first one's."""
    line = "Features\t: fp " + " ".join(sorted(ARMV9))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        f"processor\t: 0\n{line}\n\nprocessor\t: 1\n{line.replace(' i8mm', '')}\n"
    )
    (tmp_path / "proc/sys/abi").mkdir(parents=True)
    (tmp_path / "proc/sys/abi/sve_default_vector_length").write_text("16\n")
    system = System.from_root(tmp_path)
    found = tree_capabilities(system, parse_cpuinfo(system.read_text("/proc/cpuinfo") or ""))
    assert found.features == ARMV9 - {"i8mm"}
    assert choose_tier(found).tier == "baseline"


def test_what_the_jit_compiles_for() -> None:
    armv9 = KernelTarget(choice=choose_tier(caps(ARMV9, 128)))
    assert armv9.assembler_flags == ARMV9_KERNEL_FLAGS  # upstream's runtime/build.py, unchanged
    assert armv9.tle_neon_march == ARMV9_TLE_NEON_MARCH  # upstream's neon.py, unchanged
    graviton3 = KernelTarget(choice=choose_tier(caps(GRAVITON3, 256)))
    assert graviton3.assembler_flags == ("-march=armv8.2-a+dotprod+fp16+bf16+i8mm+sve",)
    assert graviton3.tle_neon_march == "armv8.2-a+dotprod+i8mm+bf16"
    pi5 = KernelTarget(choice=choose_tier(caps(ARMV82)))
    assert pi5.assembler_flags == ("-march=armv8.2-a+dotprod+fp16",)
    assert pi5.tle_neon_march == "armv8.2-a+dotprod"
    assert len({armv9.key, graviton3.key, pi5.key}) == 3
    # Two CPUs of the baseline tier without SVE, one with i8mm and bf16 (Apple M2 under Linux), one without.
    m2 = KernelTarget(choice=choose_tier(caps(ARMV82 | {"i8mm", "bf16"})))
    assert m2.choice.tier == pi5.choice.tier == "baseline" and m2.key != pi5.key


def test_the_lowering_sees_what_every_core_has() -> None:
    """Upstream's compiler.py added i8mm and bf16 to LLVM's features from one Features line; on the Armv9 tier
    the result is the same, elsewhere what some core lacks is gone."""
    llvm = {"neon", "fp-armv8", "dotprod", "fullfp16", "sve", "sve2", "crc"}
    armv9 = KernelTarget(choice=choose_tier(caps(ARMV9, 128)))
    assert armv9.llvm_features(set(llvm)) == llvm | {"i8mm", "bf16"}
    pi5 = KernelTarget(choice=choose_tier(caps(ARMV82)))
    assert pi5.llvm_features(set(llvm)) == {"neon", "fp-armv8", "dotprod", "fullfp16", "crc"}


# ---- the loaders' refusals ----------------------------------------------------------------------------------


def manifest(c_dir: Path, needs: dict[str, list[str]], load: list[str] = ()) -> Path:
    path = c_dir / str(BASELINE_RUNTIME.manifest)
    path.parent.mkdir(parents=True, exist_ok=True)
    functions = {name: {"needs": value, "evidence": dict.fromkeys(value, f"smmla v0.4s (in {name})")}
                 for name, value in needs.items()}  # fmt: skip
    document = {"schema_version": 1, "library": "libTritonCPURuntime.so", "march": BASELINE_RUNTIME.march,
                "load": {"needs": list(load), "evidence": {}}, "functions": functions}  # fmt: skip
    path.write_text(json.dumps(document))
    return path


def shared_object(tmp: Path, name: str, source: str) -> Path:
    gcc = require_executable("gcc", "gcc")
    (tmp / f"{name}.c").write_text(source)
    subprocess.run(
        [gcc, "-shared", "-fPIC", str(tmp / f"{name}.c"), "-o", str(tmp / f"{name}.so")], check=True
    )
    return tmp / f"{name}.so"


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch):
    """Make the live CPU the one given."""

    def use(capabilities: Capabilities) -> None:
        monkeypatch.setattr(cpu_check, "live_capabilities", lambda: capabilities)

    return use


def test_a_kernel_calling_a_function_the_cpu_cannot_run_is_refused_by_name(tmp_path: Path, on) -> None:
    c_dir = tmp_path / "_C"
    manifest(c_dir, {"fused_mlp_bf16": ["asimddp", "i8mm"], "swiglu_bf16": []})
    kernel = shared_object(
        tmp_path, "kernel", "void fused_mlp_bf16(void); void k(void) { fused_mlp_bf16(); }"
    )
    plain = shared_object(tmp_path, "plain", "void swiglu_bf16(void); void k(void) { swiglu_bf16(); }")
    on(caps(ARMV82))
    with pytest.raises(UnsupportedCpuError) as raised:
        cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {})
    assert str(raised.value) == (
        "tle_ops.fused_mlp (kernel mlp_kernel) cannot run on this CPU: it calls the runtime function fused_mlp_bf16, "
        "which needs i8mm (i8mm: smmla v0.4s (in fused_mlp_bf16)), and this CPU lacks it. Run `flagtree-doctor` for "
        "the TLE ops this CPU runs; FLAGTREE_SKIP_CPU_CHECK=1 skips this check (the op may then stop with SIGILL)."
    )
    cpu_check.check_kernel("swiglu_kernel", plain.read_bytes(), c_dir, {})  # runs here
    cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {"FLAGTREE_SKIP_CPU_CHECK": "1"})
    on(caps(GRAVITON3, 256))  # the baseline runtime, and i8mm on every core
    cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {})
    on(caps(ARMV9, 128))  # the Armv9 runtime: no manifest is read, even a damaged one
    (c_dir / str(BASELINE_RUNTIME.manifest)).write_text("{")
    cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {})
    on(caps(ARMV82))
    with pytest.raises(ManifestError, match="is not JSON"):
        cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {})
    on(caps(A64FX, 512))  # below the floor: refused before any manifest
    with pytest.raises(UnsupportedCpuError, match="the CPU lacks asimddp"):
        cpu_check.check_kernel("mlp_kernel", kernel.read_bytes(), c_dir, {})


def test_initialisers_the_cpu_cannot_run_refuse_the_load(tmp_path: Path, on) -> None:
    c_dir = tmp_path / "_C"
    manifest(c_dir, {"swiglu_bf16": []}, load=["sve"])
    kernel = shared_object(tmp_path, "kernel", "void swiglu_bf16(void); void k(void) { swiglu_bf16(); }")
    on(caps(ARMV82))
    with pytest.raises(UnsupportedCpuError, match="its initialisers need sve, which this CPU lacks"):
        cpu_check.check_kernel("k", kernel.read_bytes(), c_dir, {})


def test_the_runtime_module_loads_the_tiers_build_with_refused_functions(tmp_path: Path, on) -> None:
    c_dir = tmp_path / "_C"
    (c_dir / "baseline").mkdir(parents=True)
    source = "int fused_mlp_bf16(void) { return 8; } int standalone_residual_add_bf16(void) { return %d; }"
    shared_object(c_dir, "libTritonCPURuntime", source % 9)
    shared_object(c_dir / "baseline", "libTritonCPURuntime", source % 8)
    manifest(c_dir, {"fused_mlp_bf16": ["i8mm"], "standalone_residual_add_bf16": []})
    on(caps(ARMV82))
    runtime = cpu_check.load_runtime(c_dir / "libTritonCPURuntime.so", {})
    assert runtime.standalone_residual_add_bf16() == 8  # the baseline build
    runtime.fused_mlp_bf16.argtypes = [ctypes.c_void_p]  # as runtime.py sets it at import
    with pytest.raises(UnsupportedCpuError) as raised:
        runtime.fused_mlp_bf16(None)
    assert str(raised.value).startswith(
        "triton.language.extra.cpu.runtime.fused_mlp_bf16() cannot run on this CPU: it calls the runtime function "
        "fused_mlp_bf16, which needs i8mm ("
    )
    on(caps(ARMV9, 128))
    armv9 = cpu_check.load_runtime(c_dir / "libTritonCPURuntime.so", {})
    assert (armv9.standalone_residual_add_bf16(), armv9.fused_mlp_bf16()) == (9, 8)
    on(caps(A64FX, 512))
    with pytest.raises(UnsupportedCpuError, match="the CPU lacks asimddp"):
        cpu_check.load_runtime(c_dir / "libTritonCPURuntime.so", {})


def test_the_drivers_library_folders(tmp_path: Path, on) -> None:
    on(caps(ARMV9, 128))
    assert cpu_check.runtime_library_dirs(tmp_path) == [tmp_path]
    on(caps(GRAVITON3, 256))
    assert cpu_check.runtime_library_dirs(tmp_path) == [tmp_path / "baseline", tmp_path]


def test_op_refusal_names_the_op(tmp_path: Path, on) -> None:
    manifest(tmp_path, {"standalone_rms_norm_bf16": ["bf16"]})
    on(caps(ARMV82))
    refusal = cpu_check.op_refusal(tmp_path, "rms_norm")
    assert refusal is not None and refusal.startswith("tle_ops.rms_norm cannot run on this CPU")
    assert cpu_check.op_refusal(tmp_path, "swiglu") is None  # its function is not in this manifest
    on(caps(GRAVITON3, 256))
    assert cpu_check.op_refusal(tmp_path, "rms_norm") is None
