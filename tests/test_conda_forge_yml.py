"""conda-forge.yml uses only keys and values conda-smithy knows, so `conda smithy rerender` accepts it.

The names below were read from conda-smithy's `conda_smithy/schema.py` (ConfigModel and the models it
nests; commit 0093a8e2c27d3b1fca1361e88781716ee2266a73 of conda-forge/conda-smithy). Only the keys this
feedstock uses are listed; conda-smithy itself is not a test dependency.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

# ConfigModel fields used here; each maps to the sub-keys we use (None: a plain value).
KNOWN: dict[str, set[str] | None] = {
    "build_platform": {"linux_64", "linux_aarch64"},  # BuildPlatform: one field per platform
    "provider": {"linux_64", "linux_aarch64"},  # Provider: one field per build platform
    "test": None,
    "conda_build_tool": None,
    "conda_install_tool": None,
    "conda_build": {"pkg_format", "zstd_compression_level", "error_overlinking"},  # CondaBuildConfig
    "os_version": {"linux_64", "linux_aarch64"},  # OSVersion
    # GithubActionsConfig
    "github_actions": {
        "artifact_retention_days",
        "cancel_in_progress",
        "free_disk_space",
        "max_parallel",
        "self_hosted",
        "store_build_artifacts",
        "timeout_minutes",
        "triggers",
        "upload_packages",
    },
    "conda_forge_output_validation": None,
    "github": {"user_or_org", "repo_name", "branch_name", "tooling_branch_name"},  # GithubConfig
    # `bot` is a free dict in schema.py, checked by cf-scripts; these are keys of its default config.
    "bot": {"automerge", "check_solvable", "inspection", "run_deps_from_wheel", "version_updates"},
}
CONDA_BUILD_TOOLS = {
    "conda-build",
    "conda-build+classic",
    "conda-build+conda-libmamba-solver",
    "mambabuild",
    "rattler-build",
}
CONDA_INSTALL_TOOLS = {"conda", "mamba", "micromamba", "pixi"}
CI_SERVICES = {
    "azure",
    "circle",
    "travis",
    "appveyor",
    "github_actions",
    "drone",
    "woodpecker",
    "default",
    "emulated",
    "native",
    "None",
}
IMAGE_TAGS = {"cos7", "alma8", "alma9", "ubi8"}
TEST_PLATFORMS = {"all", "native", "native_and_emulated"}


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "conda-forge.yml").read_text())
    return config


def test_only_keys_conda_smithy_knows() -> None:
    config = _config()
    assert set(config) <= set(KNOWN), set(config) - set(KNOWN)
    for key, value in config.items():
        allowed = KNOWN[key]
        if allowed is None:
            assert not isinstance(value, dict), key
        else:
            assert isinstance(value, dict), key
            assert set(value) <= allowed, (key, set(value) - allowed)


def test_values_are_in_conda_smithys_choices() -> None:
    config = _config()
    assert config["conda_build_tool"] == "rattler-build"
    assert config["conda_install_tool"] in CONDA_INSTALL_TOOLS
    assert config["conda_build_tool"] in CONDA_BUILD_TOOLS
    assert set(config["provider"].values()) <= CI_SERVICES
    assert set(config["os_version"].values()) <= IMAGE_TAGS
    assert config["test"] in TEST_PLATFORMS
    assert str(config["conda_build"]["pkg_format"]) in {"tar", "1", "2"}
    assert isinstance(config["github_actions"]["timeout_minutes"], int)


def test_linux_aarch64_is_cross_compiled_and_tested_under_emulation() -> None:
    config = _config()
    assert config["build_platform"] == {"linux_aarch64": "linux_64"}
    assert config["provider"]["linux_64"] == "github_actions"
    assert config["test"] == "native_and_emulated"
