"""`--llvm-archive`: every member is checked, and the inspection bounded, before anything is unpacked.

Hostile archives are real tar archives (Python's tarfile, GNU tar, raw headers): a member that would land
outside the top folder when unpacked, a device or a FIFO, a sparse member, a member two readers read
differently (a PAX and a GNU name, two members at one path) is refused naming it; the programs are read from
the archive without being copied out. A header declaring gigabytes costs a few bytes of archive: the
inspection runs in a child process whose file writes are capped (RLIMIT_FSIZE) and whose own peak memory is
measured (``VmHWM``, which starts afresh at exec, unlike ``ru_maxrss``). Not ``ru_maxrss``,
which Linux carries over from the parent at fork, so it would report at least the size of this test run (after
a test that imported torch, 355 MB).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from _hostile_packages import Part, gnu_long_name, header, member, pax, raw_header, symlink, tar_chunks
from _peak_memory import run_measured
from _timing import seconds
from _tools import require_executable
from flagtree_feedstock.cli import main
from test_llvm_archive import TOP, make_tree, programs  # noqa: F401 - programs is a fixture

ROOT = Path(__file__).resolve().parents[1]
# What a child inspecting an archive may write to a file, and its peak memory: far below what the sparse
# members unpack to, far above what reading headers needs (the interpreter and the toolkit: ~60 MB).
WRITE_LIMIT = 64 << 20
MEMORY_LIMIT_KIB = 300 << 10  # (issue 28 allows a command 600 MB; reading an archive needs far less)
# Reading a program of 160 MiB in place: the interpreter and the toolkit (~45 MB) and the 16 MiB kept.
READING_LIMIT_KIB = 128 << 10

Member = dict[str, object]


def _archive(root: Path, program: Path, extra: list[Member]) -> Path:
    """A stand-in archive (make_tree's) with ``extra`` members: name, type, linkname, data."""
    tree = make_tree(root / "tree", program)
    archive = root / "archive.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
        for member in extra:
            info = tarfile.TarInfo(str(member["name"]))
            info.type = member.get("type", tarfile.REGTYPE)  # type: ignore[assignment]
            info.linkname = str(member.get("linkname", ""))
            data = bytes(member.get("data", b""))  # type: ignore[call-overload]
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return archive


def _link(name: str, target: str) -> Member:
    return {"name": f"{TOP}/{name}", "type": tarfile.SYMTYPE, "linkname": target}


BAD_MEMBERS: dict[str, tuple[list[Member], str, str]] = {
    "dotdot": (
        [{"name": f"{TOP}/../outside.txt", "data": b"x"}],
        f"{TOP}/../outside.txt",
        "a path with '..'",
    ),
    "dotdot-inside": (
        [{"name": f"{TOP}/lib/../../lib/x", "data": b"x"}],
        f"{TOP}/lib/../../lib/x",
        "a path with '..'",
    ),
    "absolute-name": ([{"name": "/tmp/planted", "data": b"x"}], "/tmp/planted", "an absolute path"),
    "absolute-symlink": (
        [_link("lib/libz.so", "/etc/passwd")],
        f"{TOP}/lib/libz.so",
        "a symlink to the absolute path /etc/passwd",
    ),
    "symlink-up": (
        [_link("lib/passwd", "../../etc/passwd")],
        f"{TOP}/lib/passwd",
        f"a symlink to ../../etc/passwd, which does not resolve inside {TOP}/",
    ),
    # Textually up/../x is lib/x, inside; but up is a link to TOP, so on disk it is TOP's parent's x.
    "symlink-through-a-symlink": (
        [_link("lib/up", ".."), _link("lib/x", "up/../x")],
        f"{TOP}/lib/x",
        f"a symlink to up/../x, which does not resolve inside {TOP}/",
    ),
    "symlink-loop": (
        [_link("lib/a", "b"), _link("lib/b", "a")],
        f"{TOP}/lib/a",
        f"a symlink to b, which does not resolve inside {TOP}/",
    ),
    "hardlink-out": (
        [{"name": f"{TOP}/lib/h", "type": tarfile.LNKTYPE, "linkname": "etc/passwd"}],
        f"{TOP}/lib/h",
        "a hard link to 'etc/passwd', which is no earlier file of the archive",
    ),
    "hardlink-dotdot": (
        [{"name": f"{TOP}/lib/h", "type": tarfile.LNKTYPE, "linkname": f"{TOP}/../etc/passwd"}],
        f"{TOP}/lib/h",
        f"a hard link to '{TOP}/../etc/passwd', outside the archive's folder",
    ),
    "fifo": ([{"name": f"{TOP}/lib/pipe", "type": tarfile.FIFOTYPE}], f"{TOP}/lib/pipe", "a FIFO"),
    "char-device": (
        [{"name": f"{TOP}/lib/tty", "type": tarfile.CHRTYPE}],
        f"{TOP}/lib/tty",
        "a device file",
    ),
    "block-device": (
        [{"name": f"{TOP}/lib/disk", "type": tarfile.BLKTYPE}],
        f"{TOP}/lib/disk",
        "a device file",
    ),
}


@pytest.mark.parametrize("case", BAD_MEMBERS)
def test_a_member_that_would_leave_the_folder_or_is_no_file_is_refused_naming_it(
    case: str,
    programs: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra, member, why = BAD_MEMBERS[case]
    archive = _archive(tmp_path, programs["glibc-2.34"], extra)
    rendered: list[object] = []
    monkeypatch.setattr("flagtree_feedstock.recipe.render.render", lambda *a, **k: rendered.append(a) or [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["build", "--render-only", "--llvm-archive", str(archive)]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("flagtree-feedstock: error:")]
    assert line == (
        f"flagtree-feedstock: error: --llvm-archive {archive}: member {member!r} is {why}; refused before "
        "anything is unpacked (fix: pass Triton's own archive (an LLVM install tree holds none of these), "
        "downloaded again)"
    )
    assert rendered == []


def test_links_that_stay_inside_the_folder_pass(
    programs: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What LLVM's install holds: versioned library links, tool aliases, links across its folders."""
    from flagtree_feedstock import llvm_archive  # noqa: PLC0415

    extra = [
        {"name": f"{TOP}/lib/libLTO.so.20git", "data": b"\x7fELF stand-in"},
        _link("lib/libLTO.so", "libLTO.so.20git"),
        _link("lib64", "lib"),
        _link("bin/clang++", "mlir-tblgen"),
        _link("include/lto", "../lib64/libLTO.so"),
        _link("lib/self", "../lib/./libLTO.so"),
        {"name": f"{TOP}/bin/ld.lld", "type": tarfile.LNKTYPE, "linkname": f"{TOP}/bin/llvm-tblgen"},
    ]
    archive = _archive(tmp_path, programs["glibc-2.34"], extra)
    found = llvm_archive.from_options(
        str(archive), None, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, fetch=True
    )
    assert found is not None and found.inspection is not None
    assert found.inspection.top == TOP


# ---- a FOLDER: a socket or a FIFO in it is refused in one line ----


@pytest.mark.parametrize("kind", ["socket", "fifo"])
def test_a_socket_or_fifo_in_a_folder_is_one_line(
    kind: str,
    programs: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = make_tree(tmp_path, programs["glibc-2.34"])
    special = tree / "lib" / "agent"
    if kind == "socket":
        # Bound by its name from its folder: a socket's path is at most 107 bytes, and a pytest-xdist worker's
        # tmp_path (popen-gwN/) takes the whole path beyond that.
        here = Path.cwd()
        os.chdir(special.parent)
        try:
            with socket.socket(socket.AF_UNIX) as listening:
                listening.bind(special.name)
        finally:
            os.chdir(here)
    else:
        os.mkfifo(special)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["build", "--render-only", "--llvm-archive", str(tree)]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("flagtree-feedstock: error:")]
    what = "a socket" if kind == "socket" else "a FIFO"
    assert line == (
        f"flagtree-feedstock: error: --llvm-archive {tree}: {special} is {what}, not a file an LLVM install "
        "holds (fix: remove it from the folder (or pass a copy without it))"
    )
    assert "Traceback" not in err
    cache = tmp_path / "cache" / "flagtree-feedstock" / "llvm-archives"
    assert not cache.exists() or list(cache.iterdir()) == []


# ---- bounded: sparse members, read in a child whose writes and memory are measured ----


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (WRITE_LIMIT, WRITE_LIMIT))


def _child(code: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``code`` (the toolkit imported) in a child with file writes capped; its result and peak memory (KiB:
    the child's own high-water mark, ``VmHWM:   1234 kB``)."""
    probe = (
        "import json, re, sys\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "finally:\n"
        "    with open('/proc/self/status') as status:\n"
        "        print(re.search(r'^VmHWM:\\s*(\\d+) kB$', status.read(), re.MULTILINE)[1], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        # The environment kept whole: PYTHONPATH (the mutation runner's copy comes first on it) included.
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        timeout=seconds(300),
        check=False,
    )
    *_, peak = done.stderr.splitlines() or ["0"]
    return done, int(peak)


def test_the_peak_measured_is_the_childs_own_not_this_runs(tmp_path: Path) -> None:
    """A test run above the cap (here: after it touched a cap's worth of memory; in real runs, after a test that
    imported torch) does not make a child that does nothing look above it: Linux carries ``ru_maxrss`` over
    from the parent at fork, ``VmHWM`` starts afresh at exec."""
    ballast = b"\x01" * (MEMORY_LIMIT_KIB << 10)  # written, so every page of it is resident
    done, peak = _child("pass", tmp_path)
    assert done.returncode == 0, done.stderr
    assert 0 < peak < MEMORY_LIMIT_KIB // 4, f"peak memory {peak} KiB"
    del ballast


def _tree_archive(tmp_path: Path, files: dict[str, Callable[[Path], None]], *, sparse: bool) -> Path:
    """A .tar.gz of TOP/ holding ``files`` (name -> what writes it), by GNU tar: its holes kept as holes
    (``sparse``, a sparse member) or written out as zeros."""
    tar = require_executable("tar", "tar")
    tree = tmp_path / "sparse" / TOP
    (tree / "bin").mkdir(parents=True)
    for name, write in files.items():
        write(tree / name)
    archive = tmp_path / "sparse.tar.gz"
    subprocess.run(
        [
            tar,
            *(["--sparse"] if sparse else []),
            "--format=gnu",
            "-czf",
            str(archive),
            "-C",
            str(tree.parent),
            TOP,
        ],
        check=True,
    )
    shutil.rmtree(tree.parent)
    return archive


def _hole(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with path.open("wb") as handle:
            handle.truncate(size)

    return write


def _program_with_a_hole(program: Path, hole: int) -> Callable[[Path], None]:
    """``program`` with its section header table moved ``hole`` bytes past its end (e_shoff rewritten): what
    a reader must reach, behind gigabytes no reader should hold, while the version needs stay at its start."""

    def write(path: Path) -> None:
        data = bytearray(program.read_bytes())
        assert data[:6] == b"\x7fELF\x02\x01"  # ELF64, little-endian: e_shoff at 0x28, e_shentsize at 0x3a
        shoff = int.from_bytes(data[0x28:0x30], "little")
        size = int.from_bytes(data[0x3A:0x3C], "little") * int.from_bytes(data[0x3C:0x3E], "little")
        table = bytes(data[shoff : shoff + size])
        moved = (len(data) + hole + 7) // 8 * 8
        data[0x28:0x30] = moved.to_bytes(8, "little")
        with path.open("wb") as handle:
            handle.write(data)
            handle.seek(moved)
            handle.write(table)
        path.chmod(0o755)

    return write


def test_a_sparse_member_is_refused_from_its_header(tmp_path: Path) -> None:
    """The issue's case: a tiny archive whose bin/ member unpacks to 4 GiB was copied out whole and read
    whole (4 GiB of disk, 4 GB of memory). A sparse member is refused now, unread: readers fill holes
    differently (Rust's tar crate knows no PAX sparse format), and Triton's archive holds none."""
    archive = _tree_archive(tmp_path, {"bin/mlir-tblgen": _hole(4 << 30)}, sparse=True)
    assert archive.stat().st_size < 4096
    done = run_measured(
        ["flagtree-feedstock", "build", "--render-only", "--llvm-archive", str(archive)], tmp_path
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.error_lines
    assert (
        f"member '{TOP}/bin/mlir-tblgen' is a sparse member (GNU), whose holes readers fill differently"
        in line
    )
    assert done.peak_kib < MEMORY_LIMIT_KIB, f"peak memory {done.peak_kib} KiB"


def test_a_program_above_1_gib_is_refused_from_its_header(tmp_path: Path) -> None:
    """A bin/ member whose header declares 1.25 GiB (the archive holds none of it) is refused for its size,
    unread; 16 MiB of incompressible data before it make the archive big enough that the limit on what an
    archive may unpack (100 times its size) lets it through to that check."""
    parts = [
        *member(f"{TOP}/lib/random.a", os.urandom(16 << 20)),
        raw_header(f"{TOP}/bin/mlir-tblgen".encode(), kind=tarfile.REGTYPE, size=5 << 28),
    ]
    archive = tmp_path / "declared.tar.gz"
    archive.write_bytes(gzip.compress(b"".join(tar_chunks(parts)), compresslevel=1))
    done = run_measured(
        ["flagtree-feedstock", "build", "--render-only", "--llvm-archive", str(archive)], tmp_path
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.error_lines
    assert (
        f"member '{TOP}/bin/mlir-tblgen' is 1.2 GiB, above the 1.0 GiB a program in bin/ may have (Triton's "
        "largest LLVM tools are a few hundred MB); refused before anything is unpacked" in line
    )
    assert done.peak_kib < MEMORY_LIMIT_KIB, f"peak memory {done.peak_kib} KiB"


def test_programs_are_read_in_place_holes_and_all(
    programs: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """A program whose section headers lie 160 MiB in is read to its needs; a non-ELF member of zeros and a
    script are skipped by their first bytes. Nothing is copied out: the child may write no more than 64 MiB to
    any file, and its peak memory stays far below the member's size. (The archive, zeros, unpacks to 230 MiB:
    within the 256 MiB any archive may unpack to, whatever its size.)"""
    files = {
        "bin/mlir-tblgen": _program_with_a_hole(programs["glibc-2.35"], 160 << 20),
        "bin/llvm-tblgen": lambda path: shutil.copy2(programs["glibc-2.34"], path),
        "bin/zeros": _hole(64 << 20),
        "bin/git-clang-format": lambda path: path.write_text("#!/usr/bin/env python3\n"),
    }
    archive = _tree_archive(tmp_path, files, sparse=False)
    done, peak = _child(
        "from flagtree_feedstock.llvm_archive.inspection import inspect\n"
        "from pathlib import Path\n"
        f"print(json.dumps(inspect(Path({str(archive)!r})).__dict__))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"top": TOP, "glibc": "GLIBC_2.35", "glibc_program": "mlir-tblgen"}
    assert peak < READING_LIMIT_KIB, f"peak memory {peak} KiB"


# ---- what two readers read differently, and headers declaring gigabytes, through the console script ----

LONG = f"{TOP}/lib/" + "n" * 20_000
# case -> (the archive's members, the refusal after "--llvm-archive ARCHIVE: ")
HOSTILE: dict[str, tuple[list[Part], str]] = {
    # tarfile took the GNU long link, Rust's tar crate the PAX one: the engine made lib/libdiff.a -> /etc/hostname.
    "pax-link-and-gnu-long-link": (
        [
            header(
                "././@LongLink",
                kind=tarfile.GNUTYPE_LONGLINK,
                size=len("../bin/llvm-tblgen") + 1,
                posix=False,
            ),
            b"../bin/llvm-tblgen".ljust(512, b"\0"),
            *pax({"linkpath": "/etc/hostname"}),
            *symlink(f"{TOP}/lib/libdiff.a", "x"),
        ],
        "member '/etc/hostname' has both a PAX link path and a GNU long link: readers take different ones",
    ),
    "pax-path-and-gnu-long-name": (
        [*gnu_long_name(f"{TOP}/lib/a"), *pax({"path": f"{TOP}/lib/b"}), *member(f"{TOP}/lib/x", b"")],
        f"member '{TOP}/lib/b' has both a PAX path and a GNU long name ('{TOP}/lib/a'): readers take different ones",
    ),
    "duplicate-path": (
        [*member(f"{TOP}/lib/x", b"one"), *member(f"{TOP}/lib/./x", b"two")],
        f"member '{TOP}/lib/./x' (file) is a second member at a path already held (file): readers keep different ones",
    ),
    "file-and-link": (
        [*member(f"{TOP}/lib/x", b""), *symlink(f"{TOP}/lib/x", "../bin/mlir-tblgen")],
        (
            f"member '{TOP}/lib/x' (symlink) is a second member at a path already held (file): readers keep "
            "different ones"
        ),
    ),
    "gnu-long-name-of-4-gib": (
        [header("././@LongLink", kind=tarfile.GNUTYPE_LONGNAME, size=4 << 30, posix=False)],
        f"a GNU long-name header declares {4 << 30} bytes, above the {64 << 10} one may have",
    ),
    "pax-header-of-2-gib": (
        [header("././@PaxHeader", kind=tarfile.XHDTYPE, size=2 << 30)],
        f"a PAX header declares {2 << 30} bytes, above the {64 << 10} one may have",
    ),
    "name-of-20000-characters": (
        [*gnu_long_name(LONG), *member("x", b"")],
        f"a GNU long name of {len(LONG)} bytes after '', above the 4096 a path may have: {LONG[:120]!r};",
    ),
    "include-member-of-8-gib": (
        [raw_header(f"{TOP}/include/big.h".encode(), kind=tarfile.REGTYPE, size=8 << 30)],
        f"member '{TOP}/include/big.h' declares {8 << 30} bytes, above the {4 << 30} one member may have",
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_an_archive_two_readers_read_differently_or_a_bomb_is_one_bounded_line(
    case: str, tmp_path: Path
) -> None:
    parts, why = HOSTILE[case]
    archive = tmp_path / "hostile.tar.gz"
    archive.write_bytes(gzip.compress(b"".join(tar_chunks(parts))))
    assert archive.stat().st_size < 4096
    done = run_measured(
        ["flagtree-feedstock", "build", "--render-only", "--llvm-archive", str(archive)], tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.error_lines
    assert line.startswith(f"flagtree-feedstock: error: --llvm-archive {archive}: {why}"), line
    assert line.endswith(
        "refused before anything is unpacked (fix: pass Triton's own archive (an LLVM install tree "
        "holds none of these), downloaded again)"
    )
    assert len(line) < 1000
    assert done.peak_kib < MEMORY_LIMIT_KIB and done.seconds < seconds(60)
