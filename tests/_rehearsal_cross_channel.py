"""The cross rehearsal's stub channel: what a linux-64 -> linux-aarch64 build environment installs.

conda-forge's cross path (``--build-platform linux-64 --target-platform linux-aarch64``) solves the build
environment for linux-64 and the host environment for linux-aarch64. The host packages are the native
rehearsal's (``_rehearsal_channel.py``, used beside this channel); this one holds the linux-64 packages the
recipe's build requirements name, with conda-forge's names, versions and run_exports, each a stand-in:

- ``gcc_linux-aarch64``/``gxx_linux-aarch64`` (the cross compilers, built for linux-64): Debian's aarch64 cross
  gcc behind conda's ``aarch64-conda-linux-gnu-*`` names (tests/rehearsal/compiler-wrapper.sh), with the native
  activation (tests/rehearsal/activate-g*.sh) and, after it, what a cross one adds (tests/rehearsal/cross/):
  ``CC_FOR_BUILD``/``CXX_FOR_BUILD``, which they also carry here (``x86_64-conda-linux-gnu-*``: this machine's
  gcc; conda-forge's come from gcc_impl_linux-64 and gxx_impl_linux-64), ``CONDA_BUILD_CROSS_COMPILATION`` and
  the target system in ``CMAKE_ARGS``;
- ``sysroot_linux-aarch64`` 2.17 and 2.34 (noarch on conda-forge, linux-64 here): the compiler wrapper's
  ``--sysroot``, and for qemu-user (build-flagtree.sh's default ``QEMU_LD_PREFIX``) the target's loader and
  libc, copies of Debian's aarch64 cross glibc (2.36, not conda-forge's 2.17 or 2.34), so either runs the LLVM
  archive's programs, which need 2.34: that a 2.17 sysroot would not is the toolkit's glibc check's to show;
- ``cross-python_linux-aarch64``: tests/rehearsal/cross/activate-cross-python.sh, which says what it stands in
  for; it depends on the build python and exports the host python's pin, as conda-forge's does (not on crossenv,
  rsync, sed and gxx_impl_linux-aarch64, which the stand-in does not use);
- ``python`` and ``pybind11``: as in the native channel, for linux-64 (here the right machine);
- ``cmake`` (tests/rehearsal/cmake_standin.py, recording the programs it runs to the file ``record`` names),
  ``ninja``, ``ccache``: as in the native channel;
- ``zlib``/``libzlib``: this machine's (x86_64) ``libz.so.1`` stand-in, so a host requirement moved to the
  build environment fails the link as it would on conda-forge (``cannot find -lz``), not the solve.
"""

from __future__ import annotations

from pathlib import Path

from _rehearsal_channel import (
    GCC_RELEASES,
    PY,
    PY_FULL,
    PY_IMPLEMENTATION,
    SITE,
    STANDINS,
    TRIPLE,
    Stub,
    _pure_python,
    build_stub_channel,
    stub_files,
)

CROSS_STANDINS = STANDINS / "cross"
BUILD_PLATFORM = "linux-64"
BUILD_TRIPLE = "x86_64-conda-linux-gnu"
# Debian's aarch64 cross glibc (libc6-arm64-cross): what the stub sysroot links for qemu-user.
DEBIAN_AARCH64_LIBS = Path("/usr/aarch64-linux-gnu/lib")
QEMU_RUNTIME = ("ld-linux-aarch64.so.1", "libc.so.6")
# The sysroots (glibc versions) a variant can ask for: the default and the LLVM archive's floor.
SYSROOT_GLIBCS = ("2.17", "2.34")
# conda-forge's cross-python_<target> build string is "<build number>_<python implementation>".
CROSS_PYTHON_BUILD = f"0_{PY_IMPLEMENTATION}"
ACTIVATE = "etc/conda/activate.d"


