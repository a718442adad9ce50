/* Digests, MACs, key derivation, C_SessionCancel and saved operation state
 * through the C ABI (Tests/integration/69-digest-kdf.sh): published vectors
 * for each mechanism family, the argument checks (NULL parameters, wrong
 * ulParameterLen, unknown PRFs, zero and huge lengths), SP 800-108's extra
 * key handles, both CK_PKCS5_PBKD2 layouts, and C_Get/SetOperationState
 * with forged and misplaced blobs. It also prints "value NAME HEX" lines
 * for fixed public inputs, which the script compares with the openssl CLI.
 * Usage: digestkdf MODULE, with the PINs in the environment (KS_TEST_SO_PIN,
 * KS_TEST_PIN). It makes two tokens with C_InitToken on the free slot. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"
#include "harness.h"

static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)

static CK_FUNCTION_LIST_3_0 *f;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;

static void hex(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = 0;
}

static void value(const char *name, const unsigned char *b, size_t n) {
    char h[4096];
    hex(b, n, h);
    printf("value %s %s\n", name, h);
}

static int expect_hex(const unsigned char *b, size_t n, const char *want) {
    char h[4096];
    hex(b, n, h);
    return strcmp(h, want) == 0;
}

/* A secret key with a known value; readable when `open`. */
static CK_OBJECT_HANDLE secret(CK_SESSION_HANDLE s, CK_KEY_TYPE type, const unsigned char *v, CK_ULONG n, CK_BBOOL open) {
    CK_BBOOL sens = open ? CK_FALSE : CK_TRUE;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_VALUE, (void *)v, n}, {CKA_SIGN, &yes, 1}, {CKA_VERIFY, &yes, 1}, {CKA_DERIVE, &yes, 1},
                        {CKA_SENSITIVE, &sens, 1}, {CKA_EXTRACTABLE, &open, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, 8, &h) == CKR_OK ? h : 0;
}

static CK_ULONG read_value(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, unsigned char *out, CK_ULONG cap) {
    CK_ATTRIBUTE a = {CKA_VALUE, out, cap};
    return f->C_GetAttributeValue(s, h, &a, 1) == CKR_OK ? a.ulValueLen : 0;
}

static CK_RV derive(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE type, void *param, CK_ULONG plen, CK_OBJECT_HANDLE base,
                    CK_ULONG len, CK_OBJECT_HANDLE *out) {
    CK_MECHANISM m = {type, param, plen};
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    return f->C_DeriveKey(s, &m, base, t, 3, out);
}

static unsigned char msg[200];

