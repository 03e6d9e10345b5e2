"""flagtree-verify: the torch references against plain formulas, the install checks, the exit statuses."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from importlib.machinery import ModuleSpec

import pytest
from rich.console import Console

from flagtree_doctor.target import BUILDER_METHODS
from flagtree_doctor.verify import cli as verify_cli
from flagtree_doctor.verify import ops
from flagtree_doctor.verify.ops import CASES, OP_NAMES, check_install
from flagtree_feedstock import cli as feedstock_cli


def test_flagtree_absent_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("a triton package is installed here")
    assert verify_cli.main([], env={}) == 2
    assert capsys.readouterr().err == (
        "flagtree-verify: error: FlagTree is not installed (no module 'triton'); nothing to verify "
        "(fix: conda install flagtree-cpu)\n"
    )
    assert feedstock_cli.main(["verify"], env={}) == 2
    assert capsys.readouterr().err.startswith("flagtree-feedstock verify: error: FlagTree is not installed")


def test_json_without_flagtree_is_a_json_error(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("a triton package is installed here")
    console = Console(record=True, width=300, no_color=True, highlight=False)
    assert verify_cli.main(["--json"], env={}, console=console) == 2
    assert json.loads(console.export_text()) == {
        "schema_version": "1",
        "error": {
            "message": "FlagTree is not installed (no module 'triton'); nothing to verify",
            "fix": "conda install flagtree-cpu",
            "exit_status": 2,
        },
    }
    assert capsys.readouterr().err.startswith("flagtree-verify: error: FlagTree is not installed")


@pytest.mark.parametrize("json_mode", [False, True])
def test_unknown_op_is_a_usage_error(json_mode: bool, capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(record=True, width=300, no_color=True, highlight=False)
    argv = ["gemm", "--json"] if json_mode else ["gemm"]
    assert verify_cli.main(argv, env={}, console=console) == 2
    assert capsys.readouterr().err == (
        f"flagtree-verify: error: unknown op 'gemm' (fix: choose from {', '.join(OP_NAMES)})\n"
    )
    assert bool(console.export_text()) == json_mode


def test_a_bad_require_kernels_value_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_cli.main([], env={"FLAGTREE_REQUIRE_KERNELS": "yes"}) == 2
    assert capsys.readouterr().err == (
        "flagtree-verify: error: FLAGTREE_REQUIRE_KERNELS='yes' is neither 1 nor 0 "
        "(fix: set FLAGTREE_REQUIRE_KERNELS=1, or unset it)\n"
    )


def fake_triton(
    monkeypatch: pytest.MonkeyPatch, *, version: str, builders: tuple[str, ...]
) -> types.ModuleType:
    """A stand-in `triton` package with a backend registry and an ir.builder class."""
    triton = types.ModuleType("fake_triton")
    triton.__version__ = version  # type: ignore[attr-defined]
    backends = types.ModuleType("fake_triton.backends")
    backends.backends = {"cpu": object()}  # type: ignore[attr-defined]
    libtriton = types.ModuleType("fake_triton._C.libtriton")
    libtriton.ir = types.SimpleNamespace(builder=type("builder", (), dict.fromkeys(builders)))  # type: ignore[attr-defined]
    for name, module in (("fake_triton", triton), ("fake_triton.backends", backends),
                         ("fake_triton._C", types.ModuleType("fake_triton._C")),
                         ("fake_triton._C.libtriton", libtriton)):  # fmt: skip
        module.__spec__ = ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, module)
    return triton


def test_install_checks_pass_on_a_flagtree_shaped_module(monkeypatch: pytest.MonkeyPatch) -> None:
    triton = fake_triton(monkeypatch, version="3.3.0", builders=BUILDER_METHODS)
    assert [(o.name, o.status) for o in check_install(triton)] == [
        ("triton-version", "pass"),
        ("cpu-backend", "pass"),
        ("builders", "pass"),
    ]


def test_install_checks_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    triton = fake_triton(monkeypatch, version="3.5.0", builders=BUILDER_METHODS[1:])
    version, _, builders = check_install(triton)
    assert (version.status, version.detail) == ("fail", "triton 3.5.0 (FlagTree's cpu backend is 3.3.x)")
    assert (builders.status, builders.detail) == ("fail", f"missing {BUILDER_METHODS[0]}")
    del sys.modules["fake_triton.backends"]
    assert check_install(triton)[1].status == "error"  # isolated: the other steps still report


def test_op_names_are_the_cases() -> None:
    assert tuple(CASES) == OP_NAMES
    # every builder method is exercised by one op, or listed as not exercised
    assert set(OP_NAMES) | set(ops.NOT_EXERCISED) == {m.removeprefix("create_cpu_") for m in BUILDER_METHODS}


def test_kernels_are_skipped_where_the_cpu_cannot_run_them(monkeypatch: pytest.MonkeyPatch) -> None:
    triton = fake_triton(monkeypatch, version="3.3.0", builders=BUILDER_METHODS)
    ran: list[tuple[str, ...]] = []
    monkeypatch.setattr(verify_cli, "run_ops", lambda names, repeat, **_: ran.append(tuple(names)) or [])
    outcomes = verify_cli.verify(triton, OP_NAMES, repeat=1, blockers=["the CPU lacks sve2"])
    assert (outcomes[-1].name, outcomes[-1].status) == ("ops", "skip")
    assert outcomes[-1].detail.startswith("kernels not run: the CPU lacks sve2")
    assert ran == []
    verify_cli.verify(triton, ("rms_norm",), repeat=1, blockers=[])
    assert ran == [("rms_norm",)]


def test_required_kernels_turn_the_skip_into_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where a job sets FLAGTREE_REQUIRE_KERNELS=1, a CPU that cannot run the kernels fails verify (exit 1)."""
    fake_triton(monkeypatch, version="3.3.0", builders=BUILDER_METHODS)
    monkeypatch.setitem(sys.modules, "triton", sys.modules["fake_triton"])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: ModuleSpec(name, None))
    monkeypatch.setattr(verify_cli, "kernel_blockers", lambda: ["the CPU lacks sve2 (x: -march=y)"])
    monkeypatch.setattr(verify_cli, "run_ops", lambda names, repeat, **_: pytest.fail("ran the kernels"))
    console = Console(record=True, width=300, no_color=True, highlight=False)
    assert verify_cli.main(["--json"], env={}, console=console) == 0
    assert json.loads(console.export_text())["results"][-1]["status"] == "skip"
    assert capsys.readouterr().err == ""

    console = Console(record=True, width=300, no_color=True, highlight=False)
    assert verify_cli.main(["--json"], env={"FLAGTREE_REQUIRE_KERNELS": "1"}, console=console) == 1
    ops = json.loads(console.export_text())["results"][-1]
    assert (ops["name"], ops["status"]) == ("ops", "fail")
    assert capsys.readouterr().err == (
        "flagtree-verify: error: FLAGTREE_REQUIRE_KERNELS=1, but this CPU cannot run the kernels: "
        "the CPU lacks sve2 (x: -march=y)\n"
    )