def _cross_stubs(work: Path, cc: str, build_cc: str, gcc_major: int, record: Path) -> list[Stub]:
    shared = stub_files(
        work,
        cc,
        libz_cc=build_cc,
        readme="A stub package of the flagtree-feedstock cross rehearsal (tests/_rehearsal_cross_channel.py).\n",
    )
    wrapper, activate_gcc, stdcxxfs, libz = shared.wrapper, shared.activate_gcc, shared.stdcxxfs, shared.libz
    interpreter, pyvenv, readme, cmake_py = shared.interpreter, shared.pyvenv, shared.readme, shared.cmake_py
    build_wrapper = (CROSS_STANDINS / "build-compiler-wrapper.sh").read_text().replace("@REAL_CC@", build_cc)
    record_name = work / "record"
    record_name.write_text(f"{record}\n")
    ccache = work / "ccache"
    ccache.write_text(
        "#!/bin/sh\n# Stand-in ccache: runs the command it is given.\n"
        'case "${1:-}" in -*|"") exit 0 ;; esac\nexec "$@"\n'
    )
    ninja = work / "ninja"
    ninja.write_text("#!/bin/sh\n# Stand-in ninja: the stand-in cmake never calls it.\necho 1.12.1\n")
    gcc = GCC_RELEASES[gcc_major]
    runtime = f">={max(gcc_major, 12)}"
    python_pin = f"python {PY}.* *_{PY_IMPLEMENTATION}"
    sysroot = f"{TRIPLE}/sysroot"
    return [
        Stub(
            name="gcc_linux-aarch64",
            version=gcc,
            depends=["sysroot_linux-aarch64"],
            strong=[f"libgcc {runtime}"],
            files={
                f"bin/{TRIPLE}-cc": wrapper,
                f"bin/{TRIPLE}-gcc": wrapper,
                f"bin/{BUILD_TRIPLE}-cc": build_wrapper,
                f"bin/{BUILD_TRIPLE}-gcc": build_wrapper,
                f"{ACTIVATE}/activate-gcc_linux-aarch64.sh": activate_gcc,
                f"{ACTIVATE}/activate-gcc_linux-aarch64_cross.sh": CROSS_STANDINS / "activate-gcc.sh",
            },
            executables=(
                f"bin/{TRIPLE}-cc",
                f"bin/{TRIPLE}-gcc",
                f"bin/{BUILD_TRIPLE}-cc",
                f"bin/{BUILD_TRIPLE}-gcc",
            ),
        ),
        Stub(
            name="gxx_linux-aarch64",
            version=gcc,
            depends=[f"gcc_linux-aarch64 =={gcc}"],
            strong=[f"libstdcxx {runtime}", f"libgcc {runtime}"],
            files={
                f"bin/{TRIPLE}-c++": wrapper,
                f"bin/{TRIPLE}-g++": wrapper,
                f"bin/{BUILD_TRIPLE}-c++": build_wrapper,
                f"bin/{BUILD_TRIPLE}-g++": build_wrapper,
                f"{TRIPLE}/lib/libstdc++fs.a": stdcxxfs,
                f"{ACTIVATE}/activate-gxx_linux-aarch64.sh": STANDINS / "activate-gxx.sh",
                f"{ACTIVATE}/activate-gxx_linux-aarch64_cross.sh": CROSS_STANDINS / "activate-gxx.sh",
            },
            executables=(
                f"bin/{TRIPLE}-c++",
                f"bin/{TRIPLE}-g++",
                f"bin/{BUILD_TRIPLE}-c++",
                f"bin/{BUILD_TRIPLE}-g++",
            ),
        ),
        # 2.17, conda-forge's default, and 2.34, which a variant raises c_stdlib_version to for the LLVM
        # archive's programs (as the native stub channel has both): each with its glibc's strong run export.
        *(
            Stub(
                name="sysroot_linux-aarch64",
                version=glibc,
                strong=[f"__glibc >={glibc},<3.0.a0"],
                # Debian's cross loader and libc copied in (a link to them would leave the prefix).
                files={
                    f"{sysroot}/README": readme,
                    **{f"{sysroot}/lib/{name}": DEBIAN_AARCH64_LIBS / name for name in QEMU_RUNTIME},
                },
            )
            for glibc in SYSROOT_GLIBCS
        ),
        Stub(
            name="cmake",
            version="3.31.6",
            files={
                "bin/cmake": cmake_py,
                "share/cmake-standin/standin.c": STANDINS / "standin.c",
                "share/cmake-standin/record": record_name,
            },
            executables=("bin/cmake",),
        ),
        Stub(name="ninja", version="1.12.1", files={"bin/ninja": ninja}, executables=("bin/ninja",)),
        Stub(name="ccache", version="4.11.3", files={"bin/ccache": ccache}, executables=("bin/ccache",)),
        Stub(
            name="python",
            version=PY_FULL,
            build=f"0_{PY_IMPLEMENTATION}",
            # The interpreter copied, as `python -m venv --copies` does (pyvenv.cfg's `home` finds its
            # stdlib): a link to it would point outside the prefix, which the toolkit refuses in any package.
            files={"pyvenv.cfg": pyvenv, f"{SITE}/README": readme, "bin/python": interpreter},
            executables=("bin/python",),
            symlinks={"bin/python3": "python", f"bin/python{PY}": "python"},
        ),
        Stub(
            name="cross-python_linux-aarch64",
            version=PY,
            build=CROSS_PYTHON_BUILD,
            depends=[python_pin],
            strong=[python_pin],
            files={
                f"{ACTIVATE}/activate_z-cross-python_linux-aarch64.sh": CROSS_STANDINS
                / "activate-cross-python.sh"
            },
        ),
        Stub(
            name="libzlib",
            version="1.3.1",
            strong=["libzlib >=1.3.1,<2.0a0"],
            files={"lib/libz.so.1.3.1": libz},
            symlinks={"lib/libz.so.1": "libz.so.1.3.1"},
        ),
        Stub(
            name="zlib",
            version="1.3.1",
            depends=["libzlib ==1.3.1"],
            weak=["libzlib >=1.3.1,<2.0a0"],
            files={"include/zlib.h": STANDINS / "zlib.h"},
            symlinks={"lib/libz.so": "libz.so.1"},
        ),
        _pure_python("pybind11", work),
    ]


def build_cross_channel(
    channel: Path, work: Path, *, cc: str, build_cc: str, gcc_major: int, record: Path
) -> Path:
    """Build the linux-64 stubs into ``channel`` (indexed); the stand-in cmake records its runs in ``record``."""
    for name in QEMU_RUNTIME:
        assert (DEBIAN_AARCH64_LIBS / name).exists(), f"libc6-arm64-cross lacks {DEBIAN_AARCH64_LIBS / name}"
    stubs = _cross_stubs(work, cc, build_cc, gcc_major, record)
    return build_stub_channel(stubs, channel, work, platform=BUILD_PLATFORM, name="rehearsal-cross-stubs")
