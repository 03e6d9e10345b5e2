"""flagtree-cpu package test, run by both recipes: the backend, the TLE builder methods, the files.

Runs on any linux-aarch64 machine (no kernel is compiled or launched here; test_rms_norm.py does that).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The builder methods tle_arm64 adds and the libraries triton/_C must hold, as flagtree-doctor (a run
# dependency of flagtree-cpu) records them once for the doctor, flagtree-verify and this test.
from flagtree_doctor.manifest import read_manifest
from flagtree_doctor.target import BASELINE_FILES, BASELINE_RUNTIME, BUILDER_METHODS, RUNTIME_LIBRARIES

EXPECTED_BUILDER_METHODS = frozenset(BUILDER_METHODS)
# Glob patterns: libsleef.so may carry its soname version; the baseline runtime and its manifest.
EXPECTED_LIBRARIES = (*(f"{name}*" for name in RUNTIME_LIBRARIES), *BASELINE_FILES)


def check() -> list[str]:
    import triton  # noqa: PLC0415
    import triton.backends  # noqa: PLC0415
    from triton._C.libtriton import ir  # noqa: PLC0415

    errors = []
    if "cpu" not in triton.backends.backends:
        errors.append(f"'cpu' is not a triton backend: {sorted(triton.backends.backends)}")
    methods = {name for name in dir(ir.builder) if name.startswith("create_cpu_")}
    if methods != EXPECTED_BUILDER_METHODS:
        missing = sorted(EXPECTED_BUILDER_METHODS - methods)
        extra = sorted(methods - EXPECTED_BUILDER_METHODS)
        errors.append(f"create_cpu_* builder methods differ: missing {missing}, unexpected {extra}")
    c_dir = Path(triton.__file__).parent / "_C"
    for pattern in EXPECTED_LIBRARIES:
        if not list(c_dir.glob(pattern)):
            errors.append(f"{c_dir}/{pattern} is missing")
    # The language modules the link script and setup.py put in place (upstream FAQ 4 when they are not).
    try:
        from triton.language.extra.cpu import tle_ops  # noqa: F401, PLC0415
    except ImportError as exc:
        errors.append(f"triton.language.extra.cpu.tle_ops does not import: {exc}")
    # Patch 0009: the CPU driver checks the CPU, and each kernel, before it loads the runtime or a kernel.
    driver = Path(triton.__file__).parent / "backends" / "cpu" / "driver.py"
    if "check_kernel(name, kernel, " not in driver.read_text():
        errors.append(f"{driver} does not call flagtree_doctor's check_kernel() (patch 0009)")
    # The baseline runtime's manifest (build-flagtree.sh) reads, and names the functions the kernels call.
    manifest_path = c_dir / str(BASELINE_RUNTIME.manifest)
    if manifest_path.exists():
        try:
            functions = read_manifest(manifest_path).functions
        except RuntimeError as exc:
            errors.append(str(exc))
        else:
            if "fused_mlp_bf16" not in functions:
                errors.append(f"{manifest_path} does not list fused_mlp_bf16: {sorted(functions)}")
    # Symlinks left in the package must resolve inside it, not into the build's work folder.
    root = Path(triton.__file__).parent
    for path in root.rglob("*"):
        if path.is_symlink() and not path.exists():
            errors.append(f"dangling symlink {path} -> {path.readlink()}")
    return errors


def main() -> int:
    errors = check()
    for error in errors:
        print(f"FAIL: {error}")
    if not errors:
        print(
            f"OK: cpu backend, {len(EXPECTED_BUILDER_METHODS)} create_cpu_* methods, triton/_C libraries, CPU check"
        )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
