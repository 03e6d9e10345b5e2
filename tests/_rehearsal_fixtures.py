"""The rehearsal tier's session fixtures, shared by its modules (test_rehearsal.py, test_rehearsal_cross.py,
test_rehearsal_sbom.py) through conftest.py, so the stub channel, the stand-in sources and the native build of
every output are made once per session (per worker under pytest-xdist: conftest.py puts the tests that share
them on one worker)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from _rehearsal import build, requirement_names, write_variants
from _rehearsal_channel import build_rehearsal_channel, stub_names
from _rehearsal_sources import ROOT, Sources, make_sources
from _tools import aarch64_gcc, require_executable

# A dead end for any HTTP client that honours proxies (rattler's does): nothing listens on port 9.
DEAD_PROXY = "http://127.0.0.1:9"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy")


@pytest.fixture(scope="session")
def offline_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The dead proxy of conftest.py for the session-scoped builds (they start before its autouse fixture),
    and a package cache of the session's own: the engine's package test reads a package's tests from the copy
    of the same file name in rattler's cache, so a package rebuilt under the same build string (the same
    variant, another recipe) was tested with an earlier build's tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RATTLER_CACHE_DIR", str(tmp_path_factory.mktemp("rattler-cache")))
        for name in PROXY_VARIABLES:
            patch.setenv(name, DEAD_PROXY)
        for name in ("no_proxy", "NO_PROXY"):
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="session")
def stub_channel(tmp_path_factory: pytest.TempPathFactory, offline_session: None) -> Path:
    require_executable("git", "git")
    cc = aarch64_gcc()
    work = tmp_path_factory.mktemp("stub-work")
    # The compilers of the recipe's variant (c_compiler_version and cxx_compiler_version are zipped).
    gcc_major = int(str(variant_value(ROOT, "c_compiler_version")))
    return build_rehearsal_channel(tmp_path_factory.mktemp("stub") / "channel", work, cc, gcc_major)


@pytest.fixture(scope="session")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Sources:
    flagtree_src = os.environ.get("FLAGTREE_SRC")
    flagtree_cpu_src = os.environ.get("FLAGTREE_CPU_SRC")
    llvm_commit = str(variant_value(ROOT, "llvm_commit"))
    return make_sources(
        tmp_path_factory.mktemp("github"),
        llvm_commit=llvm_commit,
        flagtree_src=Path(flagtree_src) if flagtree_src else None,
        flagtree_cpu_src=Path(flagtree_cpu_src) if flagtree_cpu_src else None,
    )


@dataclass(frozen=True)
class Rehearsal:
    """The built channel of the real recipe and what it was built with."""

    channel: Path
    stub_channel: Path
    variant_file: Path
    sources: Sources


@pytest.fixture(scope="session")
def rehearsal(
    tmp_path_factory: pytest.TempPathFactory, stub_channel: Path, sources: Sources, offline_session: None
) -> Rehearsal:
    """Every output of the real recipe, built in render order: package tests run where they can (see README)."""
    folder = tmp_path_factory.mktemp("rehearsal")
    variant_file = write_variants(ROOT, sources, folder / "variants.yaml")
    missing = sorted(requirement_names(ROOT, variant_file) - stub_names(stub_channel))
    if missing:
        pytest.fail(
            f"the recipe needs {', '.join(missing)}, which the stub channel lacks: add to tests/_rehearsal_channel.py"
        )
    channel = folder / "channel"
    # flagtree-cpu's import and script tests need its aarch64 libraries loaded by python: not here.
    for name, test in (("flagtree-llvm", True), ("flagtree-doctor", True), ("flagtree-cpu", False)):
        build(ROOT, variant_file, channel, stub_channel, names=[name], test=test)
    return Rehearsal(channel=channel, stub_channel=stub_channel, variant_file=variant_file, sources=sources)


def built_package(channel: Path, name: str) -> Path:
    """The one package file of output ``name`` in ``channel``."""
    (found,) = [p for p in channel.glob(f"*/{name}-*.conda") if p.name.rsplit("-", 2)[0] == name]
    return found


def variant_value(root: Path, key: str) -> object:
    """The first value of ``key`` in the repository's variant files (the recipe's first)."""
    for path in (root / "recipe" / "conda_build_config.yaml", root / "conda_build_config.yaml"):
        if path.is_file():
            data = yaml.safe_load(path.read_text()) or {}
            if key in data:
                return data[key][0]
    raise KeyError(key)
