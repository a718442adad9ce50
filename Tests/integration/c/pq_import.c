/* C_CreateObject of PKCS #11 3.2 post-quantum keys (Tests/integration/33-pq.sh, issue 18): ML-KEM,
 * ML-DSA and SLH-DSA keys made by raw EVP in this host (the bundled OpenSSL 3.5) are imported through
 * the C ABI and used both ways: the module encapsulates to an imported ML-KEM public key and EVP
 * decapsulates; EVP encapsulates and the module decapsulates with a private key imported from its
 * seed; EVP signs and the module verifies; the module signs with an imported ML-DSA key and EVP
 * verifies. The 3.2 creation rules: CKA_PARAMETER_SET required, at least one of CKA_SEED and
 * CKA_VALUE for an ML-DSA / ML-KEM private key (both must agree), SLH-DSA private keys by CKA_VALUE
 * only; an imported private key is private and sensitive by default like the module's other keys.
 * Built only with a post-quantum engine (33-pq.sh skips it otherwise).
 *
 * Usage: pq_import MODULE, with KS_TEST_SO_PIN and KS_TEST_PIN in the environment.
 * Ends with "N passed, M failed". */
#define _GNU_SOURCE
#include <openssl/core_names.h>
#include <openssl/params.h>
#define P11HOST_3_2
#define P11HOST_BUNDLED_LIBCRYPTO 1
#include "p11host.h"



static const unsigned char msg[] = "keyshare post-quantum import test";

/* The raw "pub", "priv" and "seed" of an EVP key (seed absent for SLH-DSA). */
static size_t octets(EVP_PKEY *k, const char *name, unsigned char *out, size_t cap) {
    size_t n = 0;
    return EVP_PKEY_get_octet_string_param(k, name, out, cap, &n) == 1 ? n : 0;
}

static CK_RV create_pub(CK_SESSION_HANDLE s, CK_KEY_TYPE kt, CK_ULONG set, const unsigned char *v, CK_ULONG n, CK_OBJECT_HANDLE *h) {
    CK_OBJECT_CLASS c = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &c, sizeof c}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &no, 1},
                        {CKA_PARAMETER_SET, &set, sizeof set}, {CKA_VALUE, (void *)v, n}};
    return f->C_CreateObject(s, t, 5, h);
}

/* A private key from the seed and/or value given (NULL: left out of the template). */
static CK_RV create_priv(CK_SESSION_HANDLE s, CK_KEY_TYPE kt, CK_ULONG set, const unsigned char *seed, CK_ULONG sn,
                         const unsigned char *v, CK_ULONG vn, CK_OBJECT_HANDLE *h) {
    CK_OBJECT_CLASS c = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[6] = {{CKA_CLASS, &c, sizeof c}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &no, 1},
                         {CKA_PARAMETER_SET, &set, sizeof set}};
    CK_ULONG n = 4;
    if (seed) t[n++] = (CK_ATTRIBUTE){CKA_SEED, (void *)seed, sn};
    if (v) t[n++] = (CK_ATTRIBUTE){CKA_VALUE, (void *)v, vn};
    return f->C_CreateObject(s, t, n, h);
}

