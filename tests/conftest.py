"""Shared fixtures: no test reaches the network, and toy recipes build into tmp folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# DEAD_PROXY: a dead end for any HTTP client that honours proxies (rattler's does). The rehearsal tier's
# session fixtures come from there too, made once for all its modules.
from _rehearsal_fixtures import DEAD_PROXY, offline_session, sources, stub_channel  # noqa: F401
from _toy import make_empty_channel


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
