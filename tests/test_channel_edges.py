"""Channel folders as users and conda make them: packages holding links to other packages' files, a package
file not named name-version-build, a spec with a space, a subdir or a package that is a symbolic link.

The packages are real builds (py-rattler-build, offline); indexing, solving and installing are py-rattler's.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import struct
import subprocess
import warnings
import zipfile
from pathlib import Path

import pytest
import rattler_build
from rattler.index import index_fs

from _toy import RECIPES, build_args, error_line, make_empty_channel, native_args
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.cli import main

LINK = "toy-link"


@pytest.fixture(scope="module")
def channels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two indexed channel folders, each with toy-multi's toy-llvm and toy-py (python 3.12) and toy-link, whose
    lib/toy-link.txt is a symbolic link to toy-llvm's lib/toy-llvm.txt: as ``.conda`` (built by the toolkit)
    and as ``.tar.bz2`` (the engine's other format)."""
    base = tmp_path_factory.mktemp("links")
    empty = make_empty_channel(base / "empty")
    conda = base / "conda"
    with pytest.MonkeyPatch.context() as patch:
        for name in ("http_proxy", "https_proxy"):
            patch.setenv(name, "http://127.0.0.1:9")
        assert main(build_args("toy-multi", conda, *native_args(empty), "--python", "3.12")) == 0
        assert main(build_args(LINK, conda, *native_args(empty))) == 0
        with warnings.catch_warnings():  # deprecated; run_build has no package_format to make a .tar.bz2
            warnings.simplefilter("ignore", DeprecationWarning)
            rattler_build.build_recipes(
                [RECIPES / LINK / "recipe.yaml"],
                variant_config=[str(RECIPES / LINK / "conda_build_config.yaml")],
                channel=[empty.as_uri()],
                output_dir=base / "bz2-build",
                package_format="tar-bz2",
                test="skip",
            )
    bz2 = shutil.copytree(conda, base / "bz2")
    for package in (bz2 / "linux-64").glob(f"{LINK}-*.conda"):
        package.unlink()
    (built,) = (base / "bz2-build" / "linux-64").glob(f"{LINK}-*.tar.bz2")
    shutil.copy2(built, bz2 / "linux-64" / built.name)
    index_channel(bz2)
    return {".conda": conda, ".tar.bz2": bz2}


def _link_package(folder: Path, kind: str) -> Path:
    (package,) = (folder / "linux-64").glob(f"{LINK}-*{kind}")
    return package


