"""How long a package of static libraries takes to build and land, and in how much memory: the engine alone
against ``flagtree-feedstock build``.

    python benchmarks/landing.py [--sizes 1,4] [--pool DIR] [--work DIR] [--toolkit-only]

For each size (GB of payload) it writes a recipe that declares ``source_date_epoch`` (as the real one does, so
the toolkit lands it whole: records, payload rewrite, SBOM) and whose build script fills ``$PREFIX/lib`` with
that much static-library payload, then builds it twice, each into a fresh output folder against an empty
local channel, offline, without the package tests:

1. the engine alone: py-rattler-build's ``run_build`` in a process of its own, with its default package format
   (a ``.conda``, zstd level 15 on every core);
2. the toolkit: ``flagtree-feedstock build`` (the engine at its fastest level in its worker, then the landing
   in the toolkit's own process: one streaming pass, compressed once at level 15 on every core).

It prints, for each, the wall time and the peak memory (``VmHWM``) of the processes of its tree, sampled every
0.1 s: the top process (the engine alone's; the toolkit's, where the landing runs) and the largest of the others
(the toolkit's engine worker, the build script). A report for docs/testing.md follows.

The payload is static libraries themselves: copies of the machine's own ``*.a`` files (every one under
``--pool``, ``/usr/lib`` by default: Debian's ``llvm-14-dev`` alone puts 244 MB of LLVM's there), one library
per payload file, in sorted folders ``c000/``, ``c001/``, ... of one copy of the pool each, so a library's
copies lie a whole pool apart in the package's tar, beyond zstd's window at level 15 (8 MiB): it compresses
as a package of that many distinct libraries does (LLVM 14's: about 7:1 at level 15, at about 7 CPU-seconds
per 48 MB). It needs at least 64 MiB of them. ``--toolkit-only`` skips the engine alone (its columns say
"not run"): the toolkit's side of a size in about half the time, for a loaded machine. Not a test: it writes several times the payload to disk and
takes minutes per gigabyte (docs/testing.md has the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EPOCH = 1780573979  # the real recipe's source_date_epoch (FlagTree 54d33a53's committer date)
MIN_POOL = 64 << 20
SAMPLE_S = 0.1
GB = 10**9

_FILL = '''\
"""Fill PREFIX/lib with SIZE bytes of the libraries listed in POOL_LIST (one path a line), whole files."""
import shutil, sys
from pathlib import Path
prefix, size, pool = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]).read_text().split()
written, copy = 0, 0
while written < size:
    for library in pool:
        if written >= size:
            break
        target = prefix / "lib" / f"c{copy:03d}" / Path(library).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library, target)
        written += target.stat().st_size
    copy += 1
'''

_ENGINE_ALONE = """\
import sys
from pathlib import Path
from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig
recipe, variants, output, channel = map(Path, sys.argv[1:5])
rendered = Stage0Recipe.from_file(recipe).render(VariantConfig.from_file(variants))
rendered[0].run_build(
    tool_config=ToolConfiguration(test_strategy="skip"), output_dir=output, channels=[channel.as_uri()]
)
"""


@dataclass
class Run:
    """One build: its wall time, the CPU time of its tree, the peak memory of each process of its tree
    (pid -> (name, KiB)), and for the toolkit its landing's time (from its log line ``landed ... in N s``)."""

    seconds: float = 0.0
    cpu: float = 0.0
    landing: float = 0.0
    peaks: dict[int, tuple[str, int]] = field(default_factory=dict)
    package: int = 0  # bytes of the package it wrote

    def top(self, root: int) -> int:
        return self.peaks.get(root, ("", 0))[1]

    def others(self, root: int) -> tuple[str, int]:
        return max((v for pid, v in self.peaks.items() if pid != root), key=lambda v: v[1], default=("", 0))


def pool_files(folder: Path) -> list[Path]:
    """Every static library under ``folder``, by path; refused below :data:`MIN_POOL` bytes in all."""
    found = sorted(p for p in folder.rglob("*.a") if p.is_file() and not p.is_symlink())
    total = sum(p.stat().st_size for p in found)
    if total < MIN_POOL:
        raise SystemExit(
            f"benchmarks/landing.py: {folder} holds {total >> 20} MiB of static libraries, under the "
            f"{MIN_POOL >> 20} MiB a pool needs (install llvm-14-dev, or pass --pool)"
        )
    return found


def write_recipe(folder: Path, size: int, pool: list[Path]) -> Path:
    """A recipe folder whose one package holds ``size`` bytes of the pool's libraries."""
    folder.mkdir(parents=True)
    (folder / "pool.txt").write_text("".join(f"{p}\n" for p in pool))
    (folder / "fill.py").write_text(_FILL)
    name = f"landing-bench-{size // GB}g"
    recipe = {
        "context": {"source_date_epoch": EPOCH},
        "package": {"name": name, "version": "1.0"},
        "build": {
            "number": 0,
            "script": [f'"{sys.executable}" "$RECIPE_DIR/fill.py" "$PREFIX" {size} "$RECIPE_DIR/pool.txt"'],
            "dynamic_linking": {"binary_relocation": False},
        },
        "about": {"license": "MIT"},
    }
    (folder / "recipe.yaml").write_text(json.dumps(recipe, indent=2))  # YAML reads JSON
    (folder / "conda_build_config.yaml").write_text("{}\n")
    return folder / "recipe.yaml"


