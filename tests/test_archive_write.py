"""The archive layer's writers: the same bytes whatever the machine, and read back as they were written."""

from __future__ import annotations

import hashlib
import io
import random
from dataclasses import replace
from pathlib import Path

import pytest

from flagtree_feedstock._archive import PackageMember, compressed, open_package
from flagtree_feedstock._archive.package_write import write_package
from flagtree_feedstock._archive.tar_stream import Kind, Member
from flagtree_feedstock._archive.tar_write import normal_mode


def _payload(size: int) -> bytes:
    """``size`` bytes that compress about 3:1 with matches of every length (a seeded vocabulary of short
    random words): enough work for zstd's long-range search, quickly made."""
    rng = random.Random(7)
    words = [rng.randbytes(rng.randrange(2, 24)) for _ in range(4000)]
    out = bytearray()
    while len(out) < size:
        out += b"".join(rng.choices(words, k=4096))
    return bytes(out[:size])


def _zstd(data: bytes, level: int, piece: int) -> bytes:
    out = io.BytesIO()
    with compressed.zstd_writer(out, level) as writer:
        for at in range(0, len(data), piece):
            writer.write(data[at : at + piece])
    return out.getvalue()


def test_zstd_bytes_do_not_depend_on_the_cores_nor_on_the_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """zstd's multi-threaded mode cuts its input into jobs of a fixed size (8 MiB at level 3), whatever the
    workers: 40 MB is five jobs, compressed on one, two and three workers, written in pieces of three sizes.
    One digest. (Its single-threaded mode writes other bytes: the writer never uses it.)"""
    data = _payload(40 << 20)
    digests = set()
    for workers, piece in ((1, 1 << 20), (2, 65_537), (3, 8 << 20)):
        monkeypatch.setattr(compressed, "threads", lambda workers=workers: workers)
        digests.add(hashlib.sha256(_zstd(data, 3, piece)).hexdigest())
    assert len(digests) == 1
    import zstandard  # noqa: PLC0415 - only to show what the single-threaded mode would write

    single = zstandard.ZstdCompressor(level=3).compressobj()
    assert hashlib.sha256(single.compress(data) + single.flush()).hexdigest() not in digests


# --- the package writer, read back by the package reader -------------------------------------------------------

PARTS = ["lib", "bin", "share", "a", "b.txt", "x y", "naïve", "日本", "n" * 90, "z.so.1", "d-1.0.dist-info"]


def _name(rng: random.Random, section: str) -> str:
    parts = [rng.choice(PARTS) for _ in range(rng.randrange(1, 4))]
    return "/".join(["info", *parts] if section == "info" else parts)


def _generated(rng: random.Random) -> list[tuple[PackageMember, bytes]]:
    """Members as a package may hold them, info/ first: files (empty, small, across blocks, a few hundred KB),
    folders, symlinks, hard links to an earlier file of the same tar; names up to over 100 bytes, not ASCII,
    with blanks; modes and times of every kind."""
    members: list[tuple[PackageMember, bytes]] = []
    for section in ("info", "pkg"):
        names: set[str] = set()
        files: list[str] = []
        for _ in range(rng.randrange(1, 25)):
            name = _name(rng, section)
            if any(name == n or name.startswith(f"{n}/") or n.startswith(f"{name}/") for n in names):
                continue  # a path and something below it: one of them would be a folder
            names.add(name)
            kind = rng.choice(["file", "file", "file", "dir", "symlink", "hardlink"])
            if kind == "hardlink" and not files:
                kind = "file"
            size = rng.choice([0, 1, 511, 512, 513, 4000, 300_000]) if kind == "file" else 0
            target = {"symlink": rng.choice(["x", "../lib/" + "t" * 120, "a/b"]), "hardlink": ""}.get(
                kind, ""
            )
            if kind == "hardlink":
                target = rng.choice(files)
            if kind == "file":
                files.append(name)
            mode = rng.choice([0o644, 0o755, 0o600, 0o777, 0o4755])
            member = PackageMember(
                section=section,  # type: ignore[arg-type]
                name=name,
                kind=kind,  # type: ignore[arg-type]
                size=size,
                target=target,
                mode=mode,
                mtime=rng.randrange(0, 1 << 33),
            )
            members.append((member, rng.randbytes(size)))
    return members


