"""Every input of a command is checked before anything builds, each bad one named in one line.

Near misses of each kind: python entries that are not versions, variant files that are not UTF-8 text,
channels that are empty or not channel folders, output folders that are files, under files, read-only or
too long; and any other file-system error, from every command, as one line naming its path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _stub_channel import write_package
from _tools import as_a_user
from _toy import RECIPES, build_args, error_line, leftovers, native_args
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.cli import main

TOY = RECIPES / "toy-multi"
TOO_LONG = "x" * 300  # one path component longer than NAME_MAX (255)


def _toy_variants(tmp_path: Path, python_block: str) -> Path:
    """A copy of toy-multi's variant file whose python list is ``python_block`` (YAML, after `python:`)."""
    text = (TOY / "conda_build_config.yaml").read_text()
    start = text.index("python:\n")
    end = text.index("# Toy pins")
    path = tmp_path / "conda_build_config.yaml"
    path.write_text(text[:start] + "python:\n" + python_block + text[end:])
    return path


def _render(variant_file: Path, tmp_path: Path, *extra: str) -> list[str]:
    """Render toy-multi's recipe with ``variant_file`` alone (a recipe folder without a variant file of its
    own, whose values would win, as in the repository where python is set only in the global file)."""
    recipe = tmp_path / "recipe"
    if not recipe.exists():
        recipe.mkdir()
        (recipe / "recipe.yaml").write_text((TOY / "recipe.yaml").read_text())
    args = build_args("toy-multi", tmp_path / "out", "--render-only", *extra)
    args[args.index("--exclusive-config-file") + 1] = str(variant_file)
    args[args.index("--recipe-dir") + 1] = str(recipe)
    return args


@pytest.mark.parametrize(
    ("entry", "shown"),
    [("~", "~ (no value)"), ("banana", "'banana'"), ('["3.12", "3.13"]', "a list"), ('">=3.12"', "'>=3.12'")],
    ids=["null", "banana", "a-list", "a-constraint"],
)
def test_a_python_entry_that_is_not_a_version_names_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str, shown: str
) -> None:
    variant_file = _toy_variants(tmp_path, f'  - "3.11"\n  - {entry}\n')
    assert main(_render(variant_file, tmp_path)) == 2
    line = 3  # the comment line, `python:`, the first entry, then this one
    assert variant_file.read_text().splitlines()[line - 1] == f"  - {entry}"
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: {variant_file}:{line}: python entry {shown} is not a python version "
        '(fix: write each python entry as a quoted version, "3.12" or "3.12.* *_cpython")'
    )


@pytest.mark.parametrize("entry", ['"3.12"', "3.12", '"3.12.* *_cpython"', '"3.13.* *_cp313"', '"3.12.1"'])
def test_python_entries_that_are_versions_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str
) -> None:
    variant_file = _toy_variants(tmp_path, f"  - {entry}\n")
    assert main(_render(variant_file, tmp_path)) == 0, capsys.readouterr().err


def test_another_key_with_no_value_or_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variant_file = _toy_variants(tmp_path, '  - "3.12"\n')
    variant_file.write_text(variant_file.read_text() + "toy_flavour:\n  - ~\n  - [a, b]\n")
    args = _render(variant_file, tmp_path)
    recipe = tmp_path / "recipe" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("${{ python }}", "${{ python }} ${{ toy_flavour }}"))
    assert main(args) == 2
    lines = len(variant_file.read_text().splitlines())
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: {variant_file}:{lines - 1}: toy_flavour has ~ (no value) where a value "
        "belongs (fix: write each toy_flavour entry as one quoted value); "
        f"{variant_file}:{lines}: toy_flavour has a list where a value belongs "
        "(fix: write each toy_flavour entry as one quoted value)"
    )


