"""The consoles every command writes to: flagtree-doctor, flagtree-verify and the toolkit's flagtree-feedstock.

Two rules, the same for all of them:

- Output never raises on an encoding. A stream whose encoding cannot hold a character (``PYTHONIOENCODING=ascii``,
  a Latin-1 locale, some CI consoles), or a path holding bytes that are not UTF-8, writes it as a backslash
  escape (``\\u901a``), as Python's own stderr always does; rich draws its tables with ASCII lines there.
  JSON is written with ``\\u`` escapes on such a stream, so it stays valid JSON.
- Nothing is hard-wrapped unless the stream is a terminal. In a pipe, a file or a CI log a line is as long as
  it is, so a URL, a build string or a patch name stays on one line, whole, to be copied or searched
  (``COLUMNS`` is not read there). A terminal wraps at its width, as rich does.
- Nothing vanishes, whatever ``COLUMNS``, ``LINES`` and ``TERM`` say. A terminal's width is ``COLUMNS`` when that
  is a whole number, else the terminal's own, else 80; never less than ``MIN_WIDTH``, where rich would drop table
  columns or print nothing at all (``COLUMNS=0``), nor more than ``UNWRAPPED_WIDTH``: a terminal narrower than
  that wraps the lines itself. Width and height are always given to rich, so it reads neither variable (and a
  ``TERM=dumb`` console with ``FORCE_COLOR`` set does not fall back to 80 columns in a pipe).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from rich.console import Console

# The width a console that is not a terminal lays tables out in: wider than any line the commands print, so
# a table is as wide as its cells and no cell folds (a finite number: rich measures against it).
UNWRAPPED_WIDTH = 1 << 16
# The narrowest layout: below it rich's tables drop whole columns (the doctor's messages and fixes).
MIN_WIDTH = 40
# What a terminal that says nothing usable about its size is taken to be (rich's own default).
DEFAULT_SIZE = os.terminal_size((80, 25))


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
    width, height = terminal_size(stream, os.environ) if terminal else (UNWRAPPED_WIDTH, DEFAULT_SIZE.lines)
    return Console(file=stream, highlight=False, soft_wrap=not terminal, width=width, height=height)


def terminal_size(stream: TextIO, environ: Mapping[str, str]) -> tuple[int, int]:
    """The width and height to lay out for on the terminal ``stream``: ``COLUMNS`` and ``LINES`` where they are
    whole numbers, else the terminal's own size, else 80 by 25; the width kept between ``MIN_WIDTH`` and
    ``UNWRAPPED_WIDTH``."""
    try:
        own = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError):  # no file descriptor, or not a terminal after all
        own = DEFAULT_SIZE
    width = _positive(environ.get("COLUMNS")) or own.columns or DEFAULT_SIZE.columns
    height = _positive(environ.get("LINES")) or own.lines or DEFAULT_SIZE.lines
    return min(max(width, MIN_WIDTH), UNWRAPPED_WIDTH), min(height, UNWRAPPED_WIDTH)


def _positive(value: str | None) -> int:
    """``value`` as a whole number above 0, else 0 (unset, empty, negative, or not a number)."""
    text = (value or "").strip()
    return int(text) if text.isdigit() and text.isascii() else 0


def print_json(console: Console, document: object) -> None:
    """``document`` as indented JSON; with ``\\u`` escapes where the console's encoding is not UTF-8."""
    console.print_json(json.dumps(document), ensure_ascii=not console.encoding.startswith("utf"))
