"""The doctor's non-CPU checks on built trees, check isolation, selection and the CLI around them."""

from __future__ import annotations

import _ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from flagtree_doctor import checks
from flagtree_doctor.capabilities import decode_hwcaps
from flagtree_doctor.checks import CHECK_IDS
from flagtree_doctor.cli import main
from flagtree_doctor.cpu import Core, classify, format_cpu_list
from flagtree_doctor.cpu_check import kernel_blockers
from flagtree_doctor.model import Check, CheckResult, Facts, System
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_FILES, BUILDER_METHODS, PATCHED_DEFAULTS
from flagtree_feedstock import cli as feedstock_cli

SITE = "opt/conda/lib/python3.11/site-packages/triton"


def touch(root: Path, relative: str, *, executable: bool = False) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    if executable:
        path.chmod(0o755)
    return path


N2_CPUINFO = Path(__file__).parent / "data" / "doctor" / "neoverse-n2" / "proc" / "cpuinfo"


def aarch64_root(root: Path) -> Path:
    """``root`` with an aarch64 machine's proc/cpuinfo (a recorded Neoverse N2), unless it has one."""
    cpuinfo = root / "proc" / "cpuinfo"
    if not cpuinfo.exists():
        cpuinfo.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(N2_CPUINFO, cpuinfo)
    return root


def statuses(root: Path, env: dict[str, str], *names: str) -> dict[str, tuple[str, str]]:
    """The named checks' own verdicts on ``root`` as the machine's files, with ``env`` as its environment.

    (The command skips the environment and toolchain checks on a --root tree, which records neither:
    test_a_recorded_tree_skips_what_reads_this_machine.)
    """
    facts = Facts(System.from_root(aarch64_root(root), env))
    return {c.id: (r.status, r.message) for c in checks.select(list(names)) for r in [c.run(facts)]}


def run_doctor(root: Path, env: dict[str, str], *names: str) -> tuple[int, dict[str, tuple[str, str]]]:
    """``flagtree-doctor --root ROOT --json [NAME ...]``: its exit status and each check's (status, message)."""
    console = Console(record=True, width=300, no_color=True)
    status = main(["--root", str(aarch64_root(root)), "--json", *names], env=env, console=console)
    report = json.loads(console.export_text())
    return status, {c["id"]: (c["status"], c["message"]) for c in report["checks"]}


def full_tree(root: Path) -> Path:
    for tool in ("gcc", "as", "ld", "ar"):
        touch(root, f"usr/bin/{tool}", executable=True)
    touch(root, "usr/lib/gcc/aarch64-linux-gnu/12/include/omp.h")
    touch(root, "usr/lib/aarch64-linux-gnu/libgomp.so.1")
    touch(root, "usr/include/python3.11/Python.h")
    for name in (
        "_C/libtriton.so",
        "_C/libTritonCPURuntime.so",
        "_C/libsleef.so.3",
        *(f"_C/{f}" for f in BASELINE_FILES),
    ):
        touch(root, f"{SITE}/{name}")
    for name in ("backends/cpu/compiler.py", "backends/cpu/driver.py", "language/extra/cpu/tle_ops.py"):
        touch(root, f"{SITE}/{name}")
    (root / "opt/conda/include").mkdir(parents=True)
    return root


GOOD_ENV = {"PATH": "/usr/bin", "FLAGTREE_BACKEND": "cpu", "TRITON_SYS_PATH": "/opt/conda"}


def test_environment_and_toolchain_all_ok(tmp_path: Path) -> None:
    root = full_tree(tmp_path)
    names = ["env-flagtree-backend", "env-triton-sys-path", "env-cc", "jit-compiler", "binutils", "openmp",
             "python-headers", "triton-install", "triton-load"]  # fmt: skip
    got = statuses(root, GOOD_ENV, *names)
    assert {k: v[0] for k, v in got.items()} == {
        "env-flagtree-backend": "ok",
        "env-triton-sys-path": "ok",
        "env-cc": "ok",
        "jit-compiler": "ok",
        "binutils": "ok",
        "openmp": "ok",
        "python-headers": "ok",
        "triton-install": "ok",
        "triton-load": "skip",
    }
    assert got["openmp"][1] == (
        "/usr/lib/gcc/aarch64-linux-gnu/12/include/omp.h and /usr/lib/aarch64-linux-gnu/libgomp.so.1"
    )


