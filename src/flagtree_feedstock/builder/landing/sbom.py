"""The CycloneDX 1.6 bill of materials each package carries: what it is, and everything it was built from.

One document per package name, at :func:`sbom_path` inside the package (``share/flagtree-feedstock/sbom/
<name>.cdx.json``: a prefix path, so it is installed with the package, and one per name, so two packages never
write the same file into an environment). It holds:

- ``metadata.component``: the package (name, version, build, subdir as a ``pkg:conda`` purl; its licence);
  ``metadata.properties``: every pin of ``recipe/conda_build_config.yaml`` with the value the build used
  (``flagtree-feedstock:pin:<key>``); ``metadata.timestamp``: ``SOURCE_DATE_EPOCH``, not the clock.
- a component per source (LLVM, FlagTree, flagtree-cpu, sleef, this repository, Triton's LLVM archive), named
  for its repository, versioned by its commit, with the archive's sha256 where the recipe pins one and its
  licence as an SPDX expression;
- a component per patch file (type ``file``, its sha256), naming the source it applies to;
- a component per package of the build and host environments (``pkg:conda`` purl with the build string,
  scope ``excluded``: used to build, not shipped), resolved by the engine (``info/recipe/rendered_recipe.yaml``)
  in a built package; ``--render-only --sbom`` writes the same document from the render alone, where these
  are the recipe's requirements, unresolved (property ``flagtree-feedstock:requirement``).

The document is made by cyclonedx-python-lib and validated against its bundled 1.6 JSON schema before it is
used: :func:`sbom_json` never returns a document the schema rejects.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from flagtree_feedstock import __version__
from flagtree_feedstock._own_files import PATCH, read_own, repository_of
from flagtree_feedstock.errors import BuildFailedError, ToolMissingError
from flagtree_feedstock.recipe.variants import read_variant_file

from . import _iri_syntax

SBOM_DIR = "share/flagtree-feedstock/sbom"
PROPERTY = "flagtree-feedstock"
# The licence of each upstream project a recipe source names (its repository's name), as SPDX expressions.
LICENCES = {
    "llvm-project": "Apache-2.0 WITH LLVM-exception",
    "FlagTree": "MIT",
    "flagtree-cpu": "MIT",
    "sleef": "BSL-1.0",
    "flagtree-feedstock": "MIT",
}
Environment = Literal["build", "host"]


def sbom_path(name: str) -> str:
    """Where the package ``name`` carries its document, relative to the environment's prefix."""
    return f"{SBOM_DIR}/{name}.cdx.json"


@dataclass(frozen=True, kw_only=True)
class Patch:
    """A patch file of the recipe and its sha256."""

    path: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class SourceRecord:
    """One source of an output as the rendered recipe lists it."""

    kind: Literal["url", "git", "path"]
    location: str
    folder: str | None = None
    sha256: str | None = None
    rev: str | None = None
    patches: tuple[Patch, ...] = ()

    @property
    def project(self) -> str:
        """The upstream project: the repository's name in the URL, ``flagtree-feedstock`` for a path."""
        if self.kind == "path":
            return "flagtree-feedstock"
        if self.folder == "llvm-archive":
            return "llvm-project-prebuilt"
        match = re.search(r"/([^/]+?)(?:\.git)?(?:/archive/[^/]+)?/?$", self.location)
        return match.group(1) if match else self.location

    @property
    def commit(self) -> str | None:
        """The commit it is pinned at: the git rev, or the commit a GitHub archive URL names."""
        if self.rev:
            return self.rev
        match = re.search(r"/archive/([0-9a-f]{40})\.tar\.gz$", self.location)
        return match.group(1) if match else None


@dataclass(frozen=True, kw_only=True)
class EnvPackage:
    """A package of the build or host environment: resolved (version, build) or a requirement only."""

    environment: Environment
    name: str
    version: str | None = None
    build: str | None = None
    subdir: str | None = None
    sha256: str | None = None
    requirement: str | None = None


@dataclass(frozen=True, kw_only=True)
class SbomFacts:
    """Everything a document says, gathered from the render or from a built package."""

    name: str
    version: str
    build: str
    subdir: str
    license: str | None
    sources: tuple[SourceRecord, ...]
    environment: tuple[EnvPackage, ...]
    pins: tuple[tuple[str, str], ...]
    epoch: int


def patch_records(recipe_dir: Path, patches: Iterable[str]) -> tuple[Patch, ...]:
    """Each patch path (relative to the recipe folder, as the recipe writes it) with its file's sha256."""
    found = []
    repository = repository_of(recipe_dir)
    for relative in patches:
        data = read_own(recipe_dir / relative, PATCH, inside=repository).data
        found.append(Patch(path=relative, sha256=hashlib.sha256(data).hexdigest()))
    return tuple(found)


