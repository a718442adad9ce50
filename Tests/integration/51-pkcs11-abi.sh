#!/usr/bin/env bash
# The C ABI sweep: a small C host dlopens the module and calls every entry
# point with NULLs, bad handles and hostile lengths (before and after
# C_Initialize), checks the interface getters, threads and fork. The module
# must never crash the host. Usage: 51-pkcs11-abi.sh MODULE (or KEYSHARE MODULE).
set -euo pipefail
MODULE=${2:-${1:?module path}}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-abi.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# A token with an EC key for the threaded signing check.
# PINs reach pkcs11-tool through the environment (--pin env:VAR), never argv.
export PIN=0000 SOPIN=1234  # abi.c below logs in with the same PIN
P=(pkcs11-tool --module "$MODULE")
"${P[@]}" --init-token --label abi --so-pin env:SOPIN --slot 1 >/dev/null
"${P[@]}" --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN --token-label abi >/dev/null
openssl pkey -in "$FIXTURES/identities/auth-upn-new.key.pem" -outform DER -out "$WORK/ec.der"
"${P[@]}" --token-label abi --login --pin env:PIN --write-object "$WORK/ec.der" --type privkey --id 02 --label ec >/dev/null

cat > "$WORK/abi.c" <<'EOF'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pkcs11_shim.h"
#include "pkcs11_3_2.h"

static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)

typedef CK_RV (*any_fn)(CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG);
static CK_FUNCTION_LIST_3_0 *f;
static CK_SLOT_ID token_slot;

/* Every entry with all-zero arguments (NULL pointers, handle 0); all are integer-class on x86-64. */
static int sweep(CK_RV expect_all, int skip_lifecycle) {
    void **e = (void **)((char *)f + offsetof(CK_FUNCTION_LIST_3_0, C_Initialize));
    size_t n = (sizeof(*f) - offsetof(CK_FUNCTION_LIST_3_0, C_Initialize)) / sizeof(void *);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        void *fn = e[i];
        if (fn == (void *)f->C_GetFunctionList || fn == (void *)f->C_GetInterfaceList || fn == (void *)f->C_GetInterface)
            continue;
        if (skip_lifecycle && (fn == (void *)f->C_Initialize || fn == (void *)f->C_Finalize))
            continue;
        if (fn == (void *)f->C_Initialize) continue;           /* NULL args would initialise */
        CK_RV rv = ((any_fn)fn)(0, 0, 0, 0, 0, 0, 0, 0, 0);
        if (expect_all != (CK_RV)-1 && rv != expect_all) { printf("  entry %zu: 0x%lx\n", i, rv); bad++; }
        if (expect_all == (CK_RV)-1 && rv == CKR_OK && fn != (void *)f->C_GetSlotList) { printf("  entry %zu: CKR_OK on zeros\n", i); bad++; }
    }
    return bad;
}

static void *signer(void *arg) {
    (void)arg;
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(token_slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return (void *)1;
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}};
    CK_OBJECT_HANDLE key; CK_ULONG found = 0;
    f->C_FindObjectsInit(s, t, 1); f->C_FindObjects(s, &key, 1, &found); f->C_FindObjectsFinal(s);
    if (found != 1) return (void *)2;
    CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
    for (int i = 0; i < 40; i++) {
        unsigned char sig[132]; CK_ULONG want = 0, len = sizeof sig;
        if (f->C_SignInit(s, &m, key) != CKR_OK) return (void *)3;
        if (f->C_Sign(s, (CK_BYTE_PTR)"data", 4, NULL, &want) != CKR_OK || want == 0 || want > sizeof sig) return (void *)6;
        if (f->C_Sign(s, (CK_BYTE_PTR)"data", 4, sig, &len) != CKR_OK || len != want) return (void *)4;
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(token_slot, &ti) != CKR_OK) return (void *)5;
    }
    f->C_CloseSession(s);
    return NULL;
}

