"""What each patch is for, stated as a rule over its own lines (tests/_patch_rules.py), in the default tier.

`tests/test_patches.py` checks that the patches are well formed and (with FLAGTREE_SRC) apply; the rules here
check that each still does what patches/README.md says it does, with no checkout: a patch edited into a bug
(a global compile flag beside 0008's target flag, -Werror back in 0006, one link left absolute in 0001, the
CPU check after the first load in 0009) fails here wherever the tests run.

Every patch has a rule: a new patch adds one to RULES, a few lines (``@rule("flagtree-cpu/0001")`` over a
function that yields what is wrong). SERIES_RULES hold for every patch, new ones included.
"""

from __future__ import annotations

import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _patch_rules import Diff, Rule, cmake_code, patch_name
from test_patches import PATCHES, all_patches

RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    """Register the rule of patch ``name`` (series/NNNN)."""

    def register(check: Rule) -> Rule:
        assert name not in RULES, f"two rules for {name}"
        RULES[name] = check
        return check

    return register


def _diff(patch: Path, text: str | None = None) -> Diff:
    return Diff.parse(patch_name(patch), patch.read_text(encoding="utf-8") if text is None else text)


def _getenv_only(environ: dict[str, str]) -> types.SimpleNamespace:
    """An ``os`` whose environment is ``environ`` (for the lines a patch adds: ``os.getenv``, ``os.path``)."""

    def getenv(name: str, default: str | None = None) -> str | None:
        return environ.get(name, default)

    return types.SimpleNamespace(getenv=getenv, path=os.path)


# ---- flagtree/0001: the backend links setup.py makes are relative --------------------------------------------


@rule("flagtree/0001")
def links_are_relative(diff: Diff) -> Iterator[str]:
    added, removed = diff.added("python/setup.py"), diff.removed("python/setup.py")
    if "def update_symlink(link_path, source_path, relative=False):" not in added:
        yield "update_symlink() no longer takes relative=False"
    with tempfile.TemporaryDirectory() as scratch:
        target, link = Path(scratch, "backends", "cpu"), Path(scratch, "triton", "backends", "cpu")
        found = diff.hunk("def update_symlink(").run(
            "if relative:",
            {"os": os, "Path": Path, "relative": True, "source_path": target, "link_path": link},
        )
        if found["source_path"].is_absolute() or os.path.normpath(link.parent / found["source_path"]) != str(
            target
        ):
            yield f"a relative link's target {found['source_path']} does not lead from {link} to {target}"

    def calls(lines: list[str]) -> list[str]:
        return [line for line in lines if "update_symlink(" in line and "def update_symlink(" not in line]

    before, after = calls(removed), calls(added)
    if len(before) != len(after):
        yield f"{len(before)} calls of update_symlink() became {len(after)}"
    for old, new in zip(before, after, strict=False):
        if new != f"{old.rstrip()[:-1]}, relative=True)":
            yield f"{old.strip()} became {new.strip()}, not the same call with relative=True"


# ---- flagtree/0002: the cpu build's cmake --install is staged in the build folder ----------------------------


@rule("flagtree/0002")
def install_is_staged_in_the_build_folder(diff: Diff) -> Iterator[str]:
    hunk = diff.hunk("install_args")
    for backend, staged in (("cpu", True), ("nvidia", False)):
        calls: list[tuple[list[str], str]] = []
        helper = types.SimpleNamespace(flagtree_backend=backend, install_extension=lambda **_: None)
        subprocess = types.SimpleNamespace(
            check_call=lambda args, cwd, calls=calls: calls.append((list(args), cwd))
        )
        hunk.run(
            "install_args =",
            {"helper": helper, "subprocess": subprocess, "os": os, "cmake_dir": "/b/cmake", "self": None},
        )
        expected = ["cmake", "--install", "."] + (["--prefix", "/b/cmake/install"] if staged else [])
        if calls != [(expected, "/b/cmake")]:
            yield f"FLAGTREE_BACKEND={backend}: cmake --install is called as {calls}, not {expected} in the build"


