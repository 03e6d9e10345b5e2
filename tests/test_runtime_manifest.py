"""recipe/runtime_manifest.py: what each exported function of the runtime needs, read from its instructions.

The stand-in runtime (tests/emulated/standin_runtime.c: one function per kind of instruction, reached inline,
through a local function, an outlined OpenMP region and the PLT) is cross-compiled both ways patch 0008 builds
the real one, and the tool runs as build-flagtree.sh runs it. Whether each function really runs where the
manifest says is checked under qemu (tests/emulated/test_runtime_tiers_qemu.py); the real runtime's manifest
where FLAGTREE_CPU_SRC is set.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import _conda_forge_flags as conda_forge_flags
from _runtime_standin import FLAGS, SONAME, STANDIN_C, binutils, build, tool, write_manifest
from _tools import aarch64_gcc, require_executable, upstream_source
from flagtree_doctor.manifest import ManifestError, read_manifest
from flagtree_doctor.target import ARMV9_RUNTIME, BASELINE_RUNTIME, RUNTIME_MODULE_FUNCTIONS, TLE_OP_FUNCTIONS

# What each function of the stand-in needs, by build: the rules' hwcap names.
EXPECTED = {
    "standin_dotprod": ["asimddp"],
    "standin_i8mm": ["i8mm"],  # in the local tile_sum_i8mm
    "standin_bf16": ["bf16"],
    "standin_fp16": ["asimdhp"],  # fadd on .8h; its conversions to and from half are Armv8's own
    "standin_sve_loop": [],
    "standin_omp_i8mm": ["i8mm"],  # in the outlined standin_omp_i8mm._omp_fn.0
    "standin_calls_i8mm": ["i8mm"],  # through the PLT, in standin_i8mm
    "standin_plain": [],
    "standin_tier": [],
}
ARMV9_EXPECTED = {**EXPECTED, "standin_sve_loop": ["sve", "sve2"]}


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    binutils()
    work = tmp_path_factory.mktemp("manifest")
    found = {}
    for tier, flags in FLAGS.items():
        library = build(STANDIN_C, work / tier / "libTritonCPURuntime.so", flags)
        done = write_manifest(library, flags[0].removeprefix("-march="))
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"runtime_manifest.py: {library.with_suffix('.isa.json')}: 9 functions\n"
        found[tier] = json.loads(library.with_suffix(".isa.json").read_text())
    return found


@pytest.mark.parametrize("tier", ["baseline", "armv9"])
def test_each_function_needs_what_its_instructions_need(manifests, tier: str) -> None:
    document = manifests[tier]
    functions = document["functions"]
    assert {name: entry["needs"] for name, entry in functions.items()} == (
        EXPECTED if tier == "baseline" else ARMV9_EXPECTED
    )
    assert document["march"] == FLAGS[tier][0].removeprefix("-march=")
    assert document["load"] == {"needs": [], "evidence": {}}  # the initialisers are GCC's, plain
    assert document["objdump"].startswith("GNU objdump")


def test_the_evidence_names_the_instruction_and_the_function_it_is_in(manifests) -> None:
    functions = manifests["baseline"]["functions"]
    assert functions["standin_omp_i8mm"]["evidence"]["i8mm"].startswith("smmla ")
    assert functions["standin_omp_i8mm"]["evidence"]["i8mm"].endswith("(in standin_omp_i8mm._omp_fn.0)")
    assert functions["standin_calls_i8mm"]["evidence"]["i8mm"].endswith("(in tile_sum_i8mm)")
    assert functions["standin_bf16"]["evidence"]["bf16"].startswith("bfdot ")
    assert manifests["armv9"]["functions"]["standin_sve_loop"]["evidence"]["sve2"].endswith(
        "(in standin_sve_loop)"
    )


def test_flagtree_doctor_reads_what_the_tool_writes(manifests, tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifests["baseline"]))
    manifest = read_manifest(path)
    needs = manifest.needs("standin_omp_i8mm")
    assert needs is not None
    assert needs.missing(frozenset({"asimd", "asimddp"})) == ["i8mm"]
    assert manifest.needs("not_exported") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "is not JSON"),
        ('{"schema_version": 2, "functions": {"f": {"needs": []}}}', "schema_version 2, this reader knows 1"),
        ('{"schema_version": 1, "functions": {}}', "no functions"),
        (
            '{"schema_version": 1, "load": {"needs": []}, "functions": {"f": {"needs": "i8mm"}}}',
            "functions.f",
        ),
    ],
)
def test_a_damaged_manifest_is_one_error_saying_to_reinstall(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as raised:
        read_manifest(path)
    assert message in str(raised.value)
    assert str(raised.value).endswith("reinstall flagtree-cpu (conda install --force-reinstall flagtree-cpu)")
    with pytest.raises(ManifestError, match="cannot read the runtime manifest"):
        read_manifest(tmp_path / "missing.json")


AES_C = r"""
#include <arm_neon.h>
__attribute__((target("+crypto"))) __attribute__((visibility("default")))
void standin_aes(unsigned char *block, const unsigned char *key) {
  vst1q_u8(block, vaeseq_u8(vld1q_u8(block), vld1q_u8(key)));
}
"""


def test_an_extension_no_rule_classifies_stops_the_tool(tmp_path: Path) -> None:
    """Crypto (aese): the assembler at Armv8.2 refuses it, no rule says what it needs, so no manifest."""
    (tmp_path / "aes.c").write_text(AES_C)
    library = build(tmp_path / "aes.c", tmp_path / "libaes.so", FLAGS["baseline"])
    output = tmp_path / "libaes.isa.json"
    done = write_manifest(library, "armv8.2-a+dotprod")
    assert done.returncode == 1
    assert done.stderr.startswith("runtime_manifest.py: error: aese v")
    assert "(in standin_aes) needs an extension beyond armv8.2-a that no rule classifies" in done.stderr
    assert not output.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no half-written file


def test_a_stripped_library_is_refused(tmp_path: Path) -> None:
    library = build(STANDIN_C, tmp_path / "libstripped.so", FLAGS["baseline"], "-s")
    done = write_manifest(library, "armv8.2-a+dotprod")
    assert done.returncode == 1
    assert "the library has no symbol table" in done.stderr


def test_bad_usage(tmp_path: Path) -> None:
    done = write_manifest(tmp_path / "missing.so", "armv8.2-a+dotprod")
    assert done.returncode == 2
    assert done.stderr == (
        f"runtime_manifest.py: error: {tmp_path / 'missing.so'} is not a file (fix: build the runtime first)\n"
    )


@pytest.mark.parametrize(
    ("mnemonic", "operands", "needs"),
    [
        ("sdot", "v0.4s, v1.16b, v2.16b", {"asimddp"}),
        ("sdot", "z0.s, z1.b, z2.b", {"sve"}),
        ("usdot", "v0.4s, v1.16b, v2.4b[0]", {"i8mm"}),
        ("smmla", "z0.s, z1.b, z2.b", {"sve", "svei8mm"}),
        ("bfcvtn", "v0.4h, v1.4s", {"bf16"}),
        ("bfdot", "z0.s, z1.h, z2.h", {"sve", "svebf16"}),
        ("fadd", "h0, h1, h2", {"fphp"}),
        ("fmla", "v0.8h, v1.8h, v2.h[3]", {"asimdhp"}),
        ("fcvtzs", "w0, h1", {"fphp"}),
        ("fcvt", "s0, h1", set()),  # Armv8's own conversion
        ("fcvtn", "v0.4h, v1.4s", set()),
        ("add", "v0.8h, v1.8h, v2.8h", set()),  # integer halfwords
        ("fmlal", "v0.4s, v1.4h, v2.4h", {"asimdfhm"}),
        ("prfm", "pldl1keep, [x0]", set()),
        ("ldr", "q0, [x0, #16]", set()),
        ("whilelo", "p0.s, wzr, w1", {"sve"}),
    ],
)
def test_the_rules(mnemonic: str, operands: str, needs: set[str]) -> None:
    assert tool().classify(mnemonic, operands) == needs


# ---- conda-forge's flags: -fno-plt puts calls between exported functions through the GOT -------------------------

GOT_C = r"""
#include <arm_neon.h>
#include <stdint.h>
#define API __attribute__((visibility("default")))
API int32_t small_plain(const int32_t *a, int n) {
  int32_t s = 0;
  for (int i = 0; i < n; i++) s += a[i] * 3;
  return s;
}
API int32_t small_dot(const int8_t *a, const int8_t *b) {
  return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b)));
}
API int32_t small_caller(const int8_t *a, const int8_t *b) { return small_dot(a, b) + small_dot(b, b); }
#ifdef WITH_TABLE
typedef int32_t (*op_t)(const int8_t *, const int8_t *);
static __attribute__((noinline)) int32_t first_local(const int8_t *a, const int8_t *b) { return a[0] + b[0]; }
static __attribute__((noinline)) int32_t dot_local(const int8_t *a, const int8_t *b) {
  return vaddvq_s32(vdotq_s32(vdupq_n_s32(1), vld1q_s8(a), vld1q_s8(b)));
}
static op_t const TABLE[] = {first_local, dot_local};
API int32_t small_dispatch(int i, const int8_t *a, const int8_t *b) { return TABLE[i](a, b); }
#endif
"""
# Each way the runtime may be compiled: upstream's CMake (-fPIC, -O2 or -O3), the same with -fno-plt and with
# -fpic's small GOT, and conda-forge's whole aarch64 CFLAGS/CPPFLAGS/LDFLAGS (tests/_conda_forge_flags.py).
GOT_FLAG_SETS = {
    "O2-fPIC": ("-O2", "-fPIC"),
    "O3-fPIC": ("-O3", "-fPIC"),
    "O2-fPIC-fno-plt": ("-O2", "-fPIC", "-fno-plt"),
    "O3-fPIC-fno-plt": ("-O3", "-fPIC", "-fno-plt"),
    "O2-fpic-fno-plt": ("-O2", "-fpic", "-fno-plt"),
    "conda-forge": (*conda_forge_flags.CPPFLAGS, *conda_forge_flags.CFLAGS, *conda_forge_flags.LDFLAGS),
}


def _small_manifest(tmp_path: Path, flags: tuple[str, ...], *defines: str) -> dict[str, object]:
    (tmp_path / "small.c").write_text(GOT_C)
    library = tmp_path / "libsmall.so"
    subprocess.run([aarch64_gcc(), *flags, *defines, *FLAGS["baseline"], "-shared", str(tmp_path / "small.c"),
                    "-o", str(library)], check=True)  # fmt: skip
    done = write_manifest(library, BASELINE_RUNTIME.march)
    assert done.returncode == 0, done.stderr
    document: dict[str, object] = json.loads(library.with_suffix(".isa.json").read_text())
    return document


@pytest.mark.parametrize("flags", GOT_FLAG_SETS.values(), ids=GOT_FLAG_SETS.keys())
def test_a_got_slot_is_a_reference_of_the_function_that_loads_it(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """With and without -fno-plt: only the caller and the callee need dotprod; plain and load need nothing."""
    document = _small_manifest(tmp_path, flags)
    functions = document["functions"]
    assert {name: entry["needs"] for name, entry in functions.items()} == {
        "small_plain": [],
        "small_dot": ["asimddp"],
        "small_caller": ["asimddp"],
    }
    assert functions["small_caller"]["evidence"]["asimddp"].endswith("(in small_dot)")
    assert document["load"] == {"needs": [], "evidence": {}}


@pytest.mark.parametrize("flags", GOT_FLAG_SETS.values(), ids=GOT_FLAG_SETS.keys())
def test_a_table_of_callbacks_still_counts_for_every_function(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """A local function whose address is in a table (.data.rel.ro) may be called from anywhere: every exported
    function is charged with it, the dispatcher that reads the table first of all."""
    functions = _small_manifest(tmp_path, flags, "-DWITH_TABLE")["functions"]
    assert {name: entry["needs"] for name, entry in functions.items()} == {
        name: ["asimddp"] for name in ("small_plain", "small_dot", "small_caller", "small_dispatch")
    }
    assert functions["small_dispatch"]["evidence"]["asimddp"].endswith("(in dot_local)")


@pytest.mark.parametrize("tier", ["baseline", "armv9"])
def test_the_standin_under_conda_forges_flags(tmp_path: Path, tier: str) -> None:
    """The stand-in runtime compiled with conda-forge's flags after the runtime's own (its -fno-plt turns the
    call of standin_i8mm into a GOT load): each function needs what it needs with upstream's."""
    cf = (*conda_forge_flags.CPPFLAGS, *conda_forge_flags.CFLAGS, *conda_forge_flags.LDFLAGS)
    library = build(STANDIN_C, tmp_path / "libTritonCPURuntime.so", FLAGS[tier], *cf)
    done = write_manifest(library, FLAGS[tier][0].removeprefix("-march="))
    assert done.returncode == 0, done.stderr
    document = json.loads(library.with_suffix(".isa.json").read_text())
    assert {name: entry["needs"] for name, entry in document["functions"].items()} == (
        EXPECTED if tier == "baseline" else ARMV9_EXPECTED
    )
    assert document["load"]["needs"] == []


