"""The build scripts run, without network (`unshare -n`), against a stand-in source tree that records calls.

The stand-ins: FlagTree's link script records its arguments and what the flagtree-cpu tree holds at that
moment; `$PYTHON` records its arguments, working folder and environment (and for `pip install` puts the
three libraries where setup.py would); `cmake` records its arguments. A missing export, a wrong path or a
pip flag that changed fails here, not hours into a build on Arm. What they cannot show: the engine's
environment, sources and packaging around the scripts (licence files, package contents, the installed
activation): the rehearsal tier (test_rehearsal.py) runs the scripts under the real engine for those.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _recipe_support import RECIPE_DIR
from _tools import aarch64_gcc, network_jail, require_executable

NVIDIA_VARIABLES = (
    "TRITON_PTXAS_PATH",
    "TRITON_CUOBJDUMP_PATH",
    "TRITON_NVDISASM_PATH",
    "TRITON_CUDACRT_PATH",
    "TRITON_CUDART_PATH",
    "TRITON_CUPTI_INCLUDE_PATH",
    "TRITON_CUPTI_LIB_PATH",
)
CONDA_CMAKE_ARGS = "-DCMAKE_AR=/fake/ar -DCMAKE_INSTALL_PREFIX=/conda/default -DCMAKE_INSTALL_LIBDIR=lib"

# Records argv, cwd and environment as one JSON line; `-m pip install` also "installs" the libraries.
_RECORDER = """#!{python}
import json, os, sys
from pathlib import Path
with open(os.environ["STANDIN_LOG"] + "/calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": Path(sys.argv[0]).name, "argv": sys.argv[1:], "cwd": os.getcwd(),
                          "env": dict(os.environ)}}) + "\\n")
if sys.argv[1:4] == ["-m", "pip", "install"]:
    c_dir = Path(os.environ["SP_DIR"]) / "triton" / "_C"
    c_dir.mkdir(parents=True)
    for name in ("libtriton.so", "libTritonCPURuntime.so", "libsleef.so.3"):
        (c_dir / name).write_text("")
    (c_dir / "libsleef.so").symlink_to("libsleef.so.3")
"""
_LINK_SCRIPT = """#!/bin/bash
printf '%s\\n' "$@" > "$STANDIN_LOG/link.args"
pwd > "$STANDIN_LOG/link.cwd"
ls "$2/third_party/sleef" > "$STANDIN_LOG/link.sleef"
"""


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


class StandIn:
    """A work folder shaped like the engines' (all sources placed), a prefix and fake tools."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.src = root / "work"
        self.prefix = root / "prefix"
        self.sp_dir = self.prefix / "lib" / "python3.12" / "site-packages"
        self.log = root / "log"
        self.home = root / "home"
        self.bin = root / "bin"
        for folder in (self.log, self.home, self.sp_dir):
            folder.mkdir(parents=True)
        recorder = _RECORDER.format(python=sys.executable)
        for tool in ("python", "cmake"):
            _write(self.bin / tool, recorder, 0o755)
        src = self.src
        _write(src / "LICENSE", "FlagTree")
        _write(src / "python" / "setup.py", "")
        _write(src / "python" / "scripts" / "link_flagtree_cpu.sh", _LINK_SCRIPT, 0o755)
        _write(src / "third_party" / "flagtree-cpu" / "LICENSE", "flagtree-cpu")
        _write(src / "third_party" / "flagtree-cpu" / "third_party" / "cpu" / "CMakeLists.txt", "")
        _write(src / "third_party" / "flagtree-cpu" / "third_party" / "sleef" / "SUBMODULE_CHECKOUT", "")
        _write(src / "sleef" / "CMakeLists.txt", "")
        _write(src / "sleef" / "LICENSE.txt", "sleef")
        _write(src / "sleef" / "PINNED_SOURCE", "")
        _write(src / "llvm-project" / "llvm" / "CMakeLists.txt", "")
        _write(src / "llvm-project" / "llvm" / "LICENSE.TXT", "llvm")
        _write(src / "llvm-project" / "mlir" / "LICENSE.TXT", "mlir")

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.home),
            "STANDIN_LOG": str(self.log),
            "SRC_DIR": str(self.src),
            "PREFIX": str(self.prefix),
            "SP_DIR": str(self.sp_dir),
            "RECIPE_DIR": str(RECIPE_DIR),
            "PYTHON": str(self.bin / "python"),
            "CPU_COUNT": "3",
            "PKG_NAME": "flagtree-cpu",
            "PKG_VERSION": "0.6.0",
            "CFLAGS": "-ftree-vectorize -fPIC -O2 -g -pipe",
            "CXXFLAGS": "-fPIC -O2 -g3 -ggdb -fvisibility-inlines-hidden",
            "LDFLAGS": "-Wl,-O2 -Wl,--as-needed",
            "CMAKE_ARGS": CONDA_CMAKE_ARGS,
            "build_platform": "linux-aarch64",
            "target_platform": "linux-aarch64",
            # Must not reach setup.py: it switches FlagTree's own offline mode on.
            "FLAGTREE_OFFLINE_BUILD_DIR": "/nonexistent/nvidia-toolkits",
            **extra,
        }

    def run(self, script: str, **extra: str) -> subprocess.CompletedProcess[str]:
        argv = [*network_jail(), "bash", str(RECIPE_DIR / script)]
        return subprocess.run(
            argv,
            env=self.env(**extra),
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    def calls(self, tool: str) -> list[dict[str, Any]]:
        path = self.log / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [call for call in map(json.loads, lines) if call["tool"] == tool]


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path)


