/* The PKCS #11 3.2 functions through the C ABI (Tests/integration/74-pkcs11-3-2.sh):
 *
 *   interfaces      3.2 first; a host asking for 3.0 or 2.40 gets the table it got before
 *                   (its version, C_GetInfo's 3.0 / 2.40), only the 3.2 table reports 3.2
 *   verify          C_VerifySignatureInit / C_VerifySignature / Update / Final for each verify
 *                   mechanism the module has (RSA PKCS#1 v1.5 and PSS, raw RSA, ECDSA, EdDSA,
 *                   HMAC, CMAC), single and multi-part, good and bad signatures, the signature's
 *                   length, the §5.2 termination rules, the shared verification slot with
 *                   C_VerifyInit, C_SessionCancel, every argument error
 *   validation      C_GetSessionValidationFlags: 0 (no validated configuration), its errors
 *   wrapping        C_WrapKeyAuthenticated / C_UnwrapKeyAuthenticated with CKM_AES_GCM: the
 *                   blob is AES-GCM under the call's associated data (checked against EVP here),
 *                   a wrong AD or a changed blob does not open, every error code, and the
 *                   wrap/decrypt attacks 56-conformance runs against C_WrapKey, through these
 *   async           C_AsyncComplete / C_AsyncGetID / C_AsyncJoin: CKR_FUNCTION_NOT_SUPPORTED
 *
 *   trust           CKO_TRUST objects of the trusted certificates: attributes, read-only, found
 *                   only by class, follow their certificate
 *
 * Usage: v32 MODULE [CERT.der [ANCHOR-TOKEN-LABEL ANCHOR-SHA256-HEX]], with KS_TEST_SO_PIN and KS_TEST_PIN in the environment (never on the
 * command line). It makes its own token with C_InitToken on the free slot. Ends with
 * "N passed, M failed". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include "pkcs11_shim.h"
#include "harness.h"
#include "../../../pkcs11/abi/include/pkcs11_3_2.h"

static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)
#define CHECKF(cond, ...) do { char _n[256]; snprintf(_n, sizeof _n, __VA_ARGS__); CHECK(_n, cond); } while (0)
#define RV(name, call, want) do { CK_RV rv_ = (call); if (rv_ == (want)) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s: rv 0x%lx, want 0x%lx (line %d)\n", name, rv_, (CK_RV)(want), __LINE__); } } while (0)

static CK_FUNCTION_LIST_3_2 *f;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE aes_type = CKK_AES, generic_type = CKK_GENERIC_SECRET;
static const CK_SESSION_HANDLE BAD = 0x7ffff00dUL;

/* ---- keys ---- */

static CK_OBJECT_HANDLE create_secret(CK_SESSION_HANDLE s, CK_KEY_TYPE type, const unsigned char *v, CK_ULONG n,
                                      CK_BBOOL sensitive, CK_BBOOL dec, CK_BBOOL wrap, CK_BBOOL unwrap) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_VALUE, (void *)v, n}, {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &yes, 1},
                        {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &dec, 1}, {CKA_WRAP, &wrap, 1},
                        {CKA_UNWRAP, &unwrap, 1}, {CKA_SIGN, &yes, 1}, {CKA_VERIFY, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, 11, &h) == CKR_OK ? h : 0;
}

static CK_OBJECT_HANDLE gen_aes(CK_SESSION_HANDLE s, CK_BBOOL enc, CK_BBOOL dec, CK_BBOOL wrap, CK_BBOOL unwrap,
                                CK_BBOOL extractable) {
    CK_ULONG len = 32;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &enc, 1}, {CKA_DECRYPT, &dec, 1},
                        {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &unwrap, 1}, {CKA_EXTRACTABLE, &extractable, 1}};
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, 6, &h) == CKR_OK ? h : 0;
}

static int gen_pair(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE mech, const unsigned char *params, CK_ULONG plen,
                    CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_ULONG bits = 2048;
    CK_MECHANISM m = {mech, NULL, 0};
    CK_ATTRIBUTE pt[] = {{CKA_VERIFY, &yes, 1}, {CKA_TOKEN, &no, 1},
                         mech == CKM_RSA_PKCS_KEY_PAIR_GEN ? (CK_ATTRIBUTE){CKA_MODULUS_BITS, &bits, sizeof bits}
                                                           : (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)params, plen}};
    CK_ATTRIBUTE st[] = {{CKA_SIGN, &yes, 1}, {CKA_TOKEN, &no, 1}};
    return f->C_GenerateKeyPair(s, &m, pt, 3, st, 2, pub, priv) == CKR_OK;
}

/* ---- verify ---- */

static CK_ULONG sign(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const unsigned char *d, CK_ULONG n,
                     unsigned char *sig) {
    CK_ULONG sn = 512;
    if (f->C_SignInit(s, m, k) != CKR_OK || f->C_Sign(s, (CK_BYTE_PTR)d, n, sig, &sn) != CKR_OK) return 0;
    return sn;
}

static CK_RV vs_single(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, unsigned char *sig, CK_ULONG sn,
                       const unsigned char *d, CK_ULONG n) {
    CK_RV rv = f->C_VerifySignatureInit(s, m, k, sig, sn);
    return rv != CKR_OK ? rv : f->C_VerifySignature(s, (CK_BYTE_PTR)d, n);
}

static CK_RV vs_multi(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, unsigned char *sig, CK_ULONG sn,
                      const unsigned char *d, CK_ULONG n) {
    CK_RV rv = f->C_VerifySignatureInit(s, m, k, sig, sn);
    if (rv == CKR_OK) rv = f->C_VerifySignatureUpdate(s, (CK_BYTE_PTR)d, n / 3);
    if (rv == CKR_OK) rv = f->C_VerifySignatureUpdate(s, (CK_BYTE_PTR)d + n / 3, n - n / 3);
    return rv != CKR_OK ? rv : f->C_VerifySignatureFinal(s);
}

/* One mechanism: the signature C_Sign made verifies single and (when `multi`) multi-part; a changed
 * signature or changed data is CKR_SIGNATURE_INVALID; a signature of another length is
 * CKR_SIGNATURE_LEN_RANGE (or INVALID where the mechanism's signatures vary in length). */
static void verify_mechanism(CK_SESSION_HANDLE s, const char *name, CK_MECHANISM *m, CK_OBJECT_HANDLE signer,
                             CK_OBJECT_HANDLE verifier, int multi, CK_RV short_rv) {
    unsigned char data[300], sig[512], bad[512];
    for (int i = 0; i < 300; i++) data[i] = (unsigned char)(i * 7 + 1);
    CK_ULONG dn = m->mechanism == CKM_RSA_PKCS ? 32 : sizeof data;
    CK_ULONG sn = sign(s, m, signer, data, dn, sig);
    char label[200];
    snprintf(label, sizeof label, "%s: C_Sign made a signature", name);
    CHECK(label, sn > 0);
    if (!sn) return;
    snprintf(label, sizeof label, "%s: C_VerifySignatureInit + C_VerifySignature accept it", name);
    RV(label, vs_single(s, m, verifier, sig, sn, data, dn), CKR_OK);
    if (multi) {
        snprintf(label, sizeof label, "%s: Init + Update x2 + C_VerifySignatureFinal accept it", name);
        RV(label, vs_multi(s, m, verifier, sig, sn, data, dn), CKR_OK);
    }
    memcpy(bad, sig, sn);
    bad[sn / 2] ^= 0x01;
    snprintf(label, sizeof label, "%s: a changed signature is CKR_SIGNATURE_INVALID", name);
    RV(label, vs_single(s, m, verifier, bad, sn, data, dn), CKR_SIGNATURE_INVALID);
    if (multi) {
        snprintf(label, sizeof label, "%s: a changed signature, multi-part: CKR_SIGNATURE_INVALID at Final", name);
        RV(label, vs_multi(s, m, verifier, bad, sn, data, dn), CKR_SIGNATURE_INVALID);
    }
    data[3] ^= 0x80;
    snprintf(label, sizeof label, "%s: changed data is CKR_SIGNATURE_INVALID", name);
    RV(label, vs_single(s, m, verifier, sig, sn, data, dn), CKR_SIGNATURE_INVALID);
    data[3] ^= 0x80;
    snprintf(label, sizeof label, "%s: a signature one byte short is %s", name,
             short_rv == CKR_SIGNATURE_LEN_RANGE ? "CKR_SIGNATURE_LEN_RANGE" : "CKR_SIGNATURE_INVALID");
    RV(label, vs_single(s, m, verifier, sig, sn - 1, data, dn), short_rv);
    snprintf(label, sizeof label, "%s: after the verdict the operation is over (Final: CKR_OPERATION_NOT_INITIALIZED)",
             name);
    RV(label, f->C_VerifySignatureFinal(s), CKR_OPERATION_NOT_INITIALIZED);
}

