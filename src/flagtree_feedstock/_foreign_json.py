"""JSON the toolkit did not write (a server's answer, a package's ``info/index.json``, a ``repodata.json``),
parsed within a size and a nesting depth.

Python's parser recurses once per level of nesting, so ``[[[[…]]]]`` a hundred thousand levels deep ends in a
``RecursionError`` instead of an error saying what is wrong; and a document larger than any a channel or a
server sends is refused before it is parsed. Real documents stay far inside both: a ``repodata.json`` nests
four levels deep, an ``index.json`` three, the upload servers' answers three or four.
"""

from __future__ import annotations

import json

# The deepest nesting accepted: ten times what any document here holds, far below Python's recursion limit.
MAX_DEPTH = 64
# The largest document accepted: a channel's repodata.json for one subdir is far smaller.
MAX_BYTES = 256 << 20


class ForeignJsonError(ValueError):
    """A document that is not JSON, or is larger or nested deeper than allowed; the message says which."""


def parse_json(data: bytes | str, *, limit: int = MAX_BYTES) -> object:
    """``data`` parsed, if it is JSON of at most ``limit`` bytes nested at most :data:`MAX_DEPTH` levels deep."""
    size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    if size > limit:
        raise ForeignJsonError(f"it is larger than {limit} bytes ({size})")
    try:
        document = json.loads(data)
    except RecursionError:  # nested deeper than the parser can go: far beyond MAX_DEPTH
        raise ForeignJsonError(f"it nests more than the {MAX_DEPTH} levels allowed") from None
    except ValueError as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ForeignJsonError(f"it is not JSON: {reason}") from None
    if nesting(document) > MAX_DEPTH:
        raise ForeignJsonError(f"it nests more than the {MAX_DEPTH} levels allowed")
    return document


def nesting(document: object) -> int:
    """How deep the arrays and objects of a parsed ``document`` nest (walked without recursion)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:  # deeper is refused anyway: no need to walk on
            stack.extend((child, depth + 1) for child in children)
    return deepest
