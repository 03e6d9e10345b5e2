"""`--tool conda-build` / `--tool boa`: the command line and environment handed to conda."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from _stub_channel import write_package
from flagtree_feedstock.builder import conda_build
from flagtree_feedstock.builder.conda_build import CondaBuildRequest
from flagtree_feedstock.errors import BuildFailedError, ConfigurationError


def _request(tmp_path: Path, tool: str = "conda-build", **extra: object) -> CondaBuildRequest:
    recipe = tmp_path / "recipe"
    recipe.mkdir(exist_ok=True)
    (recipe / "meta.yaml").write_text("package: {name: toy, version: '1.0'}\n")
    return CondaBuildRequest(
        tool=tool,  # type: ignore[arg-type]
        recipe_dir=recipe,
        exclusive_config_files=(tmp_path / "conda_build_config.yaml",),
        channel_dir=tmp_path / "channel",
        channels=("conda-forge",),
        target="linux-aarch64",
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Executables named conda-build and conda-mambabuild that do nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("conda-build", "conda-mambabuild"):
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # the fakes first; coreutils for their scripts
    return bin_dir


@pytest.mark.parametrize(
    ("tool", "executable"), [("conda-build", "conda-build"), ("boa", "conda-mambabuild")]
)
def test_command_line(tmp_path: Path, fake_tools: Path, tool: str, executable: str) -> None:
    request = _request(tmp_path, tool, pythons=("3.11", "3.12"), test=False)
    staging = tmp_path / "staging"
    argv = conda_build.command(request, output_folder=staging)
    assert argv == [
        str(fake_tools / executable),
        str(request.recipe_dir),
        "-e",
        str(request.exclusive_config_files[0]),
        "--output-folder",
        str(staging),
        "--croot",
        str(staging / "bld"),
        "--package-format",
        "conda",
        "-c",
        staging.as_uri(),
        "--zstd-compression-level",  # its fastest: the landing compresses once, at the final level
        "1",
        "-c",
        "conda-forge",
        "--python",
        "3.11",
        "--python",
        "3.12",
        "--no-test",
    ]


def test_target_subdir_goes_through_conda_subdir(tmp_path: Path) -> None:
    env = conda_build.environment(_request(tmp_path), {"PATH": "/bin", "CONDA_SUBDIR": "linux-64"})
    assert env == {"PATH": "/bin", "CONDA_SUBDIR": "linux-aarch64"}


def test_recipe_dir_without_meta_yaml(tmp_path: Path, fake_tools: Path) -> None:
    request = _request(tmp_path)
    (request.recipe_dir / "meta.yaml").unlink()
    with pytest.raises(ConfigurationError, match=r"has no meta\.yaml"):
        conda_build.command(request, output_folder=tmp_path)


def test_failing_conda_build_publishes_nothing(tmp_path: Path, fake_tools: Path) -> None:
    # $5 is the --output-folder: the fake leaves a half-written package there, records it, and fails.
    (fake_tools / "conda-build").write_text(
        '#!/bin/sh\nmkdir -p "$5/noarch" && : > "$5/noarch/half.conda" && echo "$5" > "$0.ran"\nexit 1\n'
    )
    request = _request(tmp_path)
    with pytest.raises(BuildFailedError, match="conda-build exited with status 1"):
        conda_build.build(request)
    staging = Path((fake_tools / "conda-build.ran").read_text().strip())
    assert staging.parent == tmp_path
    assert staging.name.startswith(".channel-staging-")
    assert not staging.exists()
    assert not request.channel_dir.exists()
    assert list(tmp_path.glob(".channel-staging-*")) == []


@pytest.mark.conda_build
@pytest.mark.skipif(
    shutil.which("conda-build") is None, reason="conda-build is not installed here (tier conda_build)"
)
def test_real_conda_build_knows_the_flags_we_pass() -> None:
    usage = subprocess.run(["conda-build", "--help"], capture_output=True, text=True, check=True).stdout
    for flag in ("--output-folder", "--python", "--no-test", "-m", "-e"):
        assert flag in usage


def test_a_rebuild_under_the_same_name_replaces_the_channels_file(
    tmp_path: Path, fake_tools: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # conda-build rebuilds what its output folder already holds; when a pin it does not hash changed, the new
    # package has the old name. The channel must end up with the new file, never silently keep the old one.
    request = _request(tmp_path)
    name = "toy-1.0-0.tar.bz2"
    old = write_package(request.channel_dir / "noarch" / name, "toy", "1.0", "0", "noarch", note="old pin")
    new = write_package(tmp_path / "new" / name, "toy", "1.0", "0", "noarch", note="new pin")
    (fake_tools / "conda-build").write_text(
        f'#!/bin/sh\nrm -f "$5/noarch/{name}" && cp "{new}" "$5/noarch/{name}"\n'
    )
    assert conda_build.build(request) == [old]
    assert old.read_bytes() == new.read_bytes()
    assert f"replacing {old}: this run built a different package under the same name" in caplog.text


def test_a_package_the_engine_left_alone_is_not_published_again(tmp_path: Path, fake_tools: Path) -> None:
    request = _request(tmp_path)
    kept = write_package(request.channel_dir / "noarch" / "toy-1.0-0.tar.bz2", "toy", "1.0", "0", "noarch")
    before = kept.read_bytes()
    assert conda_build.build(request) == []
    assert kept.read_bytes() == before
