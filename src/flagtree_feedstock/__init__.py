"""flagtree-feedstock: build, check and diagnose the flagtree-cpu conda packages.

Importing the package imports nothing else (the console script's interrupt guard starts after it loads);
``FeedstockError`` is loaded on first use.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy reads the name the same
if TYPE_CHECKING:
    from .errors import FeedstockError

__version__ = "0.1.0"
__all__ = ["FeedstockError", "__version__"]


def __getattr__(name: str) -> object:
    if name == "FeedstockError":
        from .errors import FeedstockError  # noqa: PLC0415

        return FeedstockError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
