"""Read what an ELF shared object needs and provides, with the standard library only.

``version_needs`` is what ``readelf -V`` prints as "Version needs" (``.gnu.version_r``, e.g.
``libstdc++.so.6: GLIBCXX_3.4.30``), ``version_definitions`` its "Version definition" section, and
``dynamic_info`` the ``DT_NEEDED``/``DT_RPATH``/``DT_RUNPATH`` entries, ``undefined_symbols`` the names a
shared object takes from others (``.dynsym``). ELF64 and ELF32, either byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

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
    def __init__(self, path: Path, data: bytes | None = None) -> None:
        self.path = path
        self.data = path.read_bytes() if data is None else data
        if self.data[:4] != b"\x7fELF":
            raise ElfError(f"{path} is not an ELF file")
        self.is64 = self.data[4] == ELFCLASS64
        self.order = ">" if self.data[5] == ELFDATA2MSB else "<"
        # e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize,
        # e_phnum, e_shentsize, e_shnum, e_shstrndx
        header = self._unpack("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH", 16)
        self.machine, shoff, shentsize, shnum = header[1], header[5], header[10], header[11]
        if shoff == 0 or shnum == 0:
            raise ElfError(f"{path} has no section headers")
        self.sections = [self._section(shoff + i * shentsize) for i in range(shnum)]

    def _unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        try:
            return struct.unpack_from(self.order + fmt, self.data, offset)
        except struct.error:
            raise ElfError(f"{self.path} is truncated") from None

    def _section(self, offset: int) -> _Section:
        if self.is64:
            _, kind, _, _, off, size, link, info, _, entsize = self._unpack("IIQQQQIIQQ", offset)
        else:
            _, kind, _, _, off, size, link, info, _, entsize = self._unpack("IIIIIIIIII", offset)
        return _Section(type=kind, offset=off, size=size, link=link, info=info, entsize=entsize)

    def of_type(self, kind: int) -> _Section | None:
        return next((s for s in self.sections if s.type == kind), None)

    def string(self, table: _Section, index: int) -> str:
        start = table.offset + index
        end = self.data.find(b"\0", start, table.offset + table.size)
        if end < 0:
            raise ElfError(f"{self.path}: string {index} runs past its table")
        return self.data[start:end].decode("utf-8", "replace")


def version_needs(path: Path) -> dict[str, frozenset[str]]:
    """Each library file named in ``.gnu.version_r`` with the version names needed from it."""
    elf = _Elf(path)
    section = elf.of_type(SHT_GNU_VERNEED)
    if section is None:
        return {}
    strings = elf.sections[section.link]
    needs: dict[str, frozenset[str]] = {}
    offset = section.offset
    for _ in range(section.info):  # sh_info = number of Verneed entries
        _, count, file_index, aux, next_entry = elf._unpack("HHIII", offset)
        names = set()
        aux_offset = offset + aux
        for _ in range(count):
            _, _, _, name_index, next_aux = elf._unpack("IHHII", aux_offset)
            names.add(elf.string(strings, name_index))
            aux_offset += next_aux
        needs[elf.string(strings, file_index)] = frozenset(names)
        if next_entry == 0:
            break
        offset += next_entry
    return needs


def version_definitions(path: Path) -> frozenset[str]:
    """The version names a library defines in ``.gnu.version_d`` (its own soname included)."""
    elf = _Elf(path)
    section = elf.of_type(SHT_GNU_VERDEF)
    if section is None:
        return frozenset()
    strings = elf.sections[section.link]
    names = set()
    offset = section.offset
    for _ in range(section.info):  # sh_info = number of Verdef entries
        _, _, _, count, _, aux, next_entry = elf._unpack("HHHHIII", offset)
        if count:
            (name_index, _) = elf._unpack("II", offset + aux)
            names.add(elf.string(strings, name_index))
        if next_entry == 0:
            break
        offset += next_entry
    return frozenset(names)


def dynamic_info(path: Path) -> DynamicInfo:
    """The machine and the ``DT_NEEDED``, ``DT_RPATH`` and ``DT_RUNPATH`` entries of ``.dynamic``."""
    elf = _Elf(path)
    section = elf.of_type(SHT_DYNAMIC)
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    if section is not None:
        strings = elf.sections[section.link]
        entry = "qQ" if elf.is64 else "iI"
        step = 16 if elf.is64 else 8
        for offset in range(section.offset, section.offset + section.size, step):
            tag, value = elf._unpack(entry, offset)
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
    elf = _Elf(Path(name), data)
    section = elf.of_type(SHT_DYNSYM)
    if section is None:
        return frozenset()
    strings = elf.sections[section.link]
    names = set()
    step = section.entsize or (24 if elf.is64 else 16)
    for offset in range(section.offset + step, section.offset + section.size, step):  # entry 0 is null
        if elf.is64:
            name_index, _, _, shndx, _, _ = elf._unpack("IBBHQQ", offset)
        else:
            name_index, _, _, _, _, shndx = elf._unpack("IIIBBH", offset)
        if shndx == SHN_UNDEF and name_index:
            names.add(elf.string(strings, name_index))
    return frozenset(names)


def version_key(name: str) -> tuple[int, ...]:
    """``GLIBCXX_3.4.30`` -> ``(3, 4, 30)``; names without a number (``GLIBC_PRIVATE``) sort first."""
    _, _, number = name.rpartition("_")
    parts = number.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
