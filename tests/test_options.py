from __future__ import annotations

from pathlib import Path

import pytest

from flagtree_feedstock.errors import ConfigurationError
from flagtree_feedstock.options import BuildOptions, from_cli


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
