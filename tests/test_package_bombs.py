"""Packages that cost gigabytes to read are refused from their headers, within 600 MB and a minute.

Each bomb of issue 28, and its neighbours, is made at test time (a few KB of file), put in a channel folder and
given to ``flagtree-feedstock channel index`` as a child whose own peak memory (``VmHWM``) and time are
measured (:mod:`_peak_memory`). Each is refused in one line naming the package and the member, exit status 9,
and no index is written.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from _hostile_packages import (
    STEM,
    Part,
    Zeros,
    channel_with,
    conda,
    empty_files,
    gnu_long_name,
    header,
    info_members,
    member,
    pax,
    raw_header,
    tar_bz2,
    zstd,
)
from _peak_memory import MEMORY_LIMIT_KIB, TIME_LIMIT_S, run_measured
from _tools import require_executable


def _sparse_index(tmp_path: Path) -> tuple[str, bytes]:
    """The issue's 233-byte .tar.bz2: GNU tar's sparse info/index.json of 4 GiB (read whole, it cost 4.2 GB)."""
    tar = require_executable("tar", "tar")
    tree = tmp_path / "tree"
    (tree / "info").mkdir(parents=True)
    with (tree / "info" / "index.json").open("wb") as handle:
        handle.truncate(4 << 30)
    archive = tmp_path / "sparse.tar.bz2"
    subprocess.run(
        [tar, "--sparse", "--format=gnu", "-cjf", str(archive), "-C", str(tree), "info"], check=True
    )
    shutil.rmtree(tree)
    return f"{STEM}.tar.bz2", archive.read_bytes()


def _bz2(parts: list[Part]) -> Callable[[Path], tuple[str, bytes]]:
    return lambda _: (f"{STEM}.tar.bz2", tar_bz2(parts))


def _conda(info: list[Part], pkg: list[Part] | None = None) -> Callable[[Path], tuple[str, bytes]]:
    return lambda _: (f"{STEM}.conda", conda(info, pkg or []))


def _window_bomb(_: Path) -> tuple[str, bytes]:
    """A .conda whose pkg tar's zstd frame asks for a 2 GiB window (its window descriptor rewritten)."""
    frame = bytearray(zstd(member("lib/x", b"x")))
    assert frame[:4] == b"\x28\xb5\x2f\xfd" and frame[4] == 0, "a frame header with a window descriptor"
    frame[5] = 21 << 3  # window log 10 + 21 = 31
    return f"{STEM}.conda", conda(info_members(), bytes(frame))


