"""The SBOM outside a build: ``build --render-only --sbom DIR`` writes the documents, ``sbom PACKAGE`` reads one.

- :func:`write_rendered` writes, offline, the document of each selected package from the render alone
  (:func:`.sbom.facts_from_render`): the same sources, patches, pins and package as the built one; the build
  and host environments are the recipe's requirements there, where a built package names what the engine
  resolved. One file per package file name, ``<name>-<version>-<build>.cdx.json``.
- :func:`check_package` reads a built ``.conda``'s document and checks it against the package: it validates
  against CycloneDX 1.6; it describes this package (name, version, build, subdir); ``info/paths.json`` lists
  it with its sha256; it names every source and patch the engine's record lists and every pin of the record's
  variant with the same value.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
import zstandard

from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe.pins import write_atomically

from .package_finish import source_date_epoch
from .sbom import PROPERTY, facts_from_render, sbom_json, sbom_path, schema_problem


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


def _tar(archive: zipfile.ZipFile, prefix: str) -> dict[str, bytes]:
    name = next((n for n in archive.namelist() if n.startswith(prefix)), None)
    if name is None:
        return {}
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(archive.read(name))
    found = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                found[member.name] = handle.read()
    return found


def _read(package: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    if not package.name.endswith(".conda"):
        raise ConfigurationError(
            f"{package} is not a .conda package",
            fix="pass a .conda file the build wrote into its --output-dir",
        )
    try:
        with zipfile.ZipFile(package) as archive:
            return _tar(archive, "info-"), _tar(archive, "pkg-")
    except (zipfile.BadZipFile, zstandard.ZstdError, tarfile.TarError) as exc:
        raise _bad(package, f"not a readable .conda ({exc})") from None


def check_package(package: Path) -> SbomSummary:
    """Check ``package``'s document against the package (see the module); its summary."""
    info, pkg = _read(package)
    if "info/index.json" not in info:
        raise _bad(package, "has no info/index.json: not a conda package")
    index = json.loads(info["info/index.json"])
    path = sbom_path(str(index["name"]))
    document = pkg.get(path)
    if document is None:
        raise _bad(package, f"holds no SBOM at {path}")
    text = document.decode("utf-8")
    problem = schema_problem(text)
    if problem:
        raise _bad(package, f"its SBOM does not validate against CycloneDX 1.6: {problem}")
    bom = json.loads(text)
    listed = {e["_path"]: e for e in json.loads(info.get("info/paths.json", b"{}") or b"{}").get("paths", [])}
    if listed.get(path, {}).get("sha256") != hashlib.sha256(document).hexdigest():
        raise _bad(package, f"info/paths.json does not list {path} with its sha256")
    purl = str(bom.get("metadata", {}).get("component", {}).get("purl", ""))
    expected = (
        f"pkg:conda/{index['name']}@{index['version']}?build={index['build']}&subdir={index.get('subdir')}"
    )
    if purl != expected:
        raise _bad(package, f"its SBOM describes {purl or 'no package'}, not {expected}")
    rendered = yaml.safe_load(info.get("info/recipe/rendered_recipe.yaml", b"") or b"") or {}
    components = bom.get("components", [])
    names = {c["name"] for c in components}
    sources = (rendered.get("recipe") or {}).get("source") or []
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
    variant = (rendered.get("build_configuration") or {}).get("variant") or {}
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
