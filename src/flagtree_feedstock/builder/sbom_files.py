"""The SBOM outside a build: ``build --render-only --sbom DIR`` writes the documents, ``sbom PACKAGE`` reads one.

- :func:`write_rendered` writes, offline, the document of each selected package from the render alone
  (:func:`.landing.sbom.facts_from_render`): the same sources, patches, pins and package as the built one; the build
  and host environments are the recipe's requirements there, where a built package names what the engine
  resolved. One file per package file name, ``<name>-<version>-<build>.cdx.json``.
- :func:`check_package` reads a built package's (``.conda`` or ``.tar.bz2``) document and checks it against
  the package: it validates against CycloneDX 1.6; it describes this package (name, version, build, subdir); ``info/paths.json`` lists
  it with its sha256; it names every source and patch the engine's record lists and every pin of the record's
  variant with the same value. The package is read as every package is, by the one bounded reader, and
  checked whole first (:func:`~flagtree_feedstock.channel.package_reader.read_package`): a bomb, an unsafe or
  damaged package, a field missing from its ``info/index.json`` is one line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flagtree_feedstock.channel.package_check import INDEX, PACKAGE_SUFFIXES
from flagtree_feedstock.channel.package_reader import PATHS, DamagedPackage, load_json, read_package
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe.pins import write_atomically

from .landing.engine_record import (
    CONDA_BUILD_RECIPE,
    CONDA_BUILD_TEMPLATE,
    CONDA_BUILD_VARIANT,
    RATTLER_RECORD,
    engine_record,
)
from .landing.epoch_rewrite import source_date_epoch
from .landing.sbom import PROPERTY, facts_from_render, sbom_json, sbom_path, schema_problem


def write_rendered(
    outputs: Sequence[Any], recipe_dir: Path, variant_files: Sequence[Path], *, subdir: str, folder: Path
) -> list[Path]:
    """Write the document of each of ``outputs`` (RenderedOutput) into ``folder``, all or none
    (:func:`~flagtree_feedstock.recipe.pins.write_atomically`); the files written."""
    documents: dict[Path, str] = {}
    folder.mkdir(parents=True, exist_ok=True)
    for output in outputs:
        target = folder / f"{output.name}-{output.version}-{output.build_string}.cdx.json"
        if target in documents:  # a noarch output renders once per python variant: one package, one document
            continue
        recipe = output.engine_variant.recipe.to_dict()
        epoch = source_date_epoch({"recipe": recipe})
        if epoch is None:
            raise ConfigurationError(
                f"the recipe of {output.name} declares no context.source_date_epoch: the SBOM has no date",
                fix="add source_date_epoch: <the committer date of flagtree_commit> to recipe.yaml's context",
            )
        documents[target] = sbom_json(
            facts_from_render(output, recipe_dir, variant_files, subdir=subdir, epoch=epoch)
        )
    write_atomically(documents)
    return list(documents)


@dataclass(frozen=True, kw_only=True)
class SbomSummary:
    """What a package's document holds, in short."""

    package: str
    path: str
    sources: tuple[str, ...]
    patches: int
    environment: int
    pins: tuple[tuple[str, str], ...]

    def lines(self) -> Iterator[str]:
        yield f"{self.package}: {self.path} (CycloneDX 1.6, valid)"
        yield f"  sources: {', '.join(self.sources) or 'none'}"
        yield f"  patches: {self.patches}, build and host packages: {self.environment}"
        for key, value in self.pins:
            yield f"  pin {key} = {value}"


def _bad(package: Path, what: str) -> ConfigurationError:
    return ConfigurationError(
        f"{package}: {what}",
        fix="rebuild the package with flagtree-feedstock build (it writes and checks the SBOM)",
    )


