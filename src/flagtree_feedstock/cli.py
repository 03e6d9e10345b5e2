"""Command line: the root parser, logging, the one table from command name to module, and the one place
that prints an error (each command is a module of :mod:`.commands`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TextIO, cast

from rich.console import Console

from flagtree_doctor.terminal import new_console

from . import __version__
from ._interrupts import PROG, report_interrupt
from ._progress import ConsoleHandler
from ._urls import one_line
from .commands import Command, build, bump, channel, sbom, staged_recipes, upload
from .errors import FeedstockError, file_access_error

LOGGER = logging.getLogger("flagtree_feedstock")


# The dispatch table: each command's name and the module that adds its parser and runs it, in --help's order.
COMMANDS: dict[str, Command] = {
    "build": build,
    "channel": channel,
    "upload": upload,
    "staged-recipes": staged_recipes,
    "sbom": sbom,
    "bump": bump,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Build and check the flagtree-cpu conda packages."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug-traceback", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    # Listed for --help only: main() hands their arguments to flagtree-doctor / flagtree-verify unparsed.
    sub.add_parser(
        "doctor", help="check this machine for flagtree-cpu (same as flagtree-doctor)", add_help=False
    )
    sub.add_parser(
        "verify", help="run the flagtree-cpu package test (same as flagtree-verify)", add_help=False
    )
    return parser


def main(
    argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None, console: Console | None = None
) -> int:
    """Run the CLI and return its exit status; errors become one line on stderr."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["doctor"]:
        from flagtree_doctor.cli import main as doctor_main  # noqa: PLC0415 - loaded only when asked for

        return doctor_main(argv[1:], env=env, console=console, prog=f"{PROG} doctor")
    if argv[:1] == ["verify"]:
        from flagtree_doctor.verify.cli import main as verify_main  # noqa: PLC0415 - as the doctor

        return verify_main(argv[1:], env=env, console=console, prog=f"{PROG} verify")
    args = _parser().parse_args(argv)
    env = os.environ if env is None else env
    out = console or _named_stdout(new_console())
    err = new_console(stderr=True)
    _configure_logging(err)
    try:
        return COMMANDS[args.command].run(args, env, out, err)
    except (FeedstockError, OSError) as exc:  # an OSError: a path no check foresaw, named in one line
        error = exc if isinstance(exc, FeedstockError) else file_access_error(exc)
        if args.debug_traceback or env.get("FLAGTREE_FEEDSTOCK_DEBUG"):
            traceback.print_exc()
        print(f"{PROG}: error: {one_line(str(error))}", file=sys.stderr)
        return error.return_code
    except KeyboardInterrupt as interrupt:  # SIGINT, SIGTERM or SIGHUP (_interrupts)
        return report_interrupt(interrupt)


class _NamedStream:
    """A stream whose write errors name it: a full disk or a closed pipe behind stdout is one line naming
    standard output (and the file it is), not an error without a path."""

    def __init__(self, stream: IO[str], name: str) -> None:
        self._stream = stream
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(self._stream, attribute)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._name) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._name) from None


def _named_stdout(console: Console) -> Console:
    try:
        where = str(Path("/proc/self/fd/1").readlink())
    except OSError:
        where = ""
    name = f"standard output ({where})" if where else "standard output"
    console.file = cast("TextIO", _NamedStream(console.file, name))  # it passes everything else through
    return console


def _configure_logging(err: Console) -> None:
    """Library code logs; the CLI prints those records on this call's stderr console."""
    LOGGER.handlers = [ConsoleHandler(err)]
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
