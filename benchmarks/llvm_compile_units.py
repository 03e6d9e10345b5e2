"""How many compile units recipe/build-llvm.sh builds, against a full `all` build of the same configuration.

    python benchmarks/llvm_compile_units.py LLVM_SOURCE [--work DIR]

LLVM_SOURCE is an llvm-project tree (llvm/ and mlir/ in it), for example Debian's (`apt-get source
llvm-toolchain-19`, LLVM 19.1.7: not FlagTree's commit, but the same CMake machinery). The script runs
build-llvm.sh itself, as the engines do (SRC_DIR, PREFIX, RECIPE_DIR, CPU_COUNT, CMAKE_ARGS from the
environment), with a `cmake` in front of the real one that runs every configure and records, instead of
running, the `--build` and `--install` steps. It then asks ninja for the commands of the targets the script
would build (`ninja -t commands`) and of `all`, and counts the C and C++ compilations among them.
Nothing is compiled; the configures take a minute or two. It needs cmake, ninja, a C++ compiler and python3.
Not a test: it reads an LLVM source this repository never holds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RECIPE_DIR = Path(__file__).resolve().parents[1] / "recipe"

# A compilation in CMake's Ninja commands: `... -o <object>.o -c <source>`; C and C++ sources are the units.
_COMPILE = re.compile(r" -o \S+\.o -c (?P<source>\S+)")
_C_FAMILY = {".c", ".cc", ".cpp", ".cxx"}

# Stands in front of the real cmake: configures run, --build/--install are recorded as one JSON line each.
_CMAKE_SHIM = """#!/bin/sh
case "$1" in
  --build|--install) exec "{python}" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >>"{log}" ;;
esac
exec "{cmake}" "$@"
"""


def compile_units(commands: str) -> tuple[int, int]:
    """The C/C++ compilations and the other compilations (assembler) among ninja's commands."""
    sources = [Path(match["source"]).suffix for match in _COMPILE.finditer(commands)]
    c_family = sum(suffix in _C_FAMILY for suffix in sources)
    return c_family, len(sources) - c_family


def build_targets(recorded: list[list[str]]) -> list[str]:
    """The targets of the script's `cmake --build` steps (`all` when a step names none)."""
    targets: list[str] = []
    for argv in recorded:
        if argv[0] == "--build":
            named = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in {"--target", "-t"}]
            targets += named or ["all"]
    return targets


def run_script(source: Path, work: Path) -> tuple[Path, list[str]]:
    """Configure ``source`` with build-llvm.sh in ``work``; the build folder and the targets it would build."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("llvm_compile_units.py: cmake is not on PATH")
    src_dir, shim, log = work / "src", work / "shim", work / "build-steps.jsonl"
    src_dir.mkdir(parents=True)
    shim.mkdir()
    (src_dir / "llvm-project").symlink_to(source.resolve())
    (shim / "cmake").write_text(_CMAKE_SHIM.format(python=sys.executable, log=log, cmake=cmake))
    (shim / "cmake").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "SRC_DIR": str(src_dir),
        "PREFIX": str(work / "prefix"),
        "RECIPE_DIR": str(RECIPE_DIR),
        "CPU_COUNT": os.environ.get("CPU_COUNT", str(os.cpu_count() or 1)),
        # A native build: the script only compares the two (cross builds add a native tablegen build).
        "target_platform": "native",
        "build_platform": "native",
    }
    # CMake's output goes to stderr: stdout holds the counts only.
    subprocess.run(["bash", str(RECIPE_DIR / "build-llvm.sh")], env=env, check=True, stdout=sys.stderr)
    recorded = [json.loads(line) for line in log.read_text().splitlines()]
    return src_dir / "llvm-build", build_targets(recorded)


def count(build: Path, targets: list[str]) -> tuple[int, int]:
    commands = subprocess.run(
        ["ninja", "-C", str(build), "-t", "commands", *targets], capture_output=True, text=True, check=True
    ).stdout
    return compile_units(commands)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="an llvm-project tree (llvm/ and mlir/ in it)")
    parser.add_argument(
        "--work", type=Path, help="an empty folder to configure in (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    if not (args.source / "llvm" / "CMakeLists.txt").is_file():
        parser.error(f"{args.source} is not an llvm-project tree (no llvm/CMakeLists.txt)")
    with tempfile.TemporaryDirectory(prefix="llvm-units-") as scratch:
        work = args.work or Path(scratch)
        build, targets = run_script(args.source, work)
        script, script_asm = count(build, targets)
        full, full_asm = count(build, ["all"])
    print(f"LLVM source: {args.source.resolve()}")
    print(f"build-llvm.sh builds: {' '.join(targets)}")
    print(f"compile units (C/C++): {script:>6}  build-llvm.sh's build ({script_asm} assembler files besides)")
    print(
        f"compile units (C/C++): {full:>6}  `all` of the same configuration ({full_asm} assembler files besides)"
    )
    print(f"build-llvm.sh's build is {100 * (full - script) / full:.0f}% fewer units than `all`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
