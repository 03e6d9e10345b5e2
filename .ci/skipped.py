"""The closing lines of `.ci/run`: which checks did not run and why, read from pytest's JUnit XML report.

A skip whose reason says ``<VARIABLE>_SRC is not set`` is a source-backed check (tests/_tools.py,
``upstream_source``): it reads an upstream checkout that `.ci/run` cannot fetch and the workflow's tests job
clones. Every other skip is listed by its reason. The report decides what is listed; nothing here names a test.

    python .ci/skipped.py REPORT.xml    # in the folder pytest ran in
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

SOURCE_BACKED = re.compile(r"\b[A-Z][A-Z0-9_]*_SRC is not set\b")
# A module skipped at collection: message "collection skipped", text "('path', line, 'Skipped: reason')".
_COLLECTION_SKIP = re.compile(r"Skipped: (?P<reason>.*)'\)\s*$", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class Report:
    tests: int
    failed: int
    skips: list[tuple[str, str]]  # (test, reason)


def node_id(root: Path, classname: str, name: str) -> str:
    """pytest's node id (tests/test_x.py::TestK::test_y) of a JUnit test case, or classname::name."""
    parts = classname.split(".") if classname else []
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[end:], name])
    return "::".join(filter(None, (classname, name)))


def read(path: Path, root: Path) -> Report:
    """The counts and every skip (test id, reason) of a JUnit XML report pytest wrote in ``root``."""
    top = ET.parse(path).getroot()
    suites = [top] if top.tag == "testsuite" else top.findall("testsuite")
    skips = []
    for case in (case for suite in suites for case in suite.iter("testcase")):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        reason = skipped.get("message", "")
        if match := _COLLECTION_SKIP.search(skipped.text or ""):
            reason = match["reason"]
        skips.append((node_id(root, case.get("classname", ""), case.get("name", "")), reason))
    return Report(
        tests=sum(int(s.get("tests", "0")) for s in suites),
        failed=sum(int(s.get("failures", "0")) + int(s.get("errors", "0")) for s in suites),
        skips=skips,
    )


def summary(report: Report) -> list[str]:
    """The lines `.ci/run` ends with: source-backed checks that did not run, other skips, then the counts."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for test, reason in report.skips:
        by_reason[reason].append(test)
    sourced = {reason: tests for reason, tests in by_reason.items() if SOURCE_BACKED.search(reason)}
    others = {reason: tests for reason, tests in by_reason.items() if reason not in sourced}
    n_sourced = sum(map(len, sourced.values()))
    lines = []
    if sourced:
        lines.append(
            f"Source-backed checks that did not run here: {n_sourced} (their upstream checkout is not set; "
            "the workflow's tests job clones each and runs them):"
        )
        for reason, tests in sorted(sourced.items()):
            lines.append(f"  {reason}: {len(tests)}")
            lines += [f"    {test}" for test in sorted(tests)]
    else:
        lines.append("Source-backed checks: every one ran.")
    if others:
        lines.append(f"Other checks that did not run: {sum(map(len, others.values()))}:")
        lines += [f"  {reason}: {len(tests)}" for reason, tests in sorted(others.items())]
    ran = report.tests - len(report.skips)
    lines.append(
        f"Ran {ran} of {report.tests} checks ({report.failed} failed); skipped {len(report.skips)}, "
        f"{n_sourced} of them source-backed."
    )
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python .ci/skipped.py REPORT.xml", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"No test report ({path}): the tests did not run.")
        return 0
    print("\n".join(summary(read(path, Path.cwd()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
