/* Stand-in zlib.h of the rehearsal's stub zlib package: the one function its stand-in libz.so.1 exports. */
#ifndef ZLIB_H
#define ZLIB_H
#define ZLIB_VERSION "1.3.1"
const char *zlibVersion(void);
#endif
