"""recipe/llvm_distribution.py: the LLVM components flagtree-llvm builds follow FlagTree's CMake and LLVM's graph.

The closure is computed on graphs in the format of CMake's ``--graphviz`` (the lines below are copied from the
file CMake 3.25 writes for LLVM 19.1.7; the benchmark and the closing note of issue 13 run it on the real
graph). With ``FLAGTREE_SRC`` set, the libraries FlagTree's cpu build links are read from its CMake files and
compared with the list build-llvm.sh installs (``flagtree_feedstock.bump.cmake_scan``, which ``flagtree-feedstock
bump`` runs on a new commit); flagtree-cpu's files come from ``FLAGTREE_CPU_SRC`` when set, else from the
scan's record of the pinned flagtree-cpu.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _recipe_support import dot_graph, first_variant, llvm_distribution
from _tools import upstream_source
from flagtree_feedstock.bump.cmake_scan import (
    FLAGTREE_CPU_RECORDS,
    cmake_links,
    expected_llvm_links,
    llvm_list_problems,
)


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
    flagtree_cpu = cpu_checkout or FLAGTREE_CPU_RECORDS[first_variant()["flagtree_cpu_commit"]]
    expected = expected_llvm_links(flagtree, flagtree_cpu)
    assert llvm_list_problems(llvm_distribution().flagtree_links(), expected) == []


def test_the_list_check_names_what_to_add_and_drop():
    problems = llvm_list_problems(["MLIRIR", "MLIRGone", "MLIRIR"], {"MLIRIR", "MLIRNew"})
    assert problems == [
        "a library is listed twice in recipe/llvm_distribution.py",
        "FlagTree links MLIRNew: add them to recipe/llvm_distribution.py",
        "FlagTree no longer links MLIRGone: drop them from recipe/llvm_distribution.py",
    ]


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
