"""What the engine recorded of a build inside its package, in rattler-build's shape, whichever engine wrote it.

rattler-build writes ``info/recipe/rendered_recipe.yaml``: ``recipe`` (the rendered recipe: its ``source``
entries, ``extra``, ``about``), ``build_configuration`` (``variant``, ``directories``) and
``finalized_dependencies`` (the build and host environments it resolved). conda-build writes
``info/recipe/meta.yaml``, its rendered recipe, whose build and host requirements are pinned exactly
(``name version build``), ``info/recipe/meta.yaml.template``, the recipe as written (where the recipe's
``{% set source_date_epoch = … %}`` is: the rendered one keeps no Jinja variable, so it becomes the record's
``context``, as rattler-build records it), and ``info/recipe/conda_build_config.yaml``, the variant it used; the host prefix it
built in is the prefix placeholder of ``info/paths.json``. :func:`engine_record` reads either into the first
shape, so the SBOM, the reproducible rewrite and ``flagtree-feedstock sbom`` read one record.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

import yaml

from flagtree_feedstock.recipe.pins import declared_epoch

RATTLER_RECORD = "info/recipe/rendered_recipe.yaml"
CONDA_BUILD_RECIPE = "info/recipe/meta.yaml"
CONDA_BUILD_VARIANT = "info/recipe/conda_build_config.yaml"
CONDA_BUILD_TEMPLATE = "info/recipe/meta.yaml.template"


def engine_record(info: Mapping[str, bytes]) -> dict[str, Any]:
    """The record of the build in ``info`` (each ``info/`` file by name); ``{}`` when it holds none."""
    if RATTLER_RECORD in info:
        return yaml.safe_load(info[RATTLER_RECORD] or b"") or {}
    if CONDA_BUILD_RECIPE not in info:
        return {}
    recipe = yaml.safe_load(info[CONDA_BUILD_RECIPE] or b"") or {}
    variant = yaml.safe_load(info.get(CONDA_BUILD_VARIANT) or b"") or {}
    sources = recipe.get("source") or []
    requirements = recipe.get("requirements") or {}
    epoch = declared_epoch((info.get(CONDA_BUILD_TEMPLATE) or b"").decode("utf-8", "replace"))
    return {
        "recipe": {
            **recipe,
            **({"context": {"source_date_epoch": epoch}} if epoch is not None else {}),
            "source": [_source(s) for s in (sources if isinstance(sources, list) else [sources])],
        },
        "build_configuration": {
            "variant": {k: v[0] if isinstance(v, list) and v else v for k, v in variant.items()},
            "directories": _directories(info),
        },
        "finalized_dependencies": {
            environment: {"resolved": [r for s in requirements.get(environment) or () if (r := _pinned(s))]}
            for environment in ("build", "host")
        },
    }


def _source(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A conda-build ``source`` entry with rattler-build's keys (``git``, ``rev``, ``target_directory``)."""
    found: dict[str, Any] = {k: v for k, v in entry.items() if k in ("url", "sha256", "path", "patches")}
    if "git_url" in entry:
        found["git"], found["rev"] = entry["git_url"], entry.get("git_rev")
    if entry.get("folder"):
        found["target_directory"] = entry["folder"]
    return found


def _pinned(spec: object) -> dict[str, str] | None:
    """``name version build``, as conda-build pins a finalised build or host requirement; else ``None``."""
    parts = str(spec).split()
    if len(parts) != 3 or parts[0].startswith("__"):
        return None
    return {"name": parts[0], "version": parts[1], "build": parts[2]}


def _directories(info: Mapping[str, bytes]) -> dict[str, str]:
    """The host prefix conda-build built in (the prefix placeholder its files are recorded with) and its
    build folder, the folder that holds it."""
    paths = json.loads(info.get("info/paths.json") or b"{}").get("paths") or []
    prefix = next((str(e["prefix_placeholder"]) for e in paths if e.get("prefix_placeholder")), None)
    if prefix is None:
        return {}
    return {"host_prefix": prefix, "build_dir": posixpath.dirname(prefix)}
