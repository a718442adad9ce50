/* pqmodule: an ML-DSA signature through the PKCS #11 module (issue 18), for 34-pq-cli.sh's
 * cross-check with dilithium-py: the module path differs between the agent mode and
 * KEYSHARE_IN_PROCESS=1, the CLI's does not.
 *
 * usage: pqmodule MODULE TOKEN_LABEL KEY_LABEL MESSAGE SIG_OUT PUB_OUT [CONTEXT_FILE]
 *        pqmodule MODULE TOKEN_LABEL KEY_LABEL --decapsulate CIPHERTEXT SECRET_OUT
 *   (the user PIN is read from the environment, PIN)
 * Logs in, finds the private and public key labelled KEY_LABEL (CKK_ML_DSA), signs MESSAGE with
 * CKM_ML_DSA (with CK_SIGN_ADDITIONAL_CONTEXT when a context is given), writes the signature and
 * the public key's CKA_VALUE (the raw FIPS 204 public key), and checks that the private key's
 * CKA_VALUE is not readable (CKR_ATTRIBUTE_SENSITIVE). Prints one "ok"/"FAIL" line per step and
 * exits non-zero on the first failure. --decapsulate: C_DecapsulateKey (PKCS #11 3.2) with the
 * CKK_ML_KEM private key into a non-sensitive generic secret, whose CKA_VALUE it writes. */
#include <stdlib.h>
#include "harness.h"
#include "../../../pkcs11/abi/include/pkcs11_3_2.h"

static int fail(const char *what, CK_RV rv) {
    printf("FAIL - %s (CK_RV 0x%lx)\n", what, (unsigned long)rv);
    return 1;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static int spill(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wx");
    if (!f) return -1;
    size_t w = fwrite(b, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static CK_OBJECT_HANDLE find(CK_FUNCTION_LIST_3_2 *f, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label, CK_KEY_TYPE kt) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt},
                        {CKA_LABEL, (void *)label, strlen(label)}};
    CK_OBJECT_HANDLE h = CK_INVALID_HANDLE;
    CK_ULONG n = 0;
    if (f->C_FindObjectsInit(s, t, 3) != CKR_OK) return CK_INVALID_HANDLE;
    f->C_FindObjects(s, &h, 1, &n);
    f->C_FindObjectsFinal(s);
    return n == 1 ? h : CK_INVALID_HANDLE;
}

