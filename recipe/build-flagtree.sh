#!/usr/bin/env bash
# flagtree-cpu: FlagTree with FLAGTREE_BACKEND=cpu against flagtree-llvm (in $PREFIX/lib/flagtree-llvm), one
# python at a time.
# Called by recipe.yaml (rattler-build) and meta.yaml (conda-build, boa) alike; runs without network: every
# source was fetched and patched by the engine before this script starts.
set -euo pipefail

die() {
  echo "build-flagtree.sh: $*" >&2
  exit 1
}

cd "${SRC_DIR}"
# flagtree-cpu sits inside FlagTree's third_party/ (not at third_party/triton-cpu: the link script makes
# that a symlink and refuses a real folder there).
cpu_rel="third_party/flagtree-cpu"
cpu_src="${SRC_DIR}/${cpu_rel}"
sleef_src="${SRC_DIR}/sleef"
# Scratch space of this build, all inside the work folder.
scratch="${SRC_DIR}/_flagtree_build"
mkdir -p "${scratch}"

# Fail in seconds, not after the compile, on a source tree that is not the one the recipe describes.
[[ -f python/setup.py && -f python/scripts/link_flagtree_cpu.sh ]] || die "SRC_DIR is not a FlagTree tree"
[[ -f "${cpu_src}/third_party/cpu/CMakeLists.txt" ]] || die "no flagtree-cpu source at ${cpu_src}"
[[ -f "${sleef_src}/CMakeLists.txt" ]] || die "no sleef source at ${sleef_src}"
for licence in LICENSE "${cpu_rel}/LICENSE" sleef/LICENSE.txt; do
  [[ -f "${licence}" ]] || die "licence file ${licence} (about.license_file) is missing"
done

# flagtree-llvm's own prefix (build-llvm.sh), apart from conda-forge's llvmdev/mlir, which use $PREFIX itself.
llvm_prefix="${PREFIX}/lib/flagtree-llvm"

# split_options (conda's CMAKE_ARGS, cut where an option begins) and shell_words (for setup.py's shlex.split).
# shellcheck source=cmake_options.sh source-path=SCRIPTDIR
. "${RECIPE_DIR}/cmake_options.sh"

# Cross-compiling: FlagTree's CMake does not see conda's CMAKE_ARGS, and its aarch64 -march block and LLVM
# link list follow CMAKE_SYSTEM_PROCESSOR, so the cross toolchain goes in through TRITON_APPEND_CMAKE_ARGS
# (below). FlagTree runs flagtree-llvm's mlir-tblgen, which is a target binary: CMake runs it through the
# emulator it is given (CMAKE_CROSSCOMPILING_EMULATOR, below), so check first that it runs that way. Through
# the emulator, not directly: that needs no qemu registered with binfmt_misc (a container often has none).
cross_cmake_args=()
if [[ "${build_platform:-${target_platform}}" != "${target_platform}" ]]; then
  [[ -n "${CROSSCOMPILING_EMULATOR:-}" ]] \
    || die "cross-compiling ${build_platform} -> ${target_platform} needs CROSSCOMPILING_EMULATOR (qemu-user)"
  # The target's loader and libraries, for binaries qemu-user runs.
  export QEMU_LD_PREFIX="${QEMU_LD_PREFIX:-${BUILD_PREFIX:-}/${HOST:-}/sysroot}"
  "${CROSSCOMPILING_EMULATOR}" "${llvm_prefix}/bin/mlir-tblgen" --version >/dev/null \
    || die "flagtree-llvm's mlir-tblgen does not run under ${CROSSCOMPILING_EMULATOR}" \
      "(QEMU_LD_PREFIX=${QEMU_LD_PREFIX})"
  # sleef runs helpers it builds (mkrename, mkalias, mkdisp, addSuffix) while it builds; cross-compiling,
  # it takes them from ${NATIVE_BUILD_DIR}/bin instead (its CMakeLists.txt, add_host_executable). They are
  # built first for this machine, from the same sleef source with the options flagtree-cpu gives it, and
  # without conda's flags, which are the target's.
  [[ -n "${CC_FOR_BUILD:-}" ]] || die "cross-compiling needs CC_FOR_BUILD (conda's cross compilers set it)"
  sleef_native="${scratch}/sleef-native"
  CFLAGS="" CPPFLAGS="" LDFLAGS="" cmake -S "${sleef_src}" -B "${sleef_native}" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="${CC_FOR_BUILD}" -DSLEEF_BUILD_TESTS=OFF \
    -DSLEEF_BUILD_DFT=OFF -DSLEEF_BUILD_GNUABI_LIBS=OFF -DSLEEF_BUILD_SCALAR_LIB=OFF
  cmake --build "${sleef_native}" --target mkrename mkalias mkdisp addSuffix
  mapfile -d '' -t cross_cmake_args < <(split_options "${CMAKE_ARGS:-}")
  cross_cmake_args+=("-DCMAKE_CROSSCOMPILING_EMULATOR=${CROSSCOMPILING_EMULATOR}")
  cross_cmake_args+=("-DNATIVE_BUILD_DIR=${sleef_native}")