def _read(package: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """The package's ``info/index.json`` (its name, version and build text) and the members the check reads
    (its ``info/paths.json``, the engine's record of the build and its SBOM), through the one package reader:
    bounded, the whole file checked (:func:`~flagtree_feedstock.channel.package_reader.read_package`)."""
    if not package.name.endswith(PACKAGE_SUFFIXES):
        raise ConfigurationError(
            f"{package} is not a conda package (.conda or .tar.bz2)",
            fix="pass a package file the build wrote into its --output-dir",
        )
    try:
        found = read_package(
            package, (INDEX,), whole=False
        )  # the info tar only: the name, for the SBOM's path
        index = load_json(INDEX, found[INDEX]) if INDEX in found else None
        fields = {
            key: index.get(key) if isinstance(index, dict) else None for key in ("name", "version", "build")
        }
        if not all(isinstance(value, str) and value for value in fields.values()):
            missing = ", ".join(
                key for key, value in fields.items() if not isinstance(value, str) or not value
            )
            raise _bad(package, f"its {INDEX} gives no {missing}: not a conda package")
        record = {key: str(value) for key, value in fields.items()}
        subdir = index.get("subdir") if isinstance(index, dict) else None
        record["subdir"] = str(subdir) if isinstance(subdir, str) else ""
        records = (RATTLER_RECORD, CONDA_BUILD_RECIPE, CONDA_BUILD_TEMPLATE, CONDA_BUILD_VARIANT)
        return record, read_package(package, (PATHS, *records, sbom_path(record["name"])))
    except DamagedPackage as exc:  # UnsafePackage too
        raise _bad(package, f"not a whole conda package ({exc})") from None


def _mapping(value: object) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one: a field of the wrong type is a field not given."""
    return value if isinstance(value, dict) else {}


def check_package(package: Path) -> SbomSummary:
    """Check ``package``'s document against the package (see the module); its summary."""
    index, members = _read(package)
    path = sbom_path(index["name"])
    document = members.get(path)
    if document is None:
        raise _bad(package, f"holds no SBOM at {path}")
    try:
        text = document.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(package, f"its SBOM at {path} is not UTF-8") from None
    problem = schema_problem(text)
    if problem:
        raise _bad(package, f"its SBOM does not validate against CycloneDX 1.6: {problem}")
    bom = json.loads(text)
    paths = _mapping(load_json(PATHS, members[PATHS]) if PATHS in members else {}).get("paths")
    listed = {e.get("_path"): e for e in paths if isinstance(e, dict)} if isinstance(paths, list) else {}
    if listed.get(path, {}).get("sha256") != hashlib.sha256(document).hexdigest():
        raise _bad(package, f"info/paths.json does not list {path} with its sha256")
    purl = str(bom.get("metadata", {}).get("component", {}).get("purl", ""))
    expected = f"pkg:conda/{index['name']}@{index['version']}?build={index['build']}&subdir={index['subdir']}"
    if purl != expected:
        raise _bad(package, f"its SBOM describes {purl or 'no package'}, not {expected}")
    try:  # rattler-build's record, or conda-build's read into its shape
        rendered = _mapping(engine_record(members))
    except (yaml.YAMLError, ValueError, AttributeError) as exc:
        raise _bad(
            package, f"its record of the build is not readable: {' '.join(str(exc).split())[:200]}"
        ) from None
    components = bom.get("components", [])
    names = {c["name"] for c in components}
    sources = [_mapping(s) for s in _mapping(rendered.get("recipe")).get("source") or ()]
    patch_count = 0
    for source in sources:
        for patch in source.get("patches") or ():
            patch_count += 1
            if Path(str(patch)).name not in names:
                raise _bad(package, f"its SBOM does not name the patch {patch}")
    properties = {p["name"]: p["value"] for p in bom.get("metadata", {}).get("properties", [])}
    pins = tuple(
        (name.removeprefix(f"{PROPERTY}:pin:"), value)
        for name, value in properties.items()
        if name.startswith(f"{PROPERTY}:pin:")
    )
    variant = _mapping(_mapping(rendered.get("build_configuration")).get("variant"))
    for key, value in pins:
        if key in variant and str(variant[key]) != value:
            raise _bad(package, f"its SBOM gives {key} = {value}, the build used {variant[key]}")
    source_names = tuple(c["name"] for c in components if str(c.get("bom-ref", "")).startswith("source:"))
    if len(source_names) != len(sources):
        raise _bad(package, f"its SBOM names {len(source_names)} sources, the build had {len(sources)}")
    return SbomSummary(
        package=package.name,
        path=path,
        sources=source_names,
        patches=patch_count,
        environment=sum(
            1 for c in components if str(c.get("bom-ref", "")).split(":")[0] in ("build", "host")
        ),
        pins=pins,
    )
