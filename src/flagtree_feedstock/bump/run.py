"""``flagtree-feedstock bump``: move the feedstock's pins to a new FlagTree commit, checked before anyone builds.

From a local clone of FlagTree (``--flagtree-src``, at ``--to``; default HEAD) and optionally of flagtree-cpu
(``--flagtree-cpu-src``), offline, it computes the pins of ``recipe/conda_build_config.yaml``:

- ``flagtree_commit``; ``flagtree_version`` from the nearest release tag (:func:`derive_version`);
- ``llvm_commit`` from the new commit's ``cmake/llvm-hash.txt``, and ``llvm_sha256`` from ``--llvm-sha256`` or
  ``--llvm-archive`` when it moves (the archive is not fetched: the bump refuses without one of them);
- ``flagtree_cpu_commit`` (HEAD of ``--flagtree-cpu-src``) and ``sleef_commit`` (its ``third_party/sleef``
  gitlink), when flagtree-cpu is given;
- the recipes' ``source_date_epoch`` (recipe.yaml's context, meta.yaml's ``{% set %}``): the new FlagTree commit's committer date;

runs :mod:`.checks`, and writes the changed pins and the refreshed patches, all or nothing
(:func:`~flagtree_feedstock.recipe.pins.write_atomically`), unless a check failed or the run is a dry run.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from flagtree_feedstock._archive import LIMITS
from flagtree_feedstock._archive.compressed import decompressed
from flagtree_feedstock._archive.tar_stream import ArchiveRefused, TarStream
from flagtree_feedstock._digest import stream_digest
from flagtree_feedstock._engine import require
from flagtree_feedstock._own_files import LLVM_SOURCE, open_own
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe.pins import (
    FilesNotWritten,
    change_epoch,
    change_pins,
    read_epoch,
    read_pins,
    read_recipe,
    write_atomically,
)
from flagtree_feedstock.recipe.variants import near_miss

from ._git import GitTree
from .checks import Check, Upstream, run_checks, short
from .patching import PatchOutcome

VARIANT_FILE = "conda_build_config.yaml"
# The recipes whose `source_date_epoch` is flagtree_commit's committer date (docs/building.md).
RECIPES = ("recipe.yaml", "meta.yaml")
EPOCH = "source_date_epoch"
LLVM_HASH = "cmake/llvm-hash.txt"
SLEEF = "third_party/sleef"
# FlagTree's release tags: `<version>+<backend><triton>` (`0.6.0+triton3.3`, `0.5.0+aipu3.3`); every backend's
# release of a FlagTree version carries the same <version>. The older `v0.4.0_triton_v3.3.x` kind is not one.
RELEASE_TAGS = "[0-9]*+*"
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A final or pre-release version, the only kind a `.postN` may follow in both conda and PEP 440.
_RELEASE = re.compile(r"^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?$")


@dataclass(frozen=True, kw_only=True)
class BumpRequest:
    """What to bump to, and how."""

    recipe_dir: Path
    flagtree_src: Path
    to: str = "HEAD"
    flagtree_cpu_src: Path | None = None
    llvm_sha256: str | None = None
    llvm_archive: Path | None = None
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class PinChange:
    """One pin: its value now, its value after the bump, and where the new value comes from."""

    key: str
    old: str
    new: str
    source: str


@dataclass(frozen=True, kw_only=True)
class BumpReport:
    """What the bump found, checked and (unless dry, or a check failed) wrote."""

    flagtree: str
    subject: str
    moved: bool
    pins: tuple[PinChange, ...]
    checks: tuple[Check, ...] = ()
    patches: tuple[PatchOutcome, ...] = ()
    written: tuple[Path, ...] = ()
    # A write that failed: the files that keep their old text, and why (all of them, unless putting one back
    # failed too).
    not_written: tuple[Path, ...] = ()
    write_failure: FilesNotWritten | None = None
    dry_run: bool = False

    @property
    def changed(self) -> list[PinChange]:
        return [pin for pin in self.pins if pin.old != pin.new]

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    @property
    def refreshed(self) -> list[PatchOutcome]:
        return [outcome for outcome in self.patches if outcome.refreshed is not None]


def derive_version(tag: str, distance: int) -> str:
    """The conda version of a commit ``distance`` commits past the release tag ``tag``.

    The tag's version (the part before ``+``) as it is for the tagged commit, and ``<version>.post<distance>``
    past it: ``0.6.0+triton3.3`` plus one commit is ``0.6.0.post1``. conda and PEP 440 (setup.py's wheel
    version) both sort ``X.postN`` after ``X`` and after ``X.post(N-1)``, and before the next release or its
    release candidates (``0.6.1``, ``0.7.0rc1``), and the number says how far past the tag the commit is.
    """
    version = tag.split("+", 1)[0]
    if distance == 0:
        return version
    if not _RELEASE.fullmatch(version):
        raise ValueError(f"tag {tag}: its version {version} cannot take a .post{distance} distance")
    return f"{version}.post{distance}"


def _version_check(tree: GitTree, current: str) -> tuple[str, Check]:
    found = tree.describe(RELEASE_TAGS)
    if found is None:
        return current, Check(
            name="version",
            status="fail",
            summary=f"no release tag (like 0.6.0+triton3.3) is an ancestor of {short(tree.commit)}",
            details=("fetch the tags (git fetch --tags); a shallow clone has none",),
        )
    tag, distance = found
    try:
        version = derive_version(tag, distance)
    except ValueError as exc:
        return current, Check(name="version", status="fail", summary=str(exc))
    rattler = require("rattler", "py-rattler")
    past = f"tag {tag} + {distance} commit{'s' if distance != 1 else ''}" if distance else f"tag {tag}"
    if not rattler.Version(version) > rattler.Version(current):
        return current, Check(
            name="version", status="fail", summary=f"{version} ({past}) does not sort after {current}"
        )
    return version, Check(name="version", status="ok", summary=f"{version} ({past}) sorts after {current}")


def _check_llvm_options(request: BumpRequest) -> None:
    if request.llvm_sha256 is not None and request.llvm_archive is not None:
        raise ConfigurationError(
            "--llvm-sha256 and --llvm-archive both give the LLVM archive's sha256", fix="pass one of them"
        )
    if request.llvm_sha256 is not None and not _HEX64.fullmatch(request.llvm_sha256):
        reason = near_miss(request.llvm_sha256, 64)
        raise ConfigurationError(
            f"--llvm-sha256 {request.llvm_sha256} is not a sha256 (64 lowercase hex digits)"
            + (f": {reason}" if reason else ""),
            fix="pass the sha256 of https://github.com/llvm/llvm-project/archive/<llvm_commit>.tar.gz",
        )
    if request.llvm_archive is not None and not request.llvm_archive.is_file():
        raise ConfigurationError(
            f"--llvm-archive {request.llvm_archive} is not a file",
            fix="download https://github.com/llvm/llvm-project/archive/<llvm_commit>.tar.gz and pass its path",
        )


def archive_sha256(archive: Path, commit: str) -> str:
    """The sha256 of GitHub's archive of LLVM at ``commit``, after checking that it holds that commit."""
    expected = f"llvm-project-{commit}"
    # Opened once, by the one reader (a regular file, of at most 2 GiB): its first member, read through the archive
    # layer's bounded reader, and its sha256 come from that one open file.
    with open_own(archive, LLVM_SOURCE) as handle:
        try:
            with decompressed(archive, what="its compressed data", opened=handle) as raw:
                first = next(iter(TarStream(raw, LIMITS.for_file(os.fstat(handle.fileno()).st_size))), None)
        except ArchiveRefused as exc:  # a damaged or foreign file among them
            raise ConfigurationError(
                f"--llvm-archive {archive} is not a tar archive: {exc}",
                fix=f"download https://github.com/llvm/llvm-project/archive/{commit}.tar.gz",
            ) from None
        top = first.name.split("/", 1)[0] if first else ""
        if top != expected:
            raise ConfigurationError(
                f"--llvm-archive {archive} holds {top or 'nothing'}, not {expected}",
                fix=f"download https://github.com/llvm/llvm-project/archive/{commit}.tar.gz",
            )
        handle.seek(0)
        return stream_digest(handle).hex()


