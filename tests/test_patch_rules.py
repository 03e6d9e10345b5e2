"""What each patch is for, stated as a rule over its own lines (tests/_patch_rules.py), in the default tier.

`tests/test_patches.py` checks that the patches are well formed and (with FLAGTREE_SRC) apply; the rules here
check that each still does what patches/README.md says it does, with no checkout: a patch edited into a bug
(a global compile flag beside 0008's target flag, -Werror back in 0006, one link left absolute in 0001, the
CPU check after the first load in 0009) fails here wherever the tests run.

Every patch has a rule: a new patch adds one to RULES, a few lines (``@rule("flagtree-cpu/0001")`` over a
function that yields what is wrong). SERIES_RULES hold for every patch, new ones included.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _patch_rules import Diff, Hunk, Rule, cmake_code, patch_name
from flagtree_doctor.target import BASELINE_RUNTIME
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


# ---- flagtree/0009: the driver's library folders and its kernel check come from flagtree-doctor -----------------


def _first_statement(hunk: Hunk, definition: str) -> tuple[str, int]:
    """The first statement of the function ``definition`` opens in ``hunk``, and the body's indentation."""
    side = hunk.new_side
    start = next(i for i, line in enumerate(side) if line.lstrip().startswith(definition))
    body = [line for line in side[start + 1 :] if line.strip() and not line.lstrip().startswith("#")]
    return (body[0] if body else ""), len(side[start]) - len(side[start].lstrip()) + 4


@rule("flagtree/0009")
def driver_loads_the_tier_and_checks_each_kernel_first(diff: Diff) -> Iterator[str]:
    file = "third_party/cpu/backend/driver.py"
    added = diff.added(file)
    if added.count("from flagtree_doctor.cpu_check import check_kernel, runtime_library_dirs") != 1:
        yield "check_kernel and runtime_library_dirs are not imported once, unconditionally, at module level"
    if any(re.match(r"\s*(try:|except\b|if\b.*SKIP)", line) for line in added):
        yield "the patch adds a try/except or a condition around the check"
    if "library_dirs = [_triton_C_dir]" not in diff.removed(file):
        yield "upstream's library_dirs = [_triton_C_dir] is not replaced"
    calls: list[object] = []
    c_dir = Path("/site/triton/_C")
    found = diff.hunk("library_dirs =").run(
        "library_dirs =",
        {
            "Path": Path,
            "_triton_C_dir": c_dir,
            "runtime_library_dirs": lambda d: calls.append(d) or [d / "baseline", d],
        },
        stop="libraries =",
    )
    if calls != [c_dir] or found["library_dirs"] != [c_dir / "baseline", c_dir]:
        yield f"library_dirs is {found['library_dirs']}, not runtime_library_dirs() of the _C folder"
    hunk = diff.hunk("def load_binary(")
    first, indent = _first_statement(hunk, "def load_binary(")
    if first != " " * indent + "check_kernel(name, kernel, Path(_triton_C_dir))" or first not in hunk.added:
        yield f"load_binary() does not begin with check_kernel(name, kernel, ...): it begins {first!r}"


# ---- flagtree/0010: the runtime built a second time, for every aarch64 CPU with dotprod ------------------------

BASELINE_VARIABLE = "FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS"


