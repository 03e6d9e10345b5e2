"""rfc3987-syntax, which jsonschema's ``iri`` and ``iri-reference`` format checks use, loaded when one first runs.

jsonschema imports ``rfc3987_syntax`` as it loads its format checks, and that module builds its Earley grammar
(lark) as it is imported: about 3.3 s, in every command that checks an SBOM against CycloneDX's schema
(:func:`flagtree_feedstock.builder.landing.sbom.schema_problem`), though a package's document often holds no IRI at all.
:func:`defer`, called before jsonschema is imported, puts a stand-in in its place whose ``is_valid_syntax``
imports the real module at its first call and hands every call to it: the same checks, paid for when used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

_NAME = "rfc3987_syntax"


def defer() -> None:
    """Defer the import of rfc3987-syntax to the first IRI check (nothing to do if it, or jsonschema's format
    checks, are loaded already, or it is not installed: jsonschema then checks no IRI syntax itself)."""
    if _NAME in sys.modules or "jsonschema._format" in sys.modules or importlib.util.find_spec(_NAME) is None:
        return
    stand_in = types.ModuleType(_NAME, "rfc3987_syntax, imported at the first call of is_valid_syntax")
    real: list[types.ModuleType] = []

    def is_valid_syntax(term: str, value: str) -> bool:
        if not real:
            if sys.modules.get(_NAME) is stand_in:
                del sys.modules[_NAME]
            real.append(importlib.import_module(_NAME))
        return bool(real[0].is_valid_syntax(term, value))

    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[_NAME] = stand_in
