"""``build --llvm-archive``: the option checked, the variant file it becomes, and what the render decides."""

from __future__ import annotations

import hashlib
import logging
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flagtree_feedstock._digest import stream_digest
from flagtree_feedstock._engine import require
from flagtree_feedstock._http import shown_url
from flagtree_feedstock._own_files import LLVM_ARCHIVE, open_own
from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.recipe.render import RenderedOutput
from flagtree_feedstock.recipe.variants import near_miss, recipe_keys

from .cache import cache_dir, spool
from .fetch import DEFAULT_MAX_SIZE, DEFAULT_TIMEOUT, download, pack_folder, parse_size, parse_timeout
from .inspection import TOP_EXAMPLE, Inspection, inspect_cached

LOGGER = logging.getLogger(__name__)


# The variant keys both recipes read (recipe/recipe.yaml's context, meta.yaml's top).
VARIANT_KEYS = ("llvm_archive_url", "llvm_archive_sha256")


# conda-forge's sysroot_linux-aarch64 versions: anaconda.org/conda-forge/sysroot_linux-aarch64 lists 2.17,
# 2.28, 2.34 and 2.39; conda-forge/linux-sysroot-feedstock builds them on its branches v2.17, v2.28, v2.34 and main
# (2.39, Rocky 10.1). From 2.28 on each carries the strong run export `__glibc >=<version>,<3.0.a0` on every
# platform (recipe/meta.yaml of those branches), so a package built against it needs that glibc to install.
SYSROOT_VERSIONS = ("2.17", "2.28", "2.34", "2.39")


_SHA256 = re.compile(r"[0-9a-f]{64}")


_URL_SCHEMES = ("http://", "https://")


@dataclass(frozen=True, kw_only=True)
class LlvmArchive:
    """The archive a build uses: what was given, what the recipe fetches, and what it holds."""

    origin: str
    url: str
    sha256: str
    # None for a URL that --render-only did not download.
    inspection: Inspection | None

    @property
    def shown(self) -> str:
        """The origin as messages show it: a URL without its query, which may hold a signature."""
        return shown_url(self.origin)

    def as_json(self) -> dict[str, object]:
        """``--render-only --json``'s record; its URLs as every output shows them (no password, token, query)."""
        return {
            "origin": self.shown,
            "url": shown_url(self.url),
            "sha256": self.sha256,
            "top_folder": self.inspection.top if self.inspection else None,
            "glibc": self.inspection.glibc if self.inspection else None,
        }


def from_options(
    value: str | None,
    sha256: str | None,
    *,
    env: Mapping[str, str],
    fetch: bool,
    recipe_dir: Path | None = None,
    max_size: str | None = None,
    timeout: str | None = None,
) -> LlvmArchive | None:
    """The archive ``--llvm-archive VALUE [--llvm-archive-sha256 SHA256]`` names, checked; None without one.

    ``fetch``: download a URL (a build); ``--render-only`` shows it unchecked. ``recipe_dir``: the recipes
    that must read the archive's variant keys (checked first, before anything is read or fetched).
    ``max_size``: ``--llvm-archive-max-size``, the most a download may take; ``timeout``:
    ``--llvm-archive-timeout``, the longest it may take, whole.
    """
    if not value:
        for option, given in (
            ("--llvm-archive-sha256", sha256),
            ("--llvm-archive-max-size", max_size),
            ("--llvm-archive-timeout", timeout),
        ):
            if given:
                raise ConfigurationError(
                    f"{option} works only with --llvm-archive",
                    fix=f"add --llvm-archive PATH|URL, or drop {option}",
                )
        return None
    if recipe_dir is not None and not set(VARIANT_KEYS) <= recipe_keys(recipe_dir).used:
        raise ConfigurationError(
            f"the recipes in {recipe_dir} do not read {' and '.join(VARIANT_KEYS)}, so --llvm-archive would "
            "change nothing",
            fix="build the feedstock's recipe/ (--recipe-dir), or drop --llvm-archive",
        )
    expected = _parse_sha256(sha256) if sha256 else None
    limit = parse_size(max_size) if max_size else DEFAULT_MAX_SIZE
    seconds = parse_timeout(timeout) if timeout else DEFAULT_TIMEOUT
    cache = cache_dir(env)
    if value.lower().startswith(_URL_SCHEMES):
        if expected is None:
            raise ConfigurationError(
                f"--llvm-archive {shown_url(value)} is a URL without a sha256",
                fix="add --llvm-archive-sha256 with the sha256 of that file (sha256sum on a copy you trust)",
            )
        if not fetch:
            # Nothing is fetched: the render (and the variant file it reads) gets the URL as shown, so its
            # password or signature is written nowhere.
            return LlvmArchive(origin=value, url=shown_url(value), sha256=expected, inspection=None)
        path = download(value, expected, cache, max_size=limit, timeout=seconds)
    else:
        path = Path(urllib.parse.unquote(value.removeprefix("file://"))).expanduser()
        if not path.exists():
            raise ConfigurationError(
                f"--llvm-archive {shown_url(value)}: no such file or folder",
                fix=f"pass Triton's archive {TOP_EXAMPLE}.tar.gz or the folder it unpacked to "
                "(~/.triton/llvm/...)",
            )
        if path.is_dir():
            path = pack_folder(path, cache)
    # Opened once (the user's file by the one reader: a regular file, no FIFO or device, at most the size bound),
    # hashed and inspected from that open file.
    with open_own(path, replace(LLVM_ARCHIVE, limit=limit)) as handle:
        digest = stream_digest(handle).hex()
        if expected is not None and digest != expected:
            raise ConfigurationError(
                f"--llvm-archive {shown_url(value)} has sha256 {digest}, not {expected} (--llvm-archive-sha256)",
                fix="download the archive again, or correct --llvm-archive-sha256",
            )
        inspection = inspect_cached(path, digest, cache, label=shown_url(value), handle=handle)
    archive = LlvmArchive(origin=value, url=path.resolve().as_uri(), sha256=digest, inspection=inspection)
    LOGGER.info("flagtree-llvm: from Triton's LLVM archive %s (sha256 %s)", shown_url(value), digest)
    return archive


