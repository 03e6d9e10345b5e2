"""The build scripts run, without network (`unshare -n`), against a stand-in source tree that records calls.

The stand-ins: FlagTree's link script records its arguments and what the flagtree-cpu tree holds at that
moment; `$PYTHON` records its arguments, working folder and environment (and for `pip install` puts the
three libraries where setup.py would); `cmake` and `ccache` record their arguments and cmake, asked for
`--graphviz=FILE`, writes a link graph in CMake's format (the test's, not LLVM's: benchmarks/llvm_compile_units.py
and the closing note of issue 13 run the script's configure on real LLVM sources). recipe/llvm_distribution.py
is the real one. A missing export, a wrong path, a pip flag or an LLVM option that changed fails here, not
hours into a build on Arm. What they cannot show: the engine's environment, sources and packaging around the
scripts (licence files, package contents, the installed activation): the rehearsal tier (test_rehearsal.py)
runs the scripts under the real engine for those.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _recipe_support import RECIPE_DIR, dot_graph, llvm_distribution
from _timing import seconds
from _tools import aarch64_gcc, network_jail, require_executable, upstream_source

NVIDIA_VARIABLES = (
    "TRITON_PTXAS_PATH",
    "TRITON_CUOBJDUMP_PATH",
    "TRITON_NVDISASM_PATH",
    "TRITON_CUDACRT_PATH",
    "TRITON_CUDART_PATH",
    "TRITON_CUPTI_INCLUDE_PATH",
    "TRITON_CUPTI_LIB_PATH",
)
# A work folder under a folder with a space and Chinese characters, as under an output folder such as
# ".../My Projects/构建": every test of the scripts runs there too.
ROOTS = {"plain": "", "space-and-chinese": "My Projects/构建"}

# Records argv, cwd and environment as one JSON line; `-m pip install` also "installs" the libraries.
_RECORDER = """#!{python}
import json, os, sys
from pathlib import Path
with open(os.environ["STANDIN_LOG"] + "/calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": Path(sys.argv[0]).name, "argv": sys.argv[1:], "cwd": os.getcwd(),
                          "env": dict(os.environ)}}) + "\\n")
for arg in sys.argv[1:]:
    if arg.startswith("--graphviz="):
        Path(arg.split("=", 1)[1]).write_text(Path(os.environ["STANDIN_GRAPHVIZ"]).read_text())
if sys.argv[1:4] == ["-m", "pip", "install"]:
    c_dir = Path(os.environ["SP_DIR"]) / "triton" / "_C"
    (c_dir / "baseline").mkdir(parents=True)
    for name in ("libtriton.so", "libTritonCPURuntime.so", "libsleef.so.3", "baseline/libTritonCPURuntime.so"):
        (c_dir / name).write_text("")
    (c_dir / "libsleef.so").symlink_to("libsleef.so.3")
if sys.argv[1:2] and sys.argv[1].endswith("runtime_manifest.py"):  # writes the manifest beside the library
    Path(sys.argv[2]).with_name("libTritonCPURuntime.isa.json").write_text("{{}}")
