"""The cross rehearsal: the real recipe/recipe.yaml built by the real engine on conda-forge's path, offline.

``--build-platform linux-64 --target-platform linux-aarch64``, through the toolkit's own cross path
(``run_plan`` with a ``ForeignTarget``: the engine's ``build_recipes`` with both platforms given): the build
environment is solved and installed for this machine from the cross stub channel
(tests/_rehearsal_cross_channel.py: cross compilers around Debian's aarch64 gcc, cross-python, cmake, ...), the
host environment for linux-aarch64 from the native rehearsal's stub channel, with the session's stand-in
sources. The recipe's cross branches run
as written: build-llvm.sh's native tablegens, build-flagtree.sh's sleef helpers for this machine, qemu-user as
``CROSSCOMPILING_EMULATOR`` for flagtree-llvm's aarch64 ``mlir-tblgen``. The stand-in cmake runs each of those
programs where the real build does and records it. Package tests are not run (they are the emulated tier's).
tests/README.md has what runs for real and what is stood in for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rattler.package_streaming import extract

from _rehearsal import build, build_requirement_names, copy_recipe, write_variants
from _rehearsal_archive import ARCHIVE_GLIBC, archive_top, archive_variants, standin_archive
from _rehearsal_channel import PY_TAG, SITE, TARGET, stub_names
from _rehearsal_cross_channel import BUILD_PLATFORM, DEBIAN_AARCH64_LIBS, build_cross_channel
from _rehearsal_fixtures import variant_value
from _rehearsal_sources import ROOT, Sources
from _tools import aarch64_gcc, require_executable
from flagtree_feedstock import llvm_archive
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.errors import FeedstockError
from flagtree_feedstock.recipe.render import render

pytestmark = pytest.mark.rehearsal

# Built from linux-64; flagtree-doctor is noarch and flagtree-cpu pins it exactly, so it is built too.
OUTPUTS = ("flagtree-llvm", "flagtree-doctor", "flagtree-cpu")
SLEEF_HELPERS = ("mkrename", "mkalias", "mkdisp", "addSuffix")
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class CrossChannel:
    """The linux-64 stubs, and the file their stand-in cmake records the programs it runs in."""

    channel: Path
    record: Path
    emulator: str


@dataclass(frozen=True)
class CrossRehearsal:
    """The cross-built channel, what it was built with, and the programs its build ran."""

    channel: Path
    stub_channel: Path
    cross: CrossChannel
    variant_file: Path
    sources: Sources
    runs: list[dict[str, Any]]


@pytest.fixture(scope="session")
def cross_channel(tmp_path_factory: pytest.TempPathFactory, offline_session: None) -> CrossChannel:
    if platform.machine() != "x86_64":
        pytest.skip(f"the cross rehearsal builds from linux-64: this machine is {platform.machine()}")
    emulator = require_executable("qemu-aarch64-static", "qemu-user-static")
    cc = aarch64_gcc()
    build_cc = require_executable("x86_64-linux-gnu-gcc", "gcc")
    record = tmp_path_factory.mktemp("cmake-record") / "runs.jsonl"
    channel = build_cross_channel(
        tmp_path_factory.mktemp("cross-stub") / "channel",
        tmp_path_factory.mktemp("cross-stub-work"),
        cc=cc,
        build_cc=build_cc,
        gcc_major=int(str(variant_value(ROOT, "c_compiler_version"))),
        record=record,
    )
    return CrossChannel(channel=channel, record=record, emulator=emulator)


def _runs(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []


def _cross_build(
    root: Path,
    variant_file: Path,
    channel: Path,
    stub_channel: Path,
    *,
    cross: CrossChannel,
    names: list[str],
) -> list[Path]:
    """A linux-64 -> linux-aarch64 build, qemu-user as CROSSCOMPILING_EMULATOR (as the `cross` job sets it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CROSSCOMPILING_EMULATOR", cross.emulator)
        return build(
            root,
            variant_file,
            channel,
            stub_channel,
            names=names,
            test=False,
            build_platform=BUILD_PLATFORM,
            extra_channels=[cross.channel],
        )


@pytest.fixture(scope="session")
def cross_rehearsal(
    tmp_path_factory: pytest.TempPathFactory,
    stub_channel: Path,
    cross_channel: CrossChannel,
    sources: Sources,
    offline_session: None,
) -> CrossRehearsal:
    folder = tmp_path_factory.mktemp("cross-rehearsal")
    variant_file = write_variants(ROOT, sources, folder / "variants.yaml")
    stubs = stub_names(cross_channel.channel)
    missing = sorted(build_requirement_names(ROOT, variant_file, BUILD_PLATFORM) - stubs)
    if missing:
        pytest.fail(
            f"the cross build environments need {', '.join(missing)}, which the cross stub channel lacks: "
            "add to tests/_rehearsal_cross_channel.py"
        )
    channel = folder / "channel"
    _cross_build(ROOT, variant_file, channel, stub_channel, cross=cross_channel, names=list(OUTPUTS))
    return CrossRehearsal(
        channel=channel,
        stub_channel=stub_channel,
        cross=cross_channel,
        variant_file=variant_file,
        sources=sources,
        runs=_runs(cross_channel.record),
    )


def _package(channel: Path, name: str) -> Path:
    (found,) = [p for p in channel.glob(f"*/{name}-*.conda") if p.name.rsplit("-", 2)[0] == name]
    return found


def _elf_machines(folder: Path) -> dict[str, set[str]]:
    """Every ELF file under ``folder`` (members of static archives too) -> the machines readelf names."""
    readelf = require_executable("readelf", "binutils")
    found: dict[str, set[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        head = path.read_bytes()[:8]
        if head[:4] != ELF_MAGIC and head != b"!<arch>\n":
            continue
        done = subprocess.run([readelf, "-h", str(path)], capture_output=True, text=True, check=True)
        found[str(path.relative_to(folder))] = set(re.findall(r"Machine:\s+(.+)", done.stdout))
    return found


@pytest.mark.parametrize("name", ["flagtree-llvm", "flagtree-cpu"])
def test_every_binary_of_the_cross_built_packages_is_aarch64(cross_rehearsal, tmp_path, name):
    package = _package(cross_rehearsal.channel, name)
    assert package.parent.name == TARGET
    extract(package, tmp_path)
    machines = _elf_machines(tmp_path)
    expected = {
        "flagtree-llvm": {
            "lib/flagtree-llvm/bin/mlir-tblgen",
            "lib/flagtree-llvm/bin/llvm-tblgen",
            "lib/flagtree-llvm/lib/libLLVMAArch64CodeGen.a",
            "lib/flagtree-llvm/lib/libMLIRIR.a",
        },
        "flagtree-cpu": {
            f"{SITE}/triton/_C/libtriton.so",
            f"{SITE}/triton/_C/libTritonCPURuntime.so",
            f"{SITE}/triton/_C/libsleef.so.3",
        },
    }[name]
    assert expected <= set(machines), sorted(machines)
    assert {path: found for path, found in machines.items() if found != {"AArch64"}} == {}


def test_sleefs_helpers_ran_on_the_build_machine_and_are_not_packaged(cross_rehearsal, tmp_path):
    """build-flagtree.sh built them for this machine (CC_FOR_BUILD) and passed NATIVE_BUILD_DIR; sleef's cross
    build ran them directly. They stay in the work folder."""
    helpers = [run for run in cross_rehearsal.runs if run["project"] == "sleef"]
    assert sorted(run["tool"] for run in helpers) == sorted(SLEEF_HELPERS)
    assert {(run["machine"], run["via"]) for run in helpers} == {("x86-64", "directly")}
    native = "_flagtree_build/sleef-native/bin"
    assert all(Path(run["path"]).parent.as_posix().endswith(native) for run in helpers)
    extract(_package(cross_rehearsal.channel, "flagtree-cpu"), tmp_path)
    packaged = {path.name for path in tmp_path.rglob("*")}
    assert not packaged & set(SLEEF_HELPERS)


def test_llvm_ran_native_tablegens_and_flagtree_ran_the_target_tablegen_under_qemu(cross_rehearsal):
    """build-llvm.sh's native sub-build made the tablegens LLVM's cross build runs (LLVM_NATIVE_TOOL_DIR);
    FlagTree's build ran flagtree-llvm's own mlir-tblgen, an aarch64 program, through the emulator."""
    runs = {(run["project"], run["tool"]): (run["machine"], run["via"]) for run in cross_rehearsal.runs}
    assert runs[("LLVM", "llvm-tblgen")] == runs[("LLVM", "mlir-tblgen")] == ("x86-64", "directly")
    assert runs[("triton", "mlir-tblgen")] == ("AArch64", "through the emulator")


def _wheel_tags(package: Path, folder: Path) -> list[str]:
    extract(package, folder)
    (wheel,) = folder.glob(f"{SITE}/*.dist-info/WHEEL")
    return re.findall(r"^Tag: (.+)$", wheel.read_text(), re.MULTILINE)


def test_cross_python_built_flagtree_for_the_target(cross_rehearsal, tmp_path):
    """${PYTHON} -m pip ran the build machine's python as cross-python: the wheel it installed is for the
    target."""
    tags = _wheel_tags(_package(cross_rehearsal.channel, "flagtree-cpu"), tmp_path)
    assert tags == [f"{PY_TAG}-{PY_TAG}-linux_aarch64"]


# --- the LLVM archive route cross (issue 18): flagtree-llvm from a stand-in of Triton's aarch64 archive ---


@dataclass(frozen=True)
class CrossArchiveRehearsal:
    """flagtree-llvm installed from the stand-in archive and flagtree-cpu built against it, both cross."""

    # What each step published, and the emulator the builds ran aarch64 programs with.
    built: dict[str, Path]
    emulator: str
    # The programs each step's build ran (the stand-in cmake's record), by output name.
    runs: dict[str, list[dict[str, Any]]]


# The stand-in archive's programs: an aarch64 program of its own, so its files are told from the from-source
# stand-in's, linked against Debian's cross glibc 2.36, so it needs GLIBC_2.34 as the real archive's do, and
# with the run path LLVM's CMake gives every tool it installs, $ORIGIN/../lib (AddLLVM.cmake,
# llvm_setup_rpath), which the engine rewrites in place (one without any would need patchelf).
ARCHIVE_TABLEGEN = "tablegen of the LLVM archive"
ARCHIVE_TABLEGEN_C = f'int puts(const char *);\nint main(void) {{ return puts("{ARCHIVE_TABLEGEN}") < 0; }}\n'


@pytest.fixture(scope="session")
def cross_archive_rehearsal(
    tmp_path_factory: pytest.TempPathFactory, cross_rehearsal: CrossRehearsal
) -> CrossArchiveRehearsal:
    """The stand-in archive through the toolkit's own checks (what --llvm-archive runs), then flagtree-llvm
    and flagtree-cpu cross-built from the cross rehearsal's variant with the archive's keys and
    c_stdlib_version raised to its glibc; flagtree-doctor is the cross rehearsal's."""
    folder = tmp_path_factory.mktemp("cross-archive-rehearsal")
    source = folder / "tablegen.c"
    source.write_text(ARCHIVE_TABLEGEN_C)
    tablegen = folder / "tablegen"
    subprocess.run([aarch64_gcc(), str(source), "-Wl,-rpath,$ORIGIN/../lib", "-o", str(tablegen)], check=True)
    archive = standin_archive(
        _package(cross_rehearsal.channel, "flagtree-llvm"),
        folder / "archive",
        top=archive_top(str(variant_value(ROOT, "llvm_commit"))),
        program=tablegen,
    )
    found, variant_file = archive_variants(archive, cross_rehearsal.variant_file, folder)
    recipe = ROOT / "recipe" / "recipe.yaml"
    llvm_archive.check_rendered(found, render(recipe, (variant_file,), target=TARGET, build=BUILD_PLATFORM))
    channel = folder / "channel"
    shutil.copytree(cross_rehearsal.channel, channel)
    built, runs = {}, {}
    for name in ("flagtree-llvm", "flagtree-cpu"):
        before = len(_runs(cross_rehearsal.cross.record))
        (built[name],) = _cross_build(
            ROOT,
            variant_file,
            channel,
            cross_rehearsal.stub_channel,
            cross=cross_rehearsal.cross,
            names=[name],
        )
        runs[name] = _runs(cross_rehearsal.cross.record)[before:]
    return CrossArchiveRehearsal(built=built, emulator=cross_rehearsal.cross.emulator, runs=runs)


def _archive_llvm(rehearsal: CrossArchiveRehearsal, folder: Path) -> Path:
    """flagtree-llvm's prefix, extracted from the archive route's package into ``folder``."""
    extract(rehearsal.built["flagtree-llvm"], folder)
    return folder / "lib" / "flagtree-llvm"


def test_cross_archive_route_installs_the_archives_aarch64_files(cross_archive_rehearsal, tmp_path):
    """build-llvm.sh's archive branch ran: flagtree-llvm's tablegens are the archive's programs, every ELF file
    is AArch64, and nothing of LLVM's build ran (a from-source cross build runs its native tablegens)."""
    package = cross_archive_rehearsal.built["flagtree-llvm"]
    assert package.parent.name == TARGET
    assert "_archive_h" in package.name
    prefix = _archive_llvm(cross_archive_rehearsal, tmp_path)
    printed = {}
    for tool in sorted((prefix / "bin").iterdir()):
        done = subprocess.run(
            [cross_archive_rehearsal.emulator, "-L", str(DEBIAN_AARCH64_LIBS.parent), str(tool)],
            capture_output=True,
            text=True,
            check=True,
        )
        printed[tool.name] = done.stdout.strip()
    assert printed == {"llvm-tblgen": ARCHIVE_TABLEGEN, "mlir-tblgen": ARCHIVE_TABLEGEN}
    machines = _elf_machines(tmp_path)
    assert "lib/flagtree-llvm/lib/libLLVMAArch64CodeGen.a" in machines
    assert {path: found for path, found in machines.items() if found != {"AArch64"}} == {}
    assert cross_archive_rehearsal.runs["flagtree-llvm"] == []


def test_cross_archive_flagtree_ran_the_archives_tablegen_under_qemu(cross_archive_rehearsal, tmp_path):
    """FlagTree's build ran the archive's aarch64 mlir-tblgen (flagtree-llvm's, above) through the emulator; the
    flagtree-cpu it made is aarch64, for the target's python, and needs the archive's glibc."""
    runs = cross_archive_rehearsal.runs["flagtree-cpu"]
    tablegens = [(run["machine"], run["via"]) for run in runs if run["tool"] == "mlir-tblgen"]
    assert tablegens == [("AArch64", "through the emulator")]
    (run,) = [run for run in runs if run["tool"] == "mlir-tblgen"]
    assert Path(run["path"]).parent.as_posix().endswith("lib/flagtree-llvm/bin")
    packaged = _archive_llvm(cross_archive_rehearsal, tmp_path / "llvm") / "bin" / "mlir-tblgen"
    assert run["sha256"] == hashlib.sha256(packaged.read_bytes()).hexdigest()
    package = cross_archive_rehearsal.built["flagtree-cpu"]
    assert package.parent.name == TARGET
    assert _wheel_tags(package, tmp_path / "cpu") == [f"{PY_TAG}-{PY_TAG}-linux_aarch64"]
    machines = _elf_machines(tmp_path / "cpu")
    assert f"{SITE}/triton/_C/libtriton.so" in machines
    assert {path: found for path, found in machines.items() if found != {"AArch64"}} == {}
    index = json.loads((tmp_path / "cpu" / "info" / "index.json").read_text())
    assert f"__glibc >={ARCHIVE_GLIBC},<3.0.a0" in index["depends"]


# --- mutations of a copy of the recipe: the cross build must fail, naming the cause ---


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"the mutation's target is not once in {path.name}: {old!r}"
    path.write_text(text.replace(old, new))


def _mutated_cross_build(
    rehearsal: CrossRehearsal, tmp_path: Path, caplog: pytest.LogCaptureFixture, mutate: Any
) -> tuple[Path, str]:
    """Cross-build flagtree-cpu from a mutated copy (flagtree-llvm and -doctor reused); (channel, failure)."""
    root = copy_recipe(tmp_path / "copy")
    mutate(root)
    channel = tmp_path / "channel"
    shutil.copytree(rehearsal.channel, channel)
    # Same variant, same build string: the engine would reuse the baseline's flagtree-cpu.
    _package(channel, "flagtree-cpu").unlink()
    index_channel(channel)
    variant_file = write_variants(root, rehearsal.sources, tmp_path / "variants.yaml")
    try:
        with caplog.at_level(logging.ERROR, logger="flagtree_feedstock"):
            _cross_build(
                root,
                variant_file,
                channel,
                rehearsal.stub_channel,
                cross=rehearsal.cross,
                names=["flagtree-cpu"],
            )
    except FeedstockError as exc:
        return channel, f"{exc}\n{caplog.text}"
    return channel, ""


def _expect(failure: str, cause: str) -> None:
    """The mutated build failed, and its error or the end of its build log names ``cause`` (pytest -rP)."""
    assert failure, "the mutated build passed"
    assert cause in failure, failure
    named = [line.strip() for line in failure.splitlines() if cause in line]
    print("mutation failure:", failure.partition("\n")[0], *dict.fromkeys(named), sep="\n  ")


def test_mutation_the_emulator_not_passed_to_the_build_script(cross_rehearsal, tmp_path, caplog):
    """rattler-build hands a build script only a few of the caller's variables: the recipe's script env must
    pass this one."""

    def mutate(root: Path) -> None:
        recipe = root / "recipe" / "recipe.yaml"
        _replace(
            recipe,
            '          CROSSCOMPILING_EMULATOR: ${{ env.get("CROSSCOMPILING_EMULATOR", default="") }}\n',
            "",
        )

    _channel, failure = _mutated_cross_build(cross_rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "cross-compiling linux-64 -> linux-aarch64 needs CROSSCOMPILING_EMULATOR")


def test_mutation_sleefs_native_build_dir_not_passed(cross_rehearsal, tmp_path, caplog):
    def mutate(root: Path) -> None:
        _replace(
            root / "recipe" / "build-flagtree.sh",
            '  cross_cmake_args+=("-DNATIVE_BUILD_DIR=${sleef_native}")\n',
            "",
        )

    _channel, failure = _mutated_cross_build(cross_rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "'/bin/mkrename', needed by")


def test_mutation_a_host_library_moved_to_the_build_environment(cross_rehearsal, tmp_path, caplog):
    """zlib in `build` installs this machine's libz into the build prefix: the aarch64 link finds none."""

    def mutate(root: Path) -> None:
        recipe = root / "recipe" / "recipe.yaml"
        text = recipe.read_text()
        host_zlib = re.search(r"^( +)- zlib\n", text, re.MULTILINE)
        assert host_zlib is not None, "recipe.yaml has no zlib host requirement"
        text = text[: host_zlib.start()] + text[host_zlib.end() :]
        recipe.write_text(text.replace("        - ccache\n", "        - ccache\n        - zlib\n", 1))

    _channel, failure = _mutated_cross_build(cross_rehearsal, tmp_path, caplog, mutate)
    _expect(failure, "cannot find -lz")


def test_mutation_cross_python_left_out(cross_rehearsal, tmp_path, caplog):
    """Without cross-python, ${PYTHON} is the host's python: here this machine's interpreter (the stub's), so
    the build passes, but the wheel is tagged for this machine, not the target."""

    def mutate(root: Path) -> None:
        _replace(root / "recipe" / "recipe.yaml", "            - cross-python_${{ target_platform }}\n", "")

    channel, failure = _mutated_cross_build(cross_rehearsal, tmp_path, caplog, mutate)
    assert not failure, failure
    tags = _wheel_tags(_package(channel, "flagtree-cpu"), tmp_path / "extracted")
    assert tags != [f"{PY_TAG}-{PY_TAG}-linux_aarch64"]
    print("mutation failure: the wheel is tagged", *tags)


def test_cross_standin_scripts_pass_shellcheck() -> None:
    from test_recipe_files import _shellcheck  # noqa: PLC0415

    scripts = sorted((ROOT / "tests" / "rehearsal" / "cross").glob("*.sh"))
    assert len(scripts) == 4
    done = subprocess.run(
        [_shellcheck(), "--severity=style", "--shell=bash", *map(str, scripts)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