# ---- flagtree/0003: the CPU path of _build() when the cpu backend is installed -------------------------------


@rule("flagtree/0003")
def cpu_build_path_follows_the_installed_backend(diff: Diff) -> Iterator[str]:
    hunk = diff.hunk("_IS_CPU_BACKEND =")
    with tempfile.TemporaryDirectory() as scratch:
        build_py = Path(scratch, "triton", "runtime", "build.py")
        for installed in (False, True):
            if installed:
                (build_py.parent.parent / "backends" / "cpu").mkdir(parents=True)
            for variable, expected in ((None, installed), ("cpu", True), ("nvidia", False)):
                environ = {} if variable is None else {"FLAGTREE_BACKEND": variable}
                fake_os = types.SimpleNamespace(environ=environ, path=os.path)
                found = hunk.run("_CPU_BACKEND_DIR =", {"os": fake_os, "__file__": str(build_py)})
                if found["_IS_CPU_BACKEND"] is not expected:
                    yield (
                        f"FLAGTREE_BACKEND={variable} with the cpu backend {'' if installed else 'not '}"
                        f"installed: _IS_CPU_BACKEND is {found['_IS_CPU_BACKEND']}, not {expected}"
                    )


# ---- flagtree/0004: the launcher links the libgomp of the running prefix, with an rpath ----------------------


@rule("flagtree/0004")
def launcher_links_the_prefix_libgomp(diff: Diff) -> Iterator[str]:
    if "import sys" not in diff.added("python/triton/runtime/build.py"):
        yield "build.py does not import sys"
    if any("torch" in line and not line.lstrip().startswith("#") for line in diff.added()):
        yield "the launcher still looks for torch's libgomp"
    hunk = diff.hunk("prefix_lib_dir =")
    with tempfile.TemporaryDirectory() as scratch:
        lib = Path(scratch, "lib")
        lib.mkdir()
        for present in (False, True):
            if present:
                (lib / "libgomp.so.1").touch()
            found = hunk.run(
                "prefix_lib_dir =", {"os": os, "sys": types.SimpleNamespace(prefix=scratch), "cc_cmd": []}
            )
            expected = [f"-L{lib}", "-lgomp", f"-Wl,-rpath,{lib}"] if present else ["-lgomp"]
            if found["cc_cmd"] != expected:
                yield f"libgomp {'in' if present else 'not in'} the prefix: the launcher gets {found['cc_cmd']}"


# ---- flagtree/0005: TRITON_SYS_PATH defaults to the running python's prefix ----------------------------------


@rule("flagtree/0005")
def sys_path_defaults_to_the_prefix(diff: Diff) -> Iterator[str]:
    if "import sys" not in diff.added("third_party/cpu/backend/driver.py"):
        yield "driver.py does not import sys"
    hunk = diff.hunk("_dirname =")
    for environ, expected in (({}, "/conda/env"), ({"TRITON_SYS_PATH": "/opt/x"}, "/opt/x")):
        found = hunk.run(
            "_dirname =",
            {
                "os": _getenv_only(environ),
                "sys": types.SimpleNamespace(prefix="/conda/env"),
            },
            stop="#",
        )
        if found["_dirname"] != expected:
            yield f"TRITON_SYS_PATH={environ.get('TRITON_SYS_PATH')}: the driver reads {found['_dirname']}"


# ---- flagtree/0006: -Werror goes, every other flag stays -----------------------------------------------------


@rule("flagtree/0006")
def werror_is_dropped_and_nothing_else(diff: Diff) -> Iterator[str]:
    removed, added = diff.removed("CMakeLists.txt"), diff.added("CMakeLists.txt")
    if not removed or not all("-Werror" in line for line in removed):
        yield "the patch removes lines without -Werror, or none"
    if len(removed) != len(added):
        yield f"{len(removed)} lines removed, {len(added)} added: each must come back without -Werror"
    for old, new in zip(removed, added, strict=False):
        if new != old.replace(" -Werror", ""):
            yield f"{old.strip()!r} became {new.strip()!r}, not the same line without -Werror"