int main(int argc, char **argv) {
    int decap = argc == 7 && !strcmp(argv[4], "--decapsulate");
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: pqmodule MODULE TOKEN KEY_LABEL MESSAGE SIG_OUT PUB_OUT [CONTEXT_FILE] (PIN in the environment)\n");
        return 2;
    }
    const char *pin = getenv("PIN");
    if (!pin) { fprintf(stderr, "pqmodule: PIN is not set\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    CK_C_GetInterface gi = h ? (CK_C_GetInterface)dlsym(h, "C_GetInterface") : NULL;
    CK_INTERFACE_PTR ip = NULL;
    CK_VERSION v32 = {3, 2};
    if (!gi || gi((CK_UTF8CHAR_PTR) "PKCS 11", &v32, &ip, 0) != CKR_OK) return fail("C_GetInterface PKCS 11 3.2", 0);
    CK_FUNCTION_LIST_3_2 *f = (CK_FUNCTION_LIST_3_2 *)ip->pFunctionList;
    CK_RV rv = f->C_Initialize(NULL);
    if (rv != CKR_OK) return fail("C_Initialize", rv);
    CK_SLOT_ID slots[16], slot = 0;
    CK_ULONG ns = 16;
    int found = 0;
    f->C_GetSlotList(CK_TRUE, slots, &ns);
    for (CK_ULONG i = 0; i < ns && !found; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t n = strlen(argv[2]);
        if (n <= 32 && !memcmp(ti.label, argv[2], n) && (n == 32 || ti.label[n] == ' ')) { slot = slots[i]; found = 1; }
    }
    if (!found) return fail("no token with that label", 0);
    CK_SESSION_HANDLE s;
    if ((rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s)) != CKR_OK) return fail("C_OpenSession", rv);
    if ((rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin))) != CKR_OK) return fail("C_Login", rv);
    if (decap) {
        CK_OBJECT_HANDLE sk = find(f, s, CKO_PRIVATE_KEY, argv[3], CKK_ML_KEM);
        if (sk == CK_INVALID_HANDLE) return fail("the CKK_ML_KEM private key by label", 0);
        size_t cn = 0;
        unsigned char *ct = slurp(argv[5], &cn);
        if (!ct) return fail("cannot read the ciphertext", 0);
        CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
        CK_KEY_TYPE gt = CKK_GENERIC_SECRET;
        CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                            {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
        CK_MECHANISM m = {CKM_ML_KEM, NULL, 0};
        CK_OBJECT_HANDLE k = CK_INVALID_HANDLE;
        if ((rv = f->C_DecapsulateKey(s, &m, sk, t, 5, ct, cn, &k)) != CKR_OK) return fail("C_DecapsulateKey CKM_ML_KEM", rv);
        unsigned char v[64];
        CK_ATTRIBUTE va = {CKA_VALUE, v, sizeof v};
        if ((rv = f->C_GetAttributeValue(s, k, &va, 1)) != CKR_OK) return fail("the secret's CKA_VALUE", rv);
        if (spill(argv[6], v, va.ulValueLen)) return fail("cannot write the secret", 0);
        printf("ok   - module: C_DecapsulateKey CKM_ML_KEM gives a %lu-byte secret\n", (unsigned long)va.ulValueLen);
        f->C_Logout(s);
        f->C_CloseSession(s);
        f->C_Finalize(NULL);
        return 0;
    }
    CK_OBJECT_HANDLE priv = find(f, s, CKO_PRIVATE_KEY, argv[3], CKK_ML_DSA), pub = find(f, s, CKO_PUBLIC_KEY, argv[3], CKK_ML_DSA);
    if (priv == CK_INVALID_HANDLE || pub == CK_INVALID_HANDLE) return fail("the CKK_ML_DSA key pair by label", 0);
    printf("ok   - module: the ML-DSA key pair is found by CKK_ML_DSA and label\n");

    unsigned char value[8];
    CK_ATTRIBUTE sv = {CKA_VALUE, value, sizeof value};
    rv = f->C_GetAttributeValue(s, priv, &sv, 1);
    if (rv != CKR_ATTRIBUTE_SENSITIVE || sv.ulValueLen != CK_UNAVAILABLE_INFORMATION) return fail("private CKA_VALUE must be sensitive", rv);
    printf("ok   - module: the ML-DSA private key's CKA_VALUE is not readable (CKR_ATTRIBUTE_SENSITIVE)\n");

    size_t mlen = 0, clen = 0;
    unsigned char *msg = slurp(argv[4], &mlen), *ctx = argc == 8 ? slurp(argv[7], &clen) : NULL;
    if (!msg || (argc == 8 && !ctx)) return fail("cannot read the message or the context", 0);
    CK_SIGN_ADDITIONAL_CONTEXT sc = {CKH_HEDGE_PREFERRED, ctx, clen};
    CK_MECHANISM m = {CKM_ML_DSA, ctx ? &sc : NULL, ctx ? sizeof sc : 0};
    if ((rv = f->C_SignInit(s, &m, priv)) != CKR_OK) return fail("C_SignInit CKM_ML_DSA", rv);
    CK_ULONG siglen = 0;
    if ((rv = f->C_Sign(s, msg, mlen, NULL, &siglen)) != CKR_OK) return fail("C_Sign (length)", rv);
    unsigned char *sig = malloc(siglen);
    if ((rv = f->C_Sign(s, msg, mlen, sig, &siglen)) != CKR_OK) return fail("C_Sign", rv);
    printf("ok   - module: C_Sign CKM_ML_DSA%s gives %lu bytes\n", ctx ? " with a context" : "", (unsigned long)siglen);

    CK_ATTRIBUTE pv = {CKA_VALUE, NULL, 0};
    if ((rv = f->C_GetAttributeValue(s, pub, &pv, 1)) != CKR_OK) return fail("public CKA_VALUE (length)", rv);
    pv.pValue = malloc(pv.ulValueLen);
    if ((rv = f->C_GetAttributeValue(s, pub, &pv, 1)) != CKR_OK) return fail("public CKA_VALUE", rv);
    if (spill(argv[5], sig, siglen) || spill(argv[6], pv.pValue, pv.ulValueLen)) return fail("cannot write the outputs", 0);
    f->C_Logout(s);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    return 0;
}
