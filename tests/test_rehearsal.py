"""The rehearsal: the real recipe/recipe.yaml built by the real engine, offline, every output, then installed.

Only what cannot exist here is replaced: upstream's sources by local stand-in repositories (with
``FLAGTREE_SRC``, FlagTree is the real checkout), conda-forge by a stub channel, the C++ compile by a stand-in
cmake (tests/_rehearsal_channel.py, tests/_rehearsal_sources.py; tests/README.md has the table of what runs for
real). Then each mutation of a copy of the recipe must make the same pipeline fail, naming the cause. The session
fixtures (offline_session, stub_channel, sources) are tests/_rehearsal_fixtures.py's, shared through conftest.py.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from rattler.package_streaming import extract

from _rehearsal import build, copy_recipe, write_variants
from _rehearsal_archive import ARCHIVE_GLIBC, archive_top
from _rehearsal_channel import PY, SITE, TARGET
from _rehearsal_fixtures import Rehearsal, variant_value
from _rehearsal_fixtures import built_package as _package
from _rehearsal_sources import (
    FLAGTREE_CPU_LINK_TARGETS,
    FLAGTREE_CPU_PATCHES,
    FLAGTREE_PATCHES,
    FLAGTREE_PLAIN_LIBRARIES,
    ROOT,
    flagtree_cpu_tree,
    preimages,
    synthesize_flagtree,
)
from _tools import aarch64_gcc, require_executable, upstream_source
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.channel.install import smoke_install
from flagtree_feedstock.cli import main
from flagtree_feedstock.errors import FeedstockError
from test_patches import apply_series, series_patches

pytestmark = pytest.mark.rehearsal

OUTPUTS = ("flagtree-llvm", "flagtree-doctor", "flagtree-cpu")


def test_every_output_is_built_for_its_platform(rehearsal: Rehearsal) -> None:
    subdirs = {name: _package(rehearsal.channel, name).parent.name for name in OUTPUTS}
    assert subdirs == {"flagtree-llvm": TARGET, "flagtree-doctor": "noarch", "flagtree-cpu": TARGET}


def test_the_doctor_in_its_package_has_the_package_s_version(rehearsal: Rehearsal, tmp_path: Path) -> None:
    """The flagtree-doctor distribution the noarch package installs says the package's version (the recipe's,
    passed on by the engine), not one of its own: ``flagtree-doctor --version`` reads it there."""
    extract(_package(rehearsal.channel, "flagtree-doctor"), tmp_path)
    version = json.loads((tmp_path / "info" / "index.json").read_text())["version"]
    assert [p.name for p in (tmp_path / "site-packages").glob("flagtree_doctor-*.dist-info")] == [
        f"flagtree_doctor-{version}.dist-info"
    ]


def test_flagtree_cpu_holds_aarch64_libraries_linked_against_zlib(
    rehearsal: Rehearsal, tmp_path: Path
) -> None:
    readelf = require_executable("readelf", "binutils")
    extract(_package(rehearsal.channel, "flagtree-cpu"), tmp_path)
    libtriton = tmp_path / SITE / "triton" / "_C" / "libtriton.so"
    header = subprocess.run(
        [readelf, "-h", str(libtriton)], capture_output=True, text=True, check=True
    ).stdout
    assert "AArch64" in header
    dynamic = subprocess.run(
        [readelf, "-d", str(libtriton)], capture_output=True, text=True, check=True
    ).stdout
    assert "[libz.so.1]" in dynamic


def test_flagtree_cpu_depends_on_what_its_build_exports(rehearsal: Rehearsal, tmp_path: Path) -> None:
    extract(_package(rehearsal.channel, "flagtree-cpu"), tmp_path)
    depends = json.loads((tmp_path / "info" / "index.json").read_text())["depends"]
    names = {spec.split()[0] for spec in depends}
    # Run exports: python's python_abi, the compilers' libgcc/libstdcxx, zlib's libzlib, the sysroot's __glibc.
    assert {"python_abi", "libgcc", "libstdcxx", "libzlib", "__glibc"} <= names
    assert f"python_abi {PY}.* *_cp{PY.replace('.', '')}" in depends


def test_index_install_from_the_channel_and_activate(rehearsal: Rehearsal, tmp_path: Path) -> None:
    """`flagtree-feedstock channel index`, then a real solve and install of flagtree-cpu, then its activation."""
    for repodata in rehearsal.channel.glob("*/repodata.json"):
        repodata.unlink()
    assert main(["channel", "index", str(rehearsal.channel)]) == 0
    prefix = tmp_path / "env"
    installed = smoke_install(
        rehearsal.channel,
        ["flagtree-cpu"],
        prefix=prefix,
        platform=TARGET,
        extra_channels=[rehearsal.stub_channel.as_uri()],
    )
    names = {p.name for p in installed}
    assert {"flagtree-cpu", "flagtree-doctor", "python", "libzlib", "pytorch"} <= names
    assert "flagtree-llvm" not in names  # linked statically: a build-time dependency only
    _check_activation(prefix)


ACTIVATION_CHECK = r"""
set -euo pipefail
export CONDA_PREFIX="$1"
snapshot() { env | grep -v '^_=' | sort; }
before="$(snapshot)"
for script in "${CONDA_PREFIX}"/etc/conda/activate.d/*.sh; do . "${script}"; done
echo "FLAGTREE_BACKEND=${FLAGTREE_BACKEND}"
echo "TRITON_SYS_PATH=${TRITON_SYS_PATH}"
echo "CC=${CC}"
for script in "${CONDA_PREFIX}"/etc/conda/deactivate.d/*.sh; do . "${script}"; done
after="$(snapshot)"
if [[ "${before}" != "${after}" ]]; then
  echo "deactivate did not restore the environment:" >&2
  diff <(echo "${before}") <(echo "${after}") >&2 || true
  exit 3
fi
"""


def _check_activation(prefix: Path) -> None:
    """Source the installed activation under ``set -u`` (unset and preset variables), then deactivate."""
    bash = require_executable("bash", "bash")
    for preset in ({}, {"FLAGTREE_BACKEND": "nvidia", "TRITON_SYS_PATH": "/opt/old", "CC": "cc"}):
        env = {"PATH": os.environ["PATH"], "HOME": str(prefix), **preset}
        done = subprocess.run(
            [bash, "-c", ACTIVATION_CHECK, "check", str(prefix)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"activation with {preset or 'nothing set'}: {done.stderr.strip()}"
        # An unset CC becomes the environment's gcc (gxx's gcc), a user's CC is kept.
        cc = preset.get("CC", f"{prefix}/bin/gcc")
        assert done.stdout.splitlines() == ["FLAGTREE_BACKEND=cpu", f"TRITON_SYS_PATH={prefix}", f"CC={cc}"]


def test_flagtree_plain_libraries_match_upstream() -> None:
    """The stand-in cmake links what FlagTree's CMake links (FLAGTREE_SRC): the root CMakeLists.txt's plain
    libraries (its reading), and every plain library of any of FlagTree's CMake files (test_recipe_dependencies'
    scan); the synthesized tree carries the same list."""
    flagtree_src = upstream_source("FLAGTREE_SRC")
    import importlib.util  # noqa: PLC0415

    from flagtree_feedstock.bump.cmake_scan import plain_libraries  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location(
        "cmake_standin", ROOT / "tests" / "rehearsal" / "cmake_standin.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    linked = tuple(module.plain_link_libraries(flagtree_src))
    assert linked == FLAGTREE_PLAIN_LIBRARIES
    assert set(plain_libraries([flagtree_src])) <= set(linked)


# --- mutations: each applied to a copy of the recipe; the same pipeline must fail and name the cause ---


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"the mutation's target is not in {path.name}: {old!r}"
    path.write_text(text.replace(old, new, 1))


def _mutated_build(
    rehearsal: Rehearsal, tmp_path: Path, caplog: pytest.LogCaptureFixture, mutate: object
) -> tuple[Path, str]:
    """Build flagtree-cpu from a mutated copy (flagtree-llvm and -doctor reused); return (channel, failure)."""
    root = copy_recipe(tmp_path / "copy")
    assert callable(mutate)
    mutate(root)
    channel = tmp_path / "channel"
    shutil.copytree(rehearsal.channel, channel)
    # Same variant, same build string: the engine would reuse the baseline's flagtree-cpu.
    _package(channel, "flagtree-cpu").unlink()
    index_channel(channel)
    try:
        with caplog.at_level(logging.ERROR, logger="flagtree_feedstock"):
            build(
                root,
                write_variants(root, rehearsal.sources, tmp_path / "variants.yaml"),
                channel,
                rehearsal.stub_channel,
                names=["flagtree-cpu"],
                test=False,
            )
    except FeedstockError as exc:
        return channel, f"{exc}\n{caplog.text}"
    return channel, ""


def _expect(failure: str, *causes: str, in_log: bool = False) -> None:
    """The mutated build failed and names each cause: in its one-line error, or (``in_log``) in the first
    error lines of the build log that the toolkit shows with it. Prints them (``pytest -rP``)."""
    assert failure, "the mutated build passed"
    error, _, log = failure.partition("\n")
    first_errors = log.partition("the end of ")[0] if in_log else ""
    for cause in causes:
        assert cause in (first_errors if in_log else error), failure
    named = [line.strip() for line in first_errors.splitlines() if any(cause in line for cause in causes)]
    print("mutation failure:", error, *dict.fromkeys(named), sep="\n  ")


def test_mutation_a_licence_file_the_build_script_removed(rehearsal, tmp_path, caplog):
    def mutate(root: Path) -> None:
        with (root / "recipe" / "build-flagtree.sh").open("a") as script:
            script.write('rm "${SRC_DIR}/third_party/flagtree-cpu/LICENSE"\n')

    _channel, failure = _mutated_build(rehearsal, tmp_path, caplog, mutate)
    _expect(
        failure, "No license files were copied", "after the build script: third_party/flagtree-cpu/LICENSE"
    )


def test_mutation_a_package_contents_file_the_build_does_not_make(rehearsal, tmp_path, caplog):
    def mutate(root: Path) -> None:
        _replace(
            root / "recipe" / "recipe.yaml",
            "            - lib/python*/site-packages/triton/_C/libtriton.so\n",
            "            - lib/python*/site-packages/triton/_C/libtriton.so\n"
            "            - lib/python*/site-packages/triton/_C/libnotbuilt.so\n",
        )

    _channel, failure = _mutated_build(rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "libnotbuilt.so")


