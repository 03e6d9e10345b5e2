"""flagtree-verify's torch references against formulas written out another way, and the op judge.

Each formula here is plain Python or numpy over elements, not torch: a reference that is wrong in the way
the inputs are chosen to expose (a tie at .5, gate and up scales that differ, a length that is not a
multiple of 4 or of the softmax block, a score that overflows exp, grouped heads) disagrees with it.
What each TLE op computes was read in flagtree-cpu's ``tle_ops.py`` and runtime sources (see
``references.py`` and ``_verify_standin.py``).
"""

from __future__ import annotations

import json
import math

import pytest

from _tools import TORCH_INSTALL, require_module

require_module("torch", TORCH_INSTALL)
require_module("numpy", "pip install numpy")

import numpy as np
import torch

from flagtree_doctor.verify import cli as verify_cli
from flagtree_doctor.verify import references
from flagtree_doctor.verify.ops import Trial, judge

F32 = np.float32


def bf16(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bfloat16)


def truncated_bf16(value: float) -> float:
    """The fp32 value with its low 16 bits cleared: a bf16 by truncation."""
    bits = np.array([value], dtype=F32).view(np.uint32) & np.uint32(0xFFFF0000)
    return float(bits.view(F32)[0])


def rounded_bf16(value: float) -> float:
    """The fp32 value rounded to the nearest bf16, ties to the even one (finite values)."""
    bits = int(np.array([value], dtype=F32).view(np.uint32)[0])
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array([bits], dtype=np.uint32).view(F32)[0])


def quantized(x: list[float], floor: float) -> tuple[list[int], F32]:
    """Per-tensor int8 as the runtime does it in fp32: Python's round() is round half to even."""
    absmax = max(F32(max(abs(v) for v in x)), F32(floor))
    inverse = F32(127) / absmax
    return [max(-128, min(127, round(float(F32(v) * inverse)))) for v in x], absmax / F32(127)


def projection(x: list[float], b: torch.Tensor, w_scale: list[float], floor: float) -> list[float]:
    """``sdot_gemv_fused_bf16`` element by element: int dot products, fp32 dequantisation, truncation."""
    q, x_scale = quantized(x, floor)
    k, n = b.shape
    dots = [sum(q[i] * int(b[i, j]) for i in range(k)) for j in range(n)]
    return [truncated_bf16(F32(F32(dots[j]) * x_scale) * F32(w_scale[j])) for j in range(n)]


# --- the judge and its tolerances --------------------------------------------------------------------------


def test_judge_compares_times_and_reports() -> None:
    want = torch.tensor([1.0, 2.0, 4.0], dtype=torch.bfloat16)
    good = judge(
        "x", Trial(shape="3", dtype="bfloat16", op=lambda: want * 1.01, reference=lambda: want), repeat=3
    )
    assert (good.status, good.tolerance) == ("pass", "bfloat16: rtol=0.016, atol=0.016")
    assert good.op_ms is not None and good.reference_ms is not None
    bad = judge("x", Trial(shape="3", dtype="int32", op=lambda: want + 1, reference=lambda: want), repeat=1)
    assert (bad.status, bad.max_abs_error) == ("fail", 1.0)
    document = verify_cli.to_json([good, bad])
    assert document["schema_version"] == "1"
    json.dumps(document)


@pytest.mark.parametrize(
    ("key", "passes", "fails"), [("bfloat16", 1.012, 1.03), ("bfloat16, 4 roundings", 1.03, 1.06)]
)
def test_bf16_tolerances_are_their_ulps(key: str, passes: float, fails: float) -> None:
    """2 ulp (4 for fused_mlp's four roundings), no more: a result a few percent off is a failure."""
    want = torch.tensor([100.0, -3.0, 0.5], dtype=torch.bfloat16)
    for factor, verdict in ((passes, "pass"), (fails, "fail")):
        got = (want.double() * factor).to(torch.bfloat16)
        trial = Trial(shape="3", dtype=key, op=lambda got=got: got, reference=lambda: want)
        assert judge("x", trial, repeat=1).status == verdict, (key, factor)


# --- rms_norm, swiglu ----------------------------------------------------------------------------------------


def test_rms_norm_where_eps_and_the_length_matter() -> None:
    # mean(x**2) = 1.3e-8 is far below eps: eps outside the root, or left out, is off by orders of magnitude;
    # D = 7 is no multiple of the vector width, so a mean over a padded or truncated length shows.
    x = [1e-4, -2e-4, 3e-4, 0.0, 5e-5, -1e-4, 2e-4]
    w = [1.0, 2.0, 0.5, 3.0, -1.0, 1.5, 0.25]
    eps = 1e-6
    root = math.sqrt(sum(v * v for v in x) / len(x) + eps)
    want = torch.tensor([xi * wi / root for xi, wi in zip(x, w, strict=True)])
    got = references.rms_norm(torch.tensor(x), torch.tensor(w), eps)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)


