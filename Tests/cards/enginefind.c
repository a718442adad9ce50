/*
 * enginefind: what `openssl -engine pkcs11` and curl do to a process before
 * they look for a key, then the look-up itself.
 *
 *   enginefind MODULE TOKEN_LABEL
 *
 * Loads libp11's engine with MODULE, calls ENGINE_set_default(e,
 * ENGINE_METHOD_ALL) (as `openssl -engine` does), then opens MODULE
 * directly, logs in to TOKEN_LABEL with the PIN in $KEYSHARE_TEST_PIN and
 * counts the private keys C_FindObjects({CKA_CLASS = CKO_PRIVATE_KEY})
 * returns: prints "private keys: N". keyshare's mirror used to parse a card's
 * EC public key through OpenSSL in this process, where the engine's EC
 * method made that fail, and dropped the card's EC key pair.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/engine.h>
#include <p11-kit-1/p11-kit/pkcs11.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: enginefind MODULE TOKEN_LABEL\n"); return 2; }
    const char *pin = getenv("KEYSHARE_TEST_PIN");
    if (!pin) { fprintf(stderr, "enginefind: $KEYSHARE_TEST_PIN is not set\n"); return 2; }
    ENGINE_load_builtin_engines();
    ENGINE *e = ENGINE_by_id("pkcs11");
    if (!e) { fprintf(stderr, "enginefind: no pkcs11 engine (libengine-pkcs11-openssl)\n"); return 2; }
    if (!ENGINE_ctrl_cmd_string(e, "MODULE_PATH", argv[1], 0) || !ENGINE_init(e)) {
        fprintf(stderr, "enginefind: the engine did not start\n");
        return 2;
    }
    if (!ENGINE_set_default(e, ENGINE_METHOD_ALL)) { fprintf(stderr, "enginefind: ENGINE_set_default failed\n"); return 2; }

    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    CK_RV (*get)(CK_FUNCTION_LIST_PTR_PTR) = (CK_RV (*)(CK_FUNCTION_LIST_PTR_PTR))dlsym(lib, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f;
    if (!get || get(&f) != CKR_OK) { fprintf(stderr, "enginefind: no function list\n"); return 2; }
    CK_RV rv = f->C_Initialize(NULL);
    if (rv != CKR_OK && rv != CKR_CRYPTOKI_ALREADY_INITIALIZED) { fprintf(stderr, "enginefind: C_Initialize 0x%lx\n", rv); return 2; }
    CK_SLOT_ID slots[64];
    CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) { fprintf(stderr, "enginefind: C_GetSlotList failed\n"); return 2; }
    CK_SESSION_HANDLE s = CK_INVALID_HANDLE;
    size_t len = strlen(argv[2]);
    for (CK_ULONG i = 0; i < n && s == CK_INVALID_HANDLE; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        if (len <= 32 && memcmp(ti.label, argv[2], len) == 0 && (len == 32 || ti.label[len] == ' '))
            f->C_OpenSession(slots[i], CKF_SERIAL_SESSION, NULL, NULL, &s);
    }
    if (s == CK_INVALID_HANDLE) { fprintf(stderr, "enginefind: no token %s\n", argv[2]); return 2; }
    rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, (CK_ULONG)strlen(pin));
    if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) { fprintf(stderr, "enginefind: C_Login 0x%lx\n", rv); return 2; }
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}};
    CK_OBJECT_HANDLE found[64];
    CK_ULONG count = 0;
    if (f->C_FindObjectsInit(s, t, 1) != CKR_OK || f->C_FindObjects(s, found, 64, &count) != CKR_OK) {
        fprintf(stderr, "enginefind: find failed\n");
        return 2;
    }
    f->C_FindObjectsFinal(s);
    printf("private keys: %lu\n", count);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    ENGINE_finish(e);
    ENGINE_free(e);
    return 0;
}
