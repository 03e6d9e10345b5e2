"""flagtree-verify's ops end to end on x86: ``run_ops`` and the real ``_kernels.py`` over a stand-in triton.

The stand-in (``_verify_standin.py``) runs each TLE op in torch, reaching memory the way the runtime does, so
a kernel called with arguments in the wrong order, a buffer of the wrong size or element type, or a size
operand that is not a constant fails here as it would on Arm; the references are compared with its results
under verify's own tolerances. What it cannot show is in its docstring.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from _tools import TORCH_INSTALL, require_module

require_module("torch", TORCH_INSTALL)

import torch

from _verify_standin import KERNELS_MODULE, TLE_OPS_MODULE, Launch, StandIn, StandInError, install
from flagtree_doctor.verify import references
from flagtree_doctor.verify.ops import NOT_EXERCISED, OP_NAMES, Outcome, run_ops


@dataclass(frozen=True)
class Call:
    function: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Run:
    outcomes: list[Outcome]
    launches: list[Launch]
    calls: list[Call]


def _recorded(function: Callable[..., Any], calls: list[Call]) -> Callable[..., Any]:
    signature = inspect.signature(function)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(Call(function.__name__, dict(bound.arguments)))
        return function(*args, **kwargs)

    return wrapper


@pytest.fixture(scope="session")
def runs() -> dict[str, Run]:
    """``run_ops`` for each op alone, with what its kernels were launched with and its references called with.

    The fake modules are removed again before any other test runs.
    """
    result = {}
    with pytest.MonkeyPatch.context() as patch:
        standin = install(patch)
        calls: list[Call] = []
        for name in {wiring.reference for wiring in WIRING.values()}:
            patch.setattr(references, name, _recorded(getattr(references, name), calls))
        for op in OP_NAMES:
            standin.launches.clear()
            calls.clear()
            outcomes = run_ops((op,), repeat=1)
            result[op] = Run(outcomes=outcomes, launches=list(standin.launches), calls=list(calls))
    return result


@pytest.mark.parametrize("op", OP_NAMES)
def test_op_passes_against_its_reference_on_the_standin(op: str, runs: dict[str, Run]) -> None:
    outcome, *rest = runs[op].outcomes
    assert (outcome.name, outcome.status) == (op, "pass"), outcome.detail
    assert (
        outcome.max_abs_error is not None and outcome.op_ms is not None and outcome.reference_ms is not None
    )
    assert [(o.name, o.status) for o in rest] == [(name, "skip") for name in NOT_EXERCISED]


@dataclass(frozen=True)
class Wiring:
    """How an op's kernel and its reference must be fed: the same tensors, sizes that match them."""

    kernel: str
    reference: str
    same: tuple[tuple[str, str], ...]  # (kernel parameter, reference parameter)
    sizes: Callable[[dict[str, Any]], dict[str, object]]  # kernel size operands, from the reference's args


def _weights(args: dict[str, Any], name: str = "b") -> dict[str, object]:
    k, n = args[name].shape
    return {"K": k, "N": n}


WIRING = {
    "rms_norm": Wiring(
        "rms_norm_kernel", "rms_norm", (("x_ptr", "x"), ("w_ptr", "weight"), ("EPS", "eps")),
        lambda r: {"D": r["x"].numel()},
    ),
    "swiglu": Wiring(
        "swiglu_kernel", "swiglu", (("gate_ptr", "gate"), ("up_ptr", "up")), lambda r: {"N": r["gate"].numel()}
    ),
    "sdot_pack_weights": Wiring("sdot_pack_weights_kernel", "pack_sdot_weights", (("b_ptr", "b"),), _weights),
    "sdot_gemv": Wiring("sdot_gemv_kernel", "sdot_gemv", (("a_ptr", "a"), ("packed_ptr", "b")), _weights),
    "sdot_gemv_fused_bf16": Wiring(
        "sdot_gemv_fused_bf16_kernel", "sdot_gemv_fused_bf16",
        (("x_ptr", "x"), ("packed_ptr", "b"), ("w_scale_ptr", "w_scale")), _weights,
    ),
    "fused_mlp": Wiring(
        "fused_mlp_kernel", "fused_mlp",
        (("x_ptr", "x"), ("gate_ptr", "gate_b"), ("up_ptr", "up_b"), ("gate_scale_ptr", "gate_scale"),
         ("up_scale_ptr", "up_scale")),
        lambda r: _weights(r, "gate_b"),
    ),
    "flash_attn_decode": Wiring(
        "flash_attn_decode_kernel", "flash_attn_decode",
        (("q_ptr", "q"), ("k_ptr", "k"), ("v_ptr", "v"), ("SM_SCALE", "sm_scale")),
        lambda r: {"seq_len": r["k"].shape[1], "HEAD_DIM": r["q"].shape[1], "NUM_HEADS": r["q"].shape[0],
                   "NUM_KV_HEADS": r["k"].shape[0], "STRIDE_KN": r["k"].stride(1), "STRIDE_VN": r["v"].stride(1)},
    ),
    "neon_sdot": Wiring(
        "neon_sdot_kernel", "neon_sdot", (("acc_ptr", "acc"), ("a_ptr", "a"), ("b_ptr", "b")), lambda r: {}
    ),
}  # fmt: skip