def test_rms_norm_by_hand_and_in_bf16() -> None:
    x = torch.tensor([3.0, -4.0, 0.0, 12.0])
    w = torch.tensor([1.0, 2.0, 3.0, 0.5])
    rms = math.sqrt((9 + 16 + 0 + 144) / 4 + 1e-6)
    torch.testing.assert_close(
        references.rms_norm(x, w, 1e-6), torch.tensor([3 / rms, -8 / rms, 0.0, 6 / rms])
    )
    assert references.rms_norm(x.bfloat16(), w.bfloat16(), 1e-6).dtype == torch.bfloat16


def test_swiglu_is_silu_of_the_gate_times_up() -> None:
    # silu is not symmetric, so silu(up) * gate differs; large |gate| saturates, N = 7 leaves a tail
    gate = [-20.0, -2.5, -0.5, 0.0, 0.5, 3.0, 20.0]
    up = [1.5, -2.0, 4.0, 7.0, 0.25, -1.0, 0.5]
    want = torch.tensor([g * u / (1 + math.exp(-g)) for g, u in zip(gate, up, strict=True)])
    torch.testing.assert_close(
        references.swiglu(torch.tensor(gate), torch.tensor(up)), want, rtol=1e-6, atol=1e-7
    )


# --- int8: quantisation, packing, GEMV ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "q"),
    [
        # absmax 127: the scale is 1 and every .5 is a tie, which goes to the even neighbour
        ([127.0, 2.5, 3.5, -0.5, -1.5, 0.5, -126.5, 1.5], [127, 2, 4, 0, -2, 0, -126, 2]),
        # absmax 63.5: the values double, ties at .25 and .75
        ([-63.5, 0.25, 0.75, 1.25, -0.25, -0.75], [-127, 0, 2, 2, 0, -2]),
    ],
)
def test_quantisation_rounds_ties_to_even(x: list[float], q: list[int]) -> None:
    assert quantized(x, references.ACTIVATION_SCALE_FLOOR_SDOT)[0] == q  # the formula itself
    got, scale = references.quantize_activation(bf16(*x))
    assert got.tolist() == q
    assert scale == pytest.approx(max(abs(v) for v in x) / 127)


def test_quantisation_floors_absmax() -> None:
    q, scale = references.quantize_activation(torch.zeros(8, dtype=torch.bfloat16))
    assert q.tolist() == [0] * 8 and scale > 0
    # a value below the floor is scaled as if absmax were the floor
    tiny = bf16(1e-9, -5e-10)
    for floor in (references.ACTIVATION_SCALE_FLOOR_SDOT, references.ACTIVATION_SCALE_FLOOR_MLP):
        assert references.quantize_activation(tiny, floor)[0].tolist() == quantized(tiny.tolist(), floor)[0]


def test_packing_follows_the_runtimes_index_formula() -> None:
    # K != N, so a transposed block or a swapped K/N shows
    gen = torch.Generator().manual_seed(4)
    k, n = 8, 12
    b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    flat = b.reshape(-1).tolist()
    want = [0] * (k * n)
    k4, n4 = k // 4, n // 4
    for kb in range(k4):  # sdot_pack_weights in runtime_sdot.cpp
        for nb in range(n4):
            for ni in range(4):
                for ki in range(4):
                    want[(kb * n4 + nb) * 16 + ni * 4 + ki] = flat[(kb * 4 + ki) * n + nb * 4 + ni]
    assert references.pack_sdot_weights(b).tolist() == want


def test_sdot_gemv_accumulates_exactly() -> None:
    # -128 * -128 summed over K = 64 leaves int16; K != N, so a transposed product shows
    gen = torch.Generator().manual_seed(1)
    k, n = 64, 8
    a = torch.full((k,), -128, dtype=torch.int8)
    a[::3] = 127
    b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    b[:, 0] = -128
    want = [sum(int(a[i]) * int(b[i, j]) for i in range(k)) for j in range(n)]
    assert references.sdot_gemv(a, b).tolist() == want
    assert want[0] > 2**15


def test_sdot_sizes_come_in_blocks_of_4() -> None:
    """The runtime computes K / 4 and N / 4 blocks and leaves the rest out: such a size has no reference."""
    for k, n in ((6, 8), (8, 6)):
        b = torch.zeros(k, n, dtype=torch.int8)
        with pytest.raises(
            ValueError, match=rf"weights \[{k}, {n}\]: the SDOT ops take K and N in multiples of 4"
        ):
            references.pack_sdot_weights(b)
        with pytest.raises(ValueError, match="multiples of 4"):
            references.sdot_gemv(torch.zeros(k, dtype=torch.int8), b)
        with pytest.raises(ValueError, match="multiples of 4"):
            references.sdot_gemv_fused_bf16(torch.zeros(k, dtype=torch.bfloat16), b, torch.ones(n))


