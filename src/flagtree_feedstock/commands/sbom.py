"""``flagtree-feedstock sbom``: a built package's SBOM summarised and checked against the package."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from ._arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    """``sbom PACKAGE_FILE``."""
    sbom = sub.add_parser("sbom", help="summarise a built package's SBOM and check it against the package")
    sbom.add_argument("package", type=Path, metavar="PACKAGE_FILE", help="a .conda file the build wrote")


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Print the summary; a package that disagrees with its SBOM is an error."""
    from flagtree_feedstock.builder.sbom_files import check_package  # noqa: PLC0415 - loaded only when this command runs

    for line in check_package(args.package).lines():
        out.print(line, markup=False)
    return 0
