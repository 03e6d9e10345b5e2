"""The rehearsal's stub channel: a local stand-in for conda-forge, built by the tests, never downloaded.

Every package the real recipe's build, host, run and test environments solve for on linux-aarch64 is here,
named, versioned (conda-forge's global pins, ../shared/data/conda-forge-pinning.yaml) and with the
run_exports of conda-forge's own package (the compilers' strong libgcc/libstdcxx, python's weak python_abi,
zlib's libzlib, the sysroot's __glibc), so the engine's solves and run-export handling are the real ones.
What the packages hold is a stand-in, each saying which real one it replaces and what it cannot show:

- the compilers wrap Debian's aarch64 cross gcc (tests/rehearsal/compiler-wrapper.sh) and activate the way
  conda-forge's do (tests/rehearsal/activate-g*.sh); ``cmake`` is tests/rehearsal/cmake_standin.py;
  ``ninja`` only answers ``--version`` (the stand-in cmake builds nothing through it);
- ``ccache`` runs the command it is given (the build uses it only where a cache folder is set);
- ``python`` is a venv-like layout around this machine's interpreter (bin/python a copy of it, as ``venv
  --copies`` makes, and pyvenv.cfg: a link would point outside the prefix, which no package may), so
  pure-Python steps (``pip install .``, imports, ``pip check``) run for real; it is an x86_64 interpreter
  inside a linux-aarch64 package, so aarch64 extension modules cannot be imported by it;
- pip, setuptools, wheel, pybind11, rich and rich's dependencies are the real distributions of the test
  venv, repackaged (for python 3.X of this interpreter only);
- libzlib's ``libz.so.1`` is a real aarch64 library with zlib's soname but one function
  (tests/rehearsal/libz.c); the sysroot is an empty folder that the compiler wrapper uses as --sysroot, its
  libc is Debian's cross glibc;
- ``gcc`` and ``gxx`` (run requirements of flagtree-cpu) hold ``bin/gcc``/``bin/g++`` as the compiler wrapper,
  for the installed activation's ``CC``; the other run-time-only packages (pytorch, binutils, libgcc,
  libstdcxx, libgomp) are empty: they exist for the solver, and nothing here runs what they would hold.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import sysconfig
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import rattler_build
import yaml

from _toy import make_empty_channel
from flagtree_feedstock.platforms import host_platform

STANDINS = Path(__file__).resolve().parent / "rehearsal"
TARGET = "linux-aarch64"
TRIPLE = "aarch64-conda-linux-gnu"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PY_FULL = f"{PY}.{sys.version_info.micro}"
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
SITE = f"lib/python{PY}/site-packages"
# conda-forge's python build strings end in the implementation: ``_cpython`` up to 3.12, ``_cp313`` from 3.13 on
# (beside the free-threaded ``_cp313t``), and the python entries of ../conda_build_config.yaml ask for exactly
# that ("3.12.* *_cpython", "3.13.* *_cp313"); a stub with the other ending is not found by the solve.
PY_IMPLEMENTATION = "cpython" if sys.version_info < (3, 13) else PY_TAG

# conda-forge's versions: the compilers' newest release of each major (ctng-compiler-activation-feedstock's
# gcc_version), the 2.17 sysroot, zlib 1.3.1 (the pin `zlib: 1`), pytorch 2.12 (the pin).
GCC_RELEASES = {13: "13.4.0", 14: "14.4.0", 15: "15.3.0", 16: "16.1.0"}
PURE_PYTHON = ("pip", "setuptools", "wheel", "pybind11", "rich", "markdown-it-py", "mdurl", "pygments")


@dataclass
class Stub:
    """One stub package: its files come from ``populate`` into a folder the engine copies into $PREFIX."""

    name: str
    version: str
    build: str = "0"
    depends: list[str] = field(default_factory=list)
    strong: list[str] = field(default_factory=list)
    weak: list[str] = field(default_factory=list)
    files: dict[str, str | Path] = field(default_factory=dict)
    executables: tuple[str, ...] = ()
    symlinks: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        """Where its files are staged: a name can have several versions (the sysroots)."""
        return f"{self.name}-{self.version}"


def _compile(output: Path, *args: str, cc: str) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, *args, "-o", str(output)], check=True, capture_output=True)
    return output


@dataclass(frozen=True, kw_only=True)
class StubFiles:
    """What the native and the cross stub channels both package, made once per channel in ``work``."""

    wrapper: str  # compiler-wrapper.sh around the aarch64 gcc
    activate_gcc: str  # activate-gcc.sh with the aarch64 binutils filled in
    stdcxxfs: Path  # an aarch64 libstdc++fs.a
    libz: Path  # libz.so.1.3.1 built with ``libz_cc``
    interpreter: Path  # this machine's python, the stub python's
    pyvenv: Path
    readme: Path
    cmake_py: Path  # the stand-in cmake, run by ``interpreter``


def stub_files(work: Path, cc: str, *, libz_cc: str, readme: str) -> StubFiles:
    """The shared stub files: ``cc`` is Debian's aarch64 gcc, ``libz_cc`` the compiler of zlib's platform."""
    binutils = {
        tool: shutil.which(f"aarch64-linux-gnu-{tool}")
        for tool in ("ar", "ranlib", "ld", "nm", "strip", "objdump", "as")
    }
    missing_tools = sorted(tool for tool, path in binutils.items() if path is None)
    assert not missing_tools, f"binutils-aarch64-linux-gnu lacks {missing_tools}"
    activate_gcc = (STANDINS / "activate-gcc.sh").read_text()
    for tool, path in binutils.items():
        activate_gcc = activate_gcc.replace(f"@REAL_{tool.upper()}@", str(path))
    objects = work / "objects"
    standin_o = _compile(objects / "standin.o", "-fPIC", "-c", str(STANDINS / "standin.c"), cc=cc)
    stdcxxfs = objects / "libstdc++fs.a"
    subprocess.run([str(binutils["ar"]), "rcs", str(stdcxxfs), str(standin_o)], check=True)
    libz = _compile(
        objects / "libz.so.1.3.1",
        "-shared",
        "-fPIC",
        "-Wl,-soname,libz.so.1",
        str(STANDINS / "libz.c"),
        cc=libz_cc,
    )
    interpreter = Path(sys._base_executable).resolve()
    pyvenv = work / "pyvenv.cfg"
    pyvenv.write_text(
        f"home = {interpreter.parent}\ninclude-system-site-packages = false\nversion = {PY_FULL}\n"
    )
    readme_file = work / "README"
    readme_file.write_text(readme)
    cmake_py = work / "cmake"
    cmake_py.write_text(f"#!{interpreter}\n" + (STANDINS / "cmake_standin.py").read_text())
    return StubFiles(
        wrapper=(STANDINS / "compiler-wrapper.sh").read_text().replace("@REAL_CC@", cc),
        activate_gcc=activate_gcc,
        stdcxxfs=stdcxxfs,
        libz=libz,
        interpreter=interpreter,
        pyvenv=pyvenv,
        readme=readme_file,
        cmake_py=cmake_py,
    )


def _stubs(work: Path, cc: str, gcc_major: int) -> list[Stub]:
    shared = stub_files(
        work,
        cc,
        libz_cc=cc,
        readme="A stub package of the flagtree-feedstock rehearsal tests (tests/_rehearsal_channel.py).\n",
    )
    wrapper, activate_gcc, stdcxxfs, libz = shared.wrapper, shared.activate_gcc, shared.stdcxxfs, shared.libz
    interpreter, pyvenv, readme, cmake_py = shared.interpreter, shared.pyvenv, shared.readme, shared.cmake_py
    ccache = work / "ccache"
    ccache.write_text(
        "#!/bin/sh\n# Stand-in ccache of the rehearsal's stub channel: runs the command it is given, caches nothing;"
        "\n# its options (--zero-stats, --show-stats) do nothing.\n"
        'case "${1:-}" in -*|"") exit 0 ;; esac\nexec "$@"\n'
    )
    ninja = work / "ninja"
    ninja.write_text(
        "#!/bin/sh\n# Stand-in ninja of the rehearsal's stub channel: the stand-in cmake never calls it.\necho 1.12.1\n"
    )
    gcc = GCC_RELEASES[gcc_major]
    # ctng-compiler-activation's min_runtime_version: the compiler's major, at least 12.
    runtime = f">={max(gcc_major, 12)}"
    compiler_lib = f"{TRIPLE}/lib"
    sysroot = f"{TRIPLE}/sysroot/README"
    glibc = "__glibc >=2.17,<3.0.a0"
    python_abi = f"python_abi {PY}.* *_{PY_TAG}"
    stubs = [
        Stub(
            name="gcc_linux-aarch64",
            version=gcc,
            depends=["sysroot_linux-aarch64"],
            strong=[f"libgcc {runtime}"],
            files={
                f"bin/{TRIPLE}-cc": wrapper,
                f"bin/{TRIPLE}-gcc": wrapper,
                "etc/conda/activate.d/activate-gcc_linux-aarch64.sh": activate_gcc,
            },
            executables=(f"bin/{TRIPLE}-cc", f"bin/{TRIPLE}-gcc"),
        ),
        Stub(
            name="gxx_linux-aarch64",
            version=gcc,
            depends=[f"gcc_linux-aarch64 =={gcc}"],
            strong=[f"libstdcxx {runtime}", f"libgcc {runtime}"],
            files={
                f"bin/{TRIPLE}-c++": wrapper,
                f"bin/{TRIPLE}-g++": wrapper,
                f"{compiler_lib}/libstdc++fs.a": stdcxxfs,
                "etc/conda/activate.d/activate-gxx_linux-aarch64.sh": STANDINS / "activate-gxx.sh",
            },
            executables=(f"bin/{TRIPLE}-c++", f"bin/{TRIPLE}-g++"),
        ),
        Stub(name="sysroot_linux-aarch64", version="2.17", strong=[glibc], files={sysroot: readme}),
        # The newer sysroot a variant raises c_stdlib_version to (the LLVM archive's glibc floor): conda-forge's
        # 2.34 (linux-sysroot-feedstock, branch v2.34) exports `__glibc >=2.34,<3.0.a0` (strong).
        Stub(
            name="sysroot_linux-aarch64",
            version="2.34",
            strong=["__glibc >=2.34,<3.0.a0"],
            files={sysroot: readme},
        ),
        Stub(
            name="cmake",
            version="3.31.6",
            files={"bin/cmake": cmake_py, "share/cmake-standin/standin.c": STANDINS / "standin.c"},
            executables=("bin/cmake",),
        ),
        Stub(name="ninja", version="1.12.1", files={"bin/ninja": ninja}, executables=("bin/ninja",)),
        Stub(name="ccache", version="4.11.3", files={"bin/ccache": ccache}, executables=("bin/ccache",)),
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
        Stub(
            name="python",
            version=PY_FULL,
            build=f"0_{PY_IMPLEMENTATION}",
            weak=[python_abi],
            # The interpreter copied, as `python -m venv --copies` does (pyvenv.cfg's `home` finds its
            # stdlib): a link to it would point outside the prefix, which the toolkit refuses in any package.
            files={"pyvenv.cfg": pyvenv, f"{SITE}/README": readme, "bin/python": interpreter},
            executables=("bin/python",),
            symlinks={"bin/python3": "python", f"bin/python{PY}": "python"},
        ),
        Stub(name="python_abi", version=PY, build=f"8_{PY_TAG}"),
        Stub(name="pytorch", version="2.12.0", build=f"cpu_generic_py{PY_TAG[2:]}_0", depends=[python_abi]),
        *(
            Stub(name=name, version=gcc, files={"share/README": readme})
            for name in ("libgcc", "libstdcxx", "libgomp")
        ),
        # conda-forge's gcc and gxx: the compilers themselves under their plain names (bin/gcc of gcc_impl),
        # without the build-time activation; gxx depends on gcc.
        Stub(name="gcc", version=gcc, files={"bin/gcc": wrapper}, executables=("bin/gcc",)),
        Stub(
            name="gxx",
            version=gcc,
            depends=[f"gcc =={gcc}"],
            files={"bin/g++": wrapper},
            executables=("bin/g++",),
        ),
        Stub(name="binutils", version="2.45"),
    ]
    stubs += [_pure_python(name, work) for name in PURE_PYTHON]
    return stubs


def _pure_python(name: str, work: Path) -> Stub:
    """The test venv's installed distribution ``name``, as a package for this python."""
    dist = importlib.metadata.distribution(name)
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    files: dict[str, str | Path] = {}
    for entry in dist.files or ():
        located = Path(str(dist.locate_file(entry))).resolve()
        if located.is_file() and located.is_relative_to(site) and "__pycache__" not in located.parts:
            files[f"{SITE}/{located.relative_to(site)}"] = located
    depends = [f"python {PY}.*"]
    depends += {"rich": ["markdown-it-py", "pygments"], "markdown-it-py": ["mdurl"]}.get(name, [])
    del work
    return Stub(name=name, version=dist.version, depends=depends, files=files)