def _unpacked(launches: list[Launch], value: object) -> object:
    """The row-major weights a packed buffer was made from (by an ``sdot_pack_weights`` launch), else ``value``."""
    for launch in launches:
        if launch.kernel == "sdot_pack_weights_kernel" and launch.args["packed_ptr"] is value:
            return launch.args["b_ptr"]
    return value


def test_every_op_has_its_wiring() -> None:
    assert set(WIRING) == set(OP_NAMES)


@pytest.mark.parametrize("op", OP_NAMES)
def test_reference_is_given_the_kernels_tensors(op: str, runs: dict[str, Run]) -> None:
    """The reference reads the very tensors the kernel reads (weights: the ones its packed buffer came from)."""
    wiring, run = WIRING[op], runs[op]
    launch = next(launch for launch in run.launches if launch.kernel == wiring.kernel)
    call = next(call for call in run.calls if call.function == wiring.reference)
    for kernel_arg, reference_arg in wiring.same:
        given, expected = _unpacked(run.launches, launch.args[kernel_arg]), call.args[reference_arg]
        if isinstance(expected, torch.Tensor):
            assert given is expected, (
                f"{wiring.kernel}'s {kernel_arg} is not {wiring.reference}'s {reference_arg}"
            )
        else:
            assert given == expected, (
                f"{wiring.kernel}'s {kernel_arg}={given!r}, {reference_arg}={expected!r}"
            )
    sizes = {name: launch.args[name] for name in wiring.sizes(call.args)}
    assert sizes == wiring.sizes(call.args)


# --- the stand-in's own checks: what makes a wiring mistake fail above -------------------------------------


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    return install(monkeypatch)


@pytest.fixture
def kernels(standin: StandIn) -> Any:
    return importlib.import_module(KERNELS_MODULE)


def bf16(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bfloat16)


def test_the_standin_refuses_a_wrong_element_type(kernels: Any) -> None:
    x, w, out = bf16(1, 2, 3, 4), bf16(1, 1, 1, 1), torch.empty(4, dtype=torch.float32)
    with pytest.raises(
        StandInError, match=r"out_ptr points to torch.float32; the runtime reads it as torch.bfloat16"
    ):
        kernels.rms_norm_kernel[(1,)](x, w, out, D=4, EPS=1e-6)


def test_the_standin_refuses_memory_past_the_end(kernels: Any) -> None:
    gate, up, out = bf16(1, 2, 3, 4), bf16(1, 2), torch.empty(4, dtype=torch.bfloat16)
    with pytest.raises(StandInError, match=r"up_ptr spans 4 elements, the tensor's memory 2"):
        kernels.swiglu_kernel[(1,)](gate, up, out, N=4)
    # a view reaches the memory of its base, as a raw pointer does
    base = bf16(0, 1, 2, 3, 4, 5, 6, 7)
    kernels.swiglu_kernel[(1,)](base[4:], base[4:], out, N=4)
    with pytest.raises(StandInError, match=r"gate_ptr spans 8 elements, the tensor's memory 4"):
        kernels.swiglu_kernel[(1,)](base[4:], base, torch.empty(8, dtype=torch.bfloat16), N=8)


