"""The rewrite's rules for a package's records: the engine's clock made the recipe's epoch, its SBOM listed.

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

:mod:`.one_pass` rewrites a built ``.conda`` or ``.tar.bz2`` once, deterministically, in one streaming pass,
with the rules of this module, from the engine's record of the build (:mod:`.engine_record`: rattler-build's,
or conda-build's in its shape), when the recipe declares ``context.source_date_epoch`` (this feedstock's
does):

- every time the engine stamped becomes ``SOURCE_DATE_EPOCH`` (the recipe's ``context.source_date_epoch``);
- the host prefix the engine built in (under the staging folder, so different for every build) becomes a
  placeholder of the same length in the files ``info/paths.json`` lists with it and in that record, so the
  installer relocates them as before; the host prefix and the build folder where else they are, ELF
  build-ids, and the ``RECORD`` files that hash them, as :mod:`.payload_rewrite` says;
- the run exports the engine lists in a hash map's order are sorted (``index.json``, the engine's record);
  conda-build's recipe header names the folder alone and ``SOURCE_DATE_EPOCH``, its set-made lists and
  ``hash_input.json``'s keys are sorted, ``info/has_prefix`` gets the placeholder, modes are ``0644`` (``0755``
  for a folder or an executable), as rattler-build writes them;
- the package's CycloneDX document (:mod:`.sbom`) is added at :func:`.sbom.sbom_path`, listed in
  ``info/paths.json`` with its sha256.

Members are written sorted by name in each tar, ``info/`` first (:mod:`flagtree_feedstock._archive.package_write`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from flagtree_feedstock._archive.package_write import PKG_LEVEL, TAR_BZ2_LEVEL

from .engine_record import CONDA_BUILD_RECIPE, CONDA_BUILD_VARIANT, RATTLER_RECORD
from .local_paths import LOCAL

# What the host prefix becomes: the placeholder conda-build and rattler-build pad their prefixes with.
PLACEHOLDER_UNIT = "_placehold"
INDEX = "info/index.json"
PATHS = "info/paths.json"
HAS_PREFIX = "info/has_prefix"
HASH_INPUT = "info/hash_input.json"

# conda-build's header of info/recipe/meta.yaml: "# <recipe folder>, last modified <its mtime, local time>".
_TEMPLATE_FROM = re.compile(r"^# (/.*), last modified .*$", re.MULTILINE)
# The keys of conda-build's variant record whose lists it makes from a set.
_SET_KEYS = ("extend_keys", "ignore_build_only_deps")
# build_configuration.timestamp in the engine's record: when the build started, to the nanosecond.
_STARTED = re.compile(r"^(\s*timestamp: )\d{4}-\d\d-\d\dT[\d:.]+Z$", re.MULTILINE)

# build_configuration.packaging_settings in the engine's record: the format and level it compressed at.
_PACKAGING = re.compile(rb"^(\s*archive_type: (conda|tar_bz2)\n\s*compression_level: )-?\d+$", re.MULTILINE)

# A list of `- spec: ...` mappings (finalized_dependencies' run depends and constraints), and one of them.
_SPEC_ITEM = re.compile(r"^( *)- spec: .*\n(?:\1  (?!- )\S.*\n)*", re.MULTILINE)
_SPEC_RUN = re.compile(
    r"(?:^( *)- spec: .*\n(?:\1  (?!- )\S.*\n)*)(?:\1- spec: .*\n(?:\1  (?!- )\S.*\n)*)+", re.MULTILINE
)

# The package's info/index.json, the engine's record (rendered_recipe.yaml) and the epoch -> its SBOM.
SbomWriter = Callable[[dict[str, Any], dict[str, Any], int], str]


def source_date_epoch(rendered: Any) -> int | None:  # noqa: ANN401 - the engine's record, as loaded
    """The recipe's ``source_date_epoch`` (seconds), a variable of its ``context`` (conda-forge's lint allows no
    such key under ``extra``), or ``None`` when it declares none."""
    recipe = (rendered or {}).get("recipe") or {}
    value = (recipe.get("context") or {}).get("source_date_epoch")
    return int(value) if value is not None else None


def canonical_prefix(prefix: str) -> str:
    """A placeholder as long as ``prefix``: ``/`` then ``_placehold`` repeated (the same for every build)."""
    body = (PLACEHOLDER_UNIT * (len(prefix) // len(PLACEHOLDER_UNIT) + 1))[: len(prefix) - 1]
    return "/" + body


def normal_mode(kind: str, mode: int) -> int:
    """A member's mode as rattler-build writes it: ``0644``, ``0755`` for a folder or an executable file
    (conda-build keeps the build's umask); a link's as it is."""
    if kind == "dir" or (kind == "file" and mode & 0o111):
        return 0o755
    return 0o644 if kind == "file" else mode


def placeholders(paths: Mapping[str, Any]) -> dict[str, str]:
    """Each file ``info/paths.json`` records with the host prefix it is relocated by: its path -> that prefix."""
    return {
        str(entry["_path"]): str(entry["prefix_placeholder"])
        for entry in paths.get("paths") or ()
        if entry.get("prefix_placeholder")
    }


def build_folders(directories: Mapping[str, Any], build_root: Path | None) -> list[str]:
    """The build's host prefix and build folder, as its files hold them, from the engine's record of its
    ``directories`` (the staging folder reads ``local`` there by then; conda-build's: under ``build_root``,
    :mod:`.engine_record`). The host prefix first: the engine pads it to a fixed length wherever it builds,
    so a placeholder as long is the same in every build, in binaries (the .pyc files' code objects) too."""
    if build_root is None:
        return []
    folders = []
    for key in ("host_prefix", "build_dir"):
        recorded = str(directories.get(key) or "")
        if recorded.startswith(f"{LOCAL}/"):
            folders.append(str(build_root) + recorded.removeprefix(LOCAL))
        elif recorded.startswith(f"{build_root}/"):  # conda-build's, as its files record it
            folders.append(recorded)
    return folders


def final_packaging(record: bytes) -> bytes:
    """The engine's record of the build (``info/recipe/rendered_recipe.yaml``) with the level the package is
    compressed at in the end: the engine's fastest was asked for (:data:`.one_pass.ENGINE_FORMATS`), and the
    landing compresses once again at the final levels, rattler-build's own defaults."""
    levels = {b"conda": PKG_LEVEL, b"tar_bz2": TAR_BZ2_LEVEL}
    return _PACKAGING.sub(lambda m: m[1] + str(levels[m[2]]).encode(), record)


def finish_paths(paths: dict[str, Any], changed: Mapping[str, tuple[str, int]]) -> None:
    """``info/paths.json`` with the host prefix of each relocated file as its placeholder, and each changed
    file's sha256 and size (``changed``: path -> (sha256, size))."""
    for entry in paths.get("paths") or ():
        if entry.get("prefix_placeholder"):
            entry["prefix_placeholder"] = canonical_prefix(str(entry["prefix_placeholder"]))
        content = changed.get(entry["_path"])
        if content is not None:
            entry["sha256"] = content[0]
            if "size_in_bytes" in entry:
                entry["size_in_bytes"] = content[1]


def add_path(paths: dict[str, Any], path: str, sha256: str, size: int) -> None:
    """``path`` (a file the landing adds: the SBOM) in ``info/paths.json``, in its sorted place."""
    record = {"_path": path, "path_type": "hardlink", "sha256": sha256, "size_in_bytes": size}
    paths["paths"] = sorted(
        [e for e in paths.get("paths") or () if e["_path"] != path] + [record], key=lambda e: e["_path"]
    )


def finish_index(index: dict[str, Any], epoch: int) -> None:
    """``info/index.json`` with the epoch as its time (milliseconds) and its run exports sorted: the engine
    adds them in the order of a hash map, the same set in another order from build to build."""
    index["timestamp"] = epoch * 1000
    for key in ("depends", "constrains"):
        if key in index:
            index[key] = sorted(index[key])


def json_record(document: object) -> bytes:
    """An ``info/`` JSON record as the landing writes it: indented, keys sorted."""
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def restamp_records(files: dict[str, bytes], name: str, epoch: int, prefixes: Mapping[str, str]) -> None:
    """The engine's records in ``files`` (``info/`` files by name, changed in place) at ``epoch``: its record of
    the build (:func:`_restamp`), conda-build's (:func:`_restamp_conda_build`), and ``info/has_prefix`` with
    each of ``prefixes`` (the host prefixes files are relocated by) as its placeholder."""
    if RATTLER_RECORD in files:
        files[RATTLER_RECORD] = _restamp(files[RATTLER_RECORD].decode("utf-8"), name, epoch).encode()
    _restamp_conda_build(files, epoch)
    if HAS_PREFIX in files:  # conda-build's list of the files it relocates, and by what
        for prefix in set(prefixes.values()):
            files[HAS_PREFIX] = files[HAS_PREFIX].replace(prefix.encode(), canonical_prefix(prefix).encode())


def _restamp(text: str, name: str, epoch: int) -> str:
    """The engine's record of the build with its start time and build folder name at ``epoch``."""
    stamp = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = _STARTED.sub(lambda m: f"{m.group(1)}{stamp}", text)
    text = re.sub(rf"(rattler-build_{re.escape(name)}_)\d+", rf"\g<1>{epoch}", text)
    # The host prefix is padded to a fixed length, so its padding depends on where the build ran.
    text = re.sub(r"(host_env)_placehold\w*", r"\1_placehold", text)
    # The run exports each list is in a hash map's order: each run of `- spec:` items sorted.
    return _SPEC_RUN.sub(lambda m: "".join(sorted(i.group(0) for i in _SPEC_ITEM.finditer(m.group(0)))), text)


def _restamp_conda_build(files: dict[str, bytes], epoch: int) -> None:
    """conda-build's records of the build: ``info/recipe/meta.yaml`` without the recipe folder's path and
    modification time in its header (the folder's name and ``epoch``); the variant it used
    (``info/recipe/conda_build_config.yaml``) with the lists it writes from a set (in the order of a hash
    seed) sorted, and so the keys of what it hashed (``info/hash_input.json``)."""
    if CONDA_BUILD_RECIPE not in files:
        return
    stamp = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
    text = files[CONDA_BUILD_RECIPE].decode("utf-8")
    text = _TEMPLATE_FROM.sub(lambda m: f"# {PurePosixPath(m[1]).name}, last modified {stamp}", text, count=1)
    files[CONDA_BUILD_RECIPE] = text.encode("utf-8")
    if CONDA_BUILD_VARIANT in files:
        for key in _SET_KEYS:
            files[CONDA_BUILD_VARIANT] = _sorted_block_list(files[CONDA_BUILD_VARIANT], key)
    if HASH_INPUT in files:
        files[HASH_INPUT] = json.dumps(json.loads(files[HASH_INPUT]), indent=2, sort_keys=True).encode()


def _sorted_block_list(data: bytes, key: str) -> bytes:
    """``data`` (YAML) with the top-level block list ``key:`` holds (``- item`` lines) in sorted order."""
    block = re.search(rb"^" + re.escape(key.encode()) + rb":\n((?:- .*\n)+)", data, re.MULTILINE)
    if block is None:
        return data
    lines = sorted(block[1].splitlines(keepends=True))
    return data[: block.start(1)] + b"".join(lines) + data[block.end(1) :]
