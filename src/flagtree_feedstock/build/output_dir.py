"""The output folder: a local channel that a build fills one finished package at a time.

- It is checked before anything builds (:func:`check_output_dir`): a folder, or one that can be made, and
  writable, with its parent (the staging folder, the lock and the package cache live beside it).
- One build writes into it at a time (:func:`output_lock`): a second build waits, saying so.
- A run builds in a staging folder beside it (:func:`staging_dir`, same file system) that holds links to
  the packages the folder already has (:func:`seed_staging`), so the engine solves against them and skips
  them.
- Each package the engine finishes is checked whole, put in place under its final name by a rename (it is
  there whole or not at all) and indexed at once (:func:`publish_new`): a later failure or a Ctrl-C keeps it.
- The engine's package cache is the folder's own (:func:`package_cache`), and a package about to be rebuilt
  is dropped from it first (:func:`evict`): py-rattler-build 0.73 tests a package it just built from the
  cache entry of the same file name when there is one (tests/README.md), so a rebuilt package would be
  tested with an older build's tests.
"""

from __future__ import annotations

import fcntl
import filecmp
import logging
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._paths import check_folder
from flagtree_feedstock.channel.folder import PACKAGE_SUFFIXES, check_package, index_channel, package_files

LOGGER = logging.getLogger(__name__)


def _beside(channel_dir: Path, suffix: str) -> Path:
    """A path next to ``channel_dir`` named after it: ``build_artifacts`` -> ``.build_artifacts<suffix>``."""
    resolved = channel_dir.resolve()
    return resolved.parent / f".{resolved.name}{suffix}"


def check_output_dir(path: Path) -> None:
    """``path`` is a folder (or can be made as one) this process can write in, and so is its parent (the
    staging folder, the lock and the package cache go beside it). Nothing is created."""
    check_folder(path, option="--output-dir", beside=True)


@contextmanager
def output_lock(channel_dir: Path) -> Iterator[None]:
    """Hold the output folder's lock (``.<name>.lock`` beside it); wait, saying so, while another build does.

    The lock is an ``flock`` on that file: the system releases it when its holder ends in any way, so a
    crashed build never leaves the folder locked. The file itself stays (removing it would let a third
    build lock a new file while the second waits on the old one).
    """
    lock_path = _beside(channel_dir, ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            LOGGER.warning(
                "waiting for the build into %s by %s to finish (one build writes into a folder at a time)",
                channel_dir,
                holder,
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        lock.truncate()
        lock.write(f"process {os.getpid()}\n")
        lock.flush()
        yield


@contextmanager
def staging_dir(channel_dir: Path, *, keep_on_failure: bool = False) -> Iterator[Path]:
    """A scratch folder beside ``channel_dir`` (same file system, so publishing is a rename).

    It is removed, except after a failure (not an interrupt) when ``keep_on_failure`` asks to keep the
    engine's work folders in it for inspection (``--keep-build``); its path is then logged.
    """
    resolved = channel_dir.resolve()
    resolved.parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f".{resolved.name}-staging-", dir=resolved.parent))
    try:
        yield path
    except Exception:
        if keep_on_failure:
            LOGGER.warning("kept the failed build's work folders for inspection: %s", path)
            raise
        with deferred_interrupts():
            shutil.rmtree(path, ignore_errors=True)
        raise
    except BaseException:
        with deferred_interrupts():
            shutil.rmtree(path, ignore_errors=True)
        raise
    with deferred_interrupts():
        shutil.rmtree(path, ignore_errors=True)


def seed_staging(channel_dir: Path, staging: Path, *, leave_out: Collection[str] = ()) -> set[str]:
    """Link the packages ``channel_dir`` holds into ``staging`` (except those named in ``leave_out``); index it.

    The engine's ``skip_existing="local"`` then skips them and later steps solve against them: an LLVM
    package built by an earlier run (or an earlier CI job whose channel was downloaded here) is reused, not
    rebuilt. Returns the file names linked.
    """
    seeded: set[str] = set()
    for package in package_files(channel_dir):
        if package.name.removesuffix(".conda").removesuffix(".tar.bz2") in leave_out:
            continue
        target_dir = staging / package.parent.name
        target_dir.mkdir(parents=True, exist_ok=True)
        try:
            os.link(package, target_dir / package.name)
        except OSError:
            shutil.copy2(package, target_dir / package.name)
        seeded.add(package.name)
    if seeded:
        index_channel(staging, check=False)  # the channel folder's packages were checked as it was indexed
    return seeded