def source_records(entries: Sequence[Mapping[str, Any]], recipe_dir: Path) -> tuple[SourceRecord, ...]:
    """The rendered recipe's ``source`` entries (the render's or the engine's record) as records."""
    records = []
    for entry in entries:
        folder = entry.get("target_directory")
        patches = patch_records(recipe_dir, [str(p) for p in entry.get("patches") or ()])
        if "url" in entry:
            url = entry["url"]
            records.append(
                SourceRecord(
                    kind="url",
                    location=str(url[0] if isinstance(url, list) else url),
                    folder=folder,
                    sha256=str(entry["sha256"]) if entry.get("sha256") else None,
                    patches=patches,
                )
            )
        elif "git" in entry:
            records.append(
                SourceRecord(
                    kind="git",
                    location=str(entry["git"]),
                    folder=folder,
                    rev=str(entry.get("rev")),
                    patches=patches,
                )
            )
        else:
            records.append(
                SourceRecord(kind="path", location=str(entry.get("path")), folder=folder, patches=patches)
            )
    return tuple(records)


def requirement_packages(requirements: Mapping[str, Any]) -> tuple[EnvPackage, ...]:
    """The build and host requirements of a rendered recipe, unresolved (the render does not solve)."""
    found = []
    for environment in ("build", "host"):
        for spec in requirements.get(environment) or ():
            if isinstance(spec, str) and not spec.startswith("__"):
                found.append(EnvPackage(environment=environment, name=spec.split()[0], requirement=spec))
    return tuple(found)


def resolved_packages(finalized: Mapping[str, Any]) -> tuple[EnvPackage, ...]:
    """The build and host environments as the engine resolved them (``finalized_dependencies``)."""
    found = []
    for environment in ("build", "host"):
        for record in (finalized.get(environment) or {}).get("resolved") or ():
            found.append(
                EnvPackage(
                    environment=environment,
                    name=str(record["name"]),
                    version=str(record["version"]),
                    build=str(record["build"]),
                    subdir=str(record.get("subdir") or "") or None,
                    sha256=str(record["sha256"]) if record.get("sha256") else None,
                )
            )
    return tuple(found)


def feedstock_pins(recipe_dir: Path, variant_files: Sequence[Path]) -> tuple[tuple[str, str], ...]:
    """Every key of ``recipe_dir/conda_build_config.yaml`` with the value the build reads for it: the last of
    ``variant_files`` that sets it (the order the build reads them in), its first value."""
    keys = list(read_variant_file(recipe_dir / "conda_build_config.yaml", recipe_dir=recipe_dir))
    values: dict[str, str] = {}
    for path in variant_files:
        for key, entry in read_variant_file(path, recipe_dir=recipe_dir).items():
            if entry.values and entry.values[0]:
                values[key] = str(entry.values[0][0])
    return tuple((key, values[key]) for key in keys if key in values)


def _purl(name: str, version: str | None, build: str | None, subdir: str | None) -> Any:  # noqa: ANN401 - PackageURL
    from packageurl import PackageURL  # noqa: PLC0415 - cyclonedx's dependency, loaded with it

    qualifiers = {k: v for k, v in (("build", build), ("subdir", subdir)) if v}
    return PackageURL(type="conda", name=name, version=version, qualifiers=qualifiers)