static void verify_group(CK_SESSION_HANDLE s) {
    static const unsigned char p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    static const unsigned char ed25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
    CK_OBJECT_HANDLE rpub = 0, rpriv = 0, epub = 0, epriv = 0, dpub = 0, dpriv = 0;
    CHECK("RSA-2048, P-256 and Ed25519 pairs generated",
          gen_pair(s, CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0, &rpub, &rpriv) &&
          gen_pair(s, CKM_EC_KEY_PAIR_GEN, p256, sizeof p256, &epub, &epriv) &&
          gen_pair(s, CKM_EC_EDWARDS_KEY_PAIR_GEN, ed25519, sizeof ed25519, &dpub, &dpriv));
    unsigned char hk[32], ak[16];
    for (int i = 0; i < 32; i++) hk[i] = (unsigned char)(0xa0 + i);
    for (int i = 0; i < 16; i++) ak[i] = (unsigned char)(0x30 + i);
    CK_OBJECT_HANDLE hmac = create_secret(s, generic_type, hk, 32, yes, no, no, no);
    CK_OBJECT_HANDLE cmac = create_secret(s, aes_type, ak, 16, yes, no, no, no);

    CK_MECHANISM m;
    m = (CK_MECHANISM){CKM_SHA256_RSA_PKCS, NULL, 0};
    verify_mechanism(s, "CKM_SHA256_RSA_PKCS", &m, rpriv, rpub, 1, CKR_SIGNATURE_LEN_RANGE);
    CK_RSA_PKCS_PSS_PARAMS pss = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    m = (CK_MECHANISM){CKM_SHA256_RSA_PKCS_PSS, &pss, sizeof pss};
    verify_mechanism(s, "CKM_SHA256_RSA_PKCS_PSS", &m, rpriv, rpub, 1, CKR_SIGNATURE_LEN_RANGE);
    m = (CK_MECHANISM){CKM_RSA_PKCS, NULL, 0};
    verify_mechanism(s, "CKM_RSA_PKCS (single-part)", &m, rpriv, rpub, 0, CKR_SIGNATURE_LEN_RANGE);
    m = (CK_MECHANISM){CKM_ECDSA_SHA256, NULL, 0};
    verify_mechanism(s, "CKM_ECDSA_SHA256", &m, epriv, epub, 1, CKR_SIGNATURE_LEN_RANGE);
    m = (CK_MECHANISM){CKM_EDDSA, NULL, 0};
    verify_mechanism(s, "CKM_EDDSA (Ed25519)", &m, dpriv, dpub, 1, CKR_SIGNATURE_LEN_RANGE);
    m = (CK_MECHANISM){CKM_SHA256_HMAC, NULL, 0};
    verify_mechanism(s, "CKM_SHA256_HMAC", &m, hmac, hmac, 1, CKR_SIGNATURE_LEN_RANGE);
    m = (CK_MECHANISM){CKM_AES_CMAC, NULL, 0};
    verify_mechanism(s, "CKM_AES_CMAC", &m, cmac, cmac, 1, CKR_SIGNATURE_LEN_RANGE);

    /* A private key verifies too (its own public half), as with C_VerifyInit. */
    unsigned char data[64] = "signature-first", sig[512];
    CK_MECHANISM ecdsa = {CKM_ECDSA_SHA256, NULL, 0};
    CK_ULONG sn = sign(s, &ecdsa, epriv, data, sizeof data, sig);
    RV("the private key verifies its own signature, as with C_VerifyInit",
       vs_single(s, &ecdsa, epriv, sig, sn, data, sizeof data), CKR_OK);

    /* §5.2: C_VerifySignature only before any update; errors end the operation. */
    RV("Init", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("Update", f->C_VerifySignatureUpdate(s, data, 10), CKR_OK);
    RV("C_VerifySignature after C_VerifySignatureUpdate: CKR_OPERATION_ACTIVE",
       f->C_VerifySignature(s, data, sizeof data), CKR_OPERATION_ACTIVE);
    RV("and that ended the operation (Final: CKR_OPERATION_NOT_INITIALIZED)", f->C_VerifySignatureFinal(s),
       CKR_OPERATION_NOT_INITIALIZED);
    RV("Init again", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("C_VerifySignatureUpdate(NULL, 5): CKR_ARGUMENTS_BAD", f->C_VerifySignatureUpdate(s, NULL, 5),
       CKR_ARGUMENTS_BAD);
    RV("and that ended the operation", f->C_VerifySignatureFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    RV("Init again", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("C_VerifySignature(NULL, 5): CKR_ARGUMENTS_BAD", f->C_VerifySignature(s, NULL, 5), CKR_ARGUMENTS_BAD);
    RV("and that ended the operation", f->C_VerifySignatureFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    RV("Init again", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("a second C_VerifySignatureInit: CKR_OPERATION_ACTIVE", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn),
       CKR_OPERATION_ACTIVE);
    RV("C_VerifyInit while it is active: CKR_OPERATION_ACTIVE (one verification slot, as Kryoptic)",
       f->C_VerifyInit(s, &ecdsa, epub), CKR_OPERATION_ACTIVE);
    RV("the failed Inits left it running: it verifies", f->C_VerifySignature(s, data, sizeof data), CKR_OK);
    RV("C_VerifyInit", f->C_VerifyInit(s, &ecdsa, epub), CKR_OK);
    RV("C_VerifySignatureInit while C_VerifyInit's operation is active: CKR_OPERATION_ACTIVE",
       f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OPERATION_ACTIVE);
    RV("C_VerifySignature on C_VerifyInit's operation: CKR_OPERATION_NOT_INITIALIZED",
       f->C_VerifySignature(s, data, sizeof data), CKR_OPERATION_NOT_INITIALIZED);
    RV("Init", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("C_Verify on a signature-first operation: CKR_OPERATION_NOT_INITIALIZED",
       f->C_Verify(s, data, sizeof data, sig, sn), CKR_OPERATION_NOT_INITIALIZED);
    RV("Init", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("C_VerifySignatureInit(NULL mechanism) ends the operation", f->C_VerifySignatureInit(s, NULL, 0, NULL, 0),
       CKR_OK);
    RV("so Final: CKR_OPERATION_NOT_INITIALIZED", f->C_VerifySignatureFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    RV("Init", f->C_VerifySignatureInit(s, &ecdsa, epub, sig, sn), CKR_OK);
    RV("C_SessionCancel(CKF_VERIFY)", f->C_SessionCancel(s, CKF_VERIFY), CKR_OK);
    RV("cancelled it", f->C_VerifySignatureUpdate(s, data, 4), CKR_OPERATION_NOT_INITIALIZED);
    RV("C_VerifySignature without Init: CKR_OPERATION_NOT_INITIALIZED", f->C_VerifySignature(s, data, 4),
       CKR_OPERATION_NOT_INITIALIZED);

    /* Init's argument errors, in the order of its parameters; none starts an operation. */
    CK_MECHANISM junk = {0x7fff0001UL, NULL, 0};
    RV("Init, bad session: CKR_SESSION_HANDLE_INVALID", f->C_VerifySignatureInit(BAD, &junk, 0, NULL, 9),
       CKR_SESSION_HANDLE_INVALID);
    RV("Init, unknown mechanism: CKR_MECHANISM_INVALID", f->C_VerifySignatureInit(s, &junk, epub, sig, sn),
       CKR_MECHANISM_INVALID);
    CK_MECHANISM pss_short = {CKM_SHA256_RSA_PKCS_PSS, &pss, 3};
    RV("Init, a PSS parameter of the wrong size: CKR_MECHANISM_PARAM_INVALID",
       f->C_VerifySignatureInit(s, &pss_short, rpub, sig, 256), CKR_MECHANISM_PARAM_INVALID);
    RV("Init, no such key: CKR_KEY_HANDLE_INVALID", f->C_VerifySignatureInit(s, &ecdsa, 0x7ffff001UL, sig, sn),
       CKR_KEY_HANDLE_INVALID);
    RV("Init, ECDSA with an RSA key: CKR_KEY_TYPE_INCONSISTENT", f->C_VerifySignatureInit(s, &ecdsa, rpub, sig, sn),
       CKR_KEY_TYPE_INCONSISTENT);
    CK_OBJECT_HANDLE noverify = 0;
    {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &generic_type, sizeof generic_type},
                            {CKA_VALUE, hk, 32}, {CKA_VERIFY, &no, 1}};
        f->C_CreateObject(s, t, 4, &noverify);
    }
    CK_MECHANISM hm = {CKM_SHA256_HMAC, NULL, 0};
    RV("Init, a key without CKA_VERIFY: CKR_KEY_FUNCTION_NOT_PERMITTED",
       f->C_VerifySignatureInit(s, &hm, noverify, sig, 32), CKR_KEY_FUNCTION_NOT_PERMITTED);
    RV("Init, pSignature NULL with a length: CKR_ARGUMENTS_BAD", f->C_VerifySignatureInit(s, &ecdsa, epub, NULL, 64),
       CKR_ARGUMENTS_BAD);
    RV("Init, no such key and pSignature NULL: the key's error first (hKey precedes pSignature)",
       f->C_VerifySignatureInit(s, &ecdsa, 0x7ffff001UL, NULL, 64), CKR_KEY_HANDLE_INVALID);
    RV("no operation was started by the failed Inits", f->C_VerifySignatureFinal(s), CKR_OPERATION_NOT_INITIALIZED);
    RV("Update, bad session: CKR_SESSION_HANDLE_INVALID", f->C_VerifySignatureUpdate(BAD, data, 1),
       CKR_SESSION_HANDLE_INVALID);
    RV("C_VerifySignature, bad session: CKR_SESSION_HANDLE_INVALID", f->C_VerifySignature(BAD, data, 1),
       CKR_SESSION_HANDLE_INVALID);
    RV("Final, bad session: CKR_SESSION_HANDLE_INVALID", f->C_VerifySignatureFinal(BAD), CKR_SESSION_HANDLE_INVALID);
}

/* ---- validation flags ---- */

static void validation_group(CK_SESSION_HANDLE s) {
    CK_FLAGS flags = 0xdead;
    RV("C_GetSessionValidationFlags(CKS_LAST_VALIDATION_OK)", f->C_GetSessionValidationFlags(s, 1, &flags), CKR_OK);
    CHECK("flags are 0: the module has no validated configuration", flags == 0);
    flags = 0xdead;
    RV("an unknown flags type: CKR_OK with 0, as Kryoptic", f->C_GetSessionValidationFlags(s, 0x77, &flags), CKR_OK);
    CHECK("flags are 0", flags == 0);
    RV("pFlags NULL: CKR_ARGUMENTS_BAD", f->C_GetSessionValidationFlags(s, 1, NULL), CKR_ARGUMENTS_BAD);
    RV("bad session: CKR_SESSION_HANDLE_INVALID", f->C_GetSessionValidationFlags(BAD, 1, &flags),
       CKR_SESSION_HANDLE_INVALID);
}

/* ---- authenticated wrapping ---- */

static int evp_gcm(const unsigned char *key, const unsigned char *iv, const unsigned char *aad, int aadn,
                   const unsigned char *pt, int n, unsigned char *out) {
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int l = 0, ok = EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), NULL, NULL, NULL) &&
                    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) &&
                    EVP_EncryptInit_ex(c, NULL, NULL, key, iv) &&
                    (aadn == 0 || EVP_EncryptUpdate(c, NULL, &l, aad, aadn)) &&
                    EVP_EncryptUpdate(c, out, &l, pt, n) && EVP_EncryptFinal_ex(c, out + l, &l) &&
                    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, out + n);
    EVP_CIPHER_CTX_free(c);
    return ok;
}

static CK_RV wrap_auth(CK_SESSION_HANDLE s, CK_GCM_PARAMS *p, CK_OBJECT_HANDLE kek, CK_OBJECT_HANDLE key,
                       const char *ad, unsigned char *blob, CK_ULONG *n) {
    CK_MECHANISM m = {CKM_AES_GCM, p, sizeof *p};
    *n = 128;
    return f->C_WrapKeyAuthenticated(s, &m, kek, key, (CK_BYTE_PTR)ad, ad ? strlen(ad) : 0, blob, n);
}

static CK_RV unwrap_auth(CK_SESSION_HANDLE s, CK_GCM_PARAMS *p, CK_OBJECT_HANDLE kek, unsigned char *blob,
                         CK_ULONG n, const char *ad, CK_ATTRIBUTE *extra, CK_ULONG extra_n, CK_OBJECT_HANDLE *out) {
    CK_MECHANISM m = {CKM_AES_GCM, p, sizeof *p};
    CK_ATTRIBUTE t[8] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type}};
    for (CK_ULONG i = 0; i < extra_n && i < 6; i++) t[2 + i] = extra[i];
    return f->C_UnwrapKeyAuthenticated(s, &m, kek, blob, n, t, 2 + extra_n, (CK_BYTE_PTR)ad, ad ? strlen(ad) : 0, out);
}

