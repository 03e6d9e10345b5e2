"""Every environment a build call makes is made of the toolkit's copies, or there is no build (issue 47 items 1
and 2): builder/step_copies.py, builder/run.py, builder/_worker.py's solve.

The solve before the build covers a staging output's environments too; the build call reads the step's copies
and the staging folder only, with no credentials; whatever fails while the copies are made stops the build in
one line, and a package the build's solve needs that the copies lack is named. Each host dependency here has a
post-link script that writes a marker outside the prefix: the marker is how a test sees that the engine
installed a package the toolkit did not admit.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from rattler.index import index_fs

from _hostile_packages import channel_with, package_with_files, sha256
from _timing import seconds
from _toy import build_args, error_line, native_args, run_toolkit
from flagtree_feedstock.builder import run, step_copies
from flagtree_feedstock.builder._worker import EngineResult
from flagtree_feedstock.channel.credentials import AUTH_VARIABLE
from flagtree_feedstock.channel.package_reader import read_package
from flagtree_feedstock.channel.repack import REPACK_RULES

TESTS = Path(__file__).resolve().parent
SCRIPT = "bin/.toy-dep-post-link.sh"
RENDERED = "info/recipe/rendered_recipe.yaml"


def _dep(planted: Path) -> bytes:
    """toy-dep, whose post-link script writes ``planted`` when run; it holds ``share/toy-dep.txt`` (toy-host
    and toy-staging copy it), as tests/test_link_scripts.py's."""
    script = f'#!/bin/bash\nprintf "ran for %s\\n" "$PKG_NAME" > "{planted}"\n'.encode()
    files = {SCRIPT: script, "share/toy-dep.txt": b"dep\n"}
    return package_with_files("toy-dep", files)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """Where toy-dep's post-link script writes when it runs: outside every prefix."""
    (tmp_path / "outside").mkdir()
    return tmp_path / "outside" / "planted"


@pytest.fixture
def dep_channel(tmp_path: Path, planted: Path) -> tuple[Path, Path]:
    """A local channel holding toy-dep (with its post-link script), and the package."""
    channel, package = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", _dep(planted))
    (channel / "linux-64").mkdir(exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel, package


Served = tuple[str, Callable[[], list[dict[str, Any]]]]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Path, list[dict[str, Any]]], Served]]:
    """Serve a channel folder over http on 127.0.0.1 (tests/_http_recorder.py, a process of its own), the
    ``first`` rules before its files': its URL, and the requests it was sent."""
    started: list[subprocess.Popen[str]] = []

    def start(folder: Path, first: list[dict[str, Any]]) -> Served:
        log = tmp_path / f"requests-{len(started)}.jsonl"
        log.touch()
        rules = [*first]
        for subdir in ("linux-64", "noarch"):  # plain repodata.json only
            rules += [
                {"path": f"/chan/{subdir}/repodata_shards", "status": 404},
                {"path": f"/chan/{subdir}/repodata.json.", "status": 404},
            ]
        rules += [
            {"path": f"/chan/{path.relative_to(folder)}", "status": 200, "file": str(path)}
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        ]
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "_http_recorder.py"), str(log), json.dumps([*rules, {"path": "/", "status": 404}])],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        started.append(process)
        assert process.stdout is not None
        port = int(process.stdout.readline())
        return f"http://127.0.0.1:{port}/chan", lambda: [
            json.loads(line) for line in log.read_text().splitlines()
        ]

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=seconds(10))
        assert process.stdout is not None
        process.stdout.close()


def _refusal(where: str) -> str:
    return (
        f"flagtree-feedstock: error: {where} (toy-dep) carries the link script {SCRIPT!r}, which the installer "
        "would run as it installs it: refused, and was not used (fix: if you trust toy-dep to run its own code "
        "on this machine, allow it: --allow-link-scripts toy-dep)"
    )


# ---- (a) the solve before the build fails: no build ----------------------------------------------------------


