#!/usr/bin/env bash
# Stand-in for conda-forge's aarch64-conda-linux-gnu-cc / -c++ (gcc_impl_linux-aarch64, gxx_impl_linux-aarch64)
# in the rehearsal's stub channel: Debian's aarch64 cross gcc, with the stub sysroot package as its --sysroot,
# so what the stand-ins compile and link is a real aarch64 ELF, and a library that neither the build/host
# prefixes (-L from LDFLAGS) nor the compiler itself provides fails the link with the linker's own message.
# It cannot show GCC 15's behaviour (it is Debian's GCC 12), compiles C only, and links against Debian's cross
# glibc (2.36), not conda-forge's 2.17 sysroot. The stub package writes the two paths below.
set -euo pipefail
real_cc="@REAL_CC@"
# libstdc++fs.a and the other compiler-provided archives of the stub package (as GCC's own lib folder).
compiler_lib="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/aarch64-conda-linux-gnu/lib"
sysroot="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/aarch64-conda-linux-gnu/sysroot"
exec "${real_cc}" --sysroot="${sysroot}" -L"${compiler_lib}" "$@"
