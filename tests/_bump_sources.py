"""Stand-in upstream repositories for ``flagtree-feedstock bump``: FlagTree and flagtree-cpu as small git
repositories the tests build, with a release tag, a pinned commit and one branch per case of issue 19.

Every file is synthesized, none is upstream's: FlagTree's patched files are the patches' own pre-images
(``_rehearsal_sources.preimages``: each hunk's context and removed lines at their line numbers, blank lines
between), so the repository's real patch series applies exactly; its CMake files name the LLVM libraries
``recipe/llvm_distribution.py`` lists, in the folders and calls the scan reads; the link script, the
``tle_arm64`` plugin, ``core.py``'s ``builtin`` and ``ir.cc`` are a few lines each in upstream's shapes. What
they cannot show: anything the checks do not read (the stand-ins compile nothing), and upstream's real
layout beyond those files (the ``FLAGTREE_SRC`` tests run the bump on the real history).

FlagTree's pin is tagged :data:`TAG`; its parent, an older release without the CPU backend, :data:`OLDER_TAG`.
Branches (each one commit on the pin):

- ``only-flagtree``: a file no check reads changes;
- ``llvm``: ``cmake/llvm-hash.txt`` moves to :data:`NEW_LLVM`;
- ``refresh``: two lines at the top of ``python/triton/runtime/build.py`` move patches 0003, 0004 and 0011;
- ``fails``: a line of patch 0006's hunk in ``CMakeLists.txt`` changes;
- ``api``: ``create_cpu_rms_norm`` takes one more argument;
- ``links``: the link script gains a 13th link.

flagtree-cpu: ``fits`` (the tle_arm64 stand-in's API; ``runtime.py`` is patches/flagtree-cpu's pre-image),
and ``mismatch`` (``rms_norm`` with one more argument in tle_ops.py and TritonCPUOps.td, and the ``_semantic`` keyword), each a repository of its own whose HEAD is
the commit to pin, with a sleef gitlink.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from _recipe_support import llvm_distribution
from _rehearsal_sources import GIT_ENV, STANDINS, preimages, render_preimage
from flagtree_feedstock.bump.cmake_scan import FLAGTREE_CPU_RECORDS

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "patches" / "flagtree").glob("*.patch"))
CPU_PATCHES = sorted((ROOT / "patches" / "flagtree-cpu").glob("*.patch"))
TAG = "0.6.0+triton3.3"
OLDER_TAG = "0.5.0+aipu3.3"
PINNED_CPU = "19cede7e753ca6eed75c15f8ae782bf41eb00c3d"
NEW_LLVM = hashlib.sha1(b"stand-in llvm commit").hexdigest()
_ENV = {
    **os.environ,
    **GIT_ENV,
    "GIT_AUTHOR_DATE": "2026-06-04T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-06-04T00:00:00Z",
}
_NOTICE = "stand-in for the bump tests (tests/_bump_sources.py), not upstream's file"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def _commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _cmake_links(libraries: tuple[str, ...] | frozenset[str], target: str) -> str:
    return f"# {_NOTICE}\nadd_triton_library({target} {target}.cpp\n  LINK_LIBS PUBLIC {' '.join(sorted(libraries))})\n"


def _tle_arm64(extra_argument: bool = False) -> str:
    """The plugin's two builder methods, in upstream's pybind11 shape."""
    extra = ", Value &stride" if extra_argument else ""
    return f"""// {_NOTICE}
