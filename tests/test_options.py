from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_feedstock.builder.options import BuildOptions, from_cli
from flagtree_feedstock.errors import ConfigurationError


def test_defaults_when_nothing_is_given() -> None:
    assert from_cli({}, {}) == BuildOptions()


def test_command_line_wins_over_environment() -> None:
    options = from_cli(
        {"output_dir": "cli-out", "pythons": ["3.12"]},
        {"FLAGTREE_FEEDSTOCK_OUTPUT_DIR": "env-out", "FLAGTREE_FEEDSTOCK_CHANNELS": "file:///a, file:///b"},
    )
    assert options.output_dir == Path("cli-out")
    assert options.channels == ("file:///a", "file:///b")
    assert options.pythons == ("3.12",)


def test_bad_values_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="--tool 'mamba' is not supported"):
        from_cli({"tool": "mamba"}, {})
    with pytest.raises(ConfigurationError, match="--build-platform 'osx-arm64'"):
        from_cli({}, {"FLAGTREE_FEEDSTOCK_BUILD_PLATFORM": "osx-arm64"})


def test_summary_marks_what_differs_from_the_defaults() -> None:
    summary = from_cli({"no_test": True}, {}).summary().splitlines()
    assert " * test: False" in summary
    assert "   target_platform: linux-aarch64" in summary


def test_a_misspelt_variable_names_the_one_meant() -> None:
    with pytest.raises(ConfigurationError) as info:
        from_cli({}, {"FLAGTREE_FEEDSTOCK_OUTPUTDIR": "x"})
    assert str(info.value) == (
        "unknown environment variable FLAGTREE_FEEDSTOCK_OUTPUTDIR (fix: did you mean FLAGTREE_FEEDSTOCK_OUTPUT_DIR?)"
    )
    assert from_cli({}, {"FLAGTREE_FEEDSTOCK_DEBUG": "1"}) == BuildOptions()


def test_variables_follow_the_option_names() -> None:
    options = from_cli(
        {},
        {
            "FLAGTREE_FEEDSTOCK_PYTHON": "3.11 3.12",
            "FLAGTREE_FEEDSTOCK_OUTPUT": "flagtree-cpu",
            "FLAGTREE_FEEDSTOCK_CHANNEL": "file:///a,file:///b",
        },
    )
    assert options.pythons == ("3.11", "3.12")
    assert options.outputs == ("flagtree-cpu",)
    assert options.channels == ("file:///a", "file:///b")


def test_the_old_plural_names_still_work() -> None:
    options = from_cli(
        {},
        {
            "FLAGTREE_FEEDSTOCK_PYTHONS": "3.13",
            "FLAGTREE_FEEDSTOCK_OUTPUTS": "flagtree-llvm",
            "FLAGTREE_FEEDSTOCK_CHANNELS": "file:///c",
        },
    )
    assert (options.pythons, options.outputs, options.channels) == (
        ("3.13",),
        ("flagtree-llvm",),
        ("file:///c",),
    )


def test_a_variable_set_under_both_names_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        from_cli({}, {"FLAGTREE_FEEDSTOCK_PYTHON": "3.12", "FLAGTREE_FEEDSTOCK_PYTHONS": "3.13"})
    assert str(info.value) == (
        "both FLAGTREE_FEEDSTOCK_PYTHON and its old name FLAGTREE_FEEDSTOCK_PYTHONS are set "
        "(fix: unset FLAGTREE_FEEDSTOCK_PYTHONS)"
    )


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("FLAGTREE_FEEDSTOCK_PYTON", "FLAGTREE_FEEDSTOCK_PYTHON"),
        ("FLAGTREE_FEEDSTOCK_CHANEL", "FLAGTREE_FEEDSTOCK_CHANNEL"),
        ("FLAGTREE_FEEDSTOCK_OUTPT", "FLAGTREE_FEEDSTOCK_OUTPUT"),
    ],
)
def test_a_misspelt_variable_suggests_the_new_name(name: str, meant: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        from_cli({}, {name: "x"})
    assert str(info.value) == f"unknown environment variable {name} (fix: did you mean {meant}?)"
