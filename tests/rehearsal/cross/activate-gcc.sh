# shellcheck shell=bash
# Stand-in for what the activation of conda-forge's gcc_linux-aarch64 *for linux-64* (the cross compiler,
# ctng-compiler-activation-feedstock recipe/activate-gcc.sh with CBUILD x86_64-conda-linux-gnu) sets beyond a
# native one, sourced after ../activate-gcc.sh in the same build environment: the build machine's compiler
# (CC_FOR_BUILD, which conda-forge's gcc_impl_linux-64 provides), the cross-compilation flag, and the target
# system in CMAKE_ARGS (as conda-forge's compiler activations add for a cross build:
# -DCMAKE_SYSTEM_NAME, -DCMAKE_SYSTEM_PROCESSOR). CONDA_BUILD=1 only, no backup and restore.
export BUILD=x86_64-conda-linux-gnu
export CONDA_TOOLCHAIN_BUILD="${BUILD}" build_alias="${BUILD}"
export CC_FOR_BUILD="${CONDA_PREFIX}/bin/${BUILD}-cc"
export CONDA_BUILD_CROSS_COMPILATION=1
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64"
export CMAKE_ARGS
