"""``build --llvm-archive``: flagtree-llvm installed from Triton's prebuilt LLVM archive instead of built.

Upstream's install guide (docs.flagos.io, "Install on Arm64 CPU", §1.3 LLVM toolchain) takes LLVM prebuilt.
FlagTree's python/setup.py (``get_llvm_package_info``) names it ``llvm-<first 8 characters of
cmake/llvm-hash.txt>-ubuntu-arm64`` on aarch64 Linux (``-almalinux-arm64`` on AlmaLinux), fetches
``https://oaitriton.blob.core.windows.net/public/llvm-builds/<name>.tar.gz`` and unpacks it into
``$TRITON_HOME/.triton/llvm/`` (``get_thirdparty_packages``): the archive holds one top folder ``<name>/``
with ``bin/``, ``include/``, ``lib/``; setup.py adds ``<name>/version.txt`` (the URL) and a symlink
``llvm-ubuntu-arm64`` to the folder. The guide's restricted-network route downloads the same file by hand into
``~/.triton/llvm`` and unpacks it there, so a user holds the archive, the folder, or both.

What ``--llvm-archive`` takes, and what the recipe is given (the variant keys ``llvm_archive_url`` and
``llvm_archive_sha256``, in a variant file of its own read after the others):

- a local archive: ``file://`` and its absolute path, and its sha256, computed (and compared with
  ``--llvm-archive-sha256`` when that is given);
- an unpacked folder: packed reproducibly into the cache (names sorted, owners, times and ``version.txt``
  left out), then as a local archive. Its sha256 is of that packing: it identifies the tree, but cannot be
  compared with a sha256 Triton's archive was published with;
- a URL (``http``/``https``): needs ``--llvm-archive-sha256``. A build downloads it into the cache and checks
  it before anything is built, then gives the engine the cached copy; ``--render-only`` does not download it.

Before anything renders or builds, each problem is one line: a missing file, a file that is not a tar archive,
an archive whose top is not one folder named like Triton's, one without ``bin/mlir-tblgen`` (or with one that
is no aarch64 program), a sha256 that differs, a URL without a sha256. After the render: an archive of
another LLVM commit than the recipe's ``llvm_commit``, and the glibc floor (:func:`check_rendered`).

The glibc floor: Triton builds the archive on an Ubuntu runner against its glibc, and its static libraries
carry no symbol versions, but its programs do: the highest ``GLIBC_x.y`` any ``bin/*`` needs (read with the
doctor's ELF reader) is the glibc the archive was built against. Above ``c_stdlib_version`` (the sysroot
flagtree-cpu links against) the link of libtriton.so would fail, 20 minutes into the build: refused up front,
naming the sysroot version conda-forge has that is high enough.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import lzma
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from flagtree_doctor import elf

from .errors import ConfigurationError, SourceFetchError
from .render import RenderedOutput
from .variants import recipe_keys

LOGGER = logging.getLogger(__name__)

# The top folder FlagTree's setup.py names for aarch64 Linux (get_llvm_package_info's system_suffix).
TOP_FOLDER = re.compile(r"llvm-(?P<commit>[0-9a-f]{8})-(?:ubuntu|almalinux)-arm64")
TOP_EXAMPLE = "llvm-<commit8>-ubuntu-arm64"
REQUIRED_TOOL = "bin/mlir-tblgen"
# The variant keys both recipes read (recipe/recipe.yaml's context, meta.yaml's top).
VARIANT_KEYS = ("llvm_archive_url", "llvm_archive_sha256")
# What setup.py writes into an unpacked archive (the URL it came from): not part of Triton's archive.
SETUP_PY_MARKER = "version.txt"
# conda-forge's sysroot_linux-aarch64 versions: anaconda.org/conda-forge/sysroot_linux-aarch64 lists 2.17,
# 2.28, 2.34 and 2.39; conda-forge/linux-sysroot-feedstock builds them on its branches v2.17, v2.28, v2.34 and main
# (2.39, Rocky 10.1). From 2.28 on each carries the strong run export `__glibc >=<version>,<3.0.a0` on every
# platform (recipe/meta.yaml of those branches), so a package built against it needs that glibc to install.
SYSROOT_VERSIONS = ("2.17", "2.28", "2.34", "2.39")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_URL_SCHEMES = ("http://", "https://")
_CHUNK = 1 << 20
# What a damaged or foreign file raises while tarfile reads it.
_NOT_TAR = (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError)


@dataclass(frozen=True, kw_only=True)
class Inspection:
    """What an archive holds, read once per sha256 (the cache keeps it beside the archive)."""

    top: str
    # The highest GLIBC_x.y version any bin/* program needs, and which one; None when none needs any.
    glibc: str | None
    glibc_program: str | None

    @property
    def commit(self) -> str:
        found = TOP_FOLDER.fullmatch(self.top)
        assert found is not None
        return found["commit"]


@dataclass(frozen=True, kw_only=True)
class LlvmArchive:
    """The archive a build uses: what was given, what the recipe fetches, and what it holds."""

    origin: str
    url: str
    sha256: str
    # None for a URL that --render-only did not download.
    inspection: Inspection | None

    def as_json(self) -> dict[str, object]:
        return {
            "origin": self.origin,
            "url": self.url,
            "sha256": self.sha256,
            "top_folder": self.inspection.top if self.inspection else None,
            "glibc": self.inspection.glibc if self.inspection else None,
        }


def cache_dir(env: Mapping[str, str]) -> Path:
    """Where archives, packed folders and their inspections are kept: ~/.cache/flagtree-feedstock/..."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "flagtree-feedstock" / "llvm-archives"


