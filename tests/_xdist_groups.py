"""Which tests run on one pytest-xdist worker: those that share a module- or session-scoped fixture of ours.

Each worker builds the module- and session-scoped fixtures of the tests it runs (a toy channel, the rehearsal's
stub channel and builds, a venv, an emulator's programs). Tests that share one, directly or through another
fixture, form a group that runs on one worker, so the thing is built once in the run, as it is without
workers. xdist's ``--dist loadgroup`` cannot be told groups by pytest 9.2 (it rewrites a test id pytest no
longer reads), and its controller collects no tests: so each worker writes the groups of its collection to a
file, and the controller's scheduler (xdist's loadscope, a group for a scope) reads them. Groups go out biggest
first (xdist's reordering by size), then every other test to whichever worker is free.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

# The key of pytest-xdist's workerinput naming the folder where workers write their groups.
GROUPS_INPUT = "flagtree_groups"


def shared_fixture_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Test id -> group, for every test that uses a module- or session-scoped fixture defined in tests/
    (pytest's own, such as ``tmp_path_factory``, are not ours); tests that share one are in one group."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    first: dict[str, str] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        keys = []
        for name in info.names_closure:
            definitions = info.name2fixturedefs.get(name)
            if not definitions or not definitions[-1].baseid or definitions[-1].scope == "function":
                continue
            # A module-scoped fixture is built once per module that uses it; a session-scoped one once.
            where = (
                "session" if definitions[-1].scope in ("session", "package") else item.nodeid.split("::")[0]
            )
            keys.append(f"{where}::{name}")
        for key in keys[1:]:
            parent[root(key)] = root(keys[0])
        if keys:
            first[item.nodeid] = keys[0]
    return {nodeid: root(key) for nodeid, key in first.items()}


def write_groups(folder: Path, groups: dict[str, str]) -> None:
    """A worker's groups, whole (written aside, then renamed), in a file of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    part = folder / f"xdist-groups-{worker}.json.part"
    part.write_text(json.dumps(groups))
    part.replace(folder / f"xdist-groups-{worker}.json")


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's loadscope, its scope a test's shared-fixture group, or the test alone."""

    def __init__(self, config: pytest.Config, log: Producer | None, folder: Path) -> None:
        super().__init__(config, log)
        self.folder = folder
        self.groups: dict[str, str] = {}

    def schedule(self) -> None:
        # Called once every worker has collected (and so written its file): every worker's collection is the same.
        if self.collection is None:
            found = sorted(self.folder.glob("xdist-groups-*.json"))
            self.groups = json.loads(found[0].read_text()) if found else {}
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        return self.groups.get(nodeid, nodeid)
