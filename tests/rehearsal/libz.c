/* A stand-in for zlib's libz.so.1 in the stub channel's libzlib package: a real aarch64 shared library with
 * zlib's soname and version entry point, so `-lz` resolves against it (or fails without it) as with zlib. */
const char *zlibVersion(void) { return "1.3.1"; }
