#!/usr/bin/env bash
# flagtree-llvm: LLVM + MLIR at FlagTree's cmake/llvm-hash.txt, static, AArch64 target only: only what
# FlagTree's cpu build links and runs, installed into its own prefix, $PREFIX/lib/flagtree-llvm.
# Called by recipe.yaml (rattler-build) and meta.yaml (conda-build, boa) alike; runs without network.
set -euo pipefail

src="${SRC_DIR}/llvm-project"
build="${SRC_DIR}/llvm-build"

# conda's toolchain arguments (compilers, ar/ranlib, find-root), cut into options only where one begins, so a
# prefix under a folder with a space stays one argument (cmake_options.sh); ours, an array, come after them
# and our install prefix wins.
# shellcheck source=cmake_options.sh source-path=SCRIPTDIR
. "${RECIPE_DIR}/cmake_options.sh"
conda_cmake_args=()
mapfile -d '' -t conda_cmake_args < <(split_options "${CMAKE_ARGS:-}")

# The private prefix: conda-forge's llvmdev/mlir/libllvm* install lib/libMLIRIR.a, bin/mlir-tblgen,
# lib/cmake/llvm, ... into $PREFIX itself, so ours goes where no other package writes (as Debian keeps each
# LLVM in /usr/lib/llvm-N). build-flagtree.sh points FlagTree's LLVM_SYSPATH here.
llvm_prefix="${PREFIX}/lib/flagtree-llvm"

# From Triton's prebuilt LLVM instead (llvm_archive_url, upstream's install guide §1.3): the engine unpacked
# it into llvm-archive/ (its top folder stripped); it is installed, not built. llvm_archive_install.py says
# what it keeps and why. Nothing of this machine's is run: in a cross build its tablegens are aarch64
# binaries like those built from source, and build-flagtree.sh runs them under the emulator the same way.
if [[ -d "${SRC_DIR}/llvm-archive" ]]; then
  exec python3 "${RECIPE_DIR}/llvm_archive_install.py" "${SRC_DIR}/llvm-archive" "${llvm_prefix}"
fi

# What libtriton needs and nothing more. AArch64 only: python/src/llvm.cc calls InitializeAllTargets(),
# and libtriton links only the AArch64 CodeGen/AsmParser pair, so any other target left in LLVM would be an
# undefined LLVMInitialize* symbol in libtriton.so (triton issue #7637). Static archives: FlagTree links
# them into libtriton.so, nothing is loaded at run time. zlib/zstd/libxml2/libedit/libpfm off, so the
# archives and their CMake packages name no further libraries that libtriton would have to link (terminfo:
# LLVM has not used it since 19; its configure reports LLVM_ENABLE_TERMINFO as an unused variable).
cmake_args=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DLLVM_ENABLE_PROJECTS=mlir
  -DLLVM_TARGETS_TO_BUILD=AArch64
  -DBUILD_SHARED_LIBS=OFF
  -DLLVM_BUILD_LLVM_DYLIB=OFF
  -DLLVM_LINK_LLVM_DYLIB=OFF
  -DLLVM_ENABLE_ZLIB=OFF
  -DLLVM_ENABLE_ZSTD=OFF
  -DLLVM_ENABLE_LIBXML2=OFF
  -DLLVM_ENABLE_LIBEDIT=OFF
  -DLLVM_ENABLE_LIBPFM=OFF
  -DLLVM_BUILD_TELEMETRY=OFF
  # Tools, utils, tests, benchmarks, examples and docs are not what FlagTree links; the two tablegens it
  # needs are distribution components (below).
  -DLLVM_BUILD_TOOLS=OFF
  -DLLVM_BUILD_UTILS=OFF
  -DLLVM_INSTALL_UTILS=OFF
  -DLLVM_INCLUDE_TESTS=OFF
  -DMLIR_INCLUDE_TESTS=OFF
  -DLLVM_INCLUDE_BENCHMARKS=OFF
  -DLLVM_INCLUDE_EXAMPLES=OFF
  -DLLVM_INCLUDE_DOCS=OFF
  -DMLIR_ENABLE_BINDINGS_PYTHON=OFF
  # FlagTree builds no MLIR aggregate library: the object files of MLIR's C API are not installed.
  -DMLIR_INSTALL_AGGREGATE_OBJECTS=OFF
  -DCMAKE_INSTALL_PREFIX="${llvm_prefix}"
  -DCMAKE_INSTALL_LIBDIR=lib
)
# Reproducible packages (docs/building.md): the build's folder (the engine's work folder SRC_DIR and the
# build and host prefixes beside it), which differs from build to build, is mapped
# out of what the compilers write into the archives (__FILE__ in LLVM's assertion and diagnostic strings).
# A folder with a blank cannot be one flag (CMake splits CFLAGS at blanks); conda's own flags cannot hold one
# either, and flagtree-feedstock never builds in one (builder/output_dir.py, staging_parent).
build_root="$(dirname "${SRC_DIR}")"
if [[ "${build_root}" != *[[:space:]]* ]]; then
  CFLAGS="${CFLAGS:-} -ffile-prefix-map=${build_root}=/usr/src/llvm-build"
  CXXFLAGS="${CXXFLAGS:-} -ffile-prefix-map=${build_root}=/usr/src/llvm-build"
  export CFLAGS CXXFLAGS
