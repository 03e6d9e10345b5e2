"""What a URL may show: the one rule for every message, log line, summary, JSON document and record.

A URL can carry a secret in three places, all of which are left out when it is shown:

- its userinfo (``user:password@``), shown as ``…@``;
- its query (``?sig=…``: an Azure SAS token, a presigned S3 URL), shown as ``?…``; its fragment is dropped;
- anaconda.org's token segment (``/t/<token>/``, conda's and rattler's way of giving a channel's token),
  shown as ``/t/…/``.

So ``http://user:PW@host/t/TOKEN/chan?sig=Q`` shows as ``http://…@host/t/…/chan?…``, in the canonical form
rattler reads (:mod:`._url_parsing`; a URL that cannot be read one way only shows nothing after its scheme).
:func:`shown_text` applies the same rule to every URL inside a free text (an engine's error, a command line),
and masks the secrets of URLs it is given wherever else they appear (an engine may print a URL's parts apart),
as both Python's parser and the WHATWG standard find them.

Every line the toolkit prints goes through :func:`shown_text`, which first cuts what it is given to
:data:`._foreign_text.MESSAGE_CHARS` (saying how long it was): no text from outside, however long, is matched
or masked whole, and both run in time linear in what they read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote

from ._foreign_text import bounded_parts, masked
from ._url_parsing import UrlRefused, parse_url, python_reading, whatwg_reading

HIDDEN = "…"
# A URL inside a text: a scheme, ``://``, then anything up to a space or a quote. Tried only where a run of
# scheme characters starts (what precedes a scheme's first letter kept apart), so a long run of letters is
# read once, not once from each of its letters.
_SCHEME_CHARS = "A-Za-z0-9+.-"
_URL_IN_TEXT = re.compile(rf"(?<![{_SCHEME_CHARS}])[0-9+.-]*([A-Za-z][{_SCHEME_CHARS}]*://[^\s\"'<>`]*)")
# anaconda.org's token segment: ``t/<token>`` as two path segments.
_TOKEN_SEGMENT = re.compile(r"(?<![^/])t/[^/]+")
# The characters an error line shows escaped: control characters (a line break, a terminal escape).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A closing bracket after a URL is the text's, unless the URL opened it (``http://[::1]``).
_CLOSING = {")": "(", "]": "[", "}": "{"}
# A secret this short is not masked in free text, where it would hide ordinary words (``?a=1``).
_MIN_SECRET = 6


def shown_url(url: str) -> str:
    """``url`` as anything the toolkit prints or writes shows it: in its canonical form (the one rattler reads,
    :func:`._url_parsing.parse_url`: ``http://2130706433/`` shows as ``http://127.0.0.1/``), without its
    userinfo, its query, its fragment and anaconda.org's ``/t/<token>/`` segment. A URL that cannot be read one
    way only shows nothing after its scheme: which host it names depends on who reads it. What is not a URL (a
    path, a channel name) is returned as it is."""
    parts = python_reading(url)
    if parts is None:  # a malformed host ("http://[x"): nothing after the scheme is shown
        scheme = url.partition("://")[0]
        return f"{scheme}://{HIDDEN}" if "://" in url else url
    if not parts.scheme or not parts.netloc:
        return url
    try:
        read = parse_url(url)
    except UrlRefused:
        return f"{parts.scheme}://{HIDDEN}"
    user = f"{HIDDEN}@" if read.username or read.password else ""
    port = "" if read.port is None else f":{read.port}"
    query = f"?{HIDDEN}" if read.query else ""
    path = "" if read.path == "/" and not parts.path else _without_tokens(read.path)  # an origin stays one
    return f"{read.scheme}://{user}{read.host}{port}{path}{query}"


def token_segments(path: str) -> list[int]:
    """The indices (in ``path.split("/")``) of the segments holding an anaconda.org token: each one after a
    ``t`` segment (``%74`` too: a server decodes it)."""
    segments = path.split("/")
    return [
        index + 1
        for index, segment in enumerate(segments[:-1])
        if unquote(segment) == "t" and segments[index + 1]
    ]


def _without_tokens(path: str) -> str:
    segments = path.split("/")
    for index in token_segments(path):
        segments[index] = HIDDEN
    return "/".join(segments)


def url_secrets(url: str) -> set[str]:
    """The secrets ``url`` carries, as given and URL-decoded, as Python and as the WHATWG standard read it (one
    may see a password where the other sees a host: both are masked): its password, its ``/t/`` token, its
    query and each value in it (those too short to mask in a text are left out)."""
    found: set[str] = set()
    parts = python_reading(url)
    if parts is not None:
        found |= {parts.password or "", parts.query}
        found.update(match.group(0)[2:] for match in _TOKEN_SEGMENT.finditer(parts.path))
        found.update(value for _, value in parse_qsl(parts.query, keep_blank_values=True))
    read = whatwg_reading(url)
    if read is not None:
        segments = read.path.split("/")
        found |= {read.password, read.query, *(segments[index] for index in token_segments(read.path))}
        found.update(value for _, value in parse_qsl(read.query, keep_blank_values=True))
    spelled = {form for secret in found for form in (secret, unquote(secret))}  # quoted: masked() finds it
    return {secret for secret in spelled if len(secret) >= _MIN_SECRET}


def shown_text(text: str, urls: Iterable[str] = ()) -> str:
    """``text`` with every URL in it shown as :func:`shown_url` shows it, and every secret of ``urls``
    (:func:`url_secrets`) masked wherever else it appears, in any form (:func:`._foreign_text.masked`).

    A ``text`` longer than :data:`._foreign_text.MESSAGE_CHARS` is cut to that first, its length said; a URL
    the cut goes through is shown up to its ``://``, and a secret it goes through is masked too.
    """
    text, note = bounded_parts(text)
    if note:
        last_word = max(text.rfind(space) for space in " \t\n\r") + 1
        scheme_end = text.find("://", last_word)
        text = text if scheme_end < 0 else text[: scheme_end + 3]
    text = _URL_IN_TEXT.sub(_shown_match, text)
    secrets = {secret for url in urls for secret in url_secrets(url)}
    return masked(text, secrets, hidden=HIDDEN, cut=bool(note)) + note


def _shown_match(match: re.Match[str]) -> str:
    """A URL found in a text, shown; punctuation after it (``http://host:1: not followed``) is kept apart, as is
    what precedes its scheme's first letter. One pass from its end: time linear in its length."""
    found, url = match.group(0), match.group(1)
    lead = found[: len(found) - len(url)]
    closers = {closer: url.count(closer) for closer in _CLOSING}
    openers = {closer: url.count(opener) for closer, opener in _CLOSING.items()}
    end = len(url)
    while end:
        last = url[end - 1]
        if last in _CLOSING and openers[last] < closers[last]:
            closers[last] -= 1
        elif last not in ".,:;!?":
            break
        end -= 1
    return lead + shown_url(url[:end]) + url[end:]


def one_line(text: str) -> str:
    """``text`` as one printable line with its URLs shown (:func:`shown_text`): a control character that came
    from outside (a line break in a file name, a terminal escape) is shown escaped, ``\\r``, ``\\x1b``."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], shown_text(text))
