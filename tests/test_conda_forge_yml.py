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
    # GithubActionsConfig, without its deprecated fields (free_disk_space, self_hosted, store_build_artifacts,
    # resize_win_partitions: `deprecated=True` in schema.py)
    "github_actions": {
        "artifact_retention_days",
        "cancel_in_progress",
        "max_parallel",
        "timeout_minutes",
        "triggers",
        "upload_packages",
    },
    "workflow_settings": {"free_disk_space", "store_build_artifacts", "pagefile_size"},  # WorkflowSettings
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
TEST_PLATFORMS = {"all", "native", "native_and_emulated"}


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "conda-forge.yml").read_text())
    return config


# conda-smithy's defaults (schema.py, and cf-scripts' bot schema for `bot`): writing one down says nothing.
DEFAULTS: dict[tuple[str, ...], object] = {
    ("provider", "linux_64"): "github_actions",
    ("provider", "linux_aarch64"): "github_actions",
    ("conda_build_tool",): "conda-build",
    ("conda_install_tool",): "micromamba",
    ("conda_build", "pkg_format"): 2,
    ("os_version", "linux_64"): "alma9",
    ("os_version", "linux_aarch64"): "alma9",
    ("github_actions", "timeout_minutes"): 360,
    ("github_actions", "free_disk_space"): False,
    ("github_actions", "self_hosted"): False,
    ("github", "branch_name"): "main",
    ("github", "tooling_branch_name"): "main",
    ("bot", "automerge"): False,
    ("workflow_settings", "free_disk_space"): "skip",
}


def test_no_setting_repeats_a_default() -> None:
    config = _config()
    for path, default in DEFAULTS.items():
        value: object = config
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        assert value is None or str(value) != str(default), path


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
    assert config["conda_build_tool"] in CONDA_BUILD_TOOLS
    assert config["test"] in TEST_PLATFORMS
    assert config["workflow_settings"]["free_disk_space"] in {"skip", "quick", "max"}


def test_linux_aarch64_is_cross_compiled_and_tested_under_emulation() -> None:
    config = _config()
    assert config["build_platform"] == {"linux_aarch64": "linux_64"}
    assert config["test"] == "native_and_emulated"