static void wrap_group(CK_SESSION_HANDLE s) {
    unsigned char kekv[16] = "kek-known-value", target[16] = "the-target-key!", iv[12] = "unique-iv-01";
    unsigned char blob[128], want[64], got[32];
    CK_GCM_PARAMS p = {iv, 12, 96, NULL, 0, 128};
    CK_ULONG n;
    /* A KEK of known value (so EVP can check the blob), a non-sensitive extractable target:
     * wrapping a key whose value is readable anyway is allowed under any wrapping key. */
    CK_OBJECT_HANDLE kek = create_secret(s, aes_type, kekv, 16, yes, no, yes, no);
    CK_OBJECT_HANDLE kek_unwrap = create_secret(s, aes_type, kekv, 16, yes, no, no, yes);
    CK_OBJECT_HANDLE open = create_secret(s, aes_type, target, 16, no, yes, no, no);
    CHECK("keys for the wrapping checks", kek && kek_unwrap && open);
    const char *ad = "key-id=42;policy=v1";

    CK_MECHANISM gcm = {CKM_AES_GCM, &p, sizeof p};
    n = 0;
    RV("length query (NULL buffer)", f->C_WrapKeyAuthenticated(s, &gcm, kek, open, (CK_BYTE_PTR)ad, strlen(ad), NULL, &n),
       CKR_OK);
    CHECK("length is the key plus the 16-byte tag", n == 32);
    n = 31;
    RV("a 31-byte buffer: CKR_BUFFER_TOO_SMALL",
       f->C_WrapKeyAuthenticated(s, &gcm, kek, open, (CK_BYTE_PTR)ad, strlen(ad), blob, &n), CKR_BUFFER_TOO_SMALL);
    CHECK("with the length needed", n == 32);
    RV("C_WrapKeyAuthenticated(CKM_AES_GCM, AD)", wrap_auth(s, &p, kek, open, ad, blob, &n), CKR_OK);
    CHECK("the blob is AES-128-GCM(key, IV, AD) of the key, tag appended (EVP in this process)",
          n == 32 && evp_gcm(kekv, iv, (const unsigned char *)ad, (int)strlen(ad), target, 16, want) &&
          memcmp(blob, want, 32) == 0);
    unsigned char blob2[128];
    CK_ULONG n2 = sizeof blob2;
    CK_GCM_PARAMS pa = {iv, 12, 96, (CK_BYTE_PTR)ad, strlen(ad), 128};
    CK_MECHANISM gcm_aad = {CKM_AES_GCM, &pa, sizeof pa};
    CHECK("and equals C_WrapKey with the AD as CK_GCM_PARAMS.pAAD",
          f->C_WrapKey(s, &gcm_aad, kek, open, blob2, &n2) == CKR_OK && n2 == 32 && memcmp(blob, blob2, 32) == 0);

    CK_ATTRIBUTE readable[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE k2 = 0;
    RV("C_UnwrapKeyAuthenticated with the same AD", unwrap_auth(s, &p, kek_unwrap, blob, 32, ad, readable, 2, &k2),
       CKR_OK);
    CK_ATTRIBUTE va = {CKA_VALUE, got, 16};
    CHECK("gives the key back", k2 && f->C_GetAttributeValue(s, k2, &va, 1) == CKR_OK && memcmp(got, target, 16) == 0);
    k2 = 0;
    RV("another AD: CKR_WRAPPED_KEY_INVALID", unwrap_auth(s, &p, kek_unwrap, blob, 32, "key-id=43;policy=v1", NULL, 0, &k2),
       CKR_WRAPPED_KEY_INVALID);
    RV("no AD: CKR_WRAPPED_KEY_INVALID", unwrap_auth(s, &p, kek_unwrap, blob, 32, NULL, NULL, 0, &k2),
       CKR_WRAPPED_KEY_INVALID);
    blob[5] ^= 1;
    RV("a changed blob: CKR_WRAPPED_KEY_INVALID", unwrap_auth(s, &p, kek_unwrap, blob, 32, ad, NULL, 0, &k2),
       CKR_WRAPPED_KEY_INVALID);
    blob[5] ^= 1;
    CHECK("no key object was made by the failed unwraps", k2 == 0);
    RV("empty AD (NULL, 0) wraps", wrap_auth(s, &p, kek, open, NULL, blob2, &n2), CKR_OK);
    RV("and unwraps with empty AD", unwrap_auth(s, &p, kek_unwrap, blob2, n2, NULL, NULL, 0, &k2), CKR_OK);

    /* Errors, wrap. */
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
    n = sizeof blob;
    RV("wrap, bad session: CKR_SESSION_HANDLE_INVALID", wrap_auth(BAD, &p, kek, open, ad, blob2, &n),
       CKR_SESSION_HANDLE_INVALID);
    n = sizeof blob;
    RV("wrap, CKM_AES_KEY_WRAP (no associated data): CKR_MECHANISM_INVALID",
       f->C_WrapKeyAuthenticated(s, &kw, kek, open, (CK_BYTE_PTR)ad, strlen(ad), blob2, &n), CKR_MECHANISM_INVALID);
    n = sizeof blob;
    RV("wrap, CK_GCM_PARAMS with its own pAAD: CKR_MECHANISM_PARAM_INVALID",
       f->C_WrapKeyAuthenticated(s, &gcm_aad, kek, open, (CK_BYTE_PTR)ad, strlen(ad), blob2, &n),
       CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM gcm_short = {CKM_AES_GCM, &p, 8};
    RV("wrap, ulParameterLen 8: CKR_MECHANISM_PARAM_INVALID",
       f->C_WrapKeyAuthenticated(s, &gcm_short, kek, open, NULL, 0, blob2, &n), CKR_MECHANISM_PARAM_INVALID);
    RV("wrap, no such wrapping key: CKR_WRAPPING_KEY_HANDLE_INVALID", wrap_auth(s, &p, 0x7ffff001UL, open, ad, blob2, &n),
       CKR_WRAPPING_KEY_HANDLE_INVALID);
    RV("wrap, no such key: CKR_KEY_HANDLE_INVALID", wrap_auth(s, &p, kek, 0x7ffff001UL, ad, blob2, &n),
       CKR_KEY_HANDLE_INVALID);
    RV("wrap, a wrapping key without CKA_WRAP: CKR_KEY_FUNCTION_NOT_PERMITTED",
       wrap_auth(s, &p, kek_unwrap, open, ad, blob2, &n), CKR_KEY_FUNCTION_NOT_PERMITTED);
    unsigned char hk[32] = {1};
    CK_OBJECT_HANDLE gen = create_secret(s, generic_type, hk, 32, yes, no, yes, yes);
    RV("wrap, a generic secret as wrapping key: CKR_WRAPPING_KEY_TYPE_INCONSISTENT",
       wrap_auth(s, &p, gen, open, ad, blob2, &n), CKR_WRAPPING_KEY_TYPE_INCONSISTENT);
    CK_OBJECT_HANDLE fixed = gen_aes(s, yes, yes, no, no, no);
    RV("wrap, an unextractable key: CKR_KEY_UNEXTRACTABLE", wrap_auth(s, &p, kek, fixed, ad, blob2, &n),
       CKR_KEY_UNEXTRACTABLE);
    RV("wrap, AD NULL with a length: CKR_ARGUMENTS_BAD",
       f->C_WrapKeyAuthenticated(s, &gcm, kek, open, NULL, 5, blob2, &n), CKR_ARGUMENTS_BAD);
    RV("wrap, no such key and AD NULL with a length: the key's error first (hKey precedes pAssociatedData)",
       f->C_WrapKeyAuthenticated(s, &gcm, kek, 0x7ffff001UL, NULL, 5, blob2, &n), CKR_KEY_HANDLE_INVALID);
    RV("wrap, pulWrappedKeyLen NULL: CKR_ARGUMENTS_BAD",
       f->C_WrapKeyAuthenticated(s, &gcm, kek, open, (CK_BYTE_PTR)ad, strlen(ad), blob2, NULL), CKR_ARGUMENTS_BAD);

    /* Errors, unwrap. */
    RV("unwrap, bad session: CKR_SESSION_HANDLE_INVALID", unwrap_auth(BAD, &p, kek_unwrap, blob, 32, ad, NULL, 0, &k2),
       CKR_SESSION_HANDLE_INVALID);
    RV("unwrap, no such unwrapping key: CKR_UNWRAPPING_KEY_HANDLE_INVALID",
       unwrap_auth(s, &p, 0x7ffff001UL, blob, 32, ad, NULL, 0, &k2), CKR_UNWRAPPING_KEY_HANDLE_INVALID);
    RV("unwrap, a key without CKA_UNWRAP: CKR_KEY_FUNCTION_NOT_PERMITTED",
       unwrap_auth(s, &p, kek, blob, 32, ad, NULL, 0, &k2), CKR_KEY_FUNCTION_NOT_PERMITTED);
    RV("unwrap, a generic secret: CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT",
       unwrap_auth(s, &p, gen, blob, 32, ad, NULL, 0, &k2), CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT);
    RV("unwrap, a blob no longer than the tag: CKR_WRAPPED_KEY_LEN_RANGE",
       unwrap_auth(s, &p, kek_unwrap, blob, 16, ad, NULL, 0, &k2), CKR_WRAPPED_KEY_LEN_RANGE);
    RV("unwrap, CKM_AES_KEY_WRAP: CKR_MECHANISM_INVALID",
       f->C_UnwrapKeyAuthenticated(s, &kw, kek_unwrap, blob, 32, NULL, 0, NULL, 0, &k2), CKR_MECHANISM_INVALID);
    RV("unwrap, CK_GCM_PARAMS with its own pAAD: CKR_MECHANISM_PARAM_INVALID",
       f->C_UnwrapKeyAuthenticated(s, &gcm_aad, kek_unwrap, blob, 32, NULL, 0, (CK_BYTE_PTR)ad, strlen(ad), &k2),
       CKR_MECHANISM_PARAM_INVALID);
    CK_ATTRIBUTE only_type[] = {{CKA_KEY_TYPE, &aes_type, sizeof aes_type}};
    RV("unwrap, a template without CKA_CLASS: CKR_TEMPLATE_INCOMPLETE",
       f->C_UnwrapKeyAuthenticated(s, &gcm, kek_unwrap, blob, 32, only_type, 1, (CK_BYTE_PTR)ad, strlen(ad), &k2),
       CKR_TEMPLATE_INCOMPLETE);
    RV("unwrap, phKey NULL: CKR_ARGUMENTS_BAD",
       f->C_UnwrapKeyAuthenticated(s, &gcm, kek_unwrap, blob, 32, only_type, 1, (CK_BYTE_PTR)ad, strlen(ad), NULL),
       CKR_ARGUMENTS_BAD);
    RV("unwrap, pWrappedKey NULL with a length: CKR_ARGUMENTS_BAD",
       f->C_UnwrapKeyAuthenticated(s, &gcm, kek_unwrap, NULL, 32, only_type, 1, (CK_BYTE_PTR)ad, strlen(ad), &k2),
       CKR_ARGUMENTS_BAD);
    RV("unwrap, AD NULL with a length: CKR_ARGUMENTS_BAD", f->C_UnwrapKeyAuthenticated(s, &gcm, kek_unwrap, blob, 32,
       NULL, 0, NULL, 7, &k2), CKR_ARGUMENTS_BAD);
    RV("unwrap, no such unwrapping key and AD NULL: the key's error first",
       f->C_UnwrapKeyAuthenticated(s, &gcm, 0x7ffff001UL, blob, 32, NULL, 0, NULL, 7, &k2),
       CKR_UNWRAPPING_KEY_HANDLE_INVALID);

    /* The attacks 56-conformance runs against C_WrapKey, through the authenticated calls. The
     * victim S is sensitive and extractable, its value known to the test. */
    unsigned char secret[16] = "0123456789abcdef";
    CK_OBJECT_HANDLE S = create_secret(s, aes_type, secret, 16, yes, yes, no, no);
    CK_OBJECT_HANDLE K = gen_aes(s, no, yes, yes, no, no);
    RV("wrap/decrypt: a key that can decrypt wraps no sensitive key (CKR_KEY_NOT_WRAPPABLE)",
       wrap_auth(s, &p, K, S, ad, blob2, &n), CKR_KEY_NOT_WRAPPABLE);
    RV("known wrapping key: a created KEK wraps no sensitive key (CKR_KEY_NOT_WRAPPABLE)",
       wrap_auth(s, &p, kek, S, ad, blob2, &n), CKR_KEY_NOT_WRAPPABLE);
    CK_OBJECT_HANDLE W = gen_aes(s, no, no, yes, yes, no);
    RV("GCM IV reuse (rule 7): even a generated wrap-only KEK wraps no sensitive key with GCM",
       wrap_auth(s, &p, W, S, ad, blob2, &n), CKR_KEY_NOT_WRAPPABLE);
    CK_OBJECT_HANDLE W2 = gen_aes(s, no, no, yes, no, no);
    RV("nor one that cannot unwrap", wrap_auth(s, &p, W2, S, ad, blob2, &n), CKR_KEY_NOT_WRAPPABLE);
    /* Re-import: a blob made under a key that can wrap is never unwrapped as readable. */
    CK_OBJECT_HANDLE kek_both = create_secret(s, aes_type, kekv, 16, yes, no, yes, yes);
    k2 = 0;
    RV("re-import: readable unwrap under a key that can wrap is CKR_TEMPLATE_INCONSISTENT",
       unwrap_auth(s, &p, kek_both, blob, 32, ad, readable, 2, &k2), CKR_TEMPLATE_INCONSISTENT);
    CHECK("and made nothing", k2 == 0);
    /* CKA_WRAP_WITH_TRUSTED is honoured too. */
    CK_OBJECT_HANDLE wwt = 0;
    {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                            {CKA_VALUE, target, 16}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1},
                            {CKA_WRAP_WITH_TRUSTED, &yes, 1}};
        f->C_CreateObject(s, t, 6, &wwt);
    }
    RV("a CKA_WRAP_WITH_TRUSTED key under an untrusted KEK: CKR_KEY_NOT_WRAPPABLE",
       wrap_auth(s, &p, kek, wwt, ad, blob2, &n), CKR_KEY_NOT_WRAPPABLE);
}