def _tree(root: int) -> set[int]:
    """``root`` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _sample(pid: int, peaks: dict[int, tuple[str, int]]) -> None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmHWM" in fields:
        kib = int(fields["VmHWM"].split()[0])
        name = fields.get("Name", "?").strip()
        if kib > peaks.get(pid, ("", 0))[1]:
            peaks[pid] = (name, kib)


def measured(argv: list[str], env: dict[str, str]) -> tuple[Run, int]:
    """Run ``argv``; its time and its tree's peaks (sampled every :data:`SAMPLE_S`), and its pid."""
    run = Run()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in _tree(child.pid):
                _sample(pid, run.peaks)
            done.wait(SAMPLE_S)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, stderr = child.communicate()
    run.seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the whole tree: each process was waited for
    run.cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    run.landing = sum(float(m[1]) for m in re.finditer(r"landed \S+ in ([\d.]+) s", stderr))
    done.set()
    watcher.join()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} ... failed ({child.returncode}):\n{stderr[-3000:]}")
    return run, child.pid


def empty_channel(folder: Path) -> Path:
    (folder / "noarch").mkdir(parents=True)
    code = "import asyncio, sys\nfrom rattler.index import index_fs\nasyncio.run(index_fs(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", code, str(folder)], check=False, capture_output=True)
    if not (folder / "noarch" / "repodata.json").is_file():
        raise SystemExit(f"benchmarks/landing.py: could not index the empty channel {folder}")
    return folder


def one_size(
    work: Path, size: int, pool: list[Path], channel: Path, *, engine_too: bool
) -> tuple[Run | None, int, Run, int]:
    recipe = write_recipe(work / "recipe", size, pool)
    env = {**os.environ, "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    engine, engine_pid = None, 0
    if engine_too:
        engine, engine_pid = measured(
            [sys.executable, "-c", _ENGINE_ALONE, str(recipe), str(recipe.with_name("conda_build_config.yaml")),
             str(work / "engine"), str(channel)],
            env,
        )  # fmt: skip
        engine.package = sum(p.stat().st_size for p in (work / "engine").rglob("*.conda"))
        shutil.rmtree(work / "engine")  # the disk for the next
    toolkit, toolkit_pid = measured(
        [str(Path(sys.executable).with_name("flagtree-feedstock")), "build", "--recipe-dir", str(recipe.parent),
         "--exclusive-config-file", str(recipe.with_name("conda_build_config.yaml")), "--output-dir",
         str(work / "toolkit"), "--target-platform", "linux-64", "--channel", channel.as_uri(), "--no-test"],
        env,
    )  # fmt: skip
    toolkit.package = sum(p.stat().st_size for p in (work / "toolkit").rglob("*.conda"))
    shutil.rmtree(work / "toolkit")
    shutil.rmtree(work / "recipe")
    return engine, engine_pid, toolkit, toolkit_pid


def _mb(kib: int) -> str:
    return f"{kib * 1024 / 1e6:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4", help="GB of payload, comma-separated [1,4]")
    parser.add_argument(
        "--pool", type=Path, default=Path("/usr/lib"), help="where the *.a files are [/usr/lib]"
    )
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--toolkit-only", action="store_true", help="skip the engine alone's build")
    args = parser.parse_args(argv)
    pool = pool_files(args.pool)
    sizes = [int(float(s) * GB) for s in args.sizes.split(",")]
    print(
        f"pool: {len(pool)} static libraries, {sum(p.stat().st_size for p in pool) / 1e6:,.0f} MB, under {args.pool}"
    )
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = []
    with tempfile.TemporaryDirectory(prefix="landing-bench-", dir=args.work) as scratch:
        work = Path(scratch)
        channel = empty_channel(work / "empty")
        for size in sizes:
            engine, engine_pid, toolkit, toolkit_pid = one_size(
                work / f"{size}", size, pool, channel, engine_too=not args.toolkit_only
            )
            worker = toolkit.others(toolkit_pid)
            alone = (
                f"{engine.seconds:.0f} s ({engine.cpu:.0f} CPU-s) | {_mb(engine.top(engine_pid))} | "
                f"{engine.package / 1e6:,.0f} MB"
                if engine is not None
                else "not run | not run | not run"
            )
            ratio = f", {toolkit.seconds / engine.seconds:.2f}x" if engine is not None else ""
            rows.append(
                f"| {size / GB:g} GB | {alone} | "
                f"{toolkit.seconds:.0f} s ({toolkit.cpu:.0f} CPU-s){ratio} | "
                f"{toolkit.landing:.0f} s | {_mb(toolkit.top(toolkit_pid))} | {_mb(worker[1])} ({worker[0]}) | "
                f"{toolkit.package / 1e6:,.0f} MB | {os.getloadavg()[0]:.1f} |"
            )
            print(rows[-1], flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(
        "\n| payload | engine alone | its peak | its .conda | flagtree-feedstock build | its landing | the "
        "toolkit's own peak (landing) | its largest other process | its .conda | load after |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
