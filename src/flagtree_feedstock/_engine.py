"""Import the optional build engines (py-rattler-build, py-rattler) with one actionable error."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import ToolMissingError

_INSTALL_HINT = "pip install 'flagtree-feedstock[build]'"


def require(module: str, distribution: str) -> ModuleType:
    """Import ``module`` or raise :class:`ToolMissingError` naming the PyPI distribution to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ToolMissingError(f"{distribution} is not installed", fix=_INSTALL_HINT) from None
