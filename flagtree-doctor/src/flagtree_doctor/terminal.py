"""The consoles every command writes to: flagtree-doctor, flagtree-verify and the toolkit's flagtree-feedstock.

Two rules, the same for all of them:

- Output never raises on an encoding. A stream whose encoding cannot hold a character (``PYTHONIOENCODING=ascii``,
  a Latin-1 locale, some CI consoles), or a path holding bytes that are not UTF-8, writes it as a backslash
  escape (``\\u901a``), as Python's own stderr always does; rich draws its tables with ASCII lines there.
  JSON is written with ``\\u`` escapes on such a stream, so it stays valid JSON.
- Nothing is hard-wrapped unless the stream is a terminal. In a pipe, a file or a CI log a line is as long as
  it is, so a URL, a build string or a patch name stays on one line, whole, to be copied or searched
  (``COLUMNS`` is not read there). A terminal wraps at its width, as rich does.
"""

from __future__ import annotations

import io
import json
import sys
from typing import TextIO

from rich.console import Console

# The width a console that is not a terminal lays tables out in: wider than any line the commands print, so
# a table is as wide as its cells and no cell folds (a finite number: rich measures against it).
UNWRAPPED_WIDTH = 1 << 16


def escape_unencodable(stream: TextIO) -> None:
    """Make ``stream`` write what its encoding cannot hold as backslash escapes instead of raising."""
    if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "surrogateescape"):
        stream.reconfigure(errors="backslashreplace")


def new_console(*, stderr: bool = False) -> Console:
    """A console on this process's stdout (or stderr) that never raises on an encoding and, off a terminal,
    never wraps."""
    stream = sys.stderr if stderr else sys.stdout
    escape_unencodable(stream)
    terminal = stream.isatty()
    return Console(
        file=stream,
        highlight=False,
        soft_wrap=not terminal,
        width=None if terminal else UNWRAPPED_WIDTH,
    )


def print_json(console: Console, document: object) -> None:
    """``document`` as indented JSON; with ``\\u`` escapes where the console's encoding is not UTF-8."""
    console.print_json(json.dumps(document), ensure_ascii=not console.encoding.startswith("utf"))