/* ---- trust objects ---- */

#define CKO_TRUST_ 0x0BUL
#define CKA_TRUST_SERVER_AUTH_ 0x62CUL
#define CKA_TRUST_OCSP_SIGNING_ 0x632UL
#define CKA_HASH_OF_CERTIFICATE_ 0x635UL
#define CKT_TRUST_ANCHOR_ 2UL

static CK_ULONG find_all(CK_SESSION_HANDLE s, CK_ATTRIBUTE *t, CK_ULONG n, CK_OBJECT_HANDLE *out, CK_ULONG max) {
    CK_ULONG got = 0;
    if (f->C_FindObjectsInit(s, t, n) != CKR_OK) return (CK_ULONG)-1;
    f->C_FindObjects(s, out, max, &got);
    f->C_FindObjectsFinal(s);
    return got;
}

/* A certificate the SO marks trusted (what `keyshare trust` sets on the keychain's item) shows as a
 * CKO_TRUST object naming it by issuer, serial and SHA-256, read-only; an untrusted one does not. */
static void trust_group(CK_SESSION_HANDLE user, CK_SLOT_ID slot, const char *so_pin, const char *certfile) {
    unsigned char der[4096];
    FILE *fp = fopen(certfile, "rb");
    size_t dn = fp ? fread(der, 1, sizeof der, fp) : 0;
    if (fp) fclose(fp);
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)dn);
    CHECK("the test certificate parses", x != NULL);
    if (!x) return;
    unsigned char *issuer = NULL, *serial = NULL, hash[32];
    int in = i2d_X509_NAME(X509_get_issuer_name(x), &issuer);
    int sn = i2d_ASN1_INTEGER(X509_get_serialNumber(x), &serial);
    EVP_Digest(der, dn, hash, NULL, EVP_sha256(), NULL);

    CK_SESSION_HANDLE so;
    CK_OBJECT_CLASS cert_class = CKO_CERTIFICATE, trust_class = CKO_TRUST_;
    CK_CERTIFICATE_TYPE x509 = CKC_X_509;
    CK_OBJECT_HANDLE anchor = 0, plain = 0;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &so) == CKR_OK) {
        f->C_Logout(user);
        if (f->C_Login(so, CKU_SO, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin)) == CKR_OK) {
            CK_ATTRIBUTE t[] = {{CKA_CLASS, &cert_class, sizeof cert_class}, {CKA_CERTIFICATE_TYPE, &x509, sizeof x509},
                                {CKA_VALUE, der, dn}, {CKA_TOKEN, &yes, 1}, {CKA_TRUSTED, &yes, 1},
                                {CKA_LABEL, "anchor", 6}};
            f->C_CreateObject(so, t, 6, &anchor);
            f->C_Logout(so);
        }
        f->C_CloseSession(so);
    }
    CHECK("the SO stored a trusted certificate", anchor != 0);
    const char *pin = getenv("KS_TEST_PIN");
    f->C_Login(user, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    CK_OBJECT_HANDLE found[8];
    CK_ATTRIBUTE by_class = {CKA_CLASS, &trust_class, sizeof trust_class};
    CHECK("C_FindObjects(CKA_CLASS CKO_TRUST): one trust object", find_all(user, &by_class, 1, found, 8) == 1);
    CK_OBJECT_HANDLE tr = found[0];
    unsigned char gi[512], gs[64], gh[64];
    CK_ULONG sa = 0, oc = 0, nh = 0;
    CK_BBOOL mod = 1, tok = 0;
    CK_ATTRIBUTE q[] = {{CKA_ISSUER, gi, sizeof gi}, {CKA_SERIAL_NUMBER, gs, sizeof gs},
                        {CKA_HASH_OF_CERTIFICATE_, gh, sizeof gh}, {CKA_NAME_HASH_ALGORITHM, &nh, sizeof nh},
                        {CKA_TRUST_SERVER_AUTH_, &sa, sizeof sa}, {CKA_TRUST_OCSP_SIGNING_, &oc, sizeof oc},
                        {CKA_MODIFIABLE, &mod, 1}, {CKA_TOKEN, &tok, 1}};
    RV("C_GetAttributeValue of its 3.2 attributes", f->C_GetAttributeValue(user, tr, q, 8), CKR_OK);
    CHECK("CKA_ISSUER and CKA_SERIAL_NUMBER are the certificate's (DER)",
          (int)q[0].ulValueLen == in && memcmp(gi, issuer, in) == 0 && (int)q[1].ulValueLen == sn &&
          memcmp(gs, serial, sn) == 0);
    CHECK("CKA_HASH_OF_CERTIFICATE is its SHA-256, CKA_NAME_HASH_ALGORITHM CKM_SHA256",
          q[2].ulValueLen == 32 && memcmp(gh, hash, 32) == 0 && nh == CKM_SHA256);
    CHECK("CKA_TRUST_SERVER_AUTH and CKA_TRUST_OCSP_SIGNING: CKT_TRUST_ANCHOR",
          sa == CKT_TRUST_ANCHOR_ && oc == CKT_TRUST_ANCHOR_);
    CHECK("a token object, CKA_MODIFIABLE false", tok == 1 && mod == 0);
    CK_ULONG anchor_v = CKT_TRUST_ANCHOR_;
    CK_ATTRIBUTE by_trust[] = {{CKA_CLASS, &trust_class, sizeof trust_class}, {CKA_TRUST_SERVER_AUTH_, &anchor_v, sizeof anchor_v},
                               {CKA_HASH_OF_CERTIFICATE_, hash, 32}};
    CHECK("found again by hash and server-auth trust, same handle",
          find_all(user, by_trust, 3, found, 8) == 1 && found[0] == tr);
    CK_ATTRIBUTE lab = {CKA_LABEL, "x", 1};
    RV("C_SetAttributeValue on it: CKR_ACTION_PROHIBITED", f->C_SetAttributeValue(user, tr, &lab, 1),
       CKR_ACTION_PROHIBITED);
    CK_OBJECT_HANDLE cp = 0;
    RV("C_CopyObject of it: CKR_ACTION_PROHIBITED", f->C_CopyObject(user, tr, NULL, 0, &cp), CKR_ACTION_PROHIBITED);
    RV("C_DestroyObject of it: CKR_ACTION_PROHIBITED", f->C_DestroyObject(user, tr), CKR_ACTION_PROHIBITED);
    CK_ATTRIBUTE mk[] = {{CKA_CLASS, &trust_class, sizeof trust_class}, {CKA_TOKEN, &no, 1}};
    CHECK("C_CreateObject of a CKO_TRUST is refused (trust is set on the certificate)",
          f->C_CreateObject(user, mk, 2, &cp) != CKR_OK);
    /* A find without the class (a 3.0 host listing everything) does not return it. */
    CK_OBJECT_HANDLE many[256];
    CK_ULONG all = find_all(user, NULL, 0, many, 256);
    int listed = 0;
    for (CK_ULONG i = 0; i < all && all != (CK_ULONG)-1; i++) listed |= many[i] == tr;
    CHECK("a find without CKA_CLASS does not list it (3.0 hosts see what they saw)", all != (CK_ULONG)-1 && !listed);
    /* The same certificate, untrusted, as another label: still one trust object. */
    {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &cert_class, sizeof cert_class}, {CKA_CERTIFICATE_TYPE, &x509, sizeof x509},
                            {CKA_VALUE, der, dn}, {CKA_TOKEN, &yes, 1}, {CKA_LABEL, "plain", 5}};
        f->C_CreateObject(user, t, 5, &plain);
    }
    CHECK("an untrusted certificate adds no trust object", plain && find_all(user, &by_class, 1, found, 8) == 1);
    /* The trust follows the certificate: destroyed, the trust object goes. */
    RV("the SO's certificate destroyed", f->C_DestroyObject(user, anchor), CKR_OK);
    CHECK("then no trust object is found", find_all(user, &by_class, 1, found, 8) == 0);
    CHECK("and its handle is invalid", f->C_GetAttributeValue(user, tr, q, 1) == CKR_OBJECT_HANDLE_INVALID);
    OPENSSL_free(issuer);
    OPENSSL_free(serial);
    X509_free(x);
}

