"""The SBOM through the console script: `build --render-only --sbom DIR` (offline, the real recipe) and
`sbom PACKAGE_FILE` on packages damaged or made by hand. The in-package documents of real builds are the
rehearsal tier's (tests/test_rehearsal_sbom.py)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from _rehearsal_sources import ROOT
from flagtree_feedstock.builder.landing.sbom import sbom_path, schema_problem

SCRIPT = [sys.executable, "-m", "flagtree_feedstock"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCRIPT, *args], capture_output=True, text=True, check=False)


def _render_sbom(recipe_dir: Path, folder: Path, *extra: str) -> dict[str, dict]:
    done = _run(
        "build", "--render-only", "--recipe-dir", str(recipe_dir), "--target-platform", "linux-aarch64",
        "--build-platform", "linux-aarch64", "--python", "3.11", "--sbom", str(folder), *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {p.name.rsplit("-", 2)[0]: json.loads(p.read_text()) for p in sorted(folder.glob("*.cdx.json"))}


def _pins(document: dict) -> dict[str, str]:
    prefix = "flagtree-feedstock:pin:"
    return {p["name"].removeprefix(prefix): p["value"] for p in document["metadata"]["properties"]}


def _copy_root(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name in ("recipe", "patches", "conda_build_config.yaml", "flagtree-doctor", "LICENSE"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, root / name)
    return root


def test_render_only_writes_one_valid_document_per_package(tmp_path: Path) -> None:
    documents = _render_sbom(ROOT / "recipe", tmp_path / "sbom")
    assert set(documents) == {"flagtree-llvm", "flagtree-doctor", "flagtree-cpu"}
    for document in documents.values():
        assert schema_problem(json.dumps(document)) is None
        assert document["specVersion"] == "1.6"
    cpu = documents["flagtree-cpu"]
    # Every pin of recipe/conda_build_config.yaml, with its value.
    import yaml  # noqa: PLC0415

    pins = {
        k: str(v[0])
        for k, v in yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text()).items()
    }
    assert _pins(cpu) == pins
    # Every patch file, by its sha256.
    hashes = {c["name"]: c["hashes"][0]["content"] for c in cpu["components"] if c["type"] == "file"}
    patches = sorted((ROOT / "patches").glob("*/*.patch"))
    assert hashes == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in patches}
    sources = {c["name"]: c for c in cpu["components"] if c["bom-ref"].startswith("source:")}
    assert set(sources) == {"FlagTree", "llvm-project", "flagtree-cpu", "sleef"}
    assert sources["FlagTree"]["version"] == pins["flagtree_commit"]
    assert sources["llvm-project"]["hashes"][0]["content"] == pins["llvm_sha256"]
    assert sources["sleef"]["licenses"] == [{"expression": "BSL-1.0"}]
    # The build environment's compilers are named.
    assert {"gcc_linux-aarch64", "gxx_linux-aarch64"} <= {c["name"] for c in cpu["components"]}


def test_the_document_changes_with_a_pin_and_not_between_runs(tmp_path: Path) -> None:
    root = _copy_root(tmp_path)
    first = _render_sbom(root / "recipe", tmp_path / "one")
    again = _render_sbom(root / "recipe", tmp_path / "two")
    assert first == again
    moved = tmp_path / "moved.yaml"
    moved.write_text('sleef_commit:\n  - "0000000000000000000000000000000000000001"\n')
    changed = _render_sbom(root / "recipe", tmp_path / "three", "-m", str(moved))
    assert _pins(changed["flagtree-cpu"])["sleef_commit"] == "0000000000000000000000000000000000000001"
    assert changed["flagtree-cpu"] != first["flagtree-cpu"]


def test_sbom_without_render_only_is_refused(tmp_path: Path) -> None:
    done = _run("build", "--sbom", str(tmp_path / "s"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "flagtree-feedstock: error: --sbom works only with --render-only (a build puts the SBOM into each "
        "package) (fix: add --render-only or drop --sbom)"
    )


def _tar_zst(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return zstandard.ZstdCompressor().compress(out.getvalue())


INDEX = {"name": "flagtree-doctor", "version": "0.6.0", "build": "pyh0_0", "subdir": "noarch"}


def _package(
    folder: Path, document: bytes | None, *, listed_hash: str | None = None, index: dict[str, str] = INDEX
) -> Path:
    """A .conda made by hand: flagtree-doctor with ``document`` as its SBOM (listed in paths.json)."""
    path = sbom_path("flagtree-doctor")
    paths = {"paths": [], "paths_version": 1}
    pkg: dict[str, bytes] = {"site-packages/x.py": b""}
    if document is not None:
        pkg[path] = document
        digest = listed_hash or hashlib.sha256(document).hexdigest()
        paths["paths"].append({"_path": path, "path_type": "hardlink", "sha256": digest})
    rendered = b"recipe:\n  source:\n  - path: ..\n    target_directory: flagtree-feedstock\n"
    info = {
        "info/index.json": json.dumps(index).encode(),
        "info/paths.json": json.dumps(paths).encode(),
        "info/recipe/rendered_recipe.yaml": rendered,
    }
    package = folder / "flagtree-doctor-0.6.0-pyh0_0.conda"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("metadata.json", b'{"conda_pkg_format_version":2}')
        archive.writestr("pkg-flagtree-doctor-0.6.0-pyh0_0.tar.zst", _tar_zst(pkg))
        archive.writestr("info-flagtree-doctor-0.6.0-pyh0_0.tar.zst", _tar_zst(info))
    return package


@pytest.fixture(scope="module")
def rendered_doctor_document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The real recipe's document for flagtree-doctor, rendered once for the module's tests."""
    document = _render_sbom(ROOT / "recipe", tmp_path_factory.mktemp("rendered"))["flagtree-doctor"]
    document["metadata"]["component"]["purl"] = "pkg:conda/flagtree-doctor@0.6.0?build=pyh0_0&subdir=noarch"
    return document