fi

# sleef: flagtree-cpu's third_party/sleef submodule, as the engine checked it out, is replaced by a copy of
# the recipe's own pinned sleef source, so the sleef that is built is the one sleef_commit names. A copy: the
# engines collect sleef/LICENSE.txt (about.license_file) after this script.
rm -rf "${cpu_src}/third_party/sleef"
cp -a "${sleef_src}" "${cpu_src}/third_party/sleef"

# The 12 symlinks FlagTree's CPU build expects, made by upstream's own script from the local flagtree-cpu
# tree (given relative to SRC_DIR, the folder it runs from): with --flagtree-cpu-path it neither clones
# nor fetches.
bash python/scripts/link_flagtree_cpu.sh --flagtree-cpu-path "${cpu_rel}"

# LLVM: flagtree-llvm, from the host prefix. LLVM_SYSPATH stops setup.py's LLVM download; setup.py gives
# CMake LLVM_SYSPATH/include and LLVM_SYSPATH/lib (FlagTree's CMakeLists.txt finds MLIR in lib/cmake/mlir).
export LLVM_SYSPATH="${llvm_prefix}"
export LLVM_INCLUDE_DIRS="${llvm_prefix}/include"
export LLVM_LIBRARY_DIR="${llvm_prefix}/lib"

# Offline. `1`, not `ON`: FlagTree's own OfflineBuildManager treats only `ON` as its offline mode and then
# wants a folder of NVIDIA toolkits (FLAGTREE_OFFLINE_BUILD_DIR, which must stay unset).
export TRITON_OFFLINE_BUILD=1
unset FLAGTREE_OFFLINE_BUILD_DIR
# setup.py downloads NVIDIA tools at import time, for every backend, unless each variable is set; only their
# presence is tested, so they point at an empty folder that exists.
no_nvidia="${scratch}/no-nvidia"
mkdir -p "${no_nvidia}"
export TRITON_PTXAS_PATH="${no_nvidia}"
export TRITON_CUOBJDUMP_PATH="${no_nvidia}"
export TRITON_NVDISASM_PATH="${no_nvidia}"
export TRITON_CUDACRT_PATH="${no_nvidia}"
export TRITON_CUDART_PATH="${no_nvidia}"
export TRITON_CUPTI_INCLUDE_PATH="${no_nvidia}"
export TRITON_CUPTI_LIB_PATH="${no_nvidia}"
# Proton is not part of the CPU build; setup.py reads this from the environment (else it fetches json).
export TRITON_BUILD_PROTON=OFF

# Caches setup.py and FlagTree's helpers write ($HOME/.triton, $HOME/.flagtree by default) stay in the work dir.
export TRITON_HOME="${scratch}/triton-home"
export FLAGTREE_CACHE_DIR="${scratch}/flagtree-cache"

# The CPU backend; the root CMakeLists.txt reads it from the environment.
export FLAGTREE_BACKEND=cpu
export MAX_JOBS="${CPU_COUNT}"

# Compiler cache: FlagTree's CMake puts ccache (a build requirement) in front of the compilers unless
# TRITON_BUILD_WITH_CCACHE is OFF. On only where CCACHE_DIR names a cache (CI keeps one between runs).
# Every build has a new folder holding the work folder and the prefixes, so paths under it are hashed
# relative to it (CCACHE_BASEDIR), the compilers, freshly installed each time, by their content, and the
# working folder not at all (it would only name the debug info's folder, and -Wl,-S drops debug info).
if [[ -n "${CCACHE_DIR:-}" ]]; then
  export CCACHE_DIR TRITON_BUILD_WITH_CCACHE=ON CCACHE_BASEDIR="${SRC_DIR%/*}"
  export CCACHE_COMPILERCHECK=content CCACHE_NOHASHDIR=1
  mkdir -p "${CCACHE_DIR}"
  ccache --zero-stats >/dev/null
else
  export TRITON_BUILD_WITH_CCACHE=OFF
fi