/* `keyshare trust anchor add` (the CLI's path to CKA_TRUSTED on a keychain certificate): the token
 * labelled LABEL shows a CKO_TRUST object whose hash is SHA256HEX, to a session without login. */
static void cli_anchor_group(const char *label, const char *sha_hex) {
    CK_SLOT_ID slots[16];
    CK_ULONG ns = 16;
    CK_SLOT_ID slot = (CK_SLOT_ID)-1;
    if (f->C_GetSlotList(CK_TRUE, slots, &ns) == CKR_OK)
        for (CK_ULONG i = 0; i < ns; i++) {
            CK_TOKEN_INFO ti;
            if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && strncmp((char *)ti.label, label, strlen(label)) == 0 &&
                (strlen(label) == 32 || ti.label[strlen(label)] == ' '))
                slot = slots[i];
        }
    CK_SESSION_HANDLE s;
    CHECK("the keychain token of `keyshare trust anchor add` is there",
          slot != (CK_SLOT_ID)-1 && f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) == CKR_OK);
    if (slot == (CK_SLOT_ID)-1) return;
    CK_OBJECT_CLASS trust_class = CKO_TRUST_;
    CK_ATTRIBUTE by_class = {CKA_CLASS, &trust_class, sizeof trust_class};
    CK_OBJECT_HANDLE found[8];
    CK_ULONG n = find_all(s, &by_class, 1, found, 8);
    unsigned char h[32], want[32];
    for (int i = 0; i < 32; i++) sscanf(sha_hex + 2 * i, "%2hhx", &want[i]);
    CK_ATTRIBUTE q = {CKA_HASH_OF_CERTIFICATE_, h, 32};
    CHECK("its anchor is a CKO_TRUST object (no login needed), hash = the certificate's SHA-256",
          n == 1 && f->C_GetAttributeValue(s, found[0], &q, 1) == CKR_OK && memcmp(h, want, 32) == 0);
    f->C_CloseSession(s);
}

