# shellcheck shell=bash
# Stand-in for the activation of conda-forge's gxx_linux-aarch64 (ctng-compiler-activation-feedstock,
# recipe/activate-g++.sh), reduced to what a build sources (CONDA_BUILD=1): the C++ compiler and its flags.
export CXX="${CONDA_PREFIX}/bin/${HOST:-aarch64-conda-linux-gnu}-c++"
export GXX="${CONDA_PREFIX}/bin/${HOST:-aarch64-conda-linux-gnu}-g++"
export CXX_FOR_BUILD="${CXX}"
export CXXFLAGS="-fvisibility-inlines-hidden -fmessage-length=0 -ftree-vectorize -fPIC -fstack-protector-strong"
CXXFLAGS="${CXXFLAGS} -fno-plt -O3 -pipe -isystem ${PREFIX}/include"