LONG = "lib/" + "n" * 20_000
TINY_ENTRIES = b'{"paths":[' + b'{"_path":"a"},' * (((16 << 20) - 32) // 14) + b'{"_path":"a"}]}'

# case -> (what makes the package, the refusal after "<package> is refused, and was not used: ", or damaged)
BOMBS: dict[str, tuple[Callable[[Path], tuple[str, bytes]], str]] = {
    "sparse-index-json-4-gib": (_sparse_index, "member 'info/index.json' is a sparse member (GNU)"),
    "member-declaring-64-gib": (
        _bz2([*info_members(), raw_header(b"lib/big", kind=tarfile.REGTYPE, size=64 << 30)]),
        f"member 'lib/big' declares {64 << 30} bytes, above the {4 << 30} one member may have",
    ),
    "member-declaring-3-gib-in-a-tiny-file": (
        _bz2([*info_members(), raw_header(b"lib/big", kind=tarfile.REGTYPE, size=3 << 30)]),
        f"member 'lib/big': its data of {3 << 30} bytes would take the archive above {256 << 20} bytes unpacked",
    ),
    "data-ending-before-its-size": (
        _bz2([*info_members(), raw_header(b"lib/short", kind=tarfile.REGTYPE, size=100 << 20), b"x" * 512]),
        "member 'lib/short': the archive ends inside its data",
    ),
    "pax-header-of-2-gib": (
        _conda(
            [*info_members(), header("././@PaxHeader", kind=tarfile.XHDTYPE, size=2 << 30), Zeros(2 << 30)]
        ),
        f"a PAX header declares {2 << 30} bytes, above the {64 << 10} one may have",
    ),
    "gnu-long-name-of-2-gib": (
        _bz2(
            [
                *info_members(),
                header("././@LongLink", kind=tarfile.GNUTYPE_LONGNAME, size=2 << 30, posix=False),
            ]
        ),
        f"a GNU long-name header declares {2 << 30} bytes, above the {64 << 10} one may have",
    ),
    "index-json-of-2-gib": (
        _conda([header("info/index.json", size=2 << 30), Zeros(2 << 30)]),
        f"member 'info/index.json': its data of {2 << 30} bytes would take the archive above",
    ),
    "paths-json-of-20-mib": (
        _conda([*info_members(extra=False), header("info/paths.json", size=20 << 20), Zeros(20 << 20)]),
        f"member 'info/paths.json' declares {20 << 20} bytes, above the {16 << 20} an info file may have",
    ),
    # The most Python objects an info file may become: 16 MiB of the smallest entries, parsed, then refused.
    "paths-json-of-16-mib-of-tiny-entries": (
        _bz2(info_members(extra=False) + member("info/paths.json", TINY_ENTRIES)),
        "its info/paths.json lists 'a', which is no file or link the package holds",
    ),
    "members-above-100000": (
        lambda _: (f"{STEM}.conda", conda(info_members(), empty_files(100_001))),
        "member 'lib/f00100000': more than 100000 members",
    ),
    "names-above-64-mib": (
        lambda _: (f"{STEM}.conda", conda(info_members(), empty_files(17_000, name_length=4000))),
        f"names above {64 << 20} bytes in all",
    ),
    "index-json-nested-100000-deep": (
        _bz2(info_members(index=b"[" * 100_000 + b"]" * 100_000)),
        "its info/index.json is nested deeper than Python's JSON parser goes",
    ),
    "name-of-20000-characters": (
        _bz2([*info_members(), *gnu_long_name(LONG), *member("x", b"")]),
        f"a GNU long name of 20004 bytes after 'info/paths.json', above the 4096 a path may have: {LONG[:120]!r} ",
    ),
    "pax-path-of-5000-characters": (
        _bz2([*info_members(), *pax({"path": LONG[:5000]}), *member("x", b"")]),
        f"member {LONG[:120]!r}... (5000 characters): a PAX path above the 4096 bytes a path may have",
    ),
    "zstd-window-of-2-gib": (_window_bomb, "Frame requires too much memory for decoding"),
}


@pytest.mark.parametrize("case", BOMBS)
def test_a_bomb_is_refused_from_its_headers_within_600_mb_and_a_minute(case: str, tmp_path: Path) -> None:
    make, why = BOMBS[case]
    filename, content = make(tmp_path)
    assert len(content) < 1 << 20, f"the bomb is {len(content)} bytes"
    channel, package = channel_with(tmp_path, filename, content)
    done = run_measured(["flagtree-feedstock", "channel", "index", str(channel)], tmp_path)
    assert done.returncode == 9, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.error_lines
    assert line.startswith(f"flagtree-feedstock: error: {package} is "), line
    assert why in line
    assert len(line) < 1000
    assert not (channel / "noarch" / "repodata.json").exists()
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"peak memory {done.peak_kib} KiB"
    assert done.seconds < TIME_LIMIT_S


def test_the_measure_sees_a_child_s_own_memory(tmp_path: Path) -> None:
    """The measuring itself: a child that holds 700 MB is seen above the limit (VmHWM, not pytest's size)."""
    hog = tmp_path / "hog.py"
    hog.write_text("import sys\nheld = bytearray(700 << 20)\nheld[::4096] = b'x' * len(held[::4096])\n")
    done = run_measured(["python", str(hog)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.peak_kib > MEMORY_LIMIT_KIB
    quiet = run_measured(["python", "-c", "pass"], tmp_path)
    assert 0 < quiet.peak_kib < 64 << 10


# The bombs of a .conda, and the issue 37 one: a pkg tar of a few KB holding a member of 2 GiB (a reader of
# its own, tarfile on the whole decompressed tar, cost `sbom` 2.1 GB).
SBOM_BOMBS = {
    "pkg-member-of-2-gib": _conda(info_members(), [header("lib/big", size=2 << 30), Zeros(2 << 30)]),
    "index-json-of-2-gib": BOMBS["index-json-of-2-gib"][0],
    "zstd-window-of-2-gib": _window_bomb,
}


@pytest.mark.parametrize("case", SBOM_BOMBS)
def test_sbom_reads_a_bomb_as_every_reader_does_within_600_mb_and_a_minute(case: str, tmp_path: Path) -> None:
    """`sbom PACKAGE_FILE` reads through the one bounded package reader: the bomb is one line, exit 2."""
    filename, content = SBOM_BOMBS[case](tmp_path)
    assert len(content) < 1 << 20, f"the bomb is {len(content)} bytes"
    package = tmp_path / filename
    package.write_bytes(content)
    done = run_measured(["flagtree-feedstock", "sbom", str(package)], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.error_lines
    assert line.startswith(f"flagtree-feedstock: error: {package}: not a whole conda package ("), line
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"peak memory {done.peak_kib} KiB"
    assert done.seconds < TIME_LIMIT_S
