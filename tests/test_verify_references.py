"""The torch references of flagtree-verify against formulas written out by hand, and the op judge."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from flagtree_doctor.verify import cli as verify_cli
from flagtree_doctor.verify import references
from flagtree_doctor.verify.ops import Trial, judge


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


class TestReferences:
    """Each reference against the formula written out by hand."""

    def test_rms_norm(self) -> None:

        x = torch.tensor([3.0, -4.0, 0.0, 12.0])
        w = torch.tensor([1.0, 2.0, 3.0, 0.5])
        rms = math.sqrt((9 + 16 + 0 + 144) / 4 + 1e-6)
        want = torch.tensor([3 / rms, -8 / rms, 0.0, 6 / rms])
        torch.testing.assert_close(references.rms_norm(x, w, 1e-6), want)
        assert references.rms_norm(x.bfloat16(), w.bfloat16(), 1e-6).dtype == torch.bfloat16

    def test_swiglu(self) -> None:

        gate, up = torch.tensor([0.0, 1.0, -2.0]), torch.tensor([5.0, 3.0, 1.0])
        want = torch.tensor(
            [g / (1 + math.exp(-g)) * u for g, u in zip([0.0, 1.0, -2.0], [5.0, 3.0, 1.0], strict=True)]
        )
        torch.testing.assert_close(references.swiglu(gate, up), want)

    def test_int8_gemv_quantization_and_packing(self) -> None:

        gen = torch.Generator().manual_seed(1)
        k, n = 16, 8
        a = torch.randint(-128, 128, (k,), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        want = [sum(int(a[i]) * int(b[i, j]) for i in range(k)) for j in range(n)]
        assert references.sdot_gemv(a, b).tolist() == want
        packed = references.pack_sdot_weights(b)
        for kb in range(k // 4):
            for nb in range(n // 4):
                for ni in range(4):
                    for ki in range(4):
                        assert packed[(kb * (n // 4) + nb) * 16 + ni * 4 + ki] == b[kb * 4 + ki, nb * 4 + ni]
        x = torch.tensor([0.5, -1.27, 0.0, 0.003])
        q, scale = references.quantize_activation(x)
        assert scale == pytest.approx(1.27 / 127)
        assert q.tolist() == [50, -127, 0, 0]
        # per-output-channel weight scales: out[j] = (sum_i q[i] * b[i, j]) * x_scale * w_scale[j]
        w_scale = torch.linspace(0.01, 0.08, n)
        xb = torch.randn(k, generator=gen).bfloat16()
        qx, sx = references.quantize_activation(xb)
        want_f = [sum(int(qx[i]) * int(b[i, j]) for i in range(k)) * sx * float(w_scale[j]) for j in range(n)]
        got = references.sdot_gemv_fused_bf16(xb, b, w_scale)
        torch.testing.assert_close(got.float(), torch.tensor(want_f), rtol=1e-2, atol=1e-2)

    def test_fused_mlp_is_swiglu_of_the_two_projections(self) -> None:

        gen = torch.Generator().manual_seed(2)
        k, n = 32, 16
        x = torch.randn(k, generator=gen).bfloat16()
        gate_b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        up_b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        gs, us = torch.rand(n, generator=gen) / 64, torch.rand(n, generator=gen) / 64
        gate = references.sdot_gemv_fused_bf16(x, gate_b, gs).float()
        up = references.sdot_gemv_fused_bf16(x, up_b, us).float()
        want = gate * torch.sigmoid(gate) * up
        torch.testing.assert_close(
            references.fused_mlp(x, gate_b, up_b, gs, us).float(), want, rtol=2e-2, atol=2e-2
        )

    def test_flash_attn_decode_is_softmax_attention(self) -> None:

        gen = torch.Generator().manual_seed(3)
        heads, kv_heads, seq, dim = 8, 2, 70, 16
        q, k, v = (
            torch.randn(heads, dim, generator=gen),
            torch.randn(kv_heads, seq, dim, generator=gen),
            torch.randn(kv_heads, seq, dim, generator=gen),
        )
        scale = dim**-0.5
        want = torch.stack([torch.softmax(k[h // 4] @ q[h] * scale, dim=0) @ v[h // 4] for h in range(heads)])
        torch.testing.assert_close(references.flash_attn_decode(q, k, v, scale, block=16), want)

    def test_neon_sdot_lanes(self) -> None:

        acc = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
        a = torch.arange(16, dtype=torch.int8)
        b = torch.full((16,), -1, dtype=torch.int8)
        assert references.neon_sdot(acc, a, b).tolist() == [1 - 6, 2 - 22, 3 - 38, 4 - 54]
