"""The SBOM inside every package of a real rehearsal build: it validates against CycloneDX 1.6 (checked by
`flagtree-feedstock sbom`, which also checks it against the package), names every pin of
recipe/conda_build_config.yaml with the value the build used and every patch by its sha256."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _package_diff import members
from _rehearsal import build
from _rehearsal_fixtures import Rehearsal, built_package
from _rehearsal_sources import ROOT
from flagtree_feedstock.builder.landing.sbom import sbom_path

pytestmark = pytest.mark.rehearsal

OUTPUTS = ("flagtree-llvm", "flagtree-doctor", "flagtree-cpu")


def test_every_package_carries_a_checked_sbom(rehearsal: Rehearsal) -> None:
    """The session's build of every output (conftest.py's ``rehearsal``, built from the real recipe)."""
    variant_file = rehearsal.variant_file
    built = {name: built_package(rehearsal.channel, name) for name in OUTPUTS}
    used = yaml.safe_load(variant_file.read_text())
    keys = list(yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text()))
    for name, package in built.items():
        done = subprocess.run(
            [sys.executable, "-m", "flagtree_feedstock", "sbom", str(package)],
            check=False,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        (document,) = [data for member, data in members(package) if member.endswith(":" + sbom_path(name))]
        bom = json.loads(document)
        pins = {p["name"].rsplit(":", 1)[1]: p["value"] for p in bom["metadata"]["properties"]}
        assert pins == {key: str(used[key][0]) for key in keys}, name
    cpu = json.loads(
        next(d for m, d in members(built["flagtree-cpu"]) if m.endswith(sbom_path("flagtree-cpu")))
    )
    patches = {c["name"]: c["hashes"][0]["content"] for c in cpu["components"] if c["type"] == "file"}
    assert patches == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((ROOT / "patches").glob("*/*.patch"))
    }
    # The host environment as the engine resolved it: flagtree-llvm, with its build string.
    host = {c["name"]: c for c in cpu["components"] if c["bom-ref"].startswith("host:")}
    assert host["flagtree-llvm"]["purl"].endswith(
        f"?build={built['flagtree-llvm'].name.rsplit('-', 1)[1][:-6]}&subdir=linux-aarch64"
    )


def test_the_sbom_changes_when_a_pin_changes(tmp_path: Path, rehearsal: Rehearsal) -> None:
    """flagtree-doctor built again (beside the session's build) with a variant file that moves sleef_commit (as
    `-m` does): the same package name (the doctor does not use that pin), another document, so another
    package file."""
    moved = tmp_path / "moved.yaml"
    variants = yaml.safe_load(rehearsal.variant_file.read_text())
    variants["sleef_commit"] = ["0000000000000000000000000000000000000001"]
    moved.write_text(yaml.safe_dump(variants, sort_keys=False))
    (again,) = build(
        ROOT, moved, tmp_path / "two", rehearsal.stub_channel, names=["flagtree-doctor"], test=False
    )
    documents = []
    for package in (built_package(rehearsal.channel, "flagtree-doctor"), again):
        (document,) = [d for m, d in members(package) if m.endswith(":" + sbom_path("flagtree-doctor"))]
        documents.append((package.name, json.loads(document)))
    (first_name, first), (second_name, second) = documents
    assert first_name == second_name

    def pins(bom: dict[str, Any]) -> dict[str, str]:
        return {p["name"].rsplit(":", 1)[1]: p["value"] for p in bom["metadata"]["properties"]}

    assert pins(second)["sleef_commit"] == "0000000000000000000000000000000000000001"
    assert {k: v for k, v in pins(first).items() if k != "sleef_commit"} == {
        k: v for k, v in pins(second).items() if k != "sleef_commit"
    }
    assert first["serialNumber"] != second["serialNumber"]
