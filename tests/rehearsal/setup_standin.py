"""Stand-in for FlagTree's python/setup.py in the rehearsal's synthesized FlagTree tree (no FLAGTREE_SRC).

It drives CMake the way upstream's CMakeBuild does for the cpu backend, with the variables the build script
sets: LLVM from LLVM_SYSPATH (upstream downloads an LLVM without it, so its absence is an error here),
pybind11's CMake folder, CMAKE_LIBRARY_OUTPUT_DIRECTORY = the extension's folder (triton/_C), then
TRITON_APPEND_CMAKE_ARGS last; it builds and installs with the --prefix patch 0002 adds, and packages
python/triton with the libraries as the wheel FLAGTREE_WHEEL_VERSION names. It cannot show what upstream's
setup.py does beyond that (its backend discovery, symlinks, downloads, package list): run the rehearsal
with FLAGTREE_SRC for those. Upstream's own lines that the patches touch follow, kept in a string.
"""

import os
import shlex
import subprocess
from pathlib import Path

import pybind11
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        syspath = os.environ.get("LLVM_SYSPATH")
        if not syspath:
            raise SystemExit("setup.py stand-in: LLVM_SYSPATH is not set (upstream would download an LLVM)")
        extdir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build = HERE / "build" / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        args = [
            "-G",
            "Ninja",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={extdir}",
            "-DTRITON_BUILD_PYTHON_MODULE=ON",
            f"-DLLVM_INCLUDE_DIRS={syspath}/include",
            f"-DLLVM_LIBRARY_DIR={syspath}/lib",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            "-DTRITON_BUILD_PROTON=OFF",
            *shlex.split(os.environ.get("TRITON_APPEND_CMAKE_ARGS", "")),
        ]
        subprocess.check_call(["cmake", str(HERE.parent), *args], cwd=build)
        subprocess.check_call(["cmake", "--build", ".", "-j" + os.environ.get("MAX_JOBS", "1")], cwd=build)
        subprocess.check_call(["cmake", "--install", ".", "--prefix", str(build / "install")], cwd=build)


def main() -> None:
    setup(
        name="triton",
        version=os.environ.get("FLAGTREE_WHEEL_VERSION", "0.5.0"),
        install_requires=["setuptools>=40.8.0"],
        packages=find_packages(include=["triton", "triton.*"]),
        ext_modules=[Extension("triton._C.libtriton", sources=[])],
        cmdclass={"build_ext": CMakeBuild},
        zip_safe=False,
    )
