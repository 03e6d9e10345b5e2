"""The last step of every package the engine builds: its SBOM put in, the engine's clock taken out.

py-rattler-build 0.73 (rattler-build at ``f2d6c493``, the 0.73.0 release) stamps each build with the time it
starts (``jiff::Timestamp::now()`` in py-rattler-build's ``output_from_rendered_variant`` and in
``build_recipes``) and never reads ``SOURCE_DATE_EPOCH``: that time becomes ``info/index.json``'s
``timestamp``, the mtime of every tar member and the date of every zip entry (rattler_package_streaming
0.26.9's ``write_conda_package``), the build folder's name (``rattler-build_<name>_<seconds>``, recorded in
``info/recipe/rendered_recipe.yaml`` with ``build_configuration.timestamp``), and the ``SOURCE_DATE_EPOCH`` it
hands the build script. It already sorts the members (``info/`` first), and writes tar headers in its
deterministic mode (owner 0, normalised modes).

:func:`finish_package` rewrites a built ``.conda`` once, deterministically:

- every time the engine stamped becomes ``SOURCE_DATE_EPOCH`` (the recipe's ``extra.source_date_epoch``);
- the host prefix the engine built in (under the staging folder, so different for every build) becomes a
  placeholder of the same length in the files ``info/paths.json`` lists with it and in that record, so the
  installer relocates them as before;
- the package's CycloneDX document (:mod:`.sbom`) is added at :func:`.sbom.sbom_path`, listed in
  ``info/paths.json`` with its sha256.

Members stay in the engine's order (sorted, ``info/`` first); the new document is put in its sorted place.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
import zstandard

from .local_paths import INFO_ZSTD_LEVEL, _replacing
from .sbom import sbom_path

# The pkg archive's level: rattler-build's own for .conda (build_configuration.packaging_settings: 15).
PKG_ZSTD_LEVEL = 15
# What the host prefix becomes: the placeholder conda-build and rattler-build pad their prefixes with.
PLACEHOLDER_UNIT = "_placehold"

# build_configuration.timestamp in the engine's record: when the build started, to the nanosecond.
_STARTED = re.compile(r"^(\s*timestamp: )\d{4}-\d\d-\d\dT[\d:.]+Z$", re.MULTILINE)

# The package's info/index.json, the engine's record (rendered_recipe.yaml) and the epoch -> its SBOM.
SbomWriter = Callable[[dict[str, Any], dict[str, Any], int], str]


def source_date_epoch(rendered: Any) -> int | None:  # noqa: ANN401 - the engine's record, as loaded
    """The recipe's ``extra.source_date_epoch`` (seconds), or ``None`` when it declares none."""
    recipe = (rendered or {}).get("recipe") or {}
    value = (recipe.get("extra") or {}).get("source_date_epoch")
    return int(value) if value is not None else None


@dataclass
class _Member:
    info: tarfile.TarInfo
    data: bytes | None


def _read_tar(data: bytes) -> list[_Member]:
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    members = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
        for info in archive.getmembers():
            handle = archive.extractfile(info) if info.isfile() else None
            members.append(_Member(info, handle.read() if handle is not None else None))
    return members


def _write_tar(members: list[_Member], epoch: int, level: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.GNU_FORMAT) as archive:
        for member in members:
            member.info.mtime = epoch
            member.info.uid = member.info.gid = 0
            member.info.uname = member.info.gname = ""
            if member.data is not None:
                member.info.size = len(member.data)
            archive.addfile(member.info, io.BytesIO(member.data) if member.data is not None else None)
    return zstandard.ZstdCompressor(level=level).compress(out.getvalue())


