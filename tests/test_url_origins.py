"""One reading of a URL (_url_parsing.py): for generated spellings of a host, the toolkit's origins agree with
ada's and with rattler's own reading, and its canonical URL reads back as itself.

The spellings are the ones a WHATWG parser canonicalises and Python's ``urlsplit`` does not: IPv4 addresses in
decimal, octal and hex parts, shortened (``127.1``) or as one number (``2130706433``), percent-encoded
(``127.0.0.%31``), with a trailing dot; names in upper and lower case, percent-encoded, their international
labels in unicode or punycode, with a trailing dot or not (another origin: the module docstring says why);
IPv6 addresses compressed or not, with leading zeros, in upper case, their last 32 bits as a dotted IPv4;
default ports written or not. Rattler's reading is py-rattler's ``Channel(url).base_url`` (the ``url`` crate),
in process; which Authorization header rattler sends for each spelling is watched on loopback servers in
``test_channel_credentials.py``. The examples are derandomised, so a run in CI is the same run every time.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import quote, urlsplit

import ada_url
import pytest
import rattler
import rattler.exceptions
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from flagtree_feedstock._http import HttpError, Origin
from flagtree_feedstock._url_parsing import UrlRefused, parse_url

PROPERTY = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,  # a loaded machine
    suppress_health_check=[HealthCheck.too_slow],
)
ASCII_LABEL = st.from_regex(r"[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?", fullmatch=True)
# Letters of several scripts, lower case (upper case unicode is a mapping of its own: left to ada, not drawn).
UNICODE_LABEL = st.text(alphabet="äöüßéñçøåœαβγδжклмн中文字日本語한국", min_size=1, max_size=5)


@st.composite
def ipv4_spelling(draw: st.DrawFn, number: int) -> tuple[str, str]:
    """IPv4 address ``number`` written in one of the forms the WHATWG IPv4 parser takes, and its dotted form."""
    count = draw(st.integers(1, 4))
    octets = number.to_bytes(4, "big")
    parts = [*octets[: count - 1], int.from_bytes(octets[count - 1 :], "big")]
    written = [draw(_number_spelling(part)) for part in parts]
    dot = draw(st.sampled_from(["", "."]))  # dropped: the IPv4 parser ignores an empty last part
    text = ".".join(written) + dot
    return draw(_percent_encoded(text)), str(ipaddress.IPv4Address(number))


@st.composite
def _number_spelling(draw: st.DrawFn, value: int) -> str:
    radix = draw(st.sampled_from(["decimal", "hex", "octal"]))
    if radix == "hex":
        digits = f"{value:x}".zfill(draw(st.integers(1, 4)))
        return draw(st.sampled_from(["0x", "0X"])) + draw(_mixed_case(digits))
    if radix == "octal":
        return "0" + f"{value:o}".zfill(draw(st.integers(1, 3)))
    return str(value)


@st.composite
def name_spelling(draw: st.DrawFn, labels: list[str]) -> tuple[str, str]:
    """The domain name of ``labels``, its international labels in unicode or punycode, in mixed case,
    percent-encoded, with a trailing dot or not (kept: another origin); and the host ada makes of it."""
    punycode = [
        label if label.isascii() else ada_url.idna_to_ascii(label).decode("ascii") for label in labels
    ]
    written = [
        draw(_mixed_case(ascii_form)) if label.isascii() or draw(st.booleans()) else label
        for label, ascii_form in zip(labels, punycode, strict=True)
    ]
    dot = draw(st.sampled_from(["", "."]))
    return draw(_percent_encoded(".".join(written) + dot)), ".".join(punycode) + dot


@st.composite
def ipv6_spelling(draw: st.DrawFn, address: ipaddress.IPv6Address) -> tuple[str, str]:
    """``address`` compressed or not, with leading zeros, in mixed case, its last 32 bits as a dotted IPv4 or
    not; and its canonical form, bracketed."""
    groups = address.exploded.split(":")
    if draw(st.booleans()):
        groups = [group.lstrip("0") or "0" for group in groups]
    if draw(st.booleans()):
        groups = [*groups[:6], str(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))]
    text = str(address) if draw(st.booleans()) else ":".join(groups)  # str(): the shortest form Python writes
    return f"[{draw(_mixed_case(text))}]", f"[{address.compressed}]"


IPV4 = st.one_of(st.integers(0, 2**32 - 1), st.integers(0x7F000000, 0x7FFFFFFF))
NAMES = st.builds(
    lambda labels, last: [*labels, last],
    st.lists(st.one_of(ASCII_LABEL, UNICODE_LABEL), min_size=1, max_size=3),
    st.from_regex(r"[a-z]{2,6}", fullmatch=True),  # a word last: no IPv4 parse
)
IPV6 = st.one_of(st.just(1), st.integers(0, 2**16), st.integers(0, 2**128 - 1)).map(ipaddress.IPv6Address)
HOSTS = st.one_of(IPV4.flatmap(ipv4_spelling), NAMES.flatmap(name_spelling), IPV6.flatmap(ipv6_spelling))
# One host spelled twice, each spelling drawn on its own.
ONE_HOST_TWICE = st.one_of(
    IPV4.flatmap(lambda n: st.tuples(ipv4_spelling(n), ipv4_spelling(n))),
    NAMES.flatmap(lambda labels: st.tuples(name_spelling(labels), name_spelling(labels))),
    IPV6.flatmap(lambda a: st.tuples(ipv6_spelling(a), ipv6_spelling(a))),
)


@st.composite
def _mixed_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.upper() if flip else c for c, flip in zip(text, flips, strict=True))


@st.composite
def _percent_encoded(draw: st.DrawFn, text: str) -> str:
    """``text`` with some of its characters percent-encoded (UTF-8), as a host may be written."""
    chosen = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(quote(c, safe="") if pick else c for c, pick in zip(text, chosen, strict=True)).replace(
        "%2E", draw(st.sampled_from(["%2E", "%2e"]))
    )


@st.composite
def urls(draw: st.DrawFn, host: tuple[str, str] | None = None) -> tuple[str, str]:
    """A channel URL of a generated host (or ``host``), its scheme in any case and its port written or not (the
    default port too); and its origin as ada serialises it."""
    spelled, _ = draw(HOSTS) if host is None else host
    scheme = draw(st.sampled_from(["http", "https"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":08080"]))
    url = f"{draw(_mixed_case(scheme))}://{spelled}{port}/chan"
    return url, ada_url.URL(url).origin


@PROPERTY
@given(urls())
def test_a_spelling_s_origin_is_ada_s_and_rattler_s_and_its_canonical_url_a_fixed_point(
    case: tuple[str, str],
) -> None:
    url, ada_origin = case
    read = parse_url(url)
    origin = Origin.of(url)
    assert str(origin) == ada_origin
    assert parse_url(read.href).href == read.href  # the canonical text reads back as itself
    assert Origin.of(read.href) == origin
    # Rattler's own reading (the url crate) of what the user wrote, and of what the toolkit hands it.
    for given_url in (url, read.href):
        base = urlsplit(rattler.Channel(given_url).base_url)
        host = f"[{base.hostname}]" if ":" in str(base.hostname) else base.hostname
        assert (base.scheme, host, base.port or origin.port) == (origin.scheme, origin.host, origin.port)
    # What Python reads in the canonical text is that origin too: no other reader is left to disagree.
    python = urlsplit(read.href)
    assert (python.hostname, python.port or origin.port) == (origin.host.strip("[]"), origin.port)


@PROPERTY
@given(st.one_of(ONE_HOST_TWICE, st.tuples(HOSTS, HOSTS)), st.data())
def test_two_spellings_are_one_origin_exactly_when_ada_says_so(
    hosts: tuple[tuple[str, str], tuple[str, str]], data: st.DataObject
) -> None:
    (first, first_origin), (second, second_origin) = (data.draw(urls(host)) for host in hosts)
    event(f"one origin: {first_origin == second_origin}")
    assert (Origin.of(first) == Origin.of(second)) is (first_origin == second_origin)


@PROPERTY
@given(HOSTS)
def test_each_spelling_of_a_host_is_its_canonical_host(case: tuple[str, str]) -> None:
    spelled, canonical = case
    assert Origin.of(f"http://{spelled}/").host == canonical


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("http://127.0.0.1/", "http://2130706433/", True),
        ("http://127.0.0.1/", "http://0177.0.0.1/", True),
        ("http://127.0.0.1/", "http://0x7f.0.0.1/", True),
        ("http://127.0.0.1/", "http://127.1/", True),
        ("http://127.0.0.1/", "http://127.0.0.%31/", True),
        ("http://127.0.0.1/", "http://127.0.0.1./", True),
        ("http://bücher.example/", "http://XN--BCHER-KVA.example/", True),
        ("http://Pkgs.Example/", "http://pkgs.example/", True),
        ("http://pkgs.example/", "http://pkgs.example./", False),  # a trailing dot: another origin
        ("http://pkgs.example/", "http://pkgs.example:80/", True),
        ("https://pkgs.example/", "https://pkgs.example:443/", True),
        ("https://pkgs.example/", "http://pkgs.example:443/", False),
        ("http://[::1]/", "http://[0:0::1]/", True),
        ("http://[::1]/", "http://[0000:0000:0000:0000:0000:0000:0000:0001]/", True),
        ("http://[::1]/", "http://127.0.0.1/", False),
        ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", True),
    ],
)
def test_the_spellings_issue_41_names(first: str, second: str, same: bool) -> None:
    assert (Origin.of(first) == Origin.of(second)) is same
    assert (ada_url.URL(first).origin == ada_url.URL(second).origin) is same


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://user:PW@a.test\\@b.test/chan", "names one server to Python's URL parser and another"),
        ("http:///b.test/chan", "names one server to Python's URL parser and another"),
        ("http://a.test\\x/chan", "names one server to Python's URL parser and another"),  # Python: a.test\x
        ("http://a.test:8\\@a.test:9/chan", "names one server to Python's URL parser and another"),  # 8 or 9
        ("http://a.test:99999/", "cannot be read as a URL"),
        ("http://a b/", "cannot be read as a URL"),
        ("http://xn--/chan", "has the label xn-- in its host"),
        ("http://xn--abc.example/chan", "has the label xn--abc in its host"),
    ],
)
def test_a_url_read_two_ways_or_none_is_refused(url: str, why: str) -> None:
    with pytest.raises(UrlRefused, match=why) as refused:
        parse_url(url)
    assert "PW" not in str(refused.value)  # the message has no part of the URL but its scheme
    with pytest.raises(HttpError):
        Origin.of(url)


def test_rattler_refuses_the_punycode_ada_takes() -> None:
    """Why a bad ``xn--`` label is refused: ada keeps it, rattler (the url crate's IDNA check) refuses it."""
    assert ada_url.URL("http://xn--abc.example/chan").hostname == "xn--abc.example"
    with pytest.raises(rattler.exceptions.InvalidChannelError):
        rattler.Channel("http://xn--abc.example/chan")


def test_a_file_url_is_read_without_a_host_to_compare() -> None:
    """``file://localhost/x`` is ``file:///x`` to the standard; Python keeps localhost: no origin, no refusal."""
    assert parse_url("file://localhost/srv/chan").href == "file:///srv/chan"
