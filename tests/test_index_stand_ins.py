"""Indexing from stand-ins (channel/index_stand_ins.py): the repodata.json written is byte for byte what
py-rattler's indexer writes from the packages themselves, but for the time each package is first indexed (the
clock's); a package indexed before keeps its time; a damaged package is refused in one line, nothing written;
a failure or a signal meanwhile leaves neither the scratch channel nor a half-written index."""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from rattler.index import index_fs

from _peak_memory import console_script
from flagtree_feedstock._archive import PackageMember
from flagtree_feedstock._archive.package_write import write_package
from flagtree_feedstock.channel import index as channel_index
from flagtree_feedstock.channel import index_stand_ins
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.errors import ChannelError

_INDEXED = re.compile(rb'"indexed_timestamp":(\d+)')


def _package(
    channel: Path, subdir: str, name: str, suffix: str, run_exports: dict[str, list[str]] | None
) -> None:
    """A package with a payload of 200 KiB that compresses poorly (its stand-in's digests differ from its own)."""
    index: dict[str, object] = {
        "name": name,
        "version": "1.0",
        "build": "h0_0",
        "build_number": 0,
        "subdir": subdir,
        "depends": ["python >=3.10"],
        "timestamp": 1_700_000_000_000,
    }
    if subdir == "noarch":
        index["noarch"] = "generic"
    payload = random.Random(name).randbytes(200 << 10)
    members = {
        "info/index.json": json.dumps(index).encode(),
        "info/paths.json": json.dumps({"paths": [], "paths_version": 1}).encode(),
        **({"info/run_exports.json": json.dumps(run_exports).encode()} if run_exports else {}),
        f"lib/{name}.a": payload,
    }
    path = channel / subdir / f"{name}-1.0-h0_0{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with write_package(path, stem=f"{name}-1.0-h0_0", epoch=0, level=1) as writer:
        for member_name, data in members.items():
            section = "info" if member_name.startswith("info/") else "pkg"
            member = PackageMember(
                section=section, name=member_name, kind="file", size=len(data), target="", mode=0o644, mtime=0
            )
            writer.add(member, [data])


PACKAGES = [
    ("linux-64", "alpha", ".conda", {"weak": ["alpha >=1.0"]}),
    ("linux-64", "beta", ".tar.bz2", None),
    ("linux-64", "gamma", ".tar.bz2", {"strong": ["gamma"]}),
    ("linux-aarch64", "delta", ".conda", None),
    ("noarch", "epsilon", ".conda", {"weak_constrains": ["epsilon 1.*"]}),
]


def _indexed_times(repodata: bytes) -> list[int]:
    return [int(found) for found in _INDEXED.findall(repodata)]


def _same_but_new_times(ours: bytes, theirs: bytes, *, since_ms: int) -> None:
    """``ours`` is ``theirs`` byte for byte but for the indexed_timestamp of packages indexed since ``since_ms``
    (each run reads the clock): those are the clock's since then, in both."""
    old = {t for t in _indexed_times(theirs) if t < since_ms}

    def masked(data: bytes) -> bytes:
        return _INDEXED.sub(lambda m: m[0] if int(m[1]) in old else b'"indexed_timestamp":NEW', data)

    assert masked(ours) == masked(theirs)


def _twins(tmp_path: Path) -> tuple[Path, Path]:
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    for subdir, name, suffix, run_exports in PACKAGES:
        _package(theirs, subdir, name, suffix, run_exports)
    shutil.copytree(theirs, ours)
    return theirs, ours


def _rattler_index(channel: Path) -> None:
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    shutil.rmtree(channel / ".tmp", ignore_errors=True)


def test_the_index_is_the_indexer_s_own_from_the_packages(tmp_path: Path) -> None:
    theirs, ours = _twins(tmp_path)
    since = time.time_ns() // 1_000_000
    _rattler_index(theirs)
    written = index_channel(ours)
    assert [p.relative_to(ours) for p in written] == [
        Path(s, "repodata.json") for s in ("linux-64", "linux-aarch64", "noarch")
    ]
    for repodata in written:
        _same_but_new_times(
            repodata.read_bytes(), (theirs / repodata.relative_to(ours)).read_bytes(), since_ms=since
        )
    records = json.loads((ours / "linux-64" / "repodata.json").read_bytes())
    assert records["packages.conda"]["alpha-1.0-h0_0.conda"]["run_exports"] == {"weak": ["alpha >=1.0"]}
    assert sorted(p.name for p in ours.iterdir()) == ["linux-64", "linux-aarch64", "noarch"]  # no .tmp


