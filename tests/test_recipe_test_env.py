"""The package tests get QEMU_CPU and FLAGTREE_REQUIRE_KERNELS, which rattler-build does not pass on by itself.

A real py-rattler-build build and package test of a toy recipe shows the mechanism (only a test script's
`env` arrives, not the caller's variables); the real recipe is checked to use it for both variables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _recipe_support import RECIPE_V1, TARGET, VARIANT_FILES
from _toy import build_args
from flagtree_feedstock.cli import main
from flagtree_feedstock.recipe.render import render


def test_only_a_test_scripts_env_reaches_the_test(
    tmp_path: Path, empty_channel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.txt"
    monkeypatch.setenv("TOY_REPORT", str(report))
    monkeypatch.setenv("FLAGTREE_REQUIRE_KERNELS", "1")
    monkeypatch.setenv("TOY_CALLER_ONLY", "set by the caller")
    monkeypatch.delenv("QEMU_CPU", raising=False)
    args = build_args("toy-test-env", tmp_path / "channel", "--target-platform", "linux-64")
    assert main([*args, "--channel", empty_channel.as_uri()]) == 0
    assert report.read_text().splitlines() == [
        "QEMU_CPU=max,sve-default-vector-length=16",
        "FLAGTREE_REQUIRE_KERNELS=1",
        "TOY_CALLER_ONLY=",
    ]


def _test_env(build: str) -> dict[str, str]:
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=build)
    cpu = next(o for o in rendered if o.name == "flagtree-cpu").engine_variant.recipe.to_dict()
    (script,) = [t["script"] for t in cpu["tests"] if "script" in t]
    env: dict[str, str] = script["env"]
    return env


def test_flagtree_cpu_tests_take_the_callers_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAGTREE_REQUIRE_KERNELS", "1")
    monkeypatch.setenv("QEMU_CPU", "max,sve-default-vector-length=16,sme=off")
    assert _test_env(TARGET) == {
        "QEMU_CPU": "max,sve-default-vector-length=16,sme=off",
        "FLAGTREE_REQUIRE_KERNELS": "1",
    }


def test_flagtree_cpu_tests_default_to_128_bit_vectors_and_kernels_when_emulated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLAGTREE_REQUIRE_KERNELS", raising=False)
    monkeypatch.delenv("QEMU_CPU", raising=False)
    # A cross build's tests run only under qemu-user, on a CPU with every feature the kernels need.
    assert _test_env("linux-64") == {
        "QEMU_CPU": "max,sve-default-vector-length=16",
        "FLAGTREE_REQUIRE_KERNELS": "1",
    }
    # Natively a machine without SVE2 may skip (QEMU_CPU does nothing there).
    assert _test_env(TARGET) == {"QEMU_CPU": "max,sve-default-vector-length=16"}