def _parse_sha256(value: str) -> str:
    digest = value.strip().lower()
    if not _SHA256.fullmatch(digest):
        reason = near_miss(digest, 64)
        raise ConfigurationError(
            f"--llvm-archive-sha256 {value!r} is not a sha256" + (f": {reason}" if reason else ""),
            fix="give the 64 hex digits sha256sum prints",
        )
    return digest


def variant_file(archive: LlvmArchive, env: Mapping[str, str]) -> Path:
    """A variant file that points the recipe at ``archive``, read after the others (its keys win)."""
    key = hashlib.sha256(f"{archive.url}\n{archive.sha256}".encode()).hexdigest()[:16]
    name = f"variants-{key}.yaml"
    text = (
        f"# flagtree-feedstock build --llvm-archive {archive.shown}:\n"
        "# flagtree-llvm from Triton's LLVM archive.\n"
        f'llvm_archive_url:\n  - "{archive.url}"\nllvm_archive_sha256:\n  - "{archive.sha256}"\n'
    )
    cache = cache_dir(env)
    with spool(cache, lambda _: name) as out:
        out.writer.write(text.encode())
    return cache / name


def glibc_floor(outputs: Sequence[RenderedOutput]) -> str | None:
    """The ``c_stdlib_version`` the rendered packages are built against (None: no output uses it)."""
    return next((o.variant["c_stdlib_version"] for o in outputs if "c_stdlib_version" in o.variant), None)


def render_lines(outputs: Sequence[RenderedOutput], archive: LlvmArchive | None) -> list[str]:
    """``--render-only``'s lines: where flagtree-llvm comes from, the glibc the packages are built against."""
    lines = []
    llvm = [o for o in outputs if o.name == "flagtree-llvm"]
    if archive is None and any("llvm_archive_sha256" in o.variant for o in llvm):
        lines.append(
            "flagtree-llvm: from the LLVM archive a variant file names (llvm_archive_url), unchecked: "
            "pass it with --llvm-archive to have it checked"
        )
    elif archive is None:
        if llvm:
            lines.append("flagtree-llvm: built from source (llvm-project at llvm_commit)")
    elif archive.inspection is None:
        lines += ["flagtree-llvm: from Triton's LLVM archive, checked when the build downloads it:"]
        lines += [f"  {archive.shown}"]
    else:
        needs = archive.inspection.glibc or "no GLIBC version"
        lines += [f"flagtree-llvm: from Triton's LLVM archive (its programs need {needs}):"]
        lines += [f"  {archive.shown}", f"  (top folder {archive.inspection.top}/)"]
    floor = glibc_floor(outputs)
    if floor is not None:
        lines.append(f"glibc: built against c_stdlib_version {floor}, so they need glibc >= {floor} to run")
    return lines


def check_rendered(
    archive: LlvmArchive, outputs: Sequence[RenderedOutput], *, variant_file: Path | None = None
) -> None:
    """What the render decides: the archive is the recipe's LLVM commit, and within its glibc floor.

    ``variant_file`` is where the fix tells the user to raise ``c_stdlib_version``.
    """
    if archive.inspection is None:
        return
    commits = {o.variant["llvm_commit"] for o in outputs if "llvm_commit" in o.variant}
    if commits and archive.inspection.commit not in {c[:8] for c in commits}:
        pinned = min(commits)[:8]
        raise ConfigurationError(
            f"--llvm-archive {archive.shown} is LLVM {archive.inspection.commit} "
            f"({archive.inspection.top}), "
            f"the recipe's llvm_commit is {pinned}",
            fix=f"use Triton's llvm-{pinned}-ubuntu-arm64.tar.gz (FlagTree's cmake/llvm-hash.txt), or drop "
            "--llvm-archive to build LLVM from source",
        )
    floor = glibc_floor(outputs)
    needed = archive.inspection.glibc
    if floor is None or needed is None:
        return
    version = needed.removeprefix("GLIBC_")
    # Compared as conda versions (2.9 < 2.17), as the sysroot's `__glibc >=` run export compares them.
    conda_version = require("rattler", "py-rattler").Version
    if conda_version(version) <= conda_version(floor):
        return
    sysroot = next((v for v in SYSROOT_VERSIONS if conda_version(v) >= conda_version(version)), None)
    fix = (
        f'set c_stdlib_version to "{sysroot}" in {variant_file or "a variant file"} (conda-forge\'s '
        f"sysroot_linux-aarch64 {sysroot}; "
        f"the packages then need glibc >= {sysroot} to install), or drop --llvm-archive to build LLVM from "
        "source"
        if sysroot
        else f"conda-forge has no sysroot for glibc {version} (newest {SYSROOT_VERSIONS[-1]}): drop "
        "--llvm-archive to build LLVM from source"
    )
    raise ConfigurationError(
        f"--llvm-archive {archive.shown} needs glibc {version} ({archive.inspection.glibc_program} needs "
        f"{needed}), above c_stdlib_version {floor}: libtriton.so would not link against that sysroot",
        fix=fix,
    )
