#ifndef KEYSHARE_COPENSSL_SHIM_H
#define KEYSHARE_COPENSSL_SHIM_H
// The OpenSSL 3 surface keyshare uses. Function-like macros are not imported
// into Swift, so the few that matter are wrapped as static inline functions.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/provider.h>
#include <openssl/pkcs7.h>
#include <openssl/asn1.h>
#include <openssl/opensslv.h>

// The bundled OpenSSL (issue 18; dist/openssl/fetch.sh generates this header next to the bundle's
// headers). Absent when keyshare links the system libcrypto: then NULL.
#if __has_include(<keyshare_openssl_bundle.h>)
#include <keyshare_openssl_bundle.h>
static inline const char *ks_openssl_bundle_legacy(void) { return KS_OPENSSL_BUNDLE_LEGACY; }
#else
static inline const char *ks_openssl_bundle_legacy(void) { return (const char *)0; }
#endif
/// OPENSSL_VERSION_NUMBER of the headers compiled against (a macro with a cast-free value, but
/// kept as a function like the others).
static inline unsigned long ks_openssl_header_version(void) { return OPENSSL_VERSION_NUMBER; }

/// SubjectPublicKeyInfo DER of an EC (named curve: pass its NID) or Ed25519
/// (pass NID_undef) key, assembled by the ASN.1 layer. i2d_PUBKEY goes
/// through the OSSL_ENCODER framework instead, which costs about 220 us per
/// call on OpenSSL 3.0 against 16 us here (measured), and every key object
/// created or parsed needs its SPKI. Returns the length with an
/// OPENSSL_malloc'd buffer in *out, or -1: the caller then uses i2d_PUBKEY.
static inline int ks_spki_der(EVP_PKEY *pkey, int curve_nid, unsigned char **out) {
    unsigned char *pub = NULL;
    size_t publen = 0;
    ASN1_OBJECT *alg;
    int ptype;
    void *pval;
    if (curve_nid != NID_undef) {
        publen = EVP_PKEY_get1_encoded_public_key(pkey, &pub);
        alg = OBJ_nid2obj(NID_X9_62_id_ecPublicKey);
        ptype = V_ASN1_OBJECT;
        pval = OBJ_nid2obj(curve_nid);
    } else {
        if (EVP_PKEY_get_raw_public_key(pkey, NULL, &publen) != 1 || publen == 0) return -1;
        pub = OPENSSL_malloc(publen);
        if (pub == NULL || EVP_PKEY_get_raw_public_key(pkey, pub, &publen) != 1) {
            OPENSSL_free(pub);
            return -1;
        }
        alg = OBJ_nid2obj(NID_ED25519);
        ptype = V_ASN1_UNDEF;
        pval = NULL;
    }
    if (pub == NULL || publen == 0 || publen > 1024 || alg == NULL) {
        OPENSSL_free(pub);
        return -1;
    }
    X509_PUBKEY *xp = X509_PUBKEY_new();
    if (xp == NULL || !X509_PUBKEY_set0_param(xp, alg, ptype, pval, pub, (int)publen)) {
        OPENSSL_free(pub); /* not consumed on failure */
        X509_PUBKEY_free(xp);
        return -1;
    }
    int len = i2d_X509_PUBKEY(xp, out);
    X509_PUBKEY_free(xp);
    return len;
}

static inline long ks_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline void ks_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline int ks_sk_X509_num(const STACK_OF(X509) *s) { return sk_X509_num(s); }
static inline X509 *ks_sk_X509_value(const STACK_OF(X509) *s, int i) { return sk_X509_value(s, i); }
static inline STACK_OF(X509) *ks_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int ks_sk_X509_push(STACK_OF(X509) *s, X509 *x) { return sk_X509_push(s, x); }
static inline void ks_sk_X509_pop_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }
static inline void ks_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
static inline int ks_sk_GENERAL_NAME_num(const GENERAL_NAMES *s) { return sk_GENERAL_NAME_num(s); }
static inline GENERAL_NAME *ks_sk_GENERAL_NAME_value(const GENERAL_NAMES *s, int i) { return sk_GENERAL_NAME_value(s, i); }
static inline void ks_GENERAL_NAMES_free(GENERAL_NAMES *s) { GENERAL_NAMES_free(s); }

// PKCS #12 safes and bags (STACK_OF macros).
static inline void ks_sk_PKCS12_SAFEBAG_pop_free(STACK_OF(PKCS12_SAFEBAG) *s) { sk_PKCS12_SAFEBAG_pop_free(s, PKCS12_SAFEBAG_free); }
static inline void ks_sk_PKCS7_pop_free(STACK_OF(PKCS7) *s) { sk_PKCS7_pop_free(s, PKCS7_free); }

// Name printing: RFC 2253 order and escaping, but UTF-8 kept readable.
static inline int ks_X509_NAME_print_rfc2253(BIO *out, const X509_NAME *name) {
    return X509_NAME_print_ex(out, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
}

static inline void *ks_OPENSSL_memdup(const void *p, size_t n) { return OPENSSL_memdup(p, n); }
static inline void ks_OPENSSL_cleanse_free(void *p, size_t n) { OPENSSL_clear_free(p, n); }
static inline int ks_EVP_CIPHER_CTX_allow_wrap(EVP_CIPHER_CTX *ctx) {
    EVP_CIPHER_CTX_set_flags(ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
    return 1;
}
static inline int ks_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }
static inline int ks_ERR_GET_LIB(unsigned long e) { return ERR_GET_LIB(e); }
static inline int ks_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline int ks_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

// SHA-1 of one short buffer without the EVP layer's per-call context (EVP_Digest: a context
// allocated, a provider context made and freed: ~4 K instructions around ~1 K of hashing):
// CKA_CHECK_VALUE's digest (PKCS11/CheckValue.swift), computed for every secret key and
// certificate the module makes. The low-level functions are deprecated in OpenSSL 3 but are the
// code the default provider's SHA-1 itself runs; the context, which holds the input, is cleansed.
#include <openssl/sha.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline int ks_sha1_oneshot(const void *data, size_t n, unsigned char *md) {
    SHA_CTX c;
    int ok = SHA1_Init(&c) && SHA1_Update(&c, data, n) && SHA1_Final(md, &c);
    OPENSSL_cleanse(&c, sizeof c);
    return ok;
}
#pragma GCC diagnostic pop

#endif