def test_environment_problems(tmp_path: Path) -> None:
    root = full_tree(tmp_path)
    env = {"PATH": "/usr/bin", "FLAGTREE_BACKEND": "cuda", "TRITON_SYS_PATH": "/nowhere", "CC": "clang-18"}
    got = statuses(root, env, "env-flagtree-backend", "env-triton-sys-path", "env-cc", "jit-compiler")
    assert got["env-flagtree-backend"][0] == "fail"
    assert "junk at end of line" in got["env-flagtree-backend"][1]
    assert got["env-triton-sys-path"] == ("fail", "TRITON_SYS_PATH=/nowhere is not a folder")
    assert got["env-cc"] == ("fail", "CC=clang-18 but clang-18 is not found")
    assert got["jit-compiler"] == ("fail", "no C compiler for the JIT (tried clang-18)")
    unset = statuses(root, {"PATH": "/usr/bin"}, "env-triton-sys-path")
    assert unset["env-triton-sys-path"][0] == "warn"


def test_the_packaged_defaults_make_the_exports_optional(tmp_path: Path) -> None:
    """With the feedstock's patches 0003 and 0005 installed, unset variables are fine; without, they are not."""
    root = full_tree(tmp_path)
    names = ("env-flagtree-backend", "env-triton-sys-path")
    plain = statuses(root, {"PATH": "/usr/bin"}, *names)
    assert (plain["env-flagtree-backend"][0], plain["env-triton-sys-path"][0]) == ("fail", "warn")
    (root / SITE / "runtime").mkdir()
    (root / SITE / "runtime/build.py").write_text(
        '_CPU_BACKEND_DIR = os.path.join(os.path.dirname(__file__), "..", "backends", "cpu")\n'
    )
    (root / SITE / "backends/cpu/driver.py").write_text(
        '_dirname = os.getenv("TRITON_SYS_PATH", default=sys.prefix)\n'
    )
    packaged = statuses(root, {"PATH": "/usr/bin"}, *names)
    assert packaged == {
        "env-flagtree-backend": (
            "ok",
            "FLAGTREE_BACKEND unset: the installed cpu backend selects the CPU build",
        ),
        "env-triton-sys-path": ("ok", "TRITON_SYS_PATH unset: the driver uses this Python's prefix"),
    }
    # An explicit wrong value still overrides the packaged default, so it still fails.
    assert (
        statuses(root, {"PATH": "/usr/bin", "FLAGTREE_BACKEND": "cuda"}, *names)["env-flagtree-backend"][0]
        == "fail"
    )


def test_the_markers_are_what_the_patches_add() -> None:
    patches = Path(__file__).resolve().parents[1] / "patches" / "flagtree"
    added = "\n".join(
        line[1:] for patch in sorted(patches.glob("*.patch")) for line in patch.read_text().splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )  # fmt: skip
    for variable, (relative, marker) in PATCHED_DEFAULTS.items():
        assert marker in added, f"no patch adds the {variable} marker of {relative}"


def test_conda_prefixed_binutils_count(tmp_path: Path) -> None:
    for tool in ("aarch64-conda-linux-gnu-cc", "aarch64-conda-linux-gnu-as", "aarch64-conda-linux-gnu-ld",
                 "aarch64-conda-linux-gnu-ar"):  # fmt: skip
        touch(tmp_path, f"opt/conda/bin/{tool}", executable=True)
    env = {"PATH": "/opt/conda/bin", "CC": "aarch64-conda-linux-gnu-cc"}
    assert statuses(tmp_path, env, "binutils", "jit-compiler", "openmp")["binutils"][0] == "ok"
    assert statuses(tmp_path, env, "openmp")["openmp"] == (
        "fail",
        "omp.h and libgomp not found (the kernel launcher is built with -fopenmp)",
    )


def test_incomplete_install_points_at_the_faq(tmp_path: Path) -> None:
    root = full_tree(tmp_path)
    (root / SITE / "language/extra/cpu/tle_ops.py").unlink()
    status, message = statuses(root, GOOD_ENV, "triton-install")["triton-install"]
    assert status == "fail"
    assert message.endswith("lacks language/extra/cpu/tle_ops.py (incomplete symlinks, upstream FAQ 4)")


def test_missing_flagtree_is_a_warning_and_dependants_skip(tmp_path: Path) -> None:
    got = statuses(tmp_path, {}, "triton-install", "glibc", "glibcxx", "triton-load")
    assert [v[0] for v in got.values()] == ["warn", "skip", "skip", "skip"]