def test_a_remote_channel_that_refuses_the_solve_before_the_build_stops_it(
    tmp_path: Path, planted: Path, dep_channel: tuple[Path, Path], serve: Callable[..., Served]
) -> None:
    """The channel answers 403, then 503, to its first index requests, then serves toy-dep: the solve before
    the build fails, and the build does not go on with the channels as given (the engine would take toy-dep
    from the server unchecked and run its post-link script, allowed or not)."""
    channel, _ = dep_channel
    unwilling = [
        {"method": "GET", "path": "/chan/noarch/repodata.json", "status": 403, "body": {}, "times": 1},
        {"method": "GET", "path": "/chan/noarch/repodata.json", "status": 503, "body": {}, "times": 1},
    ]
    url, requests = serve(channel, unwilling)
    out = tmp_path / "out"
    argv = build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "--channel", url)
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 9, done.stderr
    # The toolkit's relay read the channel (index_relay.py): its own line, naming what the server answered.
    assert error_line(done.stderr) == (
        f"flagtree-feedstock: error: channel {url} cannot be read: {url}/noarch/repodata.json answered HTTP 403 "
        "Forbidden (fix: check the channel, the network and the http(s)_proxy variables, or leave that channel out "
        "(a channel that cannot be read is never skipped))"
    )
    assert "Traceback" not in done.stderr
    assert not planted.exists()
    assert not [r for r in requests() if r["path"].endswith(".tar.bz2")]  # no package was fetched
    assert not list(out.rglob("*.conda"))


def test_a_remote_channel_that_answers_serves_the_build_through_the_copies(
    tmp_path: Path, planted: Path, dep_channel: tuple[Path, Path], serve: Callable[..., Served]
) -> None:
    """The same channel answering at once, toy-dep allowed: the build goes on, and the engine installs it (the
    toolkit's copy: the build call's channels are the copies and the staging folder)."""
    channel, _ = dep_channel
    url, _ = serve(channel, [])
    out = tmp_path / "out"
    argv = build_args("toy-host", out, "--target-platform", "linux-64", "--no-test", "--channel", url)
    done = run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert planted.read_text() == "ran for toy-dep\n"


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        ("crash", "the engine's process ended with status -9"),
        ("error", "PyRattlerBuildError: variant key missing"),
    ],
)
def test_a_solve_before_the_build_that_ends_otherwise_stops_it_before_the_build_call(  # noqa: PLR0917 - pytest parameters and fixtures
    outcome: Literal["error", "crash"],
    text: str,
    tmp_path: Path,
    dep_channel: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The worker of the solve before the build ends without the engine's answer, or the engine fails for
    another reason than a solve: one line, and no build call is made."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415 - the toolkit in this process, to end its solve

    channel, _ = dep_channel
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(step_copies, "run_engine", lambda *_a, **_k: EngineResult(outcome=outcome, text=text))
    builds = _spied(monkeypatch, run)
    out = tmp_path / "out"
    assert main(build_args("toy-host", out, *native_args(channel))) == 8
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: solving what the build of toy-host 1.0 hb0f4dca_0 would install, to repack "
        f"it first, failed: {text.removeprefix('PyRattlerBuildError: ')}; nothing was built (fix: rerun; if it "
        "fails again, report it as a bug of flagtree-feedstock with the output above)"
    )
    assert builds == []
    assert not list(out.rglob("*.conda"))


# ---- (b) a staging output's environments are the toolkit's copies ---------------------------------------------


