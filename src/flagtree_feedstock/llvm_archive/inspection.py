"""What an archive holds, read before anything is unpacked: its top folder, its mlir-tblgen, its glibc need.

The archive is read once, as a stream, by the toolkit's bounded tar reader
(:class:`flagtree_feedstock._archive.tar_stream.TarStream`, within :data:`LIMITS`): every header and every member is
bounded, not only ``bin/``, and what the engine's extractor could read differently from ours is refused (a
member with both a PAX path and a GNU long name, a sparse member, two members at one path, a path that is both
a file and a link). The archive is refused, naming the member (cut, with its length), where one would land
outside the top folder when unpacked or is no file an LLVM install holds: a name with ``..`` or an absolute
one, a symlink whose target (followed through the archive's own symlinks) or a hard link whose target leaves
the top folder, a device file or a FIFO. Only ``bin/*`` files are read, in place, never copied out; one that
is not ELF by its first four bytes is skipped; of an ELF program, the header, the section header table and the
version needs with their strings are read (the doctor's ELF reader, :mod:`flagtree_doctor.elf`), its first
:data:`KEPT_BYTES` kept in memory as it passes. A ``bin/*`` member above :data:`MAX_PROGRAM_BYTES` is refused
unread.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from flagtree_doctor import elf
from flagtree_feedstock._archive.compressed import decompressed
from flagtree_feedstock._archive.tar_stream import (
    ArchiveDamaged,
    ArchiveRefused,
    Limits,
    Seekable,
    TarStream,
    resolve,
    shown,
)
from flagtree_feedstock.errors import ConfigurationError

from .cache import CHUNK, human_size, spool

# The top folder FlagTree's setup.py names for aarch64 Linux (get_llvm_package_info's system_suffix).
TOP_FOLDER = re.compile(r"llvm-(?P<commit>[0-9a-f]{8})-(?:ubuntu|almalinux)-arm64")


TOP_EXAMPLE = "llvm-<commit8>-ubuntu-arm64"


REQUIRED_TOOL = "bin/mlir-tblgen"


# What reading one archive may cost: Triton's archives are 1 to 1.6 GB of gzip (docs/llvm-archive.md), an LLVM
# and MLIR install tree of a few GB in some thousands of files (Debian's LLVM 19 and MLIR: 4,385,
# benchmarks/README.md); its largest member is a static library or a tool of a few hundred MB.
LIMITS = Limits(total_bytes=32 << 30, member_bytes=4 << 30, members=100_000)

# A bin/* member larger than this is refused unread. Triton's LLVM tools are at most a few hundred MB: the
# largest of its 2026 build were mlir-query (204 MB) and clang-repl (196 MB) (triton-lang/triton#10480, the
# binaries its trimmed build dropped), and an unstripped assertions build of MLIR's tools reaches about 300 MB
# (ROCm/FlyDSL#1092: 303 MB before stripping). 1 GiB leaves three times that room, and stops a member that
# claims gigabytes (a sparse one costs a few bytes of archive).
MAX_PROGRAM_BYTES = 1 << 30
# How much of a program's start is kept in memory while it is read: its ELF header, and the dynamic string
# table and version needs a linker lays out right behind it (in libtorch_cpu.so, a 430 MB library, they end
# before 8 MB), so reading them after the section header table at the program's end costs no second pass.
KEPT_BYTES = 16 << 20
# Part of a cached inspection's name: an archive inspected by older checks is read again.
INSPECTION_FORMAT = 3


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


def inspect_cached(
    path: Path, sha256: str, cache: Path, *, label: str | None = None, handle: io.BufferedReader | None = None
) -> Inspection:
    """:func:`inspect`, remembered per sha256 in ``cache`` (an archive is read through once)."""
    record = cache / f"{sha256}.inspection-{INSPECTION_FORMAT}.json"
    try:
        return Inspection(**json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    found = inspect(path, label=label, handle=handle)
    with spool(cache, lambda _: record.name) as out:
        out.writer.write(json.dumps(asdict(found)).encode())
    return found


def inspect(path: Path, *, label: str | None = None, handle: io.BufferedReader | None = None) -> Inspection:
    """Read ``path`` through once: its members checked, its top folder, its mlir-tblgen, its programs' glibc.

    ``label`` names the archive in messages (what the user gave, where ``path`` is a packed folder); ``handle``:
    ``path`` already open (by the one reader, which checked what it is), read from its start.
    """
    label = label or str(path)
    tops: set[str] = set()
    links: dict[str, str] = {}  # symlink (its normalised name) -> target
    tool_machine: int | None = None
    needs: list[tuple[str, str]] = []  # (GLIBC_x.y, program)
    try:
        with decompressed(path, what="its compressed data", opened=handle) as raw:
            size = os.fstat(handle.fileno()).st_size if handle is not None else path.stat().st_size
            tar = TarStream(raw, LIMITS.for_file(size))
            for member in tar:
                parts = member.parts
                if not parts:
                    continue
                tops.add(parts[0])
                if member.kind == "symlink":
                    links[member.name] = member.target
                if len(parts) != 3 or parts[1] != "bin" or member.kind != "file":
                    continue
                if member.size > MAX_PROGRAM_BYTES:
                    raise _refused(
                        label,
                        member.name,
                        f"{human_size(member.size)}, above the {human_size(MAX_PROGRAM_BYTES)} a program in "
                        "bin/ may have (Triton's largest LLVM tools are a few hundred MB)",
                    )
                program = _Member(tar, raw, f"{label}:{member.name}")
                try:  # the reader's first check is the ELF magic: a script or data is skipped there
                    versions = elf.version_needs(program)
                    machine = elf.machine(program)
                except elf.ElfError:
                    continue
                if parts[2] == Path(REQUIRED_TOOL).name:
                    tool_machine = machine
                needs += [(v, parts[2]) for vs in versions.values() for v in vs if _is_glibc(v)]
    except ArchiveDamaged as exc:  # NotATar among them
        raise ConfigurationError(
            f"--llvm-archive {label} is not a tar archive, or a damaged one ({exc})",
            fix=f"pass Triton's archive ({TOP_EXAMPLE}.tar.gz) or the folder it unpacked to",
        ) from None
    except ArchiveRefused as exc:
        raise ConfigurationError(
            f"--llvm-archive {label}: {exc}; refused before anything is unpacked",
            fix="pass Triton's own archive (an LLVM install tree holds none of these), downloaded again",
        ) from None
    return _checked(label, tops, _Links(links), tool_machine, needs)


class _Member:
    """The current member of ``tar`` as an ELF reader's source: read forward once, its first
    :data:`KEPT_BYTES` kept.

    A read behind what is kept seeks back in the decompressed archive ``raw``, which in a compressed archive
    decompresses it again from its start: correct, and never needed for a program laid out as linkers lay
    them out.
    """

    def __init__(self, tar: TarStream, raw: Seekable, name: str) -> None:
        self.tar = tar
        self.raw = raw
        self.name = name
        self.kept = bytearray()
        self.position = 0

    def read_at(self, offset: int, size: int) -> bytes:
        end = offset + size
        if end <= len(self.kept):
            return bytes(self.kept[offset:end])
        if offset >= self.position:
            while self.position < offset:
                if not self._take(min(CHUNK, offset - self.position)):
                    return b""
            return self._take(size)
        if self.position == len(self.kept):  # the start is kept, the rest lies ahead
            head = bytes(self.kept[offset:])
            return head + self._take(end - self.position)
        self.tar.seek(self.raw, offset)
        self.position = offset
        return self._take(size)

    def _take(self, size: int) -> bytes:
        data = self.tar.read(size)
        if self.position == len(self.kept) and len(self.kept) < KEPT_BYTES:
            self.kept += data[: KEPT_BYTES - len(self.kept)]
        self.position += len(data)
        return data


def _refused(label: str, member: str, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"--llvm-archive {label}: member {shown(member)} is {why}; refused before anything is unpacked",
        fix="pass Triton's own archive (an LLVM install tree holds none of these), downloaded again",
    )


@dataclass(frozen=True)
class _Links:
    """The archive's symlinks (normalised names), to check where they lead.

    With no ``..`` and no absolute name (the tar reader refuses them) and every hard link to an earlier
    member, a path leaves the top folder only through a symlink: each symlink's target is resolved.
    """

    symlinks: Mapping[str, str]

    def escaping(self, top: str) -> tuple[str, str] | None:
        """A symlink (its name and what it is) whose target leaves the folder ``top``, or None."""
        for name, target in sorted(self.symlinks.items()):
            if target.startswith("/"):
                return name, f"a symlink to the absolute path {target}"
            found = resolve(
                [*name.split("/")[:-1], *target.split("/")], self.symlinks, follow_last=True, floor=1
            )
            if found is None or found[0] != top:
                return name, f"a symlink to {target}, which does not resolve inside {top}/"
        return None


def _is_glibc(version: str) -> bool:
    return version.startswith("GLIBC_") and bool(elf.version_key(version))


def _checked(
    path: str, tops: set[str], links: _Links, tool_machine: int | None, needs: Sequence[tuple[str, str]]
) -> Inspection:
    if len(tops) != 1 or TOP_FOLDER.fullmatch(next(iter(tops))) is None:
        found = ", ".join(sorted(tops)[:3]) + (", ..." if len(tops) > 3 else "") or "nothing"
        raise ConfigurationError(
            f"--llvm-archive {path} holds {found} at its top, not one folder {TOP_EXAMPLE}/",
            fix="pass Triton's LLVM archive for linux-aarch64 (upstream's guide §1.3)",
        )
    (top,) = tops
    escaping = links.escaping(top)
    if escaping is not None:
        raise _refused(path, *escaping)
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
