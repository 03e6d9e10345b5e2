"""The package tests, run against the toolkit's own copies only: what the engine installs into the tests'
environments.

The build call never tests (its test strategy is ``skip``). Each package a call finished is then tested by a
call of its own (:func:`run_tests`: a ``test`` call of :mod:`._worker`, py-rattler-build's ``test_package``),
whose channels are two folders the toolkit wrote and nothing else, with no authentication file: the step's
test copies and the staging folder (the packages the build landed, and the output folder's). Before that, the
toolkit solves every environment the package's tests make, as the engine makes them (:func:`environments`),
with py-rattler against the staging folder and the user's channels (:func:`presolve_channels`, the one list of
what this solve reads), and repacks every package of those solutions (:func:`..channel.repack.repacked`,
downloaded first when remote, with the credentials of its origin) into the test copies
(:func:`copy_test_packages`); a package that carries link scripts the user did not allow is refused.

This solve is ours, not the engine's: where the two differ, the engine finds only the copies, so a package our
solve did not take makes the test fail (one line naming it, :func:`failed_test`), never one installed
unchecked. A solve, a download or a repack that fails stops the build, and so does a failed test; the package
that was not tested, or failed, is set aside (``broken/`` in the staging folder) and never published.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from flagtree_feedstock._engine import require, settled
from flagtree_feedstock._locks import FolderLock
from flagtree_feedstock._urls import shown_text, shown_url
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.channel.index_relay import Relay
from flagtree_feedstock.channel.link_scripts import LinkScriptPolicy
from flagtree_feedstock.channel.package_check import read_info
from flagtree_feedstock.channel.repack import repacked
from flagtree_feedstock.errors import BuildFailedError, DependencyError, FeedstockError
from flagtree_feedstock.platforms import host_platform
from flagtree_feedstock.recipe.render import RenderedOutput

from ._worker import EngineCall, run_engine
from .step_copies import link_copy, place_of

LOGGER = logging.getLogger(__name__)
# The package's tests, as the engine reads them.
TESTS = "info/tests/tests.yaml"
# How py-rattler's solver names a package no channel offers.
_NO_CANDIDATES = re.compile(r"No candidates were found for ([^\s,]+)")


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One environment a package's test makes: its specs, solved for the build machine (``build``: a script
    test's build requirements) or for the package's own platform (``host``)."""

    specs: tuple[str, ...]
    on: Literal["build", "host"]


def run_tests(
    packages: Sequence[Path],
    outputs: Mapping[str, RenderedOutput],
    call: EngineCall,
    *,
    strategy: str,
    scratch: Path,
    staging: Path,
    relay: Relay,
    cache: Path,
    link_scripts: LinkScriptPolicy,
    env: Mapping[str, str],
    lock: FolderLock,
    events: object | None,
) -> FeedstockError | None:
    """Test each of ``packages`` (the build ``call`` finished them; ``outputs`` by package stem rendered them)
    in a ``test`` call of its own against its test copies (in ``scratch``, from ``cache``) and ``staging``;
    ``events`` shows the engine's log, as for a build.

    ``strategy`` is the engine's: ``native`` tests only the packages of the build platform (``call``'s, else
    this machine's) and noarch ones, ``native-and-emulated`` every one. The first failure (a solve, a
    download, a repack, a refused link script, the test itself) is returned, once the package it was about and
    those not tested yet are set aside (:func:`set_aside`); a package that passed stays in ``staging``, to be
    published.
    """
    build_platform = call.build_platform or host_platform()
    for number, package in enumerate(packages):
        if strategy != "native-and-emulated" and package.parent.name not in (build_platform, "noarch"):
            LOGGER.info("not testing %s: a cross build's package, and no emulator", package.name)
            continue
        try:
            stem = package.name.removesuffix(".conda").removesuffix(".tar.bz2")
            copies = _empty_channel(scratch / "tests" / stem, package.parent.name)
            output = outputs.get(stem)
            if output is not None:  # else no copies: the test fails naming what it needed (not_offered)
                copy_test_packages(
                    package,
                    output,
                    copies,
                    staging=staging,
                    relay=relay,
                    cache=cache,
                    link_scripts=link_scripts,
                )
            test = replace(
                call,
                mode="test",
                package=str(package),
                channels=(copies.as_uri(), staging.as_uri()),  # the toolkit's folders only
                events=events is not None,
                key=None,
                up_to=None,
            )
            (scratch / "test-tmp").mkdir(exist_ok=True)
            result = run_engine(test, events=events, env=_test_environment(env, scratch), lock=lock)
            if result.outcome != "ok":
                raise failed_test(package, result.text, not_offered(package, (copies, staging)))
        except FeedstockError as exc:
            set_aside(packages[number:], staging)
            return exc
    return None


