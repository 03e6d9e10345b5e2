"""Shared fixtures: no test reaches the network, and toy recipes build into tmp folders."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

# DEAD_PROXY: a dead end for any HTTP client that honours proxies (rattler's does). The rehearsal tier's
# session fixtures come from there too, made once for all its modules.
from _rehearsal_fixtures import DEAD_PROXY, offline_session, sources, stub_channel  # noqa: F401
from _toy import make_empty_channel

# A test run started in the background of a non-interactive shell (`pytest &`, a script's `nohup ... &`)
# inherits SIGINT ignored, and so would every command the tests start: the Ctrl-C tests would then see none
# arrive. A user's Ctrl-C comes from a terminal, where it is not ignored; a handler, unlike SIG_IGN, is reset
# to the default in the commands the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Run from the repository root, wherever pytest was started (``cd tests && python -m pytest`` too): the
    commands the tests run read ``recipe/`` and ``conda_build_config.yaml`` from the working folder, as a
    user's do. The paths given on the command line were resolved where pytest started."""
    if Path.cwd() != config.rootpath:
        os.chdir(config.rootpath)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Send every proxied request to a closed loopback port, so a network attempt fails at once."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, DEAD_PROXY)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    yield


@pytest.fixture
def empty_channel(tmp_path: Path) -> Path:
    """An indexed channel folder with no packages: a stand-in for conda-forge that needs no network."""
    return make_empty_channel(tmp_path / "empty-channel")