static void mlkem(CK_SESSION_HANDLE s) {
    static unsigned char pub[2048], priv[4096], seed[64], pub2[2048], priv2[4096], seed2[64], ct[2048];
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ML-KEM-768"), *k2 = EVP_PKEY_Q_keygen(NULL, NULL, "ML-KEM-768");
    size_t pn = octets(k, OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof pub), vn = octets(k, OSSL_PKEY_PARAM_PRIV_KEY, priv, sizeof priv);
    size_t sn = octets(k, OSSL_PKEY_PARAM_ML_KEM_SEED, seed, sizeof seed);
    octets(k2, OSSL_PKEY_PARAM_PUB_KEY, pub2, sizeof pub2);
    size_t vn2 = octets(k2, OSSL_PKEY_PARAM_PRIV_KEY, priv2, sizeof priv2), sn2 = octets(k2, OSSL_PKEY_PARAM_ML_KEM_SEED, seed2, sizeof seed2);
    CHECK("EVP made an ML-KEM-768 key: 1184-byte ek, 2400-byte dk, 64-byte seed", pn == 1184 && vn == 2400 && sn == 64 && vn2 == 2400 && sn2 == 64);
    CK_KEY_TYPE kt = CKK_ML_KEM;
    CK_OBJECT_HANDLE pk = 0, key = 0;
    CK_RV rv = create_pub(s, kt, CKP_ML_KEM_768, pub, pn, &pk);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    CHECK("ML-KEM-768: C_CreateObject of the public key (CKA_PARAMETER_SET + CKA_VALUE)", rv == CKR_OK && pk);
    unsigned char back[2048];
    CK_ATTRIBUTE a = {CKA_VALUE, back, sizeof back};
    CK_BBOOL enc = 0;
    CK_ATTRIBUTE e = {CKA_ENCAPSULATE, &enc, 1};
    CHECK("ML-KEM-768: the imported public key reads back its ek and CKA_ENCAPSULATE true",
          f->C_GetAttributeValue(s, pk, &a, 1) == CKR_OK && a.ulValueLen == pn && memcmp(back, pub, pn) == 0 &&
          f->C_GetAttributeValue(s, pk, &e, 1) == CKR_OK && enc);

    /* The module encapsulates to the imported key; EVP decapsulates with the key's private half. */
    CK_MECHANISM m = {CKM_ML_KEM, NULL, 0};
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_KEY_TYPE gt = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE gen[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gt, sizeof gt}, {CKA_TOKEN, &no, 1},
                          {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_ULONG cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, gen, 5, ct, &cn, &key);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    unsigned char s1[64], es[64];
    CK_ULONG n1 = rv == CKR_OK ? p11host_value(s, key, s1, 64) : 0;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
    size_t esn = sizeof es;
    int ok = c && EVP_PKEY_decapsulate_init(c, NULL) == 1 && EVP_PKEY_decapsulate(c, es, &esn, ct, cn) == 1;
    EVP_PKEY_CTX_free(c);
    CHECK("ML-KEM-768: C_EncapsulateKey to the imported public key; raw EVP decapsulates the same 32-byte secret",
          rv == CKR_OK && cn == 1088 && ok && n1 == 32 && esn == 32 && memcmp(s1, es, 32) == 0);

    /* The private key from its seed, its value, or both; the module decapsulates what EVP encapsulated. */
    unsigned char ect[2048], ess[64];
    size_t ectn = sizeof ect, essn = sizeof ess;
    c = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
    ok = c && EVP_PKEY_encapsulate_init(c, NULL) == 1 && EVP_PKEY_encapsulate(c, ect, &ectn, ess, &essn) == 1;
    EVP_PKEY_CTX_free(c);
    const char *forms[] = {"CKA_SEED only", "CKA_VALUE only", "CKA_SEED and CKA_VALUE"};
    for (int i = 0; i < 3; i++) {
        CK_OBJECT_HANDLE sk = 0, k3 = 0;
        rv = create_priv(s, kt, CKP_ML_KEM_768, i != 1 ? seed : NULL, sn, i != 0 ? priv : NULL, vn, &sk);
        if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
        unsigned char s3[64];
        CK_ULONG n3 = 0;
        if (rv == CKR_OK && f->C_DecapsulateKey(s, &m, sk, gen, 5, ect, ectn, &k3) == CKR_OK) n3 = p11host_value(s, k3, s3, 64);
        char name[160];
        snprintf(name, sizeof name, "ML-KEM-768: a private key from %s decapsulates EVP's ciphertext to EVP's secret", forms[i]);
        CHECK(name, rv == CKR_OK && ok && n3 == essn && memcmp(s3, ess, essn) == 0);
        if (i == 0) {
            CK_BBOOL priv_ = 0, sens = 0, dec = 0;
            CK_ATTRIBUTE r[] = {{CKA_PRIVATE, &priv_, 1}, {CKA_SENSITIVE, &sens, 1}, {CKA_DECAPSULATE, &dec, 1}};
            CHECK("ML-KEM-768: the imported private key is CKA_PRIVATE, CKA_SENSITIVE (default) and CKA_DECAPSULATE",
                  f->C_GetAttributeValue(s, sk, r, 3) == CKR_OK && priv_ && sens && dec);
            unsigned char v[4096];
            CK_ATTRIBUTE rv1 = {CKA_VALUE, v, sizeof v}, rs = {CKA_SEED, v, sizeof v};
            CHECK("ML-KEM-768: its CKA_VALUE and CKA_SEED are unreadable (CKR_ATTRIBUTE_SENSITIVE)",
                  f->C_GetAttributeValue(s, sk, &rv1, 1) == CKR_ATTRIBUTE_SENSITIVE &&
                  f->C_GetAttributeValue(s, sk, &rs, 1) == CKR_ATTRIBUTE_SENSITIVE);
        }
    }
    CK_OBJECT_HANDLE h = 0;
    CHECK("bad: ML-KEM private key with the seed of one key and the dk of another: CKR_ATTRIBUTE_VALUE_INVALID",
          create_priv(s, kt, CKP_ML_KEM_768, seed2, sn2, priv, vn, &h) == CKR_ATTRIBUTE_VALUE_INVALID);
    CHECK("bad: ML-KEM private key with neither CKA_SEED nor CKA_VALUE: CKR_TEMPLATE_INCOMPLETE",
          create_priv(s, kt, CKP_ML_KEM_768, NULL, 0, NULL, 0, &h) == CKR_TEMPLATE_INCOMPLETE);
    CHECK("bad: ML-KEM private key with a 63-byte seed: CKR_ATTRIBUTE_VALUE_INVALID",
          create_priv(s, kt, CKP_ML_KEM_768, seed, 63, NULL, 0, &h) == CKR_ATTRIBUTE_VALUE_INVALID);
    CHECK("bad: ML-KEM-768 ek under CKP_ML_KEM_512: CKR_ATTRIBUTE_VALUE_INVALID",
          create_pub(s, kt, CKP_ML_KEM_512, pub, pn, &h) == CKR_ATTRIBUTE_VALUE_INVALID);
    CHECK("bad: ML-KEM public key with CKA_PARAMETER_SET 9: CKR_ATTRIBUTE_VALUE_INVALID",
          create_pub(s, kt, 9, pub, pn, &h) == CKR_ATTRIBUTE_VALUE_INVALID);
    CK_OBJECT_CLASS pc = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE noset[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &no, 1}, {CKA_VALUE, pub, pn}};
    CHECK("bad: ML-KEM public key without CKA_PARAMETER_SET: CKR_TEMPLATE_INCOMPLETE",
          f->C_CreateObject(s, noset, 4, &h) == CKR_TEMPLATE_INCOMPLETE);
    CK_OBJECT_CLASS kc = CKO_PRIVATE_KEY;
    CK_ULONG set = CKP_ML_KEM_768;
    CK_ATTRIBUTE pub_priv[] = {{CKA_CLASS, &kc, sizeof kc}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_TOKEN, &yes, 1},
                               {CKA_PARAMETER_SET, &set, sizeof set}, {CKA_SEED, seed, sn}, {CKA_PRIVATE, &no, 1}};
    rv = f->C_CreateObject(s, pub_priv, 6, &h);
    CHECK("bad: an imported ML-KEM token private key with CKA_PRIVATE false is CKR_TEMPLATE_INCONSISTENT (stored keys are private)",
          rv == CKR_TEMPLATE_INCONSISTENT);
    /* Issue 29: as a session key it may be public. */
    pub_priv[2].pValue = &no;
    rv = f->C_CreateObject(s, pub_priv, 6, &h);
    CHECK("an imported ML-KEM session private key with CKA_PRIVATE false is made (a public session object)", rv == CKR_OK);
    EVP_PKEY_free(k);
    EVP_PKEY_free(k2);
}

