/* The classical key encapsulations of PKCS #11 3.2 (Tests/integration/33-pq.sh, issue 18):
 * C_EncapsulateKey / C_DecapsulateKey with CKM_ECDH1_DERIVE / CKM_ECDH1_COFACTOR_DERIVE
 * (elliptic_curves.md: CK_ECDH1_DERIVE_PARAMS with pPublicData NULL, an ephemeral key pair whose
 * public value is the ciphertext) and CKM_RSA_X_509 (rsa.md: RSASVE of SP 800-56B). Each is crossed
 * with raw EVP: the module encapsulates to a key whose private half only EVP holds and EVP
 * derives the same key (ECDH + X9.63 KDF), EVP encapsulates (ephemeral ECDH, RSASVE) to the
 * module's public key and the module decapsulates the same secret; then the error cases with
 * their CK_RV. Needs no post-quantum engine (OpenSSL 3.0 has RSASVE and X963KDF).
 *
 * Usage: kem_classic MODULE, with KS_TEST_SO_PIN and KS_TEST_PIN in the environment.
 * Ends with "N passed, M failed". */
#define _GNU_SOURCE
#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rsa.h>
#define P11HOST_3_2
#define P11HOST_BUNDLED_LIBCRYPTO KS_PQ_ENGINE
#include "p11host.h"



static CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
static CK_KEY_TYPE gk = CKK_GENERIC_SECRET, ak = CKK_AES;
static CK_ULONG l32 = 32;
static unsigned char shared[] = "keyshare kem shared info";
static const unsigned char p256_oid[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
static const unsigned char x25519_oid[] = {0x06, 0x03, 0x2B, 0x65, 0x6E};

/* A readable 32-byte generic secret: the template both sides of an ECDH round trip use. */
static CK_ATTRIBUTE readable[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gk, sizeof gk}, {CKA_TOKEN, &no, 1},
                                  {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_VALUE_LEN, &l32, sizeof l32}};
#define NREADABLE 6
/* An unreadable AES-256 key (decapsulation under RSA must not give a readable key). */
static CK_ATTRIBUTE aes256[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &ak, sizeof ak}, {CKA_TOKEN, &no, 1},
                                {CKA_ENCRYPT, &yes, 1}, {CKA_VALUE_LEN, &l32, sizeof l32}, {CKA_SENSITIVE, &yes, 1}};
#define NAES 6

/* ANSI X9.63 KDF with SHA-256 through EVP_KDF (CKD_SHA256_KDF). */
static int x963(const unsigned char *z, size_t zn, unsigned char *out, size_t n) {
    EVP_KDF *k = EVP_KDF_fetch(NULL, "X963KDF", NULL);
    EVP_KDF_CTX *c = k ? EVP_KDF_CTX_new(k) : NULL;
    OSSL_PARAM p[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)z, zn),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, shared, sizeof shared - 1),
        OSSL_PARAM_construct_end()};
    int ok = c && EVP_KDF_derive(c, out, n, p) == 1;
    EVP_KDF_CTX_free(c);
    EVP_KDF_free(k);
    return ok;
}

/* Z = ECDH(mine, peer) with EVP. */
static size_t evp_ecdh(EVP_PKEY *mine, EVP_PKEY *peer, unsigned char *z, size_t cap) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, mine, NULL);
    size_t n = cap;
    int ok = c && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, peer) == 1 && EVP_PKEY_derive(c, z, &n) == 1;
    EVP_PKEY_CTX_free(c);
    return ok ? n : 0;
}

/* A P-256 public key from a raw point (group name "P-256"). */
static EVP_PKEY *evp_p256_public(const unsigned char *point, size_t n) {
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"P-256", 0),
                      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, n), OSSL_PARAM_construct_end()};
    if (!c || EVP_PKEY_fromdata_init(c) != 1 || EVP_PKEY_fromdata(c, &k, EVP_PKEY_PUBLIC_KEY, p) != 1) k = NULL;
    EVP_PKEY_CTX_free(c);
    return k;
}

