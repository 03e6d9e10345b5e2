"""The rehearsal tier's build driver: the real recipe, the real engine, the stand-in sources and stub channel.

Builds go through the toolkit's own ``run_plan`` with a ``ForeignTarget`` whose build platform is
linux-aarch64: the engine then solves and installs every environment for linux-aarch64 from the stub
channel and runs the build scripts here, "as on a native Arm runner"; the test strategy ``native`` runs the
package tests whose interpreter can run here (see tests/README.md for which cannot). The cross rehearsal
(test_rehearsal_cross.py) passes build platform linux-64: conda-forge's path, with the build environment solved
for this machine.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from _rehearsal_channel import PY, TARGET
from _rehearsal_sources import ROOT, Sources
from flagtree_feedstock.builder.options import PackageFormat
from flagtree_feedstock.builder.plan import plan_builds
from flagtree_feedstock.builder.run import BuildSettings, ForeignTarget, run_plan
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.recipe.package_scripts import allowed_by_recipe
from flagtree_feedstock.recipe.render import render

# What a copy of the recipe needs around recipe/: the patches, the variant files, and flagtree-doctor's source
# (`path: ..`: its flagtree-doctor/ distribution and the licence).
COPIED = ("recipe", "patches", "conda_build_config.yaml", "flagtree-doctor", "LICENSE", "README.md")


def copy_recipe(destination: Path) -> Path:
    """A copy of the repository's recipe and what it refers to; returns the copy's root."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        elif source.exists():
            shutil.copy2(source, destination / name)
    return destination


def _one_python(variants: dict[str, Any]) -> None:
    """Keep the python variant of this interpreter (and its zip partners), and python_min = it."""
    values = [str(v) for v in variants["python"]]
    index = next(i for i, v in enumerate(values) if v.startswith(f"{PY}."))
    zipped = next((group for group in variants.get("zip_keys", []) if "python" in group), ["python"])
    for key in zipped:
        variants[key] = [variants[key][index]]
    # The noarch output's host and test python: the only python the stub channel has.
    variants["python_min"] = [PY]


def write_variants(root: Path, sources: Sources, destination: Path) -> Path:
    """One variant file: the repository's (both files merged, the recipe's last) and the rehearsal's keys."""
    merged: dict[str, Any] = {}
    for path in (root / "conda_build_config.yaml", root / "recipe" / "conda_build_config.yaml"):
        if path.is_file():
            merged.update(yaml.safe_load(path.read_text()) or {})
    _one_python(merged)
    merged.update({key: [value] for key, value in sources.variants.items()})
    destination.write_text(yaml.safe_dump(merged, sort_keys=False))
    return destination


def requirement_names(root: Path, variant_file: Path) -> set[str]:
    """Every package name the rendered recipe's build, host, run and test environments ask for by name."""
    names: set[str] = set()
    outputs = render(root / "recipe" / "recipe.yaml", (variant_file,), target=TARGET, build=TARGET)
    for output in outputs:
        recipe = output.engine_variant.recipe.to_dict()
        requirements = recipe.get("requirements", {})
        sections = [requirements.get(kind, []) for kind in ("build", "host", "run")]
        sections += [test.get("requirements", {}).get("run", []) for test in recipe.get("tests", [])]
        for section in sections:
            names |= (
                {spec.split()[0] for spec in section if isinstance(spec, str)}
                if isinstance(section, list)
                else set()
            )
    return {name for name in names if not name.startswith("__")} - {output.name for output in outputs}


def build_requirement_names(root: Path, variant_file: Path, build_platform: str) -> set[str]:
    """Every package name the build environments of the recipe rendered for ``build_platform`` ask for."""
    names: set[str] = set()
    for output in render(
        root / "recipe" / "recipe.yaml", (variant_file,), target=TARGET, build=build_platform
    ):
        section = output.engine_variant.recipe.to_dict().get("requirements", {}).get("build", [])
        names |= {spec.split()[0] for spec in section if isinstance(spec, str)}
    return names


def build(
    root: Path,
    variant_file: Path,
    channel_dir: Path,
    stub_channel: Path,
    *,
    names: Sequence[str],
    test: bool,
    keep_build: bool = False,
    build_platform: str = TARGET,
    extra_channels: Sequence[Path] = (),
    package_format: PackageFormat = "conda",
) -> list[Path]:
    """Build the outputs ``names`` of ``root``'s recipe into ``channel_dir`` (which may hold earlier ones).

    ``build_platform`` linux-64 is a cross build; ``extra_channels`` come before the stub channel (the cross
    rehearsal's linux-64 stubs). The packages allowed to run their scripts are those the recipe's folder lists,
    as for ``flagtree-feedstock build`` with no ``--allow-link-scripts``: the stand-in compilers carry
    activation scripts, as conda-forge's do.
    """
    recipe = root / "recipe" / "recipe.yaml"
    outputs = render(recipe, (variant_file,), target=TARGET, build=build_platform)
    settings = BuildSettings(
        channel_dir=channel_dir,
        channels=(*(c.as_uri() for c in extra_channels), stub_channel.as_uri()),
        test=test,
        keep_build=keep_build,
        package_format=package_format,
        link_scripts=LinkScriptPolicy.allowing(tuple(allowed_by_recipe(recipe.parent))),
        foreign=ForeignTarget(
            recipe=recipe,
            variant_files=(variant_file,),
            target_platform=TARGET,
            build_platform=build_platform,
        ),
    )
    return run_plan(plan_builds(outputs, names=names), settings)