def test_mutation_zlib_removed_from_host(rehearsal, tmp_path, caplog):
    def mutate(root: Path) -> None:
        # From both recipes, and its pin from the variant file, as the variant check asks.
        for name in ("recipe.yaml", "meta.yaml"):
            recipe = root / "recipe" / name
            text = recipe.read_text()
            assert re.search(r"^ +- zlib\n", text, re.MULTILINE), f"{name} has no zlib host requirement"
            recipe.write_text(re.sub(r"^ +- zlib\n", "", text, count=1, flags=re.MULTILINE))
        for variants in (root / "conda_build_config.yaml", root / "recipe" / "conda_build_config.yaml"):
            data = yaml.safe_load(variants.read_text())
            if data.pop("zlib", None) is not None:
                variants.write_text(yaml.safe_dump(data))

    _channel, failure = _mutated_build(rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "cannot find -lz", in_log=True)


@pytest.mark.parametrize(
    ("mutation", "expected"),
    [
        pytest.param(
            ("activate.sh", '[ -n "${FLAGTREE_BACKEND+x}" ]', '[ -n "${FLAGTREE_BACKEND}" ]'),
            "FLAGTREE_BACKEND: unbound variable",
            id="unbound-under-set-u",
        ),
        pytest.param(
            ("deactivate.sh", "    else\n        unset TRITON_SYS_PATH\n", ""),
            "deactivate did not restore the environment",
            id="not-restored",
        ),
    ],
)
def test_mutation_an_activation_script(rehearsal, tmp_path, caplog, mutation, expected):
    script, old, new = mutation
    channel, failure = _mutated_build(
        rehearsal, tmp_path, caplog, lambda root: _replace(root / "recipe" / script, old, new)
    )
    assert not failure, failure
    prefix = tmp_path / "env"
    smoke_install(
        channel,
        ["flagtree-cpu"],
        prefix=prefix,
        platform=TARGET,
        extra_channels=[rehearsal.stub_channel.as_uri()],
    )
    with pytest.raises(AssertionError, match=expected) as raised:
        _check_activation(prefix)
    print(f"mutation failure: {raised.value}")


