"""``flagtree-feedstock build``, its steps top to bottom in :func:`build`, in the order docs/architecture.md
gives them: the options checked, the variants read and rendered (with ``--llvm-archive``, the archive checked
before and after the render), the packages selected and planned, each built by the engine and landed in the
output folder, which is indexed after each.

The command's options and what it prints are :mod:`flagtree_feedstock.commands.build`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from flagtree_feedstock import __version__, llvm_archive
from flagtree_feedstock._interrupts import PROG
from flagtree_feedstock._progress import EngineEvents, landing_bars, new_progress
from flagtree_feedstock.channel.folder import check_channels
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.platforms import PlatformName, check_can_build, host_platform
from flagtree_feedstock.recipe.package_scripts import allowed_by_recipe
from flagtree_feedstock.recipe.render import RenderedOutput
from flagtree_feedstock.recipe.variants import variant_files

from .options import BuildOptions
from .output_dir import check_output_dir
from .plan import BuildStep, plan_builds, select_outputs, with_pinned

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Rendered:
    """What the render gave: the outputs the options selected, out of how many, and the variant files."""

    selected: list[RenderedOutput]
    count: int  # the outputs the whole matrix rendered, before --python/--output selected
    archive: llvm_archive.LlvmArchive | None  # --llvm-archive, checked
    files: tuple[Path, ...]  # the variant files, in the order they are read


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What :func:`build` did: the render, and the packages it landed (``None``: ``--render-only``)."""

    rendered: Rendered
    published: list[Path] | None


def build(options: BuildOptions, env: Mapping[str, str], err: Console, *, render_only: bool) -> Outcome:
    """Check, render, select and (unless ``render_only``) build and land the packages ``options`` name.

    ``err`` shows the effective options and the build's progress; everything else is returned.
    """
    from flagtree_feedstock.recipe.engine_inputs import check_engine_inputs  # noqa: PLC0415 - as render
    from flagtree_feedstock.recipe.render import render  # noqa: PLC0415 - keep py-rattler-build off the import path of `channel`

    # Every option, and the --python/--output choices against the rendered matrix, is checked before the
    # host: a user on any machine learns that `--python 3.9` is wrong without adding --build-platform.
    check_inputs(options)
    err.print(f"{PROG} {__version__}, effective options (* = not the default):\n{options.summary()}")
    # --llvm-archive: checked before anything renders; its keys in a variant file read after the others.
    archive = llvm_archive.from_options(
        options.llvm_archive,
        options.llvm_archive_sha256,
        env=env,
        fetch=not render_only,
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
    rendered = Rendered(selected=selected, count=len(outputs), archive=archive, files=files)
    if render_only:
        return Outcome(rendered=rendered, published=None)
    build_platform = check_can_build(options.target_platform, options.build_platform, host_platform())
    if options.tool == "rattler-build":
        cross = build_platform != options.target_platform
        published = _build_rattler(
            options,
            selected,
            with_pinned(selected, outputs),
            err,
            build_platform=build_platform,
            emulated=cross and bool(env.get("CROSSCOMPILING_EMULATOR")),
            files=files,
        )
    else:
        from .conda_build import CondaBuildRequest  # noqa: PLC0415 - --tool conda-build/boa only
        from .conda_build import build as conda_build  # noqa: PLC0415 - as above

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
    return Outcome(rendered=rendered, published=published)


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


def _build_rattler(
    options: BuildOptions,
    chosen: list[RenderedOutput],
    outputs: list[RenderedOutput],
    err: Console,
    *,
    build_platform: PlatformName,
    emulated: bool = False,
    files: tuple[Path, ...],
) -> list[Path]:
    from .run import BuildSettings, ForeignTarget, RecipeSource, run_plan  # noqa: PLC0415 - --render-only loads no build machinery

    # ``outputs``: the ``chosen`` ones and those they pin, whose packages their solve before the build needs.
    plan = plan_builds(outputs, chosen={o.key for o in chosen})
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
        # The user's names and those the recipe's folder lists with their reasons (the compilers' activation).
        link_scripts=LinkScriptPolicy.allowing(
            (*options.allow_link_scripts, *allowed_by_recipe(options.recipe_dir))
        ),
        # As build() rendered the plan, so the engine's worker renders the same packages.
        source=RecipeSource(
            recipe=recipe,
            variant_files=files,
            target_platform=options.target_platform,
            build_platform=options.build_platform,
        ),
        foreign=foreign,
        channel_timeout=options.channel_timeout,
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
