"""flagtree-doctor --root on the recorded machine trees: exact JSON fields and check statuses."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from _timing import seconds
from flagtree_doctor.cli import main

DATA = Path(__file__).parent / "data" / "doctor"
CPU_CHECKS = ["cpu-features", "sve-vector-length", "core-types", "cpufreq-governor"]
ARMV9 = [
    "asimd",
    "asimddp",
    "asimdfhm",
    "asimdhp",
    "bf16",
    "fphp",
    "i8mm",
    "sve",
    "sve2",
    "svebf16",
    "svei8mm",
]
ARMV82_DOTPROD = ["asimd", "asimddp", "asimdhp", "fphp"]

# machine -> (features, sve bits, big, little, taskset, statuses of CPU_CHECKS, the runtime it loads)
EXPECTED = {
    "cix-p1-orion-o6": (
        ARMV9,
        128,
        list(range(4, 12)),
        [0, 1, 2, 3],
        "4-11",
        ["ok", "ok", "warn", "warn"],
        "armv9",
    ),
    "neoverse-v1-graviton3": (
        [f for f in ARMV9 if f != "sve2"],
        256,
        list(range(16)),
        [],
        None,
        # No SVE2: no vector length would bring the Armv9 runtime, so that check says so and suggests nothing.
        ["ok", "skip", "ok", "skip"],
        "baseline",
    ),
    "neoverse-n2": (ARMV9, 128, list(range(8)), [], None, ["ok", "ok", "ok", "ok"], "armv9"),
    # No dotprod (asimddp): below the floor, refused.
    "a64fx": (
        ["asimd", "asimdhp", "fphp", "sve"],
        512,
        list(range(48)),
        [],
        None,
        ["fail", "skip", "ok", "ok"],
        None,
    ),
    # Everything Armv9 needs but 512-bit vectors: the baseline runtime, and the fix for the Armv9 one.
    "qemu-max": (
        [*ARMV9[:7], "sme", *ARMV9[7:]],
        512,
        [0, 1, 2, 3],
        [],
        None,
        ["ok", "warn", "ok", "skip"],
        "baseline",
    ),
    "neoverse-n1-graviton2": (
        ARMV82_DOTPROD,
        None,
        list(range(16)),
        [],
        None,
        ["ok", "skip", "ok", "skip"],
        "baseline",
    ),
    "cortex-a76-raspberry-pi-5": (
        ARMV82_DOTPROD,
        None,
        [0, 1, 2, 3],
        [],
        None,
        ["ok", "skip", "ok", "warn"],
        "baseline",
    ),
}


def run_json(args: list[str], env: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    console = Console(record=True, width=200, no_color=True, highlight=False)
    status = main([*args, "--json"], env=env or {"PATH": "/usr/bin:/bin"}, console=console)
    return status, json.loads(console.export_text())


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_machine_tree(machine: str) -> None:
    features, bits, big, little, taskset, statuses, tier = EXPECTED[machine]
    status, report = run_json(["--root", str(DATA / machine), *CPU_CHECKS])
    assert report["schema_version"] == "1"
    assert report["machine"] == "aarch64"
    assert report["features"] == features
    assert report["sve_vector_bits"] == bits
    assert report["big_cores"] == big
    assert report["little_cores"] == little
    assert report["taskset"] == taskset
    assert report["tier"] == tier
    assert report["compiled_for"]["tier"] == (tier or "baseline")  # type: ignore[index]
    checks = report["checks"]
    assert isinstance(checks, list)
    assert [c["id"] for c in checks] == CPU_CHECKS
    assert [c["status"] for c in checks] == statuses
    assert status == (1 if "fail" in statuses else 0)
    for check in checks:  # every problem comes with its one-line fix
        assert (check["fix"] is not None) == (check["status"] in ("warn", "fail"))
        assert "\n" not in (check["fix"] or "")


def test_big_little_advice_names_the_cores_and_the_taskset_line() -> None:
    _, report = run_json(["--root", str(DATA / "cix-p1-orion-o6"), "core-types", "cpufreq-governor"])
    checks = {c["id"]: c for c in report["checks"]}  # type: ignore[union-attr]
    assert checks["core-types"]["fix"] == (
        "flagtree-doctor --apply (OpenMP on the big cores whenever this environment is active), or "
        "OMP_NUM_THREADS=8 taskset -c 4-11 python ..."
    )
    assert "big Cortex-A720 on CPUs 4-11, little Cortex-A520 on CPUs 0-3" in checks["core-types"]["message"]
    assert checks["cpufreq-governor"]["fix"] == "sudo cpupower -c 4-11 frequency-set -g performance"
    assert report["cores"][0] == {"cpu": 0, "model": "Cortex-A520", "capacity": 279, "governor": "schedutil"}  # type: ignore[index]


def test_every_processor_block_is_read(tmp_path: Path) -> None:
    """A feature one core lacks is not reported; cores come from cpuinfo when sysfs has no MIDR."""
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    blocks = []
    for cpu, (part, extra) in enumerate([(0xD80, " sve2"), (0xD80, " sve2"), (0xD81, ""), (0xD81, " sve2")]):
        blocks.append(
            f"processor\t: {cpu}\nFeatures\t: fp asimd asimddp sve{extra}\n"
            f"CPU implementer\t: 0x41\nCPU part\t: {part:#05x}\n"
        )
        (root / f"sys/devices/system/cpu/cpu{cpu}").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text("\n".join(blocks) + "\nHardware\t: test board\n")
    _, report = run_json(["--root", str(root), "cpu-features"])
    assert report["features"] == ["asimd", "asimddp", "sve"]
    assert report["big_cores"] == [2, 3]
    assert report["little_cores"] == [0, 1]
    assert report["taskset"] == "2-3"


A64FX_TRANSCRIPT = """\
CPU features: asimd asimdhp fphp sve, SVE 512-bit
runtime: none runs on this CPU
cores: 48, all alike
check               status   message                                       fix
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
cpu-features        fail     the CPU lacks asimddp (baseline runtime:      use an aarch64 CPU with dotprod (Armv8.2 or
                             -march=armv8.2-a+dotprod): no build of the    newer, e.g. Neoverse N1/V1/N2, Cortex-A76, or
                             runtime runs here (below dotprod its code     a Linux VM or container on Apple silicon)
                             stops with SIGILL)