"""
_LINK_SCRIPT = """#!/bin/bash
printf '%s\\n' "$@" > "$STANDIN_LOG/link.args"
pwd > "$STANDIN_LOG/link.cwd"
ls "$2/third_party/sleef" > "$STANDIN_LOG/link.sleef"
"""


# What LLVM's graph adds around FlagTree's libraries in the stand-in: libraries they link that FlagTree does
# not name (through a private link, an object library, an interface link), a system library, an object
# library, and libraries, a shared library and a tool nothing FlagTree links depends on.
_GRAPH_EXTRA = {
    "LLVMDemangle": "octagon",
    "obj.MLIRIR": "hexagon",
    "MLIRDataLayoutInterfaces": "octagon",
    "MLIRSparseTensorEnums": "pentagon",
    "pthread": "septagon",
    "LLVMX86CodeGen": "octagon",
    "LTO": "doubleoctagon",
    "llvm-tblgen": "egg",
}
_GRAPH_LINKS = [
    ("LLVMSupport", "LLVMDemangle"),
    ("LLVMSupport", "pthread"),
    ("MLIRIR", "obj.MLIRIR"),
    ("obj.MLIRIR", "MLIRDataLayoutInterfaces"),
    ("MLIRSupport", "MLIRSparseTensorEnums"),
    ("LTO", "LLVMSupport"),
    ("llvm-tblgen", "LLVMSupport"),
]
# What the closure adds to FlagTree's own list, and what it leaves out.
_CLOSURE_ADDS = {"LLVMDemangle", "MLIRDataLayoutInterfaces", "MLIRSparseTensorEnums"}
_CLOSURE_LEAVES_OUT = {"obj.MLIRIR", "pthread", "LLVMX86CodeGen", "LTO"}


def llvm_graph(leave_out: str = "") -> str:
    """A link graph of an LLVM that builds every library FlagTree links (but ``leave_out``), and more."""
    flagtree = {name: "octagon" for name in llvm_distribution().flagtree_links() if name != leave_out}
    return dot_graph(flagtree | _GRAPH_EXTRA, _GRAPH_LINKS)


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
        for tool in ("python", "cmake", "ccache"):
            _write(self.bin / tool, recorder, 0o755)
        src = self.src
        _write(src / "LICENSE", "FlagTree")
        _write(src / "python" / "setup.py", "")
        # The line of patch 0010 the build script reads the baseline runtime's -march from.
        _write(
            src / "CMakeLists.txt", "    set(FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS -march=armv8.2-a+dotprod)\n"
        )
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
        self.graph = root / "link-graph.dot"
        _write(self.graph, llvm_graph())
        # conda's CMAKE_ARGS, as its compiler activation makes it: options joined by spaces, unquoted, paths of
        # the build's prefixes among them (the engine puts them under the output folder).
        self.conda_cmake_args = [
            "-DCMAKE_AR=/fake/ar",
            f"-DCMAKE_INSTALL_PREFIX={self.prefix}",
            f"-DCMAKE_FIND_ROOT_PATH={self.prefix};{root}/build_env/sysroot",
            "-DCMAKE_INSTALL_LIBDIR=lib",
        ]

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.home),
            "STANDIN_LOG": str(self.log),
            "STANDIN_GRAPHVIZ": str(self.graph),
            "SRC_DIR": str(self.src),
            "PREFIX": str(self.prefix),
            "SP_DIR": str(self.sp_dir),
            "RECIPE_DIR": str(RECIPE_DIR),
            "PYTHON": str(self.bin / "python"),
            "CPU_COUNT": "3",
            "PKG_NAME": "flagtree-cpu",
            "PKG_VERSION": "0.6.0",
            "CFLAGS": f"-ftree-vectorize -fPIC -O2 -g -pipe -isystem {self.prefix}/include",
            "CXXFLAGS": f"-fPIC -O2 -g3 -ggdb -fvisibility-inlines-hidden -fdebug-prefix-map={self.src}=/usr/src",
            "LDFLAGS": "-Wl,-O2 -Wl,--as-needed",
            "CMAKE_ARGS": " ".join(self.conda_cmake_args),
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
            timeout=seconds(120),
        )

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The recorded calls of ``tool`` (of every stand-in when None), in the order they were made."""
        path = self.log / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [call for call in map(json.loads, lines) if tool in (None, call["tool"])]


@pytest.fixture(params=list(ROOTS), ids=list(ROOTS))
def standin(tmp_path: Path, request: pytest.FixtureRequest) -> StandIn:
    return StandIn(tmp_path / ROOTS[request.param])


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


