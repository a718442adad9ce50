/* What the C test hosts of the integration scripts (pq.c, kem_classic.c, pq_import.c,
 * pq_wrap.c, v32.c, symmetric.c, mechbreadth.c) all wrote out again: the check counters and
 * macros, the function list `f` they call through, taking the module's 3.2 interface, opening a
 * logged-in session with the PIN from the environment, reading one attribute, the raw-EVP
 * pieces more than one host crosses the module with, and the symmetric hosts' hex, file and
 * single / multi-part crypt calls. A host includes this once (it is one
 * translation unit) and keeps only its own checks; every check prints the same line as before.
 *
 * Before including it a host may define:
 *   P11HOST_3_2                 `f` is the 3.2 function list (pkcs11_3_2.h), else the 3.0 one;
 *   P11HOST_BUNDLED_LIBCRYPTO   1 when the host links the bundled libcrypto.a (see below).
 * The host's own usage text stays in the host; the scripts read only the `ok` / `FAIL` lines
 * and the last line, "N passed, M failed". */
#ifndef KS_IT_P11HOST_H
#define KS_IT_P11HOST_H
#include <features.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include "harness.h"
#ifdef P11HOST_3_2
#include "../../../pkcs11/abi/include/pkcs11_3_2.h"
#endif

/* The bundled libcrypto.a was built against glibc 2.41 and calls the C23 strtol that glibc
 * before 2.38 lacks (Sources/COpenSSLSupport/support.c gives the module the same shim). */
#if defined(P11HOST_BUNDLED_LIBCRYPTO) && P11HOST_BUNDLED_LIBCRYPTO && !__GLIBC_PREREQ(2, 38)
long __isoc23_strtol(const char *nptr, char **endptr, int base);
long __isoc23_strtol(const char *nptr, char **endptr, int base) { return strtol(nptr, endptr, base); }
#endif

/* ---- checks: one output line each, counted for the closing "N passed, M failed" ---- */

static int pass, fail;
/* A check that holds or not; the line number says where a failure was. */
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)
/* CHECK with a printf-formatted name (the same check over a table of keys or mechanisms). */
#define CHECKF(cond, ...) do { char _n[256]; snprintf(_n, sizeof _n, __VA_ARGS__); CHECK(_n, cond); } while (0)
/* A call that must give exactly one CK_RV; a failure prints what it gave. */
#define RV(name, call, want) do { CK_RV rv_ = (call); if (rv_ == (want)) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s: rv 0x%lx, want 0x%lx (line %d)\n", name, rv_, (CK_RV)(want), __LINE__); } } while (0)
/* An indented remark (a figure, an rv) that the scripts pass through but do not count. */
#define NOTE(...) do { printf("  "); printf(__VA_ARGS__); printf("\n"); } while (0)

/* The last line the scripts read; the exit status says whether any check failed. */
static inline int p11host_report(void) {
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}

/* ---- the module ---- */

/* The function list every host calls through: the module's 3.2 list in the 3.2 hosts. */
#ifdef P11HOST_3_2
static CK_FUNCTION_LIST_3_2 *f;
#else
static CK_FUNCTION_LIST_3_0 *f;
#endif
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

/* The PINs come from KS_TEST_SO_PIN / KS_TEST_PIN (never argv, so they are not in `ps`);
 * 0 and a one-failure result line when they or the ARGS arguments are missing. */
static inline int p11host_args(int argc, int args, const char *usage, const char **so_pin, const char **pin) {
    *so_pin = getenv("KS_TEST_SO_PIN"), *pin = getenv("KS_TEST_PIN");
    if (argc > args && *so_pin && *pin) return 1;
    printf("usage: KS_TEST_SO_PIN=.. KS_TEST_PIN=.. %s\n0 passed, 1 failed\n", usage);
    return 0;
}

#ifdef P11HOST_3_2
/* dlopen MODULE and take C_GetInterface("PKCS 11", 3.2) into `f` (the 3.2 functions are only on
 * that interface); the dlopen handle for hosts that look up more symbols. 0 and a one-failure
 * result line when the module or its 3.2 interface is missing. */
static inline int p11host_load_3_2(const char *module, void **lib) {
    void *h = dlopen(module, RTLD_NOW);
    if (!h) { printf("dlopen: %s\n0 passed, 1 failed\n", dlerror()); return 0; }
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(h, "C_GetInterface");
    CK_INTERFACE_PTR ip = NULL;
    CK_VERSION v32 = {3, 2};
    if (!gi || gi((CK_UTF8CHAR_PTR) "PKCS 11", &v32, &ip, 0) != CKR_OK) { printf("no 3.2 interface\n0 passed, 1 failed\n"); return 0; }
    f = (CK_FUNCTION_LIST_3_2 *)ip->pFunctionList;
    if (lib) *lib = h;
    return 1;
}
#endif

