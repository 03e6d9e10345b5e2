"""flagtree-feedstock: build, check and diagnose the flagtree-cpu conda packages."""

from __future__ import annotations

from .errors import FeedstockError

__version__ = "0.1.0"
__all__ = ["FeedstockError", "__version__"]
