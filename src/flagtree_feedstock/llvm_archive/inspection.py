"""What an archive holds, read before anything is unpacked: its top folder, its mlir-tblgen, its glibc need."""

from __future__ import annotations

import gzip
import json
import lzma
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from flagtree_doctor import elf
from flagtree_feedstock.errors import ConfigurationError

from .cache import CHUNK, spool

# The top folder FlagTree's setup.py names for aarch64 Linux (get_llvm_package_info's system_suffix).
TOP_FOLDER = re.compile(r"llvm-(?P<commit>[0-9a-f]{8})-(?:ubuntu|almalinux)-arm64")


TOP_EXAMPLE = "llvm-<commit8>-ubuntu-arm64"


REQUIRED_TOOL = "bin/mlir-tblgen"


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


def inspect_cached(path: Path, sha256: str, cache: Path) -> Inspection:
    """:func:`inspect`, remembered per sha256 in ``cache`` (an archive is read through once)."""
    record = cache / f"{sha256}.json"
    try:
        return Inspection(**json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    found = inspect(path)
    with spool(cache, lambda _: record.name) as out:
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
                    shutil.copyfileobj(source, out, CHUNK)
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
