"""FLAGTREE_SKIP_CPU_CHECK and FLAGTREE_REQUIRE_KERNELS in the default tier, on any host.

The CPU the check judges is a recorded one (an A64FX's hwcaps: SVE, but no dotprod, the floor), so the verdict
does not depend on the machine the tests run on; tests/emulated/test_cpu_check.py runs the same check as
aarch64 code under qemu. Only ``1`` means on and only ``0`` or empty (or unset) off: every near miss is one
error naming the variable, never a silent on or off.
"""

from __future__ import annotations

import pytest

from flagtree_doctor import cpu_check
from flagtree_doctor.capabilities import Capabilities, decode_hwcaps
from flagtree_doctor.cpu_check import SettingError, UnsupportedCpuError, require_supported_cpu

# getauxval(AT_HWCAP) under qemu-aarch64 -cpu a64fx: fp, asimd, fphp, asimdhp, sve, no asimddp; AT_HWCAP2 none.
A64FX = Capabilities(
    machine="aarch64",
    features=decode_hwcaps(0x415FFB, 0),
    source="recorded A64FX hwcaps",
    sve_vector_bits=512,
)
MESSAGE = (
    "flagtree-cpu cannot run kernels on this CPU: the CPU lacks asimddp (baseline runtime: "
    "-march=armv8.2-a+dotprod). Run `flagtree-doctor` for what it found and how to fix it; "
    "FLAGTREE_SKIP_CPU_CHECK=1 skips this check (kernels may then stop with SIGILL or compute wrong results)."
)
NEAR_MISSES = ["yes", "true", "on", "TRUE", " 1", "1 ", "1\n", "01", "2", "-1", "skip"]


@pytest.fixture(autouse=True)
def a64fx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_check, "live_capabilities", lambda: A64FX)


@pytest.mark.parametrize("value", [None, "", "0"], ids=["unset", "empty", "zero"])
def test_the_check_runs_unless_skipped(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {} if value is None else {"FLAGTREE_SKIP_CPU_CHECK": value}
    with pytest.raises(UnsupportedCpuError) as raised:
        require_supported_cpu(env)
    assert str(raised.value) == MESSAGE
    # The process environment is what FlagTree's driver reads (no mapping passed).
    monkeypatch.delenv("FLAGTREE_SKIP_CPU_CHECK", raising=False)
    if value is not None:
        monkeypatch.setenv("FLAGTREE_SKIP_CPU_CHECK", value)
    with pytest.raises(UnsupportedCpuError):
        require_supported_cpu()


def test_one_skips_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    require_supported_cpu({"FLAGTREE_SKIP_CPU_CHECK": "1"})
    monkeypatch.setenv("FLAGTREE_SKIP_CPU_CHECK", "1")
    require_supported_cpu()


@pytest.mark.parametrize("value", NEAR_MISSES)
@pytest.mark.parametrize("variable", ["FLAGTREE_SKIP_CPU_CHECK", "FLAGTREE_REQUIRE_KERNELS"])
def test_a_near_miss_is_one_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingError) as raised:
        cpu_check.flag(variable, {variable: value})
    assert (
        str(raised.value) == f"{variable}={value!r} is neither 1 nor 0 (fix: set {variable}=1, or unset it)"
    )
    assert raised.value.return_code == 2
    if variable == "FLAGTREE_SKIP_CPU_CHECK":  # and the check neither skips nor runs on a guess
        with pytest.raises(SettingError):
            require_supported_cpu({variable: value})


def test_require_kernels_reads_one_as_on() -> None:
    assert cpu_check.kernels_required({"FLAGTREE_REQUIRE_KERNELS": "1"}) is True
    assert cpu_check.kernels_required({"FLAGTREE_REQUIRE_KERNELS": "0"}) is False
    assert cpu_check.kernels_required({}) is False
