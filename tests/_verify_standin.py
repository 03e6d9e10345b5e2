"""A stand-in for the part of FlagTree that flagtree-verify's kernels use, so ``run_ops`` runs on x86.

``install`` puts fake modules in ``sys.modules``: ``triton`` (``jit``), ``triton.language`` (``constexpr``,
``arange``, ``load``, ``store``) and ``triton.language.extra.cpu.tle_ops`` (the eight TLE ops the kernels
call, in torch). The real ``flagtree_doctor/verify/_kernels.py`` is then imported over them, so every kernel
body runs as written and calls its TLE op with the arguments it names; ``ops.py`` runs unchanged.

What it does as FlagTree does:

- A launch ``kernel[grid](*args, **kwargs)`` binds the arguments by the kernel's signature (a missing or
  extra one is a ``TypeError``). A tensor becomes a pointer to its first element, with the tensor's element
  type; a parameter annotated ``tl.constexpr`` becomes a compile-time constant; any other number a runtime
  scalar.
- Each TLE op reaches memory as ``libTritonCPURuntime.so`` does: from the pointer on, through the tensor's
  storage (its memory order, not its shape), as many elements as its size operands say. It raises
  ``StandInError`` where the real kernel would fail to compile or silently touch the wrong memory: a pointer
  to another element type than the C function reads, memory past the end of the tensor's storage, a
  runtime int where the op takes an I64 operand (``tle_ops`` casts only ``flash_attn_decode``'s; the MLIR
  verifier rejects an i32), a runtime ``eps`` (``float()`` of a value has no meaning at compile time), a
  head size the runtime's 256-float stack buffers cannot hold. ``flash_attn_decode`` turns a runtime
  ``sm_scale`` into 0.0, as its ``tle_ops`` wrapper does.
- The arithmetic follows kevinzs2048/flagtree-cpu as read for issue 17: ``runtime_sdot.cpp``,
  ``tle_ops.py``, ``NeonSdotToLLVM.cpp`` and ``TritonCPUOps.td`` at the pin 19cede7e; where the search
  index holds no copy at the pin, the versions it holds (``runtime_swiglu.cpp`` and the rms_norm of
  ``runtime_transformer_layer.cpp`` at 6e261d50, ``runtime_flash_attn_decode.cpp`` at 0fdf06ea, the older
  of the two ``runtime_fused_mlp.cpp``). That is: fp32 throughout; bf16 results truncated
  (``vshrn_n_u32(bits, 16)``), except ``flash_attn_decode``'s (rounded to nearest even); ``fused_mlp`` in
  fp32 up to one truncation at the end; activations quantized per tensor with ``vcvtnq_s32_f32`` (round
  half to even) over the multiple-of-4 part, ``absmax`` floored at 1e-8 (``sdot_gemv_fused_bf16``, whose
  absmax also reads the tail) or 1e-10 (``fused_mlp``); SDOT packing and GEMV over ``K // 4`` and
  ``N // 4`` blocks, the tails left out.

It is written from those semantics, not from ``references.py``: packing by the C source's index formula,
softmax in one piece instead of online, the SDOT lanes as a loop. It records each launch, so a test can
check that a reference was given the tensors the kernel was.

What it cannot show: that the kernels compile (Triton's front end, the TritonCPU passes, LLVM, the C
launcher); the runtime's real numerics (the NEON reduction order, swiglu's and fused_mlp's fast exp and
reciprocal estimates, fused_mlp's bf16 boundaries, which differ between the stored versions); Triton's
specialisation of ints (a runtime 1 becomes a constant, a value past 2**31 an i64); OpenMP's split of the
work; anything about speed. Those need the Arm runners (the package tests with FLAGTREE_REQUIRE_KERNELS=1).
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

KERNELS_MODULE = "flagtree_doctor.verify._kernels"
TLE_OPS_MODULE = "triton.language.extra.cpu.tle_ops"
MAX_HEAD_DIM = 256  # flash_attn_decode's q_fp32[256] and acc[256]
QUANT_FLOOR_SDOT = 1e-8  # runtime_sdot.cpp at 19cede7e: if (amax < 1e-8f) amax = 1e-8f
QUANT_FLOOR_MLP = 1e-10  # runtime_fused_mlp.cpp (both stored versions): if (absmax < 1e-10f) ...


class StandInError(RuntimeError):
    """What the real kernel would get wrong: a compile error, or memory it must not touch."""


class Constexpr:
    """A ``tl.constexpr`` parameter's value inside the kernel body (also the annotation itself)."""

    def __init__(self, value: object) -> None:
        self.value = value


