"""The rehearsal's stand-in upstream sources: local git repositories and an LLVM archive under one folder.

The folder is the ``github_url`` of the rehearsal's variant file (``file://...``), laid out like GitHub
(``flagos-ai/FlagTree.git``, ``kevinzs2048/flagtree-cpu.git``, ``shibatch/sleef.git``,
``llvm/llvm-project/archive/<llvm_commit>.tar.gz``), so the recipe's own source entries fetch them with the
engine's own git and url sources; the commits and the archive's sha256 go into the variant file.

FlagTree is, with ``FLAGTREE_SRC`` set, that checkout committed as it is (the real patches meet the real
files, upstream's real ``link_flagtree_cpu.sh`` and ``setup.py`` run); without it, a tree synthesized from
the patches' own pre-images (every context and ``-`` line of every hunk at its line, the other lines
blank), so the real patch series applies through the engine, plus what the build needs around it:
tests/rehearsal/link_flagtree_cpu.sh and tests/rehearsal/setup_standin.py. flagtree-cpu, sleef and LLVM are
stand-ins: the files the build script, the link script and ``license_file`` name, nothing else; those the
flagtree-cpu patches touch are synthesized from their pre-images, as FlagTree's are, or with
``FLAGTREE_CPU_SRC`` set are that checkout's own (and so are the link script's file targets it holds).
No upstream file is stored in this repository.
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

ROOT = Path(__file__).resolve().parents[1]
STANDINS = Path(__file__).resolve().parent / "rehearsal"
FLAGTREE_PATCHES = ROOT / "patches" / "flagtree"
FLAGTREE_CPU_PATCHES = ROOT / "patches" / "flagtree-cpu"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "rehearsal",
    "GIT_AUTHOR_EMAIL": "rehearsal@localhost",
    "GIT_COMMITTER_NAME": "rehearsal",
    "GIT_COMMITTER_EMAIL": "rehearsal@localhost",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
# The paths FlagTree's python/scripts/link_flagtree_cpu.sh links into flagtree-cpu (its SYMLINKS list), as
# files (.cc, .py, CMakeLists.txt) or folders: what the flagtree-cpu stand-in must hold.
FLAGTREE_CPU_LINK_TARGETS = (
    "include/triton/Dialect/TritonCPU/",
    "lib/Dialect/TritonCPU/",
    "third_party/cpu/CMakeLists.txt",
    "third_party/cpu/include/",
    "third_party/cpu/lib/",
    "third_party/cpu/runtime/",
    "third_party/cpu/triton_cpu.cc",
    "third_party/cpu/language/cpu/neon.py",
    "third_party/cpu/language/cpu/runtime.py",
    "third_party/cpu/language/cpu/tle_ops.py",
)
# The plain libraries FlagTree's CMakeLists.txt links on Linux at flagtree_commit (54d33a53: link_libraries
# at line 261, target_link_libraries(triton PRIVATE z) at line 523); the synthesized tree's CMakeLists.txt
# carries them for the stand-in cmake, and a FLAGTREE_SRC test checks them against the real file.
FLAGTREE_PLAIN_LIBRARIES = ("stdc++fs", "z")


@dataclass(frozen=True, kw_only=True)
class Sources:
    """The stand-in sources and the variant keys that point the recipe at them."""

    root: Path
    variants: dict[str, str]
    real_flagtree: bool


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit_tree(repo: Path, tree: Path) -> str:
    """A bare repository at ``repo`` whose one commit holds every file of ``tree`` (not modified)."""
    _git("init", "-q", "--bare", str(repo))
    _git(f"--git-dir={repo}", f"--work-tree={tree}", "add", "-A", "--force")
    _git(f"--git-dir={repo}", f"--work-tree={tree}", "commit", "-q", "-m", "rehearsal stand-in")
    return _git(f"--git-dir={repo}", "rev-parse", "HEAD")


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _hunks(patch: Path) -> list[tuple[str, int, list[str]]]:
    """(file, 0-based position of the hunk in the file before this patch, the hunk's lines) of one patch."""
    hunks: list[tuple[str, int, list[str]]] = []
    lines = patch.read_text().splitlines()
    path = None
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("+++ b/"):
            path = line.removeprefix("+++ b/")
        match = HUNK.match(line)
        if match is None or path is None:
            continue
        old_len, new_len = int(match[2] or 1), int(match[4] or 1)
        body: list[str] = []
        while old_len or new_len:  # the hunk's own line counts say where it ends
            text = lines[index]
            index += 1
            if text.startswith("\\"):
                continue
            body.append(text)
            old_len -= text[:1] in {" ", "-"}
            new_len -= text[:1] in {" ", "+"}
        hunks.append((path, int(match[1]) - 1 if match[2] != "0" else int(match[1]), body))
    return hunks


def preimages(patches: list[Path]) -> dict[str, dict[int, str]]:
    """For each file a patch series touches, the original lines (1-based) that its hunks pin.

    The series is replayed on a virtual file whose lines are either original (their number) or added by an
    earlier patch, so a later patch's context is found where the earlier ones left it; a patch's own hunks
    are replayed from the last, since their positions are all in the file before that patch.
    """
    originals: dict[str, dict[int, str]] = {}
    currents: dict[str, list[int | str]] = {}
    tails: dict[str, int] = {}
    for patch in patches:
        for path, position, body in reversed(_hunks(patch)):
            originals.setdefault(path, {})
            currents.setdefault(path, [])
            tails.setdefault(path, 1)
            _replay(path, position, body=body, originals=originals, currents=currents, tails=tails)
    return originals


def _replay(
    path: str,
    position: int,
    *,
    body: list[str],
    originals: dict[str, dict[int, str]],
    currents: dict[str, list[int | str]],
    tails: dict[str, int],
) -> None:
    current = currents[path]
    pre = [line[1:] for line in body if line[:1] in {" ", "-"}]
    while len(current) < position + len(pre):
        current.append(tails[path])
        tails[path] += 1
    for offset, text in enumerate(pre):
        entry = current[position + offset]
        if isinstance(entry, int):
            known = originals[path].setdefault(entry, text)
            assert known == text, f"{path}:{entry}: the series disagrees with itself"
        else:
            assert entry == text, f"{path}: a later patch's context is not what an earlier one wrote"
    replaced: list[int | str] = []
    cursor = position
    for line in body:
        if line[:1] == " ":
            replaced.append(current[cursor])
            cursor += 1
        elif line[:1] == "-":
            cursor += 1
        else:
            replaced.append(line[1:])
    current[position:cursor] = replaced


def render_preimage(pinned: dict[int, str], head: list[str] = (), tail: list[str] = ()) -> str:
    """The pinned lines at their numbers, blank lines between, ``head`` in the first free lines, ``tail`` last."""
    size = max(pinned, default=0)
    lines = [pinned.get(number, "") for number in range(1, size + 1)]
    assert all(number not in pinned for number in range(1, len(head) + 1)), "no room for the stand-in's head"
    lines[: len(head)] = head
    return "\n".join([*lines, *tail]) + "\n"


def synthesize_flagtree(tree: Path) -> None:
    """A FlagTree stand-in tree: the patches' pre-images plus what the build script and setup.py need."""
    pinned = preimages(sorted(FLAGTREE_PATCHES.glob("*.patch")))
    notice = "rehearsal stand-in, synthesized from patches/flagtree's pre-images (not upstream's file)"
    setup_head = (STANDINS / "setup_standin.py").read_text().splitlines()
    setup_lines = pinned.pop("python/setup.py", {})
    # Upstream's lines are kept verbatim inside a string, so the stand-in code around them runs.
    setup_head.append("_UPSTREAM_PREIMAGE = r'''")
    _write(tree / "python/setup.py", render_preimage(setup_lines, setup_head, ["'''", "main()"]))
    cmake_lines = pinned.pop("CMakeLists.txt", {})
    libraries = " ".join(FLAGTREE_PLAIN_LIBRARIES)
    _write(
        tree / "CMakeLists.txt",
        render_preimage(
            cmake_lines,
            [f"# {notice}", "project(triton C CXX)"],
            [f"target_link_libraries(triton PRIVATE {libraries})"],
        ),
    )
    for path, lines in pinned.items():
        _write(tree / path, render_preimage(lines))
    _write(tree / "LICENSE", f"FlagTree's LICENSE: {notice}\n")
    _write(tree / "python/triton/__init__.py", f'"""triton: {notice}."""\n')
    # Upstream's packages on the way to the cpu language modules (python/triton/language/extra/cpu links to
    # third_party/cpu/language/cpu), so the package holds flagtree-cpu's modules there, patched.
    for package in ("python/triton/language", "python/triton/language/extra", "third_party/cpu/language/cpu"):
        _write(tree / package / "__init__.py", f'"""{notice}."""\n')
    _write(tree / "python/triton/_C/include/README", f"{notice}\n")
    _write(
        tree / "python/scripts/link_flagtree_cpu.sh", (STANDINS / "link_flagtree_cpu.sh").read_text(), 0o755
    )


def flagtree_cpu_tree(tree: Path, real: Path | None = None) -> None:
    """A flagtree-cpu stand-in: the files its patches touch, synthesized from their pre-images (so the engine
    applies patches/flagtree-cpu for real), and a line of text for every other path the link script names.

    With ``real`` (a checkout of flagtree_cpu_commit, ``FLAGTREE_CPU_SRC``) the files the patches touch and the
    link script's file targets are that checkout's own, so the package carries upstream's modules, patched."""
    pinned = preimages(sorted(FLAGTREE_CPU_PATCHES.glob("*.patch")))
    notice = "rehearsal stand-in, synthesized from patches/flagtree-cpu's pre-images (not upstream's file)"
    for path, lines in pinned.items():
        if real is not None:
            _copy_real(real, path, tree)
            continue
        # Upstream's lines are kept inside a string (as in the FlagTree stand-in's setup.py), so the stand-in
        # module is valid Python wherever the build byte-compiles it.
        _write(tree / path, render_preimage(lines, [f"# {notice}", "_UPSTREAM_PREIMAGE = r'''"], ["'''"]))
    for target in FLAGTREE_CPU_LINK_TARGETS:
        if target in pinned:
            continue
        if target.endswith("/"):
            _write(tree / target / "README", "flagtree-cpu rehearsal stand-in\n")
        elif real is not None and (real / target).is_file():
            _copy_real(real, target, tree)
        elif target.endswith(".py"):
            _write(tree / target, '"""flagtree-cpu rehearsal stand-in."""\n')
        else:
            _write(tree / target, "# flagtree-cpu rehearsal stand-in\n")
    _write(tree / "LICENSE", "flagtree-cpu's LICENSE (MIT): rehearsal stand-in\n")


def _copy_real(real: Path, path: str, tree: Path) -> None:
    """``real``'s file at ``path`` into ``tree``, byte for byte."""
    if not (real / path).is_file():
        raise FileNotFoundError(f"FLAGTREE_CPU_SRC={real} has no {path}, which patches/flagtree-cpu changes")
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(real / path, tree / path)


def sleef_tree(tree: Path) -> None:
    _write(tree / "CMakeLists.txt", "# sleef rehearsal stand-in\nproject(SLEEF C)\n")
    _write(tree / "LICENSE.txt", "sleef's LICENSE.txt (BSL-1.0): rehearsal stand-in\n")


def llvm_archive(archive: Path, commit: str, scratch: Path) -> str:
    """GitHub's archive layout (``llvm-project-<commit>/``) with what the recipe reads; returns its sha256."""
    top = scratch / f"llvm-project-{commit}"
    _write(top / "llvm/CMakeLists.txt", "# LLVM rehearsal stand-in\nproject(LLVM C CXX)\n")
    _write(
        top / "llvm/LICENSE.TXT", "LLVM's LICENSE.TXT (Apache-2.0 WITH LLVM-exception): rehearsal stand-in\n"
    )
    _write(
        top / "mlir/LICENSE.TXT", "MLIR's LICENSE.TXT (Apache-2.0 WITH LLVM-exception): rehearsal stand-in\n"
    )
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def make_sources(
    root: Path, *, llvm_commit: str, flagtree_src: Path | None, flagtree_cpu_src: Path | None
) -> Sources:
    """Every stand-in source under ``root``; the variant keys (github_url, commits, llvm_sha256) to use them."""
    scratch = root / ".trees"
    if flagtree_src is None:
        synthesize_flagtree(scratch / "flagtree")
        flagtree_tree = scratch / "flagtree"
    else:
        flagtree_tree = flagtree_src
    flagtree_cpu_tree(scratch / "flagtree-cpu", flagtree_cpu_src)
    sleef_tree(scratch / "sleef")
    variants = {
        "github_url": root.as_uri(),
        "flagtree_commit": commit_tree(root / "flagos-ai" / "FlagTree.git", flagtree_tree),
        "flagtree_cpu_commit": commit_tree(
            root / "kevinzs2048" / "flagtree-cpu.git", scratch / "flagtree-cpu"
        ),
        "sleef_commit": commit_tree(root / "shibatch" / "sleef.git", scratch / "sleef"),
        "llvm_sha256": llvm_archive(
            root / "llvm" / "llvm-project" / "archive" / f"{llvm_commit}.tar.gz",
            llvm_commit,
            scratch / "llvm",
        ),
    }
    shutil.rmtree(scratch)
    return Sources(root=root, variants=variants, real_flagtree=flagtree_src is not None)
