"""The LLVM distribution components flagtree-llvm builds and installs: what FlagTree's cpu build links and runs.

build-llvm.sh configures LLVM once with CMake's ``--graphviz`` (the link graph of every target), runs
``python3 llvm_distribution.py GRAPH.dot``, and configures again with the printed list as
``LLVM_DISTRIBUTION_COMPONENTS``; ``install-distribution`` then builds and installs only those.

The list is FlagTree's link libraries closed over LLVM's own link graph: LLVM exports (LLVMExports.cmake,
MLIRTargets.cmake) only the libraries in the distribution, and a static library's export names every library
it links, so a library left out would make CMake stop ("requires target ... that is not in any export set").
The closure comes from the LLVM being built, so a bump of llvm_commit that adds or splits a library needs no
edit here; a library FlagTree links that this LLVM does not build stops the build at configure time.

tests/test_llvm_distribution.py keeps FLAGTREE_LINKS in step with FlagTree's CMake (with FLAGTREE_SRC set).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

# The LLVM and MLIR libraries FlagTree 54d33a53's cpu build links (target_link_libraries, LINK_LIBS and
# DEPENDS of add_triton_library/add_triton_plugin), by the file that names them.
FLAGTREE_LINKS: dict[str, tuple[str, ...]] = {
    # CMakeLists.txt: TRITON_LIBRARIES of the FLAGTREE_BACKEND "cpu" branch, and the aarch64 codegen pair
    # of the CMAKE_SYSTEM_PROCESSOR block (LLVM is built for AArch64 only, see build-llvm.sh).
    "CMakeLists.txt": (
        "MLIRIR",
        "MLIRPass",
        "MLIRTransforms",
        "MLIRSupport",
        "MLIRBytecodeWriter",
        "MLIRLLVMDialect",
        "MLIRTargetLLVMIRExport",
        "MLIRControlFlowToLLVM",
        "MLIRArithToLLVM",
        "MLIRFuncToLLVM",
        "MLIRIndexToLLVM",
        "MLIRSCFToControlFlow",
        "MLIRReconcileUnrealizedCasts",
        "MLIRUBToLLVM",
        "MLIRMathToLLVM",
        "MLIRMathToLibm",
        "MLIRVectorToSCF",
        "MLIRAffineToStandard",
        "MLIRAffineDialect",
        "MLIRVectorDialect",
        "MLIRVectorTransforms",
        "MLIRMemRefToLLVM",
        "MLIRMemRefTransforms",
        "MLIRMemRefDialect",
        "LLVMPasses",
        "LLVMAArch64CodeGen",
        "LLVMAArch64AsmParser",
    ),
    # lib/**/CMakeLists.txt: the Triton libraries (every one is compiled in the cpu build).
    "lib": (
        "MLIRAnalysis",
        "MLIRArithDialect",
        "MLIRMathDialect",
        "MLIRSCFDialect",
        "MLIRTransformUtils",
        "MLIRGPUDialect",
        "MLIRGPUToNVVMTransforms",
        "MLIRGPUToROCDLTransforms",
        "MLIRGPUTransforms",
        "MLIRBuiltinToLLVMIRTranslation",
        "MLIRLLVMToLLVMIRTranslation",
        "MLIRNVVMToLLVMIRTranslation",
        "MLIRROCDLToLLVMIRTranslation",
        # lib/Instrumentation: the PrintLoadStoreMemSpaces pass plugin
        "LLVMCore",
        "LLVMSupport",
        "LLVMTransformUtils",
    ),
    # third_party/tle (the TLE dialect and its plugin); proton/dialect and tle_arm64 add nothing new.
    "third_party/tle": ("MLIRRewrite",),
    # third_party/cpu/python: the host_cpu_llvm plugin.
    "third_party/cpu/python": ("LLVMTargetParser", "LLVMMC", "LLVMIRReader"),
    # flagtree-cpu 19cede7e (linked in as third_party/cpu/*, lib/Dialect/TritonCPU): the TritonCPU plugin
    # (third_party/cpu/CMakeLists.txt), TritonCPUToLLVM, and TritonToTritonCPU's DEPENDS.
    "flagtree-cpu": ("MLIRAMXToLLVMIRTranslation", "MLIRVectorToLLVMPass", "MLIRDialectUtils"),
}

# What FlagTree's CMake runs from the installed LLVM: mlir-tblgen (mlir_tablegen and add_mlir_doc, through
# MLIRConfig.cmake's MLIR_TABLEGEN_EXE). llvm-tblgen is not run by the cpu build, but LLVM builds it anyway
# to generate its own headers, so installing it costs no compile unit.
TOOLS = ("mlir-tblgen", "llvm-tblgen")

# The headers (with the generated .inc files) and the CMake packages, LLVMConfig.cmake and MLIRConfig.cmake
# with their exports files, that find_package(MLIR) reads.
PACKAGE = ("llvm-headers", "mlir-headers", "cmake-exports", "mlir-cmake-exports")

# CMake --graphviz: node lines `"node7" [ label = "MLIRIR", shape = octagon ];`, edge lines
# `"node7" -> "node3" [ style = dotted ] // MLIRIR -> MLIRSupport` (solid public, dashed interface, dotted
# private; a static library exports all three).
_NODE = re.compile(r'^\s*"(?P<id>[^"]+)" \[ label = "(?P<name>[^"]+)", shape = (?P<shape>\w+) \];$')
_EDGE = re.compile(r'^\s*"(?P<source>[^"]+)" -> "(?P<target>[^"]+)"')
# Libraries LLVM builds and exports: static (octagon), shared (doubleoctagon), interface (pentagon).
# Object libraries (hexagon, `obj.X`) are the compile step of X and are followed, not listed; executables
# (egg) and libraries from the system (septagon: pthread, dl, m, rt) are neither.
_EXPORTED = {"octagon", "doubleoctagon", "pentagon"}
_FOLLOWED = _EXPORTED | {"hexagon"}


class GraphError(Exception):
    """The graph lacks a library FlagTree links."""


def flagtree_links() -> list[str]:
    """Every library FlagTree's cpu build links, once, in the order above."""
    return list(dict.fromkeys(name for names in FLAGTREE_LINKS.values() for name in names))


