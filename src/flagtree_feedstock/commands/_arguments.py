"""What more than one command's parser shares: the subparsers' type and ``--allow-link-scripts``."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from flagtree_feedstock.channel.link_scripts import OPTION as LINK_SCRIPTS_OPTION

# What ``ArgumentParser.add_subparsers`` returns, each command's ``add_parser`` adds itself to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_link_scripts_argument(parser: argparse.ArgumentParser) -> None:
    """``--allow-link-scripts NAME``, of ``build`` and ``channel install``."""
    parser.add_argument(
        LINK_SCRIPTS_OPTION,
        dest="allow_link_scripts",
        action="append",
        metavar="NAME",
        help="let the package NAME run its link scripts (pre-link, post-link, pre-unlink) as it is installed, "
        "and, in a build, its activation scripts (etc/conda/activate.d/...) as the environment is activated "
        "(repeatable); a package that carries any is refused otherwise",
    )
