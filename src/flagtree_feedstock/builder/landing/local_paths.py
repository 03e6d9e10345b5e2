"""Take the build machine's folders out of a built package: the local channels the engine records in it.

py-rattler-build 0.73 writes the build's channels and folders into the package's metadata (seen by building a
toy package with a ``file://`` channel: tests/test_local_paths.py):

- ``info/about.json``: ``channels``, every channel of the build as a URL, so the toolkit's staging folder
  (``file:///.../.channel-staging-XXXX/``) and every ``-c file://...`` channel;
- ``info/recipe/rendered_recipe.yaml``: the same ``channels``; each resolved dependency's ``url`` and
  ``channel`` (``file://...`` for what came from a local channel, as flagtree-cpu's flagtree-llvm does); and
  ``build_configuration.directories`` (``host_prefix``, ``build_prefix``, ``work_dir``, ``build_dir``), all
  under the staging folder.

:func:`scrub_record` rewrites those two records (``info/about.json``, ``info/recipe/*``: :func:`recorded`)
so that each of those folders, as a ``file://`` URL or as a plain path, reads ``local`` (conda's name for a
channel of one's own builds), as the landing (:mod:`.epoch_rewrite`) passes them. Nothing else is scrubbed:
the package's files, ``info/paths.json`` (whose prefix placeholder the installer relocates by, so it must stay
as built), ``info/index.json`` and the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlparse

LOCAL = "local"


def local_folders(folders: Iterable[Path], channels: Iterable[str]) -> list[Path]:
    """``folders`` and the folder of every ``file://`` channel, each as given and resolved."""
    found = [*folders, *(Path(unquote(urlparse(c).path)) for c in channels if c.startswith("file://"))]
    return list(dict.fromkeys(p for folder in found for p in (folder.absolute(), folder.resolve())))


def scrub_text(text: str, folders: Iterable[Path]) -> str:
    """``text`` with each folder, as a ``file://`` URL (percent-encoded or not) or a plain path, replaced by
    ``local``; only whole folders (``/a/b`` is not a part of ``/a/bc``), the longest first."""
    for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
        path = str(folder).rstrip("/")
        spellings = sorted({folder.as_uri().rstrip("/"), f"file://{path}", path}, key=len, reverse=True)
        pattern = "|".join(re.escape(s) for s in spellings)
        text = re.sub(f"(?:{pattern})(?![^/\\s\"',\\]}}])", LOCAL, text)
    return text


def recorded(name: str) -> bool:
    """The members that record the build's channels and folders: ``info/about.json``, ``info/recipe/*``."""
    return name == "info/about.json" or name.startswith("info/recipe/")


def scrub_record(data: bytes, folders: Iterable[Path]) -> bytes:
    """A record's bytes with ``folders`` scrubbed (:func:`scrub_text`); a record that is not UTF-8 text as it
    is (a folder's name cannot be in it as written)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    scrubbed = scrub_text(text, folders).encode("utf-8")
    return data if scrubbed == data else scrubbed
