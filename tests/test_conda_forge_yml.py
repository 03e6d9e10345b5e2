"""conda-forge.yml uses only keys and values conda-smithy knows, so `conda smithy rerender` accepts it.

The names below were read from conda-smithy's `conda_smithy/schema.py` (ConfigModel and the models it
nests; commit 0093a8e2c27d3b1fca1361e88781716ee2266a73 of conda-forge/conda-smithy). Only the keys this
feedstock uses are listed; conda-smithy itself is not a test dependency.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from _recipe_support import SHARED
from _smithy import run_smithy, smithy_python

ROOT = Path(__file__).resolve().parents[1]
PINNING = SHARED / "data" / "conda-forge-pinning.yaml"

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
# schema.py's CIservices (conda-smithy 2026.8.5; circle, travis, appveyor, drone and woodpecker are deprecated)
PROVIDERS = {"azure", "github_actions", "default", "emulated", "native", "None"}


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
    assert config.get("test", "all") in TEST_PLATFORMS
    assert set(config.get("provider", {}).values()) <= PROVIDERS
    assert config["workflow_settings"]["free_disk_space"] in {"skip", "quick", "max"}


def test_linux_aarch64_builds_natively_on_conda_forges_default_runners() -> None:
    """No cross build from linux_64 and no emulated tests: native linux-aarch64, on the provider conda-forge
    defaults to (GitHub's Arm runners), with the disk cleared for LLVM."""
    config = _config()
    assert "build_platform" not in config
    assert "test" not in config
    assert config["provider"] == {"linux_aarch64": "default"}
    assert config["workflow_settings"]["free_disk_space"] == "max"


def test_the_cross_route_stays_this_repositorys_on_demand_job() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "build.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "cross" in triggers["workflow_dispatch"]["inputs"]
    cross = workflow["jobs"]["cross"]
    assert cross["if"] == "github.event_name == 'workflow_dispatch' && inputs.cross"
    assert any("--build-platform linux-64" in step.get("run", "") for step in cross["steps"])


# ---- conda_build tier: conda-smithy's rerender ------------------------------------------------------------------


@pytest.mark.conda_build
def test_a_rerender_keeps_every_pin_and_makes_the_native_arm_job(tmp_path: Path) -> None:
    """`conda smithy rerender` (regenerate) of a copy of the feedstock as conda-forge would hold it (the root
    conda_build_config.yaml, which the global pinning replaces, left out), against conda-forge's pinning."""
    smithy_python()
    if shutil.which("rattler-build") is None:
        pytest.skip("rattler-build (the CLI conda-smithy renders recipe.yaml with) is not on PATH")
    if not PINNING.is_file():
        pytest.skip(
            f"{PINNING} is absent (conda-forge's global pinning, beside the repository in this workplace)"
        )
    feedstock = tmp_path / "flagtree-cpu-feedstock"
    shutil.copytree(ROOT / "recipe", feedstock / "recipe", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "patches", feedstock / "patches")
    for name in ("conda-forge.yml", "LICENSE"):
        shutil.copy2(ROOT / name, feedstock / name)
    subprocess.run(["git", "init", "-q", str(feedstock)], check=True)
    done = run_smithy(
        ["regenerate", "--feedstock_directory", str(feedstock), "-e", str(PINNING), "--no-check-uptodate"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    configs = sorted(p.name for p in (feedstock / ".ci_support").glob("*.yaml"))
    aarch64 = [name for name in configs if name.startswith("linux_aarch64")]
    assert aarch64, configs
    # Native: no linux_64 job builds for linux-aarch64.
    for name in configs:
        variant = yaml.safe_load((feedstock / ".ci_support" / name).read_text())
        assert name.startswith("linux_aarch64") or variant.get("target_platform") != ["linux-aarch64"], name
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    pinning = yaml.safe_load(PINNING.read_text())
    for name in aarch64:
        variant = yaml.safe_load((feedstock / ".ci_support" / name).read_text())
        assert variant["target_platform"] == ["linux-aarch64"]
        for key, values in pins.items():
            assert [str(v) for v in variant[key]] == [str(v) for v in values], (name, key)
        for key in ("c_stdlib", "c_stdlib_version", "zlib", "python_min"):
            assert key in pinning and key in variant, (name, key)
    workflow = yaml.safe_load((feedstock / ".github" / "workflows" / "conda-build.yml").read_text())
    job = workflow["jobs"]["build"]
    assert job["timeout-minutes"] == 360
    arm = [
        entry for entry in job["strategy"]["matrix"]["include"] if entry["CONFIG"].startswith("linux_aarch64")
    ]
    assert arm and all(entry["runs_on"] == ["ubuntu-24.04-arm"] for entry in arm), arm
    assert all(entry["free_disk_space"] == "max" for entry in arm)
    assert all("aarch64" in entry["DOCKER_IMAGE"] for entry in arm)
