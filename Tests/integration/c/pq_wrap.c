/* C_WrapKey / C_UnwrapKey of PKCS #11 3.2 post-quantum private keys (Tests/integration/33-pq.sh,
 * issue 18): ML-DSA-65, ML-KEM-768 and SLH-DSA-SHA2-128f private keys wrap as PKCS #8 in OpenSSL
 * 3.5's encoding, under the same rules as the module's other private keys (CKA_EXTRACTABLE, the
 * wrap/decrypt separation rules: a sensitive key under a token-made wrap-only AES key with
 * CKM_AES_KEY_WRAP_PAD, never with GCM). The blob of a non-sensitive key wrapped under a known
 * AES key is opened here with raw EVP (AES-256 key wrap with padding / AES-256-GCM) and parsed as
 * PKCS #8 by EVP: the same algorithm and public key. Unwrapped keys sign (verified by the original
 * public key) and decapsulate (the secret the original public key encapsulated).
 * Built only with a post-quantum engine (33-pq.sh skips it otherwise).
 *
 * Usage: pq_wrap MODULE, with KS_TEST_SO_PIN and KS_TEST_PIN in the environment.
 * Ends with "N passed, M failed". */
#define _GNU_SOURCE
#include <openssl/core_names.h>
#include <openssl/x509.h>
#define P11HOST_3_2
#define P11HOST_BUNDLED_LIBCRYPTO 1
#include "p11host.h"



static const unsigned char msg[] = "keyshare post-quantum wrap test";
static const unsigned char known_kek[32] = "0123456789abcdef0123456789abcde";

static const struct { const char *name; CK_MECHANISM_TYPE gen, use; CK_KEY_TYPE kt; CK_ULONG set; } kinds[] = {
    {"ML-DSA-65", CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA, CKK_ML_DSA, CKP_ML_DSA_65},
    {"ML-KEM-768", CKM_ML_KEM_KEY_PAIR_GEN, CKM_ML_KEM, CKK_ML_KEM, CKP_ML_KEM_768},
    {"SLH-DSA-SHA2-128f", CKM_SLH_DSA_KEY_PAIR_GEN, CKM_SLH_DSA, CKK_SLH_DSA, CKP_SLH_DSA_SHA2_128F},
};

static CK_RV pair(CK_SESSION_HANDLE s, int i, CK_BBOOL sensitive, CK_BBOOL extractable, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {kinds[i].gen, NULL, 0};
    CK_ULONG set = kinds[i].set;
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &set, sizeof set}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &extractable, 1}};
    return f->C_GenerateKeyPair(s, &m, pt, 2, kt, 3, pub, priv);
}

/* The unwrapped private key works: it signs what the original public key verifies, or decapsulates
 * what the original public key encapsulated to the same secret. */
static int works(CK_SESSION_HANDLE s, int i, CK_OBJECT_HANDLE pub, CK_OBJECT_HANDLE priv) {
    CK_MECHANISM m = {kinds[i].use, NULL, 0};
    if (kinds[i].kt == CKK_ML_KEM) {
        static unsigned char ct[2048];
        CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
        CK_KEY_TYPE gk = CKK_GENERIC_SECRET;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gk, sizeof gk}, {CKA_TOKEN, &no, 1},
                            {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
        CK_ULONG cn = sizeof ct;
        CK_OBJECT_HANDLE k1 = 0, k2 = 0;
        if (f->C_EncapsulateKey(s, &m, pub, t, 5, ct, &cn, &k1) != CKR_OK) return 0;
        if (f->C_DecapsulateKey(s, &m, priv, t, 5, ct, cn, &k2) != CKR_OK) return 0;
        unsigned char a[64], b[64];
        CK_RV r1, r2;
        CK_ULONG n1 = p11host_attr(s, k1, CKA_VALUE, a, sizeof a, &r1), n2 = p11host_attr(s, k2, CKA_VALUE, b, sizeof b, &r2);
        return r1 == CKR_OK && r2 == CKR_OK && n1 == 32 && n2 == 32 && memcmp(a, b, 32) == 0;
    }
    static unsigned char sig[20000];
    CK_ULONG sn = sizeof sig;
    if (f->C_SignInit(s, &m, priv) != CKR_OK || f->C_Sign(s, (CK_BYTE_PTR)msg, sizeof msg, sig, &sn) != CKR_OK) return 0;
    if (f->C_VerifyInit(s, &m, pub) != CKR_OK) return 0;
    return f->C_Verify(s, (CK_BYTE_PTR)msg, sizeof msg, sig, sn) == CKR_OK;
}

