"""Published packages carry no build-machine paths: the local channel folders the engine records in them.

A real build of the toy-multi recipe (toy-py pins toy-llvm, which it resolves from the toolkit's staging
folder, a ``file://`` channel) against a local ``file://`` channel: once as the toolkit builds it, once with
the landing turned off, to show where py-rattler-build 0.73 records the folders and that the landing changes
only those records (toy-multi declares no source_date_epoch). The scrubbed packages are indexed and installed
with py-rattler.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from _package_diff import members as all_members
from _toy import build_args, make_empty_channel, native_args
from flagtree_feedstock.builder.landing import new_packages
from flagtree_feedstock.builder.landing.local_paths import local_folders, scrub_text
from flagtree_feedstock.builder.landing.one_pass import land_package
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.channel.install import smoke_install
from flagtree_feedstock.cli import main

RECORDS = ("info/about.json", "info/recipe/rendered_recipe.yaml")


def _build(base: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[Path, Path]:
    """The toy-multi packages built into ``base/out`` against ``base/local`` (an empty file:// channel)."""
    local = make_empty_channel(base / "local")
    out = base / "out"
    assert main(build_args("toy-multi", out, *native_args(local), "--python", "3.11")) == 0
    return out, local


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("scrubbed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("http_proxy", "http://127.0.0.1:9")
        mp.setenv("https_proxy", "http://127.0.0.1:9")
        return _build(base)


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same build with the scrub turned off: what the engine itself writes."""
    base = tmp_path_factory.mktemp("raw")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("http_proxy", "http://127.0.0.1:9")
        mp.setenv("https_proxy", "http://127.0.0.1:9")
        mp.setattr(new_packages, "land_package", lambda *args, **kwargs: None)
        return _build(base)


def members(package: Path) -> dict[str, bytes]:
    """Every file of a .conda: the outer entries, and the inner info archive's members as ``info/...``."""
    found: dict[str, bytes] = {}
    with zipfile.ZipFile(package) as archive:
        for name in archive.namelist():
            data = archive.read(name)
            found[name] = data
            if name.startswith("info-"):
                raw_tar = zstandard.ZstdDecompressor().decompressobj().decompress(data)
                with tarfile.open(fileobj=io.BytesIO(raw_tar)) as tar:
                    for member in tar.getmembers():
                        handle = tar.extractfile(member)
                        if handle is not None:
                            found[member.name] = handle.read()
    return found


def packages(out: Path) -> list[Path]:
    found = sorted(out.glob("linux-64/*.conda"))
    assert [p.name.rsplit("-", 2)[0] for p in found] == ["toy-llvm", "toy-py"]
    return found


def _land(package: Path, folders: list[Path]) -> None:
    def no_sbom(*args: object) -> str:
        raise AssertionError("a package whose recipe declares no epoch gets no SBOM")

    land_package(package, folders=folders, write_sbom=no_sbom)


def test_the_engine_records_the_local_folders(raw: tuple[Path, Path]) -> None:
    """Where py-rattler-build 0.73 writes them (the reason for the scrub): about.json's channels, and the
    rendered recipe's channels, resolved urls and build folders."""
    out, _ = raw
    for package in packages(out):
        files = members(package)
        about = json.loads(files["info/about.json"])
        # The build call's channels, both the toolkit's own: the step's copies and the staging folder.
        copies, staging = about["channels"]
        assert f".{out.name}-copies-" in copies
        assert f".{out.name}-staging-" in staging
        rendered = files["info/recipe/rendered_recipe.yaml"].decode()
        assert f"- {copies.rstrip('/')}\n" in rendered
        # The engine compresses at its fastest: the landing compresses once, at the final level.
        assert "archive_type: conda\n    compression_level: 1\n" in rendered
        assert f"work_dir: {out.parent}" in rendered
        # Nowhere else (the inner info archive, compressed, holds the records themselves).
        elsewhere = [n for n, data in files.items() if n not in RECORDS and str(out.parent).encode() in data]
        assert [n for n in elsewhere if not n.startswith("info-")] == []
    toy_py = members(packages(out)[1])["info/recipe/rendered_recipe.yaml"].decode()
    assert "url: file://" in toy_py  # toy-llvm, resolved from the staging folder


def test_built_packages_carry_no_local_folder(built: tuple[Path, Path]) -> None:
    out, local = built
    for package in packages(out):
        for name, data in members(package).items():
            if name.startswith(("info-", "pkg-")):
                continue
            for folder in (out.parent, local, out):
                assert str(folder).encode() not in data, f"{package.name}: {name} names {folder}"
            assert b"file://" not in data, f"{package.name}: {name} holds a file:// URL"
        about = json.loads(members(package)["info/about.json"])
        # The build call's two channels: the step's copies and the staging folder (builder/step_copies.py).
        assert about["channels"] == ["local/"] * 2
        # What the package says of its compression is true of it: the landing's final level.
        assert b"compression_level: 15\n" in members(package)["info/recipe/rendered_recipe.yaml"]


def test_only_the_records_change(raw: tuple[Path, Path], tmp_path: Path) -> None:
    """Landing a package whose recipe declares no epoch changes its records only: every other member, its
    data and its tar header, is as the engine wrote it; landed again, it gives the same bytes."""
    out, local = raw
    for package in packages(out):
        copy = tmp_path / package.name
        shutil.copyfile(package, copy)
        folders = local_folders([out, out.parent], [local.as_uri()])
        _land(copy, folders)
        before, after = dict(all_members(package)), dict(all_members(copy))
        assert before.keys() == after.keys()
        # The zip entries' dates aside (the engine's clock, 1980 when landed), inner members by their names.
        changed = {n.split(":", 1)[-1] for n in before if before[n] != after[n] and "(zip entry)" not in n}
        assert changed == {*RECORDS, *(f"{r} (tar header)" for r in RECORDS)}  # the header: its size
        landed = copy.read_bytes()
        _land(copy, folders)
        assert copy.read_bytes() == landed


def test_scrubbed_packages_index_and_install(built: tuple[Path, Path], tmp_path: Path) -> None:
    out, local = built
    index_channel(out)
    installed = smoke_install(
        out, ["toy-py"], prefix=tmp_path / "env", platform="linux-64", extra_channels=[local.as_uri()]
    )
    assert {p.name for p in installed} == {"toy-py", "toy-llvm"}


def test_a_tar_bz2_package_keeps_its_prefix_placeholder(tmp_path: Path) -> None:
    """Legacy .tar.bz2: the records are scrubbed; info/paths.json, whose prefix placeholder the installer
    relocates by, stays as built."""
    folder = tmp_path / "out with space" / ".channel-staging-x"
    placeholder = f"{folder}/bld/host_env_placehold_placehold"
    files = {
        "info/about.json": json.dumps({"channels": [folder.as_uri() + "/"]}).encode(),
        "info/paths.json": json.dumps(
            {"paths": [{"_path": "lib/x", "prefix_placeholder": placeholder}]}
        ).encode(),
        "info/recipe/rendered_recipe.yaml": f"build_prefix: {folder}/bld/b\n".encode(),
        "lib/x": placeholder.encode(),
    }
    package = tmp_path / "x-1-0.tar.bz2"
    with tarfile.open(package, "w:bz2") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _land(package, [folder])
    with tarfile.open(package, "r:bz2") as tar:
        after = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert json.loads(after["info/about.json"]) == {"channels": ["local/"]}
    assert after["info/recipe/rendered_recipe.yaml"] == b"build_prefix: local/bld/b\n"
    assert after["info/paths.json"] == files["info/paths.json"]
    assert after["lib/x"] == files["lib/x"]


def test_only_whole_folders_are_replaced() -> None:
    folder = Path("/w/build_artifacts")
    text = 'a: /w/build_artifacts/x\nb: /w/build_artifacts2/x\nc: "file:///w/build_artifacts"\nd: /w/build_artifacts'
    assert scrub_text(text, [folder]) == 'a: local/x\nb: /w/build_artifacts2/x\nc: "local"\nd: local'
