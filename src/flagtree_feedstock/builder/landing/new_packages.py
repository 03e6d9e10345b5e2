"""The landing's entry: every package a build wrote into the staging folder landed, the folder indexed again.

Whichever engine (rattler-build, conda-build, boa) and whichever format (``.conda``, ``.tar.bz2``) wrote it, each
new package goes through one streaming pass (:func:`.one_pass.land_package`): the build machine's folders out of
its records (:mod:`.local_paths`), its SBOM in (:mod:`.sbom`), written from the engine's record of the build,
the recipe's patch files and the variant files the render read, and the engine's clock and build folders out
(:mod:`.epoch_rewrite`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from flagtree_feedstock._archive import DamagedPackage
from flagtree_feedstock.channel.folder import package_files
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.errors import BuildFailedError

from .local_paths import local_folders
from .one_pass import Progress, land_package
from .sbom import facts_from_package, sbom_json

LOGGER = logging.getLogger(__name__)


def land_new_packages(
    staging: Path,
    seeded: Collection[str],
    *,
    channel_dir: Path,
    channels: Sequence[str],
    recipe_dir: Path,
    variant_files: Sequence[Path],
    progress: Callable[[Path], Progress | None] | None = None,
) -> None:
    """Every package the build put into ``staging`` (not those in ``seeded``) made ready to publish: no
    build-machine paths in its records (the staging folder, the channel folder, every ``file://`` channel),
    its SBOM in and the engine's clock and folders out; ``staging`` indexed again (its index listed the
    engine's files). ``progress(package)`` gives the landing of ``package`` its display."""

    def write(index: dict[str, Any], rendered: dict[str, Any], epoch: int) -> str:
        return sbom_json(facts_from_package(index, rendered, recipe_dir, variant_files, epoch=epoch))

    folders = local_folders([staging, channel_dir], channels)
    landed = False
    for package in package_files(staging):
        if package.name not in seeded:
            shown = progress(package) if progress is not None else None
            start, size = time.monotonic(), package.stat().st_size
            try:
                land_package(package, folders=folders, write_sbom=write, build_root=staging, progress=shown)
            except DamagedPackage as exc:  # UnsafePackage too: what the engine wrote is read as any package
                raise BuildFailedError(
                    f"{package.name}, just built, cannot be landed: {exc}",
                    fix="build again; if it happens again, report it with the package (--keep-build keeps it)",
                ) from None
            LOGGER.info(
                "landed %s in %.1f s (%s MB from the engine, %s MB landed)",
                package.name,
                time.monotonic() - start,
                f"{size / 1e6:,.1f}",
                f"{package.stat().st_size / 1e6:,.1f}",
            )
            landed = True
    if landed:
        index_channel(staging, check=False)
