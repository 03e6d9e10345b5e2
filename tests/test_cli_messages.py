"""What the CLIs tell users names only options that exist, and every argument is explained in --help.

Every string in the two distributions' sources that a user can read (fix texts, error messages, help texts, log lines; docstrings are
left out) is scanned for ``--options``; each must exist in the argparse parser of the command that prints
it: the one the text names (``flagtree-feedstock build --output-dir``), else the commands whose code the
module belongs to. Options of other programs (``conda install --force-reinstall``) are not ours to check.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from flagtree_doctor.cli import _parser as doctor_parser
from flagtree_doctor.verify.cli import _parser as verify_parser
from flagtree_feedstock.cli import _parser as feedstock_parser

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "flagtree_feedstock"
# The runtime distribution (flagtree-doctor/): flagtree-doctor and flagtree-verify.
DOCTOR_SRC = ROOT / "flagtree-doctor" / "src" / "flagtree_doctor"
SOURCES = (SRC, DOCTOR_SRC)
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# A program named in a text: the options after it (up to a clause break) are that program's.
PROGRAM = re.compile(r"(?<![\w/-])(flagtree-feedstock|flagtree-doctor|flagtree-verify|[a-z][\w.-]*)\b")
CLAUSE_BREAK = re.compile(r"[,;:()`]")
FOREIGN = {
    "conda",
    "conda-build",
    "conda-mambabuild",
    "mamba",
    "pip",
    "apt-get",
    "rattler-build",
    "git",
    "diff",
    "cp",
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every command line the toolkit accepts ("flagtree-feedstock channel index", ...) and its parser."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}", child)

    walk("flagtree-feedstock", feedstock_parser())
    walk("flagtree-doctor", doctor_parser("flagtree-doctor"))
    walk("flagtree-verify", verify_parser("flagtree-verify"))
    return found


COMMANDS = _commands()
FEEDSTOCK = [name for name in COMMANDS if name.startswith("flagtree-feedstock ")]


def _options(command: str) -> set[str]:
    return {s for action in COMMANDS[command]._actions for s in action.option_strings}


def _module_commands(path: Path) -> list[str]:
    """The commands whose code runs this module, for texts that name no command."""
    if path.is_relative_to(DOCTOR_SRC):
        if path.relative_to(DOCTOR_SRC).as_posix().startswith("verify/"):
            return ["flagtree-verify", "flagtree-feedstock verify"]
        return ["flagtree-doctor", "flagtree-feedstock doctor"]
    relative = path.relative_to(SRC).as_posix()
    if relative.startswith("bump/") or relative == "recipe/pins.py":
        return ["flagtree-feedstock bump"]
    if relative == "recipe/staged_recipes.py":
        return ["flagtree-feedstock staged-recipes"]
    by_module = {
        "channel/upload.py": ["flagtree-feedstock upload"],
        "channel/server_files.py": ["flagtree-feedstock upload"],
        "channel/trusted_publishing.py": ["flagtree-feedstock upload"],
        "channel/attestations.py": ["flagtree-feedstock upload"],
        **{
            f"channel/{name}.py": [
                "flagtree-feedstock build",
                "flagtree-feedstock channel index",
                "flagtree-feedstock channel install",
            ]
            for name in ("package_check", "folder", "index", "install")
        },
        "platforms.py": ["flagtree-feedstock build", "flagtree-feedstock channel install"],
        "cli.py": FEEDSTOCK,
        "commands/_arguments.py": ["flagtree-feedstock build", "flagtree-feedstock channel install"],
        # channel index's help names the build's --output-dir
        "commands/channel.py": [
            "flagtree-feedstock channel index",
            "flagtree-feedstock channel install",
            "flagtree-feedstock build",
        ],
        "commands/upload.py": ["flagtree-feedstock upload"],
        "commands/staged_recipes.py": ["flagtree-feedstock staged-recipes"],
        "commands/sbom.py": ["flagtree-feedstock sbom"],
        "commands/bump.py": ["flagtree-feedstock bump"],
    }
    return by_module.get(relative, ["flagtree-feedstock build"])


def _texts(source: str) -> Iterator[tuple[int, str]]:
    """The user-readable strings of a module: f-strings with ``{}`` for their fields, docstrings left out."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if not re.fullmatch(r"-{1,2}[\w-]+", text):  # a bare flag is an argv element or an option's name
            yield node.lineno, text


def _command_of(text: str, end: int) -> str | None:
    """The command named before position ``end`` in the same clause, or None; "" for another program's."""
    clause = CLAUSE_BREAK.split(text[:end])[-1]
    words = clause.split()
    for index in range(len(words) - 1, -1, -1):
        word = words[index]
        if word in FOREIGN:
            return ""
        if word in {"flagtree-feedstock", "flagtree-doctor", "flagtree-verify"}:
            command = word
            for following in words[index + 1 :]:
                if f"{command} {following}" not in COMMANDS:
                    break
                command = f"{command} {following}"
            return command
    return None


def unknown_options(path: Path, source: str) -> list[str]:
    """``file:line: --option (in: commands)`` for each option a text names that its command lacks."""
    problems = []
    for line, text in _texts(source):
        for match in OPTION.finditer(text):
            command = _command_of(text, match.start())
            if command == "":
                continue
            commands = [command] if command else _module_commands(path)
            if not any(match.group() in _options(c) for c in commands):
                where = f"{path.relative_to(ROOT)}:{line}"
                problems.append(
                    f"{where}: {match.group()} (not an option of {' / '.join(commands)}): {text!r}"
                )
    return problems


def test_every_option_a_message_names_exists() -> None:
    paths = sorted(path for source in SOURCES for path in source.rglob("*.py"))
    problems = [p for path in paths for p in unknown_options(path, path.read_text())]
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source", "flagged"),
    [
        # The offender this test was written for: the option is --recipe-dir.
        ("render.py", 'raise E("x", fix="pass --recipe PATH to a recipe.yaml")', "--recipe"),
        # A command named in the text is checked against that command's parser, not the module's.
        ("upload.py", 'E("x", fix="build into it first: flagtree-feedstock build --to DIR")', "--to"),
        ("cli.py", 'E(f"{n} (fix: run flagtree-feedstock channel index --prefix {d})")', "--prefix"),
        (DOCTOR_SRC / "cpu.py", 'R(fix="see flagtree-doctor --lsit")', "--lsit"),
        (DOCTOR_SRC / "verify/cli.py", 'p.add_argument("--x", help="like --json, twice")', None),
        ("build.py", 'E("x", fix="conda install --force-reinstall y, or pass --nope")', "--nope"),
        ("build.py", 'E("x", fix="conda install --force-reinstall flagtree-cpu")', None),
    ],
)
def test_the_check_catches_an_option_that_does_not_exist(
    module: str | Path, source: str, flagged: str | None
) -> None:
    problems = unknown_options(SRC / module, source)
    assert [p.split(": ")[1].split()[0] for p in problems] == ([flagged] if flagged else [])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_argument_and_subcommand_has_a_help_text(command: str) -> None:
    parser = COMMANDS[command]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions if a.help}
            assert helped == set(action.choices), f"{command}: subcommands without help"
        else:
            assert action.help, f"{command}: {action.dest} has no help text"