def _read_back(path: Path) -> list[tuple[PackageMember, bytes]]:
    found = []
    with open_package(path) as package:
        for member in package:
            data = b""
            while piece := package.read(1 << 16):
                data += piece
            found.append((member, data))
    return found


@pytest.mark.parametrize("suffix", [".conda", ".tar.bz2"])
@pytest.mark.parametrize("seed", range(12))
def test_what_the_writer_writes_the_reader_reads_as_it_was(tmp_path: Path, suffix: str, seed: int) -> None:
    """Generated members written, in pieces of every size, then read back: the same members, data, modes
    and times, in the same order; written twice, the same bytes."""
    rng = random.Random(seed)
    members = _generated(rng)
    path = tmp_path / f"gen-1-{seed}{suffix}"
    written = []
    for attempt in range(2):
        with write_package(path, stem=f"gen-1-{seed}", epoch=1_700_000_000, level=1) as writer:
            for member, data in members:
                piece = rng.choice([1, 100, 4096, 1 << 20])
                writer.add(member, (data[at : at + piece] for at in range(0, len(data), piece)))
        written.append(path.read_bytes())
        assert attempt or _read_back(path) == members
    assert written[0] == written[1]
    with open_package(path) as package:
        assert package.stem == f"gen-1-{seed}"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A member whose data is shorter than it says, or an interrupt, midway: nothing written, nothing left."""
    path = tmp_path / "x-1-0.conda"
    path.write_bytes(b"before")
    member = PackageMember(section="pkg", name="lib/x", kind="file", size=10, target="", mode=0o644, mtime=0)
    for failure in (ValueError, KeyboardInterrupt):
        with pytest.raises(failure), write_package(path, stem="x-1-0", epoch=0) as writer:
            if failure is ValueError:
                writer.add(member, [b"short"])
            writer.add(replace(member, name="lib/y", size=0))
            raise KeyboardInterrupt
        assert path.read_bytes() == b"before"
        assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_info_comes_first(tmp_path: Path) -> None:
    member = PackageMember(section="info", name="info/x", kind="file", size=0, target="", mode=0o644, mtime=0)
    with (
        pytest.raises(ValueError, match="info/ comes first"),
        write_package(tmp_path / "x-1-0.conda", stem="x-1-0", epoch=0) as writer,
    ):
        writer.add(replace(member, section="pkg", name="lib/x"))
        writer.add(member)


@pytest.mark.parametrize(
    ("kind", "mode", "normal"),
    [
        ("file", 0o644, 0o644),
        ("file", 0o666, 0o644),
        ("file", 0o600, 0o644),
        ("file", 0o2664, 0o644),
        ("file", 0o755, 0o755),
        ("file", 0o777, 0o755),
        ("file", 0o4755, 0o755),
        ("file", 0o610, 0o755),  # any executable bit, the group's here
        ("file", 0o100644, 0o644),  # the file type's bits some writers put above the mode's
        ("hardlink", 0o666, 0o644),
        ("hardlink", 0o701, 0o755),
        ("dir", 0o777, 0o755),
        ("dir", 0o1777, 0o755),
        ("dir", 0o700, 0o755),
        ("symlink", 0o777, 0o777),
        ("symlink", 0o120777, 0o777),
    ],
)
def test_a_copy_s_modes_are_normal(kind: Kind, mode: int, normal: int) -> None:
    """Issue 47 item 5: files 0644, or 0755 where any executable bit was set; folders 0755; a symlink keeps its
    own (its mode is never read); no setuid, setgid, sticky, group- or world-writable bit otherwise."""
    assert normal_mode(Member(name="x", kind=kind, size=0, target="", mode=mode)) == normal