sve-vector-length   skip     SVE vectors are 512 bits, but without
                             asimddp, bf16, i8mm, sve2, svebf16, svei8mm
                             no SVE vector length lets the Armv9 runtime
                             run here; nothing runs (see cpu-features)
core-types          ok       48 cores, all alike (A64FX)
cpufreq-governor    ok       performance
2 ok, 0 warn, 1 fail, 1 skip
"""


def test_human_report_transcript_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    console = Console(record=True, width=120, highlight=False, force_terminal=False)
    status = main(["--root", str(DATA / "a64fx"), *CPU_CHECKS], env={}, console=console)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    assert text == A64FX_TRANSCRIPT
    assert status == 1


def test_bad_root_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--root", str(tmp_path / "missing")])
    assert status == 2
    assert capsys.readouterr().err == (
        f"flagtree-doctor: error: --root {tmp_path / 'missing'} is not a folder "
        "(fix: pass the top of a recorded tree (it holds proc/ and sys/))\n"
    )


def test_a_tree_without_cpuinfo_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)
    assert main(["--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"flagtree-doctor: error: --root {tmp_path} has no proc/cpuinfo (fix: copy the machine's /proc/cpuinfo "
        f"to {tmp_path}/proc/cpuinfo (the feedstock's docs/using.md, 'Recording a machine', lists every file the "
        "doctor reads))\n"
    )


def test_json_errors_are_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (
        (["--root", str(tmp_path)], f"--root {tmp_path} has no proc/cpuinfo"),
        (["glibcxxx"], "no check named 'glibcxxx'"),
        (["--shout"], "unrecognized arguments: --shout"),
    ):
        console = Console(record=True, width=300, no_color=True, highlight=False)
        assert main([*argv, "--json"], console=console) == 2
        report = json.loads(console.export_text())
        assert report["schema_version"] == "1"
        assert report["error"]["message"] == message
        assert report["error"]["exit_status"] == 2
        assert capsys.readouterr().err.startswith(f"flagtree-doctor: error: {message} (fix: ")


def test_off_aarch64_only_the_machine_check_runs(tmp_path: Path) -> None:
    """On x86_64 nothing but another machine helps: no `export FLAGTREE_BACKEND=cpu` advice, no failures."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx2\n"
    )
    status, report = run_json(["--root", str(tmp_path)], env={"PATH": "/usr/bin"})
    checks = {c["id"]: c for c in report["checks"]}  # type: ignore[union-attr]
    assert checks["cpu-features"]["status"] == "fail"
    assert {c["status"] for i, c in checks.items() if i != "cpu-features"} == {"skip"}
    assert checks["env-flagtree-backend"]["message"] == (
        "this machine is unknown and flagtree-cpu runs on aarch64 only (see cpu-features)"
    )
    assert report["summary"] == {"ok": 0, "warn": 0, "fail": 1, "skip": len(checks) - 1}
    assert status == 1


def test_macos_on_apple_silicon_is_not_a_target_but_a_linux_vm_on_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """macOS reports Apple silicon as arm64: named as macOS, with the way that works (Linux in a VM or container,
    where it is the baseline tier: tests/test_cpu_tiers.py)."""
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    status, report = run_json(["cpu-features"])
    (check,) = report["checks"]  # type: ignore[misc]
    assert check["status"] == "fail"
    assert check["message"].startswith(
        "this is macOS on Apple silicon (arm64): macOS is not a target platform"
    )
    assert (
        check["fix"]
        == "run it in a Linux VM or container on this Mac: there Apple silicon runs the baseline runtime"
    )
    assert status == 1


@pytest.mark.skipif(platform.machine() == "aarch64", reason="shows the live report off aarch64")
def test_off_aarch64_live_the_environment_checks_are_skipped() -> None:
    status, report = run_json(["env-flagtree-backend", "env-triton-sys-path", "jit-compiler"], env={})
    assert [c["status"] for c in report["checks"]] == ["skip", "skip", "skip"]  # type: ignore[union-attr]
    assert status == 0