def test_a_crashing_check_is_a_fail_row_and_the_rest_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(facts: Facts) -> CheckResult:
        raise RuntimeError("sysfs went away")

    broken = Check(id="cpu-features", group="cpu", summary="x", run=explode)
    monkeypatch.setattr(checks, "CHECKS", (broken, *checks.CHECKS[1:]))
    system = System.from_root(aarch64_root(tmp_path), {})
    results = checks.run_checks(checks.select(["cpu-features", "triton-install"]), Facts(system))
    assert [(r.id, r.status) for r in results] == [("cpu-features", "fail"), ("triton-install", "warn")]
    assert results[0].message == "the check crashed: RuntimeError: sysfs went away"


def test_a_crash_in_shared_facts_fails_each_dependant_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flagtree_doctor import cpu  # noqa: PLC0415

    def broken(system: System) -> None:
        raise OSError("no /proc")

    monkeypatch.setattr(cpu, "find_cpu", broken)
    _, got = run_doctor(tmp_path, {}, "cpu-features", "core-types", "triton-install")
    assert got["cpu-features"] == ("fail", "the check crashed: OSError: no /proc")
    assert got["core-types"][0] == "fail"
    assert got["triton-install"][0] == "warn"


def test_list_and_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(record=True, width=200)
    assert main(["--list"], console=console) == 0
    assert [line.split()[0] for line in console.export_text().splitlines()] == list(CHECK_IDS)
    assert main(["glibcxxx"]) == 2
    assert capsys.readouterr().err == (
        "flagtree-doctor: error: no check named 'glibcxxx' (fix: did you mean glibcxx? see flagtree-doctor --list)\n"
    )


def test_flagtree_feedstock_doctor_delegates() -> None:
    console = Console(record=True, width=200)
    assert feedstock_cli.main(["doctor", "--list"], console=console) == 0
    assert "cpu-features" in console.export_text()