def test_kernel_blockers_follow_the_doctor() -> None:
    """Verify skips the kernels only where no runtime runs: below dotprod, or off aarch64."""
    from flagtree_doctor.capabilities import Capabilities  # noqa: PLC0415
    from flagtree_doctor.target import ARMV9_RUNTIME  # noqa: PLC0415
    from flagtree_doctor.tier import choose_tier  # noqa: PLC0415

    def blockers(machine: str, features: frozenset[str], bits: int | None) -> list[str]:
        capabilities = Capabilities(machine=machine, features=features, source="test", sve_vector_bits=bits)
        return list(choose_tier(capabilities).blockers)

    armv9 = ARMV9_RUNTIME.features
    assert blockers("aarch64", armv9, 128) == []
    assert blockers("x86_64", frozenset(), None) == ["this machine is x86_64, not aarch64"]
    # The baseline runtime runs where the Armv9 one cannot: without SVE2, or with longer vectors.
    assert blockers("aarch64", armv9 - {"sve2"}, 128) == []
    assert blockers("aarch64", armv9, 256) == []
    (no_dotprod,) = blockers("aarch64", armv9 - {"asimddp"}, 512)
    assert no_dotprod == "the CPU lacks asimddp (baseline runtime: -march=armv8.2-a+dotprod)"