# ---- flagtree/0007: setup_tools' Triton cache path honours TRITON_HOME ---------------------------------------


@rule("flagtree/0007")
def cache_path_honours_triton_home(diff: Diff) -> Iterator[str]:
    found = diff.hunk("def get_triton_cache_path(").run("def get_triton_cache_path(", {"os": os})
    for environ, expected in (
        ({"TRITON_HOME": "/build/home", "HOME": "/root"}, "/build/home/.triton"),
        ({"HOME": "/root"}, "/root/.triton"),
    ):
        found["os"] = _getenv_only(environ)
        if (path := found["get_triton_cache_path"]()) != expected:
            yield f"{environ}: the Triton cache is {path}, not {expected}"


# ---- flagtree/0008: the Armv9 + SVE2 flags reach the CPU runtime target only ---------------------------------

FLAGS_VARIABLE = "FLAGTREE_CPU_RUNTIME_ARCH_FLAGS"
ARM_FLAGS = ("-march=armv9-a+sve2+i8mm+bf16+fp16+dotprod", "-msve-vector-bits=128")


@rule("flagtree/0008")
def arch_flags_reach_the_runtime_only(diff: Diff) -> Iterator[str]:
    code = [cmake_code(line).strip() for line in diff.added("CMakeLists.txt")]
    code = [line for line in code if line]
    setting = f"set({FLAGS_VARIABLE} {' '.join(ARM_FLAGS)})"
    use = f"target_compile_options(TritonCPURuntime PRIVATE ${{{FLAGS_VARIABLE}}})"
    if code.count(setting) != 1:
        yield f"the flags are not set once as {setting}"
    if code.count(use) != 1:
        yield f"the flags are not given once, and privately, to the runtime target: {use}"
    for line in code:
        if line in (setting, use):
            continue
        if re.search(r"add_compile_options|CMAKE_\w*FLAGS", line):
            yield f"a global compile flag: {line}"
        if re.search(r"-march|-msve-vector-bits|-mcpu", line):
            yield f"an architecture flag outside the set(): {line}"
        if FLAGS_VARIABLE in line and not re.fullmatch(
            rf"(?:if|elseif)\(.*\bDEFINED {FLAGS_VARIABLE}\)", line
        ):
            yield f"{FLAGS_VARIABLE} used outside its set() and the runtime's target_compile_options: {line}"
    global_arm = [line for line in diff.removed("CMakeLists.txt") if "CMAKE_" in line and "-march" in line]
    if len(global_arm) != 2:
        yield "upstream's global -march lines (CMAKE_C_FLAGS, CMAKE_CXX_FLAGS) are not both removed"


# ---- flagtree/0009: the CPU check runs before the driver loads anything --------------------------------------


@rule("flagtree/0009")
def cpu_check_comes_first(diff: Diff) -> Iterator[str]:
    added = diff.added("third_party/cpu/backend/driver.py")
    if added.count("from flagtree_doctor.cpu_check import require_supported_cpu") != 1:
        yield "the check is not imported once, unconditionally, at module level"
    if any(re.match(r"\s*(try:|except\b|if\b.*SKIP)", line) for line in added):
        yield "the patch adds a try/except or a condition around the check"
    hunk = diff.hunk("def load_binary(")
    side = hunk.new_side
    start = next(i for i, line in enumerate(side) if line.lstrip().startswith("def load_binary("))
    body = [line for line in side[start + 1 :] if line.strip() and not line.lstrip().startswith("#")]
    indent = len(side[start]) - len(side[start].lstrip()) + 4
    if not body or body[0] != " " * indent + "require_supported_cpu()" or body[0] not in hunk.added:
        yield f"load_binary() does not begin with require_supported_cpu(): it begins {body[:1]}"


# ---- flagtree-cpu/0001: runtime.py checks the CPU before it loads libTritonCPURuntime ---------------------------