fi

# Cross-compiling (build_platform != target_platform, e.g. conda-forge's linux_64 -> linux_aarch64): LLVM runs
# its tablegens while it builds, so they are built first for the build machine, with its compilers, in a
# native sub-build (as conda-forge's triton-feedstock does), and the cross build is pointed at them.
# CMAKE_ARGS, from conda's compiler activation, already carries the cross toolchain (CMAKE_SYSTEM_NAME,
# CMAKE_SYSTEM_PROCESSOR, the find-root path); LLVM's host triple is the target's, not this machine's.
if [[ "${build_platform:-${target_platform}}" != "${target_platform}" ]]; then
  [[ -n "${CC_FOR_BUILD:-}" && -n "${CXX_FOR_BUILD:-}" ]] || {
    echo "build-llvm.sh: cross-compiling needs CC_FOR_BUILD and CXX_FOR_BUILD (conda's cross compilers set them)" >&2
    exit 1
  }
  native="${SRC_DIR}/llvm-build-native"
  cmake -S "${src}/llvm" -B "${native}" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="${CC_FOR_BUILD}" \
    -DCMAKE_CXX_COMPILER="${CXX_FOR_BUILD}" \
    -DLLVM_ENABLE_PROJECTS=mlir \
    -DLLVM_TARGETS_TO_BUILD=AArch64 \
    -DLLVM_ENABLE_ZLIB=OFF \
    -DLLVM_ENABLE_ZSTD=OFF \
    -DLLVM_ENABLE_LIBXML2=OFF
  # The tools LLVM and MLIR run during their own build.
  cmake --build "${native}" --parallel "${CPU_COUNT}" --target \
    llvm-tblgen mlir-tblgen mlir-linalg-ods-yaml-gen mlir-src-sharder mlir-pdll
  cmake_args+=(
    -DCMAKE_CROSSCOMPILING=ON
    -DLLVM_NATIVE_TOOL_DIR="${native}/bin"
    -DLLVM_HOST_TRIPLE="${HOST/conda/unknown}"
    -DLLVM_DEFAULT_TARGET_TRIPLE="${HOST/conda/unknown}"
  )
fi

# Only what FlagTree links and runs is built and installed, through LLVM's distribution mechanism
# (LLVM_DISTRIBUTION_COMPONENTS + install-distribution): a first configure writes LLVM's link graph, from
# which llvm_distribution.py lists FlagTree's libraries with everything they link, the tablegens, the headers
# and the CMake packages; the second configure exports just those, and only those are built. Nothing else
# is installed: no libLTO.so, libRemarks.so or tool LLVM's `all` would build.
mkdir -p "${build}"
printf 'set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)\nset(GRAPHVIZ_GENERATE_DEPENDERS FALSE)\n' \
  >"${build}/CMakeGraphVizOptions.cmake"
cmake -S "${src}/llvm" -B "${build}" "${conda_cmake_args[@]}" "${cmake_args[@]}" \
  --graphviz="${build}/link-graph.dot"
components="$(python3 "${RECIPE_DIR}/llvm_distribution.py" "${build}/link-graph.dot")"
cmake -S "${src}/llvm" -B "${build}" "${conda_cmake_args[@]}" "${cmake_args[@]}" \
  -DLLVM_DISTRIBUTION_COMPONENTS="${components//$'\n'/;}"
cmake --build "${build}" --parallel "${CPU_COUNT}" --target install-distribution
