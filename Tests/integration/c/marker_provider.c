/* A stand-in for a provider the host's OPENSSL_CONF activates (pkcs11-provider configured with
 * libkeyshare-pkcs11.so itself, issue 29): an OpenSSL provider that records, in the file
 * $KS_MARKER_LOG, which libcrypto initialised it ("init OBJECT", the object the core's first
 * dispatch function lives in: the host's libcrypto.so.3, or the module when its own OpenSSL
 * loaded the configuration) and every use of its one algorithm ("used OBJECT"). That algorithm
 * is a SHA2-256 digest whose init fails, so whoever is served by it sees an error too; a
 * configuration that prefers it (default_properties = ?provider=marker) makes a default-context
 * SHA-256 fetch pick it. Built by 92-openssl-isolation.sh as a shared object. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char core_object[512] = "?";

static void record(const char *what) {
    const char *path = getenv("KS_MARKER_LOG");
    if (path == NULL) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    dprintf(fd, "%s %s\n", what, core_object);
    close(fd);
}

static void *md_newctx(void *provctx) { (void)provctx; record("used"); return (void *)1; }
static void md_freectx(void *ctx) { (void)ctx; }
static int md_init(void *ctx, const OSSL_PARAM params[]) { (void)ctx; (void)params; record("used"); return 0; }
static int md_update(void *ctx, const unsigned char *in, size_t n) { (void)ctx; (void)in; (void)n; return 0; }
static int md_final(void *ctx, unsigned char *out, size_t *n, size_t cap) { (void)ctx; (void)out; (void)n; (void)cap; return 0; }
static int md_get_params(OSSL_PARAM params[]) {
    OSSL_PARAM *p = OSSL_PARAM_locate(params, OSSL_DIGEST_PARAM_SIZE);
    if (p != NULL && !OSSL_PARAM_set_size_t(p, 32)) return 0;
    p = OSSL_PARAM_locate(params, OSSL_DIGEST_PARAM_BLOCK_SIZE);
    if (p != NULL && !OSSL_PARAM_set_size_t(p, 64)) return 0;
    return 1;
}

static const OSSL_DISPATCH md_functions[] = {
    {OSSL_FUNC_DIGEST_NEWCTX, (void (*)(void))md_newctx},
    {OSSL_FUNC_DIGEST_FREECTX, (void (*)(void))md_freectx},
    {OSSL_FUNC_DIGEST_INIT, (void (*)(void))md_init},
    {OSSL_FUNC_DIGEST_UPDATE, (void (*)(void))md_update},
    {OSSL_FUNC_DIGEST_FINAL, (void (*)(void))md_final},
    {OSSL_FUNC_DIGEST_GET_PARAMS, (void (*)(void))md_get_params},
    {0, NULL},
};

static const OSSL_ALGORITHM digests[] = {
    {"SHA2-256:SHA-256:SHA256:2.16.840.1.101.3.4.2.1", "provider=marker", md_functions, "marker SHA-256"},
    {NULL, NULL, NULL, NULL},
};

static const OSSL_ALGORITHM *query(void *provctx, int id, int *no_cache) {
    (void)provctx;
    *no_cache = 0;
    return id == OSSL_OP_DIGEST ? digests : NULL;
}

static void teardown(void *provctx) { (void)provctx; }

static const OSSL_DISPATCH provider_functions[] = {
    {OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))query},
    {OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))teardown},
    {0, NULL},
};

int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const OSSL_DISPATCH **out, void **provctx);
int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const OSSL_DISPATCH **out, void **provctx) {
    (void)handle;
    Dl_info info;
    if (in != NULL && in->function != NULL && dladdr((void *)in->function, &info) && info.dli_fname != NULL)
        snprintf(core_object, sizeof core_object, "%s", info.dli_fname);
    record("init");
    *out = provider_functions;
    *provctx = (void *)1;
    return 1;
}