def test_a_second_index_keeps_the_times_packages_were_first_indexed(tmp_path: Path) -> None:
    theirs, ours = _twins(tmp_path)
    _rattler_index(theirs)
    for subdir in ("linux-64", "linux-aarch64", "noarch"):
        shutil.copyfile(theirs / subdir / "repodata.json", ours / subdir / "repodata.json")
    first = {
        name: record["indexed_timestamp"]
        for repodata in theirs.glob("*/repodata.json")
        for records in ("packages", "packages.conda")
        for name, record in json.loads(repodata.read_bytes())[records].items()
    }
    time.sleep(0.01)  # a later clock for the packages indexed now, so that a kept time shows
    for channel in (theirs, ours):
        _package(channel, "linux-64", "zeta", ".conda", None)
        (channel / "linux-64" / "beta-1.0-h0_0.tar.bz2").unlink()
    since = time.time_ns() // 1_000_000
    _rattler_index(theirs)
    index_channel(ours)
    for subdir in ("linux-64", "linux-aarch64", "noarch"):
        repodata = (ours / subdir / "repodata.json").read_bytes()
        _same_but_new_times(repodata, (theirs / subdir / "repodata.json").read_bytes(), since_ms=since)
        for records in ("packages", "packages.conda"):
            for name, record in json.loads(repodata)[records].items():
                assert record["indexed_timestamp"] == first.get(name, record["indexed_timestamp"])
                assert (name in first) == (record["indexed_timestamp"] < since), name


@pytest.mark.parametrize("check", [True, False])
def test_a_damaged_package_is_refused_naming_it_with_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check: bool
) -> None:
    _, ours = _twins(tmp_path)
    damaged = ours / "linux-64" / "beta-1.0-h0_0.tar.bz2"
    damaged.write_bytes(damaged.read_bytes()[:200])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(ChannelError, match=rf"^{re.escape(str(damaged))} is damaged \(") as caught:
        index_channel(ours, check=check)
    assert "\n" not in str(caught.value)
    assert not list(ours.glob("*/repodata.json"))
    assert not list((tmp_path / "tmp").iterdir())


def test_the_command_refuses_a_damaged_package_in_one_line(tmp_path: Path) -> None:
    _, ours = _twins(tmp_path)
    damaged = ours / "noarch" / "epsilon-1.0-h0_0.conda"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    done = subprocess.run(
        [console_script("flagtree-feedstock"), "channel", "index", str(ours)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == ChannelError.return_code, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and str(damaged) in errors[0], done.stderr
    assert not list(ours.glob("*/repodata.json"))


def test_a_signal_while_stand_ins_are_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal is raised as KeyboardInterrupt in the main thread (_interrupts.py): here, at the third stand-in."""
    _, ours = _twins(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    written = []

    def stand_in_for(package: Path, scratch: Path) -> index_stand_ins.StandIn:
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(package)
        return index_stand_ins.stand_in_for(package, scratch)

    monkeypatch.setattr(channel_index, "stand_in_for", stand_in_for)
    with pytest.raises(KeyboardInterrupt):
        index_channel(ours)
    assert not list((tmp_path / "tmp").iterdir())
    assert not list(ours.glob("*/repodata.json"))


def test_a_subdir_the_toolkit_cannot_put_right_leaves_the_whole_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record where the toolkit does not look for it (as a later indexer's layout might put it), in noarch, the
    last subdir: refused, as its stand-in's sha256 would be left; no subdir's index is replaced."""
    theirs, ours = _twins(tmp_path)
    _rattler_index(theirs)
    for subdir in ("linux-64", "linux-aarch64", "noarch"):
        shutil.copyfile(theirs / subdir / "repodata.json", ours / subdir / "repodata.json")
    before = {p: p.read_bytes() for p in ours.glob("*/repodata.json")}
    real = index_stand_ins.with_package_digests

    def elsewhere(repodata: bytes, stand_ins: dict[str, index_stand_ins.StandIn], where: Path) -> bytes:
        """The record keyed by a number, its file name a field in it."""
        keyed = b'"epsilon-1.0-h0_0.conda":{'
        return real(repodata.replace(keyed, b'"0":{"fn":"epsilon-1.0-h0_0.conda",'), stand_ins, where)

    monkeypatch.setattr(channel_index, "with_package_digests", elsewhere)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(ChannelError, match=r"noarch/epsilon-1.0-h0_0.conda where the toolkit does not look"):
        index_channel(ours)
    assert {p: p.read_bytes() for p in ours.glob("*/repodata.json")} == before
    assert not list((tmp_path / "tmp").iterdir())
