"""recipe/llvm_distribution.py: the LLVM components flagtree-llvm builds follow FlagTree's CMake and LLVM's graph.

The closure is computed on graphs in the format of CMake's ``--graphviz`` (the lines below are copied from the
file CMake 3.25 writes for LLVM 19.1.7; the benchmark and the closing note of issue 13 run it on the real
graph). With ``FLAGTREE_SRC`` set, the libraries FlagTree's cpu build links are read from its CMake files and
compared with the list build-llvm.sh installs; flagtree-cpu's files come from ``FLAGTREE_CPU_SRC`` when set,
else from the record below.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from _recipe_support import dot_graph, llvm_distribution
from _tools import upstream_source

# LLVM and MLIR libraries FlagTree's cpu build can name: LLVM<Component>, MLIR<Component>.
_LIBRARY = re.compile(r"(?:LLVM|MLIR)[A-Za-z0-9]+")
_COMMAND = re.compile(r"(\w+)\s*\(([^()]*)\)")
# Commands whose arguments name what a target links or waits for (DEPENDS, LINK_LIBS, PUBLIC, ...).
_LINKING = {"add_triton_library", "add_triton_plugin", "add_triton_object", "target_link_libraries"}
# Commands whose first argument is a target FlagTree defines itself (LLVMIRIncGen is one of them).
_DEFINING = {"add_triton_library", "add_triton_plugin", "add_public_tablegen_target", "add_library"}
# The folders of FlagTree 54d33a53 the cpu build adds (root CMakeLists.txt): include/ (tablegen targets such
# as LLVMIRIncGen) and lib/ whole, the f2reduce, proton dialect, TLE and tle_arm64 plugins, and the
# host_cpu_llvm plugin.
_FLAGTREE_DIRS = (
    "include",
    "lib",
    "third_party/f2reduce",
    "third_party/proton/dialect",
    "third_party/tle",
    "third_party/tle_arm64",
    "third_party/cpu/python",
)
# flagtree-cpu's folders that the link script puts into FlagTree's tree.
_FLAGTREE_CPU_DIRS = ("third_party/cpu", "lib/Dialect/TritonCPU")

# flagtree-cpu 19cede7e's LLVM/MLIR names, read through the public file index (kevinzs2048/flagtree-cpu; it
# cannot be cloned here). third_party/cpu/lib/TritonCPUTransforms/CMakeLists.txt is not stored at 19cede7e;
# none of its 4 stored versions links an LLVM or MLIR library.
FLAGTREE_CPU_RECORD = {
    # TritonCPU plugin: target_link_libraries(TritonCPU PUBLIC ...); TritonCPURuntime: LLVMSupport
    "third_party/cpu/CMakeLists.txt": {
        "MLIRVectorToSCF",
        "MLIRAffineToStandard",
        "MLIRMathToLibm",
        "MLIRAMXToLLVMIRTranslation",
        "MLIRMemRefTransforms",
        "MLIRReconcileUnrealizedCasts",
        "LLVMSupport",
    },
    "third_party/cpu/lib/TritonCPUToLLVM/CMakeLists.txt": {"MLIRVectorToLLVMPass"},
    # DEPENDS MLIRDialectUtils: a target that must exist in the installed MLIR
    "third_party/cpu/lib/TritonToTritonCPU/CMakeLists.txt": {"MLIRVectorDialect", "MLIRDialectUtils"},
    "third_party/cpu/lib/Analysis/CMakeLists.txt": {"MLIRAnalysis"},
    "lib/Dialect/TritonCPU/IR/CMakeLists.txt": set(),
}


def _uncommented(path: Path) -> str:
    return re.sub(r"#[^\n]*", "", path.read_text())


def _names(words: str) -> set[str]:
    return {word for word in words.split() if _LIBRARY.fullmatch(word)}


def cmake_links(root: Path, folders: tuple[str, ...]) -> set[str]:
    """LLVM/MLIR names the CMake files under ``folders`` link or depend on, less the targets they define."""
    linked: set[str] = set()
    defined: set[str] = set()
    for folder in folders:
        for path in sorted((root / folder).rglob("CMakeLists.txt")):
            if any(part.is_symlink() for part in [path, *path.parents] if part != root):
                continue  # a link into flagtree-cpu, read on its own
            for command, arguments in _COMMAND.findall(_uncommented(path)):
                if command in _DEFINING and arguments.split():
                    defined.add(arguments.split()[0])
                if command in _LINKING or (
                    command == "set" and re.match(r"\w*(LIBS|LIBRARIES)\b", arguments.strip())
                ):
                    linked |= _names(arguments)
    return linked - defined


def flagtree_root_links(root: Path) -> set[str]:
    """CMakeLists.txt: TRITON_LIBRARIES of the cpu branch and the aarch64 pair of the processor block."""
    text = _uncommented(root / "CMakeLists.txt")
    cpu = re.search(r'elseif\(FLAGTREE_BACKEND STREQUAL "cpu"\)\s*set\(TRITON_LIBRARIES([^)]*)\)', text)
    arm = re.search(
        r'if\(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64".*?list\(APPEND TRITON_LIBRARIES([^)]*)\)',
        text,
        re.DOTALL,
    )
    assert cpu and arm, "FlagTree's CMakeLists.txt no longer has the cpu branch or the aarch64 block"
    return _names(cpu[1] + arm[1])


def _checkout(variable: str) -> Path | None:
    value = os.environ.get(variable)
    if not value:
        return None
    path = Path(value)
    assert (path / "CMakeLists.txt").is_file(), f"{variable}={value} is not a source checkout"
    return path


def test_components_follow_flagtree_cmake():
    flagtree = upstream_source("FLAGTREE_SRC")
    cpu_checkout = _checkout("FLAGTREE_CPU_SRC")
    flagtree_cpu = (
        cmake_links(cpu_checkout, _FLAGTREE_CPU_DIRS)
        if cpu_checkout
        else set().union(*FLAGTREE_CPU_RECORD.values())
    )
    expected = flagtree_root_links(flagtree) | cmake_links(flagtree, _FLAGTREE_DIRS) | flagtree_cpu
    listed = llvm_distribution().flagtree_links()
    assert len(listed) == len(set(listed)), "a library is listed twice"
    unlisted, stale = sorted(expected - set(listed)), sorted(set(listed) - expected)
    assert not unlisted, f"FlagTree links {unlisted}: add them to recipe/llvm_distribution.py"
    assert not stale, f"FlagTree no longer links {stale}: drop them from recipe/llvm_distribution.py"


def test_cmake_links_reads_link_lists_and_skips_own_targets(tmp_path):
    (tmp_path / "lib" / "A").mkdir(parents=True)
    (tmp_path / "lib" / "A" / "CMakeLists.txt").write_text(
        "add_public_tablegen_target(LLVMIRIncGen)\n"
        "add_triton_library(TritonA a.cpp  # MLIRCommentedOut\n"
        "  DEPENDS LLVMIRIncGen MLIRDialectUtils\n  LINK_LIBS PUBLIC MLIRIR TritonIR)\n"
        "set(RUNTIME_LIBS LLVMSupport)\nset(OTHER MLIRNotALinkList)\n"
        "mlir_tablegen(Passes.h.inc -gen-pass-decls --name MLIRNotLinked)\n",
    )
    assert cmake_links(tmp_path, ("lib",)) == {"MLIRDialectUtils", "MLIRIR", "LLVMSupport"}


LEGEND_AND_NODES = """digraph "LLVM" {
node [
  fontsize = "12"
];
subgraph clusterLegend {
  legendNode1 [ label = "Static Library", shape = octagon ];
  legendNode0 -> legendNode1 [ style = solid ];
}
    "node1" [ label = "LLVMSupport", shape = octagon ];
    "node2" [ label = "LLVMDemangle", shape = octagon ];
    "node1" -> "node2"  // LLVMSupport -> LLVMDemangle
    "node4" [ label = "dl", shape = septagon ];
    "node1" -> "node4" [ style = dotted ] // LLVMSupport -> dl
    "node116" [ label = "MLIRIR", shape = octagon ];
    "node116" -> "node1"  // MLIRIR -> LLVMSupport
    "node117" [ label = "MLIRSupport", shape = octagon ];
    "node119" [ label = "obj.MLIRIR", shape = hexagon ];
    "node119" -> "node117"  // obj.MLIRIR -> MLIRSupport
    "node116" -> "node119"  // MLIRIR -> obj.MLIRIR
    "node262" [ label = "MLIRSparseTensorEnums", shape = pentagon ];
    "node117" -> "node262" [ style = dashed ] // MLIRSupport -> MLIRSparseTensorEnums
    "node114" [ label = "LTO", shape = doubleoctagon ];
    "node114" -> "node1" [ style = dotted ] // LTO -> LLVMSupport
    "node839" [ label = "verify-uselistorder", shape = egg ];
    "node839" -> "node116" [ style = dotted ] // verify-uselistorder -> MLIRIR
}
"""


def test_link_closure_follows_every_kind_of_link():
    closure = llvm_distribution().link_closure(LEGEND_AND_NODES, ["MLIRIR"])
    # private, public and interface links, through the object library; in the graph's order
    assert closure == ["LLVMSupport", "LLVMDemangle", "MLIRIR", "MLIRSupport", "MLIRSparseTensorEnums"]


def test_link_closure_leaves_out_what_nothing_wanted_links():
    closure = set(llvm_distribution().link_closure(LEGEND_AND_NODES, ["LLVMSupport"]))
    assert closure == {"LLVMSupport", "LLVMDemangle"}  # not dl (the system's), LTO, MLIR or the executable


def test_link_closure_stops_on_a_library_this_llvm_lacks():
    module = llvm_distribution()
    # not there at all, an object library, an executable: none is a library LLVM exports
    wanted = ["MLIRIR", "MLIRGone", "obj.MLIRIR", "verify-uselistorder"]
    with pytest.raises(module.GraphError) as error:
        module.link_closure(LEGEND_AND_NODES, wanted)
    assert str(error.value) == "this LLVM builds no library MLIRGone, obj.MLIRIR, verify-uselistorder"


def test_components_add_the_tools_headers_and_cmake_packages():
    module = llvm_distribution()
    graph = dot_graph(dict.fromkeys(module.flagtree_links(), "octagon"), [])
    components = module.components(graph)
    assert components[: len(module.flagtree_links())] == module.flagtree_links()
    assert components[len(module.flagtree_links()) :] == [
        "mlir-tblgen",
        "llvm-tblgen",
        "llvm-headers",
        "mlir-headers",
        "cmake-exports",
        "mlir-cmake-exports",
    ]


def test_main_prints_one_component_a_line(tmp_path, capsys):
    module = llvm_distribution()
    graph = tmp_path / "graph.dot"
    graph.write_text(dot_graph(dict.fromkeys(module.flagtree_links(), "octagon"), []))
    assert module.main([str(graph)]) == 0
    assert capsys.readouterr().out.splitlines() == module.components(graph.read_text())


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        ([], 2, "usage: llvm_distribution.py GRAPH.dot"),
        (["/nonexistent/graph.dot"], 1, "llvm_distribution.py: [Errno 2] No such file or directory"),
    ],
)
def test_main_says_what_is_wrong_in_one_line(capsys, argv, status, message):
    assert llvm_distribution().main(argv) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(message)
    assert captured.err.count("\n") == 1


def test_main_names_the_libraries_this_llvm_lacks(tmp_path, capsys):
    graph = tmp_path / "graph.dot"
    graph.write_text(LEGEND_AND_NODES)
    assert llvm_distribution().main([str(graph)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("llvm_distribution.py: this LLVM builds no library MLIRPass, MLIRTransforms, ")
    assert error.count("\n") == 1