def link_closure(graph: str, wanted: Iterable[str]) -> list[str]:
    """``wanted`` and every library they link, transitively, in the graph's node order."""
    shape: dict[str, str] = {}
    name: dict[str, str] = {}
    links: dict[str, list[str]] = {}
    for line in graph.splitlines():
        if node_line := _NODE.match(line):
            shape[node_line["id"]], name[node_line["id"]] = node_line["shape"], node_line["name"]
        elif edge_line := _EDGE.match(line):
            links.setdefault(edge_line["source"], []).append(edge_line["target"])
    by_name = {label: node for node, label in name.items() if shape[node] in _EXPORTED}
    libraries = list(wanted)
    missing = [library for library in libraries if library not in by_name]
    if missing:
        raise GraphError(f"this LLVM builds no library {', '.join(missing)}")
    seen: set[str] = set()
    todo = [by_name[library] for library in libraries]
    while todo:
        node = todo.pop()
        if node not in seen and shape.get(node) in _FOLLOWED:
            seen.add(node)
            todo.extend(links.get(node, []))
    return [name[node] for node in name if node in seen and shape[node] in _EXPORTED]


def components(graph: str) -> list[str]:
    """The value of LLVM_DISTRIBUTION_COMPONENTS for this LLVM's link graph."""
    return [*link_closure(graph, flagtree_links()), *TOOLS, *PACKAGE]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: llvm_distribution.py GRAPH.dot (the file of cmake --graphviz)", file=sys.stderr)
        return 2
    try:
        print("\n".join(components(Path(argv[0]).read_text())))
    except (OSError, GraphError) as error:
        print(f"llvm_distribution.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
