"""Each path by which text from outside comes in costs about linearly more for a longer hostile field (issue 34).

benchmarks/foreign_inputs.py's cases (the attestation bundle, the upload and exchange answers, index.json and
paths.json fields, an archive member's name, a variant file, a lock record, the bump's commit header) run in
one child process through the CLI's ``main``, each at 10 KB, 1 MB and 4 MB, twice: the less process CPU time
of each (the child's start-up, imports and the case's setup left out, and CPU time, not the clock, so a loaded
machine does not count). A case that does not end the way it should fails (its exit status: it reached the
path it stands for). From 10 KB to 1 MB linear work grows 100-fold; more than 150-fold fails. Work that grows
with the square of the input takes hours at 1 MB: the child's time limit ends it, and the test fails. Work
with the square that is still small at 1 MB (a scan of the field for every few hundred of its characters: half
a second at 1 MB) hides in the 10 KB runs' fixed cost there; from 1 MB to 4 MB, where the field's own work
shows, linear work grows at most 4-fold and that grows 16-fold: more than 10-fold fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "benchmarks" / "foreign_inputs.py"
# Each case's status at 10 KB, 1 MB and 4 MB (a lock record over 64 KB is refused, unread).
CASES = {
    "attestation bundle": (2, 2, 2),
    "upload answer": (9, 9, 9),
    "exchange answer": (9, 9, 9),
    "index.json field": (9, 9, 9),
    "paths.json path": (9, 9, 9),
    "archive member name": (9, 9, 9),
    "variant file": (2, 2, 2),
    "lock record": (0, 10, 10),
    "bump's git header": (0, 0, 0),
}
MAX_GROWTH = 150  # from 10 KB to 1 MB (100 times the input)
MAX_LARGE_GROWTH = 10  # from 1 MB to 4 MB (4 times the input; measured here: 1- to 4.5-fold)


@cache
def _measured() -> dict[str, dict[str, list[float]]]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--in-process", "2", "--sizes", "10K,1M,4M"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=seconds(90),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {line.pop("case"): line for line in lines}


def test_the_benchmark_covers_every_case() -> None:
    assert list(_measured()) == list(CASES)


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_field_costs_about_linearly_more(case: str) -> None:
    (small, small_status), (large, large_status), (larger, larger_status) = (
        _measured()[case][size] for size in ("10000", "1000000", "4000000")
    )
    assert (small_status, large_status, larger_status) == CASES[case]
    times = f"{case}: {small * 1000:.1f} ms at 10 KB, {large * 1000:.1f} ms at 1 MB, {larger * 1000:.1f} ms at 4 MB"
    assert large / small < MAX_GROWTH, times
    assert larger / large < MAX_LARGE_GROWTH, times
