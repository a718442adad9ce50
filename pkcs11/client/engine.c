/*
 * In-process mode (KEYSHARE_IN_PROCESS=1): the module loads the engine, libkeyshare-engine.so,
 * which holds the store, the tokens and the crypto (and the CLI and agent: docs/architecture.md,
 * "Images"). Looked for next to this module (a build directory) and in ../keyshare/ (the
 * installed layout: /usr/lib/<triplet>/pkcs11/ and /usr/lib/<triplet>/keyshare/), by the
 * module's real path, never by a variable: the engine runs with this process's rights.
 *
 * Loaded once (RTLD_LOCAL: none of its symbols reach the host); the engine is linked
 * -z nodelete, so a host that dlcloses this module leaves it, and its threads, mapped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../abi/include/keyshare_abi.h"

#include "keyshare_client.h"

static const struct ks_engine_pkcs11 *engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void load_engine(void) {
    Dl_info info;
    char self[PATH_MAX], path[PATH_MAX + 64];
    if (dladdr((void *)load_engine, &info) == 0 || info.dli_fname == NULL || realpath(info.dli_fname, self) == NULL) {
        ks_client_note("in-process mode: cannot find this module's own path, so not its engine");
        return;
    }
    char *slash = strrchr(self, '/');
    if (slash == NULL) return;
    *slash = '\0';
    const char *where[] = {"%s/libkeyshare-engine.so", "%s/../keyshare/libkeyshare-engine.so"};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(path, sizeof path, where[i], self);
        if (access(path, F_OK) != 0) continue;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            ks_client_note("in-process mode: cannot load %s: %s", path, dlerror());
            return;
        }
        const struct ks_engine_pkcs11 *(*get)(void) =
            (const struct ks_engine_pkcs11 *(*)(void))dlsym(h, "keyshare_engine_pkcs11_v1");
        if (get == NULL) {
            ks_client_note("in-process mode: %s is not this module's engine (no keyshare_engine_pkcs11_v1)", path);
            return;
        }
        engine = get();
        return;
    }
    ks_client_note("in-process mode: no libkeyshare-engine.so in %s or %s/../keyshare", self, self);
}

const struct ks_engine_pkcs11 *ks_engine(void) {
    pthread_once(&engine_once, load_engine);
    return engine;
}