def test_mutation_a_patch_that_does_not_apply(rehearsal, tmp_path, caplog):
    def mutate(root: Path) -> None:
        patch = next((root / "patches" / "flagtree").glob("0006-*.patch"))
        text = patch.read_text()
        # The line it removes is no longer upstream's, as after an upstream rewrite of the same block. (A small
        # edit of that line is not enough: py-rattler-build 0.73 matches removed lines loosely and applies it;
        # tests/test_patches.py applies the series with GNU patch and no fuzz against FLAGTREE_SRC for that.)
        diff = text[text.index("\n@@ ") :].splitlines()
        removed = next(line for line in diff if line.startswith("-"))
        _replace(patch, f"\n{removed}\n", "\n-    add_compile_options(-Werror)\n")

    _channel, failure = _mutated_build(rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "a patch of flagtree-cpu", "0006-Do-not-build-with-Werror.patch")


def test_mutation_a_flagtree_cpu_patch_that_does_not_apply(rehearsal, tmp_path, caplog):
    """The engine applies patches/flagtree-cpu to the flagtree-cpu source (not to FlagTree's root)."""

    def mutate(root: Path) -> None:
        patch = next((root / "patches" / "flagtree-cpu").glob("0001-*.patch"))
        # The line the check replaces is no longer upstream's.
        _replace(patch, "\n-_rt = ctypes.CDLL(str(_LIB_PATH))\n", "\n-_rt = ctypes.cdll.LoadLibrary(_NAME)\n")

    _channel, failure = _mutated_build(rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "does not apply", "patches/flagtree-cpu/0001-Check-the-CPU-before-runtime.py-loads")