@pytest.mark.parametrize(
    ("output", "script"), [("flagtree-cpu", "build-flagtree.sh"), ("flagtree-llvm", "build-llvm.sh")]
)
def test_the_build_script_leaves_every_licence_file_for_the_engine(standin, output, script):
    """The engines collect about.license_file from the work folder after the script: a script that moves or
    deletes a source folder (sleef, copied into flagtree-cpu's tree) loses a licence. The rehearsal shows the
    engine's failure; this shows the cause in a second."""
    recipe = yaml.safe_load((RECIPE_DIR / "recipe.yaml").read_text())
    (about,) = [o["about"] for o in recipe["outputs"] if o["package"]["name"] == output]
    assert all((standin.src / name).is_file() for name in about["license_file"])  # the stand-in's sources
    result = standin.run(script)
    assert result.returncode == 0, result.stderr
    assert [name for name in about["license_file"] if not (standin.src / name).is_file()] == []


def test_build_flagtree_runs_pip_once_offline_from_python(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    pip, _ = standin.calls("python")
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


def test_build_flagtree_writes_the_baseline_runtimes_manifest(standin):
    """After pip: runtime_manifest.py on the baseline runtime, with the toolchain's objdump and as (conda's
    activation sets OBJDUMP and AS) and the -march patch 0010 sets; the manifest is checked to be there."""
    result = standin.run("build-flagtree.sh", OBJDUMP="/tc/aarch64-objdump", AS="/tc/aarch64-as")
    assert result.returncode == 0, result.stderr
    _, manifest = standin.calls("python")
    runtime = standin.sp_dir / "triton" / "_C" / "baseline" / "libTritonCPURuntime.so"
    assert manifest["argv"] == [str(RECIPE_DIR / "runtime_manifest.py"), str(runtime), "--objdump",
                                "/tc/aarch64-objdump", "--as", "/tc/aarch64-as", "--march", "armv8.2-a+dotprod"]  # fmt: skip
    # Without OBJDUMP and AS: the toolchain's by its triple.
    standin.log.joinpath("calls.jsonl").unlink()
    shutil.rmtree(standin.sp_dir / "triton")
    assert standin.run("build-flagtree.sh", HOST="aarch64-conda-linux-gnu").returncode == 0
    argv = standin.calls("python")[1]["argv"]
    assert argv[3] == "aarch64-conda-linux-gnu-objdump" and argv[5] == "aarch64-conda-linux-gnu-as"


def test_build_flagtree_fails_without_patch_0010s_flags(standin):
    (standin.src / "CMakeLists.txt").write_text("")
    result = standin.run("build-flagtree.sh")
    assert result.returncode != 0
    assert "CMakeLists.txt sets no FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS (patch 0010)" in result.stderr


def test_build_flagtree_exports(standin):
    assert standin.run("build-flagtree.sh").returncode == 0
    env = standin.calls("python")[0]["env"]
    src, prefix = standin.src, standin.prefix
    assert env["FLAGTREE_BACKEND"] == "cpu"
    assert env["MAX_JOBS"] == "3"
    assert env["TRITON_OFFLINE_BUILD"] == "1"
    assert "FLAGTREE_OFFLINE_BUILD_DIR" not in env
    assert env["TRITON_BUILD_PROTON"] == "OFF"
    # flagtree-llvm's own prefix, not $PREFIX (where conda-forge's llvmdev and mlir install)
    assert env["LLVM_SYSPATH"] == f"{prefix}/lib/flagtree-llvm"
    assert env["LLVM_INCLUDE_DIRS"] == f"{prefix}/lib/flagtree-llvm/include"
    assert env["LLVM_LIBRARY_DIR"] == f"{prefix}/lib/flagtree-llvm/lib"
    for name in NVIDIA_VARIABLES:
        assert Path(env[name]).exists() and _inside(env[name], src), name
    for name in ("TRITON_HOME", "FLAGTREE_CACHE_DIR"):
        assert _inside(env[name], src), name
    cmake_args = shlex.split(env["TRITON_APPEND_CMAKE_ARGS"])
    install_prefixes = [a.split("=", 1)[1] for a in cmake_args if a.startswith("-DCMAKE_INSTALL_PREFIX=")]
    assert install_prefixes and all(_inside(p, src) for p in install_prefixes)
    assert env["FLAGTREE_WHEEL_VERSION"] == "0.6.0"
    # The -g flags go; the rest stays as it was, a path with a space in it whole.
    # The build folder (SRC_DIR's parent) mapped out of the objects: reproducible packages (docs/building.md).
    mapped = f"-ffile-prefix-map={Path(src).parent}=/usr/src/flagtree-build"
    assert env["CFLAGS"] == f"-ftree-vectorize -fPIC -O2 -pipe -isystem {prefix}/include {mapped}"
    assert (
        env["CXXFLAGS"] == f"-fPIC -O2 -fvisibility-inlines-hidden -fdebug-prefix-map={src}=/usr/src {mapped}"
    )
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
    native_configure, native_build, graph, configure, build = [c["argv"] for c in standin.calls("cmake")]
    native = str(standin.src / "llvm-build-native")
    assert native_configure[:4] == ["-S", str(standin.src / "llvm-project" / "llvm"), "-B", native]
    assert f"-DCMAKE_C_COMPILER={CROSS['CC_FOR_BUILD']}" in native_configure
    assert f"-DCMAKE_CXX_COMPILER={CROSS['CXX_FOR_BUILD']}" in native_configure
    assert not set(standin.conda_cmake_args) & set(native_configure)  # not the cross toolchain
    assert native_build[:2] == ["--build", native]
    assert {"llvm-tblgen", "mlir-tblgen"} <= set(native_build)
    # The cross build: conda's CMAKE_ARGS, then ours, pointed at the native tools, for the target triple.
    for argv in (graph, configure):
        assert argv[4:8] == standin.conda_cmake_args
        assert "-DCMAKE_CROSSCOMPILING=ON" in argv
        assert f"-DLLVM_NATIVE_TOOL_DIR={native}/bin" in argv
        assert "-DLLVM_HOST_TRIPLE=aarch64-unknown-linux-gnu" in argv
    assert build[:2] == ["--build", str(standin.src / "llvm-build")]


def test_build_llvm_natively_has_no_sub_build(standin):
    assert standin.run("build-llvm.sh").returncode == 0
    for argv in [c["argv"] for c in standin.calls("cmake")]:
        assert not any("NATIVE_TOOL_DIR" in a or "CROSSCOMPILING" in a for a in argv)


def test_build_llvm_passes_condas_arguments_whole(standin):
    """conda's CMAKE_ARGS, one string whose paths may hold a space, reaches CMake as its options, each whole."""
    graph, configure, _build = _llvm_calls(standin)
    for argv in (graph, configure):
        assert argv[4:8] == standin.conda_cmake_args


# A tiny CMake project in place of LLVM: a static library for each library FlagTree links, the two tablegens,
# and the install-distribution target, which installs them. Real CMake writes its link graph.
_TINY_LLVM = """cmake_minimum_required(VERSION 3.20)
project(LLVM C)
foreach(name {libraries})
  add_library(${{name}} STATIC lib.c)
  install(TARGETS ${{name}} ARCHIVE DESTINATION lib)
endforeach()
foreach(name mlir-tblgen llvm-tblgen)
  add_executable(${{name}} tool.c)
  install(TARGETS ${{name}} RUNTIME DESTINATION bin)
endforeach()
add_custom_target(install-distribution COMMAND "${{CMAKE_COMMAND}}" --install "${{CMAKE_BINARY_DIR}}"
  DEPENDS {libraries} mlir-tblgen llvm-tblgen)
"""


def test_build_llvm_configures_and_installs_with_real_cmake_under_a_folder_with_a_space(tmp_path):
    """Real CMake and Ninja: conda's CMAKE_ARGS holds the prefixes, under ".../My Projects/构建"; the configures
    read each option whole (the cache holds the paths as given) and the install lands in flagtree-llvm's prefix.
    conda's CFLAGS and LDFLAGS are plain "-O2": conda-forge's own (-isystem $PREFIX/include) cannot hold such
    a path at all (ctng-compiler-activation-feedstock issue 188), which is why the toolkit builds elsewhere
    then (tests/test_output_folders.py)."""
    ar = require_executable("ar", "binutils")
    require_executable("cmake", "cmake")
    require_executable("ninja", "ninja-build")
    require_executable("cc", "gcc")
    standin = StandIn(tmp_path / "My Projects" / "构建")
    (standin.bin / "cmake").unlink()  # the real one
    llvm = standin.src / "llvm-project" / "llvm"
    libraries = " ".join(llvm_distribution().flagtree_links())
    _write(llvm / "CMakeLists.txt", _TINY_LLVM.format(libraries=libraries))
    _write(llvm / "lib.c", "int flagtree_llvm_standin;\n")
    _write(llvm / "tool.c", "int main(void) { return 0; }\n")
    sysroot = standin.root / "build_env" / "aarch64 sysroot"
    conda = [f"-DCMAKE_AR={ar}", f"-DCMAKE_INSTALL_PREFIX={standin.prefix}", "-DCMAKE_INSTALL_LIBDIR=lib",
             f"-DCMAKE_FIND_ROOT_PATH={standin.prefix};{sysroot}", "-DCMAKE_BUILD_TYPE=Release"]  # fmt: skip
    result = standin.run(
        "build-llvm.sh", CMAKE_ARGS=" ".join(conda), CFLAGS="-O2", CXXFLAGS="-O2", LDFLAGS="", CPU_COUNT="2"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    cache = (standin.src / "llvm-build" / "CMakeCache.txt").read_text()
    llvm_prefix = standin.prefix / "lib" / "flagtree-llvm"
    assert f"CMAKE_INSTALL_PREFIX:PATH={llvm_prefix}\n" in cache  # ours, the last, wins
    assert f"CMAKE_FIND_ROOT_PATH:UNINITIALIZED={standin.prefix};{sysroot}\n" in cache
    assert f"CMAKE_AR:UNINITIALIZED={ar}\n" in cache
    components = re.search(r"^LLVM_DISTRIBUTION_COMPONENTS:UNINITIALIZED=(.*)$", cache, re.MULTILINE)
    module = llvm_distribution()
    assert components and set(components[1].split(";")) == {
        *module.flagtree_links(),
        *module.TOOLS,
        *module.PACKAGE,
    }
    assert (llvm_prefix / "lib" / "libMLIRIR.a").is_file()
    assert (llvm_prefix / "bin" / "mlir-tblgen").is_file()


def _defines(argv: list[str]) -> dict[str, str]:
    """The cache entries a cmake configure sets, as CMake sees them: the last -D of a name wins."""
    defines = {}
    for arg in argv:
        if match := re.fullmatch(r"-D(\w+)(?::\w+)?=(.*)", arg):
            defines[match[1]] = match[2]
    return defines


def _llvm_calls(standin: StandIn) -> tuple[list[str], list[str], list[str]]:
    """The graph configure, the distribution configure and the build of a native build-llvm.sh run."""
    result = standin.run("build-llvm.sh")
    assert result.returncode == 0, result.stderr
    graph, configure, build = [c["argv"] for c in standin.calls("cmake")]
    return graph, configure, build


def test_build_llvm_targets_aarch64_only(standin):
    # libtriton links only the AArch64 pair, and llvm.cc initialises every target LLVM was built with.
    for argv in _llvm_calls(standin)[:2]:
        assert _defines(argv)["LLVM_TARGETS_TO_BUILD"] == "AArch64"
        assert _defines(argv)["LLVM_ENABLE_PROJECTS"] == "mlir"


@pytest.mark.parametrize("name", ["BUILD_SHARED_LIBS", "LLVM_BUILD_LLVM_DYLIB", "LLVM_LINK_LLVM_DYLIB"])
def test_build_llvm_builds_static_libraries_only(standin, name):
    for argv in _llvm_calls(standin)[:2]:
        assert _defines(argv).get(name) == "OFF"


@pytest.mark.parametrize("library", ["ZLIB", "ZSTD", "LIBXML2", "LIBEDIT", "LIBPFM"])
def test_build_llvm_leaves_the_optional_libraries_out(standin, library):
    # Found at configure time, each would be a library libtriton.so has to link (and flagtree-cpu to declare).
    for argv in _llvm_calls(standin)[:2]:
        assert _defines(argv).get(f"LLVM_ENABLE_{library}") == "OFF"


def test_build_llvm_installs_the_distribution_into_its_own_prefix(standin):
    graph, configure, build = _llvm_calls(standin)
    for argv in (graph, configure):
        assert _defines(argv)["CMAKE_INSTALL_PREFIX"] == str(standin.prefix / "lib" / "flagtree-llvm")
        assert _defines(argv)["CMAKE_INSTALL_LIBDIR"] == "lib"
    # install-distribution builds and installs the components, and nothing else (no `cmake --install`).
    assert build == [
        "--build",
        str(standin.src / "llvm-build"),
        "--parallel",
        "3",
        "--target",
        "install-distribution",
    ]


def test_build_llvm_distributes_what_flagtree_links_closed_over_the_graph(standin):
    graph, configure, _build = _llvm_calls(standin)
    build_dir = standin.src / "llvm-build"
    assert f"--graphviz={build_dir}/link-graph.dot" in graph
    assert "LLVM_DISTRIBUTION_COMPONENTS" not in _defines(graph)
    components = _defines(configure)["LLVM_DISTRIBUTION_COMPONENTS"].split(";")
    assert len(components) == len(set(components))
    module = llvm_distribution()
    flagtree = set(module.flagtree_links())
    assert set(components) == flagtree | _CLOSURE_ADDS | set(module.TOOLS) | set(module.PACKAGE)
    assert not set(components) & _CLOSURE_LEAVES_OUT
    # What FlagTree's cpu build cannot do without, whatever the list above says.
    assert {
        "LLVMAArch64CodeGen",
        "LLVMAArch64AsmParser",
        "LLVMPasses",
        "MLIRIR",
        "mlir-tblgen",
        "llvm-headers",
        "mlir-headers",
        "cmake-exports",
        "mlir-cmake-exports",
    } <= set(components)
    # The graph is of the same configuration: the two configures differ in these arguments only.
    assert [a for a in graph if not a.startswith("--graphviz=")] == [
        a for a in configure if not a.startswith("-DLLVM_DISTRIBUTION_COMPONENTS=")
    ]
    # The per-target graph files would be thousands of files for LLVM.
    options = (build_dir / "CMakeGraphVizOptions.cmake").read_text()
    assert "GRAPHVIZ_GENERATE_PER_TARGET FALSE" in options
    assert "GRAPHVIZ_GENERATE_DEPENDERS FALSE" in options


def test_build_llvm_stops_when_llvm_lacks_a_library_flagtree_links(standin):
    standin.graph.write_text(llvm_graph(leave_out="MLIRRewrite"))
    result = standin.run("build-llvm.sh")
    assert result.returncode != 0
    assert "llvm_distribution.py: this LLVM builds no library MLIRRewrite" in result.stderr
    assert len(standin.calls("cmake")) == 1  # the graph configure, then nothing


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


# flagtree-llvm's tablegen is an aarch64 binary: it runs only through the emulator. Here a stand-in that answers
# --version when the stand-in emulator (which records its arguments) runs it, and fails as an aarch64 binary
# run directly on x86_64 does ("cannot execute binary file", 126) otherwise.
_TABLEGEN = '#!/bin/sh\n[ -n "${STANDIN_EMULATED:-}" ] || exit 126\necho mlir-tblgen\n'
_EMULATOR = '#!/bin/sh\necho "$@" >>"$STANDIN_LOG/emulator.args"\nSTANDIN_EMULATED=1 exec "$@"\n'


def _emulated_tablegen(standin: StandIn, tablegen: str = _TABLEGEN) -> str:
    """Install the tablegen and the emulator stand-ins; return the emulator's path."""
    _write(standin.prefix / "lib" / "flagtree-llvm" / "bin" / "mlir-tblgen", tablegen, 0o755)
    emulator = standin.root / "emulator" / "qemu-aarch64-static"
    _write(emulator, _EMULATOR, 0o755)
    return str(emulator)


def test_build_flagtree_cross_passes_the_toolchain_to_cmake(standin):
    emulator = _emulated_tablegen(standin)
    result = standin.run("build-flagtree.sh", **CROSS, CROSSCOMPILING_EMULATOR=emulator)
    assert result.returncode == 0, result.stderr
    # The check ran the tablegen through the emulator, as CMake will.
    tablegen = standin.prefix / "lib" / "flagtree-llvm" / "bin" / "mlir-tblgen"
    assert (standin.log / "emulator.args").read_text().splitlines() == [f"{tablegen} --version"]
    env = standin.calls("python")[0]["env"]
    args = shlex.split(env["TRITON_APPEND_CMAKE_ARGS"])
    assert args[:4] == standin.conda_cmake_args
    assert f"-DCMAKE_CROSSCOMPILING_EMULATOR={emulator}" in args
    # Our install prefix comes last, so it wins over the one in conda's CMAKE_ARGS.
    assert args[-1] == f"-DCMAKE_INSTALL_PREFIX={standin.src / '_flagtree_build' / 'cmake-install'}"


def test_build_flagtree_cross_stops_when_the_tablegen_cannot_run(standin):
    emulator = _emulated_tablegen(standin, "#!/bin/sh\nexit 1\n")
    result = standin.run("build-flagtree.sh", **CROSS, CROSSCOMPILING_EMULATOR=emulator)
    assert result.returncode != 0
    assert f"flagtree-llvm's mlir-tblgen does not run under {emulator}" in result.stderr
    assert standin.calls("python") == []


def _cross_flagtree(standin: StandIn, **extra: str) -> subprocess.CompletedProcess[str]:
    emulator = _emulated_tablegen(standin)
    return standin.run("build-flagtree.sh", **{**CROSS, "CROSSCOMPILING_EMULATOR": emulator, **extra})


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
    assert not set(standin.conda_cmake_args) & set(configure["argv"])  # not the cross toolchain
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
    sleef_src = upstream_source("SLEEF_SRC")
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
            capture_output=True, text=True, check=False, timeout=seconds(600),
        )  # fmt: skip
        assert configure.returncode == 0, configure.stdout + configure.stderr
        generate = subprocess.run(
            ["ninja", "-C", str(tmp_path / build), header],
            capture_output=True,
            text=True,
            check=False,
            timeout=seconds(600),
        )
        if extra:
            assert generate.returncode == 0, generate.stdout + generate.stderr
            assert "Sleef_" in (tmp_path / build / header).read_text()
        else:
            assert "'/bin/mkrename', needed by" in generate.stdout + generate.stderr


def test_flagtree_finds_llvm_where_build_llvm_installs_it(standin, tmp_path):
    _graph, configure, _build = _llvm_calls(standin)
    other = StandIn(tmp_path / "flagtree")
    assert other.run("build-flagtree.sh", PREFIX=str(standin.prefix)).returncode == 0
    env = other.calls("python")[0]["env"]
    assert env["LLVM_SYSPATH"] == _defines(configure)["CMAKE_INSTALL_PREFIX"]


@pytest.mark.parametrize("cache_dir", [{}, {"CCACHE_DIR": ""}], ids=["unset", "empty"])
def test_build_flagtree_leaves_the_compiler_cache_off_without_a_cache_dir(standin, cache_dir):
    # Where CCACHE_DIR is unset the engines do not set it (recipe.yaml's script env, meta.yaml's script_env).
    assert standin.run("build-flagtree.sh", **cache_dir).returncode == 0
    env = standin.calls("python")[0]["env"]
    assert env["TRITON_BUILD_WITH_CCACHE"] == "OFF"  # or FlagTree's CMake uses any ccache it finds
    assert standin.calls("ccache") == []


def test_build_flagtree_caches_compiles_where_ci_keeps_a_cache(standin, tmp_path):
    cache = tmp_path / "ccache"
    result = standin.run("build-flagtree.sh", CCACHE_DIR=str(cache))
    assert result.returncode == 0, result.stderr
    env = standin.calls("python")[0]["env"]
    assert env["TRITON_BUILD_WITH_CCACHE"] == "ON"
    assert env["CCACHE_DIR"] == str(cache)
    # The folder that holds the work folder and the prefixes, as rattler-build and conda-build lay them out.
    assert env["CCACHE_BASEDIR"] == str(standin.src.parent)
    assert env["CCACHE_COMPILERCHECK"] == "content"
    assert env["CCACHE_NOHASHDIR"] == "1"
    # Statistics of this build only, printed into the build log after it.
    sequence = [(call["tool"], call["argv"][:1]) for call in standin.calls()]
    assert sequence == [
        ("ccache", ["--zero-stats"]),
        ("python", ["-m"]),
        ("ccache", ["--show-stats"]),
        ("python", [str(RECIPE_DIR / "runtime_manifest.py")]),
    ]
    assert f"build-flagtree.sh: compiler cache {cache}, this build:" in result.stdout
    assert (cache / "flagtree-cpu-build-stats.txt").is_file()  # for CI's job summary


def test_the_cache_settings_make_a_second_build_folder_hit(tmp_path):
    """Real ccache and gcc, with the settings build-flagtree.sh exports in two build folders in turn."""
    ccache = require_executable("ccache", "ccache")
    gcc = require_executable("gcc", "gcc")
    cache = tmp_path / "cache"
    for number in (1, 2):
        standin = StandIn(tmp_path / f"build{number}")
        assert standin.run("build-flagtree.sh", CCACHE_DIR=str(cache)).returncode == 0
        names = ("CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_COMPILERCHECK", "CCACHE_NOHASHDIR", "PATH")
        env = {k: v for k, v in standin.calls("python")[0]["env"].items() if k in names}
        env["PATH"] = "/usr/bin:/bin"  # the real ccache, not the stand-in
        # A FlagTree-like compile: a source of the work folder, a header of the prefix, -g, a build folder.
        source = standin.src / "lib" / "a.c"
        _write(source, "#include <assert.h>\n#include <v.h>\nint f(int x) { assert(x); return x + V; }\n")
        _write(standin.prefix / "include" / "v.h", "#define V 3\n")
        build = standin.src / "python" / "build"
        build.mkdir(parents=True)
        # The compiler of each build environment is a new file (another path, another mtime), as conda's
        # compiler packages install their gcc under each build's own folder.
        compiler = standin.root / "build_env" / "bin" / "gcc"
        _write(compiler, f'#!/bin/sh\nexec "{gcc}" "$@"\n', 0o755)
        compile_args = [
            ccache,
            str(compiler),
            "-O2",
            "-g",
            f"-I{standin.prefix}/include",
            "-o",
            "a.o",
            "-c",
            str(source),
        ]
        subprocess.run(compile_args, cwd=build, env=env, check=True)
    stats = subprocess.run([ccache, "--print-stats"], env=env, capture_output=True, text=True, check=True)
    counters = dict(line.split("\t") for line in stats.stdout.splitlines())
    assert int(counters["direct_cache_hit"]) == 1, stats.stdout  # the second folder's compile
