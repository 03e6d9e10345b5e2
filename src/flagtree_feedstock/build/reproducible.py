"""The one landing step of every package a build wrote, whichever engine (rattler-build, conda-build, boa) and
whichever format (``.conda``, ``.tar.bz2``): the build machine's folders out of its records
(:mod:`.local_paths`), then :func:`.package_finish.finish_package`: its SBOM, written from the engine's record of
the build, the recipe's patch files and the variant files the render read, and the engine's clock and build
folders out."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from flagtree_feedstock.channel.folder import index_channel, package_files

from .local_paths import scrub_new_packages
from .package_finish import finish_package
from .sbom import facts_from_package, sbom_json


def finish_new_packages(
    staging: Path, seeded: Collection[str], recipe_dir: Path, variant_files: Sequence[Path]
) -> bool:
    """Finish every package the build put into ``staging`` (not those in ``seeded``); whether any changed."""

    def write(index: dict[str, Any], rendered: dict[str, Any], epoch: int) -> str:
        return sbom_json(facts_from_package(index, rendered, recipe_dir, variant_files, epoch=epoch))

    changed = False
    for package in package_files(staging):
        if package.name not in seeded:
            changed |= finish_package(package, write, build_root=staging)
    return changed


def land_new_packages(
    staging: Path,
    seeded: Collection[str],
    *,
    channel_dir: Path,
    channels: Sequence[str],
    recipe_dir: Path,
    variant_files: Sequence[Path],
) -> None:
    """Every package the build put into ``staging`` (not those in ``seeded``) made ready to publish: no
    build-machine paths in its records, then its SBOM in and the engine's clock and folders out; ``staging``
    indexed again when any changed (its index listed the engine's files)."""
    changed = scrub_new_packages(staging, seeded, channel_dir, channels)
    changed |= finish_new_packages(staging, seeded, recipe_dir, variant_files)
    if changed:
        index_channel(staging, check=False)
