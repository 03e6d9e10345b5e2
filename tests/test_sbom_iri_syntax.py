"""The SBOM's schema check loads rfc3987-syntax (3.3 s of Earley grammar at import) only when a document holds
an IRI to check (flagtree_feedstock/builder/landing/_iri_syntax.py), and checks IRIs exactly as before.

Each case runs in a fresh interpreter: whether a module was imported is a fact of one process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip(
    "rfc3987_syntax", reason="jsonschema checks IRIs with rfc3987-syntax only where installed"
)

CHECK = """
import json, sys
from flagtree_feedstock.builder.landing.sbom import schema_problem
for document in json.loads(sys.argv[1]):
    print(json.dumps([schema_problem(json.dumps(document)), "rfc3987_syntax.syntax_helpers" in sys.modules]))
"""
BARE = {"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1}


def _with_url(url: str) -> dict[str, object]:
    reference = {"type": "vcs", "url": url}
    return {**BARE, "components": [{"type": "library", "name": "x", "externalReferences": [reference]}]}


def _checked(*documents: dict[str, object]) -> list[tuple[str | None, bool]]:
    """Each document's problem (None: valid), and whether rfc3987-syntax was loaded by then."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(documents)], capture_output=True, text=True, check=True
    )
    return [tuple(json.loads(line)) for line in done.stdout.splitlines()]  # type: ignore[misc]


def test_a_document_without_an_iri_is_checked_without_loading_the_iri_grammar() -> None:
    assert _checked(BARE, BARE) == [(None, False), (None, False)]


def test_an_iri_is_checked_as_before_once_one_is_there() -> None:
    (good, good_loaded), (bad, _) = _checked(
        _with_url("https://github.com/flagos-ai/flagtree"), _with_url("https://a b/<>")
    )
    assert (good, good_loaded) == (None, True)
    assert bad is not None and "'https://a b/<>' is not valid" in bad
    assert "iri-reference" in bad