def test_a_failed_flagtree_cpu_keeps_llvm_and_the_rerun_builds_only_flagtree_cpu(
    rehearsal: Rehearsal, tmp_path: Path
) -> None:
    """The whole plan in one run (LLVM first): flagtree-cpu's script fails, LLVM and the doctor stay in the
    channel folder and its index; after the fix the same command builds flagtree-cpu alone (issue 16)."""
    broken = copy_recipe(tmp_path / "broken")
    _replace(broken / "recipe" / "build-flagtree.sh", "set -euo pipefail\n", "set -euo pipefail\nexit 3\n")
    channel = tmp_path / "channel"
    with pytest.raises(FeedstockError, match="building flagtree-cpu"):
        build(broken, rehearsal.variant_file, channel, rehearsal.stub_channel, names=OUTPUTS, test=False)
    llvm, doctor = _package(channel, "flagtree-llvm"), _package(channel, "flagtree-doctor")
    assert not list(channel.glob("*/flagtree-cpu-*")), "the failed package left a file"
    indexed = {name for repodata in channel.glob("*/repodata.json")
               for name in yaml.safe_load(repodata.read_text())["packages.conda"]}  # fmt: skip
    assert indexed == {llvm.name, doctor.name}
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (llvm, doctor)}

    built = build(ROOT, rehearsal.variant_file, channel, rehearsal.stub_channel, names=OUTPUTS, test=False)
    assert [p.name.rsplit("-", 2)[0] for p in built] == ["flagtree-cpu"]
    assert {
        p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (llvm, doctor)
    } == before  # reused as they were


