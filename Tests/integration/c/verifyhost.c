/*
 * A host for 99-verify-local.sh (docs/agent-transport.md, "Verify in the client"): one
 * process that keeps its session while the script (and other processes)
 * change things around it. Reads one command a line on stdin and answers one
 * line on stdout (the return value's name, or "ok ..."), so the script can
 * run the same commands with verification in the client and with
 * KEYSHARE_AGENT_VERIFY_LOCAL=0 and compare the answers line for line.
 *
 *   gen NAME ec|rsa [private]  a token key pair labelled NAME (the public key CKA_PRIVATE when "private")
 *   find NAME                  looks up NAME's public and private key handles (kept: later commands use the
 *                              handles found first, so a key another process deleted is still named by its handle)
 *   sign MECH NAME             signs the mechanism's input with NAME's private key; kept for verify
 *   vinit MECH NAME            C_VerifyInit with NAME's public key
 *   verify | verify-bad | verify-len | verify-null | verify-data N
 *                              C_Verify of the kept signature (one bit flipped; one byte short; NULL
 *                              data; the input cut or grown to N bytes)
 *   update | final             C_VerifyUpdate of the input, C_VerifyFinal of the kept signature
 *   loop N MECH NAME           N x (C_VerifyInit + C_Verify): "ok N", or the first failure
 *   login | logout | quit
 * MECH: ecdsa ecdsa-sha1 ecdsa-sha224 ecdsa-sha256 ecdsa-sha384 ecdsa-sha512 rsa-pkcs sha1-rsa
 * sha224-rsa sha256-rsa sha384-rsa sha512-rsa pss sha1-pss sha224-pss sha256-pss sha384-pss sha512-pss
 * pss-salt0. PIN from the environment (PIN). Usage: verifyhost MODULE
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;

static const char *rvname(CK_RV rv) {
    static char buf[32];
    switch (rv) {
    case CKR_OK: return "CKR_OK";
    case CKR_SIGNATURE_INVALID: return "CKR_SIGNATURE_INVALID";
    case CKR_SIGNATURE_LEN_RANGE: return "CKR_SIGNATURE_LEN_RANGE";
    case CKR_DATA_LEN_RANGE: return "CKR_DATA_LEN_RANGE";
    case CKR_ARGUMENTS_BAD: return "CKR_ARGUMENTS_BAD";
    case CKR_KEY_HANDLE_INVALID: return "CKR_KEY_HANDLE_INVALID";
    case CKR_KEY_FUNCTION_NOT_PERMITTED: return "CKR_KEY_FUNCTION_NOT_PERMITTED";
    case CKR_KEY_TYPE_INCONSISTENT: return "CKR_KEY_TYPE_INCONSISTENT";
    case CKR_OPERATION_NOT_INITIALIZED: return "CKR_OPERATION_NOT_INITIALIZED";
    case CKR_OPERATION_ACTIVE: return "CKR_OPERATION_ACTIVE";
    case CKR_MECHANISM_INVALID: return "CKR_MECHANISM_INVALID";
    case CKR_MECHANISM_PARAM_INVALID: return "CKR_MECHANISM_PARAM_INVALID";
    case CKR_USER_NOT_LOGGED_IN: return "CKR_USER_NOT_LOGGED_IN";
    case CKR_USER_ALREADY_LOGGED_IN: return "CKR_USER_ALREADY_LOGGED_IN";
    case CKR_OBJECT_HANDLE_INVALID: return "CKR_OBJECT_HANDLE_INVALID";
    default: snprintf(buf, sizeof buf, "0x%lx", rv); return buf;
    }
}

static CK_RSA_PKCS_PSS_PARAMS pss256 = {CKM_SHA256, CKG_MGF1_SHA256, 32}, pss1 = {CKM_SHA_1, CKG_MGF1_SHA1, 20},
                              pss224 = {CKM_SHA224, CKG_MGF1_SHA224, 28}, pss384 = {CKM_SHA384, CKG_MGF1_SHA384, 48},
                              pss512 = {CKM_SHA512, CKG_MGF1_SHA512, 64}, pss0 = {CKM_SHA256, CKG_MGF1_SHA256, 0};
static const struct { const char *name; CK_MECHANISM m; CK_ULONG in; } mechs[] = {
    {"ecdsa", {CKM_ECDSA, NULL, 0}, 32},
    {"ecdsa-sha1", {CKM_ECDSA_SHA1, NULL, 0}, 100},
    {"ecdsa-sha224", {CKM_ECDSA_SHA224, NULL, 0}, 100},
    {"ecdsa-sha256", {CKM_ECDSA_SHA256, NULL, 0}, 100},
    {"ecdsa-sha384", {CKM_ECDSA_SHA384, NULL, 0}, 100},
    {"ecdsa-sha512", {CKM_ECDSA_SHA512, NULL, 0}, 100},
    {"rsa-pkcs", {CKM_RSA_PKCS, NULL, 0}, 51},
    {"sha1-rsa", {CKM_SHA1_RSA_PKCS, NULL, 0}, 100},
    {"sha224-rsa", {CKM_SHA224_RSA_PKCS, NULL, 0}, 100},
    {"sha256-rsa", {CKM_SHA256_RSA_PKCS, NULL, 0}, 100},
    {"sha384-rsa", {CKM_SHA384_RSA_PKCS, NULL, 0}, 100},
    {"sha512-rsa", {CKM_SHA512_RSA_PKCS, NULL, 0}, 100},
    {"pss", {CKM_RSA_PKCS_PSS, &pss256, sizeof pss256}, 32},
    {"sha1-pss", {CKM_SHA1_RSA_PKCS_PSS, &pss1, sizeof pss1}, 100},
    {"sha224-pss", {CKM_SHA224_RSA_PKCS_PSS, &pss224, sizeof pss224}, 100},
    {"sha256-pss", {CKM_SHA256_RSA_PKCS_PSS, &pss256, sizeof pss256}, 100},
    {"sha384-pss", {CKM_SHA384_RSA_PKCS_PSS, &pss384, sizeof pss384}, 100},
    {"sha512-pss", {CKM_SHA512_RSA_PKCS_PSS, &pss512, sizeof pss512}, 100},
    {"pss-salt0", {CKM_SHA256_RSA_PKCS_PSS, &pss0, sizeof pss0}, 100},
};

static int mech(const char *name) {
    for (size_t i = 0; i < sizeof mechs / sizeof *mechs; i++)
        if (strcmp(mechs[i].name, name) == 0) return (int)i;
    return -1;
}

static CK_OBJECT_HANDLE handle(const char *label, CK_OBJECT_CLASS cls) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_LABEL, (void *)label, strlen(label)}};
    CK_OBJECT_HANDLE o = 0;
    CK_ULONG n = 0;
    if (f->C_FindObjectsInit(s, t, 2) != CKR_OK) return 0;
    (void)f->C_FindObjects(s, &o, 1, &n);
    (void)f->C_FindObjectsFinal(s);
    return n == 1 ? o : 0;
}

/* The handles found per label, the first time a command names it (or by `find`). */
static struct { char name[64]; CK_OBJECT_HANDLE pub, priv; } known[32];
static int nknown;