@rule("flagtree-cpu/0001")
def runtime_module_checks_the_cpu_before_its_load(diff: Diff) -> Iterator[str]:
    file = "third_party/cpu/language/cpu/runtime.py"
    added = diff.added(file)
    for line in ("from flagtree_doctor.cpu_check import require_supported_cpu", "require_supported_cpu()"):
        if added.count(line) != 1:
            yield f"runtime.py does not add {line!r} once, at module level"
    if any(re.match(r"\s*(try:|except\b|if\b)", line) for line in added):
        yield "the patch adds a try/except or a condition around the check"
    side = [line for line in diff.hunk("CDLL(").new_side if line.strip()]
    code = [line for line in side if not line.lstrip().startswith("#")]
    loads = [i for i, line in enumerate(code) if "CDLL(" in line]
    if (
        "require_supported_cpu()" not in code
        or not loads
        or code.index("require_supported_cpu()") != loads[0] - 1
    ):
        yield "require_supported_cpu() is not the statement right before the library's load (ctypes.CDLL)"


# ---- every patch -----------------------------------------------------------------------------------------------


def no_werror(diff: Diff) -> Iterator[str]:
    """Patch 0006's purpose holds for the whole series."""
    yield from (f"adds -Werror: {line.strip()}" for line in diff.added() if "-Werror" in line)


def no_global_arm_flags(diff: Diff) -> Iterator[str]:
    """Patch 0008's purpose holds for the whole series: no CMake file gets a directory-wide -march."""
    for file in diff.files():
        if file.endswith(("CMakeLists.txt", ".cmake")):
            for line in map(cmake_code, diff.added(file)):
                if re.search(r"add_compile_options|CMAKE_\w*FLAGS", line) and re.search(
                    rf"-march|-msve-vector-bits|-mcpu|{FLAGS_VARIABLE}", line
                ):
                    yield f"{file}: a directory-wide architecture flag: {line.strip()}"


SERIES_RULES: tuple[Rule, ...] = (no_werror, no_global_arm_flags)


def test_every_patch_has_a_rule() -> None:
    # A rule may wait for its patch (flagtree-cpu/0001 is written on another branch); a patch never goes
    # without its rule.
    missing = [name for name in map(patch_name, all_patches()) if name not in RULES]
    assert not missing, f"write a rule for {missing} in tests/test_patch_rules.py (what the patch is for)"


@pytest.mark.parametrize("patch", all_patches(), ids=patch_name)
def test_the_patch_keeps_its_rule(patch: Path) -> None:
    diff = _diff(patch)
    assert diff.hunks, f"{patch.name}: no hunks"
    problems = [*RULES.get(diff.name, lambda _: iter(()))(diff)]
    problems += [problem for series_rule in SERIES_RULES for problem in series_rule(diff)]
    assert problems == [], f"{patch.name}: " + "; ".join(problems)


# ---- the rules catch what they are for: each broken patch below fails its rule --------------------------------

