"""One archive layer: no module of the toolkit outside ``src/flagtree_feedstock/_archive/`` imports an archive or
compression library (``zipfile``, ``tarfile``, ``zstandard``, ``bz2``, ``gzip``, ``lzma``), so every zip, tar
and compressed stream is read and written one way (issue 42). Imports are read from the source, at any depth,
as ``tests/test_layers.py`` reads them; ``zlib`` (a CRC, a gzip member) stays the layer's too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "flagtree_feedstock"
LAYER = ROOT / "_archive"
ARCHIVE_LIBRARIES = frozenset({"zipfile", "tarfile", "zstandard", "bz2", "gzip", "lzma", "zlib"})


def archive_imports(root: Path = ROOT) -> list[str]:
    """Each import of an archive library outside the archive layer: ``path:line: module``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(root / LAYER.name):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("__import__", "require"):
                names = [
                    a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
            found += [
                f"{path.relative_to(root)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in ARCHIVE_LIBRARIES
            ]
    return found


def test_only_the_archive_layer_imports_an_archive_library() -> None:
    assert archive_imports() == []


def test_an_archive_import_elsewhere_is_found(tmp_path: Path) -> None:
    """The check itself: a module that opens a zip on its own (as five did before issue 42), at the top, in a
    function, or through the engine helper's ``require``, is reported by line."""
    copy = tmp_path / "flagtree_feedstock"
    (copy / "_archive").mkdir(parents=True)
    (copy / "_archive" / "zip_stream.py").write_text("import zipfile\n")  # the layer's own: allowed
    (copy / "builder" / "landing").mkdir(parents=True)
    (copy / "builder" / "landing" / "one_pass.py").write_text(
        "import json, tarfile\nfrom zipfile import ZipFile\n\n\ndef f():\n    import bz2\n    return require('zstandard', 'z')\n"
    )
    assert archive_imports(copy) == [
        "builder/landing/one_pass.py:1: tarfile",
        "builder/landing/one_pass.py:2: zipfile",
        "builder/landing/one_pass.py:6: bz2",
        "builder/landing/one_pass.py:7: zstandard",
    ]