def test_a_variant_file_that_is_not_utf8_names_the_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variant_file = _toy_variants(tmp_path, '  - "3.12"\n')
    text = variant_file.read_bytes()
    offset = text.index(b"# Toy pins") + 2
    variant_file.write_bytes(
        text[:offset] + "Töy".encode("latin-1") + text[offset + 3 :]
    )  # an editor's latin-1
    line = text[:offset].count(b"\n") + 1
    assert main(_render(variant_file, tmp_path)) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: variant file {variant_file} is not UTF-8: byte 0xf6 at offset {offset + 1} "
        f"(line {line}) (fix: save conda_build_config.yaml as UTF-8 text)"
    )


def test_a_recipe_that_is_not_utf8_names_the_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "recipe.yaml").write_bytes(b"# caf\xe9\n" + (TOY / "recipe.yaml").read_bytes())
    args = build_args("toy-multi", tmp_path / "out", "--render-only")
    args[args.index("--recipe-dir") + 1] = str(recipe)
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: recipe {recipe / 'recipe.yaml'} is not UTF-8: byte 0xe9 at offset 5 (line 1) "
        "(fix: save recipe.yaml as UTF-8 text)"
    )


def test_a_folder_where_a_file_belongs_and_a_file_where_a_folder_belongs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_args("toy-multi", tmp_path / "out", "--render-only")
    args[args.index("--exclusive-config-file") + 1] = str(tmp_path)
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: variant file {tmp_path} is a folder, not a file "
        "(fix: pass the path of a conda_build_config.yaml, not of a folder)"
    )
    args = build_args("toy-multi", tmp_path / "out", "--render-only")
    args[args.index("--recipe-dir") + 1] = str(TOY / "recipe.yaml")
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: --recipe-dir {TOY / 'recipe.yaml'} is a file, not a folder "
        "(fix: pass --recipe-dir the folder that holds recipe.yaml)"
    )


def _channel_case(tmp_path: Path, case: str) -> tuple[str, str]:
    """A bad --channel value and the error line it must give."""
    if case == "empty":
        return "", (
            "a --channel is empty ('') (fix: pass --channel a channel name (conda-forge), a URL, or a file:// "
            "URL of a channel folder)"
        )
    if case == "missing-folder":
        folder = tmp_path / "nope"
        return folder.as_uri(), (
            f"channel {folder.as_uri()}: folder {folder} does not exist "
            "(fix: pass --channel an existing channel folder or a channel name)"
        )
    if case == "a-file":
        file = tmp_path / "channel.txt"
        file.write_text("not a channel")
        return file.as_uri(), (
            f"channel {file.as_uri()}: {file} is a file, not a channel folder "
            "(fix: pass --channel the folder that holds noarch/ and the platform subdirs)"
        )
    folder = tmp_path / "bare"
    folder.mkdir()
    shown = folder.as_uri() if case == "not-indexed" else f"./{folder.relative_to(Path.cwd())}"
    return shown, (
        f"channel {shown} is not an indexed channel folder and holds no packages "
        "(fix: pass --channel a channel folder with packages, or a channel name)"
    )