def _llvm(request: BumpRequest, tree: GitTree, pins: dict[str, str]) -> tuple[PinChange, PinChange, Check]:
    text = tree.read_text(LLVM_HASH)
    commit = (text or "").strip()
    keep = (
        PinChange(key="llvm_commit", old=pins["llvm_commit"], new=pins["llvm_commit"], source=LLVM_HASH),
        PinChange(key="llvm_sha256", old=pins["llvm_sha256"], new=pins["llvm_sha256"], source="unchanged"),
    )
    if not _HEX40.fullmatch(commit):
        summary = (
            f"{LLVM_HASH} is missing" if text is None else f"{LLVM_HASH} holds no full commit: {commit!r}"
        )
        return *keep, Check(name="llvm-commit", status="fail", summary=summary)
    if commit == pins["llvm_commit"]:
        if request.llvm_sha256 or request.llvm_archive:
            raise ConfigurationError(
                f"llvm_commit does not move ({short(commit)} at {short(tree.commit)}), so its sha256 stays",
                fix="drop --llvm-sha256/--llvm-archive",
            )
        return *keep, Check(
            name="llvm-commit", status="ok", summary=f"{LLVM_HASH}: {short(commit)}, unchanged"
        )
    if request.llvm_archive is not None:
        sha256, source = (
            archive_sha256(request.llvm_archive, commit),
            f"--llvm-archive {request.llvm_archive.name}",
        )
    elif request.llvm_sha256 is not None:
        sha256, source = request.llvm_sha256, "--llvm-sha256"
    else:
        raise ConfigurationError(
            f"FlagTree {short(tree.commit)} moves llvm_commit {short(pins['llvm_commit'])} -> {short(commit)}, "
            "and the new LLVM archive's sha256 is not given",
            fix=f"pass --llvm-archive FILE (https://github.com/llvm/llvm-project/archive/{commit}.tar.gz) or "
            "--llvm-sha256 HEX",
        )
    return (
        PinChange(key="llvm_commit", old=pins["llvm_commit"], new=commit, source=LLVM_HASH),
        PinChange(key="llvm_sha256", old=pins["llvm_sha256"], new=sha256, source=source),
        Check(
            name="llvm-commit",
            status="ok",
            summary=f"{LLVM_HASH}: {short(pins['llvm_commit'])} -> {short(commit)}, sha256 from {source}",
        ),
    )