/* C_Initialize, or the failure line counted on top of the checks already made. */
static inline int p11host_initialize(void) {
    if (f->C_Initialize(NULL) == CKR_OK) return 1;
    printf("C_Initialize failed\n%d passed, %d failed\n", pass, fail + 1);
    return 0;
}

/* A fresh token on the free slot (harness_make_token through whichever list `f` is). */
static inline CK_SLOT_ID p11host_make_token(const char *label, const char *so_pin, const char *pin) {
    return harness_make_token((CK_FUNCTION_LIST_3_0 *)f, label, so_pin, pin);
}

/* A read-write session on SLOT logged in as the user: what every host's checks run in. */
static inline CK_RV p11host_user_session(CK_SLOT_ID slot, const char *pin, CK_SESSION_HANDLE *s) {
    CK_RV rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, s);
    return rv == CKR_OK ? f->C_Login(*s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) : rv;
}

#ifdef P11HOST_3_2
/* The start of a 3.2 host that runs its checks in one user session on a fresh token: the
 * arguments (usage USAGE) and PINs, the 3.2 interface, C_Initialize, the token LABEL with its
 * check TOKEN_CHECK, the session in *S. Returns the host's exit status when it cannot go on
 * (2: arguments, 1: module), else 0 with *SLOT 0 when the token failed (no session then; the
 * host still finalizes and reports). */
static inline int p11host_start_3_2(int argc, char **argv, const char *usage, const char *label, const char *token_check,
                                    CK_SLOT_ID *slot, CK_SESSION_HANDLE *s) {
    const char *so, *pin;
    if (!p11host_args(argc, 1, usage, &so, &pin)) return 2;
    if (!p11host_load_3_2(argv[1], NULL) || !p11host_initialize()) return 1;
    *slot = p11host_make_token(label, so, pin);
    CHECK(token_check, *slot != 0);
    if (*slot) p11host_user_session(*slot, pin, s);
    return 0;
}
#endif

/* ---- attributes ---- */

/* One attribute into OUT (CAP bytes): its length, with C_GetAttributeValue's rv in *RV. */
static inline CK_ULONG p11host_attr(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE t, void *out, CK_ULONG cap, CK_RV *rv) {
    CK_ATTRIBUTE a = {t, out, cap};
    *rv = f->C_GetAttributeValue(s, h, &a, 1);
    return a.ulValueLen;
}

/* A readable key's CKA_VALUE: its length, 0 when it cannot be read. */
static inline CK_ULONG p11host_value(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, unsigned char *out, CK_ULONG cap) {
    CK_RV rv;
    CK_ULONG n = p11host_attr(s, h, CKA_VALUE, out, cap, &rv);
    return rv == CKR_OK ? n : 0;
}

/* ---- raw EVP beside the module ---- */

/* One AES-256-ECB block under a key: how an unreadable secret the module made is compared with
 * one known here (the module encrypts the block, EVP encrypts it under the known bytes). */
static const unsigned char p11host_block[16] = "keyshare rsa kem";
static inline CK_ULONG p11host_aes_block(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE k, unsigned char *out) {
    CK_MECHANISM m = {CKM_AES_ECB, NULL, 0};
    CK_ULONG n = 16;
    if (f->C_EncryptInit(s, &m, k) != CKR_OK || f->C_Encrypt(s, (CK_BYTE_PTR)p11host_block, 16, out, &n) != CKR_OK) return 0;
    return n;
}
static inline int p11host_evp_aes_block(const unsigned char *key, unsigned char *out) {
    int wl = 0;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok = x && EVP_EncryptInit_ex(x, EVP_aes_256_ecb(), NULL, key, NULL) == 1 && EVP_CIPHER_CTX_set_padding(x, 0) == 1
             && EVP_EncryptUpdate(x, out, &wl, p11host_block, 16) == 1 && wl == 16;
    EVP_CIPHER_CTX_free(x);
    return ok;
}

/* The module's RSA public key PK as an EVP key (from CKA_MODULUS and CKA_PUBLIC_EXPONENT), so EVP
 * can encrypt or encapsulate to it; NULL when it cannot be read. The caller frees it. */
