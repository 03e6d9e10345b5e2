"""The doctor's version: the flagtree-doctor conda package's, read from one place, the recipe.

The recipe's outputs share one version (``flagtree_version`` of recipe/conda_build_config.yaml). When a recipe
builds this distribution, setup.py takes it from the engine (``PKG_VERSION``: rattler-build and conda-build set
it for the output they build), so the installed distribution's version is the package's; in a checkout of the
feedstock (``pip install -e .`` of the repository, which installs no flagtree-doctor distribution) it is read
from the recipe's pins beside it.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

DISTRIBUTION = "flagtree-doctor"
RECIPE_PINS = Path("recipe") / "conda_build_config.yaml"
# `flagtree_version:` then its one entry, `  - "0.6.0"` (the pins' values are quoted).
_PIN = re.compile(r"""^flagtree_version:[ \t]*\n[ \t]*-[ \t]*["']?([^"'\s#]+)""", re.MULTILINE)


def recipe_version(pins: Path) -> str:
    """``flagtree_version`` of the recipe's pins file ``pins``."""
    match = _PIN.search(pins.read_text(encoding="utf-8"))
    if match is None:
        message = f"{pins} has no flagtree_version entry"
        raise ValueError(message)
    return match[1]


def version() -> str:
    """This package's version: that of the installed distribution these modules belong to, else (a checkout)
    the recipe's, else ``unknown``."""
    here = Path(__file__).resolve().parent
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None and Path(str(dist.locate_file(here.name))).resolve() == here:
        return dist.version
    pins = here.parents[2] / RECIPE_PINS
    return recipe_version(pins) if pins.is_file() else "unknown"
