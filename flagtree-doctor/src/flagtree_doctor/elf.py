"""Read what an ELF shared object needs and provides, with the standard library only.

``version_needs`` is what ``readelf -V`` prints as "Version needs" (``.gnu.version_r``, e.g.
``libstdc++.so.6: GLIBCXX_3.4.30``), ``version_definitions`` its "Version definition" section, and
``dynamic_info`` the ``DT_NEEDED``/``DT_RPATH``/``DT_RUNPATH`` entries, ``undefined_symbols`` the names a
shared object takes from others (``.dynsym``). ELF64 and ELF32, either byte order.

Only the bytes these need are read: the ELF header, the section header table and the sections named there
(a few kilobytes to a few megabytes of a file that may be hundreds), from a path or from any
:class:`Source` (the toolkit reads a program inside a tar archive without unpacking it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NULL, DT_NEEDED, DT_RPATH, DT_RUNPATH = 0, 1, 15, 29
ELFCLASS64 = 2
ELFDATA2MSB = 2
EM_AARCH64 = 183
EM_X86_64 = 62
# The most one read may ask for (the section header table, a string table): a linked program's or library's
# .dynstr is megabytes (libtorch_cpu.so's, of a 430 MB library, 5 MB); a larger one is a damaged file.
MAX_READ = 64 << 20
T = TypeVar("T")


class Source(Protocol):
    """Bytes of a file by offset (fewer than asked where the file ends), and the file's name for messages."""

    name: str

    def read_at(self, offset: int, size: int) -> bytes: ...


class _FileSource:
    def __init__(self, handle: BinaryIO, name: str) -> None:
        self.handle = handle
        self.name = name

    def read_at(self, offset: int, size: int) -> bytes:
        self.handle.seek(offset)
        return self.handle.read(size)