def test_the_native_build_under_a_folder_with_a_space_and_chinese_characters(
    rehearsal: Rehearsal, tmp_path: Path
) -> None:
    """The whole plan of a copy of the recipe, built into a channel folder beside it, both under
    ".../构建/My Projects/", then installed into a prefix there and activated (issue 23 item 5). The engine
    works above the space (conda's compiler flags cannot hold one: builder/output_dir.py, staging_parent), so its
    work folder and prefixes hold the Chinese characters; the recipe folder, the flagtree-doctor source
    (``path: ..``), the channel folder and the prefix hold both."""
    base = tmp_path / "构建" / "My Projects"
    root = copy_recipe(base / "recipe copy")
    channel = base / "build artifacts"
    variants = write_variants(root, rehearsal.sources, base / "variants.yaml")
    built = build(root, variants, channel, rehearsal.stub_channel, names=OUTPUTS, test=False)
    assert sorted(p.name.rsplit("-", 2)[0] for p in built) == sorted(OUTPUTS)
    assert [p for p in tmp_path.rglob("*") if "staging" in p.name] == []
    prefix = base / "环境 env"
    smoke_install(
        channel,
        ["flagtree-cpu"],
        prefix=prefix,
        platform=TARGET,
        extra_channels=[rehearsal.stub_channel.as_uri()],
    )
    _check_activation(prefix)