@pytest.fixture
def doctor_document(rendered_doctor_document: dict) -> dict:
    """A copy of it, for a test to damage."""
    return copy.deepcopy(rendered_doctor_document)


def test_sbom_summarises_a_package_that_carries_its_document(tmp_path: Path, doctor_document: dict) -> None:
    package = _package(tmp_path, json.dumps(doctor_document).encode())
    done = _run("sbom", str(package))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"{package.name}: share/flagtree-feedstock/sbom/flagtree-doctor.cdx.json (CycloneDX 1.6, valid)"
    )
    assert "  pin flagtree_commit = 54d33a53bcdb5ee97296724b02d1b2a3cedb9568" in done.stdout.splitlines()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param("none", "holds no SBOM at share/flagtree-feedstock/sbom/flagtree-doctor.cdx.json", id="missing"),
        pytest.param("invalid", "its SBOM does not validate against CycloneDX 1.6", id="invalid"),
        pytest.param("hash", "info/paths.json does not list share/flagtree-feedstock/sbom/flagtree-doctor.cdx.json with its sha256", id="hash"),
        pytest.param("other", "its SBOM describes pkg:conda/flagtree-doctor@0.5.0", id="other-package"),
    ],
)  # fmt: skip
def test_sbom_names_what_is_wrong_in_one_line(
    tmp_path: Path, doctor_document: dict, damage: str, message: str
) -> None:
    if damage == "invalid":
        doctor_document["components"][0]["type"] = "not-a-type"
    if damage == "other":
        doctor_document["metadata"]["component"]["purl"] = (
            "pkg:conda/flagtree-doctor@0.5.0?build=pyh0_0&subdir=noarch"
        )
    text = json.dumps(doctor_document).encode()
    package = _package(
        tmp_path, None if damage == "none" else text, listed_hash="0" * 64 if damage == "hash" else None
    )
    done = _run("sbom", str(package))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"flagtree-feedstock: error: {package}: {message}"), line
    assert line.endswith(
        "(fix: rebuild the package with flagtree-feedstock build (it writes and checks the SBOM))"
    )


def test_sbom_refuses_a_file_that_is_not_a_conda_package(tmp_path: Path) -> None:
    other = tmp_path / "x.zip"
    other.write_bytes(b"")
    done = _run("sbom", str(other))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"flagtree-feedstock: error: {other} is not a conda package (.conda or .tar.bz2) "
        "(fix: pass a package file the build wrote into its --output-dir)"
    )


def test_sbom_refuses_an_empty_tar_bz2_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "x-1-0.tar.bz2"
    empty.write_bytes(b"")
    done = _run("sbom", str(empty))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"flagtree-feedstock: error: {empty}: not a whole conda package ("), line


@pytest.mark.parametrize("field", ["name", "version", "build"])
def test_sbom_of_a_package_whose_index_lacks_a_field_is_one_line(
    tmp_path: Path, doctor_document: dict, field: str
) -> None:
    index = {key: value for key, value in INDEX.items() if key != field}
    package = _package(tmp_path, json.dumps(doctor_document).encode(), index=index)
    done = _run("sbom", str(package))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"flagtree-feedstock: error: {package}: its info/index.json gives no {field}: not a conda package "
        "(fix: rebuild the package with flagtree-feedstock build (it writes and checks the SBOM))"
    )


def test_sbom_of_a_package_the_check_refuses_is_one_line(tmp_path: Path, doctor_document: dict) -> None:
    """The reader is the one every command uses: a package with a name held twice in its zip is refused."""
    package = _package(tmp_path, json.dumps(doctor_document).encode())
    with zipfile.ZipFile(package, "a") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        archive.writestr("metadata.json", b"{}")
    done = _run("sbom", str(package))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"flagtree-feedstock: error: {package}: not a whole conda package (the zip holds 'metadata.json' twice: "
        "readers keep different ones) (fix: rebuild the package with flagtree-feedstock build (it writes and "
        "checks the SBOM))"
    )
