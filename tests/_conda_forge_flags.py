"""conda-forge's compiler flags for linux-aarch64, as its GCC activation sets them in every build.

Copied from conda-forge/ctng-compiler-activation-feedstock, ``recipe/build_scripts.sh`` at 52080ff3c700
(2026-07-29): ``FINAL_CFLAGS_linux_aarch64``, ``FINAL_CXXFLAGS_linux_aarch64``, ``FINAL_CPPFLAGS`` and
``FINAL_LDFLAGS_linux_aarch64``, which its ``activate-gcc.sh``/``activate-g++.sh`` export as CFLAGS, CXXFLAGS,
CPPFLAGS and LDFLAGS (with ``-isystem $PREFIX/include`` and debug-prefix maps, which change no instruction).
``-fno-plt`` is the one that matters to the runtime manifest: calls between exported functions go through the
GOT.
"""

from __future__ import annotations

CFLAGS = ("-ftree-vectorize", "-fPIC", "-fstack-protector-strong", "-fno-plt", "-O3", "-pipe")
CXXFLAGS = ("-fvisibility-inlines-hidden", "-std=c++17", "-fmessage-length=0", *CFLAGS)
CPPFLAGS = ("-DNDEBUG", "-D_FORTIFY_SOURCE=2", "-O2")
LDFLAGS = (
    "-Wl,-O2",
    "-Wl,--sort-common",
    "-Wl,--as-needed",
    "-Wl,-z,relro",
    "-Wl,-z,now",
    "-Wl,--allow-shlib-undefined",
)
