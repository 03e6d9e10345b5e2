"""Command line: ``flagtree-feedstock build`` (the main job) and ``flagtree-feedstock channel``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import IO, Any, TextIO, cast

from rich.console import Console
from rich.table import Table

from flagtree_doctor.terminal import new_console, print_json

from . import __version__, llvm_archive
from ._interrupts import report_interrupt
from ._paths import check_folder
from ._progress import ConsoleHandler, EngineEvents, landing_bars, new_progress
from ._urls import one_line
from .build.options import PACKAGE_FORMATS, TOOLS, BuildOptions, from_cli
from .build.output_dir import check_output_dir
from .build.plan import BuildStep, plan_builds, select_outputs
from .bump.cli import add_bump_parser, run_bump
from .channel.folder import check_channels, package_files
from .channel.link_scripts import OPTION as LINK_SCRIPTS_OPTION
from .channel.link_scripts import LinkScriptPolicy
from .errors import ConfigurationError, FeedstockError, file_access_error
from .platforms import DEFAULT_TARGET, PLATFORMS, PlatformName, check_can_build, host_platform, parse_platform
from .recipe import staged_recipes
from .recipe.render import PIN_KEYS, RenderedOutput
from .recipe.sources import output_sources, source_lines
from .recipe.variants import variant_files

PROG = "flagtree-feedstock"
INSTALL_TARGET = "flagtree-cpu"
# The `--render-only --json` contract: bumped whenever a key is renamed, removed or changes meaning (2: the
# top-level "version" became "schema_version", the name flagtree-doctor and flagtree-verify use).
RENDER_SCHEMA_VERSION = "2"
LOGGER = logging.getLogger("flagtree_feedstock")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Build and check the flagtree-cpu conda packages."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug-traceback", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True)

    build = sub.add_parser(
        "build",
        help="render and build the recipe into a local channel (the main job)",
        epilog="Each value option may also come from FLAGTREE_FEEDSTOCK_<OPTION> (FLAGTREE_FEEDSTOCK_PYTHON, "
        "FLAGTREE_FEEDSTOCK_OUTPUT_DIR, ...; lists separated by spaces or commas, paths by ':'); the command "
        "line wins.",
    )
    _add_build_arguments(build)

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
    _add_link_scripts_argument(install)

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
    _add_staged_recipes_parser(sub)
    sbom = sub.add_parser("sbom", help="summarise a built package's SBOM and check it against the package")
    sbom.add_argument("package", type=Path, metavar="PACKAGE_FILE", help="a .conda file the build wrote")
    add_bump_parser(sub)
    # Listed for --help only: main() hands their arguments to flagtree-doctor / flagtree-verify unparsed.
    sub.add_parser(
        "doctor", help="check this machine for flagtree-cpu (same as flagtree-doctor)", add_help=False
    )
    sub.add_parser(
        "verify", help="run the flagtree-cpu package test (same as flagtree-verify)", add_help=False
    )
    return parser


def _add_build_arguments(build: argparse.ArgumentParser) -> None:
    """The options of `build`: what to build, from which variants, where, and with which engine."""
    build.add_argument("--recipe-dir", help="folder with recipe.yaml and meta.yaml [recipe]")
    build.add_argument(
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
    build.add_argument(
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
    build.add_argument(
        "--strict",
        action="store_true",
        help="refuse variant keys the recipes do not use, and a C and a C++ compiler of different versions "
        "(both are notes without it)",
    )
    build.add_argument("--target-platform", help=f"one of {', '.join(sorted(PLATFORMS))} [{DEFAULT_TARGET}]")
    build.add_argument("--build-platform", help="this host's platform, to cross-build for another target")
    build.add_argument("--output-dir", help="the local channel folder [build_artifacts]")
    build.add_argument(
        "-c",
        "--channel",
        dest="channels",
        action="append",
        metavar="CHANNEL",
        help="channel for dependencies (repeatable) [conda-forge]",
    )
    build.add_argument(
        "--python",
        dest="pythons",
        action="append",
        metavar="VERSION",
        help="build only this python variant, e.g. 3.12 (repeatable)",
    )
    build.add_argument(
        "--output",
        dest="outputs",
        action="append",
        metavar="NAME",
        help="build only this output (repeatable); its pins must be in the channels",
    )
    build.add_argument("--tool", help=f"one of {', '.join(sorted(TOOLS))} [rattler-build]")
    build.add_argument(
        "--render-only",
        action="store_true",
        help="print the packages the other options select and their pins, build nothing (offline)",
    )
    build.add_argument("--json", action="store_true", help="with --render-only: print JSON")
    build.add_argument(
        "--sbom",
        type=Path,
        metavar="DIR",
        help="with --render-only: write the CycloneDX SBOM each selected package would carry into DIR",
    )
    build.add_argument(
        "--llvm-archive",
        metavar="PATH|URL",
        help="install flagtree-llvm from Triton's prebuilt LLVM archive (a .tar.gz, the folder it unpacked "
        "to, or a URL) instead of building it",
    )
    build.add_argument(
        "--llvm-archive-sha256",
        metavar="HEX",
        help="the archive's sha256: checked for a file, required for a URL",
    )
    build.add_argument(
        "--llvm-archive-max-size",
        metavar="SIZE",
        help="the most a URL's download, or the archive file given, may take: bytes, or e.g. 4G, 1500M [4G]",
    )
    build.add_argument(
        "--llvm-archive-timeout",
        metavar="SECONDS",
        help="the longest a URL's download may take, whole, however steadily the server sends [7200]",
    )
    build.add_argument("--no-test", action="store_true", help="do not run the package tests")
    build.add_argument("--keep-build", action="store_true", help="keep a failed build's work folder")
    build.add_argument(
        "--package-format",
        choices=PACKAGE_FORMATS,
        help="the package format, with either --tool; both get the same SBOM and reproducible rewrite [conda]",
    )
    build.add_argument(
        "--force",
        action="store_true",
        help="rebuild the selected packages the output folder already holds (they are reused otherwise)",
    )
    _add_link_scripts_argument(build)


def _add_link_scripts_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        LINK_SCRIPTS_OPTION,
        dest="allow_link_scripts",
        action="append",
        metavar="NAME",
        help="let the package NAME run its link scripts (pre-link, post-link, pre-unlink) as it is installed "
        "(repeatable); a package that carries any is refused otherwise",
    )


def _add_staged_recipes_parser(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers action has no public type
    """Add the ``staged-recipes`` subcommand to the CLI's subparsers."""
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