def _stage(stub: Stub, folder: Path) -> None:
    folder.mkdir(parents=True)
    for relative, content in stub.files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(content)
    for relative in stub.executables:
        (folder / relative).chmod(0o755)
    for relative, points_to in stub.symlinks.items():
        link = folder / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(points_to)


def _recipe(stubs: list[Stub], staged: Path) -> dict[str, object]:
    outputs = []
    for stub in stubs:
        requirements: dict[str, object] = {}
        if stub.depends:
            requirements["run"] = stub.depends
        exports = {kind: specs for kind, specs in (("strong", stub.strong), ("weak", stub.weak)) if specs}
        if exports:
            requirements["run_exports"] = exports
        outputs.append(
            {
                "package": {"name": stub.name, "version": stub.version},
                "build": {
                    "string": stub.build,
                    "script": [f'cp -a "{staged / stub.folder}/." "$PREFIX/"'],
                    # The engine would otherwise rewrite the stand-ins' paths and rpaths.
                    "prefix_detection": {"ignore": True},
                    "dynamic_linking": {"binary_relocation": False},
                },
                "requirements": requirements,
                "about": {
                    "summary": f"Stub of conda-forge's {stub.name} for the flagtree-feedstock rehearsal tests"
                },
            }
        )
    return {"schema_version": 1, "recipe": {"name": "rehearsal-stubs", "version": "1"}, "outputs": outputs}