int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("FAIL - dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_C_GetInterfaceList gil = (CK_C_GetInterfaceList)dlsym(h, "C_GetInterfaceList");
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(h, "C_GetInterface");
    CHECK("three getters resolve", gfl && gil && gi);
    CHECK("C_GetFunctionList(NULL)", gfl(NULL) == CKR_ARGUMENTS_BAD);
    CK_FUNCTION_LIST_PTR l2; CHECK("C_GetFunctionList gives 2.40", gfl(&l2) == CKR_OK && l2->version.major == 2 && l2->version.minor == 40);
    CK_ULONG n = 0; CHECK("interface count", gil(NULL, &n) == CKR_OK && n == 3);
    CK_INTERFACE ifs[3]; n = 2; CHECK("interface list too small", gil(ifs, &n) == CKR_BUFFER_TOO_SMALL && n == 3);
    CHECK("interface list NULL count", gil(ifs, NULL) == CKR_ARGUMENTS_BAD);
    n = 3; CHECK("interface list", gil(ifs, &n) == CKR_OK && strcmp((char *)ifs[0].pInterfaceName, "PKCS 11") == 0);
    /* PKCS #11 3.2 first, then 3.0, then 2.40 (issue 18). */
    CHECK("interface list order: 3.2, 3.0, 2.40", n == 3 &&
          ((CK_VERSION *)ifs[0].pFunctionList)->major == 3 && ((CK_VERSION *)ifs[0].pFunctionList)->minor == 2 &&
          ((CK_VERSION *)ifs[1].pFunctionList)->major == 3 && ((CK_VERSION *)ifs[1].pFunctionList)->minor == 0 &&
          ((CK_VERSION *)ifs[2].pFunctionList)->major == 2 && ((CK_VERSION *)ifs[2].pFunctionList)->minor == 40);
    CK_INTERFACE_PTR ip;
    CHECK("C_GetInterface default is 3.2", gi(NULL, NULL, &ip, 0) == CKR_OK &&
          ((CK_VERSION *)ip->pFunctionList)->major == 3 && ((CK_VERSION *)ip->pFunctionList)->minor == 2);
    void *dflt = ip->pFunctionList;
    CK_VERSION v30 = {3, 0}, v32 = {3, 2};
    CK_INTERFACE_PTR ip30 = NULL, ip32 = NULL;
    CHECK("C_GetInterface 3.0 by version", gi((CK_UTF8CHAR_PTR)"PKCS 11", &v30, &ip30, 0) == CKR_OK &&
          ((CK_VERSION *)ip30->pFunctionList)->minor == 0);
    CHECK("C_GetInterface 3.2 by version", gi((CK_UTF8CHAR_PTR)"PKCS 11", &v32, &ip32, 0) == CKR_OK && ip32->pFunctionList == dflt);
    /* Only a table that says 3.2 is read as one (an older module's would be read past its end). */
    CK_FUNCTION_LIST_3_2 *f32 = ip32 != NULL && ((CK_VERSION *)ip32->pFunctionList)->minor == 2 ? ip32->pFunctionList : NULL;
    int nulls32 = 0;
    for (void **p = f32 ? (void **)&f32->C_Initialize : NULL; f32 && p <= (void **)&f32->C_UnwrapKeyAuthenticated; p++) nulls32 += *p == NULL;
    CHECK("no NULL entry in the 3.2 table", f32 != NULL && nulls32 == 0);
    fflush(stdout);
    CK_VERSION v240 = {2, 40};
    CHECK("C_GetInterface 2.40", gi((CK_UTF8CHAR_PTR)"PKCS 11", &v240, &ip, 0) == CKR_OK && ip->pFunctionList == (void *)l2);
    CHECK("C_GetInterface unknown name", gi((CK_UTF8CHAR_PTR)"Vendor", NULL, &ip, 0) == CKR_ARGUMENTS_BAD);
    CHECK("C_GetInterface fork-safe not offered", gi(NULL, NULL, &ip, CKF_INTERFACE_FORK_SAFE) == CKR_ARGUMENTS_BAD);
    CHECK("C_GetInterface NULL out", gi(NULL, NULL, NULL, 0) == CKR_ARGUMENTS_BAD);
    /* The 3.0 interface, as before: the sweeps below cover its entries; the 3.2 ones after. */
    f = ip30->pFunctionList;
    int nulls = 0;
    for (void **p = (void **)&f->C_Initialize; p <= (void **)&f->C_MessageVerifyFinal; p++) nulls += *p == NULL;
    CHECK("no NULL entry in the 3.0 table", nulls == 0);
    CHECK("2.40 and 3.0 tables agree", l2->C_Sign == f->C_Sign && l2->C_WaitForSlotEvent == f->C_WaitForSlotEvent);

    CHECK("every call before C_Initialize: NOT_INITIALIZED", sweep(CKR_CRYPTOKI_NOT_INITIALIZED, 0) == 0);

    CK_C_INITIALIZE_ARGS bad = {0}; bad.pReserved = (void *)1;
    CHECK("C_Initialize reserved != NULL", f->C_Initialize(&bad) == CKR_ARGUMENTS_BAD);
    CK_C_INITIALIZE_ARGS half = {0}; half.CreateMutex = (CK_CREATEMUTEX)1;
    CHECK("C_Initialize partial callbacks", f->C_Initialize(&half) == CKR_ARGUMENTS_BAD);
    CK_C_INITIALIZE_ARGS os = {0}; os.flags = CKF_OS_LOCKING_OK;
    CHECK("C_Initialize OS locking", f->C_Initialize(&os) == CKR_OK);
    CHECK("C_Initialize twice", f->C_Initialize(NULL) == CKR_CRYPTOKI_ALREADY_INITIALIZED);

    CHECK("zero-argument sweep after init never crashes nor succeeds", sweep((CK_RV)-1, 1) == 0);

    /* PKCS #11 3.2 (issue 18): C_GetInfo says 3.2 only through the 3.2 table; hosts asking for 3.0 or
     * 2.40 see 3.0 as before. Its twelve new entries answer CKR_FUNCTION_NOT_SUPPORTED for now. */
    CK_INFO gi32, gi30, gi240;
    CHECK("C_GetInfo through 3.2 reports 3.2", f32 != NULL && f32->C_GetInfo(&gi32) == CKR_OK &&
          gi32.cryptokiVersion.major == 3 && gi32.cryptokiVersion.minor == 2);
    CHECK("C_GetInfo through 3.0 reports 3.0", f->C_GetInfo(&gi30) == CKR_OK &&
          gi30.cryptokiVersion.major == 3 && gi30.cryptokiVersion.minor == 0);
    CHECK("C_GetInfo through 2.40 reports 3.0", l2->C_GetInfo(&gi240) == CKR_OK &&
          gi240.cryptokiVersion.major == 3 && gi240.cryptokiVersion.minor == 0);
    CHECK("3.2 and 3.0 tables share the 3.0 entries", f32 != NULL && f32->C_Sign == f->C_Sign && f32->C_MessageVerifyFinal == f->C_MessageVerifyFinal);
    /* The 3.2 entries not served yet answer CKR_FUNCTION_NOT_SUPPORTED; the served ones (encapsulation:
     * 33-pq.sh; verify, validation flags, authenticated wrapping: 74-pkcs11-3-2.sh) check the session first. */
    int unsupported = 0, session_first = 0;
    for (void **p = f32 ? (void **)&f32->C_EncapsulateKey : NULL; f32 && p <= (void **)&f32->C_UnwrapKeyAuthenticated; p++) {
        CK_RV rv32 = ((any_fn)*p)(0, 0, 0, 0, 0, 0, 0, 0, 0);
        unsupported += rv32 == CKR_FUNCTION_NOT_SUPPORTED;
        session_first += rv32 == CKR_SESSION_HANDLE_INVALID;
    }
    CHECK("the 3.2 entries not served yet (async): CKR_FUNCTION_NOT_SUPPORTED", unsupported == 3);
    CHECK("the served 3.2 entries, session 0: CKR_SESSION_HANDLE_INVALID", session_first == 9);

    CK_SLOT_ID slots[8]; n = 0;
    CHECK("slot count", f->C_GetSlotList(CK_TRUE, NULL, &n) == CKR_OK && n == 2);
    n = 1; CHECK("slot list too small", f->C_GetSlotList(CK_TRUE, slots, &n) == CKR_BUFFER_TOO_SMALL && n == 2);
    n = 8; f->C_GetSlotList(CK_TRUE, slots, &n); token_slot = slots[0];
    CK_SESSION_HANDLE s;
    CHECK("open session", f->C_OpenSession(token_slot, CKF_SERIAL_SESSION, NULL, NULL, &s) == CKR_OK);
    CHECK("GenerateRandom NULL buffer", f->C_GenerateRandom(s, NULL, 16) == CKR_ARGUMENTS_BAD);
    CHECK("GenerateRandom huge length", f->C_GenerateRandom(s, (CK_BYTE_PTR)&n, (CK_ULONG)-1) == CKR_ARGUMENTS_BAD);
    CHECK("FindObjectsInit NULL template with count", f->C_FindObjectsInit(s, NULL, 3) == CKR_ARGUMENTS_BAD);
    CK_ATTRIBUTE nullv = {CKA_LABEL, NULL, 5};
    CHECK("FindObjectsInit NULL value with length", f->C_FindObjectsInit(s, &nullv, 1) == CKR_ARGUMENTS_BAD);
    CHECK("GetAttributeValue bad handle", f->C_GetAttributeValue(s, 4242, &nullv, 1) == CKR_OBJECT_HANDLE_INVALID);
    CHECK("Login NULL PIN", f->C_Login(s, CKU_USER, NULL, 4) == CKR_ARGUMENTS_BAD);
    CHECK("Login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)"0000", 4) == CKR_OK);
    CK_MECHANISM m = {CKM_ECDSA, NULL, 5};
    CHECK("mechanism NULL parameter with length", f->C_SignInit(s, &m, 1) == CKR_ARGUMENTS_BAD);
    /* PKCS #11 3.0 §5.13: a NULL pMechanism ends the active signing operation (none here). */
    CHECK("SignInit NULL mechanism ends the operation", f->C_SignInit(s, NULL, 1) == CKR_OK);
    CHECK("Sign without init", f->C_Sign(s, (CK_BYTE_PTR)"x", 1, NULL, &n) == CKR_OPERATION_NOT_INITIALIZED);
    CHECK("message functions unsupported", f->C_MessageSignInit(s, &m, 1) == CKR_FUNCTION_NOT_SUPPORTED);
    CHECK("operation state: none to save", f->C_GetOperationState(s, NULL, &n) == CKR_OPERATION_NOT_INITIALIZED);

    pthread_t th[8]; int thread_failures = 0;
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, signer, NULL);
    for (int i = 0; i < 8; i++) { void *r; pthread_join(th[i], &r); if (r) { printf("  thread %d: step %ld\n", i, (long)r); thread_failures++; } }
    CHECK("8 threads x 40 signatures in their own sessions", thread_failures == 0);

    pid_t pid = fork();
    if (pid == 0) {
        CK_INFO info; CK_ULONG c = 0;
        int ok = f->C_GetInfo(&info) == CKR_CRYPTOKI_NOT_INITIALIZED;
        ok = ok && f->C_Initialize(NULL) == CKR_OK;
        ok = ok && f->C_GetSlotList(CK_TRUE, NULL, &c) == CKR_OK && c == 2;
        CK_SESSION_HANDLE cs;
        ok = ok && f->C_OpenSession(token_slot, CKF_SERIAL_SESSION, NULL, NULL, &cs) == CKR_OK;
        ok = ok && f->C_Login(cs, CKU_USER, (CK_UTF8CHAR_PTR)"0000", 4) == CKR_OK;
        ok = ok && f->C_Finalize(NULL) == CKR_OK;
        _exit(ok ? 0 : 3);
    }
    int status = 0; waitpid(pid, &status, 0);
    CHECK("forked child: not initialised, then a working C_Initialize", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK("parent still works after fork", f->C_GetSlotList(CK_TRUE, NULL, &n) == CKR_OK);

    CHECK("C_Finalize(reserved)", f->C_Finalize((void *)1) == CKR_ARGUMENTS_BAD);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    CHECK("calls after C_Finalize", f->C_GetInfo(NULL) == CKR_CRYPTOKI_NOT_INITIALIZED);
    CHECK("re-initialise after C_Finalize", f->C_Initialize(NULL) == CKR_OK && f->C_Finalize(NULL) == CKR_OK);
    dlclose(h);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
EOF
if cc -O1 -Wall -Werror -Wno-unused-result -I "$ROOT/pkcs11/types" -I "$ROOT/pkcs11/abi/include" -o "$WORK/abi" "$WORK/abi.c" -ldl -lpthread; then
  "$WORK/abi" "$MODULE"
else
  echo "0 passed, 1 failed"
  exit 1
fi