static int evp_verify(EVP_PKEY *k, const unsigned char *sig, size_t sn) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestVerifyInit_ex(c, NULL, NULL, NULL, NULL, k, NULL) == 1 && EVP_DigestVerify(c, sig, sn, msg, sizeof msg) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}

static size_t evp_sign(EVP_PKEY *k, unsigned char *sig, size_t cap) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    size_t n = cap;
    int ok = c && EVP_DigestSignInit_ex(c, NULL, NULL, NULL, NULL, k, NULL) == 1 && EVP_DigestSign(c, sig, &n, msg, sizeof msg) == 1;
    EVP_MD_CTX_free(c);
    return ok ? n : 0;
}

/* Sign with EVP and verify through the module (imported public key); sign through the module
 * (imported private key) and verify with EVP. */
static void signatures(CK_SESSION_HANDLE s, const char *name, CK_KEY_TYPE kt, CK_ULONG set, CK_MECHANISM_TYPE mech,
                       int by_seed) {
    static unsigned char pub[4096], priv[8192], seed[64], sig[20000];
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, name);
    size_t pn = octets(k, OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof pub), vn = octets(k, OSSL_PKEY_PARAM_PRIV_KEY, priv, sizeof priv);
    size_t sn = by_seed ? octets(k, OSSL_PKEY_PARAM_ML_DSA_SEED, seed, sizeof seed) : 0;
    CK_OBJECT_HANDLE pk = 0, sk = 0;
    CK_MECHANISM m = {mech, NULL, 0};
    char label[200];
    CK_RV rv = create_pub(s, kt, set, pub, pn, &pk);
    size_t esn = evp_sign(k, sig, sizeof sig);
    if (rv == CKR_OK) rv = f->C_VerifyInit(s, &m, pk);
    if (rv == CKR_OK) rv = f->C_Verify(s, (CK_BYTE_PTR)msg, sizeof msg, sig, esn);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    snprintf(label, sizeof label, "%s: C_CreateObject of the public key; the module verifies EVP's signature", name);
    CHECK(label, pn && esn && rv == CKR_OK);
    rv = create_priv(s, kt, set, by_seed ? seed : NULL, sn, by_seed ? NULL : priv, vn, &sk);
    CK_ULONG n = sizeof sig;
    if (rv == CKR_OK) rv = f->C_SignInit(s, &m, sk);
    if (rv == CKR_OK) rv = f->C_Sign(s, (CK_BYTE_PTR)msg, sizeof msg, sig, &n);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    snprintf(label, sizeof label, "%s: C_CreateObject of the private key from %s; EVP verifies the module's signature", name,
             by_seed ? "CKA_SEED" : "CKA_VALUE");
    CHECK(label, rv == CKR_OK && evp_verify(k, sig, n));
    if (!by_seed) {
        CK_OBJECT_HANDLE h = 0;
        unsigned char fake[32] = {0};
        CHECK("bad: an SLH-DSA private key with CKA_SEED (its 3.2 table has none): CKR_ATTRIBUTE_TYPE_INVALID",
              create_priv(s, kt, set, fake, sizeof fake, priv, vn, &h) == CKR_ATTRIBUTE_TYPE_INVALID);
    }
    EVP_PKEY_free(k);
}

