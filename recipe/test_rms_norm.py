"""End-to-end flagtree-cpu test, run by both recipes: a tle_ops.rms_norm kernel against a torch reference.

Compiling and running a kernel needs what upstream compiles for (armv9-a with SVE2 and i8mm, 128-bit SVE
vectors). Elsewhere the test prints why it is skipped and exits 0, so the package still builds on any
aarch64 builder.
"""

import ctypes
import platform
import sys
from pathlib import Path

AT_HWCAP2 = 26
HWCAP2_SVE2 = 1 << 1
HWCAP2_I8MM = 1 << 13
PR_SVE_GET_VL = 51
PR_SVE_VL_LEN_MASK = 0xFFFF


def _cpuinfo_features() -> set[str] | None:
    """Features common to every processor block of /proc/cpuinfo (a big.LITTLE SoC lists each core)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    blocks = [
        set(line.split(":", 1)[1].split())
        for line in text.splitlines()
        if line.lower().startswith("features") and ":" in line
    ]
    return set.intersection(*blocks) if blocks else None


def skip_reason() -> str | None:
    """Why kernels cannot run on this machine, or None when they can."""
    if sys.platform != "linux" or platform.machine() not in ("aarch64", "arm64"):
        return f"not a linux-aarch64 machine ({sys.platform}/{platform.machine()})"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.getauxval.restype = ctypes.c_ulong
    hwcap2 = libc.getauxval(AT_HWCAP2)
    features = _cpuinfo_features()
    has_sve2 = bool(hwcap2 & HWCAP2_SVE2) or (features is not None and "sve2" in features)
    has_i8mm = bool(hwcap2 & HWCAP2_I8MM) or (features is not None and "i8mm" in features)
    missing = [name for name, ok in (("sve2", has_sve2), ("i8mm", has_i8mm)) if not ok]
    if missing:
        return f"the CPU lacks {' and '.join(missing)} (upstream builds for armv9-a+sve2+i8mm)"
    vector_length = libc.prctl(PR_SVE_GET_VL, 0, 0, 0, 0)
    if vector_length >= 0 and (vector_length & PR_SVE_VL_LEN_MASK) != 16:
        bits = (vector_length & PR_SVE_VL_LEN_MASK) * 8
        return f"SVE vectors are {bits} bits, upstream compiles for -msve-vector-bits=128"
    return None


def run() -> int:
    # Triton resolves the names a kernel uses in its module's globals: bind `tle_ops` there.
    global tle_ops  # noqa: PLW0603
    import torch  # noqa: PLC0415
    import triton  # noqa: PLC0415
    from triton.language.extra.cpu import tle_ops  # noqa: PLC0415

    @triton.jit
    def rms_norm_kernel(x_ptr, w_ptr, out_ptr, D: "tl.constexpr", EPS: "tl.constexpr"):  # noqa: ANN001, ANN202, F821
        tle_ops.rms_norm(x_ptr, w_ptr, out_ptr, D, EPS)

    size, eps = 1024, 1e-6
    torch.manual_seed(0)
    x = torch.randn(size, dtype=torch.bfloat16)
    weight = torch.randn(size, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    rms_norm_kernel[(1,)](x, weight, out, size, eps)

    x32 = x.float()
    expected = (x32 * torch.rsqrt(x32.pow(2).mean() + eps) * weight.float()).to(torch.bfloat16)
    if not torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2):
        worst = (out.float() - expected.float()).abs().max().item()
        print(f"FAIL: tle_ops.rms_norm differs from the torch reference (max abs error {worst})")
        return 1
    print(f"OK: tle_ops.rms_norm matches torch on {size} bf16 values")
    return 0


def main() -> int:
    reason = skip_reason()
    if reason is not None:
        print(f"SKIP: tle_ops.rms_norm end to end: {reason}")
        return 0
    return run()


if __name__ == "__main__":
    sys.exit(main())
