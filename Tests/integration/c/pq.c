/* PKCS #11 3.2 post-quantum mechanisms through the C ABI (Tests/integration/33-pq.sh, issue 18):
 * CKK_ML_DSA (CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA with CK_SIGN_ADDITIONAL_CONTEXT, CKM_HASH_ML_DSA
 * with CK_HASH_SIGN_ADDITIONAL_CONTEXT, CKM_HASH_ML_DSA_<hash>), CKK_ML_KEM (CKM_ML_KEM_KEY_PAIR_GEN,
 * C_EncapsulateKey / C_DecapsulateKey) and CKK_SLH_DSA. Run in process and through the agent (the
 * default): the parameter structs and the 3.2 calls must cross the agent codec intact.
 *
 * Built against the bundled OpenSSL 3.5 (KS_PQ_ENGINE 1), every signature the module makes is also
 * verified with raw EVP here, HashML-DSA's M' is built here from FIPS 204 §5.4, and ML-KEM is
 * crossed both ways (EVP encapsulates to the module's public key, the module decapsulates).
 * Built against a system OpenSSL 3.0 (KS_PQ_ENGINE 0, `make OPENSSL=system`), it checks that no
 * post-quantum mechanism is listed and that each is CKR_MECHANISM_INVALID.
 *
 * Usage: pq MODULE, with KS_TEST_SO_PIN and KS_TEST_PIN in the environment.
 * Ends with "N passed, M failed". */
#define _GNU_SOURCE
#include <openssl/params.h>
#include <openssl/rsa.h>
#define P11HOST_3_2
#define P11HOST_BUNDLED_LIBCRYPTO KS_PQ_ENGINE
#include "p11host.h"



static const CK_SESSION_HANDLE BAD = 0x7ffff00dUL;
static const unsigned char msg[] = "keyshare post-quantum test message";
static unsigned char big_param[8];

static CK_RV keypair(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE gen, CK_ULONG set, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {gen, NULL, 0};
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &set, sizeof set}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &yes, 1}};
    return f->C_GenerateKeyPair(s, &m, pt, 2, kt, 2, pub, priv);
}

static CK_RV sign(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const void *d, CK_ULONG n,
                  unsigned char *sig, CK_ULONG *sn) {
    CK_RV rv = f->C_SignInit(s, m, k);
    if (rv != CKR_OK) return rv;
    return f->C_Sign(s, (CK_BYTE_PTR)d, n, sig, sn);
}

static CK_RV verify(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const void *d, CK_ULONG n,
                    const unsigned char *sig, CK_ULONG sn) {
    CK_RV rv = f->C_VerifyInit(s, m, k);
    if (rv != CKR_OK) return rv;
    return f->C_Verify(s, (CK_BYTE_PTR)d, n, (CK_BYTE_PTR)sig, sn);
}

static int listed(CK_SLOT_ID slot, CK_MECHANISM_TYPE t) {
    CK_MECHANISM_TYPE list[512];
    CK_ULONG n = 512;
    if (f->C_GetMechanismList(slot, list, &n) != CKR_OK) return -1;
    for (CK_ULONG i = 0; i < n; i++) if (list[i] == t) return 1;
    return 0;
}

#if KS_PQ_ENGINE
/* An EVP key of algorithm NAME from the raw public key (what CKA_VALUE holds). */
static EVP_PKEY *evp_public(const char *name, const unsigned char *pub, size_t n) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, name, NULL);
    EVP_PKEY *k = NULL;
    OSSL_PARAM p[] = {OSSL_PARAM_construct_octet_string("pub", (void *)pub, n), OSSL_PARAM_construct_end()};
    if (!c || EVP_PKEY_fromdata_init(c) != 1 || EVP_PKEY_fromdata(c, &k, EVP_PKEY_PUBLIC_KEY, p) != 1) k = NULL;
    EVP_PKEY_CTX_free(c);
    return k;
}

/* Raw EVP verification: pure with CONTEXT (encoding 1), or M' as given (encoding 0). */
static int evp_verify(EVP_PKEY *k, const unsigned char *sig, size_t sn, const unsigned char *m, size_t mn,
                      const unsigned char *ctx, size_t cn, int encoding) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    OSSL_PARAM p[3];
    int i = 0;
    if (cn) p[i++] = OSSL_PARAM_construct_octet_string("context-string", (void *)ctx, cn);
    p[i++] = OSSL_PARAM_construct_int("message-encoding", &encoding);
    p[i] = OSSL_PARAM_construct_end();
    int ok = c && EVP_DigestVerifyInit_ex(c, NULL, NULL, NULL, NULL, k, p) == 1 && EVP_DigestVerify(c, sig, sn, m, mn) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}
#endif

static const struct { CK_ULONG set; const char *name; CK_ULONG pk, sig; } dsa[] = {
    {CKP_ML_DSA_44, "ML-DSA-44", 1312, 2420}, {CKP_ML_DSA_65, "ML-DSA-65", 1952, 3309}, {CKP_ML_DSA_87, "ML-DSA-87", 2592, 4627},
};
static const struct { CK_ULONG set; const char *name; CK_ULONG ek, ct; } kem[] = {
    {CKP_ML_KEM_512, "ML-KEM-512", 800, 768}, {CKP_ML_KEM_768, "ML-KEM-768", 1184, 1088}, {CKP_ML_KEM_1024, "ML-KEM-1024", 1568, 1568},
};
static const struct { CK_ULONG set; const char *name; CK_ULONG pk, sig; } slh[] = {
    {CKP_SLH_DSA_SHA2_128F, "SLH-DSA-SHA2-128f", 32, 17088}, {CKP_SLH_DSA_SHAKE_128F, "SLH-DSA-SHAKE-128f", 32, 17088},
};

