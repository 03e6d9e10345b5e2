"""Torch reference implementations of the TLE ops, written from their documented semantics.

Each takes and returns CPU tensors; torch is imported on first use only, so importing this module costs
nothing where torch is absent. The int8 ops quantize activations the way flagtree-cpu's runtime does
(``runtime_sdot.cpp`` at the pinned 19cede7e): one scale per tensor, ``absmax / 127``, round half to even
(``vcvtnq_s32_f32``), clamp to ``[-128, 127]``. The SDOT ops take ``K`` and ``N`` in whole blocks of 4 (the
runtime computes ``K / 4`` and ``N / 4`` blocks and leaves the rest out); other sizes are a ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """``|got - want| <= atol + rtol * |want|`` elementwise (``torch.allclose``)."""

    rtol: float
    atol: float
    why: str

    def describe(self) -> str:
        return "exact" if self.rtol == self.atol == 0 else f"rtol={self.rtol:g}, atol={self.atol:g}"


TOLERANCES: dict[str, Tolerance] = {
    "int32": Tolerance(rtol=0.0, atol=0.0, why="integer dot products are exact"),
    "int8": Tolerance(rtol=0.0, atol=0.0, why="packing moves bytes"),
    # bf16 keeps 8 significant bits (ulp 2**-7 relative); two roundings (fp32 -> bf16 at the op's
    # boundaries, truncation vs round-to-nearest) allow 2 ulp; atol covers results near zero.
    "bfloat16": Tolerance(rtol=1.6e-2, atol=1.6e-2, why="2 bf16 ulp"),
    # fused_mlp rounds to bf16 four times (gate, up, silu, product): upstream's two versions of
    # runtime_fused_mlp.cpp (fp32 throughout and one truncation; or truncated projections, a 5th-order exp
    # and rounded silu and product) differ from each other by up to 3 ulp on verify's inputs.
    "bfloat16, 4 roundings": Tolerance(rtol=3.2e-2, atol=3.2e-2, why="4 bf16 ulp"),
    "float32": Tolerance(rtol=1e-5, atol=1e-6, why="fp32 reassociation"),
}

# The runtime clamps absmax to this before dividing: sdot_gemv_m1_fused_bf16 (runtime_sdot.cpp at 19cede7e)
# to 1e-8, fused_mlp_bf16 (runtime_fused_mlp.cpp, both versions upstream has had) to 1e-10.
ACTIVATION_SCALE_FLOOR_SDOT = 1e-8
ACTIVATION_SCALE_FLOOR_MLP = 1e-10
SDOT_BLOCK = 4


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last axis, computed in fp32."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normed * weight.float()).to(x.dtype)


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """``silu(gate) * up``, computed in fp32."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def quantize_activation(x: Tensor, floor: float = ACTIVATION_SCALE_FLOOR_SDOT) -> tuple[Tensor, float]:
    """Per-tensor symmetric int8 quantization: ``(q, scale)`` with ``x ~= q * scale``, absmax at least ``floor``."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    xf = x.float()
    absmax = max(float(xf.abs().max()), floor)
    q = torch.round(xf * (127.0 / absmax)).clamp(-128, 127).to(torch.int8)
    return q, absmax / 127.0


def _whole_sdot_blocks(b: Tensor) -> tuple[int, int]:
    k, n = b.shape
    if k % SDOT_BLOCK or n % SDOT_BLOCK:
        raise ValueError(f"weights [{k}, {n}]: the SDOT ops take K and N in multiples of {SDOT_BLOCK}")
    return k, n


def truncate_to_bf16(x: Tensor) -> Tensor:
    """fp32 to bf16 by dropping the low 16 bits (the runtime's ``vshrn_n_u32(bits, 16)``), not rounding."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    bits = x.float().contiguous().view(torch.int32) & -(1 << 16)
    return bits.view(torch.float32).to(torch.bfloat16)


def pack_sdot_weights(b: Tensor) -> Tensor:
    """Row-major int8 ``[K, N]`` in SDOT order: blocks ``[K/4][N/4]`` of 16 bytes, 4 columns x 4 rows."""
    k, n = _whole_sdot_blocks(b)
    return b.reshape(k // 4, 4, n // 4, 4).permute(0, 2, 3, 1).contiguous().reshape(-1)


def sdot_gemv(a: Tensor, b: Tensor) -> Tensor:
    """int8 ``a[K] @ b[K, N]`` accumulated exactly into int32 ``[N]``."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    _whole_sdot_blocks(b)
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)


def sdot_gemv_fused_bf16(
    x: Tensor, b: Tensor, w_scale: Tensor, floor: float = ACTIVATION_SCALE_FLOOR_SDOT
) -> Tensor:
    """bf16 ``x`` quantized per tensor, int8 GEMV, ``* x_scale * w_scale[n]`` in fp32, truncated to bf16."""
    q, x_scale = quantize_activation(x, floor)
    return truncate_to_bf16(sdot_gemv(q, b).float() * x_scale * w_scale.float())


def fused_mlp(x: Tensor, gate_b: Tensor, up_b: Tensor, gate_scale: Tensor, up_scale: Tensor) -> Tensor:
    """``silu(gate_proj(x)) * up_proj(x)``: the unfused graph it replaces, bf16 at each boundary.

    The projections are ``sdot_gemv_fused_bf16``'s (truncated), with fused_mlp's own absmax floor; silu and
    the product round to nearest, as torch's ``silu`` and ``mul`` on bf16 do.
    """
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    gate = sdot_gemv_fused_bf16(x, gate_b, gate_scale, ACTIVATION_SCALE_FLOOR_MLP)
    up = sdot_gemv_fused_bf16(x, up_b, up_scale, ACTIVATION_SCALE_FLOOR_MLP)
    silu = torch.nn.functional.silu(gate.float()).to(torch.bfloat16)
    return (silu.float() * up.float()).to(torch.bfloat16)


def flash_attn_decode(q: Tensor, k: Tensor, v: Tensor, sm_scale: float, block: int = 32) -> Tensor:
    """One decode step of attention by online softmax over key blocks (the flash algorithm), in fp32.

    ``q`` is ``[heads, dim]``, ``k`` and ``v`` are ``[kv_heads, seq, dim]``; query head ``h`` reads kv head
    ``h // (heads // kv_heads)`` (grouped-query attention).
    """
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    heads, dim = q.shape
    kv_heads, seq, _ = k.shape
    group = heads // kv_heads
    out = torch.empty(heads, dim, dtype=torch.float32)
    for h in range(heads):
        qh, kh, vh = q[h].float(), k[h // group].float(), v[h // group].float()
        running_max = torch.tensor(float("-inf"))
        denominator = torch.tensor(0.0)
        acc = torch.zeros(dim)
        for start in range(0, seq, block):
            scores = (kh[start : start + block] @ qh) * sm_scale
            new_max = torch.maximum(running_max, scores.max())
            correction = torch.exp(running_max - new_max)
            weights = torch.exp(scores - new_max)
            denominator = denominator * correction + weights.sum()
            acc = acc * correction + weights @ vh[start : start + block]
            running_max = new_max
        out[h] = acc / denominator
    return out.to(q.dtype)


def neon_sdot(acc: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """NEON SDOT on one register: ``acc[i] + sum_k a[4i+k] * b[4i+k]`` for the 4 int32 lanes."""
    import torch  # noqa: PLC0415 - lazy: the base install has no torch

    products = (a.to(torch.int32) * b.to(torch.int32)).reshape(4, 4).sum(dim=1)
    return (acc.to(torch.int32) + products).to(torch.int32)