def _bom(facts: SbomFacts) -> Any:  # noqa: ANN401 - a cyclonedx Bom
    try:
        from cyclonedx.model import HashAlgorithm, HashType, Property, XsUri  # noqa: PLC0415 - slow to load (jsonschema): SBOM work only
        from cyclonedx.model.bom import Bom, BomMetaData  # noqa: PLC0415 - as above
        from cyclonedx.model.component import Component, ComponentScope, ComponentType  # noqa: PLC0415 - as above
        from cyclonedx.model.license import LicenseExpression  # noqa: PLC0415 - as above
        from cyclonedx.model.tool import ToolRepository  # noqa: PLC0415 - as above
    except ImportError:
        raise ToolMissingError(
            "cyclonedx-python-lib is not installed: the SBOM cannot be written",
            fix='pip install -e ".[build]" (it brings cyclonedx-python-lib)',
        ) from None
    from cyclonedx.model import ExternalReference, ExternalReferenceType  # noqa: PLC0415 - slow to load (jsonschema): SBOM work only

    def sha256(value: str | None) -> list[Any]:
        return [HashType(alg=HashAlgorithm.SHA_256, content=value)] if value else []

    def prop(name: str, value: str) -> Any:  # noqa: ANN401 - a cyclonedx Property, imported in this function
        return Property(name=f"{PROPERTY}:{name}", value=value)

    components = []
    for source in facts.sources:
        project = source.project
        licence = LICENCES.get(project) or (LICENCES["llvm-project"] if project.startswith("llvm") else None)
        properties = [prop("source-kind", source.kind)]
        if source.folder:
            properties.append(prop("source-folder", source.folder))
        reference = []
        if source.kind != "path" and "://" in source.location:
            kind = ExternalReferenceType.VCS if source.kind == "git" else ExternalReferenceType.DISTRIBUTION
            reference.append(ExternalReference(type=kind, url=XsUri(source.location)))
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=project,
                version=source.commit or facts.version,
                bom_ref=f"source:{source.folder or '.'}:{project}",
                hashes=sha256(source.sha256),
                licenses=[LicenseExpression(licence)] if licence else [],
                external_references=reference,
                properties=properties,
            )
        )
        for patch in source.patches:
            components.append(
                Component(
                    type=ComponentType.FILE,
                    name=Path(patch.path).name,
                    bom_ref=f"patch:{patch.path}",
                    hashes=sha256(patch.sha256),
                    properties=[prop("patch-of", project), prop("patch-path", patch.path)],
                )
            )
    for package in facts.environment:
        properties = [prop("environment", package.environment)]
        if package.requirement:
            properties.append(prop("requirement", package.requirement))
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=package.name,
                version=package.version,
                scope=ComponentScope.EXCLUDED,
                bom_ref=f"{package.environment}:{package.name}",
                purl=_purl(package.name, package.version, package.build, package.subdir),
                hashes=sha256(package.sha256),
                properties=properties,
            )
        )
    main = Component(
        type=ComponentType.APPLICATION if facts.name == "flagtree-doctor" else ComponentType.LIBRARY,
        name=facts.name,
        version=facts.version,
        bom_ref=f"package:{facts.name}",
        purl=_purl(facts.name, facts.version, facts.build, facts.subdir),
        licenses=[LicenseExpression(facts.license)] if facts.license else [],
    )
    tool = Component(type=ComponentType.APPLICATION, name="flagtree-feedstock", version=__version__)
    tools = ToolRepository(components=[tool])
    metadata = BomMetaData(
        component=main,
        timestamp=datetime.fromtimestamp(facts.epoch, tz=timezone.utc),
        tools=tools,
        properties=[prop(f"pin:{key}", value) for key, value in facts.pins],
    )
    # The same facts, the same serial number: a rebuild gives the same bytes (uuid5 of what the document says).
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{PROPERTY}:{json.dumps(repr(facts))}")
    bom = Bom(components=components, metadata=metadata, serial_number=serial)
    bom.register_dependency(main, components)  # the package is made of (or with) every one of them
    return bom


def sbom_json(facts: SbomFacts) -> str:
    """The document for ``facts``, as CycloneDX 1.6 JSON, checked against the 1.6 schema."""
    from cyclonedx.output.json import JsonV1Dot6  # noqa: PLC0415 - slow to load (jsonschema): SBOM work only

    text = JsonV1Dot6(_bom(facts)).output_as_string(indent=2) + "\n"
    problem = schema_problem(text)
    if problem:
        raise BuildFailedError(
            f"the SBOM of {facts.name} does not validate against CycloneDX 1.6: {problem}",
            fix="report this as a bug of flagtree-feedstock, with the package's recipe",
        )
    return text


def schema_problem(text: str) -> str | None:
    """What the CycloneDX 1.6 JSON schema rejects in ``text`` (one line), or ``None`` when it validates."""
    from cyclonedx.schema import SchemaVersion  # noqa: PLC0415 - slow to load (jsonschema): SBOM work only

    _iri_syntax.defer()  # before jsonschema loads (3.3 s less where no IRI is checked)
    from cyclonedx.validation.json import JsonStrictValidator  # noqa: PLC0415 - slow to load (jsonschema): SBOM work only

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is None:
        return None
    return " ".join(str(getattr(error, "data", error)).split())[:300]


def facts_from_render(
    output: Any,  # noqa: ANN401 - a RenderedOutput (recipe/render.py)
    recipe_dir: Path,
    variant_files: Sequence[Path],
    *,
    subdir: str,
    epoch: int,
) -> SbomFacts:
    """What the document of a rendered output says, before anything is built (``--render-only --sbom``)."""
    recipe = output.engine_variant.recipe.to_dict()
    return SbomFacts(
        name=output.name,
        version=output.version,
        build=output.build_string,
        subdir="noarch" if (recipe.get("build") or {}).get("noarch") else subdir,
        license=(recipe.get("about") or {}).get("license"),
        sources=source_records(recipe.get("source") or (), recipe_dir),
        environment=requirement_packages(recipe.get("requirements") or {}),
        pins=feedstock_pins(recipe_dir, variant_files),
        epoch=epoch,
    )


def facts_from_package(
    index: Mapping[str, Any],
    rendered: Mapping[str, Any],
    recipe_dir: Path,
    variant_files: Sequence[Path],
    *,
    epoch: int,
) -> SbomFacts:
    """What the document of a built package says: its ``info/index.json`` and the engine's record of the
    build (``info/recipe/rendered_recipe.yaml``: the sources, the environments it resolved)."""
    recipe = rendered.get("recipe") or {}
    return SbomFacts(
        name=str(index["name"]),
        version=str(index["version"]),
        build=str(index["build"]),
        subdir=str(index.get("subdir") or ""),
        license=index.get("license"),
        sources=source_records(recipe.get("source") or (), recipe_dir),
        environment=resolved_packages(rendered.get("finalized_dependencies") or {}),
        pins=feedstock_pins(recipe_dir, variant_files),
        epoch=epoch,
    )