def test_synthesized_flagtree_takes_the_series_exactly(tmp_path: Path) -> None:
    """Without FLAGTREE_SRC the stand-in tree is the patches' pre-images: each applies with git, no offset."""
    git = require_executable("git", "git")
    tree = tmp_path / "flagtree"
    synthesize_flagtree(tree)
    for patch in sorted(FLAGTREE_PATCHES.glob("*.patch")):
        done = subprocess.run(
            [git, "apply", "--verbose", str(patch)], cwd=tree, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "offset" not in done.stderr and "fuzz" not in done.stderr, done.stderr
    # The stand-in setup.py around upstream's lines still runs.
    compile((tree / "python" / "setup.py").read_text(), "setup.py", "exec")


def _python_files(tree: Path) -> dict[str, str]:
    return {path.relative_to(tree).as_posix(): path.read_text() for path in sorted(tree.rglob("*.py"))}


def test_flagtree_cpu_standin_takes_its_series_exactly(tmp_path: Path) -> None:
    """The flagtree-cpu stand-in holds the pre-images of patches/flagtree-cpu: each applies with git, no offset.
    Each of its Python files is valid Python before and after (the build byte-compiles the modules it
    packages), upstream's lines kept in a string."""
    git = require_executable("git", "git")
    tree = tmp_path / "flagtree-cpu"
    flagtree_cpu_tree(tree)
    patches = sorted(FLAGTREE_CPU_PATCHES.glob("*.patch"))
    assert patches
    for name, text in _python_files(tree).items():
        compile(text, name, "exec")
    for patch in patches:
        done = subprocess.run(
            [git, "apply", "--verbose", str(patch)], cwd=tree, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "offset" not in done.stderr and "fuzz" not in done.stderr, done.stderr
    for name, text in _python_files(tree).items():
        compile(text, name, "exec")


def test_flagtree_cpu_standin_holds_the_real_files(tmp_path: Path) -> None:
    """With FLAGTREE_CPU_SRC the stand-in's files the patches touch, and the link script's file targets the
    checkout holds, are the checkout's own, byte for byte: the rehearsal then packages upstream's modules."""
    src = upstream_source("FLAGTREE_CPU_SRC")
    tree = tmp_path / "flagtree-cpu"
    flagtree_cpu_tree(tree, src)
    wanted = {*preimages(sorted(FLAGTREE_CPU_PATCHES.glob("*.patch"))), *FLAGTREE_CPU_LINK_TARGETS}
    real = sorted(path for path in wanted if (src / path).is_file())
    assert {"third_party/cpu/language/cpu/runtime.py", "third_party/cpu/language/cpu/neon.py"} <= set(real)
    assert [path for path in real if (tree / path).read_bytes() != (src / path).read_bytes()] == []


def test_flagtree_cpu_carries_the_patched_runtime_module(rehearsal: Rehearsal, tmp_path: Path) -> None:
    """The engine applied patches/flagtree-cpu to the flagtree-cpu source: the runtime module in the package
    loads libTritonCPURuntime through the CPU check, and neon.py's -march follows the CPU. With
    FLAGTREE_CPU_SRC both are upstream's files with the series applied, byte for byte."""
    extract(_package(rehearsal.channel, "flagtree-cpu"), tmp_path / "package")
    package = tmp_path / "package" / SITE / "triton" / "language" / "extra" / "cpu"
    lines = (package / "runtime.py").read_text().splitlines()
    assert "_rt = load_runtime(_LIB_PATH)" in lines
    assert not [line for line in lines if "ctypes.CDLL(" in line]
    assert (
        "from flagtree_doctor.cpu_check import tle_neon_march"
        in (package / "neon.py").read_text().splitlines()
    )
    for name in ("runtime.py", "neon.py"):
        compile((package / name).read_text(), name, "exec")
    if os.environ.get("FLAGTREE_CPU_SRC"):
        patched = tmp_path / "patched"
        apply_series(series_patches("flagtree-cpu"), upstream_source("FLAGTREE_CPU_SRC"), patched)
        for name in ("runtime.py", "neon.py"):
            assert (package / name).read_bytes() == (
                patched / "third_party/cpu/language/cpu" / name
            ).read_bytes(), name


def test_flagtree_cpu_packages_both_runtimes_and_the_manifest(rehearsal: Rehearsal, tmp_path: Path) -> None:
    """Both builds of libTritonCPURuntime (patches 0008 and 0010, as the stand-in cmake reads them from the
    patched CMakeLists.txt) with one soname, and the manifest build-flagtree.sh wrote with the toolchain's
    objdump and as from the baseline one's own instructions."""
    from flagtree_doctor.manifest import read_manifest  # noqa: PLC0415
    from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME  # noqa: PLC0415

    readelf = require_executable("readelf", "binutils")
    extract(_package(rehearsal.channel, "flagtree-cpu"), tmp_path)
    c_dir = tmp_path / SITE / "triton" / "_C"
    for runtime in (ARMV9_RUNTIME, BASELINE_RUNTIME):
        dynamic = subprocess.run(
            [readelf, "-d", str(c_dir / runtime.library)], capture_output=True, text=True, check=True
        ).stdout
        assert "Library soname: [libTritonCPURuntime.so]" in dynamic, runtime.library
    manifest = read_manifest(c_dir / str(BASELINE_RUNTIME.manifest))
    assert manifest.march == BASELINE_RUNTIME.march
    assert manifest.library == "libTritonCPURuntime.so"
    needs = manifest.needs("flagtree_rehearsal_standin")  # the stand-in's one exported function
    assert needs is not None and needs.features == frozenset()
    paths = {entry["_path"] for entry in json.loads((tmp_path / "info" / "paths.json").read_text())["paths"]}
    assert {
        f"{SITE}/triton/_C/{name}" for name in (BASELINE_RUNTIME.library, BASELINE_RUNTIME.manifest)
    } <= paths


def test_standin_scripts_pass_shellcheck() -> None:
    from test_recipe_files import _shellcheck  # noqa: PLC0415

    scripts = sorted((ROOT / "tests" / "rehearsal").glob("*.sh"))
    assert len(scripts) == 4
    done = subprocess.run(
        [_shellcheck(), "--severity=style", "--shell=bash", *map(str, scripts)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- the LLVM archive route (issue 18): flagtree-llvm from a stand-in of Triton's archive, then flagtree-cpu ---


@dataclass(frozen=True)
class ArchiveRehearsal:
    """flagtree-llvm installed from the stand-in archive and flagtree-cpu built against it, at glibc 2.34."""

    channel: Path
    stub_channel: Path
    # What the archive route's builds published: {name: package}.
    built: dict[str, Path]


def _archive_top() -> str:
    return archive_top(str(variant_value(ROOT, "llvm_commit")))


@pytest.fixture(scope="session")
def archive_rehearsal(tmp_path_factory: pytest.TempPathFactory, rehearsal: Rehearsal) -> ArchiveRehearsal:
    """The stand-in archive through the toolkit's own checks (what --llvm-archive runs), then the recipe's
    archive route built with c_stdlib_version raised to what the archive needs; flagtree-doctor is reused."""
    from _rehearsal_archive import archive_variants, standin_archive  # noqa: PLC0415
    from flagtree_feedstock import llvm_archive  # noqa: PLC0415
    from flagtree_feedstock.recipe.render import render  # noqa: PLC0415

    folder = tmp_path_factory.mktemp("archive-rehearsal")
    archive = standin_archive(_package(rehearsal.channel, "flagtree-llvm"), folder, top=_archive_top())
    found, variant_file = archive_variants(archive, rehearsal.variant_file, folder)
    outputs = render(ROOT / "recipe" / "recipe.yaml", (variant_file,), target=TARGET, build=TARGET)
    llvm_archive.check_rendered(found, outputs)
    channel = folder / "channel"
    shutil.copytree(rehearsal.channel, channel)
    built = {}
    for name, test in (("flagtree-llvm", True), ("flagtree-cpu", False)):
        (built[name],) = build(ROOT, variant_file, channel, rehearsal.stub_channel, names=[name], test=test)
    return ArchiveRehearsal(channel=channel, stub_channel=rehearsal.stub_channel, built=built)


def test_archive_route_installs_the_archive_as_flagtree_llvm(archive_rehearsal, rehearsal, tmp_path):
    """A build string of its own beside the from-source package; what the source build installs, its package
    tests passed (package_contents: libLTO.so and libRemarks.so absent), LLVM's licence files, AArch64 only."""
    from _rehearsal_archive import LEFT_OUT, TARGET_LISTS, target_list  # noqa: PLC0415

    from_archive = archive_rehearsal.built["flagtree-llvm"]
    source_built = _package(rehearsal.channel, "flagtree-llvm")
    commit8 = str(variant_value(ROOT, "llvm_commit"))[:8]
    assert from_archive.name.startswith(
        f"flagtree-llvm-{source_built.name.split('-')[2]}-llvm{commit8}_archive_h"
    )
    assert "_archive_" not in source_built.name
    extract(from_archive, tmp_path)
    prefix = tmp_path / "lib" / "flagtree-llvm"
    assert sorted(p.name for p in (prefix / "bin").iterdir()) == ["llvm-tblgen", "mlir-tblgen"]
    assert [name for name in LEFT_OUT if (prefix / name).exists()] == []
    assert (prefix / "lib" / "libLLVMAArch64CodeGen.a").is_file()
    for name, kind in TARGET_LISTS.items():
        assert (prefix / "include" / "llvm" / "Config" / name).read_text() == target_list(kind, ("AArch64",))
    licences = tmp_path / "info" / "licenses"
    found = sorted(str(p.relative_to(licences)) for p in licences.rglob("*.TXT"))
    assert found == ["llvm-project/llvm/LICENSE.TXT", "llvm-project/mlir/LICENSE.TXT"]


def test_flagtree_cpu_against_the_archive_needs_its_glibc_installs_and_activates(
    archive_rehearsal, tmp_path, monkeypatch
):
    """Built against the 2.34 sysroot, flagtree-cpu depends on that glibc through the sysroot's run export: the
    real solver refuses it for a glibc 2.17 machine (the toolkit's default linux-aarch64), and installs it for a
    glibc 2.36 one (Debian 12's), where it activates as the from-source package does."""
    import json  # noqa: PLC0415

    from flagtree_feedstock.channel import install as channel_install  # noqa: PLC0415
    from flagtree_feedstock.errors import DependencyError  # noqa: PLC0415

    cpu = archive_rehearsal.built["flagtree-cpu"]
    extract(cpu, tmp_path / "cpu")
    index = json.loads((tmp_path / "cpu" / "info" / "index.json").read_text())
    assert f"__glibc >={ARCHIVE_GLIBC},<3.0.a0" in index["depends"]
    spec = f"flagtree-cpu =={index['version']} {index['build']}"

    def install(prefix: Path) -> list[object]:
        return smoke_install(
            archive_rehearsal.channel,
            [spec],
            prefix=prefix,
            platform=TARGET,
            extra_channels=[archive_rehearsal.stub_channel.as_uri()],
        )

    # Exit 7, as every spec that does not solve.
    with pytest.raises(DependencyError, match="cannot solve flagtree-cpu"):
        install(tmp_path / "glibc-2.17")
    machine = [
        (n, "2.36" if n == "__glibc" else v, b)
        for n, v, b in channel_install._TARGET_VIRTUAL_PACKAGES[TARGET]
    ]
    monkeypatch.setitem(channel_install._TARGET_VIRTUAL_PACKAGES, TARGET, tuple(machine))
    installed = install(tmp_path / "env")
    assert {"flagtree-cpu", "flagtree-doctor", "python"} <= {p.name for p in installed}  # type: ignore[attr-defined]
    _check_activation(tmp_path / "env")


def test_an_archive_needing_a_newer_glibc_is_refused_up_front(rehearsal, tmp_path, capsys):
    """Its tablegens need GLIBC_2.35 (a real aarch64 program calling _dl_find_object), above the raised 2.34:
    `flagtree-feedstock build --llvm-archive` stops before anything renders further or builds."""
    from _rehearsal_archive import standin_archive  # noqa: PLC0415

    cc = aarch64_gcc()
    (tmp_path / "tblgen.c").write_text(
        "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n"
        "int main(void) { struct dl_find_object found; "
        'return printf("%d\\n", _dl_find_object((void *)main, &found)) < 0; }\n'
    )
    subprocess.run([cc, str(tmp_path / "tblgen.c"), "-o", str(tmp_path / "tblgen")], check=True)
    archive = standin_archive(
        _package(rehearsal.channel, "flagtree-llvm"),
        tmp_path / "a",
        top=_archive_top(),
        program=tmp_path / "tblgen",
    )
    global_variants = tmp_path / "conda_build_config.yaml"
    text = (ROOT / "conda_build_config.yaml").read_text()
    global_variants.write_text(
        text.replace('c_stdlib_version:\n  - "2.17"', f'c_stdlib_version:\n  - "{ARCHIVE_GLIBC}"')
    )
    out = tmp_path / "channel"
    argv = [
        "build",
        "--variant-config",
        str(global_variants),
        "--output-dir",
        str(out),
        "--llvm-archive",
        str(archive),
    ]
    assert main(argv, env={"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": os.environ["PATH"]}) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    print("refused:", error)
    assert re.search(
        r"needs glibc 2\.35 \([\w-]+ needs GLIBC_2\.35\), above c_stdlib_version 2\.34", error
    ), error
    assert 'set c_stdlib_version to "2.39"' in error
    assert not out.exists()
