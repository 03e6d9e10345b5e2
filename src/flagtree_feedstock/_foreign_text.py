"""Text from outside (a server's answer, a file's field, an archive member's name, a git header), as a message
shows it: cut to a bound first, its secrets masked in time linear in what is read.

- **Bounded.** Foreign text is cut before anything formats, escapes, masks or matches it, and the cut says how
  long the text was: ``'https://x'… (8,000,017 characters)``. A field a message quotes is cut to
  :data:`FIELD_CHARS` (:func:`quoted`); a whole message, log line or summary to :data:`MESSAGE_CHARS`
  (:func:`bounded`, which :func:`._urls.shown_text`, the one function every printed line goes through, applies).
  So no regular expression, escape or mask, all of which run in C where a signal waits for them, ever works
  on more than that: a SIGTERM or Ctrl-C ends the command at once, whatever the input was.
- **Masked.** A secret (a token, a password) is masked wherever it is echoed (:func:`masked`): as given,
  JSON-escaped (``\\/``, ``\\"``, or any character as ``\\u00XX``), URL-quoted (``%2F``), and split by line
  breaks or spaces (``\\n`` escaped too), each character in any of its forms. One regular expression without
  nested repetition finds them all: time linear in the text.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable
from functools import cache

# A field quoted in a message (a predicate type, a name, a server's reason) is shown up to this many characters.
FIELD_CHARS = 200
# A whole message, log record or summary is shown up to this many characters: far beyond any the toolkit
# writes itself (the 40 lines of a failed build script's log fit), small enough to match at once.
MESSAGE_CHARS = 64 << 10
# What may split an echoed secret: whitespace, or its JSON escape; a few at each place.
_SPLIT = r"(?:\s|\\[nrt]){0,8}"
# The longest form of one character: its UTF-8 bytes URL-quoted (4 x 3) or two \u escapes (12), plus a split.
_LONGEST_FORM = 12 + 16
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = FIELD_CHARS
_REPR.maxlevel = 3


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text``, or its first ``limit`` characters followed by how long it was: ``abc… (8,000,017 characters)``."""
    head, note = bounded_parts(text, limit)
    return head + note


def bounded_parts(text: str, limit: int = MESSAGE_CHARS) -> tuple[str, str]:
    """``text`` cut as :func:`bounded` cuts it, as (what is kept, the note on its length: "" when nothing was cut)."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"… ({len(text):,} characters)"


def quoted(value: object, limit: int = FIELD_CHARS) -> str:
    """A foreign value as a message quotes it: a string as ``repr`` shows it (its escapes visible), cut to
    ``limit`` characters with its length said; anything else (a JSON array or object) in brief."""
    if isinstance(value, str):
        head, note = bounded_parts(value, limit)
        return repr(head) + note
    return _REPR.repr(value)


def masked(text: str, secrets: Iterable[str], *, hidden: str, cut: bool = False) -> str:
    """``text`` with each of ``secrets`` replaced by ``hidden`` in every form it may be echoed in (the module's
    docstring). Blank secrets are ignored.

    ``cut``: ``text`` is the start of something longer (a read or a cut stopped there), so an end of it that
    begins a secret, in any of those forms, is masked too (a secret straddling the cut).
    """
    wanted = tuple(sorted({s for s in secrets if s.strip()}, key=len, reverse=True))
    if not wanted:
        return text
    text = _pattern(wanted).sub(lambda _: hidden, text)
    if cut:
        for secret in wanted:
            start = _straddle(text, secret)
            if start is not None:
                return text[:start] + hidden
    return text


@cache
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``secrets`` (longest first) in any of its forms."""
    return re.compile("|".join(f"(?:{_SPLIT.join(_forms(c) for c in secret)})" for secret in secrets))


@cache
def _char_patterns(secret: str) -> tuple[re.Pattern[str], ...]:
    """One pattern per character of ``secret``, each matching that character's forms and a split after it."""
    return tuple(re.compile(_forms(c) + _SPLIT) for c in secret)


def _straddle(text: str, secret: str) -> int | None:
    """Where an end of ``text`` begins ``secret`` (in any form), or None."""
    patterns = _char_patterns(secret)
    first = max(0, len(text) - len(secret) * _LONGEST_FORM)
    for start in range(first, len(text)):
        position = start
        for pattern in patterns[:-1]:
            found = pattern.match(text, position)
            if found is None:
                break
            position = found.end()
            if position == len(text):
                return start
    return None


def _forms(char: str) -> str:
    """A pattern of ``char`` in each form it may be echoed in: itself, ``\\``-escaped as JSON may write it,
    ``\\u``-escaped (hex digits in either case), URL-quoted (each UTF-8 byte)."""
    forms = [re.escape(char)]
    if char in '"\\/':
        forms.append(re.escape("\\" + char))
    units = char.encode("utf-16-be", "surrogatepass")
    forms.append("".join(r"\\u" + _hex(units[i : i + 2]) for i in range(0, len(units), 2)))
    forms.append("".join("%" + _hex(bytes([byte])) for byte in char.encode("utf-8", "surrogateescape")))
    return "(?:" + "|".join(forms) + ")"


def _hex(data: bytes) -> str:
    """A pattern of ``data``'s hex digits in either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in data.hex())
