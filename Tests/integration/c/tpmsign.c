/*
 * tpmsign: signs N times in a row with the first EC private key of a token
 * (CKM_ECDSA over a 32-byte digest) through any PKCS #11 module, in one
 * process and one session, and prints the C_Login time and signatures per
 * second. 43-tpm.sh runs it for "1,000 signatures in a row" and four at once
 * ("4 concurrent clients"); make bench runs it against keyshare's TPM token
 * and tpm2-pkcs11 on the same swtpm (docs/tpm.md).
 *
 *   TPMSIGN_PIN=PIN [TPMSIGN_KEY=rsa] tpmsign MODULE TOKEN_LABEL COUNT
 *
 * TPMSIGN_KEY=rsa: the first RSA private key instead, CKM_RSA_PKCS over a
 * SHA-256 DigestInfo (what a TLS or ssh client asks of a token); the
 * signature must be as long as the modulus.
 *
 * Output: "login_ms=X signs=N failed=F ops_per_s=Y". Exit 0 when every signature was made.
 *
 * With TPMSIGN_WAIT=PATH it signs once, creates PATH.ready and waits (at most
 * 60 s) for PATH to exist before the N signatures: 43-tpm.sh restarts swtpm
 * meanwhile, so a process (or agent) that lives through the restart must
 * notice that what it kept of the TPM (the saved SRK context) is stale.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pkcs11_shim.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: TPMSIGN_PIN=PIN tpmsign MODULE TOKEN_LABEL COUNT\n"); return 2; }
    const char *pin = getenv("TPMSIGN_PIN");
    if (!pin) { fprintf(stderr, "tpmsign: TPMSIGN_PIN is not set\n"); return 2; }
    long count = atol(argv[3]);
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "tpmsign: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f;
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) { fprintf(stderr, "tpmsign: module init failed\n"); return 1; }
    CK_SLOT_ID slots[64];
    CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) { fprintf(stderr, "tpmsign: C_GetSlotList failed\n"); return 1; }
    CK_SLOT_ID slot = (CK_SLOT_ID)-1;
    size_t want = strlen(argv[2]);
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t len = 32;
        while (len > 0 && ti.label[len - 1] == ' ') len--;
        if (len == want && !memcmp(ti.label, argv[2], len)) { slot = slots[i]; break; }
    }
    if (slot == (CK_SLOT_ID)-1) { fprintf(stderr, "tpmsign: no token %s\n", argv[2]); return 1; }
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) return 1;
    double t0 = now();
    CK_RV rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    double login = now() - t0;
    if (rv != CKR_OK) { fprintf(stderr, "tpmsign: C_Login: 0x%lx\n", (unsigned long)rv); return 1; }
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    const char *type = getenv("TPMSIGN_KEY");
    int rsa = type && !strcmp(type, "rsa");
    CK_KEY_TYPE kt = rsa ? CKK_RSA : CKK_EC;
    CK_ATTRIBUTE tmpl[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_OBJECT_HANDLE key;
    CK_ULONG found = 0;
    if (f->C_FindObjectsInit(s, tmpl, 2) != CKR_OK || f->C_FindObjects(s, &key, 1, &found) != CKR_OK || found != 1) {
        fprintf(stderr, "tpmsign: no %s private key\n", rsa ? "RSA" : "EC");
        return 1;
    }
    f->C_FindObjectsFinal(s);
    /* RSA: the DER DigestInfo prefix of SHA-256 (RFC 8017 9.2), then the digest. */
    static const unsigned char prefix[19] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                             0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20};
    unsigned char input[19 + 32], sig[512];
    unsigned char *digest = rsa ? input + 19 : input;
    CK_ULONG inlen = rsa ? sizeof input : 32, siglen = 64;
    memcpy(input, prefix, sizeof prefix);
    memset(digest, 0x5A, 32);
    if (rsa) {
        CK_BYTE mod[512];
        CK_ATTRIBUTE ma = {CKA_MODULUS, mod, sizeof mod};
        if (f->C_GetAttributeValue(s, key, &ma, 1) != CKR_OK) { fprintf(stderr, "tpmsign: no CKA_MODULUS\n"); return 1; }
        siglen = ma.ulValueLen;
    }
    CK_MECHANISM m = {rsa ? CKM_RSA_PKCS : CKM_ECDSA, NULL, 0};
    long failed = 0;
    const char *wait = getenv("TPMSIGN_WAIT");
    if (wait) {
        CK_ULONG sl = sizeof sig;
        if (f->C_SignInit(s, &m, key) != CKR_OK || f->C_Sign(s, digest, sizeof digest, sig, &sl) != CKR_OK) {
            fprintf(stderr, "tpmsign: the signature before the wait failed\n");
            return 1;
        }
        char ready[4096];
        snprintf(ready, sizeof ready, "%s.ready", wait);
        FILE *r = fopen(ready, "w");
        if (r) fclose(r);
        for (int i = 0; i < 1200 && access(wait, F_OK) != 0; i++) usleep(50000);
    }
    t0 = now();
    for (long i = 0; i < count; i++) {
        digest[0] = (unsigned char)i;
        CK_ULONG sl = sizeof sig;
        if (f->C_SignInit(s, &m, key) != CKR_OK || f->C_Sign(s, input, inlen, sig, &sl) != CKR_OK || sl != siglen) {
            failed++;
        }
    }
    double el = now() - t0;
    printf("login_ms=%.2f signs=%ld failed=%ld ops_per_s=%.1f\n", login * 1000, count - failed, failed, (count - failed) / el);
    f->C_Logout(s);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    return failed ? 1 : 0;
}