def test_ops_this_cpu_cannot_run_are_listed_as_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the baseline runtime: a step whose TLE ops call a function the CPU cannot run is `unsupported`, with
    why, not run and not failed; the others run; the exit status is 0."""
    from flagtree_doctor.manifest import UnsupportedOp  # noqa: PLC0415

    pack = UnsupportedOp(op="tle_ops.sdot_pack_weights", function="sdot_pack_weights", missing=("i8mm",),
                         evidence="i8mm: usdot ... (in sdot_pack_weights)")  # fmt: skip
    mlp = UnsupportedOp(op="tle_ops.fused_mlp", function="fused_mlp_bf16", missing=("bf16",), evidence="x")
    assert list(ops.unsupported_steps([mlp])) == ["fused_mlp"]
    steps = ops.unsupported_steps([pack, mlp])
    assert sorted(steps) == ["fused_mlp", "sdot_gemv", "sdot_gemv_fused_bf16", "sdot_pack_weights"]
    assert steps["fused_mlp"] == f"{pack.describe()}; {mlp.describe()}"

    ran: list[str] = []
    monkeypatch.setattr(
        ops, "importlib", types.SimpleNamespace(import_module=lambda name: types.SimpleNamespace())
    )
    monkeypatch.setattr(
        ops, "CASES", {**ops.CASES, "rms_norm": lambda kernels, inputs: ran.append("rms_norm")}
    )
    monkeypatch.setattr(
        ops, "judge", lambda name, trial, repeat: ops.Outcome(name=name, status="pass", detail="")
    )
    monkeypatch.setattr(ops, "_Inputs", lambda: None)  # no torch needed: the case above takes no inputs
    outcomes = ops.run_ops(("rms_norm", "fused_mlp"), repeat=1, unsupported={"fused_mlp": "needs bf16"})
    assert [(o.name, o.status) for o in outcomes[:2]] == [("rms_norm", "pass"), ("fused_mlp", "unsupported")]
    assert outcomes[1].detail == "not on this CPU: needs bf16"
    assert ran == ["rms_norm"]


def test_verify_hands_the_unsupported_steps_to_run_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    triton = fake_triton(monkeypatch, version="3.3.0", builders=BUILDER_METHODS)
    monkeypatch.setattr(verify_cli, "_unsupported", lambda triton: {"fused_mlp": "needs bf16"})
    seen: list[object] = []
    monkeypatch.setattr(verify_cli, "run_ops", lambda names, repeat, unsupported: seen.append(unsupported) or [
        ops.Outcome(name="fused_mlp", status="unsupported" if unsupported else "pass", detail="")])  # fmt: skip
    outcomes = verify_cli.verify(triton, ("fused_mlp",), repeat=1, blockers=[])
    assert seen == [{"fused_mlp": "needs bf16"}]
    assert outcomes[-1].status == "unsupported"
    verify_cli.verify(triton, ("fused_mlp",), repeat=1, blockers=[], force=True)
    assert seen[-1] == {}  # --force runs them all


def test_unsupported_ops_leave_the_exit_status_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An op this CPU cannot run is a row saying why, not a failure: `flagtree-verify` exits 0; a failed op
    beside it still exits 1."""
    fake_triton(monkeypatch, version="3.3.0", builders=BUILDER_METHODS)
    monkeypatch.setitem(sys.modules, "triton", sys.modules["fake_triton"])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: ModuleSpec(name, None))
    monkeypatch.setattr(verify_cli, "kernel_blockers", list)
    monkeypatch.setattr(verify_cli, "_unsupported", lambda triton: {"fused_mlp": "needs bf16"})
    results = [ops.Outcome(name="rms_norm", status="pass", detail="")]
    monkeypatch.setattr(verify_cli, "run_ops", lambda names, repeat, unsupported: results + [
        ops.Outcome(name=n, status="unsupported", detail=f"not on this CPU: {w}") for n, w in unsupported.items()])  # fmt: skip
    console = Console(record=True, width=300, no_color=True, highlight=False)
    assert verify_cli.main([], env={}, console=console) == 0
    row = next(line for line in console.export_text().splitlines() if "fused_mlp" in line)
    assert "unsupported" in row and "not on this CPU: needs bf16" in row
    results.append(ops.Outcome(name="rms_norm_2", status="fail", detail="off by 3 ulp"))
    assert verify_cli.main([], env={}, console=Console(record=True, width=300)) == 1
    assert capsys.readouterr().err == ""
