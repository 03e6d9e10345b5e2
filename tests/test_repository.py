"""The repository's own contracts: the README's commands, .ci/run, the example environment, code quality."""

from __future__ import annotations

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