def _members(package: Path) -> dict[str, str]:
    """The package's members by name, with their kind as `tar tv` shows it (``l`` for a symbolic link)."""
    listing = subprocess.run(
        ["tar", "--list", "--verbose", "--file", str(package)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[5]: line[0] for line in listing.splitlines()}


@pytest.mark.parametrize("kind", [".conda", ".tar.bz2"])
@pytest.mark.parametrize("command", ["channel index", "channel install", "build -c it"])
def test_a_package_linking_to_a_file_of_another_package_is_whole(
    channels: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    """conda packages hold symbolic links to files of the packages they depend on: the package check reads
    regular members only, and the link installs as a link that reaches the other package's file."""
    folder = shutil.copytree(channels[kind], tmp_path / "folder")
    if kind == ".tar.bz2":  # the link is there as the engine wrote it, to a file the archive does not hold
        members = _members(_link_package(folder, kind))
        assert members["lib/toy-link.txt"] == "l" and "lib/toy-llvm.txt" not in members
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    argv = {
        "channel index": ["channel", "index", str(folder)],
        "channel install": ["channel", "install", str(folder), LINK, "--prefix", str(prefix),
                            "--target-platform", "linux-64"],
        "build -c it": build_args("toy-multi", out, *native_args(folder), "--python", "3.12"),
    }[command]  # fmt: skip
    assert main(argv) == 0, capfd.readouterr().err
    assert "Traceback" not in capfd.readouterr().err
    if command == "channel index":
        repodata = json.loads((folder / "linux-64" / "repodata.json").read_text())
        key = "packages.conda" if kind == ".conda" else "packages"
        assert _link_package(folder, kind).name in repodata[key]
    if command == "channel install":
        link = prefix / "lib" / "toy-link.txt"
        assert link.is_symlink() and link.read_text() == "llvm\n"  # toy-llvm's file, through the link
    if command == "build -c it":
        assert len(list((out / "linux-64").glob("*.conda"))) == 2


def _files_member(package: Path) -> tuple[int, int]:
    """Where the compressed bytes of a .conda's pkg-*.tar.zst (the package's files) are: (start, size)."""
    data = package.read_bytes()
    with zipfile.ZipFile(package) as archive:
        (info,) = [i for i in archive.infolist() if i.filename.startswith("pkg-")]
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_length + extra_length, info.compress_size


def _flip(data: bytes, start: int, length: int) -> bytes:
    return data[:start] + bytes(b ^ 0xFF for b in data[start : start + length]) + data[start + length :]


@pytest.mark.parametrize("how", ["truncated", "flipped", "its files flipped", "its last bytes cut"])
@pytest.mark.parametrize("kind", [".conda", ".tar.bz2"])
def test_a_damaged_package_with_a_link_is_still_caught(
    channels: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], kind: str, how: str
) -> None:
    folder = shutil.copytree(channels[kind], tmp_path / "folder")
    package = _link_package(folder, kind)
    data = package.read_bytes()
    middle = len(data) // 2
    # In a .conda, the package's files are a member of their own, which the check reads only for its CRC.
    start, size = _files_member(package) if kind == ".conda" else (middle - 8, 16)
    package.write_bytes(
        {
            "truncated": data[:middle],
            "flipped": _flip(data, middle, 16),
            "its files flipped": _flip(data, start + size // 2 - 4, 8),
            # A download that stopped just short: the tar inside is whole, the bzip2 stream's end (and its
            # CRC) or the zip's central directory is not.
            "its last bytes cut": data[:-4],
        }[how]
    )
    assert main(["channel", "index", str(folder)]) == 9
    line = error_line(capfd.readouterr().err)
    assert line.startswith(f"flagtree-feedstock: error: {package} is damaged ("), line


# --- a package file not named name-version-build ---------------------------------------------------------


def _misnamed(channels: dict[str, Path], tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A copy of the .conda channel folder whose toy-llvm package is renamed ``name``; (folder, the file)."""
    folder = shutil.copytree(channels[".conda"], tmp_path / "folder")
    (llvm,) = (folder / "linux-64").glob("toy-llvm-*.conda")
    return folder, llvm.rename(llvm.with_name(name))


@pytest.mark.parametrize(
    "name",
    [
        "toyllvm.conda",  # no name-version-build at all: py-rattler's indexer leaves it out without a word
        "toy llvm-1.0-h0_0.conda",  # a space: not a package name
        "toy-llvm-2.0-h0_0.conda",  # reads as one, but not the package's own (1.0, its own build)
    ],
)
@pytest.mark.parametrize("command", ["channel index", "channel install", "build -c it", "upload"])
def test_a_misnamed_package_file_is_one_line_with_the_rename(
    channels: dict[str, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    name: str,
    command: str,
) -> None:
    folder, misnamed = _misnamed(channels, tmp_path, name)
    monkeypatch.setenv("ANACONDA_API_KEY", "not-a-real-token")
    argv = {
        "channel index": ["channel", "index", str(folder)],
        "channel install": ["channel", "install", str(folder), "toy-py", "--target-platform", "linux-64"],
        "build -c it": build_args("toy-multi", tmp_path / "out", *native_args(folder), "--python", "3.12"),
        # Refused before any request: nothing listens on port 9.
        "upload": ["upload", "--to", "anaconda", "--channel", "me", "--url", "http://127.0.0.1:9", str(folder)],
    }[command]  # fmt: skip
    assert main(argv) == 9
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    line = error_line(captured.err)
    match = re.fullmatch(
        rf"flagtree-feedstock: error: {re.escape(str(misnamed))} is not named after the package it holds "
        r"\((toy-llvm-1\.0-h\w+_0)\): conda finds a package by its file name, name-version-build "
        r"\(fix: rename it: (mv .*)\)",
        line,
    )
    assert match, line
    assert not (tmp_path / "out").exists()
    # The fix, run as written, makes the folder whole again.
    subprocess.run(shlex.split(match[2]), check=True)
    assert (folder / "linux-64" / f"{match[1]}.conda").is_file()
    assert main(["channel", "index", str(folder)]) == 0


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("flagtree cpu", "missing range specifier for 'cpu'"),
        ("toy-py 1.0", "missing range specifier for '1.0'"),  # the solver reads specs strictly, so do we
    ],
)
def test_a_spec_with_a_space_is_one_line(
    channels: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], spec: str, reason: str
) -> None:
    prefix = tmp_path / "prefix"
    argv = ["channel", "install", str(channels[".conda"]), spec, "--prefix", str(prefix)]
    assert main([*argv, "--target-platform", "linux-64"]) == 2
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    assert error_line(captured.err).startswith(
        f"flagtree-feedstock: error: {spec!r} is not a match spec: {reason}"
    )
    assert not prefix.exists()


# --- a subdir or a package that is a symbolic link ------------------------------------------------------


def test_py_rattlers_indexer_does_not_follow_a_linked_subdir_or_package(
    channels: dict[str, Path], tmp_path: Path
) -> None:
    """Why the toolkit refuses them: the real indexer leaves them out without a word (if a py-rattler
    follows links one day, this fails, and the refusal can become indexing)."""
    elsewhere = shutil.copytree(channels[".conda"] / "linux-64", tmp_path / "elsewhere" / "linux-64")
    (elsewhere / "repodata.json").unlink()
    linked = tmp_path / "linked"
    (linked / "noarch").mkdir(parents=True)
    (linked / "linux-64").symlink_to(elsewhere)
    asyncio.run(index_fs(linked, write_zst=False, write_shards=False, force=True))
    assert not (elsewhere / "repodata.json").exists()

    one = tmp_path / "one"
    (one / "linux-64").mkdir(parents=True)
    for package in sorted(elsewhere.glob("*.conda")):
        (one / "linux-64" / package.name).symlink_to(package)
    (one / "linux-64" / "toy-py-extra.txt").write_text("not a package")
    asyncio.run(index_fs(one, write_zst=False, write_shards=False, force=True))
    assert json.loads((one / "linux-64" / "repodata.json").read_text())["packages.conda"] == {}


def _linked_subdir(channels: dict[str, Path], tmp_path: Path, *, empty: bool = False) -> tuple[Path, Path]:
    """A channel folder whose linux-64 is a symbolic link to a folder elsewhere, of packages or ``empty``;
    (folder, link)."""
    target = shutil.copytree(channels[".conda"] / "linux-64", tmp_path / "disk two" / "linux-64")
    for file in target.iterdir() if empty else [target / "repodata.json"]:
        file.unlink()
    folder = tmp_path / "folder"
    (folder / "noarch").mkdir(parents=True)
    (folder / "linux-64").symlink_to(target)
    return folder, folder / "linux-64"


@pytest.mark.parametrize(
    "command", ["channel index", "channel install", "build into it", "build into it, empty", "build -c it"]
)
def test_a_linked_subdir_is_refused_in_one_line_never_published_unindexed(
    channels: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], command: str
) -> None:
    """Refused before anything is built, even when the linked subdir is empty (the build would publish there)."""
    folder, link = _linked_subdir(channels, tmp_path, empty=command.endswith("empty"))
    out = tmp_path / "out"
    into = build_args("toy-multi", folder, *native_args(channels[".conda"]), "--python", "3.11")
    argv = {
        "channel index": ["channel", "index", str(folder)],
        "channel install": ["channel", "install", str(folder), "toy-py", "--target-platform", "linux-64"],
        "build into it": into,
        "build into it, empty": into,
        "build -c it": build_args("toy-multi", out, *native_args(folder), "--python", "3.12"),
    }[command]
    before = sorted(p.name for p in link.iterdir())
    assert main(argv) == 9
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    target = link.resolve()
    line = error_line(captured.err)
    assert line == (
        f"flagtree-feedstock: error: the subdir {link} is a symbolic link (to {target}): py-rattler's indexer "
        "does not follow it, so its packages would never be in the channel's index (fix: make it a folder of "
        f"its own: rm {link} && cp -a {shlex.quote(str(target))} {link})"
    ), line
    assert sorted(p.name for p in link.iterdir()) == before  # nothing built, published or indexed there
    assert not out.exists()
    assert "published" not in captured.err


def test_the_fix_for_a_linked_subdir_works(channels: dict[str, Path], tmp_path: Path) -> None:
    folder, link = _linked_subdir(channels, tmp_path)
    target = link.resolve()
    subprocess.run(["rm", str(link)], check=True)
    subprocess.run(["cp", "-a", str(target), str(link)], check=True)
    assert main(["channel", "index", str(folder)]) == 0
    indexed = json.loads((link / "repodata.json").read_text())["packages.conda"]
    assert sorted(indexed) == sorted(p.name for p in link.glob("*.conda"))


def test_a_linked_package_file_is_refused_in_one_line(
    channels: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    folder = shutil.copytree(channels[".conda"], tmp_path / "folder")
    (llvm,) = (folder / "linux-64").glob("toy-llvm-*.conda")
    kept = llvm.rename(tmp_path / llvm.name)
    llvm.symlink_to(kept)
    assert main(["channel", "index", str(folder)]) == 9
    line = error_line(capfd.readouterr().err)
    assert line == (
        f"flagtree-feedstock: error: the package {llvm} is a symbolic link (to {kept}): py-rattler's indexer "
        f"leaves it out of the channel's index (fix: put the file itself there: cp --remove-destination {kept} "
        f"{llvm})"
    ), line
    subprocess.run(["cp", "--remove-destination", str(kept), str(llvm)], check=True)
    assert main(["channel", "index", str(folder)]) == 0
    assert llvm.name in json.loads((folder / "linux-64" / "repodata.json").read_text())["packages.conda"]


def test_a_channel_folder_that_is_itself_a_link_is_indexed_and_installed_from(
    channels: dict[str, Path], tmp_path: Path
) -> None:
    """Only a link inside the folder is refused: the folder itself may be reached through one."""
    real = shutil.copytree(channels[".conda"], tmp_path / "real")
    for repodata in real.glob("*/repodata.json"):
        repodata.unlink()
    folder = tmp_path / "folder"
    folder.symlink_to(real)
    assert main(["channel", "index", str(folder)]) == 0
    prefix = tmp_path / "prefix"
    args = ["channel", "install", str(folder), LINK, "--prefix", str(prefix), "--target-platform", "linux-64"]
    assert main(args) == 0
    assert (prefix / "lib" / "toy-link.txt").read_text() == "llvm\n"