static int lookup(const char *name, int refresh) {
    int i;
    for (i = 0; i < nknown && strcmp(known[i].name, name) != 0; i++) {}
    if (i == nknown) {
        if (nknown == 32) return 0;
        snprintf(known[nknown++].name, sizeof known[0].name, "%s", name);
        refresh = 1;
    }
    if (refresh) {
        known[i].pub = handle(name, CKO_PUBLIC_KEY);
        known[i].priv = handle(name, CKO_PRIVATE_KEY);
    }
    return i;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: verifyhost MODULE\n"); return 2; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK || f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK ||
        n < 1 || f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) {
        printf("no session\n");
        return 1;
    }
    printf("ready\n");
    const char *pin = getenv("PIN");
    CK_BYTE data[512], sig[1024];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (CK_BYTE)(i * 7 + 3);
    CK_ULONG siglen = 0, inlen = 32;
    int last = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char cmd[32] = "", a[64] = "", b[64] = "", c[64] = "";
        if (sscanf(line, "%31s %63s %63s %63s", cmd, a, b, c) < 1) continue;
        if (strcmp(cmd, "quit") == 0) break;
        if (strcmp(cmd, "login") == 0) {
            printf("%s\n", rvname(f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, pin ? strlen(pin) : 0)));
        } else if (strcmp(cmd, "logout") == 0) {
            printf("%s\n", rvname(f->C_Logout(s)));
        } else if (strcmp(cmd, "gen") == 0) {
            CK_BBOOL yes = CK_TRUE, no = CK_FALSE, priv = strcmp(c, "private") == 0;
            CK_BYTE oid[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
            CK_ULONG bits = 2048;
            CK_BYTE e[] = {1, 0, 1};
            int ec = strcmp(b, "ec") == 0;
            CK_ATTRIBUTE pubt[] = {{CKA_TOKEN, &yes, 1}, {CKA_VERIFY, &yes, 1}, {CKA_LABEL, a, strlen(a)},
                                   {CKA_PRIVATE, priv ? &yes : &no, 1},
                                   ec ? (CK_ATTRIBUTE){CKA_EC_PARAMS, oid, sizeof oid} : (CK_ATTRIBUTE){CKA_MODULUS_BITS, &bits, sizeof bits},
                                   {CKA_PUBLIC_EXPONENT, e, sizeof e}};
            CK_ATTRIBUTE privt[] = {{CKA_TOKEN, &yes, 1}, {CKA_SIGN, &yes, 1}, {CKA_LABEL, a, strlen(a)}};
            CK_MECHANISM gm = {ec ? CKM_EC_KEY_PAIR_GEN : CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
            CK_OBJECT_HANDLE pub, pk;
            printf("%s\n", rvname(f->C_GenerateKeyPair(s, &gm, pubt, ec ? 5 : 6, privt, 3, &pub, &pk)));
        } else if (strcmp(cmd, "find") == 0) {
            int i = lookup(a, 1);
            printf("pub %s priv %s\n", known[i].pub ? "found" : "none", known[i].priv ? "found" : "none");
        } else if (strcmp(cmd, "sign") == 0 || strcmp(cmd, "vinit") == 0 || strcmp(cmd, "loop") == 0) {
            int loop = strcmp(cmd, "loop") == 0;
            const char *mn = loop ? b : a, *label = loop ? c : b;
            int m = mech(mn);
            if (m < 0) { printf("no mechanism %s\n", mn); continue; }
            last = m;
            inlen = mechs[m].in;
            CK_MECHANISM mm = mechs[m].m;
            if (strcmp(cmd, "sign") == 0) {
                CK_OBJECT_HANDLE k = known[lookup(label, 0)].priv;
                siglen = sizeof sig;
                CK_RV rv = f->C_SignInit(s, &mm, k);
                if (rv == CKR_OK) rv = f->C_Sign(s, data, inlen, sig, &siglen);
                printf("%s\n", rvname(rv));
            } else if (!loop) {
                printf("%s\n", rvname(f->C_VerifyInit(s, &mm, known[lookup(label, 0)].pub)));
            } else {
                CK_OBJECT_HANDLE k = known[lookup(label, 0)].pub;
                int count = atoi(a), i;
                CK_RV r1 = CKR_OK, r2 = CKR_OK;
                for (i = 0; i < count; i++) {
                    r1 = f->C_VerifyInit(s, &mm, k);
                    r2 = r1 == CKR_OK ? f->C_Verify(s, data, inlen, sig, siglen) : CKR_OK;
                    if (r1 != CKR_OK || r2 != CKR_OK) break;
                }
                if (i == count) printf("ok %d\n", count);
                else printf("at %d: %s %s\n", i, rvname(r1), rvname(r2));
            }
        } else if (strcmp(cmd, "verify") == 0) {
            printf("%s\n", rvname(f->C_Verify(s, data, inlen, sig, siglen)));
        } else if (strcmp(cmd, "verify-bad") == 0) {
            sig[siglen / 2] ^= 0x10;
            printf("%s\n", rvname(f->C_Verify(s, data, inlen, sig, siglen)));
            sig[siglen / 2] ^= 0x10;
        } else if (strcmp(cmd, "verify-len") == 0) {
            printf("%s\n", rvname(f->C_Verify(s, data, inlen, sig, siglen - 1)));
        } else if (strcmp(cmd, "verify-null") == 0) {
            printf("%s\n", rvname(f->C_Verify(s, NULL, inlen, sig, siglen)));
        } else if (strcmp(cmd, "verify-data") == 0) {
            CK_ULONG dn = (CK_ULONG)atol(a);
            printf("%s\n", rvname(f->C_Verify(s, data, dn > sizeof data ? sizeof data : dn, sig, siglen)));
        } else if (strcmp(cmd, "update") == 0) {
            printf("%s\n", rvname(f->C_VerifyUpdate(s, data, inlen)));
        } else if (strcmp(cmd, "final") == 0) {
            printf("%s\n", rvname(f->C_VerifyFinal(s, sig, siglen)));
        } else {
            printf("unknown command %s\n", cmd);
        }
        (void)last;
    }
    f->C_Finalize(NULL);
    return 0;
}
