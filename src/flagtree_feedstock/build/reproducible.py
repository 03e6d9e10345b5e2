"""Every package a build step finished gets :func:`.package_finish.finish_package`: its SBOM, written from the
engine's record of the build, the recipe's patch files and the variant files the render read."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from flagtree_feedstock.channel.folder import package_files

from .package_finish import finish_package
from .sbom import facts_from_package, sbom_json


def finish_new_packages(
    staging: Path, seeded: Collection[str], recipe_dir: Path, variant_files: Sequence[Path]
) -> bool:
    """Finish every ``.conda`` the build put into ``staging`` (not those in ``seeded``); whether any changed."""

    def write(index: dict[str, Any], rendered: dict[str, Any], epoch: int) -> str:
        return sbom_json(facts_from_package(index, rendered, recipe_dir, variant_files, epoch=epoch))

    changed = False
    for package in package_files(staging):
        if package.name not in seeded and package.name.endswith(".conda"):
            changed |= finish_package(package, write, build_root=staging)
    return changed
