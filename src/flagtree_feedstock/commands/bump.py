"""``flagtree-feedstock bump``: its options, and its report as tables, Markdown (``--summary``) or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from flagtree_doctor.terminal import print_json
from flagtree_feedstock.bump.checks import short
from flagtree_feedstock.bump.run import BumpReport, BumpRequest, bump
from flagtree_feedstock.errors import UpstreamCheckError
from flagtree_feedstock.recipe.pins import write_atomically

from ._arguments import Subparsers

BUMP_SCHEMA_VERSION = "1"
_HASHED = ("_commit", "_sha256")


def add_parser(sub: Subparsers) -> None:
    """``bump --flagtree-src DIR``: where the new pins come from, and what to write."""
    bump_parser = sub.add_parser(
        "bump",
        help="move the pins to a new FlagTree commit, checked (offline, from local clones)",
        description="Compute the new pins from a FlagTree clone (and a flagtree-cpu clone), check the patches, "
        "the LLVM and plain libraries and the flagtree-cpu API against them, and write the pins and refreshed "
        "patches, all of them or none; nothing is written when a check fails.",
    )
    bump_parser.add_argument(
        "--flagtree-src",
        required=True,
        type=Path,
        metavar="DIR",
        help="a git clone of FlagTree, with its tags",
    )
    bump_parser.add_argument(
        "--to", default="HEAD", metavar="REF", help="the FlagTree commit to move to [HEAD]"
    )
    bump_parser.add_argument(
        "--flagtree-cpu-src",
        type=Path,
        metavar="DIR",
        help="a git clone of flagtree-cpu at the commit to pin (its HEAD); checks its API against FlagTree",
    )
    bump_parser.add_argument(
        "--llvm-sha256", metavar="HEX", help="sha256 of the LLVM archive, when cmake/llvm-hash.txt moves"
    )
    bump_parser.add_argument(
        "--llvm-archive",
        type=Path,
        metavar="FILE",
        help="the LLVM archive (llvm-project/archive/<commit>.tar.gz) to take the sha256 from, when it moves",
    )
    bump_parser.add_argument(
        "--recipe-dir", type=Path, default=Path("recipe"), help="the recipe folder [recipe]"
    )
    bump_parser.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    bump_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    bump_parser.add_argument(
        "--summary",
        type=Path,
        metavar="FILE",
        help="also write the report as Markdown (a pull request's body)",
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Run the bump for parsed ``args``; print the report; a failed check is an :class:`UpstreamCheckError`."""
    report = bump(
        BumpRequest(
            recipe_dir=args.recipe_dir,
            flagtree_src=args.flagtree_src,
            to=args.to,
            flagtree_cpu_src=args.flagtree_cpu_src,
            llvm_sha256=args.llvm_sha256,
            llvm_archive=args.llvm_archive,
            dry_run=args.dry_run,
        )
    )
    if args.summary is not None:
        write_atomically({args.summary: markdown(report)})
    if args.json:
        print_json(out, document(report))
    else:
        _print(report, out)
    if report.write_failure is not None:
        raise report.write_failure
    if report.failed:
        names = ", ".join(check.name for check in report.failed)
        raise UpstreamCheckError(
            f"{len(report.failed)} of {len(report.checks)} checks failed for FlagTree {short(report.flagtree)} "
            f"({names}); nothing written",
            fix="fix the feedstock for this commit by hand (the table says what), or bump to another commit",
        )
    return 0


def _value(key: str, value: str) -> str:
    return value[:12] if key.endswith(_HASHED) else value


def headline(report: BumpReport) -> str:
    """One line: what the bump moves to, or that nothing moved."""
    if not report.moved:
        return f"nothing to bump: FlagTree {short(report.flagtree)} ({report.subject}) is the pinned commit"
    return f"FlagTree {short(report.flagtree)}: {report.subject}"


def outcome_line(report: BumpReport) -> str:
    """What happened to the files: written, a dry run, or nothing because a check failed."""
    if not report.moved:
        return "nothing written"
    if report.failed:
        return "nothing written: a check failed"
    if report.dry_run:
        count = 1 + len(report.refreshed)
        return f"dry run: nothing written (the bump would write {count} file{'s' if count > 1 else ''})"
    failure = report.write_failure
    if failure is not None:
        why = f"{failure.failed} could not be written ({failure.reason})"
        if failure.written:
            return f"{why}: wrote {_paths(report.written)}; not written: {_paths(report.not_written)}"
        return f"{why}: nothing written, every file as it was"
    return f"wrote {_paths(report.written)}"