def held_package(channel_dir: Path, stem: str, subdirs: Collection[str]) -> Path | None:
    """The package file named ``stem`` (name-version-build) that ``channel_dir`` holds in ``subdirs``."""
    for subdir in subdirs:
        for suffix in PACKAGE_SUFFIXES:
            candidate = channel_dir / subdir / f"{stem}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def index_held(channel_dir: Path) -> None:
    """Index the output folder when it holds packages, checking each whole first.

    A CI job that restored or downloaded packages into it without their index gets one; a damaged package
    stops the run before anything builds.
    """
    if channel_dir.is_dir() and package_files(channel_dir):
        index_channel(channel_dir)


def publish_new(
    staging: Path, channel_dir: Path, *, known: set[str], subdirs: Collection[str], force: bool = False
) -> list[Path]:
    """Put every package of ``staging/<subdir>/`` that is new into ``channel_dir``, then index it.

    New: not named in ``known`` (the names seeded or published before), or rebuilt under such a name (no
    longer the channel's file, as conda-build does). Each file is checked whole first, then linked under a
    temporary name in its subdir and renamed to its own: a reader sees the whole package or none. The names
    published are added to ``known``. ``subdirs`` are the target's and ``noarch`` (the engine moves a
    package whose tests failed to ``broken/``). A Ctrl-C meanwhile is held until the channel is indexed.
    """
    new = [
        p
        for p in package_files(staging)
        if p.parent.name in subdirs
        and (p.name not in known or not _unchanged(p, channel_dir / p.parent.name / p.name))
    ]
    if not new:
        return []
    published: list[Path] = []
    with deferred_interrupts():
        for package in new:
            check_package(package)
            target = channel_dir / package.parent.name / package.name
            if target.exists():
                if force:
                    LOGGER.info("replacing %s with the package just rebuilt (--force)", target)
                else:
                    LOGGER.warning(
                        "replacing %s: this run built a different package under the same name", target
                    )
            _link_into_place(package, target)
            known.add(package.name)
            published.append(target)
        index_channel(channel_dir, check=False)  # each package was checked above, the rest at the start
    for target in published:
        LOGGER.info("published %s", target)
    return published


def _unchanged(staged: Path, published: Path) -> bool:
    """The staged file is still the channel's: the same file (a hard link) or the same bytes (a copy)."""
    if not published.is_file():
        return False
    return staged.samefile(published) or filecmp.cmp(staged, published, shallow=False)


def _link_into_place(package: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix=f".{package.name}.", suffix=".part", dir=target.parent)
    os.close(descriptor)
    scratch = Path(name)
    try:
        scratch.unlink()
        try:
            os.link(package, scratch)
        except OSError:
            shutil.copy2(package, scratch)
        scratch.chmod(0o644)  # the engine writes 0600 files; a channel is read by others
        scratch.replace(target)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


def package_cache(channel_dir: Path) -> Path:
    """The output folder's own package cache for the engine (``RATTLER_CACHE_DIR``), beside it.

    Never the shared ``~/.cache/rattler``: another build elsewhere may hold a different package under the
    same file name there, and another process may be using the entries :func:`evict` removes.
    """
    return _beside(channel_dir, "-cache")


def evict(cache: Path, stems: Collection[str]) -> None:
    """Drop the cache entries (extracted folder and lock file) of the packages named ``stems``."""
    for stem in stems:
        entry = cache / "pkgs" / stem
        if entry.exists():
            LOGGER.debug("dropping %s from the package cache", entry)
            shutil.rmtree(entry, ignore_errors=True)
        (cache / "pkgs" / f"{stem}.lock").unlink(missing_ok=True)
