"""``flagtree-doctor [--root DIR] [--json] [--list] [CHECK ...]``: exit 1 when a check fails, 2 on bad input."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ._cli import ArgumentParser, report_error
from .checks import CHECKS, diagnose
from .errors import ConfigurationError, DoctorError
from .model import System
from .report import SCHEMA_VERSION, count_line, exit_status, summary_lines, table, to_json

PROG = "flagtree-doctor"
# What a recorded tree must hold (see the README, "Recording a machine"): the CPU checks read it first.
TREE_CPUINFO = "proc/cpuinfo"


def _parser(prog: str) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog, description="Check that this machine and environment suit the flagtree-cpu package."
    )
    parser.add_argument("checks", nargs="*", metavar="CHECK", help="run only these checks (see --list)")
    parser.add_argument(
        "--root", type=Path, help="judge a recorded tree of another machine (its proc/ and sys/) instead"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    return parser


def check_root(root: Path) -> None:
    """A ``--root`` tree must be a folder holding at least ``proc/cpuinfo``."""
    if not root.is_dir():
        raise ConfigurationError(
            f"--root {root} is not a folder",
            fix="pass the top of a recorded tree (it holds proc/ and sys/)",
        )
    if not (root / TREE_CPUINFO).is_file():
        raise ConfigurationError(
            f"--root {root} has no {TREE_CPUINFO}",
            fix=f"copy the machine's /proc/cpuinfo to {root / TREE_CPUINFO} (the README's 'Recording a "
            "machine' lists every file the doctor reads)",
        )


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    console: Console | None = None,
    prog: str = PROG,
) -> int:
    """Run the doctor and return its exit status (0 ok, 1 a check failed, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = console or Console(highlight=False)
    as_json = "--json" in argv
    try:
        args = _parser(prog).parse_args(argv)
        if args.list:
            for check in CHECKS:
                out.print(f"{check.id:<22} {check.group:<12} {escape(check.summary)}")
            return 0
        if args.root is not None:
            check_root(args.root)
        facts, results = diagnose(System.from_root(args.root, env), args.checks)
    except DoctorError as exc:
        return report_error(exc, prog=prog, as_json=as_json, schema_version=SCHEMA_VERSION, out=out)
    if args.json:
        out.print_json(json.dumps(to_json(facts, results)))
    else:
        for line in summary_lines(facts, results):
            out.print(escape(line))
        out.print(table(results))
        out.print(count_line(results))
    return exit_status(results)


def entrypoint() -> None:
    sys.exit(main(sys.argv[1:]))
