"""`--llvm-archive`: every member is checked, and the inspection bounded, before anything is unpacked.

Hostile archives are real tar archives (Python's tarfile, GNU tar for sparse members): a member that would
land outside the top folder when unpacked, a device or a FIFO is refused naming it; the programs are read
from the archive without being copied out. A sparse member costs a few bytes of archive and gigabytes
unpacked: the inspection runs in a child process whose file writes are capped (RLIMIT_FSIZE) and whose peak
memory is measured: its own ``VmHWM`` (/proc/self/status), which starts afresh at exec. Not ``ru_maxrss``,
which Linux carries over from the parent at fork, so it would report at least the size of this test run (after
a test that imported torch, 355 MB).
"""

from __future__ import annotations

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

from _tools import require_executable
from flagtree_feedstock.cli import main
from test_llvm_archive import TOP, make_tree, programs  # noqa: F401 - programs is a fixture

ROOT = Path(__file__).resolve().parents[1]
# What a child inspecting an archive may write to a file, and its peak memory: far below what the sparse
# members unpack to, far above what reading headers needs (the interpreter and the toolkit: ~60 MB).
WRITE_LIMIT = 64 << 20
MEMORY_LIMIT_KIB = 300 << 10

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
        f"a hard link to etc/passwd, outside {TOP}/",
    ),
    "hardlink-dotdot": (
        [{"name": f"{TOP}/lib/h", "type": tarfile.LNKTYPE, "linkname": f"{TOP}/../etc/passwd"}],
        f"{TOP}/lib/h",
        f"a hard link to {TOP}/../etc/passwd, outside the archive's folder",
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
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(special))
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
        timeout=300,
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


def _sparse_archive(tmp_path: Path, files: dict[str, Callable[[Path], None]]) -> Path:
    """A .tar.gz of TOP/ holding ``files`` (name -> what writes it), its holes kept as holes (GNU tar)."""
    tar = require_executable("tar", "tar")
    tree = tmp_path / "sparse" / TOP
    (tree / "bin").mkdir(parents=True)
    for name, write in files.items():
        write(tree / name)
    archive = tmp_path / "sparse.tar.gz"
    subprocess.run(
        [tar, "--sparse", "--format=gnu", "-czf", str(archive), "-C", str(tree.parent), TOP], check=True
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


def test_a_sparse_4_gib_program_costs_no_disk_and_no_memory_even_with_render_only(tmp_path: Path) -> None:
    """The issue's case: a tiny archive whose bin/ member unpacks to 4 GiB was copied out whole and read
    whole (4 GiB of disk, 4 GB of memory). Now it is refused from its header, unread."""
    archive = _sparse_archive(tmp_path, {"bin/mlir-tblgen": _hole(4 << 30)})
    assert archive.stat().st_size < 4096
    done, peak = _child(
        "from flagtree_feedstock.cli import main\n"
        f"sys.exit(main(['build', '--render-only', '--llvm-archive', {str(archive)!r}]))",
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"member '{TOP}/bin/mlir-tblgen' is 4.0 GiB, above the 1.0 GiB a program in bin/ may have (Triton's "
        "largest LLVM tools are a few hundred MB); refused before anything is unpacked" in done.stderr
    )
    assert peak < MEMORY_LIMIT_KIB, f"peak memory {peak} KiB"


def test_programs_are_read_in_place_holes_and_all(
    programs: dict[str, Path],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """A program whose section headers lie 768 MiB in (below the size limit) is read to its needs; a
    sparse non-ELF member and a script are skipped by their first bytes. Nothing is copied out: the child
    may write no more than 64 MiB to any file, and its peak memory stays far below the member's size."""
    files = {
        "bin/mlir-tblgen": _program_with_a_hole(programs["glibc-2.35"], 768 << 20),
        "bin/llvm-tblgen": lambda path: shutil.copy2(programs["glibc-2.34"], path),
        "bin/zeros": _hole(900 << 20),
        "bin/git-clang-format": lambda path: path.write_text("#!/usr/bin/env python3\n"),
    }
    archive = _sparse_archive(tmp_path, files)
    done, peak = _child(
        "from flagtree_feedstock.llvm_archive.inspection import inspect\n"
        "from pathlib import Path\n"
        f"print(json.dumps(inspect(Path({str(archive)!r})).__dict__))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"top": TOP, "glibc": "GLIBC_2.35", "glibc_program": "mlir-tblgen"}
    assert peak < MEMORY_LIMIT_KIB, f"peak memory {peak} KiB"