@dataclass(frozen=True)
class RuntimeScalar:
    """A number passed to a parameter without ``tl.constexpr``: an i32/fp32 value known only at run time."""

    value: int | float


@dataclass(frozen=True)
class Pointer:
    """A kernel's pointer argument: the tensor it came from, pointing to its first element."""

    tensor: torch.Tensor

    def __add__(self, offsets: torch.Tensor) -> Block:
        return Block(self, offsets)


@dataclass(frozen=True)
class Block:
    """``pointer + tl.arange(...)``: a block of pointers, one per offset."""

    pointer: Pointer
    offsets: torch.Tensor


@dataclass
class Launch:
    kernel: str
    args: dict[str, object]  # as bound by the kernel's signature, before any conversion


@dataclass
class StandIn:
    """The fake modules and what the kernels launched."""

    launches: list[Launch] = field(default_factory=list)

    def modules(self) -> dict[str, types.ModuleType]:
        triton = types.ModuleType("triton")
        triton.jit = lambda fn: JITFunction(fn, self)  # type: ignore[attr-defined]
        language = types.ModuleType("triton.language")
        language.constexpr = Constexpr  # type: ignore[attr-defined]
        language.arange = _arange  # type: ignore[attr-defined]
        language.load = _load  # type: ignore[attr-defined]
        language.store = _store  # type: ignore[attr-defined]
        extra = types.ModuleType("triton.language.extra")
        cpu = types.ModuleType("triton.language.extra.cpu")
        tle_ops = types.ModuleType(TLE_OPS_MODULE)
        for name, op in TLE_OPS.items():
            setattr(tle_ops, name, op)
        triton.language = language  # type: ignore[attr-defined]
        language.extra = extra  # type: ignore[attr-defined]
        extra.cpu = cpu  # type: ignore[attr-defined]
        cpu.tle_ops = tle_ops  # type: ignore[attr-defined]
        return {m.__name__: m for m in (triton, language, extra, cpu, tle_ops)}


