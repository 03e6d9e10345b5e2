"""What flagtree-doctor and flagtree-verify share at the command line: one way to fail.

A usage error is a :class:`~.errors.ConfigurationError` like any other bad input, and every error is one
line on stderr, ``<prog>: error: <message> (fix: <fix>)``; under ``--json`` stdout also gets one JSON object,
``{"schema_version": ..., "error": {"message", "fix", "exit_status"}}``, so a caller that parses stdout
always gets JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from rich.console import Console

from .errors import ConfigurationError, DoctorError
from .terminal import print_json


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its usage errors raised as :class:`ConfigurationError` instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise ConfigurationError(message, fix=f"see {self.prog} --help")


def report_error(exc: DoctorError, *, prog: str, as_json: bool, schema_version: str, out: Console) -> int:
    """Print ``exc`` (and, under ``--json``, its JSON object) and return its exit status."""
    print(f"{prog}: error: {exc}", file=sys.stderr)
    if as_json:
        error = {"message": exc.message, "fix": exc.fix, "exit_status": exc.return_code}
        print_json(out, {"schema_version": schema_version, "error": error})
    return exc.return_code