def canonical_prefix(prefix: str) -> str:
    """A placeholder as long as ``prefix``: ``/`` then ``_placehold`` repeated (the same for every build)."""
    body = (PLACEHOLDER_UNIT * (len(prefix) // len(PLACEHOLDER_UNIT) + 1))[: len(prefix) - 1]
    return "/" + body


def _add_file(members: list[_Member], path: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(path)
    info.mode = mode
    info.size = len(data)
    members[:] = sorted(
        [m for m in members if m.info.name != path] + [_Member(info, data)], key=lambda m: m.info.name
    )


def finish_package(package: Path, write_sbom: SbomWriter) -> bool:
    """Rewrite ``package`` (a ``.conda``) as the module's docstring says, atomically, when its recipe declares
    ``extra.source_date_epoch`` (this feedstock's does); whether it did. A recipe without it (the toolkit's
    toy recipes) is left as the engine wrote it."""
    with zipfile.ZipFile(package) as archive:
        names = archive.namelist()
        entries = {name: archive.read(name) for name in names}
    info_name = next(n for n in names if n.startswith("info-"))
    pkg_name = next(n for n in names if n.startswith("pkg-"))
    info, pkg = _read_tar(entries[info_name]), _read_tar(entries[pkg_name])
    by_name = {m.info.name: m for m in info}
    index = json.loads(by_name["info/index.json"].data or b"{}")
    paths = json.loads(by_name["info/paths.json"].data or b"{}")
    rendered_member = by_name.get("info/recipe/rendered_recipe.yaml")
    rendered = yaml.safe_load(rendered_member.data or b"") if rendered_member is not None else {}
    epoch = source_date_epoch(rendered)
    if epoch is None:
        return False

    # The host prefix, as recorded for relocation, becomes a placeholder of its own length.
    placeholders = {e["prefix_placeholder"] for e in paths["paths"] if e.get("prefix_placeholder")}
    contents = {m.info.name: m for m in pkg}
    for prefix in placeholders:
        canonical = canonical_prefix(prefix)
        for entry in paths["paths"]:
            if entry.get("prefix_placeholder") != prefix:
                continue
            member = contents.get(entry["_path"])
            if member is not None and member.data is not None:
                member.data = member.data.replace(prefix.encode(), canonical.encode())
                entry["sha256"] = hashlib.sha256(member.data).hexdigest()
            entry["prefix_placeholder"] = canonical

    # The engine's clock: index.json's timestamp (milliseconds), and the engine's record of the build.
    index["timestamp"] = epoch * 1000
    # The engine adds run exports in the order of a hash map: the same set, another order from build to build.
    for key in ("depends", "constrains"):
        if key in index:
            index[key] = sorted(index[key])
    if rendered_member is not None:
        text = (rendered_member.data or b"").decode("utf-8")
        stamp = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = _STARTED.sub(lambda m: f"{m.group(1)}{stamp}", text)
        text = re.sub(rf"(rattler-build_{re.escape(str(index['name']))}_)\d+", rf"\g<1>{epoch}", text)
        # The host prefix is padded to a fixed length, so its padding depends on where the build ran.
        text = re.sub(r"(host_env)_placehold\w*", r"\1_placehold", text)
        rendered_member.data = text.encode("utf-8")

    document = write_sbom(index, rendered, epoch).encode("utf-8")
    path = sbom_path(str(index["name"]))
    _add_file(pkg, path, document)
    paths["paths"] = sorted(
        [e for e in paths["paths"] if e["_path"] != path]
        + [
            {
                "_path": path,
                "path_type": "hardlink",
                "sha256": hashlib.sha256(document).hexdigest(),
                "size_in_bytes": len(document),
            }
        ],
        key=lambda e: e["_path"],
    )
    by_name["info/index.json"].data = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    by_name["info/paths.json"].data = (json.dumps(paths, indent=2, sort_keys=True) + "\n").encode()

    entries[info_name] = _write_tar(info, epoch, INFO_ZSTD_LEVEL)
    entries[pkg_name] = _write_tar(pkg, epoch, PKG_ZSTD_LEVEL)
    date = datetime.fromtimestamp(max(epoch, 315532800), tz=timezone.utc).timetuple()[:6]  # zip: from 1980
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as target:
        for name in names:
            entry = zipfile.ZipInfo(name, date_time=date)
            entry.external_attr = 0o644 << 16
            target.writestr(entry, entries[name])
    with _replacing(package) as staged:
        staged.write_bytes(out.getvalue())
    return True
