"""``flagtree-feedstock channel``: ``index`` writes a channel folder's repodata, ``install`` smoke-installs."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.platforms import DEFAULT_TARGET, PLATFORMS, parse_platform

from ._arguments import Subparsers, add_link_scripts_argument


def add_parser(sub: Subparsers) -> None:
    """``channel index DIR`` and ``channel install DIR SPEC...``."""
    channel = sub.add_parser("channel", help="index a channel folder or smoke-install from it")
    channel_sub = channel.add_subparsers(dest="channel_command", required=True)
    index = channel_sub.add_parser("index", help="write repodata.json for every subdir")
    index.add_argument(
        "channel_dir", type=Path, metavar="DIR", help="the channel folder (a build's --output-dir)"
    )
    install = channel_sub.add_parser(
        "install", help="solve and install packages from the channel into a scratch prefix"
    )
    install.add_argument("channel_dir", type=Path, metavar="DIR", help="the indexed channel folder")
    install.add_argument("specs", nargs="+", metavar="SPEC", help="match specs, e.g. flagtree-cpu")
    install.add_argument(
        "--prefix", type=Path, help="install here and keep it (default: a temporary prefix, removed)"
    )
    install.add_argument(
        "--target-platform",
        default=DEFAULT_TARGET,
        help=f"the platform to solve for: one of {', '.join(sorted(PLATFORMS))} [{DEFAULT_TARGET}]",
    )
    install.add_argument(
        "-c",
        "--channel",
        dest="channels",
        action="append",
        default=[],
        metavar="CHANNEL",
        help="extra channel (repeatable)",
    )
    install.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the longest one request to a --channel may take, whole: connecting (at most 30 s of it), each "
        "wait on the server (at most 60 s), its whole answer [600]",
    )
    add_link_scripts_argument(install)


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Index the folder, or install the specs into a prefix and print what was installed."""
    from flagtree_feedstock._locks import folder_lock  # noqa: PLC0415 - loaded only when this command runs
    from flagtree_feedstock.channel.index import index_channel  # noqa: PLC0415 - loaded only when this command runs
    from flagtree_feedstock.channel.install import smoke_install  # noqa: PLC0415 - loaded only when this command runs

    if args.channel_command == "index":
        # A build may be writing into the folder: wait for it (a folder that is not there takes no lock file).
        with folder_lock(args.channel_dir) if args.channel_dir.is_dir() else nullcontext():
            for repodata in index_channel(args.channel_dir):
                out.print(f"indexed {repodata}")
        return 0
    platform = parse_platform(args.target_platform, option="--target-platform")
    allowed = LinkScriptPolicy.allowing(args.allow_link_scripts or ())
    with (
        nullcontext(None)
        if args.prefix is not None
        else tempfile.TemporaryDirectory(prefix="flagtree-smoke-")
    ) as scratch:
        installed = smoke_install(
            args.channel_dir,
            args.specs,
            prefix=args.prefix if scratch is None else Path(scratch) / "prefix",
            platform=platform,
            extra_channels=args.channels,
            link_scripts=allowed,
            timeout=args.timeout,
        )
    table = Table(title=f"installed from {args.channel_dir}")
    for column in ("name", "version", "build", "channel"):
        table.add_column(column)
    for pkg in installed:
        table.add_row(pkg.name, pkg.version, pkg.build, pkg.channel)
    out.print(table)
    return 0
