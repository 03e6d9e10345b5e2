"""A long build never loses finished work: each package lands in the channel folder as soon as it is done,
and a rerun builds only what is missing. Real py-rattler-build builds of toy recipes, offline.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from _toy import build_args, error_line, leftovers, native_args, published
from flagtree_feedstock.cli import main


def _identity(path: Path) -> tuple[int, int, str]:
    """What changes when a file is rewritten or replaced: its inode, its mtime and its bytes."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_failure_keeps_the_packages_built_before_it_and_a_rerun_builds_only_the_rest(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: two outputs, the second's script exits 3; then the fix and a rerun."""
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    args = build_args("bad-script", out, *native_args(empty_channel))
    assert main(args) == 8
    assert "building toy-fails 1.0" in error_line(capsys.readouterr().err)
    assert log.read_text().splitlines() == ["toy-good-first", "toy-fails"]
    # The first package is in the channel folder and its index; nothing of the failed one, no staging folder.
    (first,) = published(out)
    assert first.startswith("toy-good-first-1.0-")
    assert sorted(leftovers(out)) == sorted(
        ["linux-64", "noarch", f"linux-64/{first}", "linux-64/repodata.json", "noarch/repodata.json"]
    )
    before = _identity(out / "linux-64" / first)

    monkeypatch.setenv("TOY_SECOND_EXIT", "0")  # the fix
    assert main(args) == 0
    captured = capsys.readouterr()
    assert log.read_text().splitlines() == ["toy-good-first", "toy-fails", "toy-fails"]  # only the second
    assert f"reusing {first} (already in {out}; --force rebuilds it)" in captured.err
    assert _identity(out / "linux-64" / first) == before  # not rebuilt, not rewritten
    (second,) = [name for name in published(out) if name != first]
    assert second.startswith("toy-fails-1.0-")
    assert f"built 1 package(s) into {out}:" in captured.out


def test_force_rebuilds_what_the_channel_folder_holds(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    args = build_args("toy-multi", out, *native_args(empty_channel), "--python", "3.12")
    assert main(args) == 0
    names = published(out)
    identities = {name: _identity(out / "linux-64" / name) for name in names}
    assert main(args) == 0
    assert "nothing new: every planned package was already in" in capsys.readouterr().out
    assert main([*args, "--force"]) == 0
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.12", "toy-llvm", "toy-py 3.12"]
    assert published(out) == names  # the same names (same variants), rebuilt in place
    for name in names:
        assert _identity(out / "linux-64" / name)[:2] != identities[name][:2], name
    err = capsys.readouterr().err
    assert "this run built a different package" not in err  # --force asked for it: no warning
    assert leftovers(out)[-1] == "noarch/repodata.json"  # no staging folder, no .part file


def test_a_package_copied_in_without_an_index_is_indexed_and_reused(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI cpu job's case: the LLVM package restored from a cache, with no repodata.json beside it."""
    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    first = tmp_path / "first"
    assert main(build_args("toy-multi", first, *native_args(empty_channel), "--output", "toy-llvm")) == 0
    (llvm,) = published(first)
    out = tmp_path / "channel"
    (out / "linux-64").mkdir(parents=True)
    os.link(first / "linux-64" / llvm, out / "linux-64" / llvm)
    args = build_args("toy-multi", out, *native_args(empty_channel), "--python", "3.11")
    assert main(args) == 0
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.11"]  # LLVM built once, in the first run
    assert len(published(out)) == 2


def test_a_rebuilt_package_is_tested_with_its_own_tests(
    tmp_path: Path,
    empty_channel: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """py-rattler-build 0.73 tests a package from the package cache's copy of the same file name when it has
    one: an older build's tests. The toolkit's cache is its own and drops a package before rebuilding it."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))  # the shared cache, ~/.cache/rattler, would be under it
    monkeypatch.delenv("RATTLER_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # conftest's cache of this run would stand for it
    out = tmp_path / "channel"
    args = [
        *build_args("toy-retest", out, "--target-platform", "linux-64", "--channel", empty_channel.as_uri())
    ]
    assert main(args) == 0  # toy-retest-lib's test passes; toy-retest-app's host puts it into the cache
    cache = tmp_path / ".channel-cache" / "pkgs"
    lib = out / "linux-64" / published(out)[1]
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [lib.name.removesuffix(".conda")]
    before = _identity(lib)
    monkeypatch.setenv("TOY_TEST_EXIT", "7")  # the same package name, another test
    assert main([*args, "--force", "--output", "toy-retest-lib"]) == 8
    captured = capsys.readouterr()
    assert "toy-retest-lib's test exits with 7" in captured.err  # the new test ran...
    assert (
        "toy-retest-lib-1.0-hb0f4dca_0.conda failed: failed to run test: IO Error: Script failed with status 7"
        in error_line(captured.err)
    )  # ...and failed, as it must
    assert not (home / ".cache" / "rattler").exists()  # the shared cache was never used
    # The package that failed its test (the engine moves it to broken/) is not published: the channel keeps
    # the one that passed.
    assert _identity(lib) == before
    assert sorted(p.name for p in out.iterdir()) == ["linux-64", "noarch"]
