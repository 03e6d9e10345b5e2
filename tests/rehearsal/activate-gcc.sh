# shellcheck shell=bash
# Stand-in for the activation of conda-forge's gcc_linux-aarch64 (ctng-compiler-activation-feedstock,
# recipe/activate-gcc.sh), reduced to what a build sources: the toolchain triple, the compiler, binutils and
# flags, and CMAKE_ARGS, for CONDA_BUILD=1 only (no backup and restore of earlier values). Under the engine's
# environment isolation these variables reach the build scripts only through a package's activation.
export HOST=aarch64-conda-linux-gnu
export CONDA_TOOLCHAIN_HOST="${HOST}"
export CONDA_TOOLCHAIN_BUILD="${HOST}"
export build_alias="${HOST}" host_alias="${HOST}"
export CC="${CONDA_PREFIX}/bin/${HOST}-cc" GCC="${CONDA_PREFIX}/bin/${HOST}-gcc"
export CPP="${CC} -E"
export CC_FOR_BUILD="${CC}"
export AR="@REAL_AR@" RANLIB="@REAL_RANLIB@" LD="@REAL_LD@" NM="@REAL_NM@" STRIP="@REAL_STRIP@"
export OBJDUMP="@REAL_OBJDUMP@" AS="@REAL_AS@"
export CONDA_BUILD_SYSROOT="${CONDA_PREFIX}/${HOST}/sysroot"
export CFLAGS="-ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O3 -pipe -isystem ${PREFIX}/include"
export CPPFLAGS="-DNDEBUG -D_FORTIFY_SOURCE=2 -O2 -isystem ${PREFIX}/include"
export LDFLAGS="-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,--disable-new-dtags"
LDFLAGS="${LDFLAGS} -Wl,--gc-sections -Wl,-rpath,${PREFIX}/lib -Wl,-rpath-link,${PREFIX}/lib -L${PREFIX}/lib"
export CMAKE_PREFIX_PATH="${PREFIX}:${CONDA_PREFIX}/${HOST}/sysroot/usr"
CMAKE_ARGS="-DCMAKE_AR=${AR} -DCMAKE_RANLIB=${RANLIB} -DCMAKE_LINKER=${LD} -DCMAKE_STRIP=${STRIP}"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_BUILD_TYPE=Release"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_FIND_ROOT_PATH=${PREFIX};${CONDA_PREFIX}/${HOST}/sysroot"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_INSTALL_PREFIX=${PREFIX} -DCMAKE_INSTALL_LIBDIR=lib"
CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_PROGRAM_PATH=${CONDA_PREFIX}/bin;${PREFIX}/bin"
export CMAKE_ARGS