static CK_RV ec_pair(CK_SESSION_HANDLE s, int montgomery, int kem, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {montgomery ? CKM_EC_MONTGOMERY_KEY_PAIR_GEN : CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_EC_PARAMS, (void *)(montgomery ? x25519_oid : p256_oid),
                                               montgomery ? sizeof x25519_oid : sizeof p256_oid},
                         {CKA_ENCAPSULATE, &yes, 1}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_DECAPSULATE, &yes, 1}, {CKA_DERIVE, &no, 1}};
    return f->C_GenerateKeyPair(s, &m, pt, kem ? 3 : 2, kt, kem ? 4 : 2, pub, priv);
}

static void ecdh(CK_SLOT_ID slot, CK_SESSION_HANDLE s) {
    CK_MECHANISM_INFO mi;
    CHECK("CKM_ECDH1_DERIVE info: CKF_DERIVE | CKF_ENCAPSULATE | CKF_DECAPSULATE",
          f->C_GetMechanismInfo(slot, CKM_ECDH1_DERIVE, &mi) == CKR_OK
          && (mi.flags & (CKF_DERIVE | CKF_ENCAPSULATE | CKF_DECAPSULATE)) == (CKF_DERIVE | CKF_ENCAPSULATE | CKF_DECAPSULATE));
    CHECK("CKM_ECDH1_COFACTOR_DERIVE info: CKF_ENCAPSULATE | CKF_DECAPSULATE",
          f->C_GetMechanismInfo(slot, CKM_ECDH1_COFACTOR_DERIVE, &mi) == CKR_OK
          && (mi.flags & (CKF_ENCAPSULATE | CKF_DECAPSULATE)) == (CKF_ENCAPSULATE | CKF_DECAPSULATE));
    CK_ECDH1_DERIVE_PARAMS kp = {CKD_SHA256_KDF, sizeof shared - 1, shared, 0, NULL};
    CK_MECHANISM m = {CKM_ECDH1_DERIVE, &kp, sizeof kp};
    unsigned char ct[256], v1[64], v2[64], z[128], want[64];
    CK_ULONG cn;
    CK_RV rv;

    /* 1. To a key whose private half only EVP has: EVP derives the same key from the ciphertext. */
    EVP_PKEY *r = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    unsigned char rpt[128], rder[130];
    size_t rptn = 0;
    if (r) EVP_PKEY_get_octet_string_param(r, OSSL_PKEY_PARAM_PUB_KEY, rpt, sizeof rpt, &rptn);
    rder[0] = 0x04; rder[1] = (unsigned char)rptn; memcpy(rder + 2, rpt, rptn);
    CK_OBJECT_CLASS pc = CKO_PUBLIC_KEY;
    CK_KEY_TYPE ek = CKK_EC;
    CK_ATTRIBUTE imp[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &ek, sizeof ek}, {CKA_TOKEN, &no, 1},
                          {CKA_EC_PARAMS, (void *)p256_oid, sizeof p256_oid}, {CKA_EC_POINT, rder, rptn + 2},
                          {CKA_ENCAPSULATE, &yes, 1}};
    CK_OBJECT_HANDLE rk = 0, k1 = 0, k2 = 0;
    rv = f->C_CreateObject(s, imp, 6, &rk);
    CHECK("ECDH: an EVP P-256 public key imported with CKA_ENCAPSULATE", rv == CKR_OK && rptn == 65);
    cn = 0;
    rv = f->C_EncapsulateKey(s, &m, rk, readable, NREADABLE, NULL, &cn, &k1);
    CHECK("ECDH P-256: C_EncapsulateKey length query gives 65 (the raw point), no key made", rv == CKR_OK && cn == 65 && k1 == 0);
    cn = 10;
    rv = f->C_EncapsulateKey(s, &m, rk, readable, NREADABLE, ct, &cn, &k1);
    CHECK("ECDH P-256: a short buffer: CKR_BUFFER_TOO_SMALL with 65, no key", rv == CKR_BUFFER_TOO_SMALL && cn == 65 && k1 == 0);
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, rk, readable, NREADABLE, ct, &cn, &k1);
    if (rv != CKR_OK) NOTE("C_EncapsulateKey rv 0x%lx", rv);
    CHECK("ECDH P-256 (CKD_SHA256_KDF): C_EncapsulateKey gives an uncompressed point and a key",
          rv == CKR_OK && cn == 65 && ct[0] == 0x04 && k1);
    EVP_PKEY *eph = evp_p256_public(ct, cn);
    size_t zn = r && eph ? evp_ecdh(r, eph, z, sizeof z) : 0;
    int ok = zn == 32 && x963(z, zn, want, 32);
    CHECK("ECDH P-256: EVP_PKEY_derive + X9.63 KDF(SHA-256, shared data) on the ciphertext gives the module's key",
          ok && p11host_value(s, k1, v1, sizeof v1) == 32 && memcmp(v1, want, 32) == 0);
    CK_BBOOL b = 1;
    p11host_attr(s, k1, CKA_LOCAL, &b, 1, &rv);
    CK_BBOOL as = 1;
    p11host_attr(s, k1, CKA_ALWAYS_SENSITIVE, &as, 1, &rv);
    CHECK("ECDH: the encapsulated key has CKA_LOCAL and CKA_ALWAYS_SENSITIVE false (3.2 §5.18)", b == 0 && as == 0);
    EVP_PKEY_free(eph);

    /* 2. The module's own pair: round trip; decapsulation needs CKA_DECAPSULATE, not CKA_DERIVE. */
    CK_OBJECT_HANDLE pk = 0, sk = 0;
    rv = ec_pair(s, 0, 1, &pk, &sk);
    CHECK("ECDH: a P-256 pair with CKA_ENCAPSULATE / CKA_DECAPSULATE (CKA_DERIVE false)", rv == CKR_OK);
    CK_BBOOL e = 0, d = 0, dv = 1;
    p11host_attr(s, pk, CKA_ENCAPSULATE, &e, 1, &rv);
    p11host_attr(s, sk, CKA_DECAPSULATE, &d, 1, &rv);
    p11host_attr(s, sk, CKA_DERIVE, &dv, 1, &rv);
    CHECK("ECDH: CKA_ENCAPSULATE / CKA_DECAPSULATE read back true, CKA_DERIVE false", e && d && !dv);
    cn = sizeof ct;
    k1 = k2 = 0;
    rv = f->C_EncapsulateKey(s, &m, pk, readable, NREADABLE, ct, &cn, &k1);
    if (rv == CKR_OK) rv = f->C_DecapsulateKey(s, &m, sk, readable, NREADABLE, ct, cn, &k2);
    if (rv != CKR_OK) NOTE("rv 0x%lx", rv);
    CHECK("ECDH P-256: encapsulate / decapsulate give the same 32 bytes",
          rv == CKR_OK && p11host_value(s, k1, v1, sizeof v1) == 32 && p11host_value(s, k2, v2, sizeof v2) == 32 && memcmp(v1, v2, 32) == 0);
    p11host_attr(s, k2, CKA_ALWAYS_SENSITIVE, &as, 1, &rv);
    CHECK("ECDH: the decapsulated key has CKA_ALWAYS_SENSITIVE false (3.2 §5.18)", rv == CKR_OK && as == 0);

    /* 3. EVP encapsulates (an ephemeral EVP key, ECDH with the module's public point, X9.63) and the
     * module decapsulates the EVP public point to the same key. */
    unsigned char mpt[140];
    CK_ULONG mptn = p11host_attr(s, pk, CKA_EC_POINT, mpt, sizeof mpt, &rv);
    EVP_PKEY *mpub = rv == CKR_OK && mptn == 67 ? evp_p256_public(mpt + 2, 65) : NULL;
    EVP_PKEY *x = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    unsigned char xpt[128];
    size_t xptn = 0;
    if (x) EVP_PKEY_get_octet_string_param(x, OSSL_PKEY_PARAM_PUB_KEY, xpt, sizeof xpt, &xptn);
    zn = x && mpub ? evp_ecdh(x, mpub, z, sizeof z) : 0;
    ok = zn == 32 && x963(z, zn, want, 32);
    k2 = 0;
    rv = f->C_DecapsulateKey(s, &m, sk, readable, NREADABLE, xpt, xptn, &k2);
    CHECK("ECDH P-256: EVP's ephemeral point decapsulates to EVP's X9.63 key", ok && rv == CKR_OK
          && p11host_value(s, k2, v2, sizeof v2) == 32 && memcmp(v2, want, 32) == 0);
    /* CKD_NULL: the key is Z's first bytes (as C_DeriveKey). */
    CK_ECDH1_DERIVE_PARAMS np = {CKD_NULL, 0, NULL, 0, NULL};
    CK_MECHANISM mn = {CKM_ECDH1_DERIVE, &np, sizeof np};
    k2 = 0;
    rv = f->C_DecapsulateKey(s, &mn, sk, readable, NREADABLE, xpt, xptn, &k2);
    CHECK("ECDH P-256 CKD_NULL: the decapsulated key is EVP's Z", zn == 32 && rv == CKR_OK
          && p11host_value(s, k2, v2, sizeof v2) == 32 && memcmp(v2, z, 32) == 0);
    /* Cofactor ECDH on P-256 (cofactor 1): the same Z. */
    CK_MECHANISM mc = {CKM_ECDH1_COFACTOR_DERIVE, &np, sizeof np};
    k2 = 0;
    rv = f->C_DecapsulateKey(s, &mc, sk, readable, NREADABLE, xpt, xptn, &k2);
    CHECK("ECDH1 cofactor P-256 CKD_NULL: the same Z", zn == 32 && rv == CKR_OK && p11host_value(s, k2, v2, sizeof v2) == 32
          && memcmp(v2, z, 32) == 0);

    /* 4. X25519 (CKK_EC_MONTGOMERY): a 32-byte ciphertext; cofactor ECDH is CKK_EC only. */
    CK_OBJECT_HANDLE xp = 0, xs = 0;
    rv = ec_pair(s, 1, 1, &xp, &xs);
    cn = sizeof ct;
    k1 = k2 = 0;
    if (rv == CKR_OK) rv = f->C_EncapsulateKey(s, &m, xp, readable, NREADABLE, ct, &cn, &k1);
    if (rv == CKR_OK) rv = f->C_DecapsulateKey(s, &m, xs, readable, NREADABLE, ct, cn, &k2);
    CHECK("ECDH X25519: a 32-byte ciphertext, same key both sides", rv == CKR_OK && cn == 32
          && p11host_value(s, k1, v1, sizeof v1) == 32 && p11host_value(s, k2, v2, sizeof v2) == 32 && memcmp(v1, v2, 32) == 0);
    CK_MECHANISM mck = {CKM_ECDH1_COFACTOR_DERIVE, &kp, sizeof kp};
    cn = sizeof ct;
    CHECK("ECDH1 cofactor with an X25519 key: CKR_KEY_TYPE_INCONSISTENT (CKK_EC only)",
          f->C_EncapsulateKey(s, &mck, xp, readable, NREADABLE, ct, &cn, &k1) == CKR_KEY_TYPE_INCONSISTENT);

    /* 5. Errors. */
    CK_OBJECT_HANDLE h = 0;
    unsigned char pd[65];
    memcpy(pd, xpt, 65);
    CK_ECDH1_DERIVE_PARAMS wp = {CKD_SHA256_KDF, 0, NULL, sizeof pd, pd};
    CK_MECHANISM mw = {CKM_ECDH1_DERIVE, &wp, sizeof wp};
    cn = sizeof ct;
    CHECK("ECDH: C_EncapsulateKey with pPublicData set: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &mw, pk, readable, NREADABLE, ct, &cn, &h) == CKR_MECHANISM_PARAM_INVALID && h == 0);
    CHECK("ECDH: C_DecapsulateKey with pPublicData set: CKR_MECHANISM_PARAM_INVALID",
          f->C_DecapsulateKey(s, &mw, sk, readable, NREADABLE, xpt, xptn, &h) == CKR_MECHANISM_PARAM_INVALID && h == 0);
    CK_MECHANISM ms = {CKM_ECDH1_DERIVE, &kp, sizeof kp - 1};
    cn = sizeof ct;
    CHECK("ECDH: a short parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &ms, pk, readable, NREADABLE, ct, &cn, &h) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM m0 = {CKM_ECDH1_DERIVE, NULL, 0};
    cn = sizeof ct;
    CHECK("ECDH: no parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &m0, pk, readable, NREADABLE, ct, &cn, &h) == CKR_MECHANISM_PARAM_INVALID);
    CK_ECDH1_DERIVE_PARAMS up = {0x7777, 0, NULL, 0, NULL};
    CK_MECHANISM mu = {CKM_ECDH1_DERIVE, &up, sizeof up};
    cn = sizeof ct;
    CHECK("ECDH: an unknown kdf: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &mu, pk, readable, NREADABLE, ct, &cn, &h) == CKR_MECHANISM_PARAM_INVALID);
    CK_OBJECT_HANDLE dk = 0;
    CHECK("ECDH: C_DeriveKey with pPublicData NULL is still CKR_MECHANISM_PARAM_INVALID",
          f->C_DeriveKey(s, &mn, sk, readable, NREADABLE, &dk) == CKR_MECHANISM_PARAM_INVALID && dk == 0);
    cn = sizeof ct;
    CHECK("ECDH: C_EncapsulateKey with the private key: CKR_KEY_TYPE_INCONSISTENT",
          f->C_EncapsulateKey(s, &m, sk, readable, NREADABLE, ct, &cn, &h) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK("ECDH: C_DecapsulateKey with the public key: CKR_KEY_TYPE_INCONSISTENT",
          f->C_DecapsulateKey(s, &m, pk, readable, NREADABLE, xpt, xptn, &h) == CKR_KEY_TYPE_INCONSISTENT);
    CK_OBJECT_HANDLE pk0 = 0, sk0 = 0;
    if (ec_pair(s, 0, 0, &pk0, &sk0) == CKR_OK) {
        cn = sizeof ct;
        CHECK("ECDH: a public key without CKA_ENCAPSULATE (the default): CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_EncapsulateKey(s, &m, pk0, readable, NREADABLE, ct, &cn, &h) == CKR_KEY_FUNCTION_NOT_PERMITTED);
        CHECK("ECDH: a private key without CKA_DECAPSULATE: CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_DecapsulateKey(s, &m, sk0, readable, NREADABLE, xpt, xptn, &h) == CKR_KEY_FUNCTION_NOT_PERMITTED);
    } else {
        CHECK("a second P-256 pair", 0);
    }
    CHECK("ECDH: a ciphertext of the wrong length: CKR_WRAPPED_KEY_LEN_RANGE",
          f->C_DecapsulateKey(s, &m, sk, readable, NREADABLE, xpt, 64, &h) == CKR_WRAPPED_KEY_LEN_RANGE && h == 0);
    xpt[40] ^= 1;
    CHECK("ECDH: a point not on the curve: CKR_WRAPPED_KEY_INVALID",
          f->C_DecapsulateKey(s, &m, sk, readable, NREADABLE, xpt, xptn, &h) == CKR_WRAPPED_KEY_INVALID && h == 0);
    CK_OBJECT_CLASS prc = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE badt[] = {{CKA_CLASS, &prc, sizeof prc}, {CKA_TOKEN, &no, 1}};
    cn = sizeof ct;
    CHECK("ECDH: a template of another class: CKR_TEMPLATE_INCONSISTENT",
          f->C_EncapsulateKey(s, &m, pk, badt, 2, ct, &cn, &h) == CKR_TEMPLATE_INCONSISTENT);
    EVP_PKEY_free(mpub);
    EVP_PKEY_free(x);
    EVP_PKEY_free(r);
}

/* RSASVE (SP 800-56B §7.2.1) through CKM_RSA_X_509. */
static void rsasve(CK_SLOT_ID slot, CK_SESSION_HANDLE s) {
    CK_MECHANISM_INFO mi;
    CHECK("CKM_RSA_X_509 info: CKF_ENCAPSULATE | CKF_DECAPSULATE",
          f->C_GetMechanismInfo(slot, CKM_RSA_X_509, &mi) == CKR_OK
          && (mi.flags & (CKF_ENCAPSULATE | CKF_DECAPSULATE)) == (CKF_ENCAPSULATE | CKF_DECAPSULATE));
    CK_MECHANISM gm = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE pt[] = {{CKA_TOKEN, &no, 1}, {CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_ENCAPSULATE, &yes, 1}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_SENSITIVE, &yes, 1}, {CKA_DECAPSULATE, &yes, 1}};
    CK_OBJECT_HANDLE pk = 0, sk = 0, k1 = 0, k2 = 0, h = 0;
    CK_RV rv = f->C_GenerateKeyPair(s, &gm, pt, 3, kt, 3, &pk, &sk);
    CHECK("RSASVE: an RSA-2048 pair with CKA_ENCAPSULATE / CKA_DECAPSULATE", rv == CKR_OK);
    if (rv != CKR_OK) return;
    CK_MECHANISM m = {CKM_RSA_X_509, NULL, 0};
    static unsigned char ct[512], z[512], v[512], s1[16], s2[16], want[16];
    CK_ULONG cn = 0;
    CK_ULONG zlen = 256;
    CK_ATTRIBUTE whole[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gk, sizeof gk}, {CKA_TOKEN, &no, 1},
                            {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    rv = f->C_EncapsulateKey(s, &m, pk, whole, 5, NULL, &cn, &k1);
    CHECK("RSASVE: the length query gives k (256), no key made", rv == CKR_OK && cn == 256 && k1 == 0);
    cn = sizeof ct;
    rv = f->C_EncapsulateKey(s, &m, pk, whole, 5, ct, &cn, &k1);
    if (rv != CKR_OK) NOTE("C_EncapsulateKey rv 0x%lx", rv);
    CK_ULONG zn = k1 ? p11host_value(s, k1, z, sizeof z) : 0;
    CHECK("RSASVE: C_EncapsulateKey gives k bytes of ciphertext and a k-byte generic secret Z (rsa.md: k, k)",
          rv == CKR_OK && cn == 256 && zn == zlen);
    /* EVP: raw RSA of Z with the module's public key is the ciphertext (c = z^e mod n). */
    EVP_PKEY *ek = p11host_evp_rsa_public(s, pk);
    unsigned char raw[512];
    size_t rawn = sizeof raw;
    EVP_PKEY_CTX *c = ek ? EVP_PKEY_CTX_new_from_pkey(NULL, ek, NULL) : NULL;
    int ok = c && EVP_PKEY_encrypt_init(c) == 1 && EVP_PKEY_CTX_set_rsa_padding(c, RSA_NO_PADDING) == 1
             && EVP_PKEY_encrypt(c, raw, &rawn, z, 256) == 1;
    EVP_PKEY_CTX_free(c);
    CHECK("RSASVE: EVP raw RSA of Z with the public key is the ciphertext", ok && rawn == 256 && memcmp(raw, ct, 256) == 0);
    /* The module decapsulates to an unreadable AES-256 key: Z's last 32 bytes (as C_UnwrapKey takes them). */
    rv = f->C_DecapsulateKey(s, &m, sk, aes256, NAES, ct, cn, &k2);
    if (rv != CKR_OK) NOTE("C_DecapsulateKey rv 0x%lx", rv);
    CHECK("RSASVE: decapsulation to AES-256 is Z's last 32 bytes",
          rv == CKR_OK && p11host_aes_block(s, k2, s1) == 16 && p11host_evp_aes_block(z + 224, want) && memcmp(s1, want, 16) == 0);
    /* EVP's own RSASVE to the module's public key; the module decapsulates EVP's secret. */
    unsigned char ect[512], esec[512];
    size_t ectn = sizeof ect, esecn = sizeof esec;
    c = ek ? EVP_PKEY_CTX_new_from_pkey(NULL, ek, NULL) : NULL;
    ok = c && EVP_PKEY_encapsulate_init(c, NULL) == 1 && EVP_PKEY_CTX_set_kem_op(c, "RSASVE") == 1
         && EVP_PKEY_encapsulate(c, ect, &ectn, esec, &esecn) == 1;
    EVP_PKEY_CTX_free(c);
    k2 = 0;
    rv = ok ? f->C_DecapsulateKey(s, &m, sk, aes256, NAES, ect, ectn, &k2) : CKR_GENERAL_ERROR;
    CHECK("RSASVE: EVP_PKEY_encapsulate(RSASVE) to the module's key, the module decapsulates EVP's secret",
          rv == CKR_OK && esecn == 256 && p11host_aes_block(s, k2, s2) == 16 && p11host_evp_aes_block(esec + 224, want) && memcmp(s2, want, 16) == 0);
    /* Errors. */
    CK_ATTRIBUTE rd[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gk, sizeof gk}, {CKA_TOKEN, &no, 1},
                         {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CHECK("RSASVE: decapsulating to a readable key: CKR_TEMPLATE_INCONSISTENT (raw RSA would be a decryption oracle)",
          f->C_DecapsulateKey(s, &m, sk, rd, 5, ct, cn, &h) == CKR_TEMPLATE_INCONSISTENT && h == 0);
    CHECK("RSASVE: a ciphertext one byte short: CKR_WRAPPED_KEY_LEN_RANGE",
          f->C_DecapsulateKey(s, &m, sk, aes256, NAES, ct, cn - 1, &h) == CKR_WRAPPED_KEY_LEN_RANGE);
    memset(v, 0xff, 256);
    CHECK("RSASVE: a ciphertext above the modulus: CKR_WRAPPED_KEY_INVALID",
          f->C_DecapsulateKey(s, &m, sk, aes256, NAES, v, 256, &h) == CKR_WRAPPED_KEY_INVALID && h == 0);
    memset(v, 0, 256);
    CHECK("RSASVE: a zero ciphertext: CKR_WRAPPED_KEY_INVALID",
          f->C_DecapsulateKey(s, &m, sk, aes256, NAES, v, 256, &h) == CKR_WRAPPED_KEY_INVALID && h == 0);
    CK_ATTRIBUTE aesnolen[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &ak, sizeof ak}, {CKA_TOKEN, &no, 1}};
    cn = sizeof ct;
    CHECK("RSASVE: CKK_AES without CKA_VALUE_LEN: CKR_TEMPLATE_INCOMPLETE",
          f->C_EncapsulateKey(s, &m, pk, aesnolen, 3, ct, &cn, &h) == CKR_TEMPLATE_INCOMPLETE);
    CK_ULONG l300 = 300;
    CK_ATTRIBUTE big[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_TOKEN, &no, 1}, {CKA_VALUE_LEN, &l300, sizeof l300}};
    cn = sizeof ct;
    CHECK("RSASVE: CKA_VALUE_LEN above k: CKR_KEY_SIZE_RANGE",
          f->C_EncapsulateKey(s, &m, pk, big, 3, ct, &cn, &h) == CKR_KEY_SIZE_RANGE);
    unsigned char junk[4] = {0};
    CK_MECHANISM mp = {CKM_RSA_X_509, junk, sizeof junk};
    cn = sizeof ct;
    CHECK("RSASVE: a parameter (the mechanism has none): CKR_MECHANISM_PARAM_INVALID",
          f->C_EncapsulateKey(s, &mp, pk, whole, 5, ct, &cn, &h) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM ecm = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE ept[] = {{CKA_TOKEN, &no, 1}, {CKA_EC_PARAMS, (void *)p256_oid, sizeof p256_oid}, {CKA_ENCAPSULATE, &yes, 1}};
    CK_ATTRIBUTE ekt[] = {{CKA_TOKEN, &no, 1}};
    CK_OBJECT_HANDLE ep = 0, es = 0;
    if (f->C_GenerateKeyPair(s, &ecm, ept, 3, ekt, 1, &ep, &es) == CKR_OK) {
        cn = sizeof ct;
        CHECK("RSASVE with an EC public key: CKR_KEY_TYPE_INCONSISTENT",
              f->C_EncapsulateKey(s, &m, ep, whole, 5, ct, &cn, &h) == CKR_KEY_TYPE_INCONSISTENT);
    } else {
        CHECK("an EC pair", 0);
    }
    CK_ATTRIBUTE pt0[] = {{CKA_TOKEN, &no, 1}, {CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_ENCRYPT, &yes, 1}};
    CK_OBJECT_HANDLE pk0 = 0, sk0 = 0;
    if (f->C_GenerateKeyPair(s, &gm, pt0, 3, kt, 2, &pk0, &sk0) == CKR_OK) {
        cn = sizeof ct;
        CHECK("RSASVE: a CKA_ENCRYPT public key without CKA_ENCAPSULATE: CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_EncapsulateKey(s, &m, pk0, whole, 5, ct, &cn, &h) == CKR_KEY_FUNCTION_NOT_PERMITTED);
        CHECK("RSASVE: a private key without CKA_DECAPSULATE: CKR_KEY_FUNCTION_NOT_PERMITTED",
              f->C_DecapsulateKey(s, &m, sk0, aes256, NAES, ect, ectn, &h) == CKR_KEY_FUNCTION_NOT_PERMITTED);
    } else {
        CHECK("a second RSA pair", 0);
    }
    EVP_PKEY_free(ek);
}

int main(int argc, char **argv) {
    CK_SLOT_ID slot = 0;
    CK_SESSION_HANDLE s = 0;
    int rc = p11host_start_3_2(argc, argv, "kem_classic MODULE", "kem", "a token to work on", &slot, &s);
    if (rc) return rc;
    if (slot) {
        ecdh(slot, s);
        rsasve(slot, s);
        f->C_CloseSession(s);
    }
    f->C_Finalize(NULL);
    return p11host_report();
}
