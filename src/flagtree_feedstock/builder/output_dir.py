"""The output folder: a local channel that a build fills one finished package at a time.

:class:`OutputFolder` is the folder as one build sees it, and its methods are what a run asks of it, in order
(:func:`.run.run_plan`, :func:`.conda_build.build`): :meth:`~OutputFolder.opened` (locked, what it holds checked
and indexed), :meth:`~OutputFolder.lacking` (the planned steps it does not hold yet),
:meth:`~OutputFolder.caches` and :meth:`~OutputFolder.scratch_place` (the engine's package cache, the cache of
repacked copies, where a scratch folder goes), :meth:`~OutputFolder.staging` (the folder the engine writes
into) and :meth:`~OutputFolder.land` (what a step finished, landed and published). The module's functions are
its parts:

- It is checked before anything builds (:func:`check_output_dir`): a folder, or one that can be made, and
  writable, with its parent (the staging folder, the lock and the package cache live beside it).
- One build writes into it at a time (:func:`output_lock`): a second build waits, naming the first; a build
  refuses to start beside processes a killed build left running.
- A run builds in a staging folder beside it (:func:`staging_dir`, same file system; above it when its path
  has a blank: :func:`staging_parent`) that holds links to the packages the folder already has
  (:func:`seed_staging`), so the engine solves against them and skips them.
- Each package the engine finishes is landed (:mod:`.landing`), put beside its final name under a temporary
  one, checked whole there, renamed (it is there whole or not at all: a damaged one never has its name) and
  indexed at once (:func:`publish_new`): a later failure or a Ctrl-C keeps it.
- The staging folder's, the steps' copies' folder's (:func:`scratch_place`) and a temporary package's names
  carry their owner (the toolkit's pid and start time): what a SIGKILLed build left of them is removed by the
  next build into the folder (:func:`remove_debris`), and only when that owner is gone.
- The engine's package cache is the folder's own (:func:`package_cache`), and a package about to be rebuilt
  is dropped from it first (:func:`evict`): py-rattler-build 0.73 tests a package it just built from the
  cache entry of the same file name when there is one (tests/README.md), so a rebuilt package would be
  tested with an older build's tests.
"""

from __future__ import annotations

import filecmp
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._locks import FolderLock, folder_lock
from flagtree_feedstock._paths import OWNER, check_folder, owner, owner_gone, probe_writable
from flagtree_feedstock.channel.folder import package_files
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.channel.package_check import PACKAGE_SUFFIXES, package_stem
from flagtree_feedstock.channel.package_reader import DamagedPackage
from flagtree_feedstock.errors import BuildFailedError, ConfigurationError, FolderBusyError

if TYPE_CHECKING:
    from .landing.one_pass import Progress
    from .plan import BuildStep

LOGGER = logging.getLogger(__name__)
# In a staging folder kept for inspection (--keep-build): the next build does not remove it.
KEPT = ".kept-for-inspection"


def _beside(channel_dir: Path, suffix: str) -> Path:
    """A path next to ``channel_dir`` named after it: ``build_artifacts`` -> ``.build_artifacts<suffix>``."""
    resolved = channel_dir.resolve()
    return resolved.parent / f".{resolved.name}{suffix}"


