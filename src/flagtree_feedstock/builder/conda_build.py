"""``--tool conda-build`` / ``--tool boa``: build ``recipe/meta.yaml`` with conda-build or boa's mambabuild."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from flagtree_feedstock import _subprocess
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.platforms import PlatformName
from flagtree_feedstock.recipe.variants import variant_files

from .options import PackageFormat
from .output_dir import OutputFolder

CondaTool = Literal["conda-build", "boa"]

# The console script each tool installs; calling it directly needs no initialised `conda` shell.
_EXECUTABLES: dict[CondaTool, str] = {"conda-build": "conda-build", "boa": "conda-mambabuild"}
_INSTALL_HINTS: dict[CondaTool, str] = {
    "conda-build": "conda install -n base conda-build, or use the default --tool rattler-build",
    "boa": "conda install -n base boa, or use the default --tool rattler-build",
}


@dataclass(frozen=True, kw_only=True)
class CondaBuildRequest:
    """What to build with conda-build/boa."""

    tool: CondaTool
    recipe_dir: Path
    # conda-build's -e (each, in order): read first, in place of ~/ and the current folder's conda_build_config.yaml.
    exclusive_config_files: tuple[Path, ...]
    channel_dir: Path
    channels: tuple[str, ...]
    target: PlatformName
    pythons: tuple[str, ...] = ()
    test: bool = True
    # conda-build's -m: read after the recipe folder's own, in order (--variant-config, --llvm-archive's keys).
    variant_files: tuple[Path, ...] = ()
    package_format: PackageFormat = "conda"


def command(request: CondaBuildRequest, *, output_folder: Path) -> list[str]:
    """The ``conda-build``/``conda-mambabuild`` command line for ``request``."""
    if not (request.recipe_dir / "meta.yaml").is_file():
        raise ConfigurationError(
            f"{request.recipe_dir} has no meta.yaml", fix="pass --recipe-dir holding meta.yaml"
        )
    executable = _subprocess.which(_EXECUTABLES[request.tool], install_hint=_INSTALL_HINTS[request.tool])
    argv = [executable, str(request.recipe_dir)]
    for root in request.exclusive_config_files:
        argv += ["-e", str(root)]
    for added in request.variant_files:
        argv += ["-m", str(added)]
    # Its build folders under the staging folder, as the engine's (output_dir.staging_parent says why).
    argv += ["--output-folder", str(output_folder), "--croot", str(output_folder / "bld")]
    argv += ["--package-format", request.package_format, "-c", output_folder.as_uri()]
    if request.package_format == "conda":  # its fastest: the landing compresses once, at the final level
        argv += ["--zstd-compression-level", "1"]
    for channel in request.channels:
        argv += ["-c", channel]
    for python in request.pythons:  # conda-build's --python appends one variant value per use
        argv += ["--python", python]
    if not request.test:
        argv.append("--no-test")
    return argv


def environment(request: CondaBuildRequest, base: Mapping[str, str]) -> dict[str, str]:
    """conda-build takes the target subdir from ``CONDA_SUBDIR`` (and so does ``conda-build --check``)."""
    env = dict(base)
    env["CONDA_SUBDIR"] = request.target
    return env


def build(request: CondaBuildRequest, *, base_env: Mapping[str, str] | None = None) -> list[Path]:
    """Run conda-build/boa into a staging folder and publish + index the channel folder on success.

    conda-build builds every package in one process, so its packages land together, after it succeeded,
    through the landing step of the rattler-build route (:meth:`.output_dir.OutputFolder.land`, then
    :meth:`~.output_dir.OutputFolder.publish`): the same
    SBOM, the same reproducible rewrite, in either format.
    """
    folder = OutputFolder(request.channel_dir, (request.target, "noarch"))
    with folder.opened(), folder.staging() as staging:
        _subprocess.run(
            command(request, output_folder=staging), env=environment(request, base_env or os.environ)
        )
        folder.land(
            staging,
            channels=[staging.as_uri(), *request.channels],
            recipe_dir=request.recipe_dir,
            variant_files=variant_files(
                request.recipe_dir, request.exclusive_config_files, request.variant_files
            ),
        )
        return folder.publish(staging)