# `cmake --install` of the build (sleef's install rules) goes into the work dir, never /usr/local or $PREFIX;
# last, so it wins over the -DCMAKE_INSTALL_PREFIX that conda's CMAKE_ARGS carries in a cross build. setup.py
# reads this variable with shlex.split: each argument is quoted, so a path with a space stays one.
TRITON_APPEND_CMAKE_ARGS="$(shell_words "${cross_cmake_args[@]}" "-DCMAKE_INSTALL_PREFIX=${scratch}/cmake-install")"
export TRITON_APPEND_CMAKE_ARGS

# The wheel's version is the package's (setup.py's own default says 0.5.0).
export FLAGTREE_WHEEL_VERSION="${PKG_VERSION}"

# No debug info: drop -g from conda's flags, and strip what FlagTree's TritonRelBuildWithAsserts build type
# (-O2 -g) compiles in at link time.
strip_g() {
  local flag flags=() kept=()
  read -r -a flags <<<"$1"
  for flag in "${flags[@]}"; do
    [[ "${flag}" == -g* ]] || kept+=("${flag}")
  done
  echo "${kept[*]}"
}
# Reproducible packages (docs/building.md): the build's folder (the engine's work folder SRC_DIR and the
# build and host prefixes beside it), which differs from build to build, is mapped
# out of what the compilers write into objects (__FILE__, assertion messages, any debug line left).
prefix_maps="-ffile-prefix-map=$(dirname "${SRC_DIR}")=/usr/src/flagtree-build"
CFLAGS="$(strip_g "${CFLAGS:-}") ${prefix_maps}"
CXXFLAGS="$(strip_g "${CXXFLAGS:-}") ${prefix_maps}"
LDFLAGS="${LDFLAGS:-} -Wl,-S"
export CFLAGS CXXFLAGS LDFLAGS

# setup.py appends `.git<sha8>` to FLAGTREE_WHEEL_VERSION when `git rev-parse` works in the tree (the engines
# keep FlagTree's .git), which is not a PEP 440 version: hide the checkout from git for this step.
cd python
GIT_DIR="${scratch}/no-git" "${PYTHON}" -m pip install . --no-deps --no-build-isolation --no-index -vv
if [[ "${TRITON_BUILD_WITH_CCACHE}" == ON ]]; then
  # This build's hits and misses: into the build log, and beside the cache for CI's job summary.
  echo "build-flagtree.sh: compiler cache ${CCACHE_DIR}, this build:"
  ccache --show-stats | tee "${CCACHE_DIR}/flagtree-cpu-build-stats.txt"
fi

# What each exported function of the baseline runtime (patch 0010) needs, read from its instructions with the
# toolchain's objdump and checked against its assembler (runtime_manifest.py), written beside it: the CPU
# check refuses, naming the op and the missing feature, a call this CPU cannot run. The -march is recorded as
# patch 0010 sets it.
baseline_runtime="${SP_DIR}/triton/_C/baseline/libTritonCPURuntime.so"
[[ -f "${baseline_runtime}" ]] || die "the baseline runtime ${baseline_runtime} was not built (patch 0010)"
baseline_march="$(sed -nE 's/^ *set\(FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS -march=([^ )]+)\)$/\1/p' \
  "${SRC_DIR}/CMakeLists.txt")"
[[ -n "${baseline_march}" ]] || die "CMakeLists.txt sets no FLAGTREE_CPU_RUNTIME_BASELINE_FLAGS (patch 0010)"
manifest_args=(
  "${baseline_runtime}"
  --objdump "${OBJDUMP:-${HOST:-aarch64-conda-linux-gnu}-objdump}"
  --as "${AS:-${HOST:-aarch64-conda-linux-gnu}-as}"
  --march "${baseline_march}"
)
"${PYTHON}" "${RECIPE_DIR}/runtime_manifest.py" "${manifest_args[@]}"

# Activation scripts for the JIT's variables (FLAGTREE_BACKEND, TRITON_SYS_PATH, CC); named after the package.
for kind in activate deactivate; do
  mkdir -p "${PREFIX}/etc/conda/${kind}.d"
  for shell_ext in sh fish; do
    cp "${RECIPE_DIR}/${kind}.${shell_ext}" "${PREFIX}/etc/conda/${kind}.d/flagtree-cpu_${kind}.${shell_ext}"
  done
done

# What the package must hold; the sleef install step left nothing in the prefix.
for lib in libtriton.so libTritonCPURuntime.so libsleef.so baseline/libTritonCPURuntime.isa.json; do
  [[ -e "${SP_DIR}/triton/_C/${lib}" ]] || die "${lib} is missing from ${SP_DIR}/triton/_C"
done
[[ ! -e "${PREFIX}/include/sleef.h" ]] || die "sleef installed its headers into PREFIX"