@pytest.mark.parametrize("machine", ["a64fx", "neoverse-v1-graviton3"])
def test_without_sve2_no_fix_touches_the_vector_length(machine: str) -> None:
    _, report = run_json(["--root", str(DATA / machine)])
    fixes = [c["fix"] or "" for c in report["checks"]]  # type: ignore[union-attr]
    assert not [fix for fix in fixes if "vector_length" in fix]
    (vl,) = [c for c in report["checks"] if c["id"] == "sve-vector-length"]  # type: ignore[union-attr]
    assert (vl["status"], vl["fix"]) == ("skip", None)
    assert "without" in vl["message"] and "sve2" in vl["message"]


def test_the_readme_records_a_tree_the_doctor_reads(tmp_path: Path) -> None:
    """docs/using.md's recording commands, run here in bash, make a tree that --root accepts."""
    readme = (Path(__file__).resolve().parents[1] / "docs" / "using.md").read_text()
    section = readme[readme.index("## Recording a machine") :]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block[1]], cwd=tmp_path, check=True, timeout=seconds(60)
    )
    tree = tmp_path / "machine-tree"

    def processors(text: str) -> list[str]:  # not the whole text: x86's "cpu MHz" changes between reads
        return [line for line in text.splitlines() if line.startswith("processor")]

    assert processors((tree / "proc/cpuinfo").read_text()) == processors(Path("/proc/cpuinfo").read_text())
    recorded = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    assert all(p.startswith(("proc/", "sys/devices/system/cpu/cpu")) for p in recorded)
    status, report = run_json(["--root", str(tree)])
    assert status in (0, 1)
    assert report["root"] == str(tree)


def _with_install(tmp_path: Path, machine: str, needs: dict[str, list[str]]) -> Path:
    """A copy of a recorded tree with a FlagTree install whose baseline runtime's manifest says ``needs``."""
    root = tmp_path / machine
    shutil.copytree(DATA / machine, root)
    c_dir = root / "opt/conda/lib/python3.12/site-packages/triton/_C"
    c_dir.joinpath("baseline").mkdir(parents=True)
    functions = {n: {"needs": v, "evidence": dict.fromkeys(v, f"usmmla v1.4s, v2.16b, v3.16b (in {n}._omp_fn.0)")}
                 for n, v in needs.items()}  # fmt: skip
    manifest = {"schema_version": 1, "library": "libTritonCPURuntime.so", "march": "armv8.2-a+dotprod",
                "load": {"needs": []}, "functions": functions}  # fmt: skip
    (c_dir / "baseline/libTritonCPURuntime.isa.json").write_text(json.dumps(manifest))
    return root


NEEDS = {"fused_mlp_bf16": ["asimddp", "i8mm"], "sdot_gemv_m1_prepacked": ["asimddp"], "swiglu_bf16": []}


def test_the_tle_ops_a_recorded_machine_cannot_run() -> None:
    """tle-ops: on the baseline runtime, each op whose runtime function needs what the machine lacks, with the
    instruction that needs it; an Armv9 machine runs them all; a machine with i8mm runs this one."""
    with tempfile.TemporaryDirectory() as scratch:
        root = _with_install(Path(scratch), "neoverse-n1-graviton2", NEEDS)
        status, report = run_json(["--root", str(root), "tle-ops"])
        (check,) = report["checks"]  # type: ignore[misc]
        assert (status, check["status"]) == (0, "warn")
        assert check["message"].startswith(
            "on the baseline runtime this CPU cannot run tle_ops.fused_mlp (fused_mlp_bf16 needs i8mm: i8mm: "
            "usmmla v1.4s, v2.16b, v3.16b (in fused_mlp_bf16._omp_fn.0)); runtime.fused_mlp_bf16 (fused_mlp_bf16"
        )
        assert check["fix"] == "these ops need a CPU with i8mm (every core)"
        assert [(u["op"], u["missing"]) for u in report["unsupported_ops"]] == [  # type: ignore[union-attr]
            ("tle_ops.fused_mlp", ["i8mm"]),
            ("runtime.fused_mlp_bf16", ["i8mm"]),
        ]
        graviton3 = _with_install(Path(scratch), "neoverse-v1-graviton3", NEEDS)
        _, report = run_json(["--root", str(graviton3), "tle-ops"])
        assert [c["status"] for c in report["checks"]] == ["ok"]  # type: ignore[union-attr]
        assert report["unsupported_ops"] == []
    _, report = run_json(["--root", str(DATA / "neoverse-n2"), "tle-ops"])  # Armv9: no manifest needed
    assert [(c["status"], c["message"]) for c in report["checks"]] == [  # type: ignore[union-attr]
        ("ok", "every TLE op runs here (the Armv9 runtime)")
    ]
    _, report = run_json(["--root", str(DATA / "neoverse-n1-graviton2"), "tle-ops"])  # no install in the tree
    assert [c["status"] for c in report["checks"]] == ["skip"]  # type: ignore[union-attr]
    assert report["unsupported_ops"] is None