/* A wrap-only AES-256 key made in the token (may wrap sensitive keys: wrap/decrypt rules 1, 2). */
static CK_OBJECT_HANDLE wrap_only_kek(CK_SESSION_HANDLE s) {
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_ULONG len = 32;
    CK_ATTRIBUTE t[] = {{CKA_TOKEN, &no, 1}, {CKA_VALUE_LEN, &len, sizeof len}, {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &yes, 1},
                        {CKA_ENCRYPT, &no, 1}, {CKA_DECRYPT, &no, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &no, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, 8, &h) == CKR_OK ? h : 0;
}

/* An AES-256 key of known value (C_CreateObject): it may wrap only non-sensitive keys. */
static CK_OBJECT_HANDLE known_kek_handle(CK_SESSION_HANDLE s) {
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_KEY_TYPE ak = CKK_AES;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &ak, sizeof ak}, {CKA_TOKEN, &no, 1},
                        {CKA_VALUE, (void *)known_kek, 32}, {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, 6, &h) == CKR_OK ? h : 0;
}

/* EVP opens a blob wrapped under known_kek and parses it as PKCS #8: the key's algorithm name and
 * public key, compared with the module's public CKA_VALUE. */
static int evp_opens(const unsigned char *blob, size_t bn, int gcm, const unsigned char *iv, const char *name,
                     const unsigned char *pubv, size_t pubn) {
    unsigned char der[16384];
    int n = 0, m = 0, ok;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    if (gcm) {
        ok = c && bn > 16 && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, known_kek, iv) == 1
             && EVP_DecryptUpdate(c, der, &n, blob, (int)bn - 16) == 1
             && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(blob + bn - 16)) == 1
             && EVP_DecryptFinal_ex(c, der + n, &m) == 1;
    } else {
        EVP_CIPHER_CTX_set_flags(c, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
        ok = c && EVP_DecryptInit_ex(c, EVP_aes_256_wrap_pad(), NULL, known_kek, NULL) == 1
             && EVP_DecryptUpdate(c, der, &n, blob, (int)bn) == 1 && EVP_DecryptFinal_ex(c, der + n, &m) == 1;
    }
    EVP_CIPHER_CTX_free(c);
    if (!ok) return 0;
    const unsigned char *p = der;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &p, n + m);
    EVP_PKEY *k = p8 ? EVP_PKCS82PKEY(p8) : NULL;
    unsigned char pub[4096];
    size_t pn = 0;
    ok = k && EVP_PKEY_is_a(k, name) && EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof pub, &pn) == 1
         && pn == pubn && memcmp(pub, pubv, pn) == 0 && p == der + n + m;
    EVP_PKEY_free(k);
    PKCS8_PRIV_KEY_INFO_free(p8);
    OPENSSL_cleanse(der, sizeof der);
    return ok;
}