# ---- flagtree-cpu's own runtime (FLAGTREE_CPU_SRC) -----------------------------------------------------------


def test_the_real_runtimes_manifest(tmp_path: Path) -> None:
    """flagtree-cpu's runtime sources, as its CMakeLists.txt lists them for aarch64, compiled with patch 0010's
    baseline flags (Debian's aarch64 g++, OpenMP): they compile with exactly those flags (no intrinsic asks for
    more), the manifest names the function of every TLE op and runtime-module wrapper, and every function runs on
    the floor (dotprod) and so on the Armv9 tier, whose build the CPU check does not consult a manifest for.
    The same sources compile with the Armv9 flags. cpu_runtime.cpp, triton-cpu's printing runtime, needs LLVM's
    headers and is left out (no TLE op calls it)."""
    src = upstream_source("FLAGTREE_CPU_SRC")
    gxx = require_executable("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")
    cmake = (src / "third_party/cpu/CMakeLists.txt").read_text()
    block = cmake.split('if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")', 1)[1].split("endif()", 1)[0]
    sources = [
        src / "third_party/cpu" / m
        for m in re.findall(r"\$\{CMAKE_CURRENT_SOURCE_DIR\}/(runtime/[\w.]+\.cpp)", block)
    ]
    assert sources, "flagtree-cpu's CMakeLists.txt lists no aarch64 runtime source"
    libraries = {}
    for runtime in (ARMV9_RUNTIME, BASELINE_RUNTIME):
        objects = []
        for source in sources:
            objects.append(tmp_path / runtime.tier / f"{source.stem}.o")
            objects[-1].parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([gxx, "-O2", "-fPIC", "-fopenmp", *runtime.flags, "-c", str(source), "-o",
                            str(objects[-1])], check=True)  # fmt: skip
        libraries[runtime.tier] = tmp_path / runtime.tier / "libTritonCPURuntime.so"
        subprocess.run([gxx, "-shared", "-fopenmp", f"-Wl,-soname,{SONAME}", *map(str, objects), "-o",
                        str(libraries[runtime.tier])], check=True)  # fmt: skip
    done = write_manifest(libraries["baseline"], BASELINE_RUNTIME.march)
    assert done.returncode == 0, done.stderr
    manifest = read_manifest(libraries["baseline"].with_suffix(".isa.json"))
    called = set(TLE_OP_FUNCTIONS.values()) | set(RUNTIME_MODULE_FUNCTIONS.values())
    assert called <= set(manifest.functions), called - set(manifest.functions)
    beyond = {name: sorted(needs.features) for name, needs in manifest.functions.items()
              if not needs.features <= BASELINE_RUNTIME.features}  # fmt: skip
    assert beyond == {}, f"functions that need more than the floor: docs/hardware.md must name them: {beyond}"
    assert manifest.load.features == frozenset()
