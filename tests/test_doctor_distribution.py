"""The flagtree-doctor distribution (flagtree-doctor/) on its own, as the noarch conda output installs it.

A wheel is built from flagtree-doctor/ with the real pip and setuptools and installed, without the repository,
into a fresh venv that holds only rich and its dependencies (linked from this environment: the tests stay
offline). There the recipe's own package test, recipe/test_flagtree_doctor.py, must pass: every command the
distribution declares works, and the build toolkit is not there.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = ROOT / "flagtree-doctor"
PACKAGE_TEST = ROOT / "recipe" / "test_flagtree_doctor.py"
IGNORED = shutil.ignore_patterns("*.egg-info", "build", "__pycache__")


def _closure(name: str) -> list[importlib.metadata.Distribution]:
    """``name`` and every distribution it requires (no extras), as installed here."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [name]
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower()
        if key in seen:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(seen.values())


def _link_distribution(dist: importlib.metadata.Distribution, site: Path) -> None:
    """Link the top-level files and folders of an installed distribution into ``site``."""
    for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
        target = site / top
        if not target.exists():
            target.symlink_to(Path(str(dist.locate_file(top))))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with rich (and what it needs) and the flagtree-doctor wheel, nothing else."""
    scratch = tmp_path_factory.mktemp("doctor-dist")
    # A copy: setuptools writes its egg-info and build folders next to the sources it builds. Beside it the
    # recipe's pins, where setup.py reads the version when no recipe builds it (as in a clone).
    source = shutil.copytree(DISTRIBUTION, scratch / "flagtree-doctor", ignore=IGNORED)
    (scratch / "recipe").mkdir()
    shutil.copy2(ROOT / "recipe" / "conda_build_config.yaml", scratch / "recipe")
    wheels = scratch / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(wheels), str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = wheels.glob("flagtree_doctor-*.whl")
    env_dir = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    for dist in _closure("rich"):
        _link_distribution(dist, site)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
         str(wheel)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return env_dir


def _run_package_test(venv: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(venv), "NO_COLOR": "1", **extra_env}
    return subprocess.run(
        [str(venv / "bin" / "python"), str(PACKAGE_TEST)],
        capture_output=True, text=True, env=env, cwd=venv, timeout=seconds(300), check=False,
    )  # fmt: skip


def test_every_command_works_without_the_toolkit(venv: Path) -> None:
    done = _run_package_test(venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        done.stdout == "OK: flagtree-doctor, flagtree-verify work on their own, without the build toolkit\n"
    )
    assert sorted(p.name for p in (venv / "bin").glob("flagtree-*")) == ["flagtree-doctor", "flagtree-verify"]


def test_the_package_test_fails_where_the_toolkit_comes_along(venv: Path) -> None:
    """What the package was before: the whole repository installed, flagtree_feedstock with it."""
    done = _run_package_test(venv, PYTHONPATH=str(ROOT / "src"))
    assert done.returncode == 1
    assert done.stdout == "FAIL: flagtree_feedstock (the build toolkit) is installed with flagtree-doctor\n"


def test_the_distribution_declares_what_the_root_declares() -> None:
    """The repository's editable install carries the same commands, from the same modules."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415 - the standard library's from 3.11
    else:
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]  # noqa: PLC0415 - 3.10: its backport, from the test extra

    own = tomllib.loads((DISTRIBUTION / "pyproject.toml").read_text())["project"]
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert own["scripts"].items() <= root["scripts"].items()
    assert set(own["dependencies"]) <= set(root["dependencies"])


def _version_said(venv: Path, command: str) -> str:
    done = subprocess.run(
        [str(venv / "bin" / command), "--version"], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_version_is_the_packages(venv: Path) -> None:
    """The wheel and both commands carry the recipe's version (the conda package's), not one of their own."""
    version = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())["flagtree_version"][0]
    assert [w.name for w in (venv.parent / "wheels").glob("*.whl")] == [
        f"flagtree_doctor-{version}-py3-none-any.whl"
    ]
    assert _version_said(venv, "flagtree-doctor") == f"flagtree-doctor {version}\n"
    assert _version_said(venv, "flagtree-verify") == f"flagtree-verify {version}\n"


def test_a_recipe_build_takes_the_version_the_engine_gives(tmp_path: Path) -> None:
    """Built by a recipe (rattler-build and conda-build set PKG_NAME and PKG_VERSION for the output), the
    version is the output's, even where a variant file changed it from the pins' (here: no pins at all)."""
    source = shutil.copytree(DISTRIBUTION, tmp_path / "flagtree-doctor", ignore=IGNORED)
    env = {**os.environ, "PKG_NAME": "flagtree-doctor", "PKG_VERSION": "9.8.7"}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(tmp_path / "wheels"), str(source)],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert [w.name for w in (tmp_path / "wheels").glob("*.whl")] == ["flagtree_doctor-9.8.7-py3-none-any.whl"]


def test_a_checkout_says_the_recipes_version() -> None:
    """``pip install -e .`` of the repository installs no flagtree-doctor distribution: the recipe's version."""
    version = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())["flagtree_version"][0]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "flagtree-doctor"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"flagtree-doctor {version}\n")