/* CKA_ENCAPSULATE_TEMPLATE / CKA_DECAPSULATE_TEMPLATE (PKCS #11 3.2 §5.18): set at key generation,
 * merged into C_EncapsulateKey's / C_DecapsulateKey's template; a conflict is CKR_KEY_HANDLE_INVALID
 * (encapsulate) or CKR_TEMPLATE_INCONSISTENT (decapsulate), as the 3.2 text names them. */
static void kem_templates(CK_SESSION_HANDLE s) {
    CK_ULONG set = CKP_ML_KEM_768;
    CK_KEY_TYPE aes = CKK_AES, gt = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE enc_t[] = {{CKA_EXTRACTABLE, &no, 1}};
    CK_ATTRIBUTE dec_t[] = {{CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_ENCRYPT, &yes, 1}};
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &set, sizeof set}, {CKA_ENCAPSULATE_TEMPLATE, enc_t, sizeof enc_t}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_DECAPSULATE_TEMPLATE, dec_t, sizeof dec_t}};
    CK_MECHANISM gen = {CKM_ML_KEM_KEY_PAIR_GEN, NULL, 0}, m = {CKM_ML_KEM, NULL, 0};
    CK_OBJECT_HANDLE pk = 0, sk = 0, k1 = 0, k2 = 0, h = 0;
    CK_RV rv = f->C_GenerateKeyPair(s, &gen, pt, 3, kt, 2, &pk, &sk);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    CHECK("KEM templates: C_GenerateKeyPair with CKA_ENCAPSULATE_TEMPLATE / CKA_DECAPSULATE_TEMPLATE", rv == CKR_OK);
    if (rv != CKR_OK) return;
    CK_ATTRIBUTE q = {CKA_ENCAPSULATE_TEMPLATE, NULL, 0};
    CK_ATTRIBUTE back[2];
    CK_BBOOL b0 = 9;
    back[0] = (CK_ATTRIBUTE){0, &b0, 1};
    rv = f->C_GetAttributeValue(s, pk, &q, 1);
    CK_ULONG qn = q.ulValueLen;
    q.pValue = back;
    CHECK("KEM templates: CKA_ENCAPSULATE_TEMPLATE reads back its one attribute",
          rv == CKR_OK && qn == sizeof(CK_ATTRIBUTE) && f->C_GetAttributeValue(s, pk, &q, 1) == CKR_OK &&
          back[0].type == CKA_EXTRACTABLE && b0 == CK_FALSE);
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_ATTRIBUTE plain[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_TOKEN, &no, 1}};
    unsigned char ct[2048];
    CK_ULONG cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, plain, 2, ct, &cn, &k1);
    CK_BBOOL ext = 1;
    CK_ATTRIBUTE e = {CKA_EXTRACTABLE, &ext, 1};
    CHECK("KEM templates: C_EncapsulateKey's key takes CKA_EXTRACTABLE false from CKA_ENCAPSULATE_TEMPLATE",
          rv == CKR_OK && f->C_GetAttributeValue(s, k1, &e, 1) == CKR_OK && ext == CK_FALSE);
    CK_ATTRIBUTE clash[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_TOKEN, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, clash, 3, ct, &cn, &h);
    if (rv != CKR_KEY_HANDLE_INVALID) NOTE("rv 0x%lx", rv);
    CHECK("KEM templates: C_EncapsulateKey with CKA_EXTRACTABLE true against the template: CKR_KEY_HANDLE_INVALID (3.2 §5.18)",
          rv == CKR_KEY_HANDLE_INVALID);
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, plain, 2, ct, &cn, &k1);
    if (rv == CKR_OK) rv = f->C_DecapsulateKey(s, &m, sk, plain, 2, ct, cn, &k2);
    CK_KEY_TYPE got = 0;
    CK_BBOOL encr = 0;
    CK_ATTRIBUTE r[] = {{CKA_KEY_TYPE, &got, sizeof got}, {CKA_ENCRYPT, &encr, 1}};
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    CHECK("KEM templates: C_DecapsulateKey's key is CKK_AES with CKA_ENCRYPT from CKA_DECAPSULATE_TEMPLATE",
          rv == CKR_OK && f->C_GetAttributeValue(s, k2, r, 2) == CKR_OK && got == CKK_AES && encr);
    CK_ATTRIBUTE clash2[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_TOKEN, &no, 1}, {CKA_KEY_TYPE, &gt, sizeof gt}};
    rv = f->C_DecapsulateKey(s, &m, sk, clash2, 3, ct, cn, &h);
    if (rv != CKR_TEMPLATE_INCONSISTENT) NOTE("rv 0x%lx", rv);
    CHECK("KEM templates: C_DecapsulateKey asking CKK_GENERIC_SECRET against the template's CKK_AES: CKR_TEMPLATE_INCONSISTENT",
          rv == CKR_TEMPLATE_INCONSISTENT);
    CK_ATTRIBUTE none[] = {{CKA_DECAPSULATE_TEMPLATE, dec_t, sizeof dec_t}};
    CHECK("KEM templates: C_SetAttributeValue of CKA_DECAPSULATE_TEMPLATE: CKR_ATTRIBUTE_READ_ONLY",
          f->C_SetAttributeValue(s, sk, none, 1) == CKR_ATTRIBUTE_READ_ONLY);
    CK_OBJECT_HANDLE pk2 = 0, sk2 = 0;
    CK_ATTRIBUTE pt2[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &set, sizeof set}};
    CK_ATTRIBUTE q2 = {CKA_DECAPSULATE_TEMPLATE, NULL, 77};
    CHECK("KEM templates: an ML-KEM key without one reads the empty CKA_DECAPSULATE_TEMPLATE",
          f->C_GenerateKeyPair(s, &gen, pt2, 2, kt, 1, &pk2, &sk2) == CKR_OK &&
          f->C_GetAttributeValue(s, sk2, &q2, 1) == CKR_OK && q2.ulValueLen == 0);
}

int main(int argc, char **argv) {
    CK_SLOT_ID slot = 0;
    CK_SESSION_HANDLE s = 0;
    int rc = p11host_start_3_2(argc, argv, "pq_import MODULE", "pqimport", "a token to import into", &slot, &s);
    if (rc) return rc;
    if (slot) {
        mlkem(s);
        kem_templates(s);
        signatures(s, "ML-DSA-65", CKK_ML_DSA, CKP_ML_DSA_65, CKM_ML_DSA, 1);
        signatures(s, "SLH-DSA-SHA2-128f", CKK_SLH_DSA, CKP_SLH_DSA_SHA2_128F, CKM_SLH_DSA, 0);
        f->C_CloseSession(s);
    }
    f->C_Finalize(NULL);
    return p11host_report();
}
