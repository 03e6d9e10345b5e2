#!/usr/bin/env bash
# flagtree-llvm: LLVM + MLIR at FlagTree's cmake/llvm-hash.txt, static, AArch64 target only, into $PREFIX.
# Called by recipe.yaml (rattler-build) and meta.yaml (conda-build, boa) alike; runs without network.
set -euo pipefail

src="${SRC_DIR}/llvm-project"
build="${SRC_DIR}/llvm-build"

# conda's toolchain arguments (compilers, ar/ranlib, find-root); our install prefix comes last and wins.
conda_cmake_args=()
read -r -a conda_cmake_args <<<"${CMAKE_ARGS:-}"

# What libtriton needs and nothing more. AArch64 only: python/src/llvm.cc calls InitializeAllTargets(),
# and libtriton links only the AArch64 CodeGen/AsmParser pair, so any other target left in LLVM would be an
# undefined LLVMInitialize* symbol in libtriton.so (triton issue #7637). Static archives: FlagTree links
# them into libtriton.so, nothing is loaded at run time. zlib/zstd/libxml2/terminfo off, so the archives
# and their CMake packages name no further libraries that libtriton would have to link.
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
  -DLLVM_ENABLE_TERMINFO=OFF
  -DLLVM_ENABLE_LIBEDIT=OFF
  -DLLVM_ENABLE_LIBPFM=OFF
  -DLLVM_BUILD_TELEMETRY=OFF
  # Tools, tests, benchmarks, examples and docs are not what FlagTree links.
  -DLLVM_BUILD_TOOLS=OFF
  -DLLVM_INCLUDE_TESTS=OFF
  -DMLIR_INCLUDE_TESTS=OFF
  -DLLVM_INCLUDE_BENCHMARKS=OFF
  -DLLVM_INCLUDE_EXAMPLES=OFF
  -DLLVM_INCLUDE_DOCS=OFF
  -DMLIR_ENABLE_BINDINGS_PYTHON=OFF
  # ... but FlagTree's CMake runs llvm-tblgen and mlir-tblgen from the install: utils are built and installed.
  -DLLVM_BUILD_UTILS=ON
  -DLLVM_INSTALL_UTILS=ON
  -DCMAKE_INSTALL_PREFIX="${PREFIX}"
  -DCMAKE_INSTALL_LIBDIR=lib
)

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
    -DLLVM_ENABLE_LIBXML2=OFF \
    -DLLVM_ENABLE_TERMINFO=OFF
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

cmake -S "${src}/llvm" -B "${build}" "${conda_cmake_args[@]}" "${cmake_args[@]}"
cmake --build "${build}" --parallel "${CPU_COUNT}"
cmake --install "${build}"
