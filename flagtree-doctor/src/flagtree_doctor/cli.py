"""``flagtree-doctor [--root DIR] [--json | --list | --env [--shell sh|fish] | --apply [--undo] | --version]
[CHECK ...]``.

Exit status: 0 every check passed (warnings allowed), 1 a check failed, 2 bad input (or, for ``--apply``, no
active conda environment, or one it cannot write into).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from . import activation, openmp
from ._cli import ArgumentParser, report_error
from ._version import version
from .bounded import RefusedFile, read_bounded
from .checks import CHECKS, diagnose
from .cpu import cpu_facts, format_cpu_list, parse_cpuinfo
from .errors import ConfigurationError, DoctorError
from .model import Facts, System
from .openmp import SHELLS
from .report import SCHEMA_VERSION, count_line, exit_status, shared_skips, summary_lines, table, to_json
from .terminal import new_console, print_json

PROG = "flagtree-doctor"
# What a recorded tree must hold (the feedstock's docs/using.md, "Recording a machine"): the CPU checks read it first.
TREE_CPUINFO = "proc/cpuinfo"


def _parser(prog: str) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog, description="Check that this machine and environment suit the flagtree-cpu package."
    )
    parser.add_argument("checks", nargs="*", metavar="CHECK", help="run only these checks (see --list)")
    parser.add_argument(
        "--root", type=Path, help="judge a recorded tree of another machine (its proc/ and sys/) instead"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    mode.add_argument("--list", action="store_true", help="list the checks and exit")
    mode.add_argument(
        "--env", action="store_true", help="print the OpenMP environment recommended here, as export lines"
    )
    mode.add_argument(
        "--apply",
        action="store_true",
        help="write that environment into the active conda environment's activation scripts",
    )
    mode.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--shell", choices=SHELLS, help="with --env: the shell to write for [sh]")
    parser.add_argument("--undo", action="store_true", help="with --apply: remove what --apply wrote")
    return parser


def _openmp(args: argparse.Namespace, system: System, env: Mapping[str, str], out: Console) -> int:
    """``--env`` and ``--apply``: the OpenMP environment for this machine (or the --root tree)."""
    layout = cpu_facts(Facts(system)).layout
    recommended = openmp.recommend(layout.big, layout.little)
    if args.env:
        for line in openmp.export_lines(recommended, args.shell or "sh"):
            out.print(escape(line), soft_wrap=True)
        return 0
    prefix = activation.conda_prefix(env)
    if args.undo or not recommended:
        removed = activation.remove(prefix)
        if not args.undo:
            out.print("the cores are all alike: no OpenMP setting is needed")
        for path in removed:
            out.print(escape(f"removed {path}"), soft_wrap=True)
        if args.undo and not removed:
            out.print(escape(f"nothing to remove: flagtree-doctor --apply wrote nothing into {prefix}"))
        return 0
    why = f"OpenMP on the big cores {layout.taskset}, not the little {format_cpu_list(layout.little)}"
    changed = activation.write(activation.scripts(prefix, recommended, why))
    for path in changed:
        out.print(escape(f"wrote {path}"), soft_wrap=True)
    settings = " ".join(f"{name}={value}" for name, value in recommended.items())
    state = "takes effect at the next `conda activate`" if changed else "already in place"
    out.print(escape(f"{settings}: {state}"), soft_wrap=True)
    for name in recommended:
        if name in env:
            out.print(
                escape(f"{name} is set in this shell ({env[name]!r}): the activation leaves it as it is")
            )
    return 0


def check_root(root: Path) -> None:
    """A ``--root`` tree must be a folder holding a copy of ``/proc/cpuinfo``: readable, with processor blocks."""
    if not root.is_dir():
        raise ConfigurationError(
            f"--root {root} is not a folder",
            fix="pass the top of a recorded tree (it holds proc/ and sys/)",
        )
    cpuinfo = root / TREE_CPUINFO
    fix = (
        f"copy the machine's /proc/cpuinfo to {cpuinfo} (the feedstock's docs/using.md, 'Recording a machine', "
        "lists every file the doctor reads)"
    )
    if not cpuinfo.exists():
        raise ConfigurationError(f"--root {root} has no {TREE_CPUINFO}", fix=fix)
    if not cpuinfo.is_file():
        kind = "a folder" if cpuinfo.is_dir() else "not a regular file"
        raise ConfigurationError(f"--root {root}: {cpuinfo} is {kind}, not a copy of /proc/cpuinfo", fix=fix)
    try:
        text = read_bounded(cpuinfo).decode("utf-8", errors="replace")
    except RefusedFile as exc:
        raise ConfigurationError(f"--root {root}: {exc}, not a copy of /proc/cpuinfo", fix=fix) from None
    except OSError as exc:
        raise ConfigurationError(
            f"--root {root}: {cpuinfo} cannot be read ({exc.strerror or exc})", fix=fix
        ) from None
    if not text.strip():
        raise ConfigurationError(f"--root {root}: {cpuinfo} is empty", fix=fix)
    if not parse_cpuinfo(text):
        raise ConfigurationError(
            f"--root {root}: {cpuinfo} holds no 'processor : N' block, so it is not a copy of /proc/cpuinfo",
            fix=fix,
        )


def _check_options(args: argparse.Namespace) -> None:
    """The options that do not go together, and a ``--root`` tree that cannot be read."""
    if args.root is not None:
        check_root(args.root)
    if args.shell is not None and not args.env:
        raise ConfigurationError("--shell goes with --env", fix="flagtree-doctor --env --shell fish")
    if args.undo and not args.apply:
        raise ConfigurationError("--undo goes with --apply", fix="flagtree-doctor --apply --undo")
    if args.apply and args.root is not None:
        raise ConfigurationError(
            f"--apply writes this machine's OpenMP settings into the active environment, and --root "
            f"{args.root} is another machine's",
            fix=f"run flagtree-doctor --apply on that machine; flagtree-doctor --root {args.root} --env prints "
            "its settings",
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
    out = console or new_console()
    as_json = "--json" in argv
    try:
        args = _parser(prog).parse_args(argv)
        if args.version:
            out.print(f"{prog} {version()}")
            return 0
        if args.list:
            for check in CHECKS:
                out.print(f"{check.id:<22} {check.group:<12} {escape(check.summary)}")
            return 0
        _check_options(args)
        system = System.from_root(args.root, env)
        if args.env or args.apply:
            return _openmp(args, system, system.env, out)
        facts, results = diagnose(system, args.checks)
    except DoctorError as exc:
        return report_error(exc, prog=prog, as_json=as_json, schema_version=SCHEMA_VERSION, out=out)
    if args.json:
        print_json(out, to_json(facts, results))
    else:
        for line in summary_lines(facts, results):
            out.print(escape(line))
        rows, skipped = shared_skips(results)
        out.print(table(rows))
        for line in skipped:
            out.print(escape(line))
        out.print(count_line(results))
    return exit_status(results)