P0008 = "flagtree/0008-Build-only-the-CPU-runtime-for-Armv9-with-SVE2.patch"
COMMENT_0008 = "+  # there (applied to that target below): libtriton.so keeps the toolchain's"
BROKEN = {
    "0008-add-compile-options": (
        P0008,
        COMMENT_0008,
        "+  add_compile_options(${FLAGTREE_CPU_RUNTIME_ARCH_FLAGS})",
        "a global compile flag",
    ),
    "0008-append-cmake-cxx-flags": (
        P0008,
        COMMENT_0008,
        '+  string(APPEND CMAKE_CXX_FLAGS " ${FLAGTREE_CPU_RUNTIME_ARCH_FLAGS}")',
        "a global compile flag",
    ),
    "0008-literal-march": (
        P0008,
        COMMENT_0008,
        "+  add_compile_options(-march=armv9-a+sve2 -msve-vector-bits=128)",
        "an architecture flag outside the set()",
    ),
    "0008-flags-on-another-target": (
        P0008,
        COMMENT_0008,
        "+  target_compile_options(triton PRIVATE ${FLAGTREE_CPU_RUNTIME_ARCH_FLAGS})",
        "used outside its set()",
    ),
    "0008-public": (P0008, " PRIVATE ${FLAGTREE", " PUBLIC ${FLAGTREE", "privately"),
    "0001-one-link-absolute": (
        "flagtree/0001-Make-the-backend-symlinks-that-setup.py-creates-rela.patch",
        "+    update_symlink(proton_install_dir, proton_dir, relative=True)",
        "+    update_symlink(proton_install_dir, proton_dir)",
        "not the same call with relative=True",
    ),
    "0001-relative-to-the-link-itself": (
        "flagtree/0001-Make-the-backend-symlinks-that-setup.py-creates-rela.patch",
        "os.path.abspath(link_path.parent)",
        "os.path.abspath(link_path)       ",
        "does not lead from",
    ),
    "0002-install-to-usr-local": (
        "flagtree/0002-Stage-the-cpu-build-s-cmake-install-in-the-build-fol.patch",
        'os.path.join(cmake_dir, "install")',
        '"/usr/local"',
        "FLAGTREE_BACKEND=cpu",
    ),
    "0003-override-ignored": (
        "flagtree/0003-Use-the-CPU-build-path-of-_build-when-the-cpu-backen.patch",
        '_IS_CPU_BACKEND = os.environ.get("FLAGTREE_BACKEND", "cpu" if os.path.isdir(_CPU_BACKEND_DIR) else "") == "cpu"',
        '_IS_CPU_BACKEND = os.environ.get("FLAGTREE_BACKEND") == "cpu" or os.path.isdir(_CPU_BACKEND_DIR)',
        "FLAGTREE_BACKEND=nvidia",
    ),
    "0004-no-rpath": (
        "flagtree/0004-Link-the-CPU-launcher-against-the-libgomp-of-the-run.patch",
        ', f"-Wl,-rpath,{prefix_lib_dir}"]',
        "]",
        "libgomp in the prefix",
    ),
    "0005-usr-local-again": (
        "flagtree/0005-Default-TRITON_SYS_PATH-to-the-running-Python-prefix.patch",
        '+_dirname = os.getenv("TRITON_SYS_PATH", default=sys.prefix)',
        '+_dirname = os.getenv("TRITON_SYS_PATH", default="/usr/local")',
        "TRITON_SYS_PATH=None",
    ),
    "0006-werror-back": (
        "flagtree/0006-Do-not-build-with-Werror.patch",
        '+    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-covered-switch-default")',
        '+    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Werror -Wno-covered-switch-default")',
        "adds -Werror",
    ),
    "0006-visibility-dropped": (
        "flagtree/0006-Do-not-build-with-Werror.patch",
        '+    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-covered-switch-default -fvisibility=hidden")',
        '+    set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-covered-switch-default")',
        "not the same line without -Werror",
    ),
    "0007-home-first": (
        "flagtree/0007-Honor-TRITON_HOME-in-setup_tools-Triton-cache-path.patch",
        '+    user_home = os.getenv("TRITON_HOME") or os.getenv("HOME")',
        '+    user_home = os.getenv("HOME") or os.getenv("TRITON_HOME")',
        "/build/home/.triton",
    ),
    "0009-check-dropped": (
        "flagtree/0009-Check-the-CPU-before-the-CPU-driver-loads-its-runtim.patch",
        "+        require_supported_cpu()",
        "+        pass",
        "does not begin with require_supported_cpu()",
    ),
    "0009-check-optional": (
        "flagtree/0009-Check-the-CPU-before-the-CPU-driver-loads-its-runtim.patch",
        "+        # Before the runtime libraries and the kernel are loaded, and so before any launch.",
        '+        if os.environ.get("FLAGTREE_SKIP_CPU_CHECK_ALWAYS"):',
        "a condition around the check",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_the_rule_catches_a_broken_patch(case: str) -> None:
    relative, find, replace, expected = BROKEN[case]
    patch = PATCHES / relative
    text = patch.read_text(encoding="utf-8")
    assert text.count(find) == 1, f"{case}: the text to break is not in {relative} once"
    diff = _diff(patch, text.replace(find, replace))
    problems = [*RULES[diff.name](diff)] + [p for series_rule in SERIES_RULES for p in series_rule(diff)]
    assert any(expected in problem for problem in problems), problems