static void init_triton_tle_arm64_ir(py::module m) {{
  builder_cls
      .def("create_cpu_rms_norm",
           [](TritonOpBuilder &self, Value &x, Value &weight, Value &out,
              Value &D{extra}, float eps) {{
             self.create<cpu::RmsNormOp>(x, weight, out, D,
                                         self.getBuilder().getF32FloatAttr(eps));
           }})
      .def("create_cpu_neon_sdot",
           [](TritonOpBuilder &self, Value &acc, Value &a, Value &b) -> Value {{
             return self.create<cpu::NeonSdotTensorOp>(acc.getType(), acc, a, b);
           }});
}}
"""


def _link_script() -> str:
    """A link script with upstream's SYMLINKS shape, holding the rehearsal stand-in's 12 links."""
    entries = re.findall(
        r'^\s*("[^"]+\|[^"]+")$', (STANDINS / "link_flagtree_cpu.sh").read_text(), re.MULTILINE
    )
    assert len(entries) == 12, "tests/rehearsal/link_flagtree_cpu.sh holds the 12 links"
    body = "\n".join(f"    {entry}" for entry in entries)
    return f"#!/bin/bash\n# {_NOTICE}\nset -euo pipefail\nSYMLINKS=(\n{body}\n)\n"


def _flagtree_tree(root: Path, llvm_commit: str) -> None:
    pinned = preimages(PATCHES)
    links = llvm_distribution().FLAGTREE_LINKS
    root_links = [name for name in links["CMakeLists.txt"] if not name.startswith("LLVMAArch64")]
    cmake_tail = [
        'elseif(FLAGTREE_BACKEND STREQUAL "cpu")',
        f"  set(TRITON_LIBRARIES {' '.join(root_links)})",
        'if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64")',
        "  list(APPEND TRITON_LIBRARIES LLVMAArch64CodeGen LLVMAArch64AsmParser)",
        "endif()",
        "target_link_libraries(triton PRIVATE z)",
    ]
    _write(
        root, "CMakeLists.txt", render_preimage(pinned.pop("CMakeLists.txt"), [f"# {_NOTICE}"], cmake_tail)
    )
    for path, lines in pinned.items():
        _write(root, path, render_preimage(lines))
    _write(root, "cmake/llvm-hash.txt", f"{llvm_commit}\n")
    _write(root, "lib/CMakeLists.txt", _cmake_links(links["lib"], "TritonStandin"))
    _write(root, "third_party/tle/CMakeLists.txt", _cmake_links(links["third_party/tle"], "TleStandin"))
    _write(
        root,
        "third_party/cpu/python/CMakeLists.txt",
        _cmake_links(links["third_party/cpu/python"], "HostStandin"),
    )
    _write(root, "third_party/cpu/language/cpu/__init__.py", f"# {_NOTICE}\n")
    _write(root, "python/scripts/link_flagtree_cpu.sh", _link_script())
    _write(root, "third_party/tle_arm64/python/triton_tle_arm64.cc", _tle_arm64())
    _write(
        root,
        "python/triton/language/core.py",
        f"# {_NOTICE}\ndef builtin(fn):\n    def wrapper(*args, **kwargs):\n"
        '        if "_builder" not in kwargs or kwargs["_builder"] is None:\n'
        '            raise ValueError("outside of JIT functions")\n        return fn(*args, **kwargs)\n'
        "    return wrapper\n",
    )
    _write(
        root,
        "python/src/ir.cc",
        f'// {_NOTICE}\n      .def("get_int64", [](TritonOpBuilder &self, int64_t v) {{}})\n',
    )
    _write(root, "README.md", f"{_NOTICE}\n")


def _tle_ops(keyword: str = "_builder", rms_arguments: int = 5) -> str:
    extra = ", 0" * (rms_arguments - 5)
    builder = "_builder" if keyword == "_builder" else "_semantic.builder"
    return f"""# {_NOTICE}
from triton.language.core import builtin


@builtin
def rms_norm(x, weight, out, D, eps, {keyword}=None):
    d = {builder}.get_int64(D)
    {builder}.create_cpu_rms_norm(x.handle, weight.handle, out.handle, d, float(eps){extra})


@builtin
def sdot(acc, a, b, {keyword}=None):
    return {builder}.create_cpu_neon_sdot(acc.handle, a.handle, b.handle)
"""


def _ops_td(rms_arguments: int) -> str:
    extra = "".join(f", I64:$extra{n}" for n in range(rms_arguments - 5))
    return f"""// {_NOTICE}
def TTC_RmsNormOp : TTC_Op<"rms_norm", []> {{
    let arguments = (ins TT_Ptr:$x_ptr, TT_Ptr:$weight_ptr, TT_Ptr:$out_ptr, I64:$D{extra}, F32Attr:$eps);
    let results = (outs);
}}

