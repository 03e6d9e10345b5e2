"""``flagtree-feedstock staged-recipes``: the recipe as a conda-forge staged-recipes pull request holds it."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from flagtree_feedstock._paths import check_folder
from flagtree_feedstock.recipe import staged_recipes

from ._arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    """``staged-recipes --maintainer HANDLE... --output DIR``."""
    staged = sub.add_parser(
        "staged-recipes",
        help="write recipes/flagtree-cpu/ as a conda-forge staged-recipes pull request holds it",
        description="Write DIR/recipes/flagtree-cpu/: recipe.yaml with the files it references and the pins "
        "conda-forge's global pinning does not supply (docs/conda-forge.md).",
    )
    staged.add_argument(
        "--maintainer",
        dest="maintainers",
        action="extend",
        nargs="+",
        required=True,
        metavar="HANDLE",
        help="GitHub user names (repeatable): conda-smithy takes users, not organisations or teams",
    )
    staged.add_argument(
        "--output", type=Path, required=True, metavar="DIR", help="a staged-recipes clone, or a new folder"
    )
    staged.add_argument("--recipe-dir", type=Path, default=Path("recipe"), help="the recipe folder [recipe]")


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Write DIR/recipes/flagtree-cpu/ and say where."""
    staged = staged_recipes.plan(args.recipe_dir.resolve().parent, args.maintainers)
    check_folder(args.output, option="--output")
    target = staged_recipes.write(staged, args.output)
    out.print(f"wrote {target} ({len(staged.files) + 1} files); docs/conda-forge.md says what comes next")
    return 0
