"""A channel folder indexed with py-rattler's indexer, from the packages' stand-ins (:mod:`.index_stand_ins`),
every package checked whole and in its own subdir first; each ``repodata.json`` replaced whole."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from flagtree_feedstock._engine import first_line, require, settled
from flagtree_feedstock._foreign_json import parse_json
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import probe_writable
from flagtree_feedstock.errors import ChannelError, ConfigurationError, FileAccessError

from .folder import build_into, package_files
from .index_stand_ins import REPODATA, stand_in_channel, stand_in_for, with_package_digests
from .package_check import INDEX, check_package, read_info, shell_word
from .package_reader import DamagedPackage


def index_channel(channel_dir: Path, *, check: bool = True) -> list[Path]:
    """Write ``repodata.json`` for every subdir of ``channel_dir`` (py-rattler's indexer); return them.

    Every package is checked whole first (``check=False`` when the caller has just checked them). A Ctrl-C
    meanwhile is held until the index is written; the indexer's scratch folder is removed in any case.
    """
    rattler_index = require("rattler.index", "py-rattler")
    if channel_dir.exists() and not channel_dir.is_dir():
        raise ConfigurationError(
            f"{channel_dir} is a file, not a channel folder",
            fix="pass the folder that holds noarch/ and the platform subdirs",
        )
    if not channel_dir.is_dir():
        raise ConfigurationError(f"channel folder {channel_dir} does not exist", fix=build_into(channel_dir))
    packages = package_files(channel_dir)
    if not packages:
        raise ChannelError(
            f"channel folder {channel_dir} holds no packages (*.conda, *.tar.bz2 in its subdirs) to index",
            fix=build_into(channel_dir),
        )
    if check:
        for package in packages:
            check_package(package)
    for package in packages:
        _check_subdir(package)
    # py-rattler's indexer, refused a write, can abort the interpreter as it exits: find out first.
    for folder in sorted({channel_dir, *(p.parent for p in packages)}):
        try:
            probe_writable(folder)
        except OSError as exc:
            raise FileAccessError(  # the file system's answer: exit 10, as for every command
                f"cannot index {channel_dir}: cannot write in {folder}: {exc.strerror or exc}",
                fix=f"make {folder} writable for you, or index a copy of the folder",
            ) from None
    (channel_dir / "noarch").mkdir(exist_ok=True)  # a conda channel always has noarch/
    # py-rattler's indexer reads the packages' stand-ins, not the packages: it holds each in memory twice.
    # Removed below, or at the interpreter's exit should a signal come before the try.
    scratch_folder = tempfile.TemporaryDirectory(prefix="flagtree-feedstock-index-")
    try:
        scratch = Path(scratch_folder.name)
        stand_in_channel(channel_dir, scratch)
        stand_ins = []
        for package in packages:
            try:
                stand_ins.append(stand_in_for(package, scratch))
            except DamagedPackage:  # UnsafePackage too
                check_package(package)  # names it, saying what to do
                raise
        with deferred_interrupts():
            _index_fs(rattler_index, scratch, channel_dir, force=True)
            indexed = {
                subdir.name: with_package_digests(
                    (subdir / REPODATA).read_bytes(),
                    {s.package.name: s for s in stand_ins if s.package.parent.name == subdir.name},
                    channel_dir / subdir.name,
                )
                for subdir in sorted(scratch.iterdir())
                if (subdir / REPODATA).is_file()
            }  # every subdir's first: one the toolkit cannot put right leaves the channel's index as it was
            for subdir, repodata in indexed.items():
                _replace(channel_dir / subdir / REPODATA, repodata, channel_dir)
            _index_fs(rattler_index, channel_dir, channel_dir, force=False)  # every package listed: none read
    finally:
        with deferred_interrupts():  # a second signal does not leave half the stand-ins
            scratch_folder.cleanup()
    return sorted(channel_dir.glob("*/repodata.json"))


def _index_fs(rattler_index: Any, folder: Path, channel_dir: Path, *, force: bool) -> None:  # noqa: ANN401 - py-rattler
    """py-rattler's indexer run on ``folder`` (``channel_dir`` or its stand-ins), its scratch folder removed."""
    try:
        # py-rattler's workers done before a held signal (or the error's exit) may end the interpreter
        settled(rattler_index.index_fs(folder, write_zst=False, write_shards=False, force=force))
    except Exception as exc:  # noqa: BLE001 - py-rattler raises many classes, a panic in a task among them
        raise ChannelError(
            f"indexing {channel_dir} failed: {first_line(exc).replace(str(folder), str(channel_dir))}",
            fix=f"check that you can write in {channel_dir}, and its package files",
        ) from None
    finally:
        shutil.rmtree(folder / ".tmp", ignore_errors=True)  # py-rattler's indexer's scratch folder


def _replace(path: Path, data: bytes, channel_dir: Path) -> None:
    """``path`` (an index of ``channel_dir``) holds ``data``, written under a temporary name and renamed: never
    half of it. What is in the way of the rename (a folder of that name) fails the index in one line."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        Path(name).chmod(0o644)
        Path(name).replace(path)
    except BaseException as exc:
        Path(name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ChannelError(
                f"indexing {channel_dir} failed: cannot write {path}: {exc.strerror or exc}",
                fix=f"remove or move what is at {path}, and check that you can write in {channel_dir}",
            ) from None
        raise


_SUBDIR = re.compile(r"noarch|(linux|osx|win|emscripten|wasi|zos|freebsd)-[a-z0-9_]+")


def _check_subdir(path: Path) -> None:
    """py-rattler's indexer files a package under the subdir it lies in, whatever its own ``info/index.json``
    says: a linux-aarch64 package in ``noarch/`` would be offered to every platform. Refuse it, naming both."""
    try:
        index = read_info(path, (INDEX,), whole=False).get(INDEX)
        record = parse_json(index) if index is not None else None
    except (DamagedPackage, ValueError):
        return  # check_package names a damaged package
    subdir = record.get("subdir") if isinstance(record, dict) else None
    # Only a channel subdir's name is compared: the engine keeps packages whose test failed in `broken/`.
    if isinstance(subdir, str) and _SUBDIR.fullmatch(path.parent.name) and subdir != path.parent.name:
        home = path.parent.parent / subdir
        raise ChannelError(
            f"{path} is a package for {subdir}, in the subdir {path.parent.name}/",
            fix=f"move it where it belongs: mkdir -p {shell_word(home)} && mv {shell_word(path)} {shell_word(home)}/",
        )