def _flagtree_cpu(cpu: GitTree | None, pins: dict[str, str]) -> tuple[PinChange, PinChange]:
    if cpu is None:
        return (
            PinChange(key="flagtree_cpu_commit", old=pins["flagtree_cpu_commit"], new=pins["flagtree_cpu_commit"],
                      source="unchanged (no --flagtree-cpu-src)"),
            PinChange(key="sleef_commit", old=pins["sleef_commit"], new=pins["sleef_commit"],
                      source="unchanged (no --flagtree-cpu-src)"),
        )  # fmt: skip
    sleef = cpu.gitlink(SLEEF)
    if sleef is None:
        raise ConfigurationError(
            f"flagtree-cpu {short(cpu.commit)} has no {SLEEF} submodule",
            fix="point --flagtree-cpu-src at a flagtree-cpu clone whose HEAD has sleef as a submodule",
        )
    return (
        PinChange(key="flagtree_cpu_commit", old=pins["flagtree_cpu_commit"], new=cpu.commit,
                  source="--flagtree-cpu-src HEAD"),
        PinChange(key="sleef_commit", old=pins["sleef_commit"], new=sleef, source=f"flagtree-cpu {SLEEF} gitlink"),
    )  # fmt: skip


def bump(request: BumpRequest) -> BumpReport:
    """Compute the new pins, check them against the feedstock, and write them unless dry or failed."""
    _check_llvm_options(request)
    variant_file = request.recipe_dir / VARIANT_FILE
    pins, variant_text = read_pins(variant_file)
    flagtree = GitTree.open(request.flagtree_src, request.to, option="--flagtree-src")
    cpu = (
        GitTree.open(request.flagtree_cpu_src, "HEAD", option="--flagtree-cpu-src")
        if request.flagtree_cpu_src
        else None
    )
    moved = flagtree.commit != pins["flagtree_commit"] or (
        cpu is not None and cpu.commit != pins["flagtree_cpu_commit"]
    )
    if not moved:
        unchanged = tuple(PinChange(key=k, old=v, new=v, source="unchanged") for k, v in pins.items())
        return BumpReport(
            flagtree=flagtree.commit,
            subject=flagtree.subject(),
            moved=False,
            pins=unchanged,
            dry_run=request.dry_run,
        )
    llvm_commit, llvm_sha256, llvm_check = _llvm(request, flagtree, pins)
    if flagtree.commit == pins["flagtree_commit"]:  # only flagtree-cpu moves
        version = pins["flagtree_version"]
        version_check = Check(
            name="version", status="ok", summary=f"{version}, unchanged: FlagTree did not move"
        )
    else:
        version, version_check = _version_check(flagtree, pins["flagtree_version"])
    cpu_commit, sleef = _flagtree_cpu(cpu, pins)
    source = f"--flagtree-src {request.to}"
    recipes = [request.recipe_dir / name for name in RECIPES]
    epoch = PinChange(
        key=EPOCH,
        old=read_epoch(read_recipe(recipes[0]), name=str(recipes[0])),
        new=str(flagtree.committer_time()),
        source="committer date of flagtree_commit",
    )
    changes = (
        PinChange(
            key="flagtree_version", old=pins["flagtree_version"], new=version, source="nearest release tag"
        ),
        PinChange(key="flagtree_commit", old=pins["flagtree_commit"], new=flagtree.commit, source=source),
        llvm_commit,
        llvm_sha256,
        cpu_commit,
        sleef,
        epoch,
    )
    with tempfile.TemporaryDirectory(prefix="flagtree-bump-") as scratch:
        upstream = Upstream(
            flagtree=flagtree,
            pinned=flagtree.at(pins["flagtree_commit"]),
            flagtree_cpu=cpu,
            flagtree_cpu_commit=cpu_commit.new,
            recipe_dir=request.recipe_dir,
            scratch=Path(scratch),
        )
        checks, outcomes = run_checks(upstream)
    report = BumpReport(
        flagtree=flagtree.commit,
        subject=flagtree.subject(),
        moved=True,
        pins=changes,
        checks=(version_check, llvm_check, *checks),
        patches=tuple(outcomes),
        dry_run=request.dry_run,
    )
    if report.failed or request.dry_run:
        return report
    files = {
        variant_file: change_pins(
            variant_text,
            {pin.key: pin.new for pin in report.changed if pin.key != EPOCH},
            name=str(variant_file),
        ),
        **{o.patch: o.refreshed for o in report.refreshed if o.refreshed is not None},
    }
    if epoch.old != epoch.new:
        files.update(
            {path: change_epoch(read_recipe(path), int(epoch.new), name=str(path)) for path in recipes}
        )
    try:
        write_atomically(files)
    except FilesNotWritten as failure:
        kept = tuple(path for path in files if path not in failure.written)
        return replace(report, written=failure.written, not_written=kept, write_failure=failure)
    return replace(report, written=tuple(files))
