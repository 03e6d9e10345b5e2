"""End-to-end flagtree-cpu test, run by both recipes: a tle_ops.rms_norm kernel against a torch reference.

Compiling and running a kernel needs an aarch64 CPU with dotprod (the baseline runtime; the Armv9 one where
every core has SVE2, i8mm, bf16 and 128-bit SVE vectors), and rms_norm's runtime function must be one this CPU
runs (the baseline runtime's manifest). Elsewhere the test prints why it is skipped and exits 0, so the package
still builds on any aarch64 builder; a job meant to run kernels sets FLAGTREE_REQUIRE_KERNELS=1, and the skip
is then a failure.
"""

import importlib.util
import sys
from pathlib import Path

# flagtree-doctor (a run dependency of flagtree-cpu) judges the CPU as FlagTree's own CPU check does; its
# live detection (getauxval, prctl) is the one tested under qemu-user in the feedstock's emulated tier.
from flagtree_doctor.cpu_check import REQUIRE_KERNELS, kernel_blockers, kernels_required, op_refusal

TEST = "tle_ops.rms_norm end to end"


def skip_reason() -> str | None:
    """Why kernels cannot run on this machine, or None when they can."""
    blockers = kernel_blockers()
    if blockers:
        return "; ".join(blockers)
    spec = importlib.util.find_spec("triton")  # found, not imported: run() imports it
    if spec is None or spec.origin is None:
        return None
    return op_refusal(Path(spec.origin).parent / "_C", "rms_norm")


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
    try:
        required = kernels_required()
    except ValueError as exc:  # a FLAGTREE_REQUIRE_KERNELS value that is neither 1 nor 0
        print(f"FAIL: {TEST}: {exc}")
        return 2
    reason = skip_reason()
    if reason is not None and required:
        print(f"FAIL: {TEST}: {REQUIRE_KERNELS}=1, but the CPU cannot run kernels: {reason}")
        return 1
    if reason is not None:
        print(f"SKIP: {TEST}: {reason}")
        return 0
    return run()


if __name__ == "__main__":
    sys.exit(main())
