"""The repository's own contracts: the README's commands, .ci/run, the example environment, code quality."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", markdown, flags=re.DOTALL)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """The README's test block: the venv line .ci/run also runs, then the command, .ci/run's last line."""
    readme = (ROOT / "README.md").read_text()
    *venv, command = next(b for b in _bash_blocks(readme) if "pytest" in b).strip().splitlines()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci_lines[-1] == command
    assert venv == ["python3 -m venv .venv && . .venv/bin/activate"]
    assert "python3 -m venv .venv" in ci_lines and "source .venv/bin/activate" in ci_lines


def test_readme_main_job_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in _bash_blocks(readme) if "flagtree-feedstock build" in b)
    assert 'pip install ".[build]"' in block
    assert "flagtree-feedstock build --render-only" in block


def test_example_environment_installs_the_package() -> None:
    env = yaml.safe_load((ROOT / "examples" / "environment.yml").read_text())
    assert env["channels"][-1] == "conda-forge"
    assert "flagtree-cpu" in env["dependencies"]


def test_readme_says_there_is_no_public_channel_where_it_first_shows_one() -> None:
    readme = (ROOT / "README.md").read_text()
    first = readme.index("-c <channel>")
    block_end = readme.index("```\n", first) + len("```\n")
    following = readme[block_end:].lstrip("\n").split("\n\n", 1)[0]
    assert following.startswith("No public channel holds these packages yet"), following
    # ... and how to get one: build it, or the CI's publish job to one's own channel.
    assert "flagtree-feedstock build" in following
    assert "`publish` job" in following
    assert "prefix.dev or anaconda.org" in following


def test_example_environment_says_there_is_no_public_channel() -> None:
    text = (ROOT / "examples" / "environment.yml").read_text()
    comment = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "No public channel holds flagtree-cpu yet" in comment
    assert "flagtree-feedstock build" in comment
    assert "publish job" in comment


@pytest.mark.parametrize(
    "command",
    [
        [
            "ruff",
            "check",
            "--output-format",
            "concise",
            "src",
            "flagtree-doctor",
            "tests",
            "recipe",
            "benchmarks",
            ".ci",
            "mutations",
        ],
        [
            "ruff",
            "format",
            "--check",
            "src",
            "flagtree-doctor",
            "tests",
            "recipe",
            "benchmarks",
            ".ci",
            "mutations",
        ],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_code_quality(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# A noqa that says why: `# noqa: CODE[, CODE] - reason` (as every ignore of pyproject.toml has its comment).
_NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")
_REASONED = re.compile(r":\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s+-\s+\S")


def noqa_without_reason(roots: Sequence[Path]) -> list[str]:
    """Each ``# noqa`` comment of the Python files under ``roots`` that names no code or gives no reason."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                comment = _NOQA.search(line)
                if comment is not None and not _REASONED.match(comment["rest"]):
                    found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_every_noqa_of_the_source_says_why() -> None:
    """Issue 48 item 5: a reader of the source learns why each rule is waived where it is."""
    assert noqa_without_reason([ROOT / "src", ROOT / "flagtree-doctor" / "src"]) == []


def test_a_noqa_without_a_reason_is_found(tmp_path: Path) -> None:
    """The check itself: a bare noqa, and one with codes but no reason, are found; one with a reason is not."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "m.py").write_text(
        "import os  # noqa: F401\nimport re  # noqa\nimport sys  # noqa: F401 - re-exported\n",
        encoding="utf-8",
    )
    assert [entry.split(": ", 1)[0].rsplit(":", 1)[1] for entry in noqa_without_reason([source])] == [
        "1",
        "2",
    ]


# tests/README.md's table of where each module's tests are (issue 48 item 6).
TABLE_HEADING = "## Where a module's tests are"
SOURCES = (ROOT / "src", ROOT / "flagtree-doctor" / "src")


def modules(sources: Sequence[Path] = SOURCES) -> set[str]:
    """Every module of the two source trees, as ``package/path.py``; an ``__init__.py`` that holds only its
    docstring (a subpackage's map) is no module of its own."""
    found = set()
    for source in sources:
        for path in source.rglob("*.py"):
            body = ast.parse(path.read_text(encoding="utf-8")).body
            code = [
                node
                for node in body
                if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            ]
            if path.name == "__init__.py" and all(
                isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in code
            ):
                continue
            found.add(str(path.relative_to(source)))
    return found


def table_rows(readme: Path) -> dict[str, list[str]]:
    """The rows of ``readme``'s table under :data:`TABLE_HEADING`: each module and its test files."""
    text = readme.read_text(encoding="utf-8")
    if TABLE_HEADING not in text:
        return {}
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def table_problems(readme: Path, tests: Path, sources: Sequence[Path] = SOURCES) -> list[str]:
    """What is wrong with the table: a module missing, a row for no module, a row without tests, a test file that
    is not there."""
    rows = table_rows(readme)
    known = modules(sources)
    problems = [f"{module}: no row" for module in sorted(known - set(rows))]
    problems += [f"{module}: no such module" for module in sorted(set(rows) - known)]
    problems += [f"{module}: no tests named" for module, files in sorted(rows.items()) if not files]
    problems += [
        f"{module}: {name}: no such test file"
        for module, files in sorted(rows.items())
        for name in files
        if not (tests / name).is_file()
    ]
    return problems


def test_every_module_s_tests_are_found_in_one_look() -> None:
    """tests/README.md names, for each module, the test files that test it: every module has its row, every
    file named is there."""
    assert table_problems(ROOT / "tests" / "README.md", ROOT / "tests") == []


def test_a_stale_table_is_found(tmp_path: Path) -> None:
    """The check itself: a module without a row, a row for a module that is gone, a row without tests and a test
    file that is gone are each found."""
    source = tmp_path / "src" / "pkg"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text('"""A map only."""\n', encoding="utf-8")
    for name in ("kept.py", "new.py", "bare.py"):
        (source / name).write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_kept.py").write_text("", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        f"{TABLE_HEADING}\n\n| module | tests |\n| --- | --- |\n| `pkg/kept.py` | `test_kept.py` |\n"
        "| `pkg/bare.py` |  |\n| `pkg/gone.py` | `test_gone.py` |\n\n## Next\n",
        encoding="utf-8",
    )
    assert table_problems(readme, tmp_path / "tests", [tmp_path / "src"]) == [
        "pkg/new.py: no row",
        "pkg/gone.py: no such module",
        "pkg/bare.py: no tests named",
        "pkg/gone.py: test_gone.py: no such test file",
    ]
