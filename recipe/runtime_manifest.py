"""Which CPU features each exported function of a shared library needs, read from its own instructions.

build-flagtree.sh runs it on the baseline runtime, ``triton/_C/baseline/libTritonCPURuntime.so``::

    python runtime_manifest.py LIBRARY --objdump "${OBJDUMP}" --as "${AS}" --march armv8.2-a+dotprod

and writes the manifest beside the library (``libTritonCPURuntime.isa.json``; flagtree_doctor.manifest reads
it, and refuses a call this CPU cannot run before it is made). It needs no knowledge of the sources: the
toolchain's objdump disassembles the library, and each instruction is classified by the extension it needs.

- **What is classified.** SVE: any Z or P register; dotprod: ``sdot``, ``udot``; i8mm: ``smmla``, ``ummla``,
  ``usmmla``, ``usdot``, ``sudot``; bf16: ``bfdot``, ``bfmmla``, ``bfmlalb``/``bfmlalt``, ``bfcvt*``; fp16:
  floating-point arithmetic on H registers (``fphp``) or on ``.4h``/``.8h`` vectors (``asimdhp``), the base
  Armv8 conversions to and from half precision excepted; fhm: ``fmlal*``/``fmlsl*``. Feature names are
  /proc/cpuinfo's (hwcaps), as the CPU check compares them.
- **Checked against the assembler.** Every instruction of every function is assembled again with the
  toolchain's assembler at ``-march=armv8.2-a``, which refuses exactly the instructions an extension beyond
  Armv8.2 adds. The rules above must classify every instruction it refuses, and only those, or this stops,
  naming the instruction: an extension no rule knows (crypto, SME, ...: a ``target`` attribute or inline
  assembly can bring any) is never left out silently. The SVE instructions it refuses again with SVE (and
  i8mm, bf16) allowed need SVE2. An instruction objdump cannot decode, or that does not assemble again, stops
  it too. The ``--march`` the library was compiled with is recorded, not trusted.
- **Which functions it follows.** From each exported function (``.dynsym``): direct calls and branches to
  other functions (``bl``, ``b``, ``cbz``, ...), a call through the PLT to a function the library itself
  exports, every function whose address the function computes (``adr``, ``adrp`` + ``add``): GCC's
  outlined OpenMP regions, whose address the exported function hands to libgomp, are reached that way; and
  every function whose GOT slot it loads (``adrp`` + ``ldr``): under ``-fno-plt``, which conda-forge's
  compiler flags hold, a call to another exported function loads its address from the GOT instead of going
  through the PLT. A GOT slot is a reference of the function that loads it, not a table any function may
  call. A function whose address is stored in other data (a relocation outside ``.got``: vtables, tables of
  callbacks) counts for every exported function. One case is not followed: a pointer one exported function
  computes and stores, which another one later calls; the runtime has none (its functions call only each
  other, libgomp and libc).
  A function that tests the CPU itself before it uses an extension is recorded as needing it.
- **At load.** ``load`` is what the initialisers (``.init_array``, ``.fini_array``, ``_init``, ``_fini``)
  and what they reach need: they run whenever the library is loaded.

Exit status: 0 written, 1 a tool failed or the library cannot be classified, 2 bad usage. The manifest is
written atomically (a temporary file beside it, renamed).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_VERSION = 1
# The assembler's -march for the check: every instruction it refuses needs an extension beyond Armv8.2 (every
# CPU with dotprod, the floor, implements Armv8.2: FEAT_DotProd is an Armv8.2 option); and the SVE level at
# which an SVE instruction that still fails needs SVE2.
FLOOR_MARCH = "armv8.2-a"
SVE_MARCH = "armv8.2-a+sve+i8mm+bf16"
SVE2_MARCH = "armv8.2-a+sve2+i8mm+bf16"
UNSUPPORTED = "selected processor does not support"
# Instructions not assembled again: branches and PC-relative addresses (base Armv8, their operands are
# addresses objdump prints), data and padding objdump shows in code.
NOT_REASSEMBLED = frozenset({"b", "bl", "cbz", "cbnz", "tbz", "tbnz", "adr", "adrp", ".word", "udf"})

DOTPROD = frozenset({"sdot", "udot"})
I8MM = frozenset({"smmla", "ummla", "usmmla", "usdot", "sudot"})
BF16 = frozenset({"bfdot", "bfmmla", "bfmlalb", "bfmlalt", "bfcvt", "bfcvtn", "bfcvtn2", "bfcvtnt"})
FHM = frozenset({"fmlal", "fmlal2", "fmlsl", "fmlsl2"})
# Base Armv8 conversions between half and single/double precision (no FEAT_FP16 needed).
HALF_CONVERSIONS = frozenset({"fcvt", "fcvtl", "fcvtl2", "fcvtn", "fcvtn2", "fcvtxn", "fcvtxn2"})
SVE_REGISTER = re.compile(r"(?<![\w.])(?:z(?:[12]?[0-9]|3[01])|p(?:1[0-5]|[0-9]))(?![\w])")
HALF_VECTOR = re.compile(r"\.[48]h\b|\.h\[")
HALF_SCALAR = re.compile(r"(?<![\w.])h(?:[12]?[0-9]|3[01])\b")
BRANCHES = frozenset({"b", "bl", "cbz", "cbnz", "tbz", "tbnz"})
ANNOTATION = re.compile(r"\s*<[^>]*>")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t(\S+)(?:\t(.*))?$")
LABEL = re.compile(r"^([0-9a-f]+) <(.+)>:$")
TARGET = re.compile(r"^([0-9a-f]+)(?: <(.+)>)?")
LOAD_SECTIONS = (".init_array", ".fini_array", ".preinit_array")
GOT_SECTION = ".got"  # the slots code loads (adrp + ldr); .got.plt's JUMP_SLOTs belong to the PLT stubs
MEMORY = re.compile(r"\[(x\d+)(?:, #(\d+|0x[0-9a-f]+))?\]")
LOAD_SYMBOLS = ("_init", "_fini")


class ManifestError(Exception):
    """The library cannot be classified as asked; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True)
