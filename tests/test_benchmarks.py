"""benchmarks/llvm_compile_units.py counts what it says: its parsing, on ninja's and the cmake shim's output.

The benchmark itself runs on an LLVM source this repository never holds (issue 13's closing note has its
numbers for Debian's LLVM 19.1.7); these tests cover the parts that decide the numbers.
"""

from __future__ import annotations

import importlib.util
import types
from functools import cache
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "llvm_compile_units.py"

# Lines of `ninja -t commands`, shaped like the ones CMake's Ninja generator writes for LLVM.
COMMANDS = """\
/usr/bin/c++ -DGTEST_HAS_RTTI=0 -I/b/lib/Support -O3 -std=c++17 -o lib/Support/CMakeFiles/LLVMSupport.dir/APInt.cpp.o -c /s/llvm/lib/Support/APInt.cpp
/usr/bin/cc -I/b/lib/Support -O3 -o lib/Support/CMakeFiles/LLVMSupport.dir/regcomp.c.o -c /s/llvm/lib/Support/regcomp.c
/usr/bin/cc -I/b/lib/Support/BLAKE3 -o lib/Support/BLAKE3/CMakeFiles/LLVMSupportBlake3.dir/blake3_neon.S.o -c /s/llvm/lib/Support/BLAKE3/blake3_neon.S
cd /b/include/llvm/IR && /b/bin/llvm-tblgen -gen-intrinsic-enums -o IntrinsicEnums.inc /s/llvm/include/llvm/IR/Intrinsics.td
: && /usr/bin/ar qc lib/libLLVMSupport.a lib/Support/CMakeFiles/LLVMSupport.dir/APInt.cpp.o && :
cd /b/tools/lto && /usr/bin/python3 -c "import sys; print(sys.stdin.read())" < /s/llvm/tools/lto/lto.exports > exports
"""


@cache
def _benchmark() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("llvm_compile_units", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compile_units_counts_c_and_cpp_compilations_only():
    assert _benchmark().compile_units(COMMANDS) == (2, 1)  # APInt.cpp, regcomp.c; the .S apart


@pytest.mark.parametrize(
    ("recorded", "targets"),
    [
        (
            [["--build", "/b", "--parallel", "2", "--target", "install-distribution"]],
            ["install-distribution"],
        ),
        ([["--build", "/b", "--parallel", "2"], ["--install", "/b"]], ["all"]),
        (
            [["--build", "/n", "--target", "llvm-tblgen", "--target", "mlir-tblgen"]],
            ["llvm-tblgen", "mlir-tblgen"],
        ),
    ],
)
def test_build_targets_reads_the_recorded_build_steps(recorded, targets):
    assert _benchmark().build_targets(recorded) == targets


def test_main_refuses_a_folder_that_is_not_llvm(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        _benchmark().main([str(tmp_path)])
    assert stop.value.code == 2
    assert "is not an llvm-project tree (no llvm/CMakeLists.txt)" in capsys.readouterr().err
