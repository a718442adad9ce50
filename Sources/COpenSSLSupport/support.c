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

/* ---- keyshare's OpenSSL library context (issue 29) ---------------------------------------------
 * In-process, the module shares the host's process: a host whose OPENSSL_CONF activates a provider
 * (pkcs11-provider pointing at this very module) or an engine must not have it load into, or serve,
 * the module's own operations. Two layers:
 *  - an OpenSSL that is keyshare's own (linked statically into the module, or the CLI's and the
 *    agent's) never loads a configuration file: OPENSSL_INIT_NO_LOAD_CONFIG before anything else
 *    touches it (a constructor, so no first use can come earlier);
 *  - every keyshare operation runs in a library context of its own (OSSL_LIB_CTX_new, "default"
 *    provider loaded by name), never the default one: with a libcrypto.so shared with the host,
 *    whose default context holds whatever the host's configuration activated, that context is
 *    the only isolation there is. A non-default context never loads a configuration (OpenSSL
 *    loads one only for its default context, crypto/provider_core.c).
 * Checked by Tests/integration/89-openssl-isolation.sh. */
#include <openssl/crypto.h>
#include <openssl/provider.h>
#include <pthread.h>

static int ks_is_main_program(void) {
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1((void *)&ks_is_main_program, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || map == NULL) return 0;
    return map->l_prev == NULL;
}

int ks_openssl_is_own(void) {
    return ks_same_object((const void *)&OpenSSL_version) || ks_is_main_program();
}

__attribute__((constructor)) static void ks_openssl_no_config(void) {
    if (ks_openssl_is_own()) OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
}

static OSSL_LIB_CTX *ks_context;
static pthread_once_t ks_context_once = PTHREAD_ONCE_INIT;

static void ks_context_make(void) {
    OSSL_LIB_CTX *c = OSSL_LIB_CTX_new();
    if (c == NULL) return;
    /* Loaded by name: "default" is built into libcrypto, never a file from a module directory. */
    if (OSSL_PROVIDER_load(c, "default") == NULL) {
        OSSL_LIB_CTX_free(c);
        return;
    }
    ks_context = c;
}

OSSL_LIB_CTX *ks_libctx(void) {
    pthread_once(&ks_context_once, ks_context_make);
    return ks_context;
}