static void digests(CK_SESSION_HANDLE s) {
    static const struct { CK_MECHANISM_TYPE m; const char *name, *abc; } d[] = {
        {CKM_SHA3_224, "sha3-224", "e642824c3f8cf24ad09234ee7d3c766fc9a3a5168d0c94ad73b46fdf"},
        {CKM_SHA3_256, "sha3-256", "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532"},
        {CKM_SHA3_384, "sha3-384", "ec01498288516fc926459f58e2c6ad8df9b473cb0fc08c2596da7cf0e49be4b298d88cea927ac7f539f1edf228376d25"},
        {CKM_SHA3_512, "sha3-512", "b751850b1a57168a5693cd924b6b096e08f621827444f70d884f5d0240d2712e10e116e9192af3c91a7ec57647e3934057340b4cf408d5a56592f8274eec53f0"},
        {CKM_SHA512_224, "sha512-224", "4634270f707b6a54daae7530460842e20e37ed265ceee9a43e8924aa"},
        {CKM_SHA512_256, "sha512-256", "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        CK_MECHANISM m = {d[i].m, NULL, 0};
        unsigned char out[64]; CK_ULONG n = sizeof out;
        ok &= f->C_DigestInit(s, &m) == CKR_OK && f->C_Digest(s, (CK_BYTE_PTR)"abc", 3, out, &n) == CKR_OK &&
              expect_hex(out, n, d[i].abc);
        n = sizeof out;
        ok &= f->C_DigestInit(s, &m) == CKR_OK && f->C_DigestUpdate(s, msg, 77) == CKR_OK &&
              f->C_DigestUpdate(s, msg + 77, sizeof msg - 77) == CKR_OK && f->C_DigestFinal(s, out, &n) == CKR_OK;
        char name[64]; snprintf(name, sizeof name, "digest-%s", d[i].name);
        value(name, out, n);
    }
    CHECK("SHA3-224/256/384/512, SHA-512/224, SHA-512/256 of \"abc\" (FIPS 202 / FIPS 180-4 examples)", ok);
    CK_MECHANISM bad = {CKM_SHA3_256, (void *)"xxxx", 4};
    CHECK("a digest with a parameter: CKR_MECHANISM_PARAM_INVALID", f->C_DigestInit(s, &bad) == CKR_MECHANISM_PARAM_INVALID);
    bad.pParameter = NULL;
    CHECK("a NULL parameter with a length: CKR_ARGUMENTS_BAD", f->C_DigestInit(s, &bad) == CKR_ARGUMENTS_BAD);
    CK_MECHANISM_TYPE list[256]; CK_ULONG nl = 256;
    CK_SESSION_INFO si; f->C_GetSessionInfo(s, &si);
    int seen = 0;
    if (f->C_GetMechanismList(si.slotID, list, &nl) == CKR_OK)
        for (CK_ULONG i = 0; i < nl; i++)
            seen += list[i] == CKM_SHA3_256 || list[i] == CKM_HKDF_DERIVE || list[i] == CKM_SP800_108_FEEDBACK_KDF ||
                    list[i] == CKM_PKCS5_PBKD2 || list[i] == CKM_SHA512_256_HMAC_GENERAL;
    CK_MECHANISM_INFO mi;
    CHECK("the mechanism list offers them; SP 800-108 key sizes in bits",
          seen == 5 && f->C_GetMechanismInfo(si.slotID, CKM_SP800_108_COUNTER_KDF, &mi) == CKR_OK &&
          mi.ulMinKeySize == 8 && mi.ulMaxKeySize == 4096 && mi.flags == CKF_DERIVE);
}

static void macs(CK_SESSION_HANDLE s) {
    /* NIST HMAC_SHA3-256.pdf sample #1, RFC 4231 test case 5 (truncated). */
    unsigned char k32[32], out[64]; CK_ULONG n;
    for (int i = 0; i < 32; i++) k32[i] = (unsigned char)i;
    CK_OBJECT_HANDLE k = secret(s, CKK_SHA3_256_HMAC, k32, 32, CK_FALSE);
    CK_MECHANISM m = {CKM_SHA3_256_HMAC, NULL, 0};
    const char *sample = "Sample message for keylen<blocklen";
    n = sizeof out;
    CHECK("HMAC-SHA3-256 (NIST sample #1) with a CKK_SHA3_256_HMAC key",
          f->C_SignInit(s, &m, k) == CKR_OK && f->C_Sign(s, (CK_BYTE_PTR)sample, strlen(sample), out, &n) == CKR_OK &&
          expect_hex(out, n, "4fe8e202c4f058e8dddc23d8c34e467343e23555e24fc2f025d598f558f67205"));
    CK_MECHANISM m384 = {CKM_SHA3_384_HMAC, NULL, 0};
    CHECK("a CKK_SHA3_256_HMAC key with CKM_SHA3_384_HMAC: CKR_KEY_TYPE_INCONSISTENT",
          f->C_SignInit(s, &m384, k) == CKR_KEY_TYPE_INCONSISTENT);
    unsigned char k0c[20]; memset(k0c, 0x0c, 20);
    CK_OBJECT_HANDLE kt = secret(s, CKK_GENERIC_SECRET, k0c, 20, CK_FALSE);
    CK_ULONG len = 16;
    CK_MECHANISM g = {CKM_SHA256_HMAC_GENERAL, &len, sizeof len};
    n = sizeof out;
    CHECK("CKM_SHA256_HMAC_GENERAL, 16 bytes (RFC 4231 test case 5)",
          f->C_SignInit(s, &g, kt) == CKR_OK && f->C_Sign(s, (CK_BYTE_PTR)"Test With Truncation", 20, NULL, &n) == CKR_OK &&
          n == 16 && f->C_Sign(s, (CK_BYTE_PTR)"Test With Truncation", 20, out, &n) == CKR_OK &&
          expect_hex(out, n, "a3b6167473100ee06e0c796c2955552b"));
    CHECK("and it verifies; a 32-byte MAC is CKR_SIGNATURE_LEN_RANGE",
          f->C_VerifyInit(s, &g, kt) == CKR_OK && f->C_Verify(s, (CK_BYTE_PTR)"Test With Truncation", 20, out, 16) == CKR_OK &&
          f->C_VerifyInit(s, &g, kt) == CKR_OK &&
          f->C_Verify(s, (CK_BYTE_PTR)"Test With Truncation", 20, msg, 32) == CKR_SIGNATURE_LEN_RANGE);
    len = 33; g.pParameter = &len;
    CK_RV r1 = f->C_SignInit(s, &g, kt);
    len = 0;
    CK_RV r2 = f->C_SignInit(s, &g, kt);
    g.ulParameterLen = 4; len = 16;
    CK_RV r3 = f->C_SignInit(s, &g, kt);
    CHECK("general length 33 (above SHA-256), 0, or a 4-byte parameter: CKR_MECHANISM_PARAM_INVALID",
          r1 == CKR_MECHANISM_PARAM_INVALID && r2 == CKR_MECHANISM_PARAM_INVALID && r3 == CKR_MECHANISM_PARAM_INVALID);
    /* Cross-check values (fixed public key and message). */
    unsigned char key[20]; memset(key, 0x0b, 20);
    CK_OBJECT_HANDLE kc = secret(s, CKK_GENERIC_SECRET, key, 20, CK_FALSE);
    static const struct { CK_MECHANISM_TYPE m; CK_ULONG general; const char *name; } x[] = {
        {CKM_SHA3_224_HMAC, 0, "hmac-sha3-224"}, {CKM_SHA3_256_HMAC, 0, "hmac-sha3-256"},
        {CKM_SHA3_384_HMAC, 0, "hmac-sha3-384"}, {CKM_SHA3_512_HMAC, 0, "hmac-sha3-512"},
        {CKM_SHA512_224_HMAC, 0, "hmac-sha512-224"}, {CKM_SHA512_256_HMAC, 0, "hmac-sha512-256"},
        {CKM_SHA3_384_HMAC_GENERAL, 20, "hmac-sha3-384-first20"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
        CK_ULONG gl = x[i].general;
        CK_MECHANISM mm = {x[i].m, gl ? &gl : NULL, gl ? sizeof gl : 0};
        n = sizeof out;
        if (f->C_SignInit(s, &mm, kc) != CKR_OK || f->C_SignUpdate(s, msg, 100) != CKR_OK ||
            f->C_SignUpdate(s, msg + 100, 100) != CKR_OK || f->C_SignFinal(s, out, &n) != CKR_OK) { ok = 0; continue; }
        value(x[i].name, out, n);
    }
    CHECK("HMACs for the openssl cross-check", ok);
}

static void hkdf(CK_SESSION_HANDLE s) {
    /* RFC 5869 A.1. */
    unsigned char ikm[22], salt[13], info[10], out[128];
    memset(ikm, 0x0b, 22);
    for (int i = 0; i < 13; i++) salt[i] = (unsigned char)i;
    for (int i = 0; i < 10; i++) info[i] = (unsigned char)(0xf0 + i);
    CK_OBJECT_HANDLE base = secret(s, CKK_GENERIC_SECRET, ikm, 22, CK_FALSE), k = 0;
    CK_HKDF_PARAMS p = {CK_TRUE, CK_TRUE, CKM_SHA256, CKF_HKDF_SALT_DATA, salt, 13, 0, info, 10};
    CHECK("CKM_HKDF_DERIVE, RFC 5869 test case 1",
          derive(s, CKM_HKDF_DERIVE, &p, sizeof p, base, 42, &k) == CKR_OK && read_value(s, k, out, sizeof out) == 42 &&
          expect_hex(out, 42, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"));
    CK_MECHANISM dm = {CKM_HKDF_DATA, &p, sizeof p};
    CK_ULONG l42 = 42;
    CK_ATTRIBUTE dt[] = {{CKA_VALUE_LEN, &l42, sizeof l42}};
    CK_OBJECT_CLASS cls = 0; CK_ATTRIBUTE ca = {CKA_CLASS, &cls, sizeof cls};
    k = 0;
    CHECK("CKM_HKDF_DATA: a CKO_DATA object with the same value",
          f->C_DeriveKey(s, &dm, base, dt, 1, &k) == CKR_OK && f->C_GetAttributeValue(s, k, &ca, 1) == CKR_OK &&
          cls == CKO_DATA && read_value(s, k, out, sizeof out) == 42 &&
          expect_hex(out, 42, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"));
    CK_RV r[8];
    r[0] = derive(s, CKM_HKDF_DERIVE, &p, sizeof p - 1, base, 42, &k);
    r[1] = derive(s, CKM_HKDF_DERIVE, NULL, sizeof p, base, 42, &k);
    r[2] = derive(s, CKM_HKDF_DERIVE, NULL, 0, base, 42, &k);
    CK_HKDF_PARAMS q = p; q.prfHashMechanism = CKM_MD5;
    r[3] = derive(s, CKM_HKDF_DERIVE, &q, sizeof q, base, 42, &k);
    q = p; q.pSalt = NULL;
    r[4] = derive(s, CKM_HKDF_DERIVE, &q, sizeof q, base, 42, &k);
    q = p; q.ulSaltType = CKF_HKDF_SALT_DATA | CKF_HKDF_SALT_KEY;
    r[5] = derive(s, CKM_HKDF_DERIVE, &q, sizeof q, base, 42, &k);
    q = p; q.bExtract = CK_FALSE; q.bExpand = CK_FALSE;
    r[6] = derive(s, CKM_HKDF_DERIVE, &q, sizeof q, base, 42, &k);
    q = p; q.ulSaltLen = 0;
    r[7] = derive(s, CKM_HKDF_DERIVE, &q, sizeof q, base, 42, &k);
    CHECK("HKDF: short ulParameterLen, no parameter, MD5 PRF, NULL salt with a length, two salt types, neither "
          "extract nor expand, an empty salt: CKR_MECHANISM_PARAM_INVALID (CKR_ARGUMENTS_BAD for NULL with a length)",
          r[0] == CKR_MECHANISM_PARAM_INVALID && r[1] == CKR_ARGUMENTS_BAD && r[2] == CKR_MECHANISM_PARAM_INVALID &&
          r[3] == CKR_MECHANISM_PARAM_INVALID && r[4] == CKR_MECHANISM_PARAM_INVALID &&
          r[5] == CKR_MECHANISM_PARAM_INVALID && r[6] == CKR_MECHANISM_PARAM_INVALID && r[7] == CKR_MECHANISM_PARAM_INVALID);
    CHECK("CKA_VALUE_LEN 2^40 and 0: CKR_ATTRIBUTE_VALUE_INVALID",
          derive(s, CKM_HKDF_DERIVE, &p, sizeof p, base, (CK_ULONG)1 << 40, &k) == CKR_ATTRIBUTE_VALUE_INVALID &&
          derive(s, CKM_HKDF_DERIVE, &p, sizeof p, base, 0, &k) == CKR_ATTRIBUTE_VALUE_INVALID);
    unsigned int four = 42;
    CK_ATTRIBUTE narrow[] = {{CKA_VALUE_LEN, &four, sizeof four}};
    CK_MECHANISM hm = {CKM_HKDF_DERIVE, &p, sizeof p};
    CHECK("a 4-byte CKA_VALUE_LEN: CKR_ATTRIBUTE_VALUE_INVALID; phKey NULL: CKR_ARGUMENTS_BAD",
          f->C_DeriveKey(s, &hm, base, narrow, 1, &k) == CKR_ATTRIBUTE_VALUE_INVALID &&
          f->C_DeriveKey(s, &hm, base, NULL, 0, NULL) == CKR_ARGUMENTS_BAD);
    /* Cross-check values: SHA-256 extract and expand (42 bytes), SHA3-256 extract only. */
    unsigned char key[32], sl[16], inf[8];
    for (int i = 0; i < 32; i++) key[i] = (unsigned char)(0x20 + i);
    for (int i = 0; i < 16; i++) sl[i] = (unsigned char)(0x40 + i);
    for (int i = 0; i < 8; i++) inf[i] = (unsigned char)(0x60 + i);
    CK_OBJECT_HANDLE kb = secret(s, CKK_GENERIC_SECRET, key, 32, CK_FALSE);
    CK_HKDF_PARAMS c1 = {CK_TRUE, CK_TRUE, CKM_SHA256, CKF_HKDF_SALT_DATA, sl, 16, 0, inf, 8};
    CK_HKDF_PARAMS c2 = {CK_TRUE, CK_FALSE, CKM_SHA3_256, CKF_HKDF_SALT_DATA, sl, 16, 0, NULL, 0};
    CK_ULONG n1 = 0, n2 = 0;
    CK_OBJECT_HANDLE k1 = 0, k2 = 0;
    unsigned char o1[64], o2[64];
    if (derive(s, CKM_HKDF_DERIVE, &c1, sizeof c1, kb, 42, &k1) == CKR_OK) n1 = read_value(s, k1, o1, sizeof o1);
    if (derive(s, CKM_HKDF_DERIVE, &c2, sizeof c2, kb, 32, &k2) == CKR_OK) n2 = read_value(s, k2, o2, sizeof o2);
    CHECK("HKDF values for the openssl cross-check", n1 == 42 && n2 == 32);
    value("hkdf-sha256", o1, n1);
    value("hkdf-sha3-256-extract", o2, n2);
}

/* CK_PRF_DATA_PARAM helpers. */
static CK_SP800_108_COUNTER_FORMAT ctr32 = {CK_FALSE, 32};
static CK_SP800_108_DKM_LENGTH_FORMAT dkm32 = {CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, CK_FALSE, 32};

static void sp800108(CK_SESSION_HANDLE s) {
    /* CAVP KDFCTR_gen [PRF=HMAC_SHA256][CTRLOCATION=BEFORE_FIXED][RLEN=8_BITS] COUNT=0 is run by the Swift
     * tests; here the layouts OpenSSL's KBKDF shares: [i]32 || label || 00 || context || [L]32. */
    unsigned char key[32], label[6] = "label", zero = 0, context[7] = "context", out[256];
    for (int i = 0; i < 32; i++) key[i] = (unsigned char)(0x80 + i);
    CK_OBJECT_HANDLE kh = secret(s, CKK_GENERIC_SECRET, key, 32, CK_FALSE);
    CK_OBJECT_HANDLE ka = secret(s, CKK_AES, key, 16, CK_FALSE);
    CK_PRF_DATA_PARAM dp[] = {{CK_SP800_108_ITERATION_VARIABLE, &ctr32, sizeof ctr32}, {CK_SP800_108_BYTE_ARRAY, label, 5},
                              {CK_SP800_108_BYTE_ARRAY, &zero, 1}, {CK_SP800_108_BYTE_ARRAY, context, 7},
                              {CK_SP800_108_DKM_LENGTH, &dkm32, sizeof dkm32}};
    CK_SP800_108_KDF_PARAMS cp = {CKM_SHA256_HMAC, 5, dp, 0, NULL};
    CK_OBJECT_HANDLE k = 0;
    CK_ULONG n = 0;
    if (derive(s, CKM_SP800_108_COUNTER_KDF, &cp, sizeof cp, kh, 42, &k) == CKR_OK) n = read_value(s, k, out, sizeof out);
    CHECK("SP 800-108 counter mode, HMAC-SHA256, 42 bytes", n == 42);
    value("kbkdf-counter-hmac-sha256", out, n);
    CK_SP800_108_KDF_PARAMS cc = {CKM_AES_CMAC, 5, dp, 0, NULL};
    n = 0;
    if (derive(s, CKM_SP800_108_COUNTER_KDF, &cc, sizeof cc, ka, 40, &k) == CKR_OK) n = read_value(s, k, out, sizeof out);
    CHECK("SP 800-108 counter mode, AES-128-CMAC, 40 bytes", n == 40);
    value("kbkdf-counter-cmac-aes128", out, n);
    /* Feedback: K(i-1) || [i]32 || label || 00 || context || [L]32. */
    /* OpenSSL 3.0's KBKDF takes a feedback IV of the PRF's size only: 64 bytes here. */
    unsigned char iv[64];
    for (int i = 0; i < 64; i++) iv[i] = (unsigned char)i;
    CK_PRF_DATA_PARAM fp[] = {{CK_SP800_108_ITERATION_VARIABLE, NULL, 0}, {CK_SP800_108_COUNTER, &ctr32, sizeof ctr32},
                              {CK_SP800_108_BYTE_ARRAY, label, 5}, {CK_SP800_108_BYTE_ARRAY, &zero, 1},
                              {CK_SP800_108_BYTE_ARRAY, context, 7}, {CK_SP800_108_DKM_LENGTH, &dkm32, sizeof dkm32}};
    CK_SP800_108_FEEDBACK_KDF_PARAMS fb = {CKM_SHA512_HMAC, 6, fp, 64, iv, 0, NULL};
    n = 0;
    if (derive(s, CKM_SP800_108_FEEDBACK_KDF, &fb, sizeof fb, kh, 100, &k) == CKR_OK) n = read_value(s, k, out, sizeof out);
    CHECK("SP 800-108 feedback mode, HMAC-SHA512, 100 bytes", n == 100);
    value("kbkdf-feedback-hmac-sha512", out, n);

    /* Additional keys: handles written only when every key exists. */
    CK_ULONG l16 = 16, l0 = 0;
    CK_ATTRIBUTE t16[] = {{CKA_VALUE_LEN, &l16, sizeof l16}};
    CK_ATTRIBUTE t0[] = {{CKA_VALUE_LEN, &l0, sizeof l0}};
    CK_OBJECT_HANDLE h1 = 77, h2 = 77, hp = 0;
    CK_DERIVED_KEY extra[] = {{t16, 1, &h1}, {t16, 1, &h2}};
    CK_SP800_108_KDF_PARAMS ap = {CKM_SHA256_HMAC, 5, dp, 2, extra};
    CK_MECHANISM am = {CKM_SP800_108_COUNTER_KDF, &ap, sizeof ap};
    CHECK("two additional keys: three distinct handles",
          f->C_DeriveKey(s, &am, kh, t16, 1, &hp) == CKR_OK && hp && h1 && h2 && h1 != 77 && h2 != 77 &&
          hp != h1 && h1 != h2);
    extra[1].pTemplate = t0;
    h1 = h2 = 77; hp = 0;
    CHECK("a bad second template: CKR_ATTRIBUTE_VALUE_INVALID, both handles CK_INVALID_HANDLE",
          f->C_DeriveKey(s, &am, kh, t16, 1, &hp) == CKR_ATTRIBUTE_VALUE_INVALID && h1 == CK_INVALID_HANDLE &&
          h2 == CK_INVALID_HANDLE);
    extra[1].pTemplate = t16; extra[1].phKey = NULL;
    CHECK("a NULL phKey in CK_DERIVED_KEY: CKR_MECHANISM_PARAM_INVALID",
          f->C_DeriveKey(s, &am, kh, t16, 1, &hp) == CKR_MECHANISM_PARAM_INVALID);
    ap.pAdditionalDerivedKeys = NULL;
    CHECK("ulAdditionalDerivedKeys 2 with a NULL array: CKR_MECHANISM_PARAM_INVALID",
          f->C_DeriveKey(s, &am, kh, t16, 1, &hp) == CKR_MECHANISM_PARAM_INVALID);
    CK_RV r[6];
    CK_SP800_108_KDF_PARAMS bp = cp; bp.prfType = CKM_DES3_CMAC;
    r[0] = derive(s, CKM_SP800_108_COUNTER_KDF, &bp, sizeof bp, kh, 16, &k);
    bp = cp; bp.pDataParams = NULL;
    r[1] = derive(s, CKM_SP800_108_COUNTER_KDF, &bp, sizeof bp, kh, 16, &k);
    r[2] = derive(s, CKM_SP800_108_FEEDBACK_KDF, &cp, sizeof cp, kh, 16, &k);
    CK_SP800_108_COUNTER_FORMAT c7 = {CK_FALSE, 7};
    CK_PRF_DATA_PARAM dbad[] = {{CK_SP800_108_ITERATION_VARIABLE, &c7, sizeof c7}};
    bp = cp; bp.pDataParams = dbad; bp.ulNumberOfDataParams = 1;
    r[3] = derive(s, CKM_SP800_108_COUNTER_KDF, &bp, sizeof bp, kh, 16, &k);
    CK_PRF_DATA_PARAM dnull[] = {{CK_SP800_108_ITERATION_VARIABLE, &ctr32, sizeof ctr32}, {CK_SP800_108_BYTE_ARRAY, NULL, 4}};
    bp.pDataParams = dnull; bp.ulNumberOfDataParams = 2;
    r[4] = derive(s, CKM_SP800_108_COUNTER_KDF, &bp, sizeof bp, kh, 16, &k);
    r[5] = derive(s, CKM_SP800_108_COUNTER_KDF, &cc, sizeof cc, kh, 16, &k);
    CHECK("SP 800-108: DES3-CMAC PRF, NULL data params, the counter struct for feedback mode, a 7-bit counter, "
          "a NULL byte array: CKR_MECHANISM_PARAM_INVALID; CMAC on a generic key: CKR_KEY_TYPE_INCONSISTENT",
          r[0] == CKR_MECHANISM_PARAM_INVALID && r[1] == CKR_MECHANISM_PARAM_INVALID && r[2] == CKR_MECHANISM_PARAM_INVALID &&
          r[3] == CKR_MECHANISM_PARAM_INVALID && r[4] == CKR_MECHANISM_PARAM_INVALID && r[5] == CKR_KEY_TYPE_INCONSISTENT);
}

static void pbkdf2(CK_SESSION_HANDLE s) {
    /* RFC 6070 case 2 (4096 iterations), in both parameter layouts. */
    unsigned char out[64];
    CK_ULONG len = 20, pwlen = 8;
    CK_KEY_TYPE kt = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_SENSITIVE, &no, 1},
                        {CKA_EXTRACTABLE, &yes, 1}};
    CK_PKCS5_PBKD2_PARAMS2 p2 = {CKZ_SALT_SPECIFIED, (void *)"salt", 4, 4096, CKP_PKCS5_PBKD2_HMAC_SHA1, NULL, 0,
                                 (CK_UTF8CHAR_PTR)"password", 8};
    CK_PKCS5_PBKD2_PARAMS p1 = {CKZ_SALT_SPECIFIED, (void *)"salt", 4, 4096, CKP_PKCS5_PBKD2_HMAC_SHA1, NULL, 0,
                                (CK_UTF8CHAR_PTR)"password", &pwlen};
    CK_MECHANISM m2 = {CKM_PKCS5_PBKD2, &p2, sizeof p2}, m1 = {CKM_PKCS5_PBKD2, &p1, sizeof p1};
    CK_OBJECT_HANDLE k = 0;
    const char *want = "4b007901b765489abead49d926f721d065a429c1";
    CHECK("CKM_PKCS5_PBKD2 with CK_PKCS5_PBKD2_PARAMS2 (RFC 6070, c = 4096)",
          f->C_GenerateKey(s, &m2, t, 4, &k) == CKR_OK && read_value(s, k, out, sizeof out) == 20 && expect_hex(out, 20, want));
    k = 0;
    CHECK("and with the 2.20 CK_PKCS5_PBKD2_PARAMS (a pointer to the length)",
          f->C_GenerateKey(s, &m1, t, 4, &k) == CKR_OK && read_value(s, k, out, sizeof out) == 20 && expect_hex(out, 20, want));
    CK_PKCS5_PBKD2_PARAMS2 b = p2; b.prf = CKP_PKCS5_PBKD2_HMAC_GOSTR3411;
    CK_MECHANISM mb = {CKM_PKCS5_PBKD2, &b, sizeof b};
    CK_RV r1 = f->C_GenerateKey(s, &mb, t, 4, &k);
    b = p2; b.pPassword = NULL;
    CK_RV r2 = f->C_GenerateKey(s, &mb, t, 4, &k);
    mb.ulParameterLen = sizeof b - 8;
    CK_RV r3 = f->C_GenerateKey(s, &mb, t, 4, &k);
    CHECK("GOST PRF, a NULL password with a length, a short struct: CKR_MECHANISM_PARAM_INVALID",
          r1 == CKR_MECHANISM_PARAM_INVALID && r2 == CKR_MECHANISM_PARAM_INVALID && r3 == CKR_MECHANISM_PARAM_INVALID);
    CHECK("no CKA_KEY_TYPE: CKR_TEMPLATE_INCOMPLETE", f->C_GenerateKey(s, &m2, t, 1, &k) == CKR_TEMPLATE_INCOMPLETE);
    /* Cross-check value: SHA-512, 1000 iterations, 64 bytes. */
    CK_PKCS5_PBKD2_PARAMS2 x = {CKZ_SALT_SPECIFIED, (void *)"NaCl-and-more", 13, 1000, CKP_PKCS5_PBKD2_HMAC_SHA512, NULL, 0,
                                (CK_UTF8CHAR_PTR)"public test passphrase", 22};
    CK_MECHANISM mx = {CKM_PKCS5_PBKD2, &x, sizeof x};
    len = 64;
    CK_ULONG n = 0;
    if (f->C_GenerateKey(s, &mx, t, 4, &k) == CKR_OK) n = read_value(s, k, out, sizeof out);
    CHECK("PBKDF2-HMAC-SHA512 value for the openssl cross-check", n == 64);
    value("pbkdf2-sha512", out, n);
}

static void simple(CK_SESSION_HANDLE s) {
    unsigned char v[32], out[64];
    for (int i = 0; i < 32; i++) v[i] = (unsigned char)(i + 1);
    unsigned char ex[4] = {0x01, 0x23, 0x45, 0x67};
    CK_OBJECT_HANDLE hidden = secret(s, CKK_GENERIC_SECRET, v, 32, CK_FALSE), open = secret(s, CKK_GENERIC_SECRET, ex, 4, CK_TRUE);
    CK_ULONG off = 8;
    CK_OBJECT_HANDLE k = 0;
    CHECK("CKM_EXTRACT_KEY_FROM_KEY, one byte of a sensitive key: CKR_TEMPLATE_INCONSISTENT",
          derive(s, CKM_EXTRACT_KEY_FROM_KEY, &off, sizeof off, hidden, 1, &k) == CKR_TEMPLATE_INCONSISTENT);
    CK_KEY_DERIVATION_STRING_DATA sd = {(CK_BYTE_PTR)"\x89\xab\xcd\xef", 4};
    CHECK("CKM_XOR_BASE_AND_DATA on a readable key (§2.42's example: 0x88888888)",
          derive(s, CKM_XOR_BASE_AND_DATA, &sd, sizeof sd, open, 4, &k) == CKR_OK && read_value(s, k, out, 64) == 4 &&
          expect_hex(out, 4, "88888888"));
    CK_OBJECT_HANDLE k2 = 0;
    CK_ATTRIBUTE want_sens[] = {{CKA_SENSITIVE, &no, 1}};
    CK_MECHANISM cm = {CKM_CONCATENATE_BASE_AND_DATA, &sd, sizeof sd};
    CK_BBOOL got = 0xff; CK_ATTRIBUTE ga = {CKA_SENSITIVE, &got, 1};
    CHECK("a concatenation of a sensitive key is sensitive whatever the template says",
          f->C_DeriveKey(s, &cm, hidden, want_sens, 1, &k2) == CKR_OK && f->C_GetAttributeValue(s, k2, &ga, 1) == CKR_OK &&
          got == CK_TRUE);
    CK_OBJECT_HANDLE hb = hidden;
    CHECK("CKM_CONCATENATE_BASE_AND_KEY: a 4-byte parameter is CKR_MECHANISM_PARAM_INVALID",
          derive(s, CKM_CONCATENATE_BASE_AND_KEY, &hb, 4, open, 8, &k) == CKR_MECHANISM_PARAM_INVALID);
}

/* C_SessionCancel (PKCS #11 3.0 §5.6.5). */
static void cancel(CK_SESSION_HANDLE s) {
    CK_MECHANISM m = {CKM_SHA3_256, NULL, 0};
    unsigned char out[64]; CK_ULONG n = sizeof out;
    CHECK("C_SessionCancel with no flags, and with bits naming no operation: CKR_OK",
          f->C_DigestInit(s, &m) == CKR_OK && f->C_SessionCancel(s, 0) == CKR_OK &&
          f->C_SessionCancel(s, CKF_GENERATE | CKF_HW | 0x80000000UL) == CKR_OK && f->C_DigestUpdate(s, msg, 4) == CKR_OK);
    CHECK("C_SessionCancel(CKF_DIGEST) ends the digest: C_DigestFinal is CKR_OPERATION_NOT_INITIALIZED",
          f->C_SessionCancel(s, CKF_DIGEST) == CKR_OK && f->C_DigestFinal(s, out, &n) == CKR_OPERATION_NOT_INITIALIZED);
    CHECK("and a new digest starts at once", f->C_DigestInit(s, &m) == CKR_OK && f->C_SessionCancel(s, CKF_DIGEST | CKF_SIGN) == CKR_OK);
    CHECK("a bad session: CKR_SESSION_HANDLE_INVALID", f->C_SessionCancel(0x7ffff00dUL, CKF_DIGEST) == CKR_SESSION_HANDLE_INVALID);
}

/* C_GetOperationState / C_SetOperationState. */
static void state(CK_SESSION_HANDLE s, CK_SESSION_HANDLE s2, CK_SESSION_HANDLE other_token) {
    CK_MECHANISM m = {CKM_SHA3_512, NULL, 0};
    unsigned char blob[128], d1[64], d2[64], bad[128];
    CK_ULONG n = 0, n1 = 64, n2 = 64;
    CHECK("nothing to save: CKR_OPERATION_NOT_INITIALIZED", f->C_GetOperationState(s, NULL, &n) == CKR_OPERATION_NOT_INITIALIZED);
    f->C_DigestInit(s, &m);
    f->C_DigestUpdate(s, msg, 70);
    CHECK("C_GetOperationState: a length query, CKR_BUFFER_TOO_SMALL, then the state",
          f->C_GetOperationState(s, NULL, &n) == CKR_OK && n == 53 && (n = 10, f->C_GetOperationState(s, blob, &n)) ==
          CKR_BUFFER_TOO_SMALL && n == 53 && (n = sizeof blob, f->C_GetOperationState(s, blob, &n)) == CKR_OK && n == 53);
    CHECK("a NULL length pointer: CKR_ARGUMENTS_BAD", f->C_GetOperationState(s, blob, NULL) == CKR_ARGUMENTS_BAD);
    f->C_DigestUpdate(s, msg + 70, 130);
    f->C_DigestFinal(s, d1, &n1);
    CHECK("restored into another session, the digest is the uninterrupted one",
          f->C_SetOperationState(s2, blob, n, 0, 0) == CKR_OK && f->C_DigestUpdate(s2, msg + 70, 130) == CKR_OK &&
          f->C_DigestFinal(s2, d2, &n2) == CKR_OK && n1 == n2 && memcmp(d1, d2, n1) == 0);
    CHECK("NULL state with a length: CKR_ARGUMENTS_BAD; a length of 0: CKR_SAVED_STATE_INVALID",
          f->C_SetOperationState(s2, NULL, 53, 0, 0) == CKR_ARGUMENTS_BAD &&
          f->C_SetOperationState(s2, blob, 0, 0, 0) == CKR_SAVED_STATE_INVALID);
    /* pkcs11test's NULL-state check (issue 29): a NULL pointer is CKR_ARGUMENTS_BAD with length 0 too. */
    CK_RV null0 = f->C_SetOperationState(s2, NULL, 0, 0, 0);
    CHECK("NULL state of length 0: CKR_ARGUMENTS_BAD", null0 == CKR_ARGUMENTS_BAD);
    if (null0 != CKR_ARGUMENTS_BAD) fprintf(stderr, "  C_SetOperationState(NULL, 0) = 0x%lx\n", (unsigned long)null0);
    int refused = 0, tries = 0;
    for (CK_ULONG i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            memcpy(bad, blob, n); bad[i] ^= (unsigned char)(1 << b);
            tries++; refused += f->C_SetOperationState(s2, bad, n, 0, 0) == CKR_SAVED_STATE_INVALID;
        }
    printf("  %d of %d single-bit changes refused\n", refused, tries);
    CHECK("every single-bit change of the blob: CKR_SAVED_STATE_INVALID", refused == tries && tries == 424);
    memcpy(bad, blob, n);
    CHECK("truncated, extended, forged (random tail): CKR_SAVED_STATE_INVALID",
          f->C_SetOperationState(s2, blob, n - 1, 0, 0) == CKR_SAVED_STATE_INVALID &&
          f->C_SetOperationState(s2, bad, n + 1, 0, 0) == CKR_SAVED_STATE_INVALID &&
          (memset(bad + 5, 0x5a, 48), f->C_SetOperationState(s2, bad, n, 0, 0)) == CKR_SAVED_STATE_INVALID);
    CHECK("replayed into a session of another token: CKR_SAVED_STATE_INVALID",
          f->C_SetOperationState(other_token, blob, n, 0, 0) == CKR_SAVED_STATE_INVALID);
    CHECK("a key for a digest state: CKR_KEY_NOT_NEEDED", f->C_SetOperationState(s2, blob, n, 0, 7) == CKR_KEY_NOT_NEEDED);
    /* HMAC: the key must be named. */
    unsigned char kv[32]; memset(kv, 0x33, 32);
    CK_OBJECT_HANDLE k = secret(s, CKK_GENERIC_SECRET, kv, 32, CK_FALSE), k2 = secret(s, CKK_GENERIC_SECRET, kv, 31, CK_FALSE);
    CK_MECHANISM hm = {CKM_SHA3_256_HMAC, NULL, 0};
    n = sizeof blob; n1 = n2 = 64;
    f->C_SignInit(s, &hm, k);
    f->C_SignUpdate(s, msg, 33);
    f->C_GetOperationState(s, blob, &n);
    f->C_SignUpdate(s, msg + 33, 167);
    f->C_SignFinal(s, d1, &n1);
    CHECK("an HMAC state: CKR_KEY_NEEDED without the key, CKR_KEY_CHANGED with another",
          f->C_SetOperationState(s2, blob, n, 0, 0) == CKR_KEY_NEEDED && f->C_SetOperationState(s2, blob, n, 0, k2) == CKR_KEY_CHANGED);
    CHECK("with its key, the MAC is the uninterrupted one",
          f->C_SetOperationState(s2, blob, n, 0, k) == CKR_OK && f->C_SignUpdate(s2, msg + 33, 167) == CKR_OK &&
          f->C_SignFinal(s2, d2, &n2) == CKR_OK && n1 == n2 && memcmp(d1, d2, n1) == 0);
    /* An encryption cannot be saved. */
    CK_ULONG l16 = 16;
    CK_ATTRIBUTE at[] = {{CKA_VALUE_LEN, &l16, sizeof l16}, {CKA_ENCRYPT, &yes, 1}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE aes = 0;
    unsigned char iv[16] = {0};
    CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, 16};
    n = sizeof blob;
    CHECK("an active encryption: CKR_STATE_UNSAVEABLE",
          f->C_GenerateKey(s, &gen, at, 2, &aes) == CKR_OK && f->C_EncryptInit(s, &cbc, aes) == CKR_OK &&
          f->C_GetOperationState(s, blob, &n) == CKR_STATE_UNSAVEABLE);
    f->C_SessionCancel(s, CKF_ENCRYPT);
}

int main(int argc, char **argv) {
    const char *pin = getenv("KS_TEST_PIN"), *so_pin = getenv("KS_TEST_SO_PIN");
    if (argc < 2 || !pin || !so_pin) { printf("usage: KS_TEST_PIN=.. KS_TEST_SO_PIN=.. digestkdf MODULE\n0 passed, 1 failed\n"); return 1; }
    if (!(f = harness_load(argv[1]))) return 1;
    for (int i = 0; i < 200; i++) msg[i] = (unsigned char)i;
    CHECK("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    CK_SLOT_ID slot = harness_make_token(f, "digest-kdf", so_pin, pin), slot2 = harness_make_token(f, "digest-kdf-2", so_pin, pin);
    CHECK("two tokens made with C_InitToken and C_InitPIN", slot && slot2);
    CK_SESSION_HANDLE s, s2, s3;
    CHECK("sessions and login", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) == CKR_OK &&
          f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s2) == CKR_OK &&
          f->C_OpenSession(slot2, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s3) == CKR_OK &&
          f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) == CKR_OK);
    digests(s);
    macs(s);
    hkdf(s);
    sp800108(s);
    pbkdf2(s);
    simple(s);
    cancel(s);
    state(s, s2, s3);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