def test_a_staging_output_s_host_dependency_is_refused_for_its_link_script_and_installed_as_a_copy_when_allowed(
    tmp_path: Path, planted: Path, dep_channel: tuple[Path, Path]
) -> None:
    """toy-staging's staging output needs toy-dep in its host environment, which the engine's render with
    solve does not report: solved as an output of its own, toy-dep is checked, refused for its post-link script;
    allowed by name, the engine installs the toolkit's copy (the only package it can read: its channels are the
    copies and the staging folder)."""
    channel, package = dep_channel
    out = tmp_path / "out"
    argv = build_args("toy-staging", out, *native_args(channel))
    refused = run_toolkit(argv, tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(str(package))
    assert not planted.exists()
    assert not list(out.rglob("*.conda"))

    allowed = run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert planted.read_text() == "ran for toy-dep\n"
    (built,) = out.glob("linux-64/toy-staging-*.conda")
    # The engine's record of the staging output's host environment: the copy (its sha256), not the original.
    rendered = yaml.safe_load(read_package(built, [RENDERED])[RENDERED])
    (host,) = rendered["finalized_cache_dependencies"]["host"]["resolved"]
    (copy,) = (tmp_path / ".out-repacked").glob(f"rules-{REPACK_RULES}/*/toy-dep-1-0.tar.bz2")
    assert host["sha256"] == _digest(copy) != _digest(package)


def _digest(path: Path) -> str:
    return sha256(path.read_bytes())


# ---- what the build call reads -------------------------------------------------------------------------------


def _spied(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[tuple[Any, dict[str, str]]]:
    """Every engine call ``module`` makes (run.py: the build calls; step_copies.py: the solves before them),
    with its environment."""
    calls: list[tuple[Any, dict[str, str]]] = []
    real = module.run_engine

    def spy(call: Any, *, events: object | None, env: dict[str, str], lock: object = None) -> Any:
        calls.append((call, dict(env)))
        return real(call, events=events, env=env, lock=lock)

    monkeypatch.setattr(module, "run_engine", spy)
    return calls


@pytest.mark.parametrize("recipe", ["toy-host", "toy-epoch"])
def test_the_build_call_reads_the_copies_and_the_staging_folder_only_without_credentials(  # noqa: PLR0917 - pytest's fixtures
    recipe: str,
    tmp_path: Path,
    dep_channel: tuple[Path, Path],
    serve: Callable[..., Served],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No remote URL, no channel folder of the user's, no authentication file (neither the channels' nor the
    user's own) in the build call, for a step with a host requirement and for one without any (its copies
    empty); the solve before the build reads the channel with its password."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415 - the toolkit in this process, to spy on it

    channel, _ = dep_channel
    url, requests = serve(channel, [])
    auth = tmp_path / "auth.json"
    auth.write_text("{}")
    monkeypatch.setenv(AUTH_VARIABLE, str(auth))
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "127.0.0.1")  # the tests' proxy is a dead end (tests/_toy.py)
    builds, solves = _spied(monkeypatch, run), _spied(monkeypatch, step_copies)
    out = tmp_path / "out"
    given = url.replace("http://", "http://user:secret@")
    argv = build_args(recipe, out, "--target-platform", "linux-64", "--no-test", "--channel", given)
    assert main([*argv, "--allow-link-scripts", "toy-dep"]) == 0, capsys.readouterr().err
    ((call, env),) = builds
    copies, staging = call.channels
    assert Path(copies.removeprefix("file://")).parent.name.startswith(".out-copies-")
    assert Path(staging.removeprefix("file://")).name.startswith(".out-staging-")
    assert AUTH_VARIABLE not in env
    if recipe == "toy-host":  # the solve before it: the toolkit's relay on loopback, with no credentials
        ((solve, solve_env),) = solves
        assert solve.channels[0] == staging
        (relayed,) = solve.channels[1:]
        assert (
            relayed.startswith("http://127.0.0.1:")
            and not relayed.startswith(url)
            and "secret" not in relayed
        )
        assert AUTH_VARIABLE not in solve_env
        # The relay fetched the channel for it, with the channel's own credentials.
        basic = "Basic " + base64.b64encode(b"user:secret").decode()
        assert {r["headers"].get("authorization") for r in requests()} == {basic}
    else:
        assert solves == []


def test_a_package_the_build_needs_that_the_copies_lack_stops_it_naming_it(
    tmp_path: Path,
    dep_channel: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A step whose copies were made from another solve (here: one that took nothing): the build's solve
    cannot find toy-dep, which the channels as given hold; it stops in one line naming it."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415 - the toolkit in this process, to change its solve

    channel, _ = dep_channel
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(step_copies, "solved_packages", lambda _result: [])
    out = tmp_path / "out"
    assert main(build_args("toy-staging", out, *native_args(channel))) == 7
    assert error_line(capsys.readouterr().err) == (
        "flagtree-feedstock: error: the build of toy-staging 1.0 hb0f4dca_0 needs toy-dep, which the solve "
        "before it did not take (the build installs only the toolkit's copies of that solve's packages): Failed "
        "to resolve dependencies (fix: rerun: both solves read the channels again; if it fails again, report it "
        "with the recipe)"
    )
    assert not list(out.rglob("*.conda"))


# ---- the outputs a chosen one pins: steps of their own before it ---------------------------------------------


def test_an_output_chosen_alone_has_what_it_pins_built_first_and_reused_even_with_force(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """toy-py pins toy-llvm: the solve before toy-py's build needs toy-llvm's package, so `--output toy-py`
    builds toy-llvm first when the output folder lacks it, and reuses it when it holds it, --force or not
    (--force rebuilds what was chosen)."""
    from flagtree_feedstock.cli import main  # noqa: PLC0415 - the toolkit in this process, as test_cli_build

    log = tmp_path / "builds.log"
    monkeypatch.setenv("TOY_BUILD_LOG", str(log))
    out = tmp_path / "channel"
    argv = build_args("toy-multi", out, *native_args(empty_channel), "--output", "toy-py", "--python", "3.12")
    assert main(argv) == 0, capsys.readouterr().err
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.12"]
    assert main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert log.read_text().splitlines() == ["toy-llvm", "toy-py 3.12", "toy-py 3.12"]
    assert sorted(p.name.split("-1.0-")[0] for p in out.glob("linux-64/*.conda")) == ["toy-llvm", "toy-py"]
