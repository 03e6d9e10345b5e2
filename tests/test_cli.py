"""``cli.py``: the root parser and the one dispatch table, each command run by its own module of ``commands/``.

What each command does is tested through ``main`` in the command's own test file; here only the table: every
command the docs name is in ``--help`` in its place, and runs its own module's ``run`` with the parsed
arguments, its return value the exit status.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping

import pytest
from rich.console import Console

from flagtree_feedstock import cli
from flagtree_feedstock.commands import Command, build, bump, channel, sbom, staged_recipes, upload

# Each command with the least arguments its parser takes, and the module that must run it.
INVOCATIONS = [
    (["build"], build),
    (["channel", "index", "folder"], channel),
    (["upload", "folder", "--to", "prefix", "--channel", "c"], upload),
    (["staged-recipes", "--maintainer", "someone", "--output", "out"], staged_recipes),
    (["sbom", "package.conda"], sbom),
    (["bump", "--flagtree-src", "flagtree"], bump),
]


@pytest.mark.parametrize(("argv", "module"), INVOCATIONS, ids=[argv[0] for argv, _ in INVOCATIONS])
def test_each_command_runs_its_own_module(
    argv: list[str], module: Command, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[str, argparse.Namespace]] = []

    def recorder(
        name: str, status: int
    ) -> Callable[[argparse.Namespace, Mapping[str, str], Console, Console], int]:
        def run(args: argparse.Namespace, env: Mapping[str, str], out: Console, err: Console) -> int:
            ran.append((name, args))
            return status

        return run

    for other in {m for _, m in INVOCATIONS}:
        monkeypatch.setattr(other, "run", recorder(other.__name__, 0 if other is not module else 7))
    assert cli.main(argv, env={}, console=Console(record=True)) == 7
    assert [name for name, _ in ran] == [module.__name__]
    assert ran[0][1].command == argv[0]


def test_help_lists_every_command_in_its_place(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"], env={})
    assert exit_.value.code == 0
    listed = re.search(r"\{([a-z,-]+)\}", capsys.readouterr().out)
    assert listed is not None
    assert listed.group(1).split(",") == [
        "build",
        "channel",
        "upload",
        "staged-recipes",
        "sbom",
        "bump",
        "doctor",
        "verify",
    ]
