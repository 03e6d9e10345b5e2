"""flagtree-feedstock: build, check and diagnose the flagtree-cpu conda packages.

The package in layers, each importing only the layers below it (``tests/test_layers.py`` checks this):

1. the top-level helpers: ``errors`` (one root, an exit status per class), ``platforms``, ``_digest`` (a
   file's digest), ``_engine`` (the optional engines, and the wait for py-rattler's workers), ``_http`` (the one
   HTTP client), ``_interrupts``, ``_locks`` (a channel folder's lock), ``_own_files`` (the one reader of the
   repository's and the user's files), ``_paths``, ``_processes``, ``_progress``, ``_subprocess``;
   above them :mod:`._archive`, the archive layer (every zip, tar and compressed stream read or written);
2. :mod:`.recipe` (variants, render, sources, pins) and :mod:`.channel` (channel folders, upload);
3. :mod:`.bump` and :mod:`.llvm_archive` (both may use ``recipe``), then :mod:`.builder` (the main job; it
   may use ``recipe``, ``channel`` and ``llvm_archive``);
4. :mod:`.commands`: one module per command, its options and what it prints;
5. the CLI: ``cli`` (the root parser and the table of commands), ``_entry``, ``__main__``.

New code goes into the subpackage of its concern; a helper two subpackages need goes to the top level.

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
        from .errors import FeedstockError  # noqa: PLC0415 - importing the package imports nothing else (the docstring)

        return FeedstockError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
