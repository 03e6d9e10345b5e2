"""flagtree-verify: the torch references against plain formulas, the install checks, the exit statuses."""

from __future__ import annotations

import importlib.util
import sys
import types
from importlib.machinery import ModuleSpec

import pytest

from flagtree_doctor.target import BUILDER_METHODS
from flagtree_doctor.verify import cli as verify_cli
from flagtree_doctor.verify import ops
from flagtree_doctor.verify.ops import CASES, OP_NAMES, check_install
from flagtree_feedstock import cli as feedstock_cli


def test_flagtree_absent_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("a triton package is installed here")
    assert verify_cli.main([]) == 2
    assert capsys.readouterr().err == (
        "flagtree-verify: FlagTree is not installed (no module 'triton'); nothing to verify "
        "(fix: conda install flagtree-cpu)\n"
    )
    assert feedstock_cli.main(["verify"]) == 2
    assert capsys.readouterr().err.startswith("flagtree-feedstock verify: FlagTree is not installed")


def test_unknown_op_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        verify_cli.main(["gemm"])
    assert stop.value.code == 2
    assert "unknown op 'gemm'" in capsys.readouterr().err


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
    monkeypatch.setattr(verify_cli, "run_ops", lambda names, repeat: ran.append(tuple(names)) or [])
    outcomes = verify_cli.verify(triton, OP_NAMES, repeat=1, blockers=["the CPU lacks sve2"])
    assert (outcomes[-1].name, outcomes[-1].status) == ("ops", "skip")
    assert outcomes[-1].detail.startswith("kernels not run: the CPU lacks sve2")
    assert ran == []
    verify_cli.verify(triton, ("rms_norm",), repeat=1, blockers=[])
    assert ran == [("rms_norm",)]


def test_kernel_blockers_follow_the_doctor(tmp_path) -> None:
    from flagtree_doctor.cpu import CoreLayout, CpuFacts, kernel_blockers  # noqa: PLC0415
    from flagtree_doctor.target import PACKAGE_TARGET  # noqa: PLC0415

    def facts(machine: str, features: frozenset[str], bits: int | None) -> CpuFacts:
        layout = CoreLayout(big=(0,), little=(), basis="all alike")
        return CpuFacts(machine=machine, features=features, feature_source="test", sve_vector_bits=bits,
                        cores=(), layout=layout)  # fmt: skip

    armv9 = PACKAGE_TARGET.required_features
    assert kernel_blockers(facts("aarch64", armv9, 128)) == []
    assert kernel_blockers(facts("x86_64", frozenset(), None)) == ["this machine is x86_64, not aarch64"]
    (no_sve2,) = kernel_blockers(facts("aarch64", armv9 - {"sve2"}, 128))
    assert no_sve2.startswith("the CPU lacks sve2 (libtriton")
    assert kernel_blockers(facts("aarch64", armv9, 256)) == ["SVE vectors are 256 bits; the code assumes 128"]
