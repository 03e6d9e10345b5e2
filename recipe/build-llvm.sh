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

# Cross-compiling needs native tablegen first (triton-feedstock's build-native step); issue 6 adds it here.
if [[ "${build_platform:-${target_platform}}" != "${target_platform}" ]]; then
  echo "build-llvm.sh: cross-compiling ${build_platform} -> ${target_platform} is not supported yet" >&2
  exit 1
fi

cmake -S "${src}/llvm" -B "${build}" "${conda_cmake_args[@]}" "${cmake_args[@]}"
cmake --build "${build}" --parallel "${CPU_COUNT}"
cmake --install "${build}"