def _test_environment(env: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """The test call's variables: the build call's ``env`` (which holds no authentication file: run.py), a
    package cache of its own (the engine takes a package from the cache it is given before it reads a channel),
    and its temporary folder (the tests' prefixes) in ``scratch``, removed with it."""
    return {**env, "RATTLER_CACHE_DIR": str(scratch / "test-cache"), "TMPDIR": str(scratch / "test-tmp")}


def _empty_channel(channel: Path, subdir: str) -> Path:
    """A new channel folder whose noarch and ``subdir`` indexes list nothing yet."""
    for folder in {"noarch", subdir}:
        (channel / folder).mkdir(parents=True)
        (channel / folder / "repodata.json").write_text(
            f'{{"info": {{"subdir": "{folder}"}}, "packages": {{}}, "packages.conda": {{}}}}\n'
        )
    return channel


def environments(tests: Sequence[Mapping[str, Any]], package_spec: str) -> list[Environment]:
    """The environments the engine makes for ``tests`` (a rendered output's), whose package ``package_spec`` names
    (``name ==version build``), as py-rattler-build 0.73's ``run_test`` makes them: a script test's build
    requirements (when any) and its run requirements with the package; a python test's package with each
    ``python_version`` (none: the package alone), and pip for ``pip_check`` (its default); a downstream test's
    package with the package; ``package_contents`` installs nothing."""
    environments: list[Environment] = []
    for test in tests:
        if "script" in test:
            requirements = test.get("requirements") or {}
            if requirements.get("build"):
                environments.append(Environment(specs=tuple(map(str, requirements["build"])), on="build"))
            run = tuple(map(str, requirements.get("run") or ()))
            environments.append(Environment(specs=(*run, package_spec), on="host"))
        elif "python" in test:
            python = test["python"]
            pip = ("pip",) if python.get("pip_check", True) else ()
            versions = python.get("python_version")
            for version in [versions] if isinstance(versions, str) else versions or [None]:
                pinned = (f"python={version}",) if version is not None else ()
                environments.append(Environment(specs=(*pinned, package_spec, *pip), on="host"))
        elif "downstream" in test:
            environments.append(Environment(specs=(str(test["downstream"]), package_spec), on="host"))
    return environments


def presolve_channels(staging: Path, relay: Relay) -> list[str]:
    """The channels the toolkit's solve of the tests' environments reads, in order: the staging folder, then
    the user's channels as the toolkit's relay on loopback serves them (:mod:`..channel.index_relay`: every
    upstream byte fetched by the toolkit's client with the credentials of its origin; rattler gets none)."""
    return [staging.as_uri(), *relay.urls]


def copy_test_packages(
    package: Path,
    output: RenderedOutput,
    copies: Path,
    *,
    staging: Path,
    relay: Relay,
    cache: Path,
    link_scripts: LinkScriptPolicy,
) -> None:
    """Solve the environments of ``package``'s tests (``output`` rendered it) with py-rattler, and put the
    toolkit's copy (from ``cache``) of every package of their solutions into ``copies``, indexed; a channel's is
    the ``relay``'s copy (downloaded with the credentials of its origin, checked, repacked). The package itself is left out: the engine tests the file.
    Raise :class:`DependencyError` naming a package no channel has, :class:`ChannelError` for a download, a
    repack or a link script refused."""
    # As the engine names it: from its file name (name-version-build), in the subdir it lies in.
    name, version, build = package.name.removesuffix(".conda").removesuffix(".tar.bz2").rsplit("-", 2)
    subdir = package.parent.name
    needed = environments(
        output.engine_variant.recipe.to_dict().get("tests") or [], f"{name} =={version} {build}"
    )
    if not needed:
        return
    records: dict[str, Any] = {}
    scratch = copies.parent
    with _solver(relay, scratch / "rattler-cache") as solve:
        for environment in needed:
            platform = host_platform() if environment.on == "build" or subdir == "noarch" else subdir
            for record in solve(presolve_channels(staging, relay), environment.specs, platform):
                if record.file_name != package.name:
                    records.setdefault(str(record.url), record)
    relay.check()  # fail closed: a channel the relay could not read is never left out of a solve
    for url, record in records.items():
        where, file_name = place_of({"url": url, "subdir": record.subdir, "fn": record.file_name})
        if url.startswith("file://"):  # the staging folder's
            original = Path(unquote(urlsplit(url).path))
            copy, source = repacked(original, cache, file_name=file_name), str(original)
        else:  # a channel's: the relay's copy, downloaded with the credentials of its origin and checked
            copy, source = relay.copy(url), relay.source(url)
        # The engine activates the tests' environments: their activation scripts are refused too.
        link_scripts.admit(copy.name, copy.link_scripts, where=source, activation=copy.activation_scripts)
        link_copy(copy.path, copies / where / file_name)
    if records:
        index_channel(copies, check=False)  # each was checked as it was repacked


@contextmanager
def _solver(relay: Relay, cache: Path) -> Iterator[Any]:
    """A function solving specs from channels for a platform with py-rattler (this machine's virtual
    packages, as the engine's tests see them), its client reaching the ``relay`` alone and no credentials, its
    cache of indexes ``cache``; a failure is one line, the relay's own first when it refused a channel."""
    rattler = require("rattler", "py-rattler")
    errors = require("rattler.exceptions", "py-rattler")
    virtual = rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env())
    gateway = rattler.Gateway(
        cache_dir=cache, client=rattler.Client.from_config(rattler.Config.from_toml(relay.client_config()))
    )

    def solve(channels: Sequence[str], specs: Sequence[str], platform: str) -> list[Any]:
        shown = [relay.shown(c) for c in channels]
        try:
            return list(
                settled(
                    rattler.solve(
                        [rattler.Channel(c) for c in channels],
                        [rattler.MatchSpec(s, strict=False) for s in specs],
                        gateway=gateway,
                        platforms=[platform, "noarch"],
                        virtual_packages=virtual,
                    )
                )
            )
        except errors.SolverError as exc:
            relay.check()
            raise _unsolvable(relay.shown(str(exc)), specs, shown) from None
        except (errors.GatewayError, errors.FetchRepoDataError) as exc:
            relay.check()
            raise DependencyError(
                f"the tests' environment ({' '.join(specs)}) could not be solved: a channel is unreachable: "
                f"{shown_text(_first_line(relay.shown(str(exc))), shown)}",
                fix="check the network and the --channel URLs; --no-test builds without the tests",
            ) from None

    yield solve


