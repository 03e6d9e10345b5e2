"""The verification steps: the install (version, backend, builders), then each TLE op end to end.

Every op runs once in a ``@triton.jit`` kernel (``_kernels.py``) and is compared with the torch reference
(``references.py``) under the tolerance stated for its output dtype (``fused_mlp``: for its four bf16
roundings); then both are timed (median of ``repeat`` calls after one warm-up/compile call). Each step is
isolated: an exception is an ``error`` row.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from flagtree_doctor.manifest import UnsupportedOp
from flagtree_doctor.target import BUILDER_METHODS

from . import references
from .references import TOLERANCES

if TYPE_CHECKING:
    from torch import Tensor

# unsupported: an op this CPU cannot run on its runtime (flagtree-doctor's tle-ops check says why); not a failure.
Verdict = Literal["pass", "fail", "error", "skip", "unsupported"]
EXPECTED_TRITON_SERIES = "3.3."
SEED = 20260604


@dataclass(frozen=True, kw_only=True)
class Outcome:
    name: str
    status: Verdict
    detail: str
    tolerance: str | None = None
    max_abs_error: float | None = None
    op_ms: float | None = None
    reference_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One op call and its reference; ``baseline`` is what the timing compares against (the reference)."""

    shape: str
    dtype: str  # a key of TOLERANCES: the output dtype, or what sets the op's tolerance apart
    op: Callable[[], Tensor]
    reference: Callable[[], Tensor]
    baseline: Callable[[], object] | None = None


def check_install(triton: ModuleType) -> list[Outcome]:
    """Upstream's verification: the triton version, the registered ``cpu`` backend, the 10 builders."""
    return [
        _isolated("triton-version", lambda: _version(triton)),
        _isolated("cpu-backend", lambda: _backend(triton)),
        _isolated("builders", lambda: _builders(triton)),
    ]


def _version(triton: ModuleType) -> Outcome:
    version = str(getattr(triton, "__version__", "unknown"))
    ok = version.startswith(EXPECTED_TRITON_SERIES)
    return Outcome(
        name="triton-version",
        status="pass" if ok else "fail",
        detail=f"triton {version}"
        + ("" if ok else f" (FlagTree's cpu backend is {EXPECTED_TRITON_SERIES}x)"),
    )


def _backend(triton: ModuleType) -> Outcome:
    backends = importlib.import_module(f"{triton.__name__}.backends").backends
    ok = "cpu" in backends
    return Outcome(
        name="cpu-backend",
        status="pass" if ok else "fail",
        detail=f"registered backends: {', '.join(sorted(backends)) or 'none'}",
    )


def _builders(triton: ModuleType) -> Outcome:
    builder = importlib.import_module(f"{triton.__name__}._C.libtriton").ir.builder
    missing = [name for name in BUILDER_METHODS if not hasattr(builder, name)]
    return Outcome(
        name="builders",
        status="fail" if missing else "pass",
        detail=f"missing {', '.join(missing)}"
        if missing
        else f"all {len(BUILDER_METHODS)} create_cpu_* present",
    )