def _inside(path: str, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def test_build_flagtree_links_the_pinned_sources(standin):
    result = standin.run("build-flagtree.sh")
    assert result.returncode == 0, result.stderr
    log = standin.log
    assert (log / "link.args").read_text().splitlines() == [
        "--flagtree-cpu-path",
        "third_party/flagtree-cpu",
    ]
    assert (log / "link.cwd").read_text().strip() == str(standin.src)
    # A copy of the recipe's sleef source replaced the submodule checkout before the link script ran.
    assert (log / "link.sleef").read_text().split() == ["CMakeLists.txt", "LICENSE.txt", "PINNED_SOURCE"]


def test_build_flagtree_runs_pip_once_offline_from_python(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    (pip,) = standin.calls("python")
    assert pip["argv"] == [
        "-m",
        "pip",
        "install",
        ".",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-vv",
    ]
    assert pip["cwd"] == str(standin.src / "python")
    assert standin.calls("cmake") == []


def test_build_flagtree_exports(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    env = standin.calls("python")[0]["env"]
    src, prefix = standin.src, standin.prefix
    assert env["FLAGTREE_BACKEND"] == "cpu"
    assert env["MAX_JOBS"] == "3"
    assert env["TRITON_OFFLINE_BUILD"] == "1"
    assert "FLAGTREE_OFFLINE_BUILD_DIR" not in env
    assert env["TRITON_BUILD_PROTON"] == "OFF"
    assert env["LLVM_SYSPATH"] == str(prefix)
    assert env["LLVM_INCLUDE_DIRS"] == f"{prefix}/include"
    assert env["LLVM_LIBRARY_DIR"] == f"{prefix}/lib"
    for name in NVIDIA_VARIABLES:
        assert Path(env[name]).exists() and _inside(env[name], src), name
    for name in ("TRITON_HOME", "FLAGTREE_CACHE_DIR"):
        assert _inside(env[name], src), name
    cmake_args = shlex.split(env["TRITON_APPEND_CMAKE_ARGS"])
    install_prefixes = [a.split("=", 1)[1] for a in cmake_args if a.startswith("-DCMAKE_INSTALL_PREFIX=")]
    assert install_prefixes and all(_inside(p, src) for p in install_prefixes)
    assert env["FLAGTREE_WHEEL_VERSION"] == "0.6.0"
    assert env["CFLAGS"].split() == ["-ftree-vectorize", "-fPIC", "-O2", "-pipe"]
    assert env["CXXFLAGS"].split() == ["-fPIC", "-O2", "-fvisibility-inlines-hidden"]
    assert env["LDFLAGS"].split() == ["-Wl,-O2", "-Wl,--as-needed", "-Wl,-S"]
    # setup.py must not find FlagTree's git checkout (it would append .git<sha> to the version).
    assert not Path(env["GIT_DIR"]).exists()


def test_build_flagtree_installs_the_activation_scripts(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    for kind in ("activate", "deactivate"):
        for ext in ("sh", "fish"):
            installed = standin.prefix / "etc" / "conda" / f"{kind}.d" / f"flagtree-cpu_{kind}.{ext}"
            assert installed.read_text() == (RECIPE_DIR / f"{kind}.{ext}").read_text()


def test_build_flagtree_writes_nothing_outside_the_work_dir_and_prefix(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    assert list(standin.home.iterdir()) == []
    assert not (standin.prefix / "include").exists()


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("third_party/flagtree-cpu/LICENSE", "licence file third_party/flagtree-cpu/LICENSE"),
        ("sleef/CMakeLists.txt", "no sleef source"),
        ("third_party/flagtree-cpu/third_party/cpu/CMakeLists.txt", "no flagtree-cpu source"),
    ],
)
def test_build_flagtree_stops_early_on_a_wrong_tree(standin, missing, message):
    (standin.src / missing).unlink()
    result = standin.run("build-flagtree.sh")
    assert result.returncode != 0
    assert message in result.stderr
    assert standin.calls("python") == []


def test_build_flagtree_fails_when_pip_left_a_library_out(standin):
    fake = standin.bin / "python"
    fake.write_text(fake.read_text().replace('(c_dir / "libsleef.so")', '(c_dir / "libother.so")'))
    result = standin.run("build-flagtree.sh")
    assert result.returncode != 0
    assert "libsleef.so is missing" in result.stderr


CROSS = {
    "build_platform": "linux-64",
    "HOST": "aarch64-conda-linux-gnu",
    "CC_FOR_BUILD": "/build/bin/x86_64-conda-linux-gnu-cc",
    "CXX_FOR_BUILD": "/build/bin/x86_64-conda-linux-gnu-c++",
}


def test_build_llvm_cross_builds_native_tablegens_first(standin):
    result = standin.run("build-llvm.sh", **CROSS)
    assert result.returncode == 0, result.stderr
    native_configure, native_build, configure, build, install = [c["argv"] for c in standin.calls("cmake")]
    native = str(standin.src / "llvm-build-native")
    assert native_configure[:4] == ["-S", str(standin.src / "llvm-project" / "llvm"), "-B", native]
    assert f"-DCMAKE_C_COMPILER={CROSS['CC_FOR_BUILD']}" in native_configure
    assert f"-DCMAKE_CXX_COMPILER={CROSS['CXX_FOR_BUILD']}" in native_configure
    assert not set(shlex.split(CONDA_CMAKE_ARGS)) & set(native_configure)  # not the cross toolchain
    assert native_build[:2] == ["--build", native]
    assert {"llvm-tblgen", "mlir-tblgen"} <= set(native_build)
    # The cross build: conda's CMAKE_ARGS, then ours, pointed at the native tools, for the target triple.
    assert configure[4:7] == shlex.split(CONDA_CMAKE_ARGS)
    assert "-DCMAKE_CROSSCOMPILING=ON" in configure
    assert f"-DLLVM_NATIVE_TOOL_DIR={native}/bin" in configure
    assert "-DLLVM_HOST_TRIPLE=aarch64-unknown-linux-gnu" in configure
    assert build[:2] == ["--build", str(standin.src / "llvm-build")]
    assert install[0] == "--install"


def test_build_llvm_natively_has_no_sub_build(standin):
    assert standin.run("build-llvm.sh").returncode == 0
    configure, _build, _install = [c["argv"] for c in standin.calls("cmake")]
    assert not any("NATIVE_TOOL_DIR" in a or "CROSSCOMPILING" in a for a in configure)


def test_build_llvm_cross_needs_the_build_compilers(standin):
    result = standin.run("build-llvm.sh", **{**CROSS, "CC_FOR_BUILD": ""})
    assert result.returncode != 0
    assert "cross-compiling needs CC_FOR_BUILD and CXX_FOR_BUILD" in result.stderr
    assert standin.calls("cmake") == []


def test_build_flagtree_cross_needs_an_emulator(standin):
    result = standin.run("build-flagtree.sh", **CROSS)
    assert result.returncode != 0
    assert "cross-compiling linux-64 -> linux-aarch64 needs CROSSCOMPILING_EMULATOR" in result.stderr
    assert standin.calls("python") == []


def test_build_flagtree_cross_passes_the_toolchain_to_cmake(standin):
    # flagtree-llvm's tablegen, run "under the emulator": here a stand-in that answers --version.
    _write(standin.prefix / "bin" / "mlir-tblgen", "#!/bin/sh\necho mlir-tblgen\n", 0o755)
    emulator = "/usr/bin/qemu-aarch64-static"
    result = standin.run("build-flagtree.sh", **CROSS, CROSSCOMPILING_EMULATOR=emulator)
    assert result.returncode == 0, result.stderr
    env = standin.calls("python")[0]["env"]
    args = shlex.split(env["TRITON_APPEND_CMAKE_ARGS"])
    assert args[:3] == shlex.split(CONDA_CMAKE_ARGS)
    assert f"-DCMAKE_CROSSCOMPILING_EMULATOR={emulator}" in args
    # Our install prefix comes last, so it wins over the one in conda's CMAKE_ARGS.
    assert args[-1] == f"-DCMAKE_INSTALL_PREFIX={standin.src / '_flagtree_build' / 'cmake-install'}"


def test_build_flagtree_cross_stops_when_the_tablegen_cannot_run(standin):
    _write(standin.prefix / "bin" / "mlir-tblgen", "#!/bin/sh\nexit 126\n", 0o755)
    result = standin.run("build-flagtree.sh", **CROSS, CROSSCOMPILING_EMULATOR="/usr/bin/qemu-aarch64-static")
    assert result.returncode != 0
    assert "flagtree-llvm's mlir-tblgen does not run here" in result.stderr


def _cross_flagtree(standin: StandIn, **extra: str) -> subprocess.CompletedProcess[str]:
    # flagtree-llvm's tablegen, run "under the emulator": here a stand-in that answers --version.
    _write(standin.prefix / "bin" / "mlir-tblgen", "#!/bin/sh\necho mlir-tblgen\n", 0o755)
    return standin.run(
        "build-flagtree.sh", **{**CROSS, "CROSSCOMPILING_EMULATOR": "/usr/bin/qemu-aarch64-static", **extra}
    )


def test_build_flagtree_cross_builds_sleefs_helpers_for_the_build_machine(standin):
    result = _cross_flagtree(standin)
    assert result.returncode == 0, result.stderr
    configure, build = standin.calls("cmake")
    native = standin.src / "_flagtree_build" / "sleef-native"
    assert configure["argv"][:4] == ["-S", str(standin.src / "sleef"), "-B", str(native)]
    assert f"-DCMAKE_C_COMPILER={CROSS['CC_FOR_BUILD']}" in configure["argv"]
    # flagtree-cpu's sleef options (third_party/cpu/CMakeLists.txt), so the same helpers are needed.
    for option in ("TESTS", "DFT", "GNUABI_LIBS", "SCALAR_LIB"):
        assert f"-DSLEEF_BUILD_{option}=OFF" in configure["argv"]
    assert not set(shlex.split(CONDA_CMAKE_ARGS)) & set(configure["argv"])  # not the cross toolchain
    assert configure["env"]["CFLAGS"] == configure["env"]["LDFLAGS"] == ""  # conda's are the target's
    assert build["argv"] == ["--build", str(native), "--target", "mkrename", "mkalias", "mkdisp", "addSuffix"]
    args = shlex.split(standin.calls("python")[0]["env"]["TRITON_APPEND_CMAKE_ARGS"])
    assert f"-DNATIVE_BUILD_DIR={native}" in args


def test_build_flagtree_cross_needs_the_build_c_compiler(standin):
    result = _cross_flagtree(standin, CC_FOR_BUILD="")
    assert result.returncode != 0
    assert "cross-compiling needs CC_FOR_BUILD" in result.stderr
    assert standin.calls("cmake") == [] and standin.calls("python") == []


def test_sleef_cross_builds_with_the_helpers_the_script_builds(standin, tmp_path):
    """Real cmake, ninja and compilers on sleef at sleef_commit (SLEEF_SRC): the script's native helpers let
    a cross configure of sleef generate its headers; without NATIVE_BUILD_DIR ninja wants /bin/mkrename."""
    sleef_src = os.environ.get("SLEEF_SRC")
    if not sleef_src:
        pytest.skip(
            "SLEEF_SRC is not set (a checkout of sleef_commit 93f04d869471ce4d007abaebb8c6a7bc62749f61)"
        )
    for tool, package in (("cmake", "cmake"), ("ninja", "ninja-build"), ("gcc", "gcc")):
        require_executable(tool, package)
    cross_cc = aarch64_gcc()
    shutil.rmtree(standin.src / "sleef")
    shutil.copytree(sleef_src, standin.src / "sleef")
    (standin.bin / "cmake").unlink()  # the real one
    result = _cross_flagtree(standin, CC_FOR_BUILD=shutil.which("gcc") or "gcc")
    assert result.returncode == 0, result.stdout + result.stderr
    args = shlex.split(standin.calls("python")[0]["env"]["TRITON_APPEND_CMAKE_ARGS"])
    (native,) = [a for a in args if a.startswith("-DNATIVE_BUILD_DIR=")]
    sleef = standin.src / "third_party" / "flagtree-cpu" / "third_party" / "sleef"
    header = "src/libm/include/renameadvsimd.h"
    for build, extra in (("with", [native]), ("without", [])):
        configure = subprocess.run(
            ["cmake", "-S", str(sleef), "-B", str(tmp_path / build), "-G", "Ninja", "-DCMAKE_SYSTEM_NAME=Linux",
             "-DCMAKE_SYSTEM_PROCESSOR=aarch64", f"-DCMAKE_C_COMPILER={cross_cc}", "-DSLEEF_BUILD_TESTS=OFF",
             "-DSLEEF_BUILD_DFT=OFF", "-DSLEEF_BUILD_GNUABI_LIBS=OFF", "-DSLEEF_BUILD_SCALAR_LIB=OFF", *extra],
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        assert configure.returncode == 0, configure.stdout + configure.stderr
        generate = subprocess.run(
            ["ninja", "-C", str(tmp_path / build), header],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if extra:
            assert generate.returncode == 0, generate.stdout + generate.stderr
            assert "Sleef_" in (tmp_path / build / header).read_text()
        else:
            assert "'/bin/mkrename', needed by" in generate.stdout + generate.stderr