def _paths(paths: tuple[Path, ...]) -> str:
    return ", ".join(str(path) for path in paths)


def _file_rows(report: BumpReport) -> list[list[str]]:
    """Each file the bump tried to write and what became of it (after a failed write only)."""
    failure = report.write_failure
    if failure is None:
        return []
    rows = [[str(path), "written (could not be put back)"] for path in report.written]
    for path in report.not_written:
        if path == failure.failed:
            rows.append([str(path), f"not written: {failure.reason}"])
        else:
            rows.append([str(path), "not written (put back)" if path in failure.put_back else "not written"])
    return rows


def _rows(report: BumpReport) -> tuple[list[list[str]], list[list[str]]]:
    pins = [
        [
            pin.key,
            _value(pin.key, pin.old),
            _value(pin.key, pin.new) if pin.new != pin.old else "=",
            pin.source,
        ]
        for pin in report.pins
    ]
    checks = [[check.name, check.status, check.summary] for check in report.checks]
    return pins, checks


def _print(report: BumpReport, out: Console) -> None:
    out.print(headline(report), markup=False)  # the commit's subject is the upstream's text, not markup
    pin_rows, check_rows = _rows(report)
    if report.moved:
        pins = Table(title="pins (12 characters; --json shows them whole)")
        for column in ("pin", "now", "bumped", "from"):
            pins.add_column(column, overflow="fold")
        for row in pin_rows:
            pins.add_row(*row)
        out.print(pins)
        checks = Table(title="checks")
        checks.add_column("check", no_wrap=True)
        checks.add_column("result", no_wrap=True)
        checks.add_column("details", overflow="fold")
        for row in check_rows:
            checks.add_row(*row)
        out.print(checks)
    for check in report.failed:
        for detail in check.details:
            out.print(f"{check.name}:\n{detail}", markup=False, highlight=False)
    for outcome in report.refreshed:
        out.print(outcome.diff, markup=False, highlight=False, end="")
    if rows := _file_rows(report):
        files = Table(title="files")
        files.add_column("file", no_wrap=True)
        files.add_column("result")
        for row in rows:
            files.add_row(*row)
        out.print(files)
    out.print(outcome_line(report), markup=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: BumpReport) -> str:
    """The report as Markdown: the headline, both tables, each failure's details, the patch diffs."""
    lines = [headline(report), ""]
    pin_rows, check_rows = _rows(report)
    if report.moved:
        lines += ["| pin | now | bumped | from |", "| --- | --- | --- | --- |"]
        lines += ["| " + " | ".join(f"`{_cell(cell)}`" if i else _cell(cell) for i, cell in enumerate(row[:3]))
                  + f" | {_cell(row[3])} |" for row in pin_rows]  # fmt: skip
        lines += ["", "| check | result | details |", "| --- | --- | --- |"]
        lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in check_rows]
    for check in report.failed:
        for detail in check.details:
            lines += ["", f"{check.name}:", "```", detail, "```"]
    for outcome in report.refreshed:
        lines += ["", f"Refreshed `{outcome.patch.parent.name}/{outcome.patch.name}`:", "```diff"]
        lines += [outcome.diff.rstrip("\n"), "```"]
    if rows := _file_rows(report):
        lines += ["", "| file | result |", "| --- | --- |"]
        lines += [f"| `{_cell(path)}` | {_cell(result)} |" for path, result in rows]
    lines += ["", outcome_line(report)]
    return "\n".join(lines) + "\n"


def document(report: BumpReport) -> dict[str, Any]:
    """The report as one JSON object (a contract: BUMP_SCHEMA_VERSION)."""
    return {
        "schema_version": BUMP_SCHEMA_VERSION,
        "flagtree": report.flagtree,
        "subject": report.subject,
        "moved": report.moved,
        "dry_run": report.dry_run,
        "pins": {pin.key: {"old": pin.old, "new": pin.new, "source": pin.source} for pin in report.pins},
        "checks": [
            {"name": c.name, "status": c.status, "summary": c.summary, "details": list(c.details)}
            for c in report.checks
        ],
        "refreshed": [
            {"patch": f"{o.patch.parent.name}/{o.patch.name}", "diff": o.diff} for o in report.refreshed
        ],
        "written": [str(path) for path in report.written],
        "not_written": [str(path) for path in report.not_written],
    }
