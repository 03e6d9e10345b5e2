"""Every input checked by ``build --render-only``, as docs/troubleshooting.md says (issue 29 item 3): the output
folder, local channels (their index read), and packages of the wrong subdir refused by ``channel index``.

Each case runs the console script and must end in one line, no traceback, with the status of errors.py's
class for it, having made nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _stub_channel import write_package
from _tools import as_a_user
from _toy import error_line
from flagtree_feedstock.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(Path(sys.executable).with_name("flagtree-feedstock"))


def _run(*argv: str, cwd: Path = ROOT, user: bool = False) -> tuple[int, str]:
    command = [SCRIPT, *argv]
    done = subprocess.run(
        as_a_user(command) if user else command,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, error_line(done.stderr) if done.returncode else ""


def _render(*extra: str, cwd: Path = ROOT, user: bool = False) -> tuple[int, str]:
    recipe = ["--recipe-dir", str(ROOT / "recipe"), "-e", str(ROOT / "conda_build_config.yaml")]
    return _run("build", "--render-only", *recipe, *extra, cwd=cwd, user=user)


def _channel(folder: Path) -> Path:
    write_package(folder / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    assert _run("channel", "index", str(folder))[0] == 0
    return folder


def test_an_empty_output_dir_is_refused_not_read_as_build_artifacts(tmp_path: Path) -> None:
    assert _render("--output-dir", "", cwd=tmp_path) == (
        2,
        "flagtree-feedstock: error: --output-dir is empty (fix: give --output-dir a path, or leave the option out)",
    )
    assert list(tmp_path.iterdir()) == []


def test_an_output_dir_that_is_a_file_a_loop_or_holds_a_nul_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    cases = {
        str(a_file): (2, f"--output-dir {a_file} is a file, not a folder"),
        str(loop): (10, f"--output-dir {loop} cannot be used: "),
    }
    for given, (status, start) in cases.items():
        got, line = _render("--output-dir", given)
        assert (got, line.startswith(f"flagtree-feedstock: error: {start}")) == (status, True), line
    # A NUL byte cannot cross exec's argv: main() is where a caller can pass one.
    args = [
        "build",
        "--render-only",
        "--recipe-dir",
        str(ROOT / "recipe"),
        "--output-dir",
        f"{tmp_path}/o\0ut",
    ]
    assert main(args) == 2
    assert error_line(capsys.readouterr().err) == (
        f"flagtree-feedstock: error: --output-dir '{tmp_path}/o\\x00ut' holds a NUL byte "
        "(fix: give --output-dir a real path)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "loop"]


def test_an_unwritable_output_dir_is_refused_by_render_only(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    frozen.chmod(0o555)
    try:
        status, line = _render("--output-dir", str(frozen / "out"), cwd=tmp_path, user=True)
    finally:
        frozen.chmod(0o755)
    assert status == 10
    assert line.startswith(
        f"flagtree-feedstock: error: --output-dir {frozen / 'out'} (it is made in {frozen}): "
    )
    assert list(frozen.iterdir()) == []


def test_a_damaged_channel_index_is_found_by_render_only_and_by_install(tmp_path: Path) -> None:
    channel = _channel(tmp_path / "channel")
    repodata = channel / "noarch" / "repodata.json"
    repodata.write_text('{"packages": {')
    fix = f"(fix: run: flagtree-feedstock channel index {channel})"
    status, line = _render("-c", str(channel), "-c", "conda-forge", "--output-dir", str(tmp_path / "out"))
    assert status == 9
    assert line.startswith(f"flagtree-feedstock: error: the channel index {repodata} is damaged: ")
    assert line.endswith(fix)
    status, line = _run("channel", "install", str(channel), "toy")
    assert (status, line.endswith(fix)) == (9, True), line
    # The fix works: the index is rewritten, and the render passes.
    assert _run("channel", "index", str(channel))[0] == 0
    assert _render("-c", str(channel), "--output-dir", str(tmp_path / "out"))[0] == 0


def test_channel_index_refuses_a_package_of_another_subdir(tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    misplaced = write_package(channel / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "linux-aarch64")
    status, line = _run("channel", "index", str(channel))
    assert status == 9
    assert line == (
        f"flagtree-feedstock: error: {misplaced} is a package for linux-aarch64, in the subdir noarch/ "
        f"(fix: move it where it belongs: mkdir -p {channel / 'linux-aarch64'} && mv {misplaced} "
        f"{channel / 'linux-aarch64'}/)"
    )
    assert not (channel / "noarch" / "repodata.json").exists()