class OutputFolder:
    """The output folder of one build: the channel folder ``path``, whose packages of ``subdirs`` (the target's
    and ``noarch``) it publishes; each method is a step of the run, called in the order they are defined."""

    def __init__(self, path: Path, subdirs: Collection[str]) -> None:
        self.path = path
        self.subdirs = tuple(subdirs)
        # The names the folder held or published, per staging folder open (what is new there is not in it).
        self._known: dict[Path, set[str]] = {}

    @contextmanager
    def opened(self) -> Iterator[FolderLock]:
        """The folder locked for the whole run (:func:`output_lock`: what killed builds left removed), then what
        it holds checked whole and indexed (:func:`index_held`)."""
        with output_lock(self.path) as lock:
            index_held(self.path)
            yield lock

    def lacking(self, plan: Sequence[BuildStep], *, force: bool = False) -> list[BuildStep]:
        """The steps of ``plan`` whose package the folder does not hold (same file name, so the same variant
        hash); with ``force``, every step but one planned only because another pins it (those it holds are
        rebuilt and replaced). A reused one is logged."""
        todo = []
        for step in plan:
            held = held_package(self.path, step.stem, self.subdirs)
            if held is not None and (not force or step.pinned_only):
                LOGGER.info("reusing %s (already in %s; --force rebuilds it)", held.name, self.path)
                continue
            todo.append(step)
        return todo

    def caches(self, rebuilt: Collection[str]) -> tuple[Path, Path]:
        """The folder's own package cache for the engine (:func:`package_cache`), the entries of the packages
        named ``rebuilt`` dropped from it (:func:`evict`), and its cache of repacked copies
        (:func:`repack_cache`)."""
        cache = package_cache(self.path)
        evict(cache, rebuilt)
        return cache, repack_cache(self.path)

    def scratch_place(self, kind: str) -> tuple[Path, str]:
        """Where a scratch folder of ``kind`` goes, and the start of its name (:func:`scratch_place`)."""
        return scratch_place(self.path, kind)

    @contextmanager
    def staging(self, *, keep_on_failure: bool = False, leave_out: Collection[str] = ()) -> Iterator[Path]:
        """The staging folder the engine writes into (:func:`staging_dir`), holding links to the packages the
        folder holds but those named in ``leave_out`` (:func:`seed_staging`)."""
        with staging_dir(self.path, keep_on_failure=keep_on_failure) as path:
            self._known[path] = (
                seed_staging(self.path, path, leave_out=leave_out) if self.path.is_dir() else set()
            )
            try:
                yield path
            finally:
                del self._known[path]

    def land(
        self,
        staging: Path,
        *,
        channels: Sequence[str],
        recipe_dir: Path,
        variant_files: Sequence[Path],
        progress: Callable[[Path], Progress | None] | None = None,
    ) -> list[Path]:
        """Every package new in ``staging`` landed there (:func:`.landing.new_packages.land_new_packages`: no
        build-machine paths, its SBOM in, the engine's clock out); returns them, in the folder's subdirs, to be
        tested before :meth:`publish`."""
        from .landing.new_packages import land_new_packages  # noqa: PLC0415 - the landing loads when a package lands, not with the options' check (command.py)

        known = self._known[staging]
        land_new_packages(
            staging,
            known,
            channel_dir=self.path,
            channels=channels,
            recipe_dir=recipe_dir,
            variant_files=variant_files,
            progress=progress,
        )
        return [p for p in package_files(staging) if p.name not in known and p.parent.name in self.subdirs]

    def publish(self, staging: Path, *, force: bool = False) -> list[Path]:
        """Every package new in ``staging`` (and not set aside as broken) published into the folder at once
        (:func:`publish_new`); returns the packages published."""
        return publish_new(staging, self.path, known=self._known[staging], subdirs=self.subdirs, force=force)


def check_output_dir(path: Path) -> None:
    """``path`` is a folder (or can be made as one) this process can write in, and so is its parent (the
    staging folder, the lock and the package cache go beside it), and the staging folder's own parent when it
    is another (:func:`staging_parent`). Nothing is created."""
    check_folder(path, option="--output-dir", beside=True)
    parent = staging_parent(path)
    # A staging parent that does not exist yet is made with the output folder's parents, checked above.
    if parent != path.resolve().parent and parent.is_dir():
        try:
            probe_writable(parent)
        except OSError as exc:
            raise ConfigurationError(
                f"--output-dir {path}: its path has a blank, which conda's compiler flags cannot hold, so the "
                f"build works in {parent}, where it cannot write: {exc.strerror or exc}",
                fix=f"choose an --output-dir whose path has no space or tab, or make {parent} writable for you",
            ) from None


def staging_parent(channel_dir: Path) -> Path:
    """The folder the staging folder is made in: the output folder's parent, or, when that path has a blank (a
    space, a tab), its nearest ancestor whose path has none.

    The engine builds under the staging folder (the work folder, the build and host prefixes), and
    conda-forge's compiler activation writes those prefixes into CFLAGS, CPPFLAGS, LDFLAGS and CMAKE_ARGS
    unquoted (``-isystem $PREFIX/include``): under ``.../My Projects/`` the compiler gets such a path in two
    pieces and CMake's first test compile fails (ctng-compiler-activation-feedstock issue 188). conda-build's
    answer is the same, a build root apart from the output (``--croot``). Other characters (Chinese, accents)
    do no harm there, and the packages still land in the output folder itself.
    """
    parent = channel_dir.resolve().parent
    while any(character.isspace() for character in str(parent)):  # "/" has none
        parent = parent.parent
    return parent


@contextmanager
def output_lock(channel_dir: Path) -> Iterator[FolderLock]:
    """Hold the output folder's lock (:mod:`flagtree_feedstock._locks`); wait, naming its holder, while
    another command does. Refuse, naming them, when processes of an earlier build into the folder still run:
    its command was killed, and so was the watchdog that would have ended them.

    The lock file itself stays (removing it would let a third build lock a new file while the second waits
    on the old one).
    """
    with folder_lock(channel_dir) as lock:
        left = lock.left_running()
        if left:
            raise FolderBusyError(
                f"{left[0].describe()} of an earlier build into {channel_dir} still runs"
                + (f", and {len(left) - 1} more of that build" if len(left) > 1 else "")
                + "; its command ended without ending them",
                fix=f"wait for them to end, or end them (kill {' '.join(str(p.pid) for p in left)}), then rerun",
            )
        remove_debris(channel_dir)
        yield lock


def scratch_place(channel_dir: Path, kind: str) -> tuple[Path, str]:
    """Where a scratch folder of this build into ``channel_dir`` is made (:func:`staging_parent`), and the start
    of its name: ``kind`` (``staging``; ``copies``, the steps' channels of repacked packages) and its owner, by which :func:`remove_debris` knows what a killed build left."""
    name = re.sub(r"\s", "_", channel_dir.resolve().name)  # no blank in the engine's paths (staging_parent)
    return staging_parent(channel_dir), f".{name}-{kind}-{owner()}-"


