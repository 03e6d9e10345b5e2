#!/usr/bin/env bash
# Stand-in for conda-forge's x86_64-conda-linux-gnu-cc / -c++ in a linux-64 -> linux-aarch64 build environment
# (gcc_impl_linux-64, which conda-forge's cross gcc_linux-aarch64 depends on): this machine's own gcc, so what
# it builds runs here. Like ../compiler-wrapper.sh it compiles C only (the stand-ins are C), and it uses
# Debian's glibc, not conda-forge's sysroot_linux-64. The stub package writes the path below.
set -euo pipefail
exec "@REAL_CC@" "$@"