class Symbol:
    name: str
    address: int
    size: int
    exported: bool


@dataclass(kw_only=True)
class Function:
    """A function's own needs (feature -> one instruction) and the functions it reaches directly."""

    symbol: Symbol
    needs: dict[str, str] = field(default_factory=dict)
    calls: set[str] = field(default_factory=set)


# Mnemonic sets and the feature each needs outside SVE, and inside (with Z/P registers, beside "sve").
MNEMONICS: tuple[tuple[frozenset[str], str, str | None], ...] = (
    (I8MM, "i8mm", "svei8mm"),
    (BF16, "bf16", "svebf16"),
    (DOTPROD, "asimddp", None),
    (FHM, "asimdfhm", None),
)


def classify(mnemonic: str, operands: str) -> frozenset[str]:
    """The features (hwcap names) an instruction needs beyond Armv8.2, by the rules (SVE2 aside)."""
    operands = ANNOTATION.sub("", operands.partition("//")[0])
    sve = bool(SVE_REGISTER.search(operands))
    needs = {"sve"} if sve else set()
    for group, neon, sve_form in MNEMONICS:
        if mnemonic in group:
            feature = sve_form if sve else neon
            needs.update([feature] if feature else [])
            return frozenset(needs)
    floating = mnemonic.startswith("f") or mnemonic in ("scvtf", "ucvtf")
    if not sve and floating and mnemonic not in HALF_CONVERSIONS:
        if HALF_VECTOR.search(operands):
            needs.add("asimdhp")
        elif HALF_SCALAR.search(operands):
            needs.add("fphp")
    return frozenset(needs)