def install(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    """The fake ``triton`` in ``sys.modules``, and ``_kernels`` imported afresh over it, until ``monkeypatch`` undoes.

    A module imported while the fakes are in place is removed again too: each entry is first set (which
    records what was there, or that nothing was) and then deleted.
    """
    standin = StandIn()
    for name, module in standin.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    package = importlib.import_module(KERNELS_MODULE.rpartition(".")[0])
    monkeypatch.setitem(sys.modules, KERNELS_MODULE, package)
    monkeypatch.delitem(sys.modules, KERNELS_MODULE)
    monkeypatch.setattr(package, "_kernels", None, raising=False)
    monkeypatch.delattr(package, "_kernels")
    return standin


class JITFunction:
    """``@triton.jit``: ``kernel[grid](...)`` runs the body once per program, on converted arguments."""

    def __init__(self, fn: Callable[..., None], standin: StandIn) -> None:
        self.fn = fn
        self.signature = inspect.signature(fn)
        self.standin = standin

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def launch(*args: object, **kwargs: object) -> None:
            bound = self.signature.bind(*args, **kwargs)
            self.standin.launches.append(Launch(self.fn.__name__, dict(bound.arguments)))
            converted = {name: self._convert(name, value) for name, value in bound.arguments.items()}
            for _ in range(math.prod(grid)):
                self.fn(**converted)

        return launch

    def _convert(self, name: str, value: object) -> object:
        annotation = self.signature.parameters[name].annotation
        # Triton reads an annotation as text too (a module with ``from __future__ import annotations``)
        constexpr = annotation is Constexpr or (isinstance(annotation, str) and "constexpr" in annotation)
        if isinstance(value, torch.Tensor):
            if constexpr:
                raise StandInError(f"{self.fn.__name__}: a tensor for the constexpr {name}")
            return Pointer(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StandInError(f"{self.fn.__name__}: {name}={value!r} is neither a tensor nor a number")
        return Constexpr(value) if constexpr else RuntimeScalar(value)


# --- triton.language ---------------------------------------------------------------------------------------


def _value(v: object) -> object:
    return v.value if isinstance(v, Constexpr) else v


def _arange(start: object, end: object) -> torch.Tensor:
    lo, hi = _value(start), _value(end)
    if not (isinstance(lo, int) and isinstance(hi, int)) or (hi - lo) & (hi - lo - 1):
        raise StandInError(f"tl.arange({lo}, {hi}): Triton needs constant bounds a power of 2 apart")
    return torch.arange(lo, hi, dtype=torch.int32)


def _block(where: object) -> Block:
    if not isinstance(where, Block):
        raise StandInError(f"tl.load/tl.store of {type(where).__name__}, not a block of pointers")
    return where


def _load(where: object) -> torch.Tensor:
    block = _block(where)
    dtype = block.pointer.tensor.dtype
    memory = _memory(block.pointer, dtype, int(block.offsets.max()) + 1, "tl.load", "pointer")
    return memory[block.offsets.long()].clone()


def _store(where: object, value: torch.Tensor) -> None:
    block = _block(where)
    dtype = block.pointer.tensor.dtype
    memory = _memory(block.pointer, dtype, int(block.offsets.max()) + 1, "tl.store", "pointer")
    memory[block.offsets.long()] = value.to(dtype)  # tl.store casts to the pointer's element type


# --- memory and operands -----------------------------------------------------------------------------------


def _memory(pointer: Pointer, dtype: torch.dtype, count: int, op: str, operand: str) -> torch.Tensor:
    """The ``count`` elements of ``dtype`` at ``pointer``: a view of the tensor's storage, as C sees it."""
    tensor = pointer.tensor
    if tensor.dtype != dtype:
        raise StandInError(f"{op}: {operand} points to {tensor.dtype}; the runtime reads it as {dtype}")
    size = tensor.element_size()
    start = tensor.storage_offset() * size
    storage = tensor.untyped_storage()
    available = (storage.nbytes() - start) // size
    if count < 0 or count > available:
        raise StandInError(
            f"{op}: {operand} spans {count} elements, the tensor's memory {available} from the pointer"
        )
    return torch.empty(0, dtype=torch.uint8).set_(storage)[start : start + count * size].view(dtype)


def _pointer(op: str, name: str, value: object) -> Pointer:
    if not isinstance(value, Pointer):
        raise StandInError(f"{op}: {name} is {type(value).__name__}, not a pointer")
    return value


def _i64(op: str, name: str, value: object, *, casts: bool = False) -> int:
    """An I64 operand: a constexpr int, or (where ``tle_ops`` casts it) a runtime int."""
    if isinstance(value, RuntimeScalar) and not casts:
        raise StandInError(
            f"{op}: {name} is a runtime i32 and the op's operand is I64 (tle_ops casts only "
            "flash_attn_decode's ints); make it tl.constexpr"
        )
    raw = value.value if isinstance(value, Constexpr | RuntimeScalar) else value
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise StandInError(f"{op}: {name}={raw!r} is not an int")
    return raw


def _f32_attr(op: str, name: str, value: object, *, runtime_becomes_zero: bool = False) -> torch.Tensor:
    """An F32Attr: a compile-time float, rounded to fp32."""
    if isinstance(value, RuntimeScalar):
        if not runtime_becomes_zero:
            raise StandInError(f"{op}: {name} is a runtime value; the op takes a compile-time float")
        return torch.tensor(0.0)  # tle_ops.flash_attn_decode: sm_f = 0.0 for a handle
    raw = _value(value)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise StandInError(f"{op}: {name}={raw!r} is not a number")
    return torch.tensor(float(raw), dtype=torch.float32)


def _truncate_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> bf16 by dropping the low 16 bits, as the runtime's ``vshrn_n_u32(bits, 16)`` does."""
    return (x.float().contiguous().view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)


def _sdot_unpacked(packed: torch.Tensor, k4: int, n4: int) -> torch.Tensor:
    """``B[k, n]`` of SDOT-packed bytes: block ``(k // 4, n // 4)``, byte ``(n % 4) * 4 + k % 4``."""
    k = torch.arange(4 * k4)[:, None]
    n = torch.arange(4 * n4)[None, :]
    return packed[((k // 4) * n4 + n // 4) * 16 + (n % 4) * 4 + k % 4]


def _quantized(x: torch.Tensor, k4: int, absmax_over: int, floor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor int8 of the first ``4 * k4`` values (round half to even) and the fp32 scale."""
    absmax = torch.maximum(x[:absmax_over].abs().max(), torch.tensor(floor, dtype=torch.float32))
    inverse = torch.tensor(127.0, dtype=torch.float32) / absmax
    q = torch.round(x[: 4 * k4] * inverse).clamp(-128, 127).long()
    return q, absmax / torch.tensor(127.0, dtype=torch.float32)


def _gemv(q: torch.Tensor, packed: torch.Tensor, k4: int, n4: int) -> torch.Tensor:
    """Exact int32 ``q @ B`` over the 4-blocks, wrapping like SDOT's 32-bit lanes."""
    return (q[:, None] * _sdot_unpacked(packed, k4, n4).long()).sum(0).to(torch.int32)


# --- the TLE ops ---------------------------------------------------------------------------------------------


def rms_norm(x_ptr: object, weight_ptr: object, out_ptr: object, D: object, eps: object) -> None:
    op = "rms_norm"
    d, e = _i64(op, "D", D), _f32_attr(op, "eps", eps)
    x = _memory(_pointer(op, "x_ptr", x_ptr), torch.bfloat16, d, op, "x_ptr").float()
    w = _memory(_pointer(op, "weight_ptr", weight_ptr), torch.bfloat16, d, op, "weight_ptr").float()
    scale = 1.0 / torch.sqrt((x * x).sum() / d + e)
    _memory(_pointer(op, "out_ptr", out_ptr), torch.bfloat16, d, op, "out_ptr").copy_(
        _truncate_to_bf16(x * scale * w)
    )


def swiglu(gate_ptr: object, up_ptr: object, out_ptr: object, N: object) -> None:
    op = "swiglu"
    n = _i64(op, "N", N)
    g = _memory(_pointer(op, "gate_ptr", gate_ptr), torch.bfloat16, n, op, "gate_ptr").float()
    u = _memory(_pointer(op, "up_ptr", up_ptr), torch.bfloat16, n, op, "up_ptr").float()
    out = _memory(_pointer(op, "out_ptr", out_ptr), torch.bfloat16, n, op, "out_ptr")
    out.copy_(_truncate_to_bf16(g / (1.0 + torch.exp(-g)) * u))


def sdot_pack_weights(b_ptr: object, b_packed_ptr: object, K: object, N: object) -> None:
    op = "sdot_pack_weights"
    k, n = _i64(op, "K", K), _i64(op, "N", N)
    k4, n4 = k // 4, n // 4
    b = _memory(_pointer(op, "b_ptr", b_ptr), torch.int8, k * n, op, "b_ptr")
    kb, nb, ni, ki = torch.meshgrid(
        torch.arange(k4), torch.arange(n4), torch.arange(4), torch.arange(4), indexing="ij"
    )
    packed = b[((kb * 4 + ki) * n + nb * 4 + ni).reshape(-1)]  # dst[(kb*N4+nb)*16 + ni*4+ki]
    _memory(_pointer(op, "b_packed_ptr", b_packed_ptr), torch.int8, k4 * n4 * 16, op, "b_packed_ptr").copy_(
        packed
    )


def sdot_gemv(a_ptr: object, b_packed_ptr: object, c_ptr: object, K: object, N: object) -> None:
    op = "sdot_gemv"
    k4, n4 = _i64(op, "K", K) // 4, _i64(op, "N", N) // 4
    a = _memory(_pointer(op, "a_ptr", a_ptr), torch.int8, 4 * k4, op, "a_ptr").long()
    packed = _memory(_pointer(op, "b_packed_ptr", b_packed_ptr), torch.int8, k4 * n4 * 16, op, "b_packed_ptr")
    _memory(_pointer(op, "c_ptr", c_ptr), torch.int32, 4 * n4, op, "c_ptr").copy_(_gemv(a, packed, k4, n4))


def sdot_gemv_fused_bf16(  # noqa: PLR0917 - tle_ops' signature
    x_ptr: object, b_packed_ptr: object, w_scale_ptr: object, out_ptr: object, K: object, N: object
) -> None:
    op = "sdot_gemv_fused_bf16"
    k, n4 = _i64(op, "K", K), _i64(op, "N", N) // 4
    k4 = k // 4
    x = _memory(_pointer(op, "x_ptr", x_ptr), torch.bfloat16, k, op, "x_ptr").float()
    packed = _memory(_pointer(op, "b_packed_ptr", b_packed_ptr), torch.int8, k4 * n4 * 16, op, "b_packed_ptr")
    w_scale = _memory(_pointer(op, "w_scale_ptr", w_scale_ptr), torch.float32, 4 * n4, op, "w_scale_ptr")
    q, x_scale = _quantized(x, k4, absmax_over=k, floor=QUANT_FLOOR_SDOT)
    result = _gemv(q, packed, k4, n4).float() * x_scale * w_scale
    _memory(_pointer(op, "out_ptr", out_ptr), torch.bfloat16, 4 * n4, op, "out_ptr").copy_(
        _truncate_to_bf16(result)
    )


def fused_mlp(  # noqa: PLR0917 - tle_ops' signature
    x_ptr: object,
    gate_packed_ptr: object,
    up_packed_ptr: object,
    gate_scale_ptr: object,
    up_scale_ptr: object,
    out_ptr: object,
    K: object,
    N: object,
) -> None:
    op = "fused_mlp"
    k4, n4 = _i64(op, "K", K) // 4, _i64(op, "N", N) // 4
    x = _memory(_pointer(op, "x_ptr", x_ptr), torch.bfloat16, 4 * k4, op, "x_ptr").float()
    projections = [
        (
            _memory(_pointer(op, packed_name, packed), torch.int8, k4 * n4 * 16, op, packed_name),
            _memory(_pointer(op, scale_name, scale), torch.float32, 4 * n4, op, scale_name),
        )
        for packed_name, packed, scale_name, scale in (
            ("gate_packed_ptr", gate_packed_ptr, "gate_scale_ptr", gate_scale_ptr),
            ("up_packed_ptr", up_packed_ptr, "up_scale_ptr", up_scale_ptr),
        )
    ]
    q, x_scale = _quantized(x, k4, absmax_over=4 * k4, floor=QUANT_FLOOR_MLP)
    (gate_w, gate_s), (up_w, up_s) = projections
    gate = _gemv(q, gate_w, k4, n4).float() * x_scale * gate_s
    up = _gemv(q, up_w, k4, n4).float() * x_scale * up_s
    _memory(_pointer(op, "out_ptr", out_ptr), torch.bfloat16, 4 * n4, op, "out_ptr").copy_(
        _truncate_to_bf16(gate * torch.sigmoid(gate) * up)
    )


def flash_attn_decode(  # noqa: PLR0917 - tle_ops' signature
    q_ptr: object,
    k_ptr: object,
    v_ptr: object,
    out_ptr: object,
    seq_len: object,
    head_dim: object,
    sm_scale: object,
    num_heads: object,
    num_kv_heads: object,
    stride_kn: object,
    stride_vn: object,
) -> None:
    op = "flash_attn_decode"
    seq, dim, heads, kv_heads, skn, svn = (
        _i64(op, name, value, casts=True)
        for name, value in (
            ("seq_len", seq_len),
            ("head_dim", head_dim),
            ("num_heads", num_heads),
            ("num_kv_heads", num_kv_heads),
            ("stride_kn", stride_kn),
            ("stride_vn", stride_vn),
        )
    )
    scale = _f32_attr(op, "sm_scale", sm_scale, runtime_becomes_zero=True)
    if dim % 4 or dim > MAX_HEAD_DIM:
        raise StandInError(f"{op}: head_dim={dim}; the runtime takes multiples of 4 up to {MAX_HEAD_DIM}")
    if kv_heads <= 0 or heads // kv_heads == 0:
        raise StandInError(f"{op}: num_heads={heads} // num_kv_heads={kv_heads} is no group size")
    q = _memory(_pointer(op, "q_ptr", q_ptr), torch.bfloat16, heads * dim, op, "q_ptr").float()

    def rows(name: str, pointer: object, stride: int) -> torch.Tensor:
        # kv head h, position s starts at (h * seq_len + s) * stride, as the runtime addresses it
        span = ((kv_heads - 1) * seq + seq - 1) * stride + dim
        flat = _memory(_pointer(op, name, pointer), torch.bfloat16, span, op, name).float()
        return flat.as_strided((kv_heads, seq, dim), (seq * stride, stride, 1))

    keys, values = rows("k_ptr", k_ptr, skn), rows("v_ptr", v_ptr, svn)
    kv_of_head = torch.arange(heads) // (heads // kv_heads)
    scores = torch.einsum("hsd,hd->hs", keys[kv_of_head], q.reshape(heads, dim) * scale)
    attended = torch.einsum("hs,hsd->hd", torch.softmax(scores, dim=-1), values[kv_of_head])
    _memory(_pointer(op, "out_ptr", out_ptr), torch.bfloat16, heads * dim, op, "out_ptr").copy_(
        attended.reshape(-1).to(torch.bfloat16)
    )


def sdot(acc: object, a: object, b: object) -> torch.Tensor:
    """``llvm.aarch64.neon.sdot.v4i32.v16i8``: lane i adds bytes 4i..4i+3 of ``a`` times ``b``."""
    for name, value, dtype, size in (
        ("acc", acc, torch.int32, 4),
        ("a", a, torch.int8, 16),
        ("b", b, torch.int8, 16),
    ):
        if not isinstance(value, torch.Tensor) or value.dtype != dtype or value.shape != (size,):
            raise StandInError(f"sdot: {name} must be a [{size}] {dtype} tensor (the intrinsic's type)")
    assert isinstance(acc, torch.Tensor) and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    lanes = [int(acc[i]) + sum(int(a[4 * i + j]) * int(b[4 * i + j]) for j in range(4)) for i in range(4)]
    wrapped = [(v + 2**31) % 2**32 - 2**31 for v in lanes]
    return torch.tensor(wrapped, dtype=torch.int32)


TLE_OPS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        rms_norm,
        swiglu,
        sdot_pack_weights,
        sdot_gemv,
        sdot_gemv_fused_bf16,
        fused_mlp,
        flash_attn_decode,
        sdot,
    )
}
