# shellcheck shell=bash
# Stand-in for what the activation of conda-forge's gxx_linux-aarch64 for linux-64 sets beyond a native one,
# sourced after ../activate-gxx.sh: the build machine's C++ compiler (conda-forge's gxx_impl_linux-64).
export CXX_FOR_BUILD="${CONDA_PREFIX}/bin/${BUILD:-x86_64-conda-linux-gnu}-c++"