static void one(CK_SESSION_HANDLE s, int i, CK_OBJECT_HANDLE kek, CK_OBJECT_HANDLE known) {
    const char *nm = kinds[i].name;
    static unsigned char blob[16384], pubv[4096];
    CK_OBJECT_HANDLE pub = 0, priv = 0, back = 0;
    CK_RV rv = pair(s, i, CK_TRUE, CK_TRUE, &pub, &priv);
    CHECKF(rv == CKR_OK, "%s: a sensitive, extractable key pair", nm);
    if (rv != CKR_OK) return;
    CK_MECHANISM kwp = {CKM_AES_KEY_WRAP_PAD, NULL, 0};
    CK_ULONG bn = 0;
    rv = f->C_WrapKey(s, &kwp, kek, priv, NULL, &bn);
    CK_ULONG want = bn;
    bn = sizeof blob;
    if (rv == CKR_OK) rv = f->C_WrapKey(s, &kwp, kek, priv, blob, &bn);
    if (rv != CKR_OK) NOTE("C_WrapKey rv 0x%lx", rv);
    CHECKF(rv == CKR_OK && bn == want && bn > 64, "%s: C_WrapKey CKM_AES_KEY_WRAP_PAD (length query %lu, blob %lu)", nm, want, bn);
    CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = kinds[i].kt;
    CK_ATTRIBUTE ut[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &no, 1},
                         {kt == CKK_ML_KEM ? CKA_DECAPSULATE : CKA_SIGN, &yes, 1}};
    rv = f->C_UnwrapKey(s, &kwp, kek, blob, bn, ut, 4, &back);
    if (rv != CKR_OK) NOTE("C_UnwrapKey rv 0x%lx", rv);
    CK_ULONG set = 0;
    CK_BBOOL sens = 0;
    CK_RV r2, r3;
    p11host_attr(s, back, CKA_PARAMETER_SET, &set, sizeof set, &r2);
    p11host_attr(s, back, CKA_SENSITIVE, &sens, 1, &r3);
    CHECKF(rv == CKR_OK && r2 == CKR_OK && set == kinds[i].set && r3 == CKR_OK && sens,
           "%s: C_UnwrapKey gives a sensitive key of the same CKA_PARAMETER_SET", nm);
    CHECKF(rv == CKR_OK && works(s, i, pub, back), kt == CKK_ML_KEM ? "%s: the unwrapped key decapsulates what the public key encapsulated"
                                                                     : "%s: the unwrapped key signs, the original public key verifies", nm);
    CK_KEY_TYPE other = kt == CKK_ML_DSA ? CKK_ML_KEM : CKK_ML_DSA;
    CK_ATTRIBUTE wt[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &other, sizeof other}, {CKA_TOKEN, &no, 1}};
    CK_OBJECT_HANDLE h = 0;
    CHECKF(f->C_UnwrapKey(s, &kwp, kek, blob, bn, wt, 3, &h) == CKR_TEMPLATE_INCONSISTENT && h == 0,
           "%s: unwrapped under another CKA_KEY_TYPE: CKR_TEMPLATE_INCONSISTENT", nm);
    CK_ULONG wrongset = kinds[i].set == 1 ? 2 : 1, gotset = 0;
    CK_ATTRIBUTE st[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &no, 1},
                         {CKA_PARAMETER_SET, &wrongset, sizeof wrongset}};
    rv = f->C_UnwrapKey(s, &kwp, kek, blob, bn, st, 4, &h);
    if (rv == CKR_OK) p11host_attr(s, h, CKA_PARAMETER_SET, &gotset, sizeof gotset, &r2);
    if (rv != CKR_TEMPLATE_INCONSISTENT) NOTE("rv 0x%lx, CKA_PARAMETER_SET %lu", rv, gotset);
    CHECKF(rv == CKR_TEMPLATE_INCONSISTENT, "%s: a template naming another CKA_PARAMETER_SET: CKR_TEMPLATE_INCONSISTENT", nm);
    h = 0;
    blob[bn / 2] ^= 1;
    CHECKF(f->C_UnwrapKey(s, &kwp, kek, blob, bn, ut, 4, &h) == CKR_WRAPPED_KEY_INVALID && h == 0,
           "%s: a modified blob: CKR_WRAPPED_KEY_INVALID", nm);
    unsigned char iv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    CK_GCM_PARAMS gp = {iv, sizeof iv, 96, NULL, 0, 128};
    CK_MECHANISM gcm = {CKM_AES_GCM, &gp, sizeof gp};
    bn = sizeof blob;
    CHECKF(f->C_WrapKey(s, &gcm, kek, priv, blob, &bn) == CKR_KEY_NOT_WRAPPABLE,
           "%s: a sensitive key with CKM_AES_GCM: CKR_KEY_NOT_WRAPPABLE (rule 7, as other private keys)", nm);
    bn = sizeof blob;
    CHECKF(f->C_WrapKey(s, &kwp, known, priv, blob, &bn) == CKR_KEY_NOT_WRAPPABLE,
           "%s: a sensitive key under an AES key of known value: CKR_KEY_NOT_WRAPPABLE (as other private keys)", nm);

    /* Not sensitive, extractable: under the known key, opened and parsed by EVP. */
    CK_OBJECT_HANDLE pub2 = 0, priv2 = 0;
    rv = pair(s, i, CK_FALSE, CK_TRUE, &pub2, &priv2);
    CK_ULONG pubn = p11host_attr(s, pub2, CKA_VALUE, pubv, sizeof pubv, &r2);
    bn = sizeof blob;
    if (rv == CKR_OK) rv = f->C_WrapKey(s, &kwp, known, priv2, blob, &bn);
    CHECKF(rv == CKR_OK && r2 == CKR_OK && evp_opens(blob, bn, 0, NULL, nm, pubv, pubn),
           "%s: EVP opens the AES-KWP blob: PKCS #8 of the same %s key (OpenSSL 3.5's encoding)", nm, nm);
    bn = sizeof blob;
    rv = f->C_WrapKey(s, &gcm, known, priv2, blob, &bn);
    CHECKF(rv == CKR_OK && evp_opens(blob, bn, 1, iv, nm, pubv, pubn), "%s: EVP opens the AES-GCM blob: the same PKCS #8", nm);
    back = 0;
    rv = f->C_UnwrapKey(s, &gcm, known, blob, bn, ut, 4, &back);
    CHECKF(rv == CKR_OK && works(s, i, pub2, back), "%s: C_UnwrapKey CKM_AES_GCM, the key works", nm);

    /* Not extractable: refused. */
    CK_OBJECT_HANDLE pub3 = 0, priv3 = 0;
    rv = pair(s, i, CK_TRUE, CK_FALSE, &pub3, &priv3);
    bn = sizeof blob;
    CHECKF(rv == CKR_OK && f->C_WrapKey(s, &kwp, kek, priv3, blob, &bn) == CKR_KEY_UNEXTRACTABLE,
           "%s: a key with CKA_EXTRACTABLE false: CKR_KEY_UNEXTRACTABLE", nm);
}

int main(int argc, char **argv) {
    CK_SLOT_ID slot = 0;
    CK_SESSION_HANDLE s = 0;
    int rc = p11host_start_3_2(argc, argv, "pq_wrap MODULE", "pqwrap", "a token to work on", &slot, &s);
    if (rc) return rc;
    if (slot) {
        CK_OBJECT_HANDLE kek = wrap_only_kek(s), known = known_kek_handle(s);
        CHECK("a wrap-only AES-256 key and one of known value", kek && known);
        for (int i = 0; i < 3; i++) one(s, i, kek, known);
        f->C_CloseSession(s);
    }
    f->C_Finalize(NULL);
    return p11host_report();
}
