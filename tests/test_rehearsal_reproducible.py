"""The rehearsal's reproducibility check: every output of the real recipe built twice, in different folders,
at different times, under another umask, locale and time zone, gives the same package bytes, as a `.conda`
and as a `.tar.bz2`.

On a difference it names the member and shows the first differing bytes (tests/_package_diff.py), with
diffoscope's report where diffoscope is installed. A build script that writes the date into a file must fail
it (the mutation below, and mutations/sbom.toml).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from _package_diff import diffoscope_report, first_difference
from _rehearsal import build, copy_recipe, write_variants
from _rehearsal_sources import ROOT, Sources
from flagtree_feedstock.builder.options import PackageFormat

pytestmark = pytest.mark.rehearsal

ORDER = ("flagtree-llvm", "flagtree-doctor", "flagtree-cpu")


@contextmanager
def _host(umask: int, locale: str, tz: str) -> Iterator[None]:
    """This process (and the engine's worker, which inherits it) under ``umask``, ``LC_ALL`` and ``TZ``."""
    old = os.umask(umask)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("LC_ALL", locale)
            patch.setenv("TZ", tz)
            yield
    finally:
        os.umask(old)


def _build_all(
    root: Path,
    sources: Sources,
    folder: Path,
    stub_channel: Path,
    names: tuple[str, ...] = ORDER,
    *,
    package_format: PackageFormat = "conda",
) -> dict[str, Path]:
    folder.mkdir(parents=True)
    variant_file = write_variants(root, sources, folder / "variants.yaml")
    channel = folder / "channel"
    packages: dict[str, Path] = {}
    for name in names:
        (built,) = [
            p
            for p in build(
                root,
                variant_file,
                channel,
                stub_channel,
                names=[name],
                test=False,
                package_format=package_format,
            )
            if p.name.startswith(f"{name}-")
        ]
        packages[name] = built
    return packages


def _compare(first: dict[str, Path], second: dict[str, Path]) -> list[str]:
    differences = []
    for name, one in first.items():
        other = second[name]
        if one.name != other.name:
            differences.append(f"{name}: built as {one.name}, then as {other.name}")
            continue
        found = first_difference(one, other)
        if found:
            report = diffoscope_report(one, other)
            differences.append(found + (f"\n{report}" if report else ""))
    return differences


def _twice(
    tmp_path: Path,
    sources: Sources,
    stub_channel: Path,
    root: Path,
    names: tuple[str, ...] = ORDER,
    *,
    package_format: PackageFormat = "conda",
) -> list[str]:
    with _host(0o022, "C.UTF-8", "UTC"):
        first = _build_all(
            root, sources, tmp_path / "first", stub_channel, names, package_format=package_format
        )
    time.sleep(1.1)  # another second, for anything stamped with the time
    with _host(0o077, "POSIX", "Asia/Shanghai"):
        second = _build_all(
            root,
            sources,
            tmp_path / "second-folder" / "deeper",
            stub_channel,
            names,
            package_format=package_format,
        )
    assert all(p.name.endswith(f".{package_format}") for p in (*first.values(), *second.values()))
    return _compare(first, second)


@pytest.mark.parametrize("package_format", ["conda", "tar.bz2"])
def test_every_output_builds_to_the_same_bytes(
    tmp_path: Path, sources: Sources, stub_channel: Path, package_format: PackageFormat
) -> None:
    differences = _twice(tmp_path, sources, stub_channel, ROOT, package_format=package_format)
    assert not differences, "\n".join(differences)


def test_mutation_a_build_script_that_writes_the_date(
    tmp_path: Path, sources: Sources, stub_channel: Path
) -> None:
    root = copy_recipe(tmp_path / "copy")
    with (root / "recipe" / "build-llvm.sh").open("a") as script:
        script.write('date +%s.%N > "${PREFIX}/lib/flagtree-llvm/build-date.txt"\n')
    differences = _twice(tmp_path, sources, stub_channel, root, names=("flagtree-llvm",))
    assert len(differences) == 1
    assert "lib/flagtree-llvm/build-date.txt differs at byte" in differences[0]
    print("mutation failure:", differences[0])
