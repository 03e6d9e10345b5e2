"""One reading of a URL, the WHATWG URL standard's, as rattler reads it: its canonical text and its parts.

Rattler (Rust's ``url`` crate), py-rattler-build and reqwest parse URLs the WHATWG way; Python's
``urllib.parse`` splits them by RFC 3986's grammar and leaves the host as written. The two disagree on what
matters for a credential: to a WHATWG parser ``2130706433``, ``0177.0.0.1``, ``0x7f.0.0.1``, ``127.1``,
``127.0.0.%31`` and ``127.0.0.1.`` are all the IPv4 address ``127.0.0.1``; ``BÜCHER.example`` is
``xn--bcher-kva.example``; ``[0:0::1]`` is ``[::1]``; ``:80`` in an http URL is no port at all; and a
backslash ends the host. Rattler keys its authentication file by that canonical host (``Url::host_str``), so
comparing Python's hosts sent a channel's password to a server rattler read as the same host (issue 41).

So every URL the toolkit compares, keys or hands on (a channel, a credential's origin, the HTTP client's URL
and each redirect, an upload server, the LLVM archive, trusted publishing's endpoints) is read here, once:
:func:`parse_url` gives its canonical text (:attr:`Url.href`) and parts, through ada (PyPI ``ada-url``, the
bindings of a WHATWG URL parser; Python has none of its own), and the toolkit hands on that canonical text,
to rattler and to its own client alike: what was checked is what is read. A second parse of it gives it back
unchanged (``tests/test_url_origins.py`` checks that, and that rattler's own reading of each spelling, and the
host its authentication lookup uses, are ours).

Refused in one line (:class:`UrlRefused`):

- what ada cannot read as a URL (rattler's parser refuses it too): a malformed host or port;
- a ``xn--`` label that is not the punycode of a valid label (``xn--``, ``xn--abc``): ada takes it as it is,
  rattler's IDNA check refuses it, so the two would not read the same URL;
- a URL whose host or port Python's parser reads otherwise, even once Python's host is canonicalised the
  WHATWG way: a backslash before the path (``http://user:PW@a.test\\@b.test/``: ``a.test`` to rattler, where
  the password goes, ``b.test`` to Python), an extra slash before the host (``http:///host``), a password
  holding a ``/``. The user, their shell history and every Python tool take it for another server than
  rattler does.

A trailing dot is kept, and ``host.`` is not the origin ``host``: the WHATWG standard keeps the dot of a
domain (ada and the ``url`` crate read ``http://host./`` with the host ``host.``, another origin than
``http://host``), and rattler's authentication lookup is an exact match on that host (then only the user's
own ``*.`` wildcards): a credential given for ``host`` is never sent to ``host.``, nor the reverse (watched
through a loopback proxy in ``tests/test_url_origins.py``). Taking them as one origin would key a credential
where rattler never looks for it, and refuse pairs rattler keeps apart; taking them as two is what rattler
does, so no credential crosses. An IPv4 address loses its trailing dot (``127.0.0.1.`` is ``127.0.0.1``: the
standard's IPv4 parser drops an empty last part), as rattler's does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import ada_url

# The schemes whose URLs have an origin the toolkit compares, and their default ports.
DEFAULT_PORTS = {"http": 80, "https": 443}
# The WHATWG standard's special schemes, whose hosts it canonicalises (others keep an opaque host).
_SPECIAL = frozenset({"http", "https", "ws", "wss", "ftp", "file"})
_FIX = "check the URL: its host must be a name, an IPv4 address or an [IPv6] address, and its port digits"
_TWO_READINGS_FIX = (
    "write the host right after the scheme's two slashes, with no backslash before the path, and a backslash "
    "or slash in a user name or password as %5C or %2F"
)


class UrlRefused(ValueError):
    """A URL that cannot be read one way only: why, as a phrase whose subject, the URL as the caller shows it
    (:func:`._urls.shown_url`: nothing after its scheme), goes before it, and a fix."""

    def __init__(self, message: str, *, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, kw_only=True)
class Url:
    """A URL as the WHATWG standard reads it: :attr:`href`, its canonical text, and its parts, each as that
    text holds it (the user name, password, path and query percent-encoded)."""

    href: str
    scheme: str  # lower case, without its ':'
    username: str
    password: str
    host: str  # "" for none; an IPv6 address in brackets, as rattler's authentication lookup spells it
    port: int | None  # None: the scheme's default, or none written
    path: str
    query: str  # without its '?'; "" for none

    def replaced(self, **parts: str) -> Url:
        """This URL with some of its parts replaced (ada's setters: ``username``, ``password``, ``pathname``,
        ``search``, ``hash``; ``""`` removes one), read again."""
        try:
            return parse_url(ada_url.replace_url(self.href, **parts))
        except ValueError:
            raise UrlRefused(f"cannot take the parts {', '.join(sorted(parts))} given", fix=_FIX) from None

    @property
    def effective_port(self) -> int | None:
        """The port a connection goes to: the written one, else the scheme's default (None for a scheme with
        none the toolkit knows)."""
        return self.port if self.port is not None else DEFAULT_PORTS.get(self.scheme)


def parse_url(text: str) -> Url:
    """``text`` read as a WHATWG URL (module docstring); what cannot be read one way only is refused
    (:class:`UrlRefused`)."""
    url = whatwg_reading(text)
    if url is None:
        raise UrlRefused(
            "cannot be read as a URL (the WHATWG URL standard, which rattler follows, refuses it: a malformed "
            "host or port)",
            fix=_FIX,
        )
    _check_punycode(url)
    if url.scheme != "file" and not _python_agrees(text, url):
        raise UrlRefused(
            "names one server to Python's URL parser and another to rattler's (WHATWG): they read its host or "
            "port differently",
            fix=_TWO_READINGS_FIX,
        )
    return url


def whatwg_reading(text: str) -> Url | None:
    """``text`` as ada reads it, unchecked (None where it cannot): for finding the secrets of a URL that
    :func:`parse_url` refuses, which must be masked all the same."""
    try:
        read = ada_url.URL(text)
    except ValueError:
        return None
    return Url(
        href=read.href,
        scheme=read.protocol.removesuffix(":"),
        username=read.username,
        password=read.password,
        host=read.hostname,
        port=int(read.port) if read.port else None,
        path=read.pathname,
        query=read.search.removeprefix("?"),
    )


def python_reading(text: str) -> SplitResult | None:
    """``text`` as Python's ``urlsplit`` reads it, or None where it cannot (a malformed IPv6 host)."""
    try:
        return urlsplit(text)
    except ValueError:
        return None


