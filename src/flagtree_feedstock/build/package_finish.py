"""The last step of every package either engine builds: its SBOM put in, the engine's clock taken out.

py-rattler-build 0.73 (rattler-build at ``f2d6c493``, the 0.73.0 release) stamps each build with the time it
starts (``jiff::Timestamp::now()`` in py-rattler-build's ``output_from_rendered_variant`` and in
``build_recipes``) and never reads ``SOURCE_DATE_EPOCH``: that time becomes ``info/index.json``'s
``timestamp``, the mtime of every tar member and the date of every zip entry (rattler_package_streaming
0.26.9's ``write_conda_package``), the build folder's name (``rattler-build_<name>_<seconds>``, recorded in
``info/recipe/rendered_recipe.yaml`` with ``build_configuration.timestamp``), and the ``SOURCE_DATE_EPOCH`` it
hands the build script. It already sorts the members (``info/`` first), and writes tar headers in its
deterministic mode (owner 0, normalised modes).

conda-build (``--tool conda-build``) stamps the same times, keeps the build's umask in the modes, records the
recipe folder and its modification time in ``info/recipe/meta.yaml``'s header, writes the lists of its variant
record it makes from a set and ``info/hash_input.json`` in a hash seed's order, and lists the host prefix it
relocates by in ``info/has_prefix`` as well.

:func:`finish_package` rewrites a built ``.conda`` or ``.tar.bz2`` once, deterministically, from the engine's
record of the build (:mod:`.engine_record`: rattler-build's, or conda-build's in its shape):

- every time the engine stamped becomes ``SOURCE_DATE_EPOCH`` (the recipe's ``context.source_date_epoch``);
- the host prefix the engine built in (under the staging folder, so different for every build) becomes a
  placeholder of the same length in the files ``info/paths.json`` lists with it and in that record, so the
  installer relocates them as before; the host prefix and the build folder where else they are, ELF
  build-ids, and the ``RECORD`` files that hash them, as :mod:`.normalise` says;
- the run exports the engine lists in a hash map's order are sorted (``index.json``, the engine's record);
  conda-build's recipe header names the folder alone and ``SOURCE_DATE_EPOCH``, its set-made lists and
  ``hash_input.json``'s keys are sorted, ``info/has_prefix`` gets the placeholder, modes are ``0644`` (``0755``
  for a folder or an executable), as rattler-build writes them;
- the package's CycloneDX document (:mod:`.sbom`) is added at :func:`.sbom.sbom_path`, listed in
  ``info/paths.json`` with its sha256.

Members are written sorted by name in each tar (a ``.tar.bz2``: ``info/`` first), as rattler-build writes them;
a ``.conda`` keeps its zip entries in the engine's order.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

import zstandard

from .engine_record import CONDA_BUILD_RECIPE, CONDA_BUILD_VARIANT, RATTLER_RECORD, engine_record
from .local_paths import INFO_ZSTD_LEVEL, LOCAL, _replacing
from .normalise import content_build_id, fix_records, replace_build_folder
from .sbom import sbom_path

# The pkg archive's level: rattler-build's own for .conda (build_configuration.packaging_settings: 15).
PKG_ZSTD_LEVEL = 15
# A .tar.bz2's level: both engines' default (rattler-build's tar-bz2 and conda-build's are 9).
TAR_BZ2_LEVEL = 9
# What the host prefix becomes: the placeholder conda-build and rattler-build pad their prefixes with.
PLACEHOLDER_UNIT = "_placehold"

# conda-build's header of info/recipe/meta.yaml: "# <recipe folder>, last modified <its mtime, local time>".
_TEMPLATE_FROM = re.compile(r"^# (/.*), last modified .*$", re.MULTILINE)
# The keys of conda-build's variant record whose lists it makes from a set.
_SET_KEYS = ("extend_keys", "ignore_build_only_deps")
# build_configuration.timestamp in the engine's record: when the build started, to the nanosecond.
_STARTED = re.compile(r"^(\s*timestamp: )\d{4}-\d\d-\d\dT[\d:.]+Z$", re.MULTILINE)

# The package's info/index.json, the engine's record (rendered_recipe.yaml) and the epoch -> its SBOM.
# A list of `- spec: ...` mappings (finalized_dependencies' run depends and constraints), and one of them.
_SPEC_ITEM = re.compile(r"^( *)- spec: .*\n(?:\1  (?!- )\S.*\n)*", re.MULTILINE)
_SPEC_RUN = re.compile(
    r"(?:^( *)- spec: .*\n(?:\1  (?!- )\S.*\n)*)(?:\1- spec: .*\n(?:\1  (?!- )\S.*\n)*)+", re.MULTILINE
)

SbomWriter = Callable[[dict[str, Any], dict[str, Any], int], str]


def source_date_epoch(rendered: Any) -> int | None:  # noqa: ANN401 - the engine's record, as loaded
    """The recipe's ``source_date_epoch`` (seconds), a variable of its ``context`` (conda-forge's lint allows no
    such key under ``extra``), or ``None`` when it declares none."""
    recipe = (rendered or {}).get("recipe") or {}
    value = (recipe.get("context") or {}).get("source_date_epoch")
    return int(value) if value is not None else None


@dataclass
class _Member:
    info: tarfile.TarInfo
    data: bytes | None


def _read_tar(raw: bytes) -> list[_Member]:
    members = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
        for info in archive.getmembers():
            handle = archive.extractfile(info) if info.isfile() else None
            members.append(_Member(info, handle.read() if handle is not None else None))
    return members


def _write_tar(members: list[_Member], epoch: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.GNU_FORMAT) as archive:
        for member in members:
            member.info.mtime = epoch
            if (
                member.info.isfile() or member.info.isdir()
            ):  # conda-build keeps the umask's modes; rattler-build's
                member.info.mode = 0o755 if member.info.isdir() or member.info.mode & 0o111 else 0o644
            member.info.uid = member.info.gid = 0
            member.info.uname = member.info.gname = ""
            if member.data is not None:
                member.info.size = len(member.data)
            archive.addfile(member.info, io.BytesIO(member.data) if member.data is not None else None)
    return out.getvalue()


def _zstd(raw: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(raw)


@dataclass
class _Archive:
    """A package as members: ``info/`` and the rest, and, for a ``.conda``, its zip entries in order."""

    info: list[_Member]
    pkg: list[_Member]
    entries: dict[str, bytes] | None = None

    @classmethod
    def read(cls, package: Path) -> _Archive:
        if not package.name.endswith(".conda"):  # a .tar.bz2: one tar, info/ and the files together
            members = _read_tar(bz2.decompress(package.read_bytes()))
            info = [m for m in members if m.info.name.startswith("info/")]
            return cls(info=info, pkg=[m for m in members if not m.info.name.startswith("info/")])
        with zipfile.ZipFile(package) as archive:
            entries = {name: archive.read(name) for name in archive.namelist()}
        info_name = next(n for n in entries if n.startswith("info-"))
        pkg_name = next(n for n in entries if n.startswith("pkg-"))
        return cls(info=_read_tar(_zstd(entries[info_name])), pkg=_read_tar(_zstd(entries[pkg_name])),
                   entries=entries)  # fmt: skip

    @staticmethod
    def files(members: list[_Member]) -> dict[str, bytes]:
        """Each regular file of ``members`` by name."""
        return {m.info.name: m.data for m in members if m.data is not None}

    def write(self, epoch: int) -> bytes:
        """The package's bytes, every time in it ``epoch``, the members of each tar sorted by name (conda-build
        writes ``info/`` in no fixed order): a ``.tar.bz2`` as one tar, ``info/`` first."""
        info = sorted(self.info, key=lambda m: m.info.name)
        pkg = sorted(self.pkg, key=lambda m: m.info.name)
        if self.entries is None:
            return bz2.compress(_write_tar(info + pkg, epoch), TAR_BZ2_LEVEL)
        tars = {"info-": (info, INFO_ZSTD_LEVEL), "pkg-": (pkg, PKG_ZSTD_LEVEL)}
        written = {}
        for name, data in self.entries.items():  # the zip's entries in the engine's order
            members, level = tars.get(name[: name.find("-") + 1], (None, 0))
            written[name] = (
                data
                if members is None
                else zstandard.ZstdCompressor(level=level).compress(_write_tar(members, epoch))
            )
        # A zip's dates begin in 1980.
        date = datetime.fromtimestamp(max(epoch, 315532800), tz=timezone.utc).timetuple()[:6]
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as target:
            for name, data in written.items():
                entry = zipfile.ZipInfo(name, date_time=date)
                entry.external_attr = 0o644 << 16
                target.writestr(entry, data)
        return out.getvalue()


def read_package(package: Path) -> _Archive:
    """``package`` (a ``.conda`` or a ``.tar.bz2``) as members, as the finish step reads it."""
    return _Archive.read(package)


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


def _canonical_placeholders(paths: dict[str, Any], contents: dict[str, _Member]) -> set[str]:
    """The host prefix each file is recorded with for relocation becomes a placeholder of its own length, in
    the file and its record; the prefixes replaced."""
    placeholders = {e["prefix_placeholder"] for e in paths["paths"] if e.get("prefix_placeholder")}
    for prefix in placeholders:
        canonical = canonical_prefix(prefix)
        for entry in paths["paths"]:
            if entry.get("prefix_placeholder") != prefix:
                continue
            member = contents.get(entry["_path"])
            if member is not None and member.data is not None:
                member.data = member.data.replace(prefix.encode(), canonical.encode())
            entry["prefix_placeholder"] = canonical
    return placeholders


def _without_build_folder(
    contents: dict[str, _Member], directories: dict[str, Any], build_root: Path | None
) -> None:
    """The build folder out of every file where no compiler flag reaches, then ELF build-ids from the content
    (normalise.py). ``directories``: the engine's record of its folders, whose staging folder reads ``local``
    by then (conda-build's: under ``build_root``, :mod:`.engine_record`). The host prefix first: the engine pads it to a fixed length wherever it builds, so a placeholder
    as long is the same in every build, in binaries (the .pyc files' code objects) too."""
    if build_root is None:
        return
    for key in ("host_prefix", "build_dir"):
        recorded = str(directories.get(key) or "")
        if recorded.startswith(f"{LOCAL}/"):
            folder = str(build_root) + recorded.removeprefix(LOCAL)
        elif recorded.startswith(
            f"{build_root}/"
        ):  # conda-build's, as its files record it (engine_record.py)
            folder = recorded
        else:
            continue
        current = {name: m.data for name, m in contents.items() if m.data is not None}
        for name, data in replace_build_folder(current, folder, canonical_prefix(folder)).items():
            contents[name].data = data


def _content_build_ids(contents: dict[str, _Member]) -> None:
    for member in contents.values():
        if member.data is not None:
            member.data = content_build_id(member.data)


def _update_records(contents: dict[str, _Member], paths: dict[str, Any], before: dict[str, bytes]) -> None:
    """Each RECORD, then ``info/paths.json``, given the hash and size of every file that changed."""
    current = {name: m.data for name, m in contents.items() if m.data is not None}
    changed = {name: data for name, data in current.items() if before.get(name) != data}
    for name, data in fix_records(current, changed).items():
        contents[name].data = changed[name] = data
    for entry in paths["paths"]:
        content = changed.get(entry["_path"])
        if content is not None:
            entry["sha256"] = hashlib.sha256(content).hexdigest()
            if "size_in_bytes" in entry:
                entry["size_in_bytes"] = len(content)


def _restamp(text: str, name: str, epoch: int) -> str:
    """The engine's record of the build with its start time and build folder name at ``epoch``."""
    stamp = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = _STARTED.sub(lambda m: f"{m.group(1)}{stamp}", text)
    text = re.sub(rf"(rattler-build_{re.escape(name)}_)\d+", rf"\g<1>{epoch}", text)
    # The host prefix is padded to a fixed length, so its padding depends on where the build ran.
    text = re.sub(r"(host_env)_placehold\w*", r"\1_placehold", text)
    # The run exports each list is in a hash map's order: each run of `- spec:` items sorted.
    return _SPEC_RUN.sub(lambda m: "".join(sorted(i.group(0) for i in _SPEC_ITEM.finditer(m.group(0)))), text)


def _restamp_conda_build(by_name: dict[str, _Member], epoch: int) -> None:
    """conda-build's records of the build: ``info/recipe/meta.yaml`` without the recipe folder's path and
    modification time in its header (the folder's name and ``epoch``); the variant it used
    (``info/recipe/conda_build_config.yaml``) with the lists it writes from a set (in the order of a hash
    seed) sorted, and so the keys of what it hashed (``info/hash_input.json``)."""
    recipe, variant = by_name.get(CONDA_BUILD_RECIPE), by_name.get(CONDA_BUILD_VARIANT)
    if recipe is None or recipe.data is None:
        return
    stamp = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
    text = recipe.data.decode("utf-8")
    text = _TEMPLATE_FROM.sub(lambda m: f"# {PurePosixPath(m[1]).name}, last modified {stamp}", text, count=1)
    recipe.data = text.encode("utf-8")
    if variant is not None and variant.data is not None:
        for key in _SET_KEYS:
            variant.data = _sorted_block_list(variant.data, key)
    hashed = by_name.get("info/hash_input.json")
    if hashed is not None and hashed.data is not None:
        hashed.data = json.dumps(json.loads(hashed.data), indent=2, sort_keys=True).encode()


def _sorted_block_list(data: bytes, key: str) -> bytes:
    """``data`` (YAML) with the top-level block list ``key:`` holds (``- item`` lines) in sorted order."""
    block = re.search(rb"^" + re.escape(key.encode()) + rb":\n((?:- .*\n)+)", data, re.MULTILINE)
    if block is None:
        return data
    lines = sorted(block[1].splitlines(keepends=True))
    return data[: block.start(1)] + b"".join(lines) + data[block.end(1) :]


def _add_sbom(pkg: list[_Member], paths: dict[str, Any], name: str, document: bytes) -> None:
    path = sbom_path(name)
    _add_file(pkg, path, document)
    record = {"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(document).hexdigest(),
              "size_in_bytes": len(document)}  # fmt: skip
    paths["paths"] = sorted(
        [e for e in paths["paths"] if e["_path"] != path] + [record], key=lambda e: e["_path"]
    )


def finish_package(package: Path, write_sbom: SbomWriter, build_root: Path | None = None) -> bool:
    """Rewrite ``package`` (a ``.conda`` or a ``.tar.bz2``) as the module's docstring says, atomically, when
    its recipe declares ``context.source_date_epoch`` (this feedstock's does); whether it did. A recipe without
    it (the toolkit's toy recipes) is left as the engine wrote it. ``build_root``: the engine's output folder
    (the staging folder), which the engine's record names ``local`` by then (local_paths.py)."""
    archive = read_package(package)
    info, pkg = archive.info, archive.pkg
    by_name = {m.info.name: m for m in info}
    index = json.loads(by_name["info/index.json"].data or b"{}")
    paths = json.loads(by_name["info/paths.json"].data or b"{}")
    rendered_member = by_name.get(RATTLER_RECORD)
    rendered = engine_record(archive.files(info))  # conda-build's record too, in the same shape
    epoch = source_date_epoch(rendered)
    if epoch is None:
        return False

    contents = {m.info.name: m for m in pkg}
    before = {name: m.data for name, m in contents.items() if m.data is not None}
    placeholders = _canonical_placeholders(paths, contents)
    has_prefix = by_name.get("info/has_prefix")  # conda-build's list of the files it relocates, and by what
    if has_prefix is not None and has_prefix.data is not None:
        for prefix in placeholders:
            has_prefix.data = has_prefix.data.replace(prefix.encode(), canonical_prefix(prefix).encode())
    directories = (rendered.get("build_configuration") or {}).get("directories") or {}
    _without_build_folder(contents, directories, build_root)
    _content_build_ids(contents)
    _update_records(contents, paths, before)

    # The engine's clock: index.json's timestamp (milliseconds), and the engine's record of the build.
    index["timestamp"] = epoch * 1000
    # The engine adds run exports in the order of a hash map: the same set, another order from build to build.
    for key in ("depends", "constrains"):
        if key in index:
            index[key] = sorted(index[key])
    if rendered_member is not None:
        rendered_member.data = _restamp(
            (rendered_member.data or b"").decode("utf-8"), str(index["name"]), epoch
        ).encode()
    _restamp_conda_build(by_name, epoch)

    _add_sbom(pkg, paths, str(index["name"]), write_sbom(index, rendered, epoch).encode("utf-8"))
    by_name["info/index.json"].data = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    by_name["info/paths.json"].data = (json.dumps(paths, indent=2, sort_keys=True) + "\n").encode()

    data = archive.write(epoch)
    with _replacing(package) as staged:
        staged.write_bytes(data)
    return True
