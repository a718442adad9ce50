/* The one glibc 2.38 symbol the bundled OpenSSL archive (Debian 13, glibc 2.41) needs on Debian 12:
 * the same shim as Sources/COpenSSLSupport/support.c, for p11bench and initbench linked against the
 * bundle (Makefile, BENCH_BIN). Defined only where glibc lacks it. */
#include <features.h>
#include <stdlib.h>
#if !__GLIBC_PREREQ(2, 38)
long __isoc23_strtol(const char *nptr, char **endptr, int base);
long __isoc23_strtol(const char *nptr, char **endptr, int base) { return strtol(nptr, endptr, base); }
#endif