@rule("flagtree/0010")
def baseline_runtime_is_a_second_target(diff: Diff) -> Iterator[str]:
    code = [cmake_code(line).strip() for line in diff.added("CMakeLists.txt")]
    code = [line for line in code if line]
    if diff.removed("CMakeLists.txt"):
        yield "the patch changes upstream's (or patch 0008's) lines: the Armv9 target must stay as it is"
    setting = f"set({BASELINE_VARIABLE} {' '.join(BASELINE_RUNTIME.flags)})"
    if code.count(setting) != 1:
        yield f"the baseline flags are not set once as {setting} (flagtree_doctor.target.BASELINE_RUNTIME)"
    if any("sve" in line for line in code if BASELINE_VARIABLE in line):
        yield "the baseline flags enable SVE"
    folder = str(Path(BASELINE_RUNTIME.library).parent)
    for required in (
        "add_library(TritonCPURuntimeBaseline SHARED)",
        "foreach(property SOURCES INCLUDE_DIRECTORIES COMPILE_DEFINITIONS LINK_LIBRARIES)",
        "get_target_property(value TritonCPURuntime ${property})",
        f"target_compile_options(TritonCPURuntimeBaseline PRIVATE ${{{BASELINE_VARIABLE}}})",
        "OUTPUT_NAME TritonCPURuntime",
        f"LIBRARY_OUTPUT_DIRECTORY ${{CMAKE_LIBRARY_OUTPUT_DIRECTORY}}/{folder})",
    ):
        if required not in code:
            yield f"the baseline target lacks {required}"
    for line in code:
        allowed = line == setting or "TritonCPURuntimeBaseline PRIVATE" in line
        if (
            BASELINE_VARIABLE in line
            and not allowed
            and not re.fullmatch(rf"if\(.*\bDEFINED {BASELINE_VARIABLE}\)", line)
        ):
            yield f"{BASELINE_VARIABLE} used outside its set() and the baseline target's options: {line}"
        if FLAGS_VARIABLE in line:
            yield f"the Armv9 flags reach another target: {line}"


# ---- flagtree/0011: kernel.s is assembled for what this CPU runs -----------------------------------------------


@rule("flagtree/0011")
def kernels_are_assembled_for_this_cpu(diff: Diff) -> Iterator[str]:
    file = "python/triton/runtime/build.py"
    added = diff.added(file)
    if "    from flagtree_doctor.cpu_check import kernel_assembler_flags" not in added:
        yield "build.py does not import kernel_assembler_flags in its CPU-backend block"
    if any(
        "-march" in line or "-msve-vector-bits" in line for line in added if not line.lstrip().startswith("#")
    ):
        yield "build.py adds a literal architecture flag"
    if not any("-march=armv9-a" in line for line in diff.removed(file)):
        yield "upstream's fixed -march for kernel.s is not removed"
    hunk = diff.hunk("cc_cmd += kernel_assembler_flags()")
    for src, machine, expected in (
        ("/t/kernel.s", "aarch64", ["-march=cpu"]),
        ("/t/main.cpp", "aarch64", []),
        ("/t/kernel.s", "x86_64", []),
    ):
        found = hunk.run(
            'if src.endswith(".s")',
            {"src": src, "machine": machine, "cc_cmd": [], "kernel_assembler_flags": lambda: ["-march=cpu"]},
            stop="# OpenMP",
        )
        if found["cc_cmd"] != expected:
            yield f"{src} on {machine}: cc_cmd gets {found['cc_cmd']}, not {expected}"


# ---- flagtree/0012: the lowering and the cache key follow every core's features --------------------------------


@rule("flagtree/0012")
def lowering_and_cache_key_follow_the_cpu(diff: Diff) -> Iterator[str]:
    file = "third_party/cpu/backend/compiler.py"
    added, removed = diff.added(file), diff.removed(file)
    if added.count("from flagtree_doctor.cpu_check import kernel_target") != 1:
        yield "compiler.py does not import kernel_target once, at module level"
    if any("/proc/cpuinfo" in line for line in added if not line.lstrip().startswith("#")):
        yield "compiler.py still reads /proc/cpuinfo itself"
    if not any('open("/proc/cpuinfo")' in line for line in removed):
        yield "upstream's read of the first Features line is not removed"
    for line in ("self.kernel_target = kernel_target()",
                 "self.cpu_features = self.kernel_target.llvm_features(self.cpu_features)"):  # fmt: skip
        if line not in (a.strip() for a in added):
            yield f"compiler.py does not add {line}"
    gates = diff.hunk("add_convert_dot_to_sve2_i8mm")
    for features, armv9, expected in (
        ({"fp-armv8", "neon"}, False, []),  # no bf16: no BFDOT
        ({"fp-armv8", "neon", "bf16", "sve2"}, False, ["dot_product"]),  # SVE2 off the Armv9 tier
        ({"fp-armv8", "neon", "bf16", "sve2"}, True, ["dot_product", "sve2_i8mm"]),
    ):
        added_passes: list[str] = []
        ttcpuir = types.SimpleNamespace(
            add_convert_dot_product=lambda pm, h, out=added_passes: out.append("dot_product"),
            add_convert_dot_to_sve2_i8mm=lambda pm, out=added_passes: out.append("sve2_i8mm"),
        )
        self = types.SimpleNamespace(cpu_features=features, kernel_target=types.SimpleNamespace(armv9=armv9))
        gates.run(
            "if is_arm and 'fp-armv8'",
            {
                "is_arm": True,
                "pm": None,
                "self": self,
                "cpu": types.SimpleNamespace(passes=types.SimpleNamespace(ttcpuir=ttcpuir)),
            },
            stop="# Intel AMX",
        )
        if added_passes != expected:
            yield f"features {sorted(features)}, Armv9 {armv9}: passes {added_passes}, not {expected}"
    hashes = set()
    for name, key in (("neoverse-n1", "baseline-asimd,asimddp-sve0"), ("neoverse-n2", "armv9-x-sve128")):
        found = diff.hunk("def hash(self):").run("def hash(self):", {})
        cpu = types.SimpleNamespace(
            cpu_name=name, cpu_features={"neon"}, kernel_target=types.SimpleNamespace(key=key)
        )
        value = found["hash"](cpu)
        if name not in value or key not in value or "neon" not in value:
            yield f"hash() is {value!r}: it lacks LLVM's CPU name, the features or flagtree-doctor's key"
        hashes.add(value)
    if len(hashes) != 2:
        yield "hash() is the same for two CPUs"


