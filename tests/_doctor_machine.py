"""A recorded machine as this one, for ``flagtree-doctor --apply`` (which ``--root`` refuses): in a real process
through tests/interrupt_hook/sitecustomize.py (``FLAGTREE_TEST_MACHINE``), in this one by the same replacement."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from flagtree_doctor import model

HOOK = Path(__file__).parent / "interrupt_hook"


def as_this_machine(tree: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's by default) for a doctor process that reads ``tree`` as this machine: the hook
    first on ``PYTHONPATH``, what was there after it (mutations/run.py puts its copy's code there)."""
    full = dict(os.environ if env is None else env)
    rest = [p for p in full.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**full, "PYTHONPATH": os.pathsep.join([str(HOOK), *rest]), "FLAGTREE_TEST_MACHINE": str(tree)}


def read_as_this_machine(monkeypatch: pytest.MonkeyPatch, tree: Path) -> None:
    """In this process: the doctor's ``System.from_root(None)`` reads ``tree``, as the hook makes it do."""
    from_root = model.System.from_root

    def recorded(root: Path | None, env: Mapping[str, str] | None = None) -> model.System:
        return from_root(root or tree, env)

    monkeypatch.setattr(model.System, "from_root", recorded)