def remove_debris(channel_dir: Path) -> None:
    """Remove the staging folders, credentials' folders and temporary packages that builds into
    ``channel_dir`` left when they were killed (SIGKILL, which no cleanup survives: while a package was
    published, no watchdog runs).

    Only those whose owner, named in them, no longer runs: a staging folder of a build that runs still (one
    into another folder of the same name whose path has a blank, which shares the staging parent) is kept,
    and so is one that ``--keep-build`` kept for inspection.
    """
    name = re.sub(r"\s", "_", channel_dir.resolve().name)
    scratch = re.compile(rf"\.{re.escape(name)}-(staging|copies)-{OWNER}-[^/]*")
    debris = [
        p
        for p in staging_parent(channel_dir).glob(f".{name}-*-*")
        if owner_gone(scratch.fullmatch(p.name)) and not (p / KEPT).exists()
    ]
    part = re.compile(rf"\..+\.{OWNER}\.[^.]+\.part")
    if channel_dir.is_dir():
        debris += [
            p
            for subdir in channel_dir.iterdir()
            if subdir.is_dir() and not subdir.is_symlink()
            for p in subdir.glob(".*.part")
            if owner_gone(part.fullmatch(p.name))
        ]
    with deferred_interrupts():
        for path in debris:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            LOGGER.info("removed %s, left by a build into %s that was killed", path, channel_dir)


@contextmanager
def staging_dir(channel_dir: Path, *, keep_on_failure: bool = False) -> Iterator[Path]:
    """A scratch folder beside ``channel_dir`` (same file system, so publishing is a rename), or above it when
    its path has a blank (:func:`staging_parent`); its name has none either.

    It is removed, except after a failure (not an interrupt) when ``keep_on_failure`` asks to keep the
    engine's work folders in it for inspection (``--keep-build``); its path is then logged.
    """
    resolved = channel_dir.resolve()
    resolved.parent.mkdir(parents=True, exist_ok=True)
    parent, prefix = scratch_place(channel_dir, "staging")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if parent != resolved.parent:
        LOGGER.info("building in %s: the path of %s has a blank, which conda's compiler flags cannot hold", path,
                    channel_dir)  # fmt: skip
    try:
        yield path
    except Exception:
        if keep_on_failure:
            (path / KEPT).touch()  # not debris: the next build leaves it (remove_debris)
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
    longer the channel's file, as conda-build does). Each file is linked (or copied) under a temporary name
    in its subdir, checked whole there (:func:`_link_into_place`) and only then renamed to its own: a reader
    sees the whole package or none, and a damaged one never appears under its name. The names
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
        # Each package was checked as it went in (the others as the run started).
        index_channel(channel_dir, check=False)
    for target in published:
        LOGGER.info("published %s", target)
    return published


def _unchanged(staged: Path, published: Path) -> bool:
    """The staged file is still the channel's: the same file (a hard link) or the same bytes (a copy)."""
    if not published.is_file():
        return False
    return staged.samefile(published) or filecmp.cmp(staged, published, shallow=False)


def _link_into_place(package: Path, target: Path) -> None:
    """Put ``package`` in place as ``target``: under a temporary name beside it first, checked whole there (the
    very file that is renamed, be it a link or a copy), then renamed; removed on any failure."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(
        prefix=f".{package.name}.{owner()}.", suffix=".part", dir=target.parent
    )
    os.close(descriptor)
    scratch = Path(name)
    try:
        scratch.unlink()
        try:
            os.link(package, scratch)
        except OSError:
            shutil.copy2(package, scratch)
        scratch.chmod(0o644)  # the engine writes 0600 files; a channel is read by others
        try:
            package_stem(scratch, target.name)
        except DamagedPackage as exc:
            raise BuildFailedError(
                f"{package.name}, just built, is damaged ({exc}): it was not put into {target.parent}",
                fix=f"build again (what the channel folder holds is kept); if it happens again, check the disk "
                f"that holds {target.parent}",
            ) from None
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


def repack_cache(channel_dir: Path) -> Path:
    """The output folder's cache of the toolkit's copies of the packages its builds install
    (:mod:`..channel.repack`), beside it: made by the first copy, yours alone, each entry proven before use;
    another user's folder by this name is refused there, in one line."""
    return _beside(channel_dir, "-repacked")


def evict(cache: Path, stems: Collection[str]) -> None:
    """Drop the cache entries (extracted folder and lock file) of the packages named ``stems``."""
    for stem in stems:
        entry = cache / "pkgs" / stem
        if entry.exists():
            LOGGER.debug("dropping %s from the package cache", entry)
            shutil.rmtree(entry, ignore_errors=True)
        (cache / "pkgs" / f"{stem}.lock").unlink(missing_ok=True)