def test_the_standin_refuses_a_runtime_size_and_a_runtime_eps(standin: StandIn) -> None:
    triton, tl, tle = (importlib.import_module(m) for m in ("triton", "triton.language", TLE_OPS_MODULE))

    @triton.jit
    def runtime_d(x_ptr, w_ptr, out_ptr, D, EPS: tl.constexpr):
        tle.rms_norm(x_ptr, w_ptr, out_ptr, D, EPS)

    @triton.jit
    def runtime_eps(x_ptr, w_ptr, out_ptr, D: tl.constexpr, EPS):
        tle.rms_norm(x_ptr, w_ptr, out_ptr, D, EPS)

    args = bf16(1, 2, 3, 4), bf16(1, 1, 1, 1), torch.empty(4, dtype=torch.bfloat16)
    with pytest.raises(StandInError, match=r"rms_norm: D is a runtime i32 and the op's operand is I64"):
        runtime_d[(1,)](*args, D=4, EPS=1e-6)
    with pytest.raises(StandInError, match=r"rms_norm: eps is a runtime value"):
        runtime_eps[(1,)](*args, D=4, EPS=1e-6)
    assert [launch.kernel for launch in standin.launches] == ["runtime_d", "runtime_eps"]


def test_a_runtime_sm_scale_is_zero_as_in_tle_ops(standin: StandIn) -> None:
    """tle_ops.flash_attn_decode reads sm_scale only as a constant: a runtime value makes attention uniform."""
    triton, tl, tle = (importlib.import_module(m) for m in ("triton", "triton.language", TLE_OPS_MODULE))

    @triton.jit
    def runtime_scale(q_ptr, k_ptr, v_ptr, out_ptr, seq_len, SM_SCALE, HEAD_DIM: tl.constexpr):  # noqa: PLR0917
        tle.flash_attn_decode(
            q_ptr, k_ptr, v_ptr, out_ptr, seq_len, HEAD_DIM, SM_SCALE, 1, 1, HEAD_DIM, HEAD_DIM
        )

    q = bf16(1, 0, 0, 0)
    k = torch.tensor([[[9, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.bfloat16)
    v = torch.tensor([[[1, 1, 1, 1], [3, 3, 3, 3]]], dtype=torch.bfloat16)
    out = torch.empty(1, 4, dtype=torch.bfloat16)
    runtime_scale[(1,)](q, k, v, out, 2, 1.0, HEAD_DIM=4)
    assert out.tolist() == [[2.0, 2.0, 2.0, 2.0]]  # softmax of (0, 0): the mean of the two rows


def test_a_wrong_reference_fails_the_op(monkeypatch: pytest.MonkeyPatch, standin: StandIn) -> None:
    """The verdict comes from the comparison: a reference with gate and up swapped is a ``fail``."""
    swiglu = references.swiglu
    monkeypatch.setattr(references, "swiglu", lambda gate, up: swiglu(up, gate))
    outcome, *_ = run_ops(("swiglu",), repeat=1)
    assert (outcome.name, outcome.status) == ("swiglu", "fail")


def test_a_kernel_error_is_an_error_row(monkeypatch: pytest.MonkeyPatch, kernels: Any) -> None:
    def broken(**_: object) -> None:
        raise StandInError("boom")

    monkeypatch.setattr(kernels.swiglu_kernel, "fn", broken)
    outcomes = run_ops(("swiglu", "neon_sdot"), repeat=1)
    assert [(o.name, o.status, o.detail) for o in outcomes[:2]] == [
        ("swiglu", "error", "StandInError: boom"),
        ("neon_sdot", "pass", "4 lanes"),
    ]


def test_the_standin_leaves_nothing_behind() -> None:
    """The fake triton, and the kernels imported over it, are gone once the monkeypatch is undone."""
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        install(patch)
        assert importlib.import_module(KERNELS_MODULE).rms_norm_kernel
        assert {"triton", TLE_OPS_MODULE, KERNELS_MODULE} <= set(sys.modules)
    assert not {"triton", TLE_OPS_MODULE, KERNELS_MODULE} & set(sys.modules)
    assert set(sys.modules) <= before | {"flagtree_doctor.verify"}
    assert not hasattr(importlib.import_module("flagtree_doctor.verify"), "_kernels")
