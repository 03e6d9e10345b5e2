"""One module per ``flagtree-feedstock`` command, each read top to bottom: its options, then what it runs.

Every module has ``add_parser(subparsers)``, which adds the command and its options to the root parser, and
``run(args, env, out, err) -> int``, which runs it with the parsed arguments, the environment, and the
consoles of standard output and standard error; it returns the exit status and raises a ``FeedstockError``
for everything else. ``cli.py`` holds the root parser and the one table from name to module (its
``COMMANDS``), and is the one place that prints an error.

- :mod:`.build`: ``build``, the main job (its steps are :func:`flagtree_feedstock.builder.command.build`);
- :mod:`.channel`: ``channel index`` and ``channel install``;
- :mod:`.upload`: ``upload``;
- :mod:`.staged_recipes`: ``staged-recipes``;
- :mod:`.sbom`: ``sbom``;
- :mod:`.bump`: ``bump``, its options and its report (tables, Markdown, JSON);
- :mod:`._arguments`: what more than one command's parser shares.

Layer: above every other subpackage: it may import the top-level helpers (``flagtree_feedstock``'s docstring
lists them), the archive layer (:mod:`flagtree_feedstock._archive`), :mod:`flagtree_feedstock.recipe`,
:mod:`flagtree_feedstock.channel`, :mod:`flagtree_feedstock.builder`, :mod:`flagtree_feedstock.bump` and
:mod:`flagtree_feedstock.llvm_archive`; never the CLI (``cli``, ``_entry``, ``__main__``), which imports it
(``tests/test_layers.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Protocol

from rich.console import Console

from ._arguments import Subparsers

__all__ = ["Command", "Subparsers"]


class Command(Protocol):
    """What ``cli.py``'s dispatch table holds: a module of this package."""

    def add_parser(self, sub: Subparsers) -> None:
        """Add the command and its options to the root parser's ``sub``."""

    def run(self, args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
        """Run the command with the parsed ``args``; return its exit status."""
