"""The package tests' environments hold the toolkit's copies only (issue 47 item 1, builder/package_tests.py).

A package that only a test requires used to be installed by the engine from the channel as given, its link
scripts run. Through the console script: toy-test-dep's test requires toy-dep, whose post-link script writes a
file outside every prefix; the build refuses it in one line and writes nothing, and runs the test once it is
allowed by name. A package no channel has is named in one line; one the toolkit's solve did not take is not
installed from anywhere, and the test fails naming it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from rattler.index import index_fs

from _hostile_packages import channel_with, package_with_files
from _toy import build_args, error_line, make_empty_channel, run_toolkit
from flagtree_feedstock.builder import package_tests
from flagtree_feedstock.builder._worker import EngineCall, run_engine
from flagtree_feedstock.channel.credentials import AUTH_VARIABLE
from flagtree_feedstock.cli import main
from flagtree_feedstock.platforms import host_platform


def _toy_dep(tmp_path: Path, planted: Path) -> tuple[Path, Path]:
    """A local channel holding toy-dep (``share/toy-dep.txt``), whose post-link script writes ``planted``."""
    script = f'#!/bin/bash\nprintf "ran for %s\\n" "$PKG_NAME" > "{planted}"\n'.encode()
    files = {"bin/.toy-dep-post-link.sh": script, "share/toy-dep.txt": b"dep\n"}
    channel, package = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", package_with_files("toy-dep", files))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel, package


def _args(out: Path, channel: Path, *extra: str) -> list[str]:
    """A native build of toy-test-dep into ``out`` from ``channel``, its test on."""
    return build_args(
        "toy-test-dep", out, "--target-platform", "linux-64", "--channel", channel.as_uri(), *extra
    )


def test_a_package_only_a_test_requires_is_refused_for_its_link_script_and_runs_when_allowed(
    tmp_path: Path,
) -> None:
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = _toy_dep(tmp_path, planted)
    out = tmp_path / "out"
    refused = run_toolkit(_args(out, channel), tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == (
        f"flagtree-feedstock: error: {package} (toy-dep) carries the link script 'bin/.toy-dep-post-link.sh', "
        "which the installer would run as it installs it: refused, and was not used (fix: if you trust toy-dep "
        "to run its own code on this machine, allow it: --allow-link-scripts toy-dep)"
    )
    assert not planted.exists()
    assert not list(out.rglob("*.conda")), "an untested package is not published"
    allowed = run_toolkit(_args(out, channel, "--allow-link-scripts", "toy-dep"), tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert planted.read_text() == "ran for toy-dep\n"  # the engine installed the copy into the test's prefix
    assert [p.name for p in out.glob("*/*.conda")] == ["toy-test-dep-1.0-h4616a5c_0.conda"]


def test_a_package_no_channel_has_is_named_in_one_line(tmp_path: Path) -> None:
    channel, _ = _toy_dep(tmp_path, tmp_path / "planted")
    out = tmp_path / "out"
    missing = run_toolkit(_args(out, channel, "--no-test"), tmp_path, TOY_TEST_NEEDS="toy-missing")
    assert missing.returncode == 0, missing.stderr  # without its test, nothing needs it
    missing = run_toolkit(_args(out, channel, "--force"), tmp_path, TOY_TEST_NEEDS="toy-missing")
    assert missing.returncode == 7, missing.stderr
    line = error_line(missing.stderr)
    assert line.startswith(
        "flagtree-feedstock: error: the tests' environment (toy-missing toy-test-dep ==1.0 h4616a5c_0) cannot be "
        "solved: no channel has toy-missing; channels: "
    ), line


def test_a_package_the_toolkits_solve_did_not_take_is_installed_from_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Were the toolkit's solve to miss what a test needs, the engine finds it in no channel it is given (the
    user's channel has it): the test fails, naming it, and its link script never runs."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, _ = _toy_dep(tmp_path, planted)
    monkeypatch.setattr(package_tests, "copy_test_packages", lambda *args, **kwargs: None)
    out = tmp_path / "out"
    assert main(_args(out, channel, "--allow-link-scripts", "toy-dep")) == 7
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: the tests of toy-test-dep-1.0-h4616a5c_0.conda need toy-dep, which the "
        "toolkit's solve of their environment did not take: not installed (fix: report it as a bug of "
        "flagtree-feedstock with the recipe's tests; --no-test builds without them)"
    )
    assert not planted.exists()
    assert not list(out.rglob("*.conda"))


def test_the_test_call_reads_the_toolkits_folders_only_with_no_authentication_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's test call: channels the test copies and the staging folder, both written by the toolkit;
    no authentication file, though the build had one."""
    channel, _ = _toy_dep(tmp_path, tmp_path / "planted")
    auth = tmp_path / "auth.json"
    auth.write_text("{}\n")
    monkeypatch.setenv(AUTH_VARIABLE, str(auth))
    calls: list[tuple[EngineCall, dict[str, str]]] = []

    def spy(call: EngineCall, *, events: object | None, env: dict[str, str], lock: object = None) -> object:
        calls.append((call, dict(env)))
        return run_engine(call, events=events, env=env, lock=lock)  # type: ignore[arg-type]

    monkeypatch.setattr(package_tests, "run_engine", spy)
    out = tmp_path / "out"
    assert main(_args(out, channel, "--allow-link-scripts", "toy-dep")) == 0
    ((test, env),) = calls
    assert test.mode == "test"
    assert test.package is not None and Path(test.package).name == "toy-test-dep-1.0-h4616a5c_0.conda"
    copies, staging = (Path(urlsplit(c).path) for c in test.channels)
    assert [c.split(":")[0] for c in test.channels] == ["file", "file"]
    assert staging == Path(test.package).parents[1] and staging.name.startswith(".out-staging-")
    assert copies.parent.name == "tests" and copies.name == "toy-test-dep-1.0-h4616a5c_0"
    assert AUTH_VARIABLE not in env
    assert Path(env["RATTLER_CACHE_DIR"]).parent == copies.parents[1]  # a package cache of its own


@pytest.mark.parametrize("emulator", [None, "/bin/true"], ids=["native-strategy", "emulated"])
def test_a_foreign_package_is_tested_only_when_its_tests_can_be_emulated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: str | None
) -> None:
    """As the engine's strategies did: a cross build's package is not tested without an emulator
    (CROSSCOMPILING_EMULATOR); with one, its tests' environment is solved for its platform and its script
    runs here (toy-retest-lib's exits with 3: a shell script, which this machine runs whatever the target)."""
    monkeypatch.setenv("TOY_TEST_EXIT", "3")
    if emulator:
        monkeypatch.setenv("CROSSCOMPILING_EMULATOR", emulator)
    else:
        monkeypatch.delenv("CROSSCOMPILING_EMULATOR", raising=False)
    foreign = "linux-aarch64" if host_platform() == "linux-64" else "linux-64"
    out = tmp_path / "out"
    args = build_args(
        "toy-retest",
        out,
        "--target-platform",
        foreign,
        "--build-platform",
        host_platform(),
        "--channel",
        make_empty_channel(tmp_path / "empty").as_uri(),
        "--output",
        "toy-retest-lib",
    )
    assert main(args) == (8 if emulator else 0)
    assert bool(list(out.glob(f"{foreign}/toy-retest-lib-*.conda"))) == (emulator is None)
