"""benchmarks/llvm_archive_step.py times what it says: its stand-in archive, and the step it hands the engine.

The benchmark itself writes about a gigabyte and runs the engine (benchmarks/README.md has its numbers);
these tests cover what decides them, at a small scale: Debian's counts scaled, an archive the toolkit accepts,
and a recipe that is flagtree-llvm's archive route (its script, its package tests) and nothing else.
"""

from __future__ import annotations

import gzip
import importlib.util
import subprocess
import types
from functools import cache
from pathlib import Path

import yaml

from _tools import aarch64_gcc

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "benchmarks" / "llvm_archive_step.py"


@cache
def _benchmark() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("llvm_archive_step", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(tmp_path: Path) -> Path:
    (tmp_path / "tool.c").write_text(_benchmark()._PROGRAM)
    subprocess.run([aarch64_gcc(), str(tmp_path / "tool.c"), "-o", str(tmp_path / "tool")], check=True)
    return tmp_path / "tool"


def test_the_stand_in_has_debian_s_counts_scaled_and_what_the_install_needs(tmp_path, monkeypatch):
    bench = _benchmark()
    # A tenth of Debian's counts (files of every kind beside the required ones), at a hundredth of the bytes.
    small = {kind: (n, megabytes / 100) for kind, (n, megabytes) in bench.DEBIAN_LLVM_19.items()}
    monkeypatch.setattr(bench, "DEBIAN_LLVM_19", small)
    tree = bench.make_tree(tmp_path / "archive", 0.1, _program(tmp_path))
    files = [p.relative_to(tree) for p in tree.rglob("*") if p.is_file()]
    assert sum(n for n, _ in bench.counts(0.1).values()) == len(files) == 366 + 57 + 4 + 10
    assert sum(str(f).endswith(".a") for f in files) == 57
    assert sum(str(f).startswith("lib/cmake/") for f in files) == 4
    install = importlib.util.spec_from_file_location("install", ROOT / "recipe" / "llvm_archive_install.py")
    assert install is not None and install.loader is not None
    module = importlib.util.module_from_spec(install)
    install.loader.exec_module(module)
    module.check(tree)  # the shape llvm_archive_install.py refuses otherwise
    # Static libraries compress about as object code does (a quarter random), not to nothing.
    static = [tree / f for f in files if str(f).endswith(".a")]
    assert 0.2 < len(gzip.compress(static[-1].read_bytes())) / static[-1].stat().st_size < 0.4
    assert 0.9 < sum(p.stat().st_size for p in static) / 1e6 / bench.counts(0.1)["static"][1] < 1.1


def test_the_toolkit_accepts_the_stand_in(tmp_path):
    bench = _benchmark()
    archive = bench.pack(bench.make_tree(tmp_path / "archive", 0.01, _program(tmp_path)))
    seconds, sha256 = bench.time_toolkit(archive, tmp_path / "cache")
    assert seconds > 0 and len(sha256) == 64


def test_the_engine_gets_flagtree_llvm_s_archive_route_alone(tmp_path):
    bench = _benchmark()
    recipe = yaml.safe_load(bench._recipe(tmp_path, "file:///a.tar.gz", "0" * 64).read_text())
    real = yaml.safe_load((ROOT / "recipe" / "recipe.yaml").read_text())
    llvm = next(o for o in real["outputs"] if o["package"]["name"] == "flagtree-llvm")
    assert recipe["build"]["script"] == llvm["build"]["script"] == "build-llvm.sh"
    assert recipe["tests"] == llvm["tests"]
    assert recipe["source"] == [
        {"url": "file:///a.tar.gz", "sha256": "0" * 64, "target_directory": "llvm-archive"}
    ]
    assert (tmp_path / "recipe" / "build-llvm.sh").read_text() == (
        ROOT / "recipe" / "build-llvm.sh"
    ).read_text()