class _BytesSource:
    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.name = name

    def read_at(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class ElfError(ValueError):
    """A file is not an ELF object the doctor can read (the checks report it; it never reaches the CLI)."""


@dataclass(frozen=True, kw_only=True)
class DynamicInfo:
    machine: int
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


class _Elf:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.name = source.name
        self.tables: dict[int, bytes] = {}
        ident = self.read(0, 16)
        if ident[:4] != b"\x7fELF":
            raise ElfError(f"{self.name} is not an ELF file")
        if len(ident) < 16:
            raise ElfError(f"{self.name} is truncated")
        self.is64 = ident[4] == ELFCLASS64
        self.order = ">" if ident[5] == ELFDATA2MSB else "<"
        # e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize,
        # e_phnum, e_shentsize, e_shnum, e_shstrndx
        fmt = "HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH"
        header = self._unpack(fmt, self.read(16, struct.calcsize(fmt)))
        self.machine, self._shoff, self._shentsize, self._shnum = header[1], header[5], header[10], header[11]
        self._sections: list[_Section] | None = None

    @property
    def sections(self) -> list[_Section]:
        """The section header table, read on first use (:func:`machine` needs the header alone)."""
        if self._sections is None:
            if self._shoff == 0 or self._shnum == 0:
                raise ElfError(f"{self.name} has no section headers")
            table = self.read(self._shoff, self._shnum * self._shentsize)
            self._sections = [self._section(table, i * self._shentsize) for i in range(self._shnum)]
        return self._sections

    def read(self, offset: int, size: int) -> bytes:
        if size > MAX_READ:
            raise ElfError(f"{self.name}: a table of {size} bytes, more than an ELF file holds")
        return self.source.read_at(offset, size)

    def _unpack(self, fmt: str, data: bytes, offset: int = 0) -> tuple[int, ...]:
        try:
            return struct.unpack_from(self.order + fmt, data, offset)
        except struct.error:
            raise ElfError(f"{self.name} is truncated") from None

    def _section(self, table: bytes, offset: int) -> _Section:
        if self.is64:
            _, kind, _, _, off, size, link, info, _, entsize = self._unpack("IIQQQQIIQQ", table, offset)
        else:
            _, kind, _, _, off, size, link, info, _, entsize = self._unpack("IIIIIIIIII", table, offset)
        return _Section(type=kind, offset=off, size=size, link=link, info=info, entsize=entsize)

    def of_type(self, kind: int) -> _Section | None:
        return next((s for s in self.sections if s.type == kind), None)

    def content(self, section: _Section) -> bytes:
        """A section's bytes, read once."""
        key = self.sections.index(section)
        if key not in self.tables:
            self.tables[key] = self.read(section.offset, section.size)
        return self.tables[key]

    def linked(self, section: _Section) -> _Section:
        """The section ``section``'s sh_link names (its string table)."""
        if section.link >= len(self.sections):
            raise ElfError(f"{self.name}: a section links to section {section.link}, which is not there")
        return self.sections[section.link]

    def entry(self, section: _Section, fmt: str, offset: int) -> tuple[int, ...]:
        """The ``fmt`` record at ``offset`` (from the file's start) inside ``section``."""
        if offset < section.offset:
            raise ElfError(f"{self.name}: an entry points before its section")
        return self._unpack(fmt, self.content(section), offset - section.offset)

    def string(self, table: _Section, index: int) -> str:
        data = self.content(table)
        end = data.find(b"\0", index)
        if index >= len(data) or end < 0:
            raise ElfError(f"{self.name}: string {index} runs past its table")
        return data[index:end].decode("utf-8", "replace")


def _opened(path: Path | Source, read: Callable[[_Elf], T]) -> T:
    """``read`` of the ELF file ``path`` (a path, or a :class:`Source` of one)."""
    if not isinstance(path, Path):
        return read(_Elf(path))
    try:
        with path.open("rb") as handle:
            return read(_Elf(_FileSource(handle, str(path))))
    except IsADirectoryError:
        raise ElfError(f"{path} is not an ELF file") from None


def machine(path: Path | Source) -> int:
    """The ELF header's ``e_machine`` (the header alone is read)."""
    return _opened(path, lambda elf: elf.machine)


def version_needs(path: Path | Source) -> dict[str, frozenset[str]]:
    """Each library file named in ``.gnu.version_r`` with the version names needed from it."""
    return _opened(path, _version_needs)


def _version_needs(elf: _Elf) -> dict[str, frozenset[str]]:
    section = elf.of_type(SHT_GNU_VERNEED)
    if section is None:
        return {}
    strings = elf.linked(section)
    needs: dict[str, frozenset[str]] = {}
    offset = section.offset
    for _ in range(section.info):  # sh_info = number of Verneed entries
        _, count, file_index, aux, next_entry = elf.entry(section, "HHIII", offset)
        names = set()
        aux_offset = offset + aux
        for _ in range(count):
            _, _, _, name_index, next_aux = elf.entry(section, "IHHII", aux_offset)
            names.add(elf.string(strings, name_index))
            aux_offset += next_aux
        needs[elf.string(strings, file_index)] = frozenset(names)
        if next_entry == 0:
            break
        offset += next_entry
    return needs


def version_definitions(path: Path | Source) -> frozenset[str]:
    """The version names a library defines in ``.gnu.version_d`` (its own soname included)."""
    return _opened(path, _version_definitions)


def _version_definitions(elf: _Elf) -> frozenset[str]:
    section = elf.of_type(SHT_GNU_VERDEF)
    if section is None:
        return frozenset()
    strings = elf.linked(section)
    names = set()
    offset = section.offset
    for _ in range(section.info):  # sh_info = number of Verdef entries
        _, _, _, count, _, aux, next_entry = elf.entry(section, "HHHHIII", offset)
        if count:
            (name_index, _) = elf.entry(section, "II", offset + aux)
            names.add(elf.string(strings, name_index))
        if next_entry == 0:
            break
        offset += next_entry
    return frozenset(names)


def dynamic_info(path: Path | Source) -> DynamicInfo:
    """The machine and the ``DT_NEEDED``, ``DT_RPATH`` and ``DT_RUNPATH`` entries of ``.dynamic``."""
    return _opened(path, _dynamic_info)


def _dynamic_info(elf: _Elf) -> DynamicInfo:
    section = elf.of_type(SHT_DYNAMIC)
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    if section is not None:
        strings = elf.linked(section)
        entry = "qQ" if elf.is64 else "iI"
        step = 16 if elf.is64 else 8
        for offset in range(section.offset, section.offset + section.size, step):
            tag, value = elf.entry(section, entry, offset)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed.append(elf.string(strings, value))
            elif tag == DT_RPATH:
                rpath.extend(p for p in elf.string(strings, value).split(":") if p)
            elif tag == DT_RUNPATH:
                runpath.extend(p for p in elf.string(strings, value).split(":") if p)
    return DynamicInfo(machine=elf.machine, needed=tuple(needed), rpath=tuple(rpath), runpath=tuple(runpath))


def undefined_symbols(data: bytes, name: str) -> frozenset[str]:
    """The symbols the shared object ``data`` (called ``name`` in errors) takes from other objects."""
    elf = _Elf(_BytesSource(data, name))
    section = elf.of_type(SHT_DYNSYM)
    if section is None:
        return frozenset()
    strings = elf.linked(section)
    names = set()
    step = section.entsize or (24 if elf.is64 else 16)
    for offset in range(section.offset + step, section.offset + section.size, step):  # entry 0 is null
        if elf.is64:
            name_index, _, _, shndx, _, _ = elf.entry(section, "IBBHQQ", offset)
        else:
            name_index, _, _, _, _, shndx = elf.entry(section, "IIIBBH", offset)
        if shndx == SHN_UNDEF and name_index:
            names.add(elf.string(strings, name_index))
    return frozenset(names)


def version_key(name: str) -> tuple[int, ...]:
    """``GLIBCXX_3.4.30`` -> ``(3, 4, 30)``; names without a number (``GLIBC_PRIVATE``) sort first."""
    _, _, number = name.rpartition("_")
    parts = number.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
