"""A local channel of empty packages named like conda-forge's, so conda-build can finalise a render offline.

It stands in for conda-forge, which this machine cannot reach. conda-build computes a package's real hash
(``PKG_HASH``) only when every build and host requirement of the output solves; these packages carry the
names, versions and build strings the recipe asks for (python's ``*_cpython`` build strings included) and
nothing else. What it cannot show: whether conda-forge's real packages solve together, their run exports
(none here) and their files.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from pathlib import Path

from rattler.index import index_fs

SUBDIR = "linux-aarch64"

# (name, version, build, subdir): what meta.yaml's build and host sections ask for on linux-aarch64, and the
# noarch test requirement. The compiler and sysroot versions follow the variant files (GCC 13, glibc 2.17).
PACKAGES: tuple[tuple[str, str, str, str], ...] = (
    ("gcc_linux-aarch64", "13.3.0", "h0_0", SUBDIR),
    ("gxx_linux-aarch64", "13.3.0", "h0_0", SUBDIR),
    ("sysroot_linux-aarch64", "2.17", "h0_0", "noarch"),
    ("cmake", "3.31.6", "h0_0", SUBDIR),
    ("ninja", "1.12.1", "h0_0", SUBDIR),
    ("ccache", "4.11.3", "h0_0", SUBDIR),
    ("python", "3.10.16", "h0_0_cpython", SUBDIR),
    ("python", "3.11.11", "h0_0_cpython", SUBDIR),
    ("python", "3.12.9", "h0_0_cpython", SUBDIR),
    ("python", "3.13.2", "h0_0_cp313", SUBDIR),
    ("pip", "25.0.1", "pyh0_0", "noarch"),
    ("setuptools", "80.9.0", "pyh0_0", "noarch"),
    ("wheel", "0.45.1", "pyh0_0", "noarch"),
    ("pybind11", "2.13.6", "pyh0_0", "noarch"),
    ("zlib", "1.3.1", "h0_0", SUBDIR),
)


def write_package(target: Path, name: str, version: str, build: str, subdir: str, *, note: str = "") -> Path:
    """An empty package file at ``target`` (``.tar.bz2``); ``note`` goes into its metadata, to tell builds apart."""
    index = {"name": name, "version": version, "build": build, "build_number": 0, "depends": []}
    index |= {"subdir": subdir, "license": "stub", "timestamp": 0}
    if subdir == "noarch":
        index["noarch"] = "generic"
    members = {
        "info/index.json": json.dumps(index),
        "info/paths.json": json.dumps({"paths": [], "paths_version": 1}),
        "info/about.json": json.dumps({"description": note}),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:bz2") as archive:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return target


def make_stub_channel(folder: Path) -> Path:
    """Write and index the stub packages into ``folder``; return it."""
    for subdir in ("noarch", SUBDIR):
        (folder / subdir).mkdir(parents=True, exist_ok=True)
    for name, version, build, subdir in PACKAGES:
        write_package(folder / subdir / f"{name}-{version}-{build}.tar.bz2", name, version, build, subdir)
    asyncio.run(index_fs(folder, write_zst=False, write_shards=False, force=True))
    return folder