def _fused_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """x with absmax 127 and ties at .5; two weight matrices; per-channel scales, gate's unlike up's."""
    gen = torch.Generator().manual_seed(5)
    k, n = 16, 8
    x = (torch.randn(k, generator=gen) * 40).clamp(-120, 120).to(torch.bfloat16)
    x[:6] = bf16(127.0, 2.5, -3.5, 0.5, -1.5, 4.5)
    gate_b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    up_b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    return x, gate_b, up_b, torch.stack([torch.linspace(1e-4, 8e-4, n), torch.linspace(4e-3, 5e-4, n)])


def test_sdot_gemv_fused_bf16_bit_for_bit() -> None:
    """Quantised (ties to even), int dot products, ``* x_scale * w_scale[n]`` in fp32, truncated to bf16."""
    x, b, _, scales = _fused_inputs()
    w_scale = scales[1]
    want = projection(x.tolist(), b, w_scale.tolist(), references.ACTIVATION_SCALE_FLOOR_SDOT)
    assert references.sdot_gemv_fused_bf16(x, b, w_scale).float().tolist() == want
    # below the floor, absmax is the floor: 1e-8 here (runtime_sdot.cpp at 19cede7e), not fused_mlp's 1e-10
    tiny = (x.float() * 1e-11).to(torch.bfloat16)
    want = projection(tiny.tolist(), b, w_scale.tolist(), 1e-8)
    assert references.sdot_gemv_fused_bf16(tiny, b, w_scale).float().tolist() == want


def test_fused_mlp_is_silu_of_the_gate_projection_times_the_up_projection() -> None:
    x, gate_b, up_b, (gate_scale, up_scale) = _fused_inputs()
    for factor in (1.0, 1e-13):  # 1e-13: below the 1e-10 floor of fused_mlp
        xs = (x.float() * factor).to(torch.bfloat16)
        floor = 1e-10  # runtime_fused_mlp.cpp: if (absmax < 1e-10f) absmax = 1e-10f
        gate = projection(xs.tolist(), gate_b, gate_scale.tolist(), floor)
        up = projection(xs.tolist(), up_b, up_scale.tolist(), floor)
        want = [rounded_bf16(rounded_bf16(g / (1 + math.exp(-g))) * u) for g, u in zip(gate, up, strict=True)]
        got = references.fused_mlp(xs, gate_b, up_b, gate_scale, up_scale).float()
        torch.testing.assert_close(got, torch.tensor(want), rtol=2**-8, atol=1e-30)
        assert any(want)


# --- flash_attn_decode, neon_sdot ----------------------------------------------------------------------------


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """softmax(K q * scale) V per query head, in float64; head h reads kv head h // (heads // kv_heads)."""
    heads, kv_heads = q.shape[0], k.shape[0]
    out = np.empty_like(q, dtype=np.float64)
    for h in range(heads):
        kv = h // (heads // kv_heads)
        scores = k[kv].astype(np.float64) @ q[h] * scale
        weights = np.exp(scores - scores.max())
        out[h] = weights @ v[kv] / weights.sum()
    return out


@pytest.mark.parametrize(("magnitude", "block"), [(1.0, 16), (60.0, 32)])
def test_flash_attn_decode_is_softmax_attention(magnitude: float, block: int) -> None:
    """Grouped heads, a scale that is not dim**-0.5, seq = 37 (no multiple of the block), and at magnitude 60
    scores in the hundreds, where exp overflows without the running max."""
    gen = torch.Generator().manual_seed(3)
    heads, kv_heads, seq, dim = 4, 2, 37, 8
    q = torch.randn(heads, dim, generator=gen)
    k = torch.randn(kv_heads, seq, dim, generator=gen) * magnitude
    v = torch.randn(kv_heads, seq, dim, generator=gen)
    want = attention(q.numpy(), k.numpy(), v.numpy(), 0.3)
    got = references.flash_attn_decode(q, k, v, 0.3, block=block)
    torch.testing.assert_close(got, torch.from_numpy(want).float(), rtol=1e-4, atol=1e-5)


def test_neon_sdot_lanes() -> None:
    acc = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    a = torch.arange(16, dtype=torch.int8)
    b = torch.full((16,), -1, dtype=torch.int8)
    assert references.neon_sdot(acc, a, b).tolist() == [1 - 6, 2 - 22, 3 - 38, 4 - 54]
    gen = torch.Generator().manual_seed(6)
    acc = torch.tensor([2**31 - 1, -(2**31), 0, 7], dtype=torch.int32)
    a, b = (torch.randint(-128, 128, (16,), generator=gen, dtype=torch.int8) for _ in range(2))
    a[:4] = -128
    b[:4] = -128
    lanes = [int(acc[i]) + sum(int(a[4 * i + j]) * int(b[4 * i + j]) for j in range(4)) for i in range(4)]
    assert references.neon_sdot(acc, a, b).tolist() == [(v + 2**31) % 2**32 - 2**31 for v in lanes]  # wraps