def _unsolvable(text: str, specs: Sequence[str], channels: Sequence[str]) -> DependencyError:
    missing = sorted(set(_NO_CANDIDATES.findall(text)))
    what = f"no channel has {', '.join(missing)}" if missing else shown_text(_first_line(text), channels)
    return DependencyError(
        f"the tests' environment ({' '.join(specs)}) cannot be solved: {what}; channels: "
        f"{', '.join(shown_url(c) for c in channels)}",
        fix="pass --channel with a channel that has it, or build with --no-test",
    )


def not_offered(package: Path, channels: Sequence[Path]) -> list[str]:
    """The packages the tests of ``package`` (its ``info/tests/tests.yaml``, what the engine reads) require that
    none of the local ``channels`` lists for its platform or noarch."""
    rattler = require("rattler", "py-rattler")
    import yaml  # noqa: PLC0415 - only to say why a test's environment could not be made

    text = read_info(package, (TESTS,), whole=False).get(TESTS)
    tests = yaml.safe_load(text) if text else []
    name, version, build = package.name.removesuffix(".conda").removesuffix(".tar.bz2").rsplit("-", 2)
    needed = {
        rattler.MatchSpec(spec, strict=False).name.normalized
        for environment in environments(
            tests if isinstance(tests, list) else [], f"{name} =={version} {build}"
        )
        for spec in environment.specs
    }
    held = set()
    for channel in channels:
        for subdir in {package.parent.name, host_platform(), "noarch"}:
            repodata = channel / subdir / "repodata.json"
            if repodata.is_file():
                listed = json.loads(repodata.read_bytes())
                for key in ("packages", "packages.conda"):
                    held |= {str(r.get("name")) for r in (listed.get(key) or {}).values()}
    return sorted(needed - held - {name})


def failed_test(package: Path, text: str, missing: Sequence[str]) -> BuildFailedError | DependencyError:
    """The engine's test of ``package`` failed with ``text``: one line, naming the packages it needs that the
    engine could not find among the copies (``missing``) when that is why."""
    if missing:
        return DependencyError(
            f"the tests of {package.name} need {', '.join(missing)}, which the toolkit's solve of their "
            "environment did not take: not installed",
            fix="report it as a bug of flagtree-feedstock with the recipe's tests; --no-test builds without them",
        )
    return BuildFailedError(
        f"the tests of {package.name} failed: {_first_line(text).removeprefix('PyRattlerBuildError: ')}",
        fix="read the test's output above; --no-test builds without the tests",
    )


def set_aside(packages: Sequence[Path], staging: Path) -> None:
    """Move ``packages`` (untested, or failed) into the staging folder's ``broken/``, where the engine puts a
    package whose test failed: they are not published."""
    broken = staging / "broken"
    broken.mkdir(exist_ok=True)
    for package in packages:
        if package.exists():
            shutil.move(package, broken / package.name)


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else "no message"
