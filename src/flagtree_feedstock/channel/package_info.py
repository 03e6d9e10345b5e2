"""A package file's ``info/index.json`` and ``info/about.json``, which anaconda.org's upload API is given.

They are read as rattler's upload, and anaconda-client before it, read them: from ``info/`` of a ``.tar.bz2``,
or of a ``.conda`` file's ``info-<name>.tar.zst``, through the channel folder's one package reader
(:func:`.package_check.read_info`), which refuses a damaged or unsafe one, its JSON bounded in size and depth; it stops once it has them, since the upload has
checked every package whole before (a package of LLVM is read once, not twice).
"""

from __future__ import annotations

from pathlib import Path

from flagtree_feedstock.errors import ChannelError

from .package_check import INDEX, read_info
from .package_reader import DamagedPackage, load_json

ABOUT = "info/about.json"


def package_info(package: Path) -> tuple[dict[str, object], dict[str, object]]:
    """``package``'s index.json and about.json (``{}`` where it has none); a damaged one is one error."""
    try:
        # upload checked every package whole before the first request (upload.find_packages)
        found = read_info(package, (INDEX, ABOUT), whole=False)
        if INDEX not in found:
            raise DamagedPackage(f"it holds no {INDEX}")
        index, about = (_document(name, found[name]) if name in found else {} for name in (INDEX, ABOUT))
    except DamagedPackage as exc:
        raise ChannelError(
            f"{package} cannot be read for the upload ({exc}): it is not a whole conda package",
            fix="rebuild it (flagtree-feedstock build --output-dir DIR), or leave it out of the folder",
        ) from None
    return index, about


def _document(name: str, content: bytes) -> dict[str, object]:
    document = load_json(name, content)  # bounded in size and depth
    if not isinstance(document, dict):
        raise DamagedPackage(f"its {name} is not a JSON object")
    return document
