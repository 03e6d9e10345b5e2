"""The rehearsal tier's session fixtures, shared by its modules (test_rehearsal.py, test_rehearsal_cross.py)
through conftest.py, so the stub channel and the stand-in sources are made once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from _rehearsal_channel import build_rehearsal_channel
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
    llvm_commit = str(variant_value(ROOT, "llvm_commit"))
    return make_sources(
        tmp_path_factory.mktemp("github"),
        llvm_commit=llvm_commit,
        flagtree_src=Path(flagtree_src) if flagtree_src else None,
    )


def variant_value(root: Path, key: str) -> object:
    """The first value of ``key`` in the repository's variant files (the recipe's first)."""
    for path in (root / "recipe" / "conda_build_config.yaml", root / "conda_build_config.yaml"):
        if path.is_file():
            data = yaml.safe_load(path.read_text()) or {}
            if key in data:
                return data[key][0]
    raise KeyError(key)
