"""The ``@triton.jit`` kernels that call each TLE op once, as flagtree-cpu's ``tle_ops.py`` documents them.

Imported only where FlagTree is installed. Sizes, epsilons and scales are ``constexpr``: ``tle_ops`` turns
a Python int into an i64 constant and a float into the op's float attribute (``flash_attn_decode`` takes
its ``sm_scale`` only as a constant; a runtime value would become 0.0). ``seq_len`` stays a runtime
argument, which ``tle_ops`` casts to i64.
"""

import triton
import triton.language as tl
from triton.language.extra.cpu import tle_ops as tle_cpu


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, D: tl.constexpr, EPS: tl.constexpr):
    tle_cpu.rms_norm(x_ptr, w_ptr, out_ptr, D, EPS)


@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, N: tl.constexpr):
    tle_cpu.swiglu(gate_ptr, up_ptr, out_ptr, N)


@triton.jit
def sdot_pack_weights_kernel(b_ptr, packed_ptr, K: tl.constexpr, N: tl.constexpr):
    tle_cpu.sdot_pack_weights(b_ptr, packed_ptr, K, N)


@triton.jit
def sdot_gemv_kernel(a_ptr, packed_ptr, c_ptr, K: tl.constexpr, N: tl.constexpr):
    tle_cpu.sdot_gemv(a_ptr, packed_ptr, c_ptr, K, N)


@triton.jit
def sdot_gemv_fused_bf16_kernel(x_ptr, packed_ptr, w_scale_ptr, out_ptr, K: tl.constexpr, N: tl.constexpr):
    tle_cpu.sdot_gemv_fused_bf16(x_ptr, packed_ptr, w_scale_ptr, out_ptr, K, N)


@triton.jit
def fused_mlp_kernel(
    x_ptr, gate_ptr, up_ptr, gate_scale_ptr, up_scale_ptr, out_ptr, K: tl.constexpr, N: tl.constexpr
):
    tle_cpu.fused_mlp(x_ptr, gate_ptr, up_ptr, gate_scale_ptr, up_scale_ptr, out_ptr, K, N)


@triton.jit
def flash_attn_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    seq_len,
    HEAD_DIM: tl.constexpr,
    SM_SCALE: tl.constexpr,
    NUM_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    STRIDE_KN: tl.constexpr,
    STRIDE_VN: tl.constexpr,
):
    tle_cpu.flash_attn_decode(
        q_ptr,
        k_ptr,
        v_ptr,
        out_ptr,
        seq_len,
        HEAD_DIM,
        SM_SCALE,
        NUM_HEADS,
        NUM_KV_HEADS,
        STRIDE_KN,
        STRIDE_VN,
    )


@triton.jit
def neon_sdot_kernel(acc_ptr, a_ptr, b_ptr, out_ptr):
    lanes = tl.arange(0, 4)
    bytes16 = tl.arange(0, 16)
    acc = tl.load(acc_ptr + lanes)
    a = tl.load(a_ptr + bytes16)
    b = tl.load(b_ptr + bytes16)
    tl.store(out_ptr + lanes, tle_cpu.sdot(acc, a, b))
