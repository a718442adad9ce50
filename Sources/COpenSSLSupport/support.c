// Small C helpers the crypto layer needs from libc that Swift cannot reach cleanly (dladdr is a
// GNU extension), and the one glibc shim the bundled OpenSSL needs (issue 18).
#define _GNU_SOURCE
#include "ks_openssl_support.h"

#include <dlfcn.h>
#include <features.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ks_self_object_dir(char *buf, size_t size) {
    Dl_info info;
    struct link_map *map = NULL;
    char path[PATH_MAX];
    if (buf == NULL || size == 0) return 0;
    if (dladdr1((void *)&ks_self_object_dir, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || map == NULL) return 0;
    if (map->l_prev == NULL || info.dli_fname == NULL || info.dli_fname[0] == '\0') {
        /* The main program (first link map): its name is argv[0], which may be a bare PATH name. */
        ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
        if (len <= 0) return 0;
        path[len] = '\0';
    } else if (realpath(info.dli_fname, path) == NULL) {
        return 0;
    }
    const char *slash = strrchr(path, '/');
    if (slash == NULL) return 0;
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/" itself */
    if (n >= size) return 0;
    memcpy(buf, path, n);
    buf[n] = '\0';
    return 1;
}

int ks_same_object(const void *address) {
    Dl_info self, other;
    if (address == NULL) return 0;
    if (dladdr((void *)&ks_same_object, &self) == 0 || dladdr(address, &other) == 0) return 0;
    return self.dli_fbase == other.dli_fbase;
}

#if !__GLIBC_PREREQ(2, 38)
/// Debian 13's libcrypto.a was compiled against glibc 2.41, whose <stdlib.h> maps strtol to the C23
/// entry point __isoc23_strtol, which differs from strtol only in accepting "0b" prefixes with
/// base 0 or 2 (C23).
/// Debian 12's glibc 2.36 lacks the symbol: it is the only one the archive needs (checked with
/// nm -u). Defined only where glibc does not have it, and never exported from the module (version
/// script), so a host's own strtol is untouched.
long __isoc23_strtol(const char *nptr, char **endptr, int base);
long __isoc23_strtol(const char *nptr, char **endptr, int base) { return strtol(nptr, endptr, base); }
#endif
