"""Planning is pure: which packages a matrix builds is decided without the engine."""

from __future__ import annotations

import pytest

from flagtree_feedstock.builder.plan import BuildStep, plan_builds
from flagtree_feedstock.builder.run import classify_build_error
from flagtree_feedstock.errors import (
    BuildFailedError,
    ConfigurationError,
    DependencyError,
    NothingToDoError,
    SourceFetchError,
)
from flagtree_feedstock.recipe.render import RenderedOutput


class _Source:
    def __init__(self, entry: dict[str, str]) -> None:
        self._entry = entry

    def to_dict(self) -> dict[str, str]:
        return self._entry


class _Recipe:
    def __init__(self, sources: list[_Source]) -> None:
        self.sources = sources


class _EngineVariant:
    def __init__(self, sources: list[_Source]) -> None:
        self.recipe = _Recipe(sources)


def _output(
    name: str, build: str, python: str | None, sources: list[_Source] | None = None
) -> RenderedOutput:
    return RenderedOutput(
        name=name,
        version="1.0",
        build_string=build,
        python=python,
        pins={},
        variant={"python": python} if python else {},
        engine_variant=_EngineVariant(sources or []),
    )


MATRIX = [
    o
    for py, h in (("3.10", "a"), ("3.11", "b"), ("3.12", "c"), ("3.13", "d"))
    for o in (
        _output("flagtree-llvm", "h0_0", None),
        _output("flagtree-cpu", f"py{py.replace('.', '')}h{h}_0", py),
    )
]


def test_the_python_independent_output_is_built_once() -> None:
    plan = plan_builds(MATRIX)
    assert [s.output.name for s in plan] == ["flagtree-llvm"] + ["flagtree-cpu"] * 4
    assert plan[0].variants == 4
    assert all(s.variants == 1 for s in plan[1:])


def test_python_selection_keeps_the_shared_output() -> None:
    plan = plan_builds(MATRIX, pythons=["3.12"])
    assert [(s.output.name, s.output.python) for s in plan] == [
        ("flagtree-llvm", None),
        ("flagtree-cpu", "3.12"),
    ]


def test_unknown_python_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"--python 3\.9 is not in the variant file's python matrix"):
        plan_builds(MATRIX, pythons=["3.9"])


def test_output_selection() -> None:
    plan = plan_builds(MATRIX, names=["flagtree-llvm"])
    assert [(s.output.name, s.variants) for s in plan] == [("flagtree-llvm", 4)]
    with pytest.raises(ConfigurationError, match="--output flagtree is not an output of the recipe"):
        plan_builds(MATRIX, names=["flagtree"])


def test_a_combination_that_selects_nothing_is_nothing_to_do() -> None:
    """Each name and python exists, but no output has both: nothing to build, said before any build."""
    matrix = [_output("old-ext", "py310h0_0", "3.10"), _output("new-ext", "py313h0_0", "3.13")]
    with pytest.raises(NothingToDoError) as info:
        plan_builds(matrix, pythons=["3.13"], names=["old-ext"])
    assert str(info.value) == (
        "no output of old-ext is rendered for python 3.13 (fix: check the variant file's matrix with "
        "--render-only (without --python and --output))"
    )


def _step() -> BuildStep:
    source = _Source({"url": "https://example.invalid/llvm.tar.gz", "sha256": "0" * 64})
    return BuildStep(output=_output("flagtree-llvm", "h0_0", None, [source]), variants=1)


@pytest.mark.parametrize(
    ("message", "kind", "needle"),
    [
        (
            "PyRattlerBuildError: Failed to download from URL: Request failed",
            SourceFetchError,
            "example.invalid/llvm.tar.gz",
        ),
        (
            "PyRattlerBuildError: Failed to resolve dependencies",
            DependencyError,
            "could not be solved from conda-forge",
        ),
        ("PyRattlerBuildError: Script failed with status 2", BuildFailedError, "Script failed with status 2"),
    ],
)
def test_engine_errors_become_one_actionable_line(message: str, kind: type, needle: str) -> None:
    error = classify_build_error(_step(), message, ["file:///staging", "conda-forge"])
    assert type(error) is kind
    assert needle in str(error)
    assert "\n" not in str(error)
    assert error.fix


def test_the_solve_error_shows_the_channels_without_their_secrets() -> None:
    """The CLI shows every URL of an error line without its secrets too; this line has none to begin with."""
    channel = "https://user:PW-1234567@conda.example/t/TK-1234567/chan?sig=SIG-1234567"
    text = f"PyRattlerBuildError: Failed to resolve dependencies from {channel}"
    error = classify_build_error(_step(), text, ["file:///staging", channel])
    assert "could not be solved from https://…@conda.example/t/…/chan?…" in str(error)
    assert "1234567" not in str(error)