@pytest.mark.parametrize("case", ["empty", "missing-folder", "a-file", "not-indexed", "a-path"])
@pytest.mark.parametrize("command", ["build", "channel install"])
def test_a_channel_that_cannot_be_used_is_named_before_anything_runs(
    tmp_path: Path,
    *,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    empty_channel: Path,
    case: str,
    command: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    channel, message = _channel_case(tmp_path, case)
    out = tmp_path / "out"
    if command == "build":
        args = build_args("toy-multi", out, "--target-platform", "linux-64", "--channel", channel)
    else:
        args = ["channel", "install", str(empty_channel), "toy-py", "-c", channel]
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == f"flagtree-feedstock: error: {message}"
    assert leftovers(out) == []


def test_an_output_folder_that_cannot_be_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    cases = {
        a_file: f"--output-dir {a_file} is a file, not a folder "
        "(fix: pass --output-dir a folder (it is made if missing), or move that file away)",
        a_file / "out": f"--output-dir {a_file / 'out'} cannot be made: {a_file} is a file, not a folder "
        "(fix: pass --output-dir a path whose parents are folders)",
        tmp_path / TOO_LONG: f"--output-dir {tmp_path / TOO_LONG} cannot be used: File name too long "
        "(fix: choose a shorter path)",
    }
    for out, message in cases.items():
        args = build_args("toy-multi", out, "--target-platform", "linux-64")
        # A name too long is the file system's answer: 10, as for every path of every command.
        assert main(args) == (10 if out.name == TOO_LONG else 2)
        assert error_line(capsys.readouterr().err) == f"flagtree-feedstock: error: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert a_file.read_text() == "mine"


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    done = subprocess.run(
        as_a_user([sys.executable, "-m", "flagtree_feedstock", *argv]),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in done.stderr
    return done.returncode, error_line(done.stderr)


def test_a_read_only_output_folder_is_named_before_anything_builds(
    tmp_path: Path, empty_channel: Path
) -> None:
    parent = tmp_path / "read-only"
    (parent / "out").mkdir(parents=True)
    for folder in (parent / "out", parent):
        folder.chmod(0o555)
    try:
        for out in (parent / "new", parent / "out"):
            status, line = _run(build_args("toy-multi", out, *native_args(empty_channel)), tmp_path)
            assert status == 10  # a permission: the file system's answer, in every command
            where = "" if out.is_dir() else f" (it is made in {parent})"
            folder = out if out.is_dir() else parent
            assert line == (
                f"flagtree-feedstock: error: --output-dir {out}{where}: cannot write in {folder}: Permission "
                f"denied (fix: choose another --output-dir, or make {folder} writable for you)"
            )
        assert sorted(p.name for p in parent.rglob("*")) == ["out"]
    finally:
        for folder in (parent, parent / "out"):
            folder.chmod(0o755)


@pytest.mark.parametrize("command", ["channel index", "channel install", "upload", "build"])
def test_a_path_too_long_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """An error no check foresaw, from every command: one line with the path, exit status 10."""
    long_path = tmp_path / TOO_LONG
    render = build_args("toy-multi", tmp_path / "out", "--render-only")
    render[render.index("--exclusive-config-file") + 1] = str(long_path / "conda_build_config.yaml")
    argv = {
        "channel index": ["channel", "index", str(long_path)],
        "channel install": ["channel", "install", str(long_path), "toy-py"],
        "upload": ["upload", str(long_path), "--to", "prefix", "--channel", "x"],
        "build": render,
    }[command]
    assert main(argv) == 10
    shown = long_path / "conda_build_config.yaml" if command == "build" else long_path
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: File name too long: {shown} (fix: choose a shorter path)"
    )


def test_a_permission_is_one_line_naming_the_path(tmp_path: Path) -> None:
    """A file without read permission, folders that cannot be written: as a user, not as root."""
    unreadable = tmp_path / "conda_build_config.yaml"
    unreadable.write_text((TOY / "conda_build_config.yaml").read_text())
    frozen = tmp_path / "frozen"  # a channel folder, indexed, then made read-only
    write_package(frozen / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    index_channel(frozen)
    render = build_args("toy-multi", tmp_path / "out", "--render-only")
    render[render.index("--exclusive-config-file") + 1] = str(unreadable)
    install = ["channel", "install", str(frozen), "toy", "--prefix", str(frozen / "prefix")]
    cases = [
        (render, 10, f"Permission denied: {unreadable} (fix: check the permissions along that path"),
        (
            ["channel", "index", str(frozen)],
            10,
            f"cannot index {frozen}: cannot write in {frozen}: Permission",
        ),
        (
            install,
            10,
            f"--prefix {frozen / 'prefix'} (it is made in {frozen}): cannot write in {frozen}: Perm",
        ),
    ]
    unreadable.chmod(0o000)
    for folder in (frozen, frozen / "noarch"):
        folder.chmod(0o555)
    try:
        for argv, status, message in cases:
            got, line = _run(argv, tmp_path)
            assert (got, line.startswith(f"flagtree-feedstock: error: {message}")) == (status, True), line
    finally:
        unreadable.chmod(0o644)
        for folder in (frozen, frozen / "noarch"):
            folder.chmod(0o755)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in frozen.rglob("*")) == ["noarch", "repodata.json", "toy-1.0-0.tar.bz2"]