/* ---- interfaces ---- */

static void interface_group(void *lib) {
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(lib, "C_GetInterface");
    CK_C_GetInterfaceList gl = (CK_C_GetInterfaceList)dlsym(lib, "C_GetInterfaceList");
    CK_INTERFACE list[3];
    CK_ULONG count = 3;
    RV("C_GetInterfaceList", gl(list, &count), CKR_OK);
    CHECK("three interfaces: 3.2 first, then 3.0 and 2.40",
          count == 3 && ((CK_VERSION *)list[0].pFunctionList)->major == 3 &&
          ((CK_VERSION *)list[0].pFunctionList)->minor == 2 && ((CK_VERSION *)list[1].pFunctionList)->minor == 0 &&
          ((CK_VERSION *)list[2].pFunctionList)->major == 2);
    CK_VERSION v30 = {3, 0}, v240 = {2, 40};
    CK_INTERFACE_PTR i30 = NULL, i240 = NULL;
    CHECK("C_GetInterface(\"PKCS 11\", 3.0) and (2.40) answer",
          gi((CK_UTF8CHAR_PTR)"PKCS 11", &v30, &i30, 0) == CKR_OK && gi((CK_UTF8CHAR_PTR)"PKCS 11", &v240, &i240, 0) == CKR_OK);
    if (!i30 || !i240) return;
    CK_FUNCTION_LIST_3_0 *f30 = i30->pFunctionList;
    CK_FUNCTION_LIST *f240 = i240->pFunctionList;
    CK_INFO info;
    CHECK("the 3.0 table is version 3.0 and its C_GetInfo says 3.0 (as before)",
          f30->version.major == 3 && f30->version.minor == 0 && f30->C_GetInfo(&info) == CKR_OK &&
          info.cryptokiVersion.major == 3 && info.cryptokiVersion.minor == 0);
    CHECK("the 2.40 table is version 2.40 and its C_GetInfo says 3.0 (as before: one library version)",
          f240->version.major == 2 && f240->version.minor == 40 && f240->C_GetInfo(&info) == CKR_OK &&
          info.cryptokiVersion.major == 3 && info.cryptokiVersion.minor == 0);
    CHECK("only the 3.2 table's C_GetInfo says 3.2",
          f->C_GetInfo(&info) == CKR_OK && info.cryptokiVersion.major == 3 && info.cryptokiVersion.minor == 2);
    CHECK("the 3.0 and 3.2 tables share the 3.0 entries (C_VerifyInit, C_MessageVerifyFinal)",
          (void *)f30->C_VerifyInit == (void *)f->C_VerifyInit &&
          (void *)f30->C_MessageVerifyFinal == (void *)f->C_MessageVerifyFinal);
}