def main(  # noqa: PLR0911 - a return per command
    argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None, console: Console | None = None
) -> int:
    """Run the CLI and return its exit status; errors become one line on stderr."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["doctor"]:
        from flagtree_doctor.cli import main as doctor_main  # noqa: PLC0415

        return doctor_main(argv[1:], env=env, console=console, prog=f"{PROG} doctor")
    if argv[:1] == ["verify"]:
        from flagtree_doctor.verify.cli import main as verify_main  # noqa: PLC0415

        return verify_main(argv[1:], env=env, console=console, prog=f"{PROG} verify")
    args = _parser().parse_args(argv)
    env = os.environ if env is None else env
    out = console or _named_stdout(new_console())
    err = new_console(stderr=True)
    _configure_logging(err)
    try:
        if args.command == "build":
            return _build(args, env, out, err)
        if args.command == "bump":
            return run_bump(args, out)
        if args.command == "staged-recipes":
            return _staged_recipes(args, out)
        if args.command == "sbom":
            from .build.sbom_files import check_package  # noqa: PLC0415

            for line in check_package(args.package).lines():
                out.print(line, markup=False)
            return 0
        return _upload(args, env, out) if args.command == "upload" else _channel(args, out)
    except (FeedstockError, OSError) as exc:  # an OSError: a path no check foresaw, named in one line
        error = exc if isinstance(exc, FeedstockError) else file_access_error(exc)
        if args.debug_traceback or env.get("FLAGTREE_FEEDSTOCK_DEBUG"):
            traceback.print_exc()
        print(f"{PROG}: error: {one_line(str(error))}", file=sys.stderr)
        return error.return_code
    except KeyboardInterrupt as interrupt:  # SIGINT, SIGTERM or SIGHUP (_interrupts)
        return report_interrupt(interrupt)


class _NamedStream:
    """A stream whose write errors name it: a full disk or a closed pipe behind stdout is one line naming
    standard output (and the file it is), not an error without a path."""

    def __init__(self, stream: IO[str], name: str) -> None:
        self._stream = stream
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(self._stream, attribute)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._name) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._name) from None


def _named_stdout(console: Console) -> Console:
    try:
        where = str(Path("/proc/self/fd/1").readlink())
    except OSError:
        where = ""
    name = f"standard output ({where})" if where else "standard output"
    console.file = cast("TextIO", _NamedStream(console.file, name))  # it passes everything else through
    return console


def _configure_logging(err: Console) -> None:
    """Library code logs; the CLI prints those records on this call's stderr console."""
    LOGGER.handlers = [ConsoleHandler(err)]
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def _build(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
    from .recipe.engine_inputs import check_engine_inputs  # noqa: PLC0415 - as render
    from .recipe.render import render  # noqa: PLC0415 - keep py-rattler-build off the import path of `channel`

    # Every option, and the --python/--output choices against the rendered matrix, is checked before the
    # host: a user on any machine learns that `--python 3.9` is wrong without adding --build-platform.
    options = from_cli(vars(args), env)
    _check_build_flags(args, options)
    check_inputs(options)
    err.print(f"{PROG} {__version__}, effective options (* = not the default):\n{options.summary()}")
    # --llvm-archive: checked before anything renders; its keys in a variant file read after the others.
    archive = llvm_archive.from_options(
        options.llvm_archive,
        options.llvm_archive_sha256,
        env=env,
        fetch=not args.render_only,
        recipe_dir=options.recipe_dir,
        max_size=options.llvm_archive_max_size,
        timeout=options.llvm_archive_timeout,
    )
    archive_files = (llvm_archive.variant_file(archive, env),) if archive is not None else ()
    given = variant_files(options.recipe_dir, options.exclusive_config_files, options.variant_configs)
    files = (*given, *archive_files)
    outputs = render(
        options.recipe_dir / "recipe.yaml",
        files,
        target=options.target_platform,
        build=options.build_platform,
        strict=options.strict,
        note=LOGGER.warning,
        root_files=options.exclusive_config_files,
    )
    if archive is not None:
        # The fix names the file to raise c_stdlib_version in: the last one given, else the root one.
        raise_in = (
            options.variant_configs[-1] if options.variant_configs else options.exclusive_config_files[-1]
        )
        llvm_archive.check_rendered(archive, outputs, variant_file=raise_in)
    selected = select_outputs(outputs, pythons=options.pythons, names=options.outputs)
    # What the engine reads by name (scripts, patches, the recipe folder it copies), checked before it does.
    check_engine_inputs(options.recipe_dir, selected)
    if args.render_only:
        _print_rendered(selected, out, as_json=args.json, rendered=len(outputs), archive=archive)
        if args.sbom is not None:
            from .build.sbom_files import write_rendered  # noqa: PLC0415

            for path in write_rendered(
                selected, options.recipe_dir, files, subdir=options.target_platform, folder=args.sbom
            ):
                err.print(f"wrote {path}", markup=False)
        return 0
    build_platform = check_can_build(options.target_platform, options.build_platform, host_platform())
    if options.tool == "rattler-build":
        cross = build_platform != options.target_platform
        published = _build_rattler(
            options,
            selected,
            err,
            build_platform=build_platform,
            emulated=cross and bool(env.get("CROSSCOMPILING_EMULATOR")),
            files=files,
        )
    else:
        from .build.conda_build import CondaBuildRequest  # noqa: PLC0415
        from .build.conda_build import build as conda_build  # noqa: PLC0415

        published = conda_build(
            CondaBuildRequest(
                tool=options.tool,
                recipe_dir=options.recipe_dir,
                exclusive_config_files=options.exclusive_config_files,
                variant_files=(*options.variant_configs, *archive_files),
                channel_dir=options.output_dir,
                channels=options.channels,
                target=options.target_platform,
                pythons=options.pythons,
                test=options.test,
                package_format=options.package_format,
            )
        )
    out.print(install_hint(options.output_dir, published))
    return 0


def check_inputs(options: BuildOptions) -> None:
    """The recipe folder, the channels and the output folder, each checked before anything renders or builds.

    The variant files (a file, UTF-8, every key and value) are checked by
    :func:`.variants.check_variant_files` when they render, before the engine reads them.
    """
    if options.recipe_dir.exists() and not options.recipe_dir.is_dir():
        raise ConfigurationError(
            f"--recipe-dir {options.recipe_dir} is a file, not a folder",
            fix="pass --recipe-dir the folder that holds recipe.yaml",
        )
    check_channels(options.channels)
    check_output_dir(options.output_dir)  # with --render-only too: every input is checked, nothing made


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


def _build_rattler(
    options: BuildOptions,
    outputs: list[RenderedOutput],
    err: Console,
    *,
    build_platform: PlatformName,
    emulated: bool = False,
    files: tuple[Path, ...],
) -> list[Path]:
    from .build.run import BuildSettings, ForeignTarget, RecipeSource, run_plan  # noqa: PLC0415

    plan = plan_builds(outputs)
    recipe = options.recipe_dir / "recipe.yaml"
    foreign = None
    if options.target_platform != host_platform():
        foreign = ForeignTarget(
            recipe=recipe,
            variant_files=files,
            target_platform=options.target_platform,
            build_platform=build_platform,
        )
    settings = BuildSettings(
        channel_dir=options.output_dir,
        channels=options.channels,
        test=options.test,
        keep_build=options.keep_build,
        force=options.force,
        emulated=emulated,
        package_format=options.package_format,
        link_scripts=LinkScriptPolicy.allowing(options.allow_link_scripts),
        # As _build rendered the plan, so the engine's worker renders the same packages.
        source=RecipeSource(
            recipe=recipe,
            variant_files=files,
            target_platform=options.target_platform,
            build_platform=options.build_platform,
        ),
        foreign=foreign,
    )
    with new_progress(err) as progress:
        task = progress.add_task("building", total=len(plan))

        def on_step(index: int, total: int, step: BuildStep) -> None:
            progress.update(task, completed=index, total=total, description=f"building {step.describe()}")

        published = run_plan(
            plan,
            settings,
            on_step=on_step,
            engine_events=EngineEvents(progress, err),
            on_landing=landing_bars(progress),
        )
        progress.update(task, completed=len(plan), total=len(plan), description="built")
    return published


def _print_rendered(
    outputs: list[RenderedOutput],
    out: Console,
    *,
    as_json: bool,
    rendered: int,
    archive: llvm_archive.LlvmArchive | None = None,
) -> None:
    """``--json``: every selected output (a contract, RENDER_SCHEMA_VERSION); else one row per package.

    ``rendered`` is how many outputs the whole matrix rendered, before --python/--output selected ``outputs``.
    """
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
    if rendered != len(outputs):
        counted = f"{rendered} rendered outputs, {len(outputs)} selected by --python/--output"
    out.print(f"{counted} -> {len(plan)} packages to build")


def _channel(args: argparse.Namespace, out: Console) -> int:
    from ._locks import folder_lock  # noqa: PLC0415
    from .channel.folder import index_channel, smoke_install  # noqa: PLC0415

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


def _staged_recipes(args: argparse.Namespace, out: Console) -> int:
    staged = staged_recipes.plan(args.recipe_dir.resolve().parent, args.maintainers)
    check_folder(args.output, option="--output")
    target = staged_recipes.write(staged, args.output)
    out.print(f"wrote {target} ({len(staged.files) + 1} files); docs/conda-forge.md says what comes next")
    return 0


def _upload(args: argparse.Namespace, env: Mapping[str, str], out: Console) -> int:
    from .channel.upload import UploadRequest, parse_server, upload_channel  # noqa: PLC0415

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
