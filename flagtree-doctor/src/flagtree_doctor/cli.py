"""``flagtree-doctor [--root DIR] [--json] [--list] [CHECK ...]``: exit 1 when a check fails."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from flagtree_doctor.errors import ConfigurationError, DoctorError

from .checks import CHECKS, diagnose
from .model import System
from .report import exit_status, summary_lines, table, to_json

PROG = "flagtree-doctor"


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Check that this machine and environment suit the flagtree-cpu package."
    )
    parser.add_argument("checks", nargs="*", metavar="CHECK", help="run only these checks (see --list)")
    parser.add_argument("--root", type=Path, help="read a recorded filesystem tree instead of this machine")
    parser.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    console: Console | None = None,
    prog: str = PROG,
) -> int:
    """Run the doctor and return its exit status (0 ok, 1 a check failed, 2 bad usage)."""
    args = _parser(prog).parse_args(argv)
    out = console or Console(highlight=False)
    try:
        if args.list:
            for check in CHECKS:
                out.print(f"{check.id:<22} {check.group:<12} {escape(check.summary)}")
            return 0
        if args.root is not None and not args.root.is_dir():
            raise ConfigurationError(
                f"--root {args.root} is not a folder",
                fix="pass the top of a recorded tree (it holds proc/ and sys/)",
            )
        facts, results = diagnose(System.from_root(args.root, env), args.checks)
    except DoctorError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.return_code
    if args.json:
        out.print_json(json.dumps(to_json(facts, results)))
    else:
        for line in summary_lines(facts, results):
            out.print(escape(line))
        out.print(table(results))
    return exit_status(results)


def entrypoint() -> None:
    sys.exit(main(sys.argv[1:]))
