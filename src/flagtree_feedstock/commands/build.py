"""``flagtree-feedstock build``: its options, the checks of their combinations, and what it prints.

The build's steps themselves are :func:`flagtree_feedstock.builder.command.build`; this module hands it the
options and shows what it returns: the rendered packages (``--render-only``: a table, or JSON, a contract:
``RENDER_SCHEMA_VERSION``) or the packages built and the ``conda install`` line that uses them.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flagtree_doctor.terminal import print_json
from flagtree_feedstock import llvm_archive
from flagtree_feedstock.builder.command import Rendered, build
from flagtree_feedstock.builder.options import PACKAGE_FORMATS, TOOLS, BuildOptions, from_cli
from flagtree_feedstock.builder.plan import plan_builds
from flagtree_feedstock.channel.folder import package_files
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.platforms import DEFAULT_TARGET, PLATFORMS
from flagtree_feedstock.recipe.render import PIN_KEYS
from flagtree_feedstock.recipe.sources import output_sources, source_lines

from ._arguments import Subparsers, add_link_scripts_argument

INSTALL_TARGET = "flagtree-cpu"
# The `--render-only --json` contract: bumped whenever a key is renamed, removed or changes meaning (2: the
# top-level "version" became "schema_version", the name flagtree-doctor and flagtree-verify use).
RENDER_SCHEMA_VERSION = "2"


def add_parser(sub: Subparsers) -> None:
    """The options of `build`: what to build, from which variants, where, and with which engine."""
    build_parser = sub.add_parser(
        "build",
        help="render and build the recipe into a local channel (the main job)",
        epilog="Each value option may also come from FLAGTREE_FEEDSTOCK_<OPTION> (FLAGTREE_FEEDSTOCK_PYTHON, "
        "FLAGTREE_FEEDSTOCK_OUTPUT_DIR, ...; lists separated by spaces or commas, paths by ':'); the command "
        "line wins.",
    )
    build_parser.add_argument("--recipe-dir", help="folder with recipe.yaml and meta.yaml [recipe]")
    build_parser.add_argument(
        "-m",
        "--variant-config",
        dest="variant_configs",
        action="append",
        metavar="FILE",
        help="a variant file added over the root conda_build_config.yaml and the recipe folder's own, as "
        "conda-build's and rattler-build's -m add (repeatable; later files win, a file given twice counts at "
        'its last place): a file holding only python: ["3.12"] builds for 3.12 alone (read, unlike conda-build, '
        "as the matrix's 3.12 entry: the same package as --python 3.12), one holding only flagtree_commit moves "
        "that pin",
    )
    build_parser.add_argument(
        "-e",
        "--exclusive-config-file",
        dest="exclusive_config_files",
        action="append",
        metavar="FILE",
        help="the root variant file, read first, in place of ./conda_build_config.yaml (repeatable: read in the "
        "order given); the "
        "recipe folder's own and the --variant-config files are still read after them, as with conda-build's "
        "-e. Unlike conda-build, ~/conda_build_config.yaml is never read, and keys the recipes do not use are "
        "ignored with a note (an error with --strict)",
    )
    build_parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse variant keys the recipes do not use, and a C and a C++ compiler of different versions "
        "(both are notes without it)",
    )
    build_parser.add_argument(
        "--target-platform", help=f"one of {', '.join(sorted(PLATFORMS))} [{DEFAULT_TARGET}]"
    )
    build_parser.add_argument(
        "--build-platform", help="this host's platform, to cross-build for another target"
    )
    build_parser.add_argument("--output-dir", help="the local channel folder [build_artifacts]")
    build_parser.add_argument(
        "-c",
        "--channel",
        dest="channels",
        action="append",
        metavar="CHANNEL",
        help="channel for dependencies (repeatable) [conda-forge]",
    )
    build_parser.add_argument(
        "--python",
        dest="pythons",
        action="append",
        metavar="VERSION",
        help="build only this python variant, e.g. 3.12 (repeatable)",
    )
    build_parser.add_argument(
        "--output",
        dest="outputs",
        action="append",
        metavar="NAME",
        help="build only this output (repeatable); its pins must be in the channels",
    )
    build_parser.add_argument("--tool", help=f"one of {', '.join(sorted(TOOLS))} [rattler-build]")
    build_parser.add_argument(
        "--render-only",
        action="store_true",
        help="print the packages the other options select and their pins, build nothing (offline)",
    )
    build_parser.add_argument("--json", action="store_true", help="with --render-only: print JSON")
    build_parser.add_argument(
        "--sbom",
        type=Path,
        metavar="DIR",
        help="with --render-only: write the CycloneDX SBOM each selected package would carry into DIR",
    )
    build_parser.add_argument(
        "--llvm-archive",
        metavar="PATH|URL",
        help="install flagtree-llvm from Triton's prebuilt LLVM archive (a .tar.gz, the folder it unpacked "
        "to, or a URL) instead of building it",
    )
    build_parser.add_argument(
        "--llvm-archive-sha256",
        metavar="HEX",
        help="the archive's sha256: checked for a file, required for a URL",
    )
    build_parser.add_argument(
        "--llvm-archive-max-size",
        metavar="SIZE",
        help="the most a URL's download, or the archive file given, may take: bytes, or e.g. 4G, 1500M [4G]",
    )
    build_parser.add_argument(
        "--llvm-archive-timeout",
        metavar="SECONDS",
        help="the longest a URL's download may take, whole, however steadily the server sends [7200]",
    )
    build_parser.add_argument(
        "--channel-timeout",
        metavar="SECONDS",
        help="the longest one request to a --channel may take, whole: connecting (at most 30 s of it), each wait "
        "on the server (at most 60 s), its whole answer; channel install's own deadline is the same [600]",
    )
    build_parser.add_argument("--no-test", action="store_true", help="do not run the package tests")
    build_parser.add_argument("--keep-build", action="store_true", help="keep a failed build's work folder")
    build_parser.add_argument(
        "--package-format",
        choices=PACKAGE_FORMATS,
        help="the package format, with either --tool; both get the same SBOM and reproducible rewrite [conda]",
    )
    build_parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild the selected packages the output folder already holds (they are reused otherwise)",
    )
    add_link_scripts_argument(build_parser)


def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    """Build (or only render) the packages the options select; print them, and how to install them."""
    options = from_cli(vars(args), env)
    _check_build_flags(args, options)
    outcome = build(options, env, err, render_only=args.render_only)
    if outcome.published is None:  # --render-only
        _print_rendered(outcome.rendered, out, as_json=args.json)
        if args.sbom is not None:
            from flagtree_feedstock.builder.sbom_files import write_rendered  # noqa: PLC0415 - the SBOM library loads for --sbom only

            for path in write_rendered(
                outcome.rendered.selected,
                options.recipe_dir,
                outcome.rendered.files,
                subdir=options.target_platform,
                folder=args.sbom,
            ):
                err.print(f"wrote {path}", markup=False)
        return 0
    out.print(install_hint(options.output_dir, outcome.published))
    return 0


def _check_build_flags(args: argparse.Namespace, options: BuildOptions) -> None:
    """The combinations of ``build`` options that cannot work, each one line naming the option to drop."""
    if args.json and not args.render_only:
        raise ConfigurationError(
            "--json works only with --render-only", fix="add --render-only or drop --json"
        )
    if args.sbom is not None and not args.render_only:
        raise ConfigurationError(
            "--sbom works only with --render-only (a build puts the SBOM into each package)",
            fix="add --render-only or drop --sbom",
        )
    if options.force and args.render_only:
        raise ConfigurationError("--force does nothing with --render-only", fix="drop --force")
    if options.outputs and options.tool != "rattler-build":
        raise ConfigurationError(
            f"--output works only with --tool rattler-build, not {options.tool}", fix="drop --output"
        )


def install_hint(channel_dir: Path, published: Sequence[Path]) -> str:
    """What was built and the ``conda install`` line that uses the channel folder."""
    if published:
        lines = [f"built {len(published)} package(s) into {channel_dir}:", *(f"  {p}" for p in published)]
    else:
        lines = [f"nothing new: every planned package was already in {channel_dir}"]
    names = sorted({p.name.rsplit("-", 2)[0] for p in package_files(channel_dir)})
    wanted = [INSTALL_TARGET] if INSTALL_TARGET in names else names
    lines.append(
        f"install with:\n  conda install -c {channel_dir.resolve().as_uri()} -c conda-forge {' '.join(wanted)}"
    )
    return "\n".join(lines)


def _print_rendered(rendered: Rendered, out: Console, *, as_json: bool) -> None:
    """``--json``: every selected output (a contract, RENDER_SCHEMA_VERSION); else one row per package.

    ``rendered.count`` is how many outputs the whole matrix rendered, before --python/--output selected
    ``rendered.selected``.
    """
    outputs, archive = rendered.selected, rendered.archive
    if as_json:
        document = {
            "schema_version": RENDER_SCHEMA_VERSION,
            "outputs": [
                {
                    "name": o.name,
                    "version": o.version,
                    "build_string": o.build_string,
                    "python": o.python,
                    "pins": dict(o.pins),
                    "variant": dict(o.variant),
                    "sources": [s.as_json() for s in output_sources(o)],
                }
                for o in outputs
            ],
            # Where flagtree-llvm comes from (null: built from source), and the glibc the packages need.
            "llvm_archive": archive.as_json() if archive is not None else None,
            "glibc_floor": llvm_archive.glibc_floor(outputs),
        }
        print_json(out, document)
        return
    plan = plan_builds(outputs)
    # Off a terminal nothing wraps (flagtree_doctor.terminal); in a small terminal names never wrap or shorten,
    # the rest folds if it must.
    packages = Table(title="packages to build")
    packages.add_column("package", no_wrap=True, min_width=max(len(s.output.name) for s in plan))
    packages.add_column("version", overflow="fold")
    packages.add_column("build string", overflow="fold")
    packages.add_column("python", overflow="fold")
    packages.add_column("variants", justify="right")
    for step in plan:
        o = step.output
        packages.add_row(o.name, o.version, o.build_string, o.python or "-", str(step.variants))
    out.print(packages)
    pins = Table(title="source pins (12 characters; --json shows them whole)")
    pins.add_column("pin", no_wrap=True)
    pins.add_column("commit", no_wrap=True)
    pins.add_column("packages")
    for key in PIN_KEYS:
        users: dict[str, set[str]] = {}
        for step in plan:
            if key in step.output.pins:
                users.setdefault(step.output.pins[key], set()).add(step.output.name)
        for value, names in users.items():
            pins.add_row(key, value[:12], ", ".join(sorted(names)))
    if pins.row_count:
        out.print(pins)
    for line in [*source_lines(outputs), *llvm_archive.render_lines(outputs, archive)]:
        out.print(line, markup=False)
    counted = f"{len(outputs)} rendered outputs"
    if rendered.count != len(outputs):
        counted = f"{rendered.count} rendered outputs, {len(outputs)} selected by --python/--output"
    out.print(f"{counted} -> {len(plan)} packages to build")