def from_options(
    value: str | None,
    sha256: str | None,
    *,
    env: Mapping[str, str],
    fetch: bool,
    recipe_dir: Path | None = None,
) -> LlvmArchive | None:
    """The archive ``--llvm-archive VALUE [--llvm-archive-sha256 SHA256]`` names, checked; None without one.

    ``fetch``: download a URL (a build); ``--render-only`` shows it unchecked. ``recipe_dir``: the recipes
    that must read the archive's variant keys (checked first, before anything is read or fetched).
    """
    if not value:
        if sha256:
            raise ConfigurationError(
                "--llvm-archive-sha256 works only with --llvm-archive",
                fix="add --llvm-archive PATH|URL, or drop --llvm-archive-sha256",
            )
        return None
    if recipe_dir is not None and not set(VARIANT_KEYS) <= recipe_keys(recipe_dir).used:
        raise ConfigurationError(
            f"the recipes in {recipe_dir} do not read {' and '.join(VARIANT_KEYS)}, so --llvm-archive would "
            "change nothing",
            fix="build the feedstock's recipe/ (--recipe-dir), or drop --llvm-archive",
        )
    expected = _parse_sha256(sha256) if sha256 else None
    cache = cache_dir(env)
    if value.startswith(_URL_SCHEMES):
        if expected is None:
            raise ConfigurationError(
                f"--llvm-archive {value} is a URL without a sha256",
                fix="add --llvm-archive-sha256 with the sha256 of that file (sha256sum on a copy you trust)",
            )
        if not fetch:
            return LlvmArchive(origin=value, url=value, sha256=expected, inspection=None)
        path = download(value, expected, cache)
    else:
        path = Path(urllib.parse.unquote(value.removeprefix("file://"))).expanduser()
        if not path.exists():
            raise ConfigurationError(
                f"--llvm-archive {value}: no such file or folder",
                fix=f"pass Triton's archive {TOP_EXAMPLE}.tar.gz or the folder it unpacked to "
                "(~/.triton/llvm/...)",
            )
        if path.is_dir():
            path = pack_folder(path, cache)
    digest = file_sha256(path)
    if expected is not None and digest != expected:
        raise ConfigurationError(
            f"--llvm-archive {value} has sha256 {digest}, not {expected} (--llvm-archive-sha256)",
            fix="download the archive again, or correct --llvm-archive-sha256",
        )
    archive = LlvmArchive(
        origin=value,
        url=path.resolve().as_uri(),
        sha256=digest,
        inspection=inspect_cached(path, digest, cache),
    )
    LOGGER.info("flagtree-llvm: from Triton's LLVM archive %s (sha256 %s)", value, digest)
    return archive