/* C_GetMechanismInfo through the 3.0 and 2.40 tables (and C_GetFunctionList's) hides the flags
 * 3.2 added (CKF_ENCAPSULATE, CKF_DECAPSULATE): a host that asked for those interfaces sees what
 * it saw before 3.2. C_GetMechanismList is the same through every table (as Kryoptic). */
static void mechinfo_group(void *lib, CK_SLOT_ID slot) {
    const CK_FLAGS only32 = CKF_ENCAPSULATE | CKF_DECAPSULATE;
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(lib, "C_GetInterface");
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(lib, "C_GetFunctionList");
    CK_VERSION v30 = {3, 0}, v240 = {2, 40};
    CK_INTERFACE_PTR i30 = NULL, i240 = NULL;
    CK_FUNCTION_LIST_PTR fl = NULL;
    if (gi((CK_UTF8CHAR_PTR)"PKCS 11", &v30, &i30, 0) != CKR_OK || gi((CK_UTF8CHAR_PTR)"PKCS 11", &v240, &i240, 0) != CKR_OK ||
        !gfl || gfl(&fl) != CKR_OK) {
        CHECK("the 3.0, 2.40 and C_GetFunctionList tables", 0);
        return;
    }
    CK_FUNCTION_LIST_3_0 *f30 = i30->pFunctionList;
    CK_FUNCTION_LIST *f240 = i240->pFunctionList;
    static CK_MECHANISM_TYPE l32[512], l30[512], l240[512], lfl[512], lexp[512];
    CK_ULONG n32 = 512, n30 = 512, n240 = 512, nfl = 512, nexp = 0, pq = 0;
    int ok = f->C_GetMechanismList(slot, l32, &n32) == CKR_OK && f30->C_GetMechanismList(slot, l30, &n30) == CKR_OK &&
             f240->C_GetMechanismList(slot, l240, &n240) == CKR_OK && fl->C_GetMechanismList(slot, lfl, &nfl) == CKR_OK;
    /* The 3.2-defined types (ML-KEM, ML-DSA and HashML-DSA, SLH-DSA and HashSLH-DSA, pkcs11_pq.h)
     * are listed only through the 3.2 table. */
    for (CK_ULONG i = 0; ok && i < n32; i++) {
        CK_MECHANISM_TYPE t = l32[i];
        int only32 = t == CKM_ML_KEM_KEY_PAIR_GEN || t == CKM_ML_KEM || t == CKM_ML_DSA_KEY_PAIR_GEN || t == CKM_ML_DSA ||
                     t == CKM_HASH_ML_DSA || (t >= CKM_HASH_ML_DSA_SHA224 && t <= CKM_HASH_ML_DSA_SHAKE256) ||
                     t == CKM_SLH_DSA_KEY_PAIR_GEN || t == CKM_SLH_DSA || t == CKM_HASH_SLH_DSA ||
                     (t >= CKM_HASH_SLH_DSA_SHA224 && t <= CKM_HASH_SLH_DSA_SHAKE256);  /* not 0x20/0x21 (2.40's DH) */
        if (only32) pq++; else lexp[nexp++] = t;
    }
    CHECKF(ok && pq >= 20,
           "C_GetMechanismList through the 3.2 table lists the post-quantum mechanisms (%lu)", pq);
    CHECKF(ok && n30 == nexp && n240 == nexp && nfl == nexp && !memcmp(l30, lexp, nexp * sizeof lexp[0]) &&
               !memcmp(l240, lexp, nexp * sizeof lexp[0]) && !memcmp(lfl, lexp, nexp * sizeof lexp[0]),
           "C_GetMechanismList through the 3.0, 2.40 and C_GetFunctionList tables: the same %lu mechanisms less the %lu 3.2-defined ones (PyKCS11 1.5.12 raised KeyError on them)",
           n32, pq);
    CK_ULONG qn = 0, small = nexp ? nexp - 1 : 0;
    CK_RV qrv = f30->C_GetMechanismList(slot, NULL, &qn);
    CK_RV srv = f30->C_GetMechanismList(slot, l30, &small);
    CHECKF(qrv == CKR_OK && qn == nexp && srv == CKR_BUFFER_TOO_SMALL && small == nexp,
           "through the 3.0 table the count query gives %lu and one slot short is CKR_BUFFER_TOO_SMALL with the count", qn);
    CHECK("through the 3.0 table a NULL pulCount is CKR_ARGUMENTS_BAD", f30->C_GetMechanismList(slot, l30, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("through the 3.0 table an unknown slot is CKR_SLOT_ID_INVALID",
          f30->C_GetMechanismList(0x7fff1234UL, NULL, &qn) == CKR_SLOT_ID_INVALID);
    if (pq) {
        CK_MECHANISM_INFO mi;
        CHECK("a 3.2-defined mechanism is still answered by number through the 2.40 table (CKM_ML_DSA)",
              f240->C_GetMechanismInfo(slot, CKM_ML_DSA, &mi) == CKR_OK && (mi.flags & CKF_SIGN));
    }
    int with32 = 0, same = 0, leak = 0;
    for (CK_ULONG i = 0; ok && i < n32; i++) {
        CK_MECHANISM_INFO a, b, c, d;
        if (f->C_GetMechanismInfo(slot, l32[i], &a) != CKR_OK || f30->C_GetMechanismInfo(slot, l32[i], &b) != CKR_OK ||
            f240->C_GetMechanismInfo(slot, l32[i], &c) != CKR_OK || fl->C_GetMechanismInfo(slot, l32[i], &d) != CKR_OK) {
            leak++;
            continue;
        }
        with32 += (a.flags & only32) != 0;
        leak += ((b.flags | c.flags | d.flags) & only32) != 0;
        same += b.flags == (a.flags & ~only32) && c.flags == b.flags && d.flags == b.flags &&
                b.ulMinKeySize == a.ulMinKeySize && b.ulMaxKeySize == a.ulMaxKeySize;
    }
    CHECKF(ok && with32 >= 4, "the 3.2 table's C_GetMechanismInfo shows CKF_ENCAPSULATE / CKF_DECAPSULATE (%d mechanisms)", with32);
    CHECKF(ok && leak == 0, "no mechanism shows a 3.2-only flag through the 3.0, 2.40 or C_GetFunctionList table (%d did)", leak);
    CHECKF(ok && same == (int)n32, "through them every mechanism has the 3.2 flags minus those, same key sizes (%d of %lu)", same, n32);
    CK_MECHANISM_INFO r32, r30;
    CHECK("CKM_RSA_PKCS: CKF_ENCAPSULATE through 3.2, not through 3.0 (CKF_ENCRYPT | CKF_WRAP kept)",
          f->C_GetMechanismInfo(slot, CKM_RSA_PKCS, &r32) == CKR_OK && f30->C_GetMechanismInfo(slot, CKM_RSA_PKCS, &r30) == CKR_OK &&
          (r32.flags & CKF_ENCAPSULATE) && !(r30.flags & CKF_ENCAPSULATE) && (r30.flags & (CKF_ENCRYPT | CKF_WRAP)) == (CKF_ENCRYPT | CKF_WRAP));
    CK_MECHANISM_INFO bad;
    CHECK("through the 3.0 table an unknown mechanism is still CKR_MECHANISM_INVALID",
          f30->C_GetMechanismInfo(slot, 0x7ffff001UL, &bad) == CKR_MECHANISM_INVALID);
    CHECK("through the 3.0 table a NULL pInfo is still CKR_ARGUMENTS_BAD",
          f30->C_GetMechanismInfo(slot, CKM_RSA_PKCS, NULL) == CKR_ARGUMENTS_BAD);
}

static void async_group(CK_SESSION_HANDLE s) {
    CK_ASYNC_DATA d;
    CK_ULONG id;
    RV("C_AsyncComplete: CKR_FUNCTION_NOT_SUPPORTED (as Kryoptic)",
       f->C_AsyncComplete(s, (CK_UTF8CHAR_PTR)"C_Sign", &d), CKR_FUNCTION_NOT_SUPPORTED);
    RV("C_AsyncGetID: CKR_FUNCTION_NOT_SUPPORTED", f->C_AsyncGetID(s, (CK_UTF8CHAR_PTR)"C_Sign", &id),
       CKR_FUNCTION_NOT_SUPPORTED);
    RV("C_AsyncJoin: CKR_FUNCTION_NOT_SUPPORTED", f->C_AsyncJoin(s, (CK_UTF8CHAR_PTR)"C_Sign", 1, NULL, 0),
       CKR_FUNCTION_NOT_SUPPORTED);
}

int main(int argc, char **argv) {
    if (argc < 2) { printf("usage: v32 MODULE\n0 passed, 1 failed\n"); return 2; }
    const char *so_pin = getenv("KS_TEST_SO_PIN"), *pin = getenv("KS_TEST_PIN");
    if (!so_pin || !pin) { printf("KS_TEST_SO_PIN / KS_TEST_PIN unset\n0 passed, 1 failed\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { printf("dlopen: %s\n0 passed, 1 failed\n", dlerror()); return 2; }
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(lib, "C_GetInterface");
    CK_VERSION v32 = {3, 2};
    CK_INTERFACE_PTR ip = NULL;
    if (!gi || gi((CK_UTF8CHAR_PTR)"PKCS 11", &v32, &ip, 0) != CKR_OK) {
        printf("C_GetInterface(\"PKCS 11\", 3.2) failed\n0 passed, 1 failed\n");
        return 2;
    }
    f = ip->pFunctionList;
    CK_FLAGS flags;
    RV("before C_Initialize: C_GetSessionValidationFlags is CKR_CRYPTOKI_NOT_INITIALIZED",
       f->C_GetSessionValidationFlags(1, 1, &flags), CKR_CRYPTOKI_NOT_INITIALIZED);
    RV("before C_Initialize: C_VerifySignatureInit is CKR_CRYPTOKI_NOT_INITIALIZED",
       f->C_VerifySignatureInit(1, NULL, 0, NULL, 0), CKR_CRYPTOKI_NOT_INITIALIZED);
    if (f->C_Initialize(NULL) != CKR_OK) { printf("C_Initialize failed\n0 passed, 1 failed\n"); return 2; }
    interface_group(lib);
    CK_SLOT_ID slot = harness_make_token((CK_FUNCTION_LIST_3_0 *)f, "v32", so_pin, pin);
    CK_SESSION_HANDLE s = 0;
    if (!slot || f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK ||
        f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) {
        printf("token setup failed\n%d passed, %d failed\n", pass, fail + 1);
        return 1;
    }
    mechinfo_group(lib, slot);
    verify_group(s);
    validation_group(s);
    wrap_group(s);
    async_group(s);
    if (argc > 2) trust_group(s, slot, so_pin, argv[2]);
    if (argc > 4) cli_anchor_group(argv[3], argv[4]);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    RV("after C_Finalize: C_WrapKeyAuthenticated is CKR_CRYPTOKI_NOT_INITIALIZED",
       f->C_WrapKeyAuthenticated(1, NULL, 0, 0, NULL, 0, NULL, NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
    RV("after C_Finalize: C_UnwrapKeyAuthenticated is CKR_CRYPTOKI_NOT_INITIALIZED",
       f->C_UnwrapKeyAuthenticated(1, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