static inline EVP_PKEY *p11host_evp_rsa_public(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE pk) {
    unsigned char n_[512], e_[16];
    CK_RV rv;
    CK_ULONG nn = p11host_attr(s, pk, CKA_MODULUS, n_, sizeof n_, &rv), en = p11host_attr(s, pk, CKA_PUBLIC_EXPONENT, e_, sizeof e_, &rv);
    BIGNUM *bn = BN_bin2bn(n_, (int)nn, NULL), *be = BN_bin2bn(e_, (int)en, NULL);
    OSSL_PARAM_BLD *pb = OSSL_PARAM_BLD_new();
    OSSL_PARAM *pp = NULL;
    EVP_PKEY *ek = NULL;
    EVP_PKEY_CTX *fc = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    if (pb && OSSL_PARAM_BLD_push_BN(pb, "n", bn) && OSSL_PARAM_BLD_push_BN(pb, "e", be)) pp = OSSL_PARAM_BLD_to_param(pb);
    if (!pp || !fc || EVP_PKEY_fromdata_init(fc) != 1 || EVP_PKEY_fromdata(fc, &ek, EVP_PKEY_PUBLIC_KEY, pp) != 1) ek = NULL;
    EVP_PKEY_CTX_free(fc);
    OSSL_PARAM_free(pp);
    OSSL_PARAM_BLD_free(pb);
    BN_free(bn);
    BN_free(be);
    return ek;
}

/* ---- data and crypt calls of the symmetric hosts ---- */

/* Hex (spaces between bytes allowed, as the published vectors print them) into bytes: the count. */
static inline size_t p11host_unhex(const char *h, unsigned char *out) {
    size_t n = 0;
    while (h[0] && h[1]) {
        if (h[0] == ' ') { h++; continue; }
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (unsigned char)v;
        h += 2;
    }
    return n;
}

/* DIR/NAME with the bytes given: what the host leaves for the script's openssl / CLI cross-checks.
 * A file that cannot be written ends the host (exit 2): the script then reports it did not finish. */
static inline void p11host_put_file(const char *dir, const char *name, const unsigned char *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) { printf("cannot write %s\n", path); exit(2); }
    fwrite(p, 1, n, fp);
    fclose(fp);
}

/* Single-part C_Encrypt (ENC) or C_Decrypt with the length query first, as an application sizes
 * its buffer; CKR_BUFFER_TOO_SMALL when the answer exceeds *OUTN. Returns the CK_RV. */
static inline CK_RV p11host_crypt1(CK_SESSION_HANDLE s, int enc, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const unsigned char *in,
                                   CK_ULONG n, unsigned char *out, CK_ULONG *outn) {
    CK_RV rv = enc ? f->C_EncryptInit(s, m, k) : f->C_DecryptInit(s, m, k);
    if (rv != CKR_OK) return rv;
    CK_ULONG need = 0;
    rv = enc ? f->C_Encrypt(s, (CK_BYTE_PTR)in, n, NULL, &need) : f->C_Decrypt(s, (CK_BYTE_PTR)in, n, NULL, &need);
    if (rv != CKR_OK) return rv;
    if (need > *outn) return CKR_BUFFER_TOO_SMALL;
    *outn = need;
    return enc ? f->C_Encrypt(s, (CK_BYTE_PTR)in, n, out, outn) : f->C_Decrypt(s, (CK_BYTE_PTR)in, n, out, outn);
}

/* The same multi-part, in parts of STEP bytes: where buffering across Update calls goes wrong. */
static inline CK_RV p11host_cryptn(CK_SESSION_HANDLE s, int enc, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const unsigned char *in,
                                   CK_ULONG n, unsigned char *out, CK_ULONG *outn, CK_ULONG step) {
    CK_RV rv = enc ? f->C_EncryptInit(s, m, k) : f->C_DecryptInit(s, m, k);
    if (rv != CKR_OK) return rv;
    CK_ULONG done = 0;
    for (CK_ULONG i = 0; i < n; i += step) {
        CK_ULONG part = n - i < step ? n - i : step, got = *outn - done;
        rv = enc ? f->C_EncryptUpdate(s, (CK_BYTE_PTR)in + i, part, out + done, &got)
                 : f->C_DecryptUpdate(s, (CK_BYTE_PTR)in + i, part, out + done, &got);
        if (rv != CKR_OK) return rv;
        done += got;
    }
    CK_ULONG got = *outn - done;
    rv = enc ? f->C_EncryptFinal(s, out + done, &got) : f->C_DecryptFinal(s, out + done, &got);
    *outn = done + got;
    return rv;
}
#endif