def test_base_import_stays_light() -> None:
    code = (
        "import sys, flagtree_doctor.cli, flagtree_doctor.verify.cli;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rattler', 'rattler_build', 'yaml', 'torch', 'triton'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_cpu_check_imports_only_the_standard_library() -> None:
    """FlagTree imports it before every kernel it loads: none of the doctor's checks, no rich."""
    code = (
        "import sys; before = set(sys.modules); import flagtree_doctor.cpu_check;"
        "print(sorted(m for m in set(sys.modules) - before if not m.startswith(('flagtree_doctor', '_'))))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(__file__).parents[1] / "flagtree-doctor" / "src")}).stdout  # fmt: skip
    loaded = {m.split(".")[0] for m in out.strip().strip("[]").replace("'", "").split(", ")} - {""}
    assert loaded <= set(sys.stdlib_module_names), loaded - set(sys.stdlib_module_names)


@pytest.mark.parametrize("skip", [None, "0", "1", "yes"])
def test_the_cpu_check_is_skipped_by_its_variable_alone(skip: str | None) -> None:
    """FLAGTREE_SKIP_CPU_CHECK, read from the environment as FlagTree's driver calls the check, on this host:
    1 skips it, 0 or unset runs it (it raises wherever this CPU cannot run the kernels, e.g. on x86_64), any
    other value is an error naming the variable. The same on aarch64 CPUs: tests/emulated/test_cpu_check.py."""
    code = (
        "from flagtree_doctor.cpu_check import require_supported_cpu; require_supported_cpu(); print('ran')"
    )
    env = {k: v for k, v in os.environ.items() if k != "FLAGTREE_SKIP_CPU_CHECK"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env if skip is None else {**env, "FLAGTREE_SKIP_CPU_CHECK": skip},
        capture_output=True,
        text=True,
        check=False,
    )
    last = (done.stderr.strip().splitlines() or [""])[-1]
    if skip == "yes":
        assert last == (
            "flagtree_doctor.cpu_check.SettingError: FLAGTREE_SKIP_CPU_CHECK='yes' is neither 1 nor 0 "
            "(fix: set FLAGTREE_SKIP_CPU_CHECK=1, or unset it)"
        )
    elif skip == "1" or not kernel_blockers():
        assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
    else:
        assert last.startswith(
            "flagtree_doctor.cpu_check.UnsupportedCpuError: flagtree-cpu cannot run kernels"
        )


def test_hwcap_decoding_matches_qemu_cortex_a76() -> None:
    # getauxval values printed by a Debian arm64 python under qemu-aarch64-static -cpu cortex-a76.
    assert decode_hwcaps(0x119FFB, 0) == {"asimd", "fphp", "asimdhp", "asimddp"}
    assert decode_hwcaps(0x415FFB, 0) == {"asimd", "fphp", "asimdhp", "sve"}  # -cpu a64fx
    assert decode_hwcaps(1 << 22, 1 << 1 | 1 << 13 | 1 << 14) == {"sve", "sve2", "i8mm", "bf16"}


def test_cpu_lists_and_capacity_only_classes() -> None:
    assert format_cpu_list([7, 0, 1, 2, 5, 8]) == "0-2,5,7-8"
    assert format_cpu_list([3]) == "3"
    cores = tuple(
        Core(cpu=i, capacity=cap, implementer=None, part=None, governor=None)
        for i, cap in enumerate([1024, 1024, 512, 512, 1024])
    )
    layout = classify(cores)
    assert (layout.big, layout.little, layout.taskset, layout.basis) == (
        (0, 1, 4),
        (2, 3),
        "0-1,4",
        "cpu_capacity",
    )


def test_load_verdicts_name_the_signal_and_missing_builders() -> None:
    from flagtree_doctor.runtime import _load_verdict  # noqa: PLC0415

    killed = _load_verdict("triton-load", -4, "", "")
    assert (killed.status, killed.message) == (
        "fail",
        "loading triton._C.libtriton was killed by SIGILL (an instruction this CPU lacks: see cpu-features)",
    )
    glibcxx = _load_verdict("triton-load", 1, "", "ImportError: version `GLIBCXX_3.4.32' not found\n")
    assert (
        glibcxx.message
        == "triton._C.libtriton does not load: ImportError: version `GLIBCXX_3.4.32' not found"
    )
    partial = _load_verdict("triton-load", 0, '{"missing": ["create_cpu_swiglu"]}\n', "")
    assert (partial.status, partial.message) == ("fail", "libtriton lacks the TLE builders create_cpu_swiglu")
    assert _load_verdict("triton-load", 0, '{"missing": []}\n', "").status == "ok"


def test_the_load_check_loads_the_runtime_only_where_the_cpu_can_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With patch 0008 libtriton loads on any CPU; the runtime libraries only where one of them runs, and then
    the tier's libTritonCPURuntime, as the driver preloads it.

    A stand-in for FlagTree's `triton` (a .py libtriton with the builders, runtime files that cannot load) and
    a CPU verdict: the check imports libtriton alone where no runtime fits, and says so.
    """
    from flagtree_doctor import cpu, runtime  # noqa: PLC0415
    from flagtree_doctor.capabilities import Capabilities  # noqa: PLC0415

    package = tmp_path / "site" / "triton"
    (package / "_C" / "baseline").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_C" / "__init__.py").write_text("")
    methods = "".join(f"        {name} = None\n" for name in BUILDER_METHODS)
    (package / "_C" / "libtriton.py").write_text(f"class ir:\n    class builder:\n{methods}")
    for name in ("libsleef.so", "libTritonCPURuntime.so", "baseline/libTritonCPURuntime.so"):
        (package / "_C" / name).write_text(f"not a shared object: {name}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}

    def cpu_with(features: frozenset[str], bits: int | None) -> Capabilities:
        return Capabilities(machine="aarch64", features=features, source="test", sve_vector_bits=bits)

    monkeypatch.setattr(cpu, "live_capabilities", lambda: cpu_with(frozenset({"asimd"}), None))
    result = runtime.check_load(Facts(System.from_root(None, env)))
    assert (result.status, result.message) == (
        "ok",
        (
            "libtriton loads with all 10 create_cpu_* builders (the runtime libraries were not loaded: this CPU "
            "cannot run them)"
        ),
    )
    # Where the CPU can run one, the libraries are preloaded as the driver does: sleef (here a real shared
    # object of this machine), then the tier's runtime (which cannot load, naming itself).
    shutil.copyfile(_ctypes.__file__, package / "_C" / "libsleef.so")
    for features, library in (
        (ARMV9_RUNTIME.features, "libTritonCPURuntime.so"),
        (frozenset({"asimd", "asimddp"}), "baseline/libTritonCPURuntime.so"),
    ):
        monkeypatch.setattr(cpu, "live_capabilities", lambda f=features: cpu_with(f, 128))
        result = runtime.check_load(Facts(System.from_root(None, env)))
        assert result.status == "fail"
        assert f"_C/{library}: file too short" in result.message
