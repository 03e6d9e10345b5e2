from __future__ import annotations

import pytest

from flagtree_feedstock.errors import ConfigurationError, PlatformError
from flagtree_feedstock.platforms import check_can_build, host_platform, parse_platform


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "linux-64"), ("aarch64", "linux-aarch64"), ("arm64", "linux-aarch64")],
)
def test_host_platform_maps_machines(machine: str, expected: str) -> None:
    assert host_platform(machine=machine, system="linux") == expected


def test_host_platform_rejects_other_systems() -> None:
    with pytest.raises(PlatformError, match="darwin/arm64"):
        host_platform(machine="arm64", system="darwin")


def test_parse_platform_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_platform("linux-arm64", option="--target-platform")
    assert str(info.value) == (
        "--target-platform 'linux-arm64' is not a platform this feedstock builds (fix: use one of linux-64, linux-aarch64)"
    )


def test_native_build_needs_a_matching_host() -> None:
    assert check_can_build("linux-aarch64", None, "linux-aarch64") == "linux-aarch64"
    with pytest.raises(PlatformError, match="cannot build linux-aarch64 natively") as info:
        check_can_build("linux-aarch64", None, "linux-64")
    assert info.value.fix is not None
    assert "--build-platform linux-64" in info.value.fix


def test_cross_build_platform_must_be_this_host() -> None:
    assert check_can_build("linux-aarch64", "linux-64", "linux-64") == "linux-64"
    with pytest.raises(PlatformError, match="is not this host"):
        check_can_build("linux-aarch64", "linux-aarch64", "linux-64")