def run_objdump(objdump: str, *args: str) -> str:
    try:
        done = subprocess.run([objdump, *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ManifestError(
            f"cannot run {objdump} ({exc.strerror or exc}); pass the toolchain's objdump"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ManifestError(f"{objdump} {' '.join(args)} failed: {last}")
    return done.stdout


def parse_symbols(symtab: str, dynsym: str) -> dict[int, Symbol]:
    """The functions of ``objdump -t`` (all, with sizes) marked exported where ``objdump -T`` defines them."""
    exported = {entry[0] for entry in _symbol_lines(dynsym) if entry[2] != "*UND*"}
    if not exported:
        raise ManifestError("the library exports no function (objdump -T lists none)")
    found: dict[int, Symbol] = {}
    for name, address, section, size in _symbol_lines(symtab):
        if section == "*UND*" or (address in found and found[address].exported):
            continue
        found[address] = Symbol(name=name, address=address, size=size, exported=name in exported)
    if not any(s.exported for s in found.values()):
        raise ManifestError(
            "the library has no symbol table (objdump -t lists none of its exported functions): the manifest "
            "needs the local functions' symbols too; build the runtime unstripped"
        )
    return found


def _symbol_lines(text: str) -> Iterator[tuple[str, int, str, int]]:
    """(name, address, section, size) of each function symbol (``F`` in objdump's flags column)."""
    for line in text.splitlines():
        head, tab, rest = line.partition("\t")
        fields = rest.split()
        if not tab or len(head) < 25 or len(fields) < 2 or head[23] != "F":
            continue
        yield fields[-1], int(head[:16], 16), head[25:].strip(), int(fields[0], 16)


def parse_sections(headers: str) -> dict[str, tuple[int, int]]:
    """Section name -> (address, size), from ``objdump -h``."""
    sections = {}
    for line in headers.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[0].isdigit():
            sections[fields[1]] = (int(fields[3], 16), int(fields[2], 16))
    return sections


def parse_relocations(text: str) -> list[tuple[int, str, str]]:
    """(offset, type, value) of each dynamic relocation, from ``objdump -R``."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1].startswith("R_") and re.fullmatch(r"[0-9a-f]+", fields[0]):
            found.append((int(fields[0], 16), fields[1], fields[2]))
    return found


@dataclass(frozen=True, kw_only=True)
class Library:
    functions: dict[str, Function]  # by symbol name
    load_roots: frozenset[str]
    escaped: frozenset[str]  # functions whose address is stored in data other than the GOT


class _Scanner:
    """Walks ``objdump -d``: each instruction's needs go to its function, each edge to another function."""

    def __init__(self, symbols: dict[int, Symbol], got: dict[int, str]) -> None:
        self.symbols = symbols
        self.got = got  # GOT slot address -> the function whose address the dynamic loader puts there
        self.starts = sorted(symbols)
        self.by_name = {s.name: s for s in symbols.values()}
        self.functions = {s.name: Function(symbol=s) for s in symbols.values()}
        # Each instruction's text as the assembler takes it -> what the rules say it needs, and where it is.
        self.lines: dict[str, tuple[frozenset[str], set[str]]] = {}
        self.plt: dict[int, str] = {}  # PLT stub address -> the function it calls
        self.pages: dict[str, int] = {}  # register -> the page an adrp put into it

    def containing(self, address: int) -> Symbol | None:
        """The function whose ``[address, address + size)`` holds ``address``."""
        index = bisect.bisect_right(self.starts, address)
        if index == 0:
            return None
        symbol = self.symbols[self.starts[index - 1]]
        return symbol if address < symbol.address + max(symbol.size, 1) else None

    def scan(self, disassembly: str, objdump: str) -> None:
        current: Function | None = None
        for line in disassembly.splitlines():
            if label := LABEL.match(line):
                if label[2].endswith("@plt"):
                    self.plt[int(label[1], 16)] = label[2].removesuffix("@plt")
                continue
            instruction = INSTRUCTION.match(line)
            if not instruction:
                continue
            address, mnemonic = int(instruction[1], 16), instruction[2]
            operands = (instruction[3] or "").partition("//")[0].strip()
            symbol = self.containing(address)
            if symbol is None:
                continue  # PLT stubs, padding
            if current is None or current.symbol is not symbol:
                current = self.functions[symbol.name]
                self.pages.clear()
            if mnemonic == ".inst":
                raise ManifestError(
                    f"{objdump} cannot decode the instruction at {address:#x} in {symbol.name} ({operands}): "
                    "use the toolchain's own objdump (a newer binutils)"
                )
            needs = classify(mnemonic, operands)
            for feature in needs:
                current.needs.setdefault(feature, f"{mnemonic} {operands} (in {symbol.name})")
            if mnemonic.split(".", maxsplit=1)[0] not in NOT_REASSEMBLED and "<" not in operands:
                self.lines.setdefault(f"{mnemonic}\t{operands}", (needs, set()))[1].add(symbol.name)
            self.edges(current, mnemonic, operands)

    def edges(self, current: Function, mnemonic: str, operands: str) -> None:
        """The calls, branches and address computations of one instruction that reach another function."""
        fields = [f.strip() for f in operands.split(",")] if operands else []
        targets: list[int] = []
        if mnemonic.split(".", maxsplit=1)[0] in BRANCHES and fields and (match := TARGET.match(fields[-1])):
            address, label = int(match[1], 16), match[2] or ""
            if address in self.plt or label.endswith("@plt"):
                name = self.plt.get(address) or label.removesuffix("@plt")
                if name in self.by_name and self.by_name[name].exported:
                    current.calls.add(name)  # through the PLT to the library's own exported function
                return
            targets.append(address)
        elif mnemonic == "adrp" and len(fields) == 2 and (match := TARGET.match(fields[1])):
            self.pages[fields[0]] = int(match[1], 16)
            return
        elif mnemonic == "ldr" and len(fields) >= 2 and (memory := MEMORY.fullmatch(", ".join(fields[1:]))):
            slot = self.pages[memory[1]] + int(memory[2] or "0", 0) if memory[1] in self.pages else None
            if slot in self.got:
                current.calls.add(self.got[slot])  # its GOT slot: a call under -fno-plt, or its address taken
        elif mnemonic == "adr" and len(fields) == 2 and (match := TARGET.match(fields[1])):
            targets.append(int(match[1], 16))
        elif mnemonic == "add" and len(fields) == 3 and fields[1] in self.pages and fields[2].startswith("#"):
            targets.append(self.pages[fields[1]] + int(fields[2][1:], 0))
        if fields and not mnemonic.startswith(("st", "cmp", "cmn", "tst", "prfm")):
            self.pages.pop(fields[0], None)  # the register now holds something else
        for address in targets:
            symbol = self.symbols.get(address)
            if symbol is not None and symbol.name != current.symbol.name:
                current.calls.add(symbol.name)


def refused(assembler: str, lines: list[str], march: str) -> dict[str, str]:
    """The lines the assembler at ``march`` refuses, each with its error; they are assembled in one run."""
    if not lines:
        return {}
    with tempfile.TemporaryDirectory(prefix="runtime-manifest-") as scratch:
        source = Path(scratch) / "instructions.s"
        source.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        try:
            done = subprocess.run(
                [assembler, f"-march={march}", "-o", str(Path(scratch) / "instructions.o"), str(source)],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError as exc:
            raise ManifestError(
                f"cannot run {assembler} ({exc.strerror or exc}); pass the toolchain's as"
            ) from None
    errors = {}
    for message in done.stderr.splitlines():
        match = re.match(rf"{re.escape(str(source))}:(\d+): Error: (.*)", message)
        if match:
            errors[lines[int(match[1]) - 1]] = match[2]
    if done.returncode != 0 and not errors:
        raise ManifestError(f"{assembler} -march={march} failed: {done.stderr.strip() or 'no output'}")
    return errors


def _shown(line: str, where: set[str]) -> str:
    return f"{line.replace(chr(9), ' ')} (in {min(where)})"


def check_with_assembler(scanner: _Scanner, assembler: str) -> None:
    """The rules' verdicts against the assembler's at Armv8.2; SVE2 for the SVE instructions that need it."""
    lines = sorted(scanner.lines)
    beyond = refused(assembler, lines, FLOOR_MARCH)
    for line, error in beyond.items():
        needs, where = scanner.lines[line]
        if UNSUPPORTED not in error:
            raise ManifestError(
                f"{_shown(line, where)} does not assemble again ({error}): the rules cannot be checked"
            )
        if not needs:
            raise ManifestError(
                f"{_shown(line, where)} needs an extension beyond {FLOOR_MARCH} that no rule classifies: add a "
                "rule (and the hwcap it needs) to runtime_manifest.py"
            )
    for line in lines:
        needs, where = scanner.lines[line]
        if needs and line not in beyond:
            raise ManifestError(
                f"the rules say {_shown(line, where)} needs {', '.join(sorted(needs))}, but {FLOOR_MARCH} "
                "assembles it: fix the rule"
            )
    sve2 = refused(assembler, [line for line in lines if "sve" in scanner.lines[line][0]], SVE_MARCH)
    beyond_sve2 = refused(assembler, sorted(sve2), SVE2_MARCH)
    for line in sorted(sve2):
        where = scanner.lines[line][1]
        if line in beyond_sve2:
            raise ManifestError(
                f"{_shown(line, where)} needs an SVE extension beyond SVE2 that no rule classifies"
            )
        for name in where:
            scanner.functions[name].needs.setdefault("sve2", f"{line.replace(chr(9), ' ')} (in {name})")


def disassemble(objdump: str, assembler: str, library: Path) -> Library:
    """Every function of ``library`` with its own needs and direct edges, the load roots, the escaped ones."""
    symbols = parse_symbols(
        run_objdump(objdump, "-t", str(library)), run_objdump(objdump, "-T", str(library))
    )
    by_name = {s.name: s for s in symbols.values()}
    load = {name for name in LOAD_SYMBOLS if name in by_name}
    escaped: set[str] = set()
    got: dict[int, str] = {}
    sections = parse_sections(run_objdump(objdump, "-h", str(library)))
    load_ranges = [sections[name] for name in LOAD_SECTIONS if name in sections]
    got_start, got_size = sections.get(GOT_SECTION, (0, 0))
    for offset, kind, value in parse_relocations(run_objdump(objdump, "-R", str(library))):
        target = _relocation_target(kind, value, by_name)
        symbol = symbols.get(target) if target is not None else None
        if symbol is None:
            continue
        if got_start <= offset < got_start + got_size:
            got[offset] = symbol.name  # followed from the instructions that load it
        elif any(start <= offset < start + size for start, size in load_ranges):
            load.add(symbol.name)
        else:
            escaped.add(symbol.name)
    scanner = _Scanner(symbols, got)
    scanner.scan(run_objdump(objdump, "-d", "--no-show-raw-insn", str(library)), objdump)
    check_with_assembler(scanner, assembler)
    return Library(functions=scanner.functions, load_roots=frozenset(load), escaped=frozenset(escaped))


def _relocation_target(kind: str, value: str, by_name: dict[str, Symbol]) -> int | None:
    if kind.endswith("JUMP_SLOT"):
        return None  # a PLT slot: a call, followed from the instruction
    if kind.endswith("RELATIVE"):
        match = re.fullmatch(r"\*ABS\*\+0x([0-9a-f]+)", value)
        return int(match[1], 16) if match else None
    symbol = by_name.get(value.split("@", maxsplit=1)[0].split("+", maxsplit=1)[0])
    return symbol.address if symbol is not None else None


def reach(library: Library, roots: Iterable[str]) -> dict[str, str]:
    """Feature -> one instruction that needs it, over every function ``roots`` reach."""
    needs: dict[str, str] = {}
    seen: set[str] = set()
    stack = sorted(roots, reverse=True)
    while stack:
        name = stack.pop()
        if name in seen or name not in library.functions:
            continue
        seen.add(name)
        function = library.functions[name]
        for feature, why in sorted(function.needs.items()):
            needs.setdefault(feature, why)
        stack.extend(sorted(function.calls - seen, reverse=True))
    return needs


def manifest(objdump: str, assembler: str, library: Path, march: str) -> dict[str, object]:
    """The manifest of ``library`` (schema_version 1, as flagtree_doctor.manifest reads it)."""
    found = disassemble(objdump, assembler, library)
    exported = sorted(
        f.symbol.name
        for f in found.functions.values()
        if f.symbol.exported and f.symbol.name not in LOAD_SYMBOLS
    )

    def entry(roots: Iterable[str]) -> dict[str, object]:
        needs = reach(found, [*roots, *sorted(found.escaped)])
        return {"needs": sorted(needs), "evidence": dict(sorted(needs.items()))}

    return {
        "schema_version": SCHEMA_VERSION,
        "library": library.name,
        "march": march,
        "objdump": run_objdump(objdump, "--version").splitlines()[0],
        "load": entry(sorted(found.load_roots)),
        "functions": {name: entry([name]) for name in exported},
    }


def write_atomically(path: Path, text: str) -> None:
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(scratch).chmod(0o644)
        Path(scratch).replace(path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def default_output(library: Path) -> Path:
    """``libX.so`` -> ``libX.isa.json`` beside it."""
    return library.with_name(library.name.removesuffix(".so") + ".isa.json")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="runtime_manifest.py", description=__doc__.splitlines()[0])
    parser.add_argument("library", type=Path, help="the shared library (built with --march)")
    parser.add_argument("--objdump", required=True, help="the toolchain's objdump (conda: ${OBJDUMP})")
    parser.add_argument(
        "--as", dest="assembler", required=True, help="the toolchain's assembler (conda: ${AS})"
    )
    parser.add_argument("--march", required=True, help="the -march the library was compiled with (recorded)")
    parser.add_argument("--output", type=Path, help="the manifest to write [LIBRARY's name with .isa.json]")
    args = parser.parse_args(argv)
    output = args.output or default_output(args.library)
    if not args.library.is_file():
        print(
            f"runtime_manifest.py: error: {args.library} is not a file (fix: build the runtime first)",
            file=sys.stderr,
        )
        return 2
    try:
        document = manifest(args.objdump, args.assembler, args.library, args.march)
        write_atomically(output, json.dumps(document, indent=1) + "\n")
    except ManifestError as exc:
        print(f"runtime_manifest.py: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"runtime_manifest.py: error: cannot write {output} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    print(f"runtime_manifest.py: {output}: {len(document['functions'])} functions")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