def _isolated(name: str, step: Callable[[], Outcome]) -> Outcome:
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - one broken step must not hide the others
        return Outcome(name=name, status="error", detail=f"{type(exc).__name__}: {exc}")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def judge(name: str, trial: Trial, *, repeat: int) -> Outcome:
    """Run ``trial`` once, compare it with its reference, and time both."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    tolerance = TOLERANCES[trial.dtype]
    got, want = trial.op(), trial.reference()
    if got.shape != want.shape:
        return Outcome(name=name, status="fail", detail=f"shape {tuple(got.shape)} != {tuple(want.shape)}")
    error = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    close = torch.allclose(got.double(), want.double(), rtol=tolerance.rtol, atol=tolerance.atol)
    return Outcome(
        name=name,
        status="pass" if close else "fail",
        detail=trial.shape,
        tolerance=f"{trial.dtype}: {tolerance.describe()}",
        max_abs_error=error,
        op_ms=median_ms(trial.op, repeat),
        reference_ms=median_ms(trial.baseline or trial.reference, repeat),
    )


class _Inputs:
    """Seeded random inputs, so every run compares the same numbers."""

    def __init__(self) -> None:
        import torch  # noqa: PLC0415 - lazy: the base install has no torch

        self.torch = torch
        self.gen = torch.Generator().manual_seed(SEED)

    def bf16(self, *shape: int) -> Tensor:
        return self.torch.randn(*shape, generator=self.gen).to(self.torch.bfloat16)

    def int8(self, *shape: int) -> Tensor:
        return self.torch.randint(-128, 128, shape, generator=self.gen, dtype=self.torch.int8)

    def scales(self, n: int) -> Tensor:
        return self.torch.rand(n, generator=self.gen, dtype=self.torch.float32) / 64

    def empty(self, *shape: int, dtype: str) -> Tensor:
        return self.torch.empty(*shape, dtype=getattr(self.torch, dtype))


def _packed(kernels: ModuleType, inputs: _Inputs, b: Tensor) -> Tensor:
    k, n = b.shape
    out = inputs.empty(k * n, dtype="int8")
    kernels.sdot_pack_weights_kernel[(1,)](b, out, K=k, N=n)
    return out


def _rms_norm(kernels: ModuleType, inputs: _Inputs) -> Trial:
    d, eps = 4096, 1e-6
    x, w, out = inputs.bf16(d), inputs.bf16(d), inputs.empty(d, dtype="bfloat16")

    def op() -> Tensor:
        kernels.rms_norm_kernel[(1,)](x, w, out, D=d, EPS=eps)
        return out

    return Trial(shape=f"D={d}", dtype="bfloat16", op=op, reference=lambda: references.rms_norm(x, w, eps))


def _swiglu(kernels: ModuleType, inputs: _Inputs) -> Trial:
    n = 6144
    gate, up, out = inputs.bf16(n), inputs.bf16(n), inputs.empty(n, dtype="bfloat16")

    def op() -> Tensor:
        kernels.swiglu_kernel[(1,)](gate, up, out, N=n)
        return out

    return Trial(shape=f"N={n}", dtype="bfloat16", op=op, reference=lambda: references.swiglu(gate, up))


def _sdot_pack_weights(kernels: ModuleType, inputs: _Inputs) -> Trial:
    k, n = 1024, 512
    b = inputs.int8(k, n)
    return Trial(
        shape=f"K={k} N={n}",
        dtype="int8",
        op=lambda: _packed(kernels, inputs, b),
        reference=lambda: references.pack_sdot_weights(b),
    )


def _sdot_gemv(kernels: ModuleType, inputs: _Inputs) -> Trial:
    k, n = 2048, 1024
    a, b, c = inputs.int8(k), inputs.int8(k, n), inputs.empty(n, dtype="int32")
    b_packed = _packed(kernels, inputs, b)

    def op() -> Tensor:
        kernels.sdot_gemv_kernel[(1,)](a, b_packed, c, K=k, N=n)
        return c

    return Trial(shape=f"K={k} N={n}", dtype="int32", op=op, reference=lambda: references.sdot_gemv(a, b))


def _sdot_gemv_fused_bf16(kernels: ModuleType, inputs: _Inputs) -> Trial:
    k, n = 2048, 1024
    x, b, w_scale = inputs.bf16(k), inputs.int8(k, n), inputs.scales(n)
    out, b_packed = inputs.empty(n, dtype="bfloat16"), _packed(kernels, inputs, b)

    def op() -> Tensor:
        kernels.sdot_gemv_fused_bf16_kernel[(1,)](x, b_packed, w_scale, out, K=k, N=n)
        return out

    return Trial(
        shape=f"K={k} N={n}",
        dtype="bfloat16",
        op=op,
        reference=lambda: references.sdot_gemv_fused_bf16(x, b, w_scale),
    )


def _fused_mlp(kernels: ModuleType, inputs: _Inputs) -> Trial:
    k, n = 2048, 2048
    x, gate_b, up_b = inputs.bf16(k), inputs.int8(k, n), inputs.int8(k, n)
    gate_s, up_s = inputs.scales(n), inputs.scales(n)
    gate_p, up_p = _packed(kernels, inputs, gate_b), _packed(kernels, inputs, up_b)
    out = inputs.empty(n, dtype="bfloat16")

    def op() -> Tensor:
        kernels.fused_mlp_kernel[(1,)](x, gate_p, up_p, gate_s, up_s, out, K=k, N=n)
        return out

    return Trial(
        shape=f"K={k} N={n}",
        dtype="bfloat16, 4 roundings",
        op=op,
        reference=lambda: references.fused_mlp(x, gate_b, up_b, gate_s, up_s),
    )


def _flash_attn_decode(kernels: ModuleType, inputs: _Inputs) -> Trial:
    heads, kv_heads, seq, dim = 16, 4, 257, 128
    scale = dim**-0.5
    q, k = inputs.bf16(heads, dim), inputs.bf16(kv_heads, seq, dim)
    # v's rows lie 2 * dim apart (a view into a wider cache), so the two strides differ and both are used
    v = inputs.bf16(kv_heads, seq, 2 * dim)[..., :dim]
    out = inputs.empty(heads, dim, dtype="bfloat16")

    def op() -> Tensor:
        kernels.flash_attn_decode_kernel[(1,)](
            q, k, v, out, seq, HEAD_DIM=dim, SM_SCALE=scale, NUM_HEADS=heads,
            NUM_KV_HEADS=kv_heads, STRIDE_KN=k.stride(1), STRIDE_VN=v.stride(1),
        )  # fmt: skip
        return out

    def sdpa() -> object:  # what the op replaces: ATen's SDPA for one query row, GQA expanded
        group = heads // kv_heads
        return inputs.torch.nn.functional.scaled_dot_product_attention(
            q[:, None, :], k.repeat_interleave(group, 0), v.repeat_interleave(group, 0), scale=scale
        )

    return Trial(
        shape=f"heads={heads} kv_heads={kv_heads} seq={seq} dim={dim} v_stride={v.stride(1)}",
        dtype="bfloat16",
        op=op,
        reference=lambda: references.flash_attn_decode(q, k, v, scale),
        baseline=sdpa,
    )


def _neon_sdot(kernels: ModuleType, inputs: _Inputs) -> Trial:
    acc = inputs.torch.randint(-1000, 1000, (4,), generator=inputs.gen, dtype=inputs.torch.int32)
    a, b, out = inputs.int8(16), inputs.int8(16), inputs.empty(4, dtype="int32")

    def op() -> Tensor:
        kernels.neon_sdot_kernel[(1,)](acc, a, b, out)
        return out

    return Trial(shape="4 lanes", dtype="int32", op=op, reference=lambda: references.neon_sdot(acc, a, b))


CASES: dict[str, Callable[[ModuleType, _Inputs], Trial]] = {
    "rms_norm": _rms_norm,
    "swiglu": _swiglu,
    "sdot_pack_weights": _sdot_pack_weights,
    "sdot_gemv": _sdot_gemv,
    "sdot_gemv_fused_bf16": _sdot_gemv_fused_bf16,
    "fused_mlp": _fused_mlp,
    "flash_attn_decode": _flash_attn_decode,
    "neon_sdot": _neon_sdot,
}
OP_NAMES: tuple[str, ...] = tuple(CASES)
# The TLE ops (flagtree_doctor.target.TLE_OP_FUNCTIONS) each step's kernels call: the SDOT steps pack their
# weights first; neon_sdot's tle_ops.sdot is the SDOT instruction inline and calls no runtime function.
USES: dict[str, tuple[str, ...]] = {
    "rms_norm": ("rms_norm",),
    "swiglu": ("swiglu",),
    "sdot_pack_weights": ("sdot_pack_weights",),
    "sdot_gemv": ("sdot_pack_weights", "sdot_gemv"),
    "sdot_gemv_fused_bf16": ("sdot_pack_weights", "sdot_gemv_fused_bf16"),
    "fused_mlp": ("sdot_pack_weights", "fused_mlp"),
    "flash_attn_decode": ("flash_attn_decode",),
    "neon_sdot": (),
}
# Whole-model ops: they need a transformer's worth of packed weights, caches and RoPE tables.
NOT_EXERCISED: tuple[str, ...] = ("fused_transformer_layer", "fused_decode_step")


def unsupported_steps(unsupported: Iterable[UnsupportedOp]) -> dict[str, str]:
    """The steps that call an op this CPU cannot run, each with why (the ops' descriptions)."""
    by_op = {u.op.removeprefix("tle_ops."): u for u in unsupported if u.op.startswith("tle_ops.")}
    return {
        step: "; ".join(by_op[op].describe() for op in ops if op in by_op)
        for step, ops in USES.items()
        if any(op in by_op for op in ops)
    }


def run_ops(
    names: tuple[str, ...], *, repeat: int, unsupported: Mapping[str, str] | None = None
) -> list[Outcome]:
    """Each named op end to end (FlagTree and torch must be importable); ``unsupported`` (step -> why) are
    listed as such, not run."""
    kernels = importlib.import_module("flagtree_doctor.verify._kernels")
    inputs = _Inputs()
    outcomes = []
    for name in names:
        if unsupported and name in unsupported:
            outcomes.append(
                Outcome(name=name, status="unsupported", detail=f"not on this CPU: {unsupported[name]}")
            )
            continue

        def step(name: str = name) -> Outcome:
            return judge(name, CASES[name](kernels, inputs), repeat=repeat)

        outcomes.append(_isolated(name, step))
    outcomes += [
        Outcome(name=name, status="skip", detail="not exercised: needs a full model's weights")
        for name in NOT_EXERCISED
    ]
    return outcomes