static void mldsa(CK_SESSION_HANDLE s) {
    static unsigned char sig[8192], sig2[8192], pub[4096];
    CK_RV rv;
    CK_OBJECT_HANDLE pk65 = 0, sk65 = 0;
    for (size_t i = 0; i < 3; i++) {
        CK_OBJECT_HANDLE pk = 0, sk = 0;
        rv = keypair(s, CKM_ML_DSA_KEY_PAIR_GEN, dsa[i].set, &pk, &sk);
        CHECKF(rv == CKR_OK, "%s: C_GenerateKeyPair CKM_ML_DSA_KEY_PAIR_GEN", dsa[i].name);
        if (rv != CKR_OK) { NOTE("rv 0x%lx", rv); continue; }
        CK_ULONG set = 0, kt = 0;
        p11host_attr(s, sk, CKA_PARAMETER_SET, &set, sizeof set, &rv);
        p11host_attr(s, sk, CKA_KEY_TYPE, &kt, sizeof kt, &rv);
        CHECKF(set == dsa[i].set && kt == CKK_ML_DSA, "%s: private key CKK_ML_DSA, CKA_PARAMETER_SET %lu", dsa[i].name, dsa[i].set);
        CK_ULONG pn = p11host_attr(s, pk, CKA_VALUE, pub, sizeof pub, &rv);
        CHECKF(rv == CKR_OK && pn == dsa[i].pk, "%s: public CKA_VALUE is the %lu-byte FIPS 204 pk", dsa[i].name, dsa[i].pk);
        static unsigned char v[8192];
        CK_ULONG vn = p11host_attr(s, sk, CKA_VALUE, v, sizeof v, &rv);
        CHECKF(rv == CKR_ATTRIBUTE_SENSITIVE && vn == CK_UNAVAILABLE_INFORMATION, "%s: private CKA_VALUE unreadable (CKR_ATTRIBUTE_SENSITIVE)", dsa[i].name);
        vn = p11host_attr(s, sk, CKA_SEED, v, sizeof v, &rv);
        CHECKF(rv == CKR_ATTRIBUTE_SENSITIVE, "%s: CKA_SEED unreadable (CKR_ATTRIBUTE_SENSITIVE)", dsa[i].name);
        CK_MECHANISM m = {CKM_ML_DSA, NULL, 0};
        CK_ULONG sn = sizeof sig;
        rv = sign(s, &m, sk, msg, sizeof msg, sig, &sn);
        CHECKF(rv == CKR_OK && sn == dsa[i].sig, "%s: CKM_ML_DSA signs (%lu bytes)", dsa[i].name, dsa[i].sig);
        CHECKF(verify(s, &m, pk, msg, sizeof msg, sig, sn) == CKR_OK, "%s: C_Verify accepts it", dsa[i].name);
#if KS_PQ_ENGINE
        EVP_PKEY *k = evp_public(dsa[i].name, pub, pn);
        CHECKF(k && evp_verify(k, sig, sn, msg, sizeof msg, NULL, 0, 1), "%s: raw OpenSSL 3.5 EVP verifies the module's signature", dsa[i].name);
        EVP_PKEY_free(k);
#endif
        if (i == 1) { pk65 = pk; sk65 = sk; }
    }
    if (!sk65) return;
    /* Context, hedging, multi-part, errors: on ML-DSA-65. */
    CK_ULONG pn = p11host_attr(s, pk65, CKA_VALUE, pub, sizeof pub, &rv);
    (void)pn;  /* read by the raw EVP checks (KS_PQ_ENGINE) */
    unsigned char ctx[] = "keyshare-ctx";
    CK_SIGN_ADDITIONAL_CONTEXT p = {CKH_HEDGE_PREFERRED, ctx, sizeof ctx - 1};
    CK_MECHANISM mc = {CKM_ML_DSA, &p, sizeof p};
    CK_ULONG sn = sizeof sig;
    rv = sign(s, &mc, sk65, msg, sizeof msg, sig, &sn);
    CHECK("ML-DSA-65: CKM_ML_DSA with CK_SIGN_ADDITIONAL_CONTEXT (context) signs", rv == CKR_OK);
    CHECK("ML-DSA-65: C_Verify with the same context accepts", verify(s, &mc, pk65, msg, sizeof msg, sig, sn) == CKR_OK);
    CK_MECHANISM plain = {CKM_ML_DSA, NULL, 0};
    CHECK("ML-DSA-65: C_Verify without the context: CKR_SIGNATURE_INVALID",
          verify(s, &plain, pk65, msg, sizeof msg, sig, sn) == CKR_SIGNATURE_INVALID);
#if KS_PQ_ENGINE
    EVP_PKEY *k65 = evp_public("ML-DSA-65", pub, pn);
    CHECK("ML-DSA-65: raw EVP verifies the context signature with the same context-string",
          evp_verify(k65, sig, sn, msg, sizeof msg, ctx, sizeof ctx - 1, 1));
#endif
    sig[100] ^= 1;
    CHECK("ML-DSA-65: one flipped bit: CKR_SIGNATURE_INVALID", verify(s, &mc, pk65, msg, sizeof msg, sig, sn) == CKR_SIGNATURE_INVALID);
    CHECK("ML-DSA-65: a short signature: CKR_SIGNATURE_LEN_RANGE", verify(s, &mc, pk65, msg, sizeof msg, sig, sn - 1) == CKR_SIGNATURE_LEN_RANGE);
    /* Hedged signatures differ; deterministic ones repeat. */
    CK_SIGN_ADDITIONAL_CONTEXT det = {CKH_DETERMINISTIC_REQUIRED, NULL, 0};
    CK_MECHANISM md = {CKM_ML_DSA, &det, sizeof det};
    CK_ULONG n1 = sizeof sig, n2 = sizeof sig2;
    sign(s, &md, sk65, msg, sizeof msg, sig, &n1);
    sign(s, &md, sk65, msg, sizeof msg, sig2, &n2);
    CHECK("ML-DSA-65: CKH_DETERMINISTIC_REQUIRED: two signatures are equal", n1 == n2 && memcmp(sig, sig2, n1) == 0);
    n1 = sizeof sig; n2 = sizeof sig2;
    sign(s, &plain, sk65, msg, sizeof msg, sig, &n1);
    sign(s, &plain, sk65, msg, sizeof msg, sig2, &n2);
    CHECK("ML-DSA-65: hedged (no parameter): two signatures differ", n1 == n2 && memcmp(sig, sig2, n1) != 0);
    /* Multi-part. */
    rv = f->C_SignInit(s, &mc, sk65);
    if (rv == CKR_OK) rv = f->C_SignUpdate(s, (CK_BYTE_PTR)msg, 10);
    if (rv == CKR_OK) rv = f->C_SignUpdate(s, (CK_BYTE_PTR)msg + 10, sizeof msg - 10);
    CK_ULONG need = 0;
    if (rv == CKR_OK) rv = f->C_SignFinal(s, NULL, &need);
    sn = sizeof sig;
    if (rv == CKR_OK) rv = f->C_SignFinal(s, sig, &sn);
    CHECK("ML-DSA-65: C_SignUpdate x2 + C_SignFinal (length query 3309 first)", rv == CKR_OK && need == 3309 && sn == 3309);
    CHECK("ML-DSA-65: the multi-part signature verifies single-part", verify(s, &mc, pk65, msg, sizeof msg, sig, sn) == CKR_OK);
    /* HashML-DSA. */
    CK_MECHANISM mh = {CKM_HASH_ML_DSA_SHA256, &p, sizeof p};
    sn = sizeof sig;
    rv = f->C_SignInit(s, &mh, sk65);
    if (rv == CKR_OK) rv = f->C_SignUpdate(s, (CK_BYTE_PTR)msg, 7);
    if (rv == CKR_OK) rv = f->C_SignUpdate(s, (CK_BYTE_PTR)msg + 7, sizeof msg - 7);
    if (rv == CKR_OK) rv = f->C_SignFinal(s, sig, &sn);
    CHECK("ML-DSA-65: CKM_HASH_ML_DSA_SHA256 multi-part with a context signs", rv == CKR_OK && sn == 3309);
    unsigned char dg[32];
    unsigned int dn = 0;
    EVP_Digest(msg, sizeof msg, dg, &dn, EVP_sha256(), NULL);
    CK_HASH_SIGN_ADDITIONAL_CONTEXT hp = {CKH_HEDGE_PREFERRED, ctx, sizeof ctx - 1, CKM_SHA256};
    CK_MECHANISM mhd = {CKM_HASH_ML_DSA, &hp, sizeof hp};
    CHECK("ML-DSA-65: CKM_HASH_ML_DSA (hash CKM_SHA256) verifies it over SHA-256(M)", verify(s, &mhd, pk65, dg, dn, sig, sn) == CKR_OK);
    CHECK("ML-DSA-65: ... and CKM_ML_DSA (pure) does not", verify(s, &mc, pk65, msg, sizeof msg, sig, sn) == CKR_SIGNATURE_INVALID);
#if KS_PQ_ENGINE
    {
        /* FIPS 204 §5.4: M' = 1 || |ctx| || ctx || OID(SHA-256) || SHA-256(M), signed by ML-DSA.Sign_internal. */
        static const unsigned char oid[] = {0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01};
        unsigned char mp[512];
        size_t n = 0;
        mp[n++] = 1; mp[n++] = (unsigned char)(sizeof ctx - 1);
        memcpy(mp + n, ctx, sizeof ctx - 1); n += sizeof ctx - 1;
        memcpy(mp + n, oid, sizeof oid); n += sizeof oid;
        memcpy(mp + n, dg, dn); n += dn;
        CHECK("ML-DSA-65: raw EVP verifies the HashML-DSA-SHA256 signature over M' built from FIPS 204 §5.4",
              evp_verify(k65, sig, sn, mp, n, NULL, 0, 0));
    }
    EVP_PKEY_free(k65);
#endif
    CK_MECHANISM_TYPE hm[] = {CKM_HASH_ML_DSA_SHA224, CKM_HASH_ML_DSA_SHA384, CKM_HASH_ML_DSA_SHA512, CKM_HASH_ML_DSA_SHA3_224,
                              CKM_HASH_ML_DSA_SHA3_256, CKM_HASH_ML_DSA_SHA3_384, CKM_HASH_ML_DSA_SHA3_512,
                              CKM_HASH_ML_DSA_SHAKE128, CKM_HASH_ML_DSA_SHAKE256};
    int good = 0;
    for (size_t i = 0; i < sizeof hm / sizeof hm[0]; i++) {
        CK_MECHANISM m = {hm[i], NULL, 0};
        sn = sizeof sig;
        if (sign(s, &m, sk65, msg, sizeof msg, sig, &sn) == CKR_OK && verify(s, &m, pk65, msg, sizeof msg, sig, sn) == CKR_OK
            && verify(s, &m, pk65, msg, sizeof msg - 1, sig, sn) == CKR_SIGNATURE_INVALID) good++;
        else NOTE("mechanism 0x%lx failed", hm[i]);
    }
    CHECK("ML-DSA-65: the 9 other CKM_HASH_ML_DSA_* (SHA-2, SHA-3, SHAKE) sign, verify, refuse another message", good == 9);
    /* Bad parameters. */
    unsigned char big[256] = {0};
    CK_SIGN_ADDITIONAL_CONTEXT longctx = {CKH_HEDGE_PREFERRED, big, 256};
    CK_MECHANISM ml = {CKM_ML_DSA, &longctx, sizeof longctx};
    CHECK("bad: a 256-byte context: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &ml, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_SIGN_ADDITIONAL_CONTEXT badhedge = {7, NULL, 0};
    CK_MECHANISM mbh = {CKM_ML_DSA, &badhedge, sizeof badhedge};
    CHECK("bad: hedgeVariant 7: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &mbh, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_SIGN_ADDITIONAL_CONTEXT nullctx = {CKH_HEDGE_PREFERRED, NULL, 5};
    CK_MECHANISM mnc = {CKM_ML_DSA, &nullctx, sizeof nullctx};
    CHECK("bad: NULL pContext with length 5: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &mnc, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM mlen = {CKM_ML_DSA, &p, sizeof p - 1};
    CHECK("bad: ulParameterLen one short: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &mlen, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM mhn = {CKM_HASH_ML_DSA, NULL, 0};
    CHECK("bad: CKM_HASH_ML_DSA without its parameter: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &mhn, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_HASH_SIGN_ADDITIONAL_CONTEXT sha1 = {CKH_HEDGE_PREFERRED, NULL, 0, CKM_SHA_1};
    CK_MECHANISM mh1 = {CKM_HASH_ML_DSA, &sha1, sizeof sha1};
    CHECK("bad: CKM_HASH_ML_DSA with hash CKM_SHA_1: CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &mh1, sk65) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM ecdsa = {CKM_ECDSA, NULL, 0};
    CHECK("bad: CKM_ECDSA with an ML-DSA key: CKR_KEY_TYPE_INCONSISTENT", f->C_SignInit(s, &ecdsa, sk65) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK("bad: C_SignInit CKM_ML_DSA with the public key: CKR_KEY_TYPE_INCONSISTENT", f->C_SignInit(s, &plain, pk65) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK("bad: a bad session first: CKR_SESSION_HANDLE_INVALID", f->C_SignInit(BAD, &ml, sk65) == CKR_SESSION_HANDLE_INVALID);
    CK_OBJECT_HANDLE a, b;
    CK_MECHANISM gen = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE none[] = {{CKA_TOKEN, &no, 1}};
    CHECK("bad: keygen without CKA_PARAMETER_SET: CKR_TEMPLATE_INCOMPLETE",
          f->C_GenerateKeyPair(s, &gen, none, 1, none, 1, &a, &b) == CKR_TEMPLATE_INCOMPLETE);
    CHECK("bad: keygen with CKA_PARAMETER_SET 9: CKR_PARAMETER_SET_NOT_SUPPORTED", keypair(s, CKM_ML_DSA_KEY_PAIR_GEN, 9, &a, &b) == CKR_PARAMETER_SET_NOT_SUPPORTED);
}

/* RSA key encapsulation (PKCS #11 3.2 rsa.md: CKM_RSA_PKCS_OAEP and CKM_RSA_PKCS "generate the secret
 * key in C_EncapsulateKey and then wrap it"; C_DecapsulateKey is C_UnwrapKey). Needs no post-quantum
 * engine, so it runs in both builds. Raw EVP encrypts a secret to the module's public key with
 * OAEP-SHA256 and the module decapsulates it to the same value. */
static void rsakem(CK_SLOT_ID slot, CK_SESSION_HANDLE s) {
    static unsigned char ct[512];
    CK_MECHANISM gm = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_ENCAPSULATE, &yes, 1}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_DECAPSULATE, &yes, 1}};
    CK_OBJECT_HANDLE pk = 0, sk = 0, pk0 = 0, sk0 = 0, k1 = 0, k2 = 0;
    CK_RV rv = f->C_GenerateKeyPair(s, &gm, pt, 3, kt, 3, &pk, &sk);
    CHECK("RSA-2048 with CKA_ENCAPSULATE / CKA_DECAPSULATE: C_GenerateKeyPair", rv == CKR_OK);
    if (rv != CKR_OK) { NOTE("rv 0x%lx", rv); return; }
    CK_BBOOL e = 0, d = 0;
    p11host_attr(s, pk, CKA_ENCAPSULATE, &e, 1, &rv);
    p11host_attr(s, sk, CKA_DECAPSULATE, &d, 1, &rv);
    CHECK("RSA: CKA_ENCAPSULATE / CKA_DECAPSULATE read back true", e && d);
    CK_MECHANISM_INFO mi;
    CHECK("CKM_RSA_PKCS_OAEP info: CKF_ENCAPSULATE | CKF_DECAPSULATE",
          f->C_GetMechanismInfo(slot, CKM_RSA_PKCS_OAEP, &mi) == CKR_OK
          && (mi.flags & (CKF_ENCAPSULATE | CKF_DECAPSULATE)) == (CKF_ENCAPSULATE | CKF_DECAPSULATE));
    CK_RSA_PKCS_OAEP_PARAMS op = {CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 0};
    CK_MECHANISM m = {CKM_RSA_PKCS_OAEP, &op, sizeof op};
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_KEY_TYPE gt = CKK_AES;
    CK_ULONG l32 = 32;
    /* Decapsulation is C_UnwrapKey with an RSA private key: the module's unwrap rule
     * (KeyUsagePolicy.checkPrivateKeyUnwrapTemplate) refuses a readable result, so the secrets are
     * AES-256 keys compared by encrypting one block with each. */
    CK_ATTRIBUTE gen[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                          {CKA_ENCRYPT, &yes, 1}, {CKA_VALUE_LEN, &l32, sizeof l32}, {CKA_SENSITIVE, &yes, 1}};
    CK_ATTRIBUTE readable[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                               {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_VALUE_LEN, &l32, sizeof l32}};
    CK_ULONG cn = 0;
    rv = f->C_EncapsulateKey(s, &m, pk, gen, 6, NULL, &cn, &k1);
    CHECK("RSA OAEP-SHA256: C_EncapsulateKey length query gives k (256), no key made", rv == CKR_OK && cn == 256 && k1 == 0);
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, gen, 6, ct, &cn, &k1);
    if (rv != CKR_OK) NOTE("C_EncapsulateKey rv 0x%lx", rv);
    CHECK("RSA OAEP-SHA256: C_EncapsulateKey gives a 256-byte ciphertext and a key", rv == CKR_OK && cn == 256 && k1);
    rv = f->C_DecapsulateKey(s, &m, sk, gen, 6, ct, cn, &k2);
    if (rv != CKR_OK) NOTE("C_DecapsulateKey rv 0x%lx", rv);
    CHECK("RSA OAEP-SHA256: C_DecapsulateKey", rv == CKR_OK && k2);
    unsigned char s1[64], s2[64];
    CK_ULONG n1 = p11host_aes_block(s, k1, s1), n2 = p11host_aes_block(s, k2, s2);
    CHECK("RSA OAEP-SHA256: both sides hold the same secret (one AES block encrypts alike)", n1 == 16 && n2 == 16 && memcmp(s1, s2, 16) == 0);
    CK_OBJECT_HANDLE kr = 0;
    CHECK("RSA OAEP: decapsulating to a readable key: CKR_TEMPLATE_INCONSISTENT (the RSA unwrap rule)",
          f->C_DecapsulateKey(s, &m, sk, readable, 6, ct, cn, &kr) == CKR_TEMPLATE_INCONSISTENT && kr == 0);
    CK_BBOOL loc = 1;
    p11host_attr(s, k1, CKA_LOCAL, &loc, 1, &rv);
    CHECK("RSA: the encapsulated key has CKA_LOCAL false (3.2 C_EncapsulateKey)", rv == CKR_OK && loc == 0);
    CHECK("RSA OAEP: a ciphertext one byte short: CKR_WRAPPED_KEY_LEN_RANGE",
          f->C_DecapsulateKey(s, &m, sk, gen, 6, ct, cn - 1, &k2) == CKR_WRAPPED_KEY_LEN_RANGE);
    ct[7] ^= 1;
    CHECK("RSA OAEP: a modified ciphertext: CKR_WRAPPED_KEY_INVALID",
          f->C_DecapsulateKey(s, &m, sk, gen, 6, ct, cn, &k2) == CKR_WRAPPED_KEY_INVALID);
    /* Bad parameters: the wrong size, and an unknown hash. */
    CK_MECHANISM bad = {CKM_RSA_PKCS_OAEP, &op, sizeof op - 1};
    CK_ULONG n = sizeof ct;
    CHECK("RSA OAEP: C_EncapsulateKey with a short parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &bad, pk, gen, 6, ct, &n, &k1) == CKR_MECHANISM_PARAM_INVALID);
    CK_RSA_PKCS_OAEP_PARAMS bop = {0x7fff0001UL, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 0};
    CK_MECHANISM bad2 = {CKM_RSA_PKCS_OAEP, &bop, sizeof bop};
    n = sizeof ct;
    CHECK("RSA OAEP: C_EncapsulateKey with an unknown hashAlg: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &bad2, pk, gen, 6, ct, &n, &k1) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("RSA OAEP: C_DecapsulateKey with a short parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_DecapsulateKey(s, &bad, sk, gen, 6, ct, cn, &k2) == CKR_MECHANISM_PARAM_INVALID);
    /* PKCS #1 v1.5 too. */
    CK_MECHANISM p1 = {CKM_RSA_PKCS, NULL, 0};
    CK_OBJECT_HANDLE k3 = 0, k4 = 0;
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &p1, pk, gen, 6, ct, &cn, &k3);
    if (rv == CKR_OK) rv = f->C_DecapsulateKey(s, &p1, sk, gen, 6, ct, cn, &k4);
    n1 = k3 ? p11host_aes_block(s, k3, s1) : 0;
    n2 = k4 ? p11host_aes_block(s, k4, s2) : 0;
    CHECK("RSA PKCS #1 v1.5: encapsulate / decapsulate, same secret", rv == CKR_OK && n1 == 16 && n2 == 16 && memcmp(s1, s2, 16) == 0);
    /* The usage rule of the 3.2 text: CKA_ENCAPSULATE / CKA_DECAPSULATE, not CKA_WRAP / CKA_UNWRAP. */
    CK_ATTRIBUTE pt0[] = {{CKA_TOKEN, &no, 1}, {CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_WRAP, &yes, 1}};
    CK_ATTRIBUTE kt0[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_UNWRAP, &yes, 1}};
    if (f->C_GenerateKeyPair(s, &gm, pt0, 3, kt0, 3, &pk0, &sk0) == CKR_OK) {
        n = sizeof ct;
        CHECK("RSA: a CKA_WRAP public key without CKA_ENCAPSULATE: CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_EncapsulateKey(s, &m, pk0, gen, 6, ct, &n, &k1) == CKR_KEY_FUNCTION_NOT_PERMITTED);
        CHECK("RSA: a CKA_UNWRAP private key without CKA_DECAPSULATE: CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_DecapsulateKey(s, &m, sk0, gen, 6, ct, cn, &k2) == CKR_KEY_FUNCTION_NOT_PERMITTED);
    } else {
        CHECK("a second RSA key pair", 0);
    }
    /* Raw EVP OAEP-SHA256 to the module's public key; the module decapsulates the same secret. */
    EVP_PKEY *ek = p11host_evp_rsa_public(s, pk);
    unsigned char sec[32], ect[512];
    size_t ectn = sizeof ect;
    for (size_t i = 0; i < sizeof sec; i++) sec[i] = (unsigned char)(i * 7 + 3);
    EVP_PKEY_CTX *c = ek ? EVP_PKEY_CTX_new_from_pkey(NULL, ek, NULL) : NULL;
    int ok = c && EVP_PKEY_encrypt_init(c) == 1 && EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) == 1
             && EVP_PKEY_CTX_set_rsa_oaep_md(c, EVP_sha256()) == 1 && EVP_PKEY_CTX_set_rsa_mgf1_md(c, EVP_sha256()) == 1
             && EVP_PKEY_encrypt(c, ect, &ectn, sec, sizeof sec) == 1;
    CK_OBJECT_HANDLE k5 = 0;
    unsigned char s5[64];
    CK_ULONG n5 = 0;
    if (ok && f->C_DecapsulateKey(s, &m, sk, gen, 6, ect, ectn, &k5) == CKR_OK) n5 = p11host_aes_block(s, k5, s5);
    /* The same block under the known secret with raw EVP AES-256-ECB. */
    unsigned char want[32];
    int eok = p11host_evp_aes_block(sec, want);
    CHECK("RSA OAEP-SHA256: raw EVP encryption, module decapsulation: same secret", ok && eok && n5 == 16 && memcmp(s5, want, 16) == 0);
    EVP_PKEY_CTX_free(c);
    EVP_PKEY_free(ek);
}

static void mlkem(CK_SESSION_HANDLE s) {
    static unsigned char ct[2048], pub[2048];
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_KEY_TYPE gt = CKK_GENERIC_SECRET, aes = CKK_AES;
    CK_ULONG l16 = 16;
    CK_ATTRIBUTE gen[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                          {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_ATTRIBUTE aes16[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_VALUE_LEN, &l16, sizeof l16},
                            {CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_MECHANISM m = {CKM_ML_KEM, NULL, 0};
    for (size_t i = 0; i < 3; i++) {
        CK_OBJECT_HANDLE pk = 0, sk = 0, k1 = 0, k2 = 0;
        CK_RV rv = keypair(s, CKM_ML_KEM_KEY_PAIR_GEN, kem[i].set, &pk, &sk);
        CHECKF(rv == CKR_OK, "%s: C_GenerateKeyPair CKM_ML_KEM_KEY_PAIR_GEN", kem[i].name);
        if (rv != CKR_OK) { NOTE("rv 0x%lx", rv); continue; }
        CK_BBOOL e = 0, d = 0;
        p11host_attr(s, pk, CKA_ENCAPSULATE, &e, 1, &rv);
        p11host_attr(s, sk, CKA_DECAPSULATE, &d, 1, &rv);
        CHECKF(e && d, "%s: CKA_ENCAPSULATE / CKA_DECAPSULATE true", kem[i].name);
        CK_ULONG pn = p11host_attr(s, pk, CKA_VALUE, pub, sizeof pub, &rv);
        CHECKF(rv == CKR_OK && pn == kem[i].ek, "%s: public CKA_VALUE is the %lu-byte ek", kem[i].name, kem[i].ek);
        static unsigned char v[4096];
        p11host_attr(s, sk, CKA_VALUE, v, sizeof v, &rv);
        CHECKF(rv == CKR_ATTRIBUTE_SENSITIVE, "%s: private CKA_VALUE unreadable", kem[i].name);
        CK_ULONG cn = 0;
        rv = f->C_EncapsulateKey(s, &m, pk, gen, 5, NULL, &cn, &k1);
        if (rv != CKR_OK) NOTE("C_EncapsulateKey length query: rv 0x%lx", rv);
        CHECKF(rv == CKR_OK && cn == kem[i].ct && k1 == 0, "%s: C_EncapsulateKey length query: %lu, no key made", kem[i].name, kem[i].ct);
        cn = 10;
        rv = f->C_EncapsulateKey(s, &m, pk, gen, 5, ct, &cn, &k1);
        CHECKF(rv == CKR_BUFFER_TOO_SMALL && cn == kem[i].ct, "%s: a short buffer: CKR_BUFFER_TOO_SMALL with the length", kem[i].name);
        cn = sizeof ct;
        rv = f->C_EncapsulateKey(s, &m, pk, gen, 5, ct, &cn, &k1);
        CHECKF(rv == CKR_OK && cn == kem[i].ct && k1, "%s: C_EncapsulateKey gives the ciphertext and a key", kem[i].name);
        rv = f->C_DecapsulateKey(s, &m, sk, gen, 5, ct, cn, &k2);
        CHECKF(rv == CKR_OK && k2, "%s: C_DecapsulateKey", kem[i].name);
        unsigned char s1[64], s2[64];
        CK_ULONG n1 = p11host_value(s, k1, s1, 64), n2 = p11host_value(s, k2, s2, 64);
        CHECKF(n1 == 32 && n1 == n2 && memcmp(s1, s2, 32) == 0, "%s: both sides hold the same 32-byte secret", kem[i].name);
        /* With a sensitive, unextractable template the flags can only come from the function. */
        CK_ATTRIBUTE secret[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                                 {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &no, 1}};
        CK_OBJECT_HANDLE ks1 = 0, ks2 = 0;
        unsigned char ct2[2048];
        CK_ULONG cn2 = sizeof ct2;
        CK_RV r1 = f->C_EncapsulateKey(s, &m, pk, secret, 5, ct2, &cn2, &ks1), r2 = CKR_GENERAL_ERROR;
        if (r1 == CKR_OK) r2 = f->C_DecapsulateKey(s, &m, sk, secret, 5, ct2, cn2, &ks2);
        CK_BBOOL as1 = 1, ne1 = 1, lo1 = 1, as2 = 1, ne2 = 1, lo2 = 1;
        if (r1 == CKR_OK) p11host_attr(s, ks1, CKA_ALWAYS_SENSITIVE, &as1, 1, &r1);
        if (r1 == CKR_OK) p11host_attr(s, ks1, CKA_NEVER_EXTRACTABLE, &ne1, 1, &r1);
        if (r1 == CKR_OK) p11host_attr(s, ks1, CKA_LOCAL, &lo1, 1, &r1);
        if (r2 == CKR_OK) p11host_attr(s, ks2, CKA_ALWAYS_SENSITIVE, &as2, 1, &r2);
        if (r2 == CKR_OK) p11host_attr(s, ks2, CKA_NEVER_EXTRACTABLE, &ne2, 1, &r2);
        if (r2 == CKR_OK) p11host_attr(s, ks2, CKA_LOCAL, &lo2, 1, &r2);
        CHECKF(r1 == CKR_OK && r2 == CKR_OK && !as1 && !ne1 && !lo1 && !as2 && !ne2 && !lo2,
               "%s: sensitive encapsulated and decapsulated keys still have CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE and CKA_LOCAL false (3.2 §5.18, as RSA and ECDH; got %d%d%d %d%d%d)",
               kem[i].name, as1, ne1, lo1, as2, ne2, lo2);
        CK_OBJECT_HANDLE k3 = 0;
        rv = f->C_DecapsulateKey(s, &m, sk, aes16, 6, ct, cn, &k3);
        unsigned char s3[64];
        CK_ULONG n3 = k3 ? p11host_value(s, k3, s3, 64) : 0;
        CHECKF(rv == CKR_OK && n3 == 16 && memcmp(s3, s1, 16) == 0, "%s: an AES template with CKA_VALUE_LEN 16 takes the secret's first 16 bytes", kem[i].name);
        ct[5] ^= 0x40;
        CK_OBJECT_HANDLE k4 = 0;
        rv = f->C_DecapsulateKey(s, &m, sk, gen, 5, ct, cn, &k4);
        unsigned char s4[64];
        CK_ULONG n4 = k4 ? p11host_value(s, k4, s4, 64) : 0;
        CHECKF(rv == CKR_OK && n4 == 32 && memcmp(s4, s1, 32) != 0,
               "%s: a modified ciphertext decapsulates (implicit rejection) to a different secret, not an error", kem[i].name);
        CHECKF(f->C_DecapsulateKey(s, &m, sk, gen, 5, ct, cn - 1, &k4) == CKR_WRAPPED_KEY_LEN_RANGE,
               "%s: a ciphertext one byte short: CKR_WRAPPED_KEY_LEN_RANGE", kem[i].name);
#if KS_PQ_ENGINE
        /* The other way: raw EVP encapsulates to the module's public key, the module decapsulates. */
        EVP_PKEY *k = evp_public(kem[i].name, pub, pn);
        EVP_PKEY_CTX *c = k ? EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL) : NULL;
        unsigned char ect[2048], ess[64];
        size_t ectn = sizeof ect, essn = sizeof ess;
        int ok = c && EVP_PKEY_encapsulate_init(c, NULL) == 1 && EVP_PKEY_encapsulate(c, ect, &ectn, ess, &essn) == 1;
        CK_OBJECT_HANDLE k5 = 0;
        unsigned char s5[64];
        CK_ULONG n5 = 0;
        if (ok && f->C_DecapsulateKey(s, &m, sk, gen, 5, ect, ectn, &k5) == CKR_OK) n5 = p11host_value(s, k5, s5, 64);
        CHECKF(ok && n5 == essn && memcmp(s5, ess, essn) == 0, "%s: raw EVP encapsulation, module decapsulation: same secret", kem[i].name);
        EVP_PKEY_CTX_free(c);
        EVP_PKEY_free(k);
#endif
        if (i == 1) {
            CK_ULONG n = sizeof ct;
            CHECK("bad: C_EncapsulateKey with a bad session: CKR_SESSION_HANDLE_INVALID",
                  f->C_EncapsulateKey(BAD, &m, pk, gen, 5, ct, &n, &k1) == CKR_SESSION_HANDLE_INVALID);
            CHECK("bad: C_EncapsulateKey with a NULL pulCiphertextLen: CKR_ARGUMENTS_BAD",
                  f->C_EncapsulateKey(s, &m, pk, gen, 5, ct, NULL, &k1) == CKR_ARGUMENTS_BAD);
            CK_MECHANISM wrong = {CKM_ML_DSA, NULL, 0};
            CHECK("bad: C_EncapsulateKey with CKM_ML_DSA: CKR_MECHANISM_INVALID",
                  f->C_EncapsulateKey(s, &wrong, pk, gen, 5, ct, &n, &k1) == CKR_MECHANISM_INVALID);
            CHECK("bad: C_EncapsulateKey with the private key: CKR_KEY_TYPE_INCONSISTENT",
                  f->C_EncapsulateKey(s, &m, sk, gen, 5, ct, &n, &k1) == CKR_KEY_TYPE_INCONSISTENT);
            CHECK("bad: C_DecapsulateKey with the public key: CKR_KEY_TYPE_INCONSISTENT",
                  f->C_DecapsulateKey(s, &m, pk, gen, 5, ct, kem[i].ct, &k1) == CKR_KEY_TYPE_INCONSISTENT);
            CHECK("bad: C_EncapsulateKey with a key handle 0: CKR_KEY_HANDLE_INVALID",
                  f->C_EncapsulateKey(s, &m, 0, gen, 5, ct, &n, &k1) == CKR_KEY_HANDLE_INVALID);
            CK_ULONG l40 = 40;
            CK_ATTRIBUTE toolong[] = {{CKA_VALUE_LEN, &l40, sizeof l40}, {CKA_TOKEN, &no, 1}};
            CHECK("bad: CKA_VALUE_LEN 40 (more than the 32-byte secret): CKR_ATTRIBUTE_VALUE_INVALID",
                  f->C_EncapsulateKey(s, &m, pk, toolong, 2, ct, &n, &k1) == CKR_ATTRIBUTE_VALUE_INVALID);
            CK_OBJECT_CLASS pc = CKO_PUBLIC_KEY;
            CK_ATTRIBUTE wrongclass[] = {{CKA_CLASS, &pc, sizeof pc}};
            CHECK("bad: a CKO_PUBLIC_KEY template: CKR_TEMPLATE_INCONSISTENT",
                  f->C_EncapsulateKey(s, &m, pk, wrongclass, 1, ct, &n, &k1) == CKR_TEMPLATE_INCONSISTENT);
            CK_MECHANISM withparam = {CKM_ML_KEM, big_param, 4};
            CHECK("bad: CKM_ML_KEM with a parameter: CKR_MECHANISM_PARAM_INVALID",
                  f->C_EncapsulateKey(s, &withparam, pk, gen, 5, ct, &n, &k1) == CKR_MECHANISM_PARAM_INVALID);
        }
    }
}

static void slhdsa(CK_SESSION_HANDLE s) {
    static unsigned char sig[20000], pub[128];
    for (size_t i = 0; i < 2; i++) {
        CK_OBJECT_HANDLE pk = 0, sk = 0;
        CK_RV rv = keypair(s, CKM_SLH_DSA_KEY_PAIR_GEN, slh[i].set, &pk, &sk);
        CHECKF(rv == CKR_OK, "%s: C_GenerateKeyPair CKM_SLH_DSA_KEY_PAIR_GEN", slh[i].name);
        if (rv != CKR_OK) { NOTE("rv 0x%lx", rv); continue; }
        CK_ULONG pn = p11host_attr(s, pk, CKA_VALUE, pub, sizeof pub, &rv);
        CHECKF(rv == CKR_OK && pn == slh[i].pk, "%s: public CKA_VALUE %lu bytes", slh[i].name, slh[i].pk);
        static unsigned char v[256];
        p11host_attr(s, sk, CKA_VALUE, v, sizeof v, &rv);
        CHECKF(rv == CKR_ATTRIBUTE_SENSITIVE, "%s: private CKA_VALUE unreadable", slh[i].name);
        unsigned char ctx[] = "slh";
        CK_SIGN_ADDITIONAL_CONTEXT p = {CKH_HEDGE_REQUIRED, ctx, 3};
        CK_MECHANISM m = {CKM_SLH_DSA, &p, sizeof p};
        CK_ULONG sn = sizeof sig;
        rv = sign(s, &m, sk, msg, sizeof msg, sig, &sn);
        CHECKF(rv == CKR_OK && sn == slh[i].sig, "%s: CKM_SLH_DSA with a context signs (%lu bytes)", slh[i].name, slh[i].sig);
        CHECKF(verify(s, &m, pk, msg, sizeof msg, sig, sn) == CKR_OK, "%s: C_Verify accepts it", slh[i].name);
        CK_MECHANISM plain = {CKM_SLH_DSA, NULL, 0};
        CHECKF(verify(s, &plain, pk, msg, sizeof msg, sig, sn) == CKR_SIGNATURE_INVALID, "%s: without the context: CKR_SIGNATURE_INVALID", slh[i].name);
#if KS_PQ_ENGINE
        EVP_PKEY *k = evp_public(slh[i].name, pub, pn);
        CHECKF(k && evp_verify(k, sig, sn, msg, sizeof msg, ctx, 3, 1), "%s: raw OpenSSL 3.5 EVP verifies it", slh[i].name);
        EVP_PKEY_free(k);
#endif
        if (i == 0) {
            CK_MECHANISM hm = {CKM_HASH_SLH_DSA_SHA256, NULL, 0};
            sn = sizeof sig;
            rv = sign(s, &hm, sk, msg, sizeof msg, sig, &sn);
            CHECK("SLH-DSA-SHA2-128f: CKM_HASH_SLH_DSA_SHA256 signs and verifies",
                  rv == CKR_OK && verify(s, &hm, pk, msg, sizeof msg, sig, sn) == CKR_OK);
        }
    }
}

int main(int argc, char **argv) {
    const char *so, *pin;
    if (!p11host_args(argc, 1, "pq MODULE", &so, &pin)) return 2;
    if (!p11host_load_3_2(argv[1], NULL)) return 1;
    CHECK("C_GetInterface(\"PKCS 11\", 3.2) gives the 3.2 list", f->version.major == 3 && f->version.minor == 2);
    if (!p11host_initialize()) return 1;
    CK_SLOT_ID slot = p11host_make_token("pq", so, pin);
    CHECK("a token to work on", slot != 0);
    if (!slot) goto out;
    CK_SESSION_HANDLE s;
    p11host_user_session(slot, pin, &s);
    CK_MECHANISM_TYPE pq[] = {CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA, CKM_HASH_ML_DSA, CKM_HASH_ML_DSA_SHA256, CKM_ML_KEM_KEY_PAIR_GEN,
                              CKM_ML_KEM, CKM_SLH_DSA_KEY_PAIR_GEN, CKM_SLH_DSA, CKM_HASH_SLH_DSA_SHA3_256};
    int n_listed = 0;
    for (size_t i = 0; i < sizeof pq / sizeof pq[0]; i++) n_listed += listed(slot, pq[i]) == 1;
#if KS_PQ_ENGINE
    CHECK("the 9 sampled post-quantum mechanisms are listed", n_listed == 9);
    CK_MECHANISM_INFO mi;
    CK_RV rv = f->C_GetMechanismInfo(slot, CKM_ML_KEM, &mi);
    CHECK("CKM_ML_KEM info: CKF_ENCAPSULATE | CKF_DECAPSULATE, 800..1568 (ek bytes)",
          rv == CKR_OK && mi.flags == (CKF_ENCAPSULATE | CKF_DECAPSULATE) && mi.ulMinKeySize == 800 && mi.ulMaxKeySize == 1568);
    rv = f->C_GetMechanismInfo(slot, CKM_ML_DSA, &mi);
    CHECK("CKM_ML_DSA info: CKF_SIGN | CKF_VERIFY, 1312..2592 (pk bytes)",
          rv == CKR_OK && mi.flags == (CKF_SIGN | CKF_VERIFY) && mi.ulMinKeySize == 1312 && mi.ulMaxKeySize == 2592);
    rv = f->C_GetMechanismInfo(slot, CKM_ML_DSA_KEY_PAIR_GEN, &mi);
    CHECK("CKM_ML_DSA_KEY_PAIR_GEN info: CKF_GENERATE_KEY_PAIR", rv == CKR_OK && mi.flags == CKF_GENERATE_KEY_PAIR);
    mldsa(s);
    mlkem(s);
    slhdsa(s);
#else
    (void)mldsa; (void)mlkem; (void)slhdsa;  /* nothing to run them on */
    CHECK("system OpenSSL without post-quantum: none of the 9 sampled mechanisms is listed", n_listed == 0);
    CK_MECHANISM_INFO mi;
    CHECK("CKM_ML_DSA: C_GetMechanismInfo CKR_MECHANISM_INVALID", f->C_GetMechanismInfo(slot, CKM_ML_DSA, &mi) == CKR_MECHANISM_INVALID);
    CK_OBJECT_HANDLE a, b;
    CHECK("CKM_ML_DSA_KEY_PAIR_GEN: CKR_MECHANISM_INVALID", keypair(s, CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_65, &a, &b) == CKR_MECHANISM_INVALID);
#endif
    rsakem(slot, s);
    f->C_CloseSession(s);
out:
    f->C_Finalize(NULL);
    return p11host_report();
}