def _check_punycode(url: Url) -> None:
    """Refuse a host with a ``xn--`` label that is not the punycode of a valid label: ada keeps it as written,
    rattler's IDNA check refuses it."""
    for label in url.host.split("."):
        if not label.startswith("xn--"):
            continue
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
            again = ada_url.idna_to_ascii(decoded).decode("ascii")
        except (UnicodeError, ValueError):
            again = ""
        if decoded.isascii() or again != label:
            raise UrlRefused(
                f"has the label {label} in its host, which is not the punycode of a valid international name "
                "(rattler refuses it)",
                fix="write the host as its owner spells it, or in its unicode form",
            )


def _python_agrees(text: str, url: Url) -> bool:
    """Whether Python's ``urlsplit`` reads the host and port of ``text`` as ``url`` holds them, once its host is
    canonicalised the WHATWG way (``127.0.0.%31`` and ``127.0.0.1`` agree; ``a.test`` and ``b.test`` do not)."""
    parts = python_reading(text)
    try:
        port = None if parts is None else parts.port
    except ValueError:  # not digits, or out of range
        return False
    if parts is None or (DEFAULT_PORTS.get(url.scheme) if port is None else port) != url.effective_port:
        return False
    return _same_host(parts.hostname, url)


def _same_host(host: str | None, url: Url) -> bool:
    """Whether ``host`` (Python's reading, lower case, without brackets) is ``url``'s host once canonicalised."""
    if host is None:
        return url.host == ""
    if url.scheme not in _SPECIAL:  # an opaque host: compared as written (Python lowers it)
        return host == url.host.lower()
    alone = None
    with contextlib.suppress(ValueError):
        alone = ada_url.URL(f"{url.scheme}://{f'[{host}]' if ':' in host else host}/")
    # The whole of Python's host must be the host: nothing of it read as a path, a port or a user.
    return (
        alone is not None
        and alone.hostname == url.host
        and (alone.pathname, alone.port, alone.username, alone.search, alone.hash) == ("/", "", "", "", "")
    )