# ---- flagtree-cpu/0001: runtime.py loads libTritonCPURuntime through flagtree-doctor ----------------------------


@rule("flagtree-cpu/0001")
def runtime_module_loads_through_the_cpu_check(diff: Diff) -> Iterator[str]:
    file = "third_party/cpu/language/cpu/runtime.py"
    added = diff.added(file)
    for line in ("from flagtree_doctor.cpu_check import load_runtime", "_rt = load_runtime(_LIB_PATH)"):
        if added.count(line) != 1:
            yield f"runtime.py does not add {line!r} once, at module level"
    if any(re.match(r"\s*(try:|except\b|if\b)", line) for line in added):
        yield "the patch adds a try/except or a condition around the load"
    side = [line for line in diff.hunk("_rt = load_runtime(").new_side if not line.lstrip().startswith("#")]
    if any("CDLL(" in line for line in side):
        yield "runtime.py still loads the library with ctypes.CDLL itself"
    if "_rt = ctypes.CDLL(str(_LIB_PATH))" not in diff.removed(file):
        yield "upstream's _rt = ctypes.CDLL(str(_LIB_PATH)) is not replaced"


# ---- flagtree-cpu/0002: the TLE NEON objects' -march follows the CPU and keys the cache -------------------------


@rule("flagtree-cpu/0002")
def neon_objects_follow_the_cpu(diff: Diff) -> Iterator[str]:
    file = "third_party/cpu/language/cpu/neon.py"
    added, removed = diff.added(file), diff.removed(file)
    if added.count("from flagtree_doctor.cpu_check import tle_neon_march") != 1:
        yield "neon.py does not import tle_neon_march once, at module level"
    if not any("-march=armv8.2-a+dotprod+i8mm+bf16" in line for line in removed):
        yield "upstream's fixed -march is not removed"
    if any("-march=armv" in line for line in added if not line.lstrip().startswith("#")):
        yield "neon.py adds a literal -march"
    if '        cc_cmd += [f"-march={march}", "-fopenmp"]' not in added:
        yield "the compile does not take the -march tle_neon_march() gave"
    hunk = diff.hunk("content_hash =")
    keys = {}
    for machine, march in (("aarch64", "armv8.2-a+dotprod"), ("aarch64", "armv8.2-a+dotprod+i8mm+bf16"),
                           ("x86_64", "unused")):  # fmt: skip
        found = hunk.run(
            "march =",
            {
                "platform": types.SimpleNamespace(machine=lambda m=machine: m),
                "tle_neon_march": lambda a=march: a,
                "hashlib": hashlib,
                "c_source": "int x;",
            },
            stop="if cache",
        )
        keys[(machine, march)] = (found["march"], found["content_hash"])
    if (
        keys[("x86_64", "unused")][0] != ""
        or keys[("aarch64", "armv8.2-a+dotprod")][0] != "armv8.2-a+dotprod"
    ):
        yield f"march is {keys}, not tle_neon_march() on aarch64 and empty elsewhere"
    if len({h for _, h in keys.values()}) != 3:
        yield "the cache key does not change with the -march"


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
                    rf"-march|-msve-vector-bits|-mcpu|{FLAGS_VARIABLE}|{BASELINE_VARIABLE}", line
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
P0009 = "flagtree/0009-Check-the-CPU-before-the-CPU-driver-loads-its-runtim.patch"
P0010 = "flagtree/0010-Build-the-CPU-runtime-a-second-time-for-every-aarch6.patch"
P0012 = "flagtree/0012-Lower-and-cache-CPU-kernels-for-the-features-every-c.patch"
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
        P0009,
        "+        check_kernel(name, kernel, Path(_triton_C_dir))",
        "+        pass",
        "does not begin with check_kernel(name, kernel, ...)",
    ),
    "0009-check-optional": (
        P0009,
        "+        # Before the runtime libraries and the kernel are loaded, and so before any launch:",
        '+        if os.environ.get("FLAGTREE_SKIP_CPU_CHECK_ALWAYS"):',
        "a condition around the check",
    ),
    "0009-armv9-runtime-always": (
        P0009,
        "+library_dirs = runtime_library_dirs(Path(_triton_C_dir))",
        "+library_dirs = [Path(_triton_C_dir)]",
        "not runtime_library_dirs() of the _C folder",
    ),
    "0010-sve-in-the-baseline": (
        P0010,
        "-march=armv8.2-a+dotprod)",
        "-march=armv8.2-a+dotprod+sve)",
        "the baseline flags are not set once",
    ),
    "0010-armv9-flags-on-the-baseline": (
        P0010,
        "PRIVATE ${FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS})",
        "PRIVATE ${FLAGTREE_CPU_RUNTIME_ARCH_FLAGS})",
        "the Armv9 flags reach another target",
    ),
    "0010-another-folder": (P0010, "_DIRECTORY}/baseline)", "_DIRECTORY})", "LIBRARY_OUTPUT_DIRECTORY"),
    "0011-fixed-flags-again": (
        "flagtree/0011-Assemble-JIT-kernels-for-the-extensions-this-CPU-has.patch",
        "+            cc_cmd += kernel_assembler_flags()",
        '+            cc_cmd += kernel_assembler_flags() + ["-march=armv9-a+sve2"]',
        "a literal architecture flag",
    ),
    "0012-bfdot-without-bf16": (
        P0012,
        " and 'neon' in self.cpu_features and 'bf16' in self.cpu_features:",
        " and 'neon' in self.cpu_features:",
        "passes ['dot_product'], not []",
    ),
    "0012-sve2-at-any-length": (
        P0012,
        "+        if is_arm and 'sve2' in self.cpu_features and self.kernel_target.armv9:",
        "+        if is_arm and 'sve2' in self.cpu_features:",
        "passes ['dot_product', 'sve2_i8mm'], not ['dot_product']",
    ),
    "0012-key-is-the-machine": (
        P0012,
        '+        return f"{platform.machine()}-{self.cpu_name}-{features}-{self.kernel_target.key}"',
        '+        return f"{platform.machine()}"',
        "the same for two CPUs",
    ),
    "cpu-0001-ctypes-again": (
        "flagtree-cpu/0001-Check-the-CPU-before-runtime.py-loads-libTritonCPURu.patch",
        "+_rt = load_runtime(_LIB_PATH)",
        "+_rt = load_runtime(_LIB_PATH)\n+_rt = ctypes.CDLL(str(_LIB_PATH))",
        "still loads the library with ctypes.CDLL",
    ),
    "cpu-0002-cache-by-source": (
        "flagtree-cpu/0002-Compile-the-TLE-NEON-objects-for-the-extensions-this.patch",
        "+    content_hash = hashlib.md5((c_source + march).encode()).hexdigest()",
        "+    content_hash = hashlib.md5(c_source.encode()).hexdigest()",
        "the cache key does not change with the -march",
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