def _parse_sha256(value: str) -> str:
    digest = value.strip().lower()
    if not _SHA256.fullmatch(digest):
        raise ConfigurationError(
            f"--llvm-archive-sha256 {value!r} is not a sha256", fix="give the 64 hex digits sha256sum prints"
        )
    return digest


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _HashingWriter:
    """A binary file being written, hashed as it is written (tarfile and gzip write through it)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


@dataclass
class _Spooled:
    writer: _HashingWriter
    path: Path | None = None

    @property
    def sha256(self) -> str:
        return self.writer.digest.hexdigest()


@contextmanager
def _spool(folder: Path, name: Callable[[str], str]) -> Iterator[_Spooled]:
    """A new file in ``folder``, hashed as it is written and renamed to ``name(sha256)`` once complete.

    Nothing half-written stays: the temporary file is removed on any failure.
    """
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".incoming-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            spooled = _Spooled(_HashingWriter(handle))
            yield spooled
        spooled.path = folder / name(spooled.sha256)
        Path(temporary).replace(spooled.path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def download(url: str, sha256: str, cache: Path) -> Path:
    """``url`` in the cache (downloaded once), its sha256 checked; a failure leaves nothing behind."""
    name = f"{sha256[:16]}-{Path(urllib.parse.urlparse(url).path).name or 'llvm.tar.gz'}"
    cached = cache / name
    if cached.is_file() and file_sha256(cached) == sha256:
        return cached
    LOGGER.info("downloading %s", url)
    try:
        with (
            urllib.request.urlopen(url, timeout=60) as response,
            _spool(cache, lambda digest: name if digest == sha256 else f".mismatch-{name}") as out,
        ):
            shutil.copyfileobj(response, out.writer, _CHUNK)
    except (urllib.error.URLError, OSError) as exc:
        raise SourceFetchError(
            f"--llvm-archive {url} could not be downloaded ({exc})",
            fix="check the URL and the network, or download the file yourself and pass its path",
        ) from None
    if out.sha256 != sha256:
        assert out.path is not None
        out.path.unlink()
        raise SourceFetchError(
            f"--llvm-archive {url} downloaded with sha256 {out.sha256}, not {sha256} (--llvm-archive-sha256)",
            fix="check --llvm-archive-sha256 against a copy you trust; the download was removed",
        )
    return cached


def pack_folder(folder: Path, cache: Path) -> Path:
    """An unpacked archive folder as a reproducible .tar.gz in ``cache``: the same tree, the same sha256.

    The folder (a symlink such as setup.py's ``llvm-ubuntu-arm64`` is followed) becomes the archive's top
    folder, so it must be named like Triton's. Entries are sorted, owners and times zeroed, symlinks kept as
    symlinks, setup.py's version.txt left out; gzip without a name or time.
    """
    folder = folder.resolve()
    if TOP_FOLDER.fullmatch(folder.name) is None:
        raise ConfigurationError(
            f"--llvm-archive {folder} is not named like Triton's LLVM archive folder ({TOP_EXAMPLE})",
            fix="pass the folder setup.py or upstream's guide unpacked "
            "(~/.triton/llvm/llvm-<commit8>-ubuntu-arm64)",
        )
    LOGGER.info("packing %s into %s", folder, cache)

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with (
        _spool(cache, lambda digest: f"{folder.name}-{digest[:16]}.tar.gz") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw.writer, mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        tar.add(folder, arcname=folder.name, recursive=False, filter=reset)
        for path in _walk(folder):
            if path.parent == folder and path.name == SETUP_PY_MARKER:
                continue
            info = reset(tar.gettarinfo(path, arcname=f"{folder.name}/{path.relative_to(folder)}"))
            if info.islnk():  # a hard link: its content, as a file of its own
                info.type, info.linkname, info.size = tarfile.REGTYPE, "", path.stat().st_size
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    assert raw.path is not None
    return raw.path


def _walk(folder: Path) -> Iterator[Path]:
    """Every entry under ``folder`` in a fixed order; symlinked folders are entries, not descended into."""
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)


def inspect_cached(path: Path, sha256: str, cache: Path) -> Inspection:
    """:func:`inspect`, remembered per sha256 in ``cache`` (an archive is read through once)."""
    record = cache / f"{sha256}.json"
    try:
        return Inspection(**json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    found = inspect(path)
    with _spool(cache, lambda _: record.name) as out:
        out.writer.write(json.dumps(asdict(found)).encode())
    return found


def inspect(path: Path) -> Inspection:
    """Read ``path`` through once: its top folder, its mlir-tblgen, the glibc its programs need."""
    tops: set[str] = set()
    tool_machine: int | None = None
    needs: list[tuple[str, str]] = []  # (GLIBC_x.y, program)
    try:
        with (
            # Not the stream mode ("r|*"): it ends quietly where a truncated archive ends, where gzip's file
            # object raises EOFError.
            tarfile.open(path, mode="r:*") as tar,
            tempfile.TemporaryDirectory(prefix="flagtree-llvm-archive-") as scratch,
        ):
            for member in tar:
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if not parts:
                    continue
                tops.add(parts[0])
                if len(parts) != 3 or parts[1] != "bin" or not member.isfile():
                    continue
                program = Path(scratch) / "program"
                source = tar.extractfile(member)
                assert source is not None
                with program.open("wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                try:
                    versions = elf.version_needs(program)
                    machine = elf.dynamic_info(program).machine
                except elf.ElfError:
                    continue
                if parts[2] == Path(REQUIRED_TOOL).name:
                    tool_machine = machine
                needs += [(v, parts[2]) for vs in versions.values() for v in vs if _is_glibc(v)]
    except _NOT_TAR as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
        raise ConfigurationError(
            f"--llvm-archive {path} is not a tar archive, or a damaged one ({reason})",
            fix=f"pass Triton's archive ({TOP_EXAMPLE}.tar.gz) or the folder it unpacked to",
        ) from None
    return _checked(path, tops, tool_machine, needs)


def _is_glibc(version: str) -> bool:
    return version.startswith("GLIBC_") and bool(elf.version_key(version))


def _checked(
    path: Path, tops: set[str], tool_machine: int | None, needs: Sequence[tuple[str, str]]
) -> Inspection:
    if len(tops) != 1 or TOP_FOLDER.fullmatch(next(iter(tops))) is None:
        found = ", ".join(sorted(tops)[:3]) + (", ..." if len(tops) > 3 else "") or "nothing"
        raise ConfigurationError(
            f"--llvm-archive {path} holds {found} at its top, not one folder {TOP_EXAMPLE}/",
            fix="pass Triton's LLVM archive for linux-aarch64 (upstream's guide §1.3)",
        )
    (top,) = tops
    if tool_machine is None:
        raise ConfigurationError(
            f"--llvm-archive {path} has no {top}/{REQUIRED_TOOL}: not an LLVM + MLIR install tree",
            fix="pass Triton's LLVM archive, which holds MLIR's tools (upstream's guide §1.3)",
        )
    if tool_machine != elf.EM_AARCH64:
        raise ConfigurationError(
            f"--llvm-archive {path}: {top}/{REQUIRED_TOOL} is not an aarch64 program (ELF machine "
            f"{tool_machine})",
            fix=f"pass the linux-aarch64 archive ({TOP_EXAMPLE}.tar.gz)",
        )
    newest = max(needs, key=lambda need: elf.version_key(need[0]), default=None)
    return Inspection(
        top=top, glibc=newest[0] if newest else None, glibc_program=newest[1] if newest else None
    )


def variant_file(archive: LlvmArchive, env: Mapping[str, str]) -> Path:
    """A variant file that points the recipe at ``archive``, read after the others (its keys win)."""
    key = hashlib.sha256(f"{archive.url}\n{archive.sha256}".encode()).hexdigest()[:16]
    name = f"variants-{key}.yaml"
    text = (
        f"# flagtree-feedstock build --llvm-archive {archive.origin}:\n"
        "# flagtree-llvm from Triton's LLVM archive.\n"
        f'llvm_archive_url:\n  - "{archive.url}"\nllvm_archive_sha256:\n  - "{archive.sha256}"\n'
    )
    cache = cache_dir(env)
    with _spool(cache, lambda _: name) as out:
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
        lines += [f"  {archive.origin}"]
    else:
        needs = archive.inspection.glibc or "no GLIBC version"
        lines += [f"flagtree-llvm: from Triton's LLVM archive (its programs need {needs}):"]
        lines += [f"  {archive.origin}", f"  (top folder {archive.inspection.top}/)"]
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
            f"--llvm-archive {archive.origin} is LLVM {archive.inspection.commit} "
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
    if elf.version_key(needed) <= elf.version_key(f"GLIBC_{floor}"):
        return
    sysroot = next(
        (v for v in SYSROOT_VERSIONS if elf.version_key(f"GLIBC_{v}") >= elf.version_key(needed)), None
    )
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
        f"--llvm-archive {archive.origin} needs glibc {version} ({archive.inspection.glibc_program} needs "
        f"{needed}), above c_stdlib_version {floor}: libtriton.so would not link against that sysroot",
        fix=fix,
    )