def TTC_NeonSdotTensorOp : TTC_Op<"neon_sdot_tensor", [Pure]> {{
    let arguments = (ins TT_Type:$acc, TT_Type:$a, TT_Type:$b);
    let results = (outs TT_Type:$result);
}}
"""


def _flagtree_cpu_repo(repo: Path, sleef: str, *, keyword: str, rms_arguments: int) -> str:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    _write(repo, "third_party/cpu/language/cpu/neon.py", f"# {_NOTICE}\n")
    # The files patches/flagtree-cpu touches (runtime.py) are the series' pre-images, so it applies exactly.
    for path, lines in preimages(CPU_PATCHES).items():
        _write(repo, path, render_preimage(lines))
    _write(repo, "third_party/cpu/language/cpu/tle_ops.py", _tle_ops(keyword, rms_arguments))
    _write(repo, "include/triton/Dialect/TritonCPU/IR/TritonCPUOps.td", _ops_td(rms_arguments))
    for path, libraries in FLAGTREE_CPU_RECORDS[PINNED_CPU].items():
        _write(repo, path, _cmake_links(libraries, "Cpu" + hashlib.sha1(path.encode()).hexdigest()[:6]))
    for path in (
        "third_party/cpu/include/README",
        "third_party/cpu/runtime/README",
        "third_party/cpu/triton_cpu.cc",
    ):
        _write(repo, path, f"{_NOTICE}\n")
    git(repo, "add", "-A")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sleef},third_party/sleef")
    git(repo, "commit", "-q", "-m", "flagtree-cpu stand-in")
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True, kw_only=True)
class Standins:
    """The stand-in repositories: FlagTree (``flagtree``, its ``pin`` tagged :data:`TAG`, one branch per case)
    and two flagtree-cpu clones, pinning ``sleef``."""

    flagtree: Path
    pin: str
    llvm_commit: str
    cpu_fits: Path
    cpu_mismatch: Path
    sleef: str


def make_standins(root: Path, llvm_commit: str) -> Standins:
    flagtree = root / "FlagTree"
    flagtree.mkdir(parents=True)
    git(flagtree, "init", "-q", "-b", "triton_v3.3.x")
    _write(flagtree, "README.md", f"{_NOTICE}: an older release\n")
    _commit(flagtree, "an older release, before the CPU backend")
    git(flagtree, "tag", OLDER_TAG)
    _flagtree_tree(flagtree, llvm_commit)
    pin = _commit(flagtree, "the pinned commit")
    git(flagtree, "tag", TAG)
    cases = {
        "only-flagtree": lambda: _write(flagtree, "README.md", f"{_NOTICE}, and one more line\n"),
        "llvm": lambda: _write(flagtree, "cmake/llvm-hash.txt", f"{NEW_LLVM}\n"),
        "refresh": lambda: _write(
            flagtree,
            "python/triton/runtime/build.py",
            "# two new lines\n# before every hunk\n"
            + (flagtree / "python/triton/runtime/build.py").read_text(),
        ),
        "fails": lambda: _write(
            flagtree,
            "CMakeLists.txt",
            (flagtree / "CMakeLists.txt")
            .read_text()
            .replace('-Werror -Wno-covered-switch-default")', '-Werror -Wall")', 1),
        ),
        "api": lambda: _write(
            flagtree, "third_party/tle_arm64/python/triton_tle_arm64.cc", _tle_arm64(extra_argument=True)
        ),
        "links": lambda: _write(
            flagtree,
            "python/scripts/link_flagtree_cpu.sh",
            _link_script().replace(
                "SYMLINKS=(\n", 'SYMLINKS=(\n    "third_party/cpu/bin|../triton-cpu/third_party/cpu/bin"\n'
            ),
        ),
    }
    for branch, change in cases.items():
        git(flagtree, "checkout", "-q", "-b", branch, pin)
        change()
        _commit(flagtree, f"stand-in change: {branch}")
    git(flagtree, "checkout", "-q", "triton_v3.3.x")
    sleef_repo = root / "sleef"
    sleef_repo.mkdir()
    git(sleef_repo, "init", "-q")
    _write(sleef_repo, "LICENSE.txt", f"{_NOTICE}\n")
    sleef = _commit(sleef_repo, "sleef stand-in")
    _flagtree_cpu_repo(root / "flagtree-cpu-fits", sleef, keyword="_builder", rms_arguments=5)
    _flagtree_cpu_repo(root / "flagtree-cpu-mismatch", sleef, keyword="_semantic", rms_arguments=6)
    return Standins(
        flagtree=flagtree,
        pin=pin,
        llvm_commit=llvm_commit,
        cpu_fits=root / "flagtree-cpu-fits",
        cpu_mismatch=root / "flagtree-cpu-mismatch",
        sleef=sleef,
    )


def copy_feedstock(dest: Path, flagtree_commit: str, flagtree_cpu_commit: str | None = None) -> Path:
    """This repository's recipe folder and patches under ``dest``, pinned to ``flagtree_commit`` (and
    ``flagtree_cpu_commit``), for a bump that may write."""
    shutil.copytree(ROOT / "recipe", dest / "recipe")
    shutil.copytree(ROOT / "patches", dest / "patches")
    variant = dest / "recipe" / "conda_build_config.yaml"
    text = variant.read_text().replace(_pinned(variant, "flagtree_commit"), flagtree_commit)
    if flagtree_cpu_commit is not None:
        text = text.replace(_pinned(variant, "flagtree_cpu_commit"), flagtree_cpu_commit)
    variant.write_text(text)
    return dest


def _pinned(variant: Path, key: str) -> str:
    return str(yaml.safe_load(variant.read_text())[key][0])


def llvm_archive(path: Path, commit: str) -> Path:
    """A tar.gz shaped like GitHub's archive of llvm-project at ``commit`` (one README inside)."""
    readme = path.parent / "README.txt"
    readme.write_text(f"{_NOTICE}\n")
    with tarfile.open(path, "w:gz") as tar:
        tar.add(readme, arcname=f"llvm-project-{commit}/README.txt")
    return path
