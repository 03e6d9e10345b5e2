"""``flagtree-feedstock upload``: every package of a channel folder to prefix.dev or anaconda.org."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from ._arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    """``upload DIR --to SERVER --channel NAME`` and how to reach the server."""
    upload = sub.add_parser(
        "upload", help="upload every package of a channel folder to prefix.dev or anaconda.org"
    )
    upload.add_argument(
        "channel_dir", type=Path, metavar="DIR", help="the channel folder whose packages to upload"
    )
    upload.add_argument(
        "--to",
        required=True,
        help="prefix (token: $PREFIX_API_KEY, or trusted publishing in a GitHub job) or anaconda "
        "($ANACONDA_API_KEY)",
    )
    upload.add_argument(
        "--channel", required=True, help="the prefix.dev channel, or the anaconda.org owner (user/org)"
    )
    upload.add_argument("--url", help="the server, for self-hosted instances [the public one]")
    upload.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the longest one request may take, whole: connecting (at most 30 s of it), sending, and the "
        "server's whole answer [300]",
    )
    upload.add_argument(
        "--attestations",
        type=Path,
        metavar="DIR",
        help="prefix.dev: send each package's CEP 27 attestation, DIR/<package file>.sigstore.json, with it",
    )
    upload.add_argument(
        "--label",
        dest="labels",
        action="append",
        metavar="LABEL",
        help="anaconda.org label (repeatable) [main]",
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Upload the folder's packages and print each one uploaded."""
    from flagtree_feedstock.channel.upload import UploadRequest, parse_server, upload_channel  # noqa: PLC0415 - loaded only when this command runs

    request = UploadRequest(
        channel_dir=args.channel_dir,
        server=parse_server(args.to),
        channel=args.channel,
        url=args.url,
        labels=tuple(args.labels or ("main",)),
        timeout=args.timeout,
        attestations=args.attestations,
    )
    uploaded = upload_channel(request, env)
    out.print(f"uploaded {len(uploaded)} package(s) to {request.server} channel {request.channel}:")
    for package in uploaded:
        out.print(f"  {package}")
    return 0