def stub_names(channel: Path) -> set[str]:
    """The package names an indexed stub channel holds."""
    names: set[str] = set()
    for repodata in channel.glob("*/repodata.json"):
        data = json.loads(repodata.read_text())
        for key in ("packages", "packages.conda"):
            names |= {record["name"] for record in data.get(key, {}).values()}
    return names


def build_rehearsal_channel(channel: Path, work: Path, cc: str, gcc_major: int) -> Path:
    """Build every stub package into ``channel`` (an indexed channel folder), compilers of ``gcc_major``."""
    stubs = _stubs(work, cc, gcc_major)
    build_stub_channel(stubs, channel, work, platform=TARGET)
    # py-rattler-build's test_package tests a noarch package (flagtree-doctor) for the machine that runs it:
    # its python and pip for this machine too (the same interpreter: an x86_64 one, whatever the subdir).
    here = host_platform()
    if here != TARGET:
        python = [stub for stub in stubs if stub.name in {"python", "python_abi", *PURE_PYTHON}]
        extra = build_stub_channel(
            python, work / "here" / "channel", work / "here", platform=here, name="rehearsal-stubs-here"
        )
        (channel / here).mkdir(exist_ok=True)
        for package in (extra / here).glob("*.conda"):
            shutil.move(package, channel / here / package.name)
        from flagtree_feedstock.channel.index import index_channel  # noqa: PLC0415

        index_channel(channel)
    return channel


def build_stub_channel(
    stubs: list[Stub], channel: Path, work: Path, *, platform: str, name: str | None = None
) -> Path:
    """Build ``stubs`` for ``platform`` into ``channel`` (indexed), each from its own staged folder."""
    staged = work / "staged"
    for stub in stubs:
        _stage(stub, staged / stub.folder)
    recipe_dir = work / "recipe"
    recipe_dir.mkdir()
    recipe = _recipe(stubs, staged)
    if name is not None:
        recipe["recipe"] = {"name": name, "version": "1"}
    (recipe_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    make_empty_channel(channel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rattler_build.build_recipes(
            [recipe_dir / "recipe.yaml"],
            target_platform=platform,
            build_platform=platform,
            host_platform=platform,
            channel=[channel.as_uri()],
            output_dir=work / "out",
            no_include_recipe=True,
            package_format="conda:1",
            test="skip",
        )
    for package in (work / "out").glob("*/*.conda"):
        (channel / package.parent.name).mkdir(exist_ok=True)
        shutil.move(package, channel / package.parent.name / package.name)
    from flagtree_feedstock.channel.index import index_channel  # noqa: PLC0415

    index_channel(channel)
    return channel
