"""The publish half of `.github/workflows/build.yml`: one CEP 27 attestation per package file, made with only the
permissions that needs, and an upload by trusted publishing that sends each attestation with its package.

Nothing here runs GitHub Actions: the jobs are read as YAML, and the `packages` job's listing step runs with bash
as the runner runs it, on a channel folder of this test's own (tests/test_workflows.py checks the schema, the
pins and shellcheck for every workflow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flagtree_feedstock._digest import file_digest
from flagtree_feedstock.channel.attestations import PREDICATE_TYPE, bundle_name
from flagtree_feedstock.channel.folder import package_files
from flagtree_feedstock.channel.upload import DEFAULT_URLS

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def _jobs() -> dict[str, Any]:
    jobs: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "build.yml").read_text())["jobs"]
    return jobs


def _step(job: str, uses: str) -> dict[str, Any]:
    (step,) = [s for s in _jobs()[job]["steps"] if s.get("uses", "").startswith(uses + "@")]
    return step


def test_only_the_attest_and_publish_jobs_get_more_than_reading_the_repository() -> None:
    jobs = _jobs()
    assert {name for name, job in jobs.items() if "permissions" in job} == {"attest", "publish"}
    # actions/attest: an OIDC token for Sigstore's certificate, GitHub's attestation store; nothing more
    assert jobs["attest"]["permissions"] == {"id-token": "write", "attestations": "write", "contents": "read"}
    # the upload: an OIDC token to exchange at prefix.dev (trusted publishing), and the checkout
    assert jobs["publish"]["permissions"] == {"id-token": "write", "contents": "read"}


def test_each_package_file_gets_its_own_cep27_attestation() -> None:
    jobs = _jobs()
    attest = jobs["attest"]
    assert attest["needs"] == "packages"
    assert attest["strategy"]["matrix"]["package"] == "${{ fromJSON(needs.packages.outputs.packages) }}"
    step = _step("attest", "actions/attest")
    # one subject per attestation, as CEP 27 requires: the package file's name and sha256
    assert step["with"] == {
        "subject-name": "${{ matrix.package.name }}",
        "subject-digest": "sha256:${{ matrix.package.sha256 }}",
        "predicate-type": PREDICATE_TYPE,
        "predicate": "${{ needs.packages.outputs.predicate }}",
    }
    # the bundle is named as `upload --attestations` looks for it, and handed on as an attestation-* artifact
    rename = next(s for s in attest["steps"] if "steps.attest.outputs.bundle-path" in str(s.get("env")))
    assert bundle_name(Path("${PACKAGE}")) in rename["run"]
    assert (
        _step("attest", "actions/upload-artifact")["with"]["name"] == "attestation-${{ matrix.package.name }}"
    )
    assert jobs["packages"]["if"] == jobs["publish"]["if"]  # a tag's run only
    assert "attest" in jobs["publish"]["needs"]


@pytest.mark.parametrize("server", ["prefix", "anaconda"])
def test_the_upload_step_sends_the_attestations_to_prefix_only(server: str, tmp_path: Path) -> None:
    """The step run with bash as the runner runs it, `flagtree-feedstock` a stand-in that records its argv."""
    (upload,) = [s for s in _jobs()["publish"]["steps"] if "flagtree-feedstock upload" in s.get("run", "")]
    assert upload["env"]["PREFIX_API_KEY"] == "${{ secrets.PREFIX_API_KEY }}"  # the key, where it is set
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = bin_dir / "flagtree-feedstock"
    recorder.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGV_FILE"\n')
    recorder.chmod(0o755)
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", upload["run"]],
        cwd=tmp_path,
        env={
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "ARGV_FILE": str(tmp_path / "argv"),
            "UPLOAD_TO": server,
            "UPLOAD_CHANNEL": "flagtree",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    args = ["upload", "channel", "--to", server, "--channel", "flagtree"]
    if server == "prefix":  # anaconda.org takes no attestation (the toolkit refuses --attestations there)
        args += ["--attestations", "attestations"]
    assert (tmp_path / "argv").read_text().splitlines() == args


def _run_list_step(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (step,) = [s for s in _jobs()["packages"]["steps"] if s.get("id") == "list"]
    (tmp_path / "github_output").touch()
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        env={
            **os.environ,
            **env,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        },
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("server", ["prefix", "anaconda"])
def test_the_packages_step_lists_what_the_upload_uploads(server: str, tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    for name in ("linux-aarch64/a-1-0.conda", "noarch/b-1-0.tar.bz2", "noarch/c-1-0.conda"):
        (channel / name).parent.mkdir(parents=True, exist_ok=True)
        (channel / name).write_bytes(name.encode())
    (channel / "noarch" / "repodata.json").write_text("{}")
    done = _run_list_step(tmp_path, {"UPLOAD_TO": server, "UPLOAD_CHANNEL": "flagtree"})
    assert done.returncode == 0, done.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "github_output").read_text().splitlines())
    assert json.loads(outputs["packages"]) == [
        {"name": p.name, "sha256": file_digest(p, "sha256").hex()} for p in package_files(channel)
    ]
    channel_url = {
        "prefix": f"{DEFAULT_URLS['prefix']}/flagtree",
        "anaconda": "https://conda.anaconda.org/flagtree",
    }
    # for prefix.dev, the channel URL `upload --attestations` checks each bundle's targetChannel against
    assert json.loads(outputs["predicate"]) == {"targetChannel": channel_url[server]}


def test_the_packages_step_fails_without_a_channel_name(tmp_path: Path) -> None:
    (tmp_path / "channel" / "noarch").mkdir(parents=True)
    (tmp_path / "channel" / "noarch" / "c-1-0.conda").write_bytes(b"c")
    done = _run_list_step(tmp_path, {"UPLOAD_TO": "prefix", "UPLOAD_CHANNEL": ""})
    assert done.returncode != 0
    assert "set the variable CHANNEL_NAME" in done.stderr
