/* The asymmetric mechanisms of issue 13 through the C ABI, for what
 * pkcs11-tool (OpenSC 0.23) cannot drive (Tests/integration/70-asymmetric.sh):
 * Ed448, X25519/X448 derivation, RSA sign/verify recover, RSA PKCS #1 / OAEP /
 * RSA-AES key wrap and unwrap, CK_EDDSA_PARAMS, and the argument checks of
 * the recovery functions. Results go to files in WORKDIR that the script
 * checks with the openssl command line; inputs (peer keys, blobs OpenSSL
 * made) come from files there too.
 *
 * Usage: asymmetric MODULE make WORKDIR   (creates the token, slot 1)
 *        asymmetric MODULE unwrap WORKDIR (opens what OpenSSL wrapped)
 * PINs from the environment (KS_TEST_PIN, KS_TEST_SO_PIN), never argv.
 * Prints one "ok"/"FAIL" line per check and "N passed, M failed". */
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
static const char *dir;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS pub_class = CKO_PUBLIC_KEY, priv_class = CKO_PRIVATE_KEY, secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE rsa_type = CKK_RSA, aes_type = CKK_AES, ec_type = CKK_EC;

static const unsigned char ED448_OID[] = {0x06, 0x03, 0x2B, 0x65, 0x71};
static const unsigned char X25519_OID[] = {0x06, 0x03, 0x2B, 0x65, 0x6E};
static const unsigned char X448_OID[] = {0x06, 0x03, 0x2B, 0x65, 0x6F};
static const unsigned char P256_OID[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
static const unsigned char E65537[] = {1, 0, 1};

/* ---- files ---- */

static char *path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static int put(const char *name, const void *data, size_t n) {
    FILE *fp = fopen(path(name), "wb");
    if (!fp) return 0;
    int ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* Reads at most cap bytes; the length, or -1. */
static long get(const char *name, unsigned char *out, size_t cap) {
    FILE *fp = fopen(path(name), "rb");
    if (!fp) return -1;
    size_t n = fread(out, 1, cap, fp);
    fclose(fp);
    return (long)n;
}

/* A hex file (openssl's -modulus output without "Modulus=") into bytes. */
static long get_hex(const char *name, unsigned char *out, size_t cap) {
    char text[8192];
    long n = get(name, (unsigned char *)text, sizeof text - 1);
    if (n < 0) return -1;
    text[n] = 0;
    char *p = strchr(text, '=');
    p = p ? p + 1 : text;
    size_t k = 0;
    while (p[0] && p[1] && k < cap) {
        if (p[0] == '\n' || p[0] == '\r') break;
        unsigned v;
        if (sscanf(p, "%2x", &v) != 1) return -1;
        out[k++] = (unsigned char)v;
        p += 2;
    }
    return (long)k;
}

/* ---- helpers ---- */

static CK_RV attr(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE t, unsigned char *out, CK_ULONG *n) {
    CK_ATTRIBUTE a = {t, out, *n};
    CK_RV rv = f->C_GetAttributeValue(s, h, &a, 1);
    *n = a.ulValueLen;
    return rv;
}

/* CKA_PUBLIC_KEY_INFO of a key to WORKDIR/name (openssl reads it as -pubin DER). */
static int put_spki(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, const char *name) {
    unsigned char buf[2048];
    CK_ULONG n = sizeof buf;
    return attr(s, h, CKA_PUBLIC_KEY_INFO, buf, &n) == CKR_OK && n > 0 && put(name, buf, n);
}

static CK_RV gen_pair(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE mech, const unsigned char *params, CK_ULONG plen,
                      CK_ATTRIBUTE_TYPE usage, CK_OBJECT_HANDLE *pub, CK_OBJECT_HANDLE *priv) {
    CK_MECHANISM m = {mech, NULL, 0};
    CK_ATTRIBUTE pt[] = {{CKA_EC_PARAMS, (void *)params, plen}};
    CK_ATTRIBUTE st[] = {{usage, &yes, 1}};
    return f->C_GenerateKeyPair(s, &m, pt, 1, st, 1, pub, priv);
}

/* An RSA public key object from a modulus (exponent 65537), with one usage flag. */
static CK_OBJECT_HANDLE rsa_public(CK_SESSION_HANDLE s, const unsigned char *n, CK_ULONG nlen, CK_ATTRIBUTE_TYPE usage,
                                   CK_BBOOL trusted) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &pub_class, sizeof pub_class}, {CKA_KEY_TYPE, &rsa_type, sizeof rsa_type},
                        {CKA_MODULUS, (void *)n, nlen}, {CKA_PUBLIC_EXPONENT, (void *)E65537, 3},
                        {usage, &yes, 1}, {CKA_TRUSTED, &trusted, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, trusted ? 6 : 5, &h) == CKR_OK ? h : 0;
}

static CK_OBJECT_HANDLE find_label(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_LABEL, (void *)label, strlen(label)}};
    CK_OBJECT_HANDLE h = 0;
    CK_ULONG n = 0;
    if (f->C_FindObjectsInit(s, t, 2) != CKR_OK) return 0;
    f->C_FindObjects(s, &h, 1, &n);
    f->C_FindObjectsFinal(s);
    return n == 1 ? h : 0;
}

/* ---- groups ---- */

/* Whether the module's engine computes the parameterised EdDSA instances (OpenSSL >= 3.2; issue
 * 29): C_GetInfo's libraryDescription names it ("keyshare, OpenSSL 3.5.9"). */
static int eddsa_instances(void) {
    CK_INFO i;
    char d[33];
    if (f->C_GetInfo(&i) != CKR_OK) return 0;
    memcpy(d, i.libraryDescription, 32);
    d[32] = 0;
    return !strstr(d, "OpenSSL 3.0") && !strstr(d, "OpenSSL 3.1");
}

/* Ed448: a generated pair signs; openssl verifies the signature with the
 * token's public key. CK_EDDSA_PARAMS: Ed448 with an empty context is the
 * same signature; with a context, and Ed448ph, sign and verify where the
 * engine has the instances (issue 29), else CKR_MECHANISM_PARAM_INVALID. */
static void ed448(CK_SESSION_HANDLE s) {
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CHECK("C_GenerateKeyPair Ed448 (CKM_EC_EDWARDS_KEY_PAIR_GEN)",
          gen_pair(s, CKM_EC_EDWARDS_KEY_PAIR_GEN, ED448_OID, sizeof ED448_OID, CKA_SIGN, &pub, &priv) == CKR_OK);
    unsigned char msg[] = "issue 13: Ed448 through PKCS #11";
    unsigned char sig[200], sig2[200];
    CK_ULONG n = sizeof sig, n2 = sizeof sig2;
    CK_MECHANISM m = {CKM_EDDSA, NULL, 0};
    CK_RV rv = f->C_SignInit(s, &m, priv);
    if (rv == CKR_OK) rv = f->C_Sign(s, msg, sizeof msg - 1, sig, &n);
    CHECK("C_Sign CKM_EDDSA with Ed448: 114 bytes", rv == CKR_OK && n == 114);
    CK_EDDSA_PARAMS ep = {CK_FALSE, 0, NULL};
    CK_MECHANISM mp = {CKM_EDDSA, &ep, sizeof ep};
    rv = f->C_SignInit(s, &mp, priv);
    if (rv == CKR_OK) rv = f->C_Sign(s, msg, sizeof msg - 1, sig2, &n2);
    CHECK("CK_EDDSA_PARAMS {phFlag false, no context} signs the same (Ed448 is deterministic)",
          rv == CKR_OK && n2 == n && memcmp(sig, sig2, n) == 0);
    unsigned char ctx[] = "foo";
    CK_EDDSA_PARAMS withctx = {CK_FALSE, 3, ctx}, ph = {CK_TRUE, 0, NULL}, nullctx = {CK_FALSE, 3, NULL};
    CK_MECHANISM m1 = {CKM_EDDSA, &withctx, sizeof withctx}, m2 = {CKM_EDDSA, &ph, sizeof ph},
                 m3 = {CKM_EDDSA, &nullctx, sizeof nullctx}, m4 = {CKM_EDDSA, &ep, sizeof ep - 1};
    if (eddsa_instances()) {
        CK_MECHANISM *inst[2] = {&m1, &m2};
        const char *names[2] = {"Ed448 with a context signs and verifies (and not as pure Ed448)",
                                "Ed448ph signs and verifies (and not as pure Ed448)"};
        for (int i = 0; i < 2; i++) {
            unsigned char is[200];
            CK_ULONG in = sizeof is;
            CK_RV r = f->C_SignInit(s, inst[i], priv);
            if (r == CKR_OK) r = f->C_Sign(s, msg, sizeof msg - 1, is, &in);
            if (r == CKR_OK) r = f->C_VerifyInit(s, inst[i], pub);
            if (r == CKR_OK) r = f->C_Verify(s, msg, sizeof msg - 1, is, in);
            CK_RV pure = f->C_VerifyInit(s, &m, pub);
            if (pure == CKR_OK) pure = f->C_Verify(s, msg, sizeof msg - 1, is, in);
            CHECK(names[i], r == CKR_OK && in == 114 && pure == CKR_SIGNATURE_INVALID);
        }
    } else {
        CHECK("Ed448 with a context: CKR_MECHANISM_PARAM_INVALID (OpenSSL 3.0 has no context string)",
              f->C_SignInit(s, &m1, priv) == CKR_MECHANISM_PARAM_INVALID);
        CHECK("Ed448ph: CKR_MECHANISM_PARAM_INVALID", f->C_VerifyInit(s, &m2, pub) == CKR_MECHANISM_PARAM_INVALID);
    }
    CHECK("CK_EDDSA_PARAMS with a NULL context of length 3: CKR_MECHANISM_PARAM_INVALID",
          f->C_SignInit(s, &m3, priv) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("CK_EDDSA_PARAMS of the wrong size: CKR_MECHANISM_PARAM_INVALID",
          f->C_SignInit(s, &m4, priv) == CKR_MECHANISM_PARAM_INVALID);
    rv = f->C_VerifyInit(s, &m, pub);
    if (rv == CKR_OK) rv = f->C_Verify(s, msg, sizeof msg - 1, sig, n);
    CHECK("C_Verify Ed448", rv == CKR_OK);
    CHECK("Ed448 outputs written", put("ed448.msg", msg, sizeof msg - 1) && put("ed448.sig", sig, n) &&
          put_spki(s, pub, "ed448.spki"));
}

/* X25519 / X448: a generated pair derives with the peer's raw public key
 * (WORKDIR/xNNN.peer, from openssl); the script derives the same with the
 * peer's private key and the token's public key. */
static void montgomery(CK_SESSION_HANDLE s, const char *name, const unsigned char *oid, CK_ULONG oidlen, CK_ULONG keylen) {
    char what[128], file[64];
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    snprintf(what, sizeof what, "C_GenerateKeyPair %s (CKM_EC_MONTGOMERY_KEY_PAIR_GEN)", name);
    CHECK(what, gen_pair(s, CKM_EC_MONTGOMERY_KEY_PAIR_GEN, oid, oidlen, CKA_DERIVE, &pub, &priv) == CKR_OK);
    unsigned char peer[64];
    snprintf(file, sizeof file, "%s.peer", name);
    long pn = get(file, peer, sizeof peer);
    CK_ECDH1_DERIVE_PARAMS p = {CKD_NULL, 0, NULL, (CK_ULONG)(pn > 0 ? pn : 0), peer};
    CK_MECHANISM m = {CKM_ECDH1_DERIVE, &p, sizeof p};
    CK_ULONG len = keylen;
    CK_KEY_TYPE gen = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &gen, sizeof gen},
                        {CKA_VALUE_LEN, &len, sizeof len}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE z = 0;
    CK_RV rv = f->C_DeriveKey(s, &m, priv, t, 5, &z);
    snprintf(what, sizeof what, "C_DeriveKey CKM_ECDH1_DERIVE with %s", name);
    CHECK(what, rv == CKR_OK && pn == (long)keylen);
    unsigned char value[64];
    CK_ULONG vn = sizeof value;
    snprintf(file, sizeof file, "%s.z", name);
    snprintf(what, sizeof what, "%s secret and public key written", name);
    int ok = attr(s, z, CKA_VALUE, value, &vn) == CKR_OK && vn == keylen && put(file, value, vn);
    snprintf(file, sizeof file, "%s.spki", name);
    CHECK(what, ok && put_spki(s, pub, file));
    /* The same through CKM_ECDH1_COFACTOR_DERIVE. */
    CK_MECHANISM mc = {CKM_ECDH1_COFACTOR_DERIVE, &p, sizeof p};
    CK_OBJECT_HANDLE z2 = 0;
    unsigned char value2[64];
    CK_ULONG vn2 = sizeof value2;
    rv = f->C_DeriveKey(s, &mc, priv, t, 5, &z2);
    snprintf(what, sizeof what, "CKM_ECDH1_COFACTOR_DERIVE with %s gives the same secret", name);
    CHECK(what, rv == CKR_OK && attr(s, z2, CKA_VALUE, value2, &vn2) == CKR_OK && vn2 == vn && memcmp(value, value2, vn) == 0);
}

/* RSA with recovery: the token signs with recovery, openssl -verifyrecover
 * gets the data back; openssl signs, C_VerifyRecover gets it back. Then
 * the C ABI's argument and state answers for the four functions. */
static void recover(CK_SESSION_HANDLE s) {
    CK_MECHANISM gen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE pt[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY_RECOVER, &yes, 1}};
    CK_ATTRIBUTE st[] = {{CKA_SIGN_RECOVER, &yes, 1}};
    CK_OBJECT_HANDLE pub = 0, priv = 0;
    CHECK("RSA-2048 pair with CKA_SIGN_RECOVER / CKA_VERIFY_RECOVER",
          f->C_GenerateKeyPair(s, &gen, pt, 2, st, 1, &pub, &priv) == CKR_OK);
    unsigned char data[] = "data a signature carries";
    unsigned char sig[256], raw[256];
    CK_ULONG n = 0, rn = sizeof raw;
    CK_MECHANISM pkcs = {CKM_RSA_PKCS, NULL, 0}, x509 = {CKM_RSA_X_509, NULL, 0};
    CK_RV rv = f->C_SignRecoverInit(s, &pkcs, priv);
    CK_RV q = rv == CKR_OK ? f->C_SignRecover(s, data, sizeof data - 1, NULL, &n) : rv;
    CHECK("C_SignRecover length query: the modulus size, operation kept", q == CKR_OK && n == 256);
    n = 10;
    CHECK("C_SignRecover into a short buffer: CKR_BUFFER_TOO_SMALL", f->C_SignRecover(s, data, sizeof data - 1, sig, &n)
          == CKR_BUFFER_TOO_SMALL && n == 256);
    n = sizeof sig;
    CHECK("C_SignRecover CKM_RSA_PKCS", f->C_SignRecover(s, data, sizeof data - 1, sig, &n) == CKR_OK && n == 256);
    CHECK("C_SignRecover after the operation ended: CKR_OPERATION_NOT_INITIALIZED",
          f->C_SignRecover(s, data, 1, sig, &n) == CKR_OPERATION_NOT_INITIALIZED);
    rv = f->C_SignRecoverInit(s, &x509, priv);
    if (rv == CKR_OK) rv = f->C_SignRecover(s, data, sizeof data - 1, raw, &rn);
    CHECK("C_SignRecover CKM_RSA_X_509", rv == CKR_OK && rn == 256);
    CHECK("recovery outputs written", put("rec.data", data, sizeof data - 1) && put("rec.sig", sig, n) &&
          put("rec.raw", raw, rn) && put_spki(s, pub, "rec.spki"));

    /* OpenSSL's signature, recovered by the token. */
    unsigned char mod[1024], osig[1024], out[1024];
    long mn = get_hex("peer.modulus", mod, sizeof mod), on = get("ossl.sig", osig, sizeof osig);
    CK_OBJECT_HANDLE peer = mn > 0 ? rsa_public(s, mod, (CK_ULONG)mn, CKA_VERIFY_RECOVER, CK_FALSE) : 0;
    CK_ULONG outn = 0;
    rv = peer ? f->C_VerifyRecoverInit(s, &pkcs, peer) : CKR_GENERAL_ERROR;
    if (rv == CKR_OK) rv = f->C_VerifyRecover(s, osig, (CK_ULONG)on, NULL, &outn);
    CHECK("C_VerifyRecover length query (an upper bound: the modulus size)", rv == CKR_OK && outn == (CK_ULONG)mn);
    outn = 3;
    CHECK("C_VerifyRecover into a short buffer: CKR_BUFFER_TOO_SMALL with the exact length",
          f->C_VerifyRecover(s, osig, (CK_ULONG)on, out, &outn) == CKR_BUFFER_TOO_SMALL && outn < (CK_ULONG)mn);
    outn = sizeof out;
    rv = f->C_VerifyRecover(s, osig, (CK_ULONG)on, out, &outn);
    CHECK("C_VerifyRecover of OpenSSL's PKCS #1 signature", rv == CKR_OK && put("ossl.recovered", out, outn));
    osig[on > 10 ? 10 : 0] ^= 1;
    outn = sizeof out;
    rv = f->C_VerifyRecoverInit(s, &pkcs, peer);
    CHECK("an altered signature: CKR_SIGNATURE_INVALID", rv == CKR_OK &&
          f->C_VerifyRecover(s, osig, (CK_ULONG)on, out, &outn) == CKR_SIGNATURE_INVALID);
    CHECK("... and the operation ended", f->C_VerifyRecover(s, osig, (CK_ULONG)on, out, &outn) == CKR_OPERATION_NOT_INITIALIZED);

    /* Arguments. */
    const CK_SESSION_HANDLE bad = 0x7ffff00dUL;
    CHECK("C_SignRecoverInit on a bad session: CKR_SESSION_HANDLE_INVALID",
          f->C_SignRecoverInit(bad, &pkcs, priv) == CKR_SESSION_HANDLE_INVALID);
    CHECK("C_VerifyRecover on a bad session: CKR_SESSION_HANDLE_INVALID",
          f->C_VerifyRecover(bad, sig, n, out, &outn) == CKR_SESSION_HANDLE_INVALID);
    CHECK("C_SignRecoverInit with a NULL mechanism and nothing active: CKR_OK",
          f->C_SignRecoverInit(s, NULL, priv) == CKR_OK);
    rv = f->C_SignRecoverInit(s, &pkcs, priv);
    CHECK("C_SignRecoverInit twice: CKR_OPERATION_ACTIVE", rv == CKR_OK && f->C_SignRecoverInit(s, &pkcs, priv) == CKR_OPERATION_ACTIVE);
    CHECK("C_SignRecover with a NULL pulSignatureLen: CKR_ARGUMENTS_BAD",
          f->C_SignRecover(s, data, 4, sig, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... which ended the operation", f->C_SignRecover(s, data, 4, sig, &n) == CKR_OPERATION_NOT_INITIALIZED);
    rv = f->C_SignRecoverInit(s, &pkcs, priv);
    CHECK("C_SignRecover with a NULL pData of length 4: CKR_ARGUMENTS_BAD",
          rv == CKR_OK && f->C_SignRecover(s, NULL, 4, sig, &n) == CKR_ARGUMENTS_BAD);
    rv = f->C_SignRecoverInit(s, &pkcs, priv);
    CHECK("C_SignRecoverInit with a NULL mechanism ends the active operation",
          rv == CKR_OK && f->C_SignRecoverInit(s, NULL, priv) == CKR_OK &&
          f->C_SignRecover(s, data, 4, sig, &n) == CKR_OPERATION_NOT_INITIALIZED);
    CK_MECHANISM sha = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CHECK("C_SignRecoverInit with CKM_SHA256_RSA_PKCS: CKR_MECHANISM_INVALID",
          f->C_SignRecoverInit(s, &sha, priv) == CKR_MECHANISM_INVALID);
    CK_MECHANISM withparam = {CKM_RSA_PKCS, data, 4};
    CHECK("CKM_RSA_PKCS with a parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_VerifyRecoverInit(s, &withparam, pub) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("C_VerifyRecoverInit with the private key: CKR_KEY_TYPE_INCONSISTENT",
          f->C_VerifyRecoverInit(s, &pkcs, priv) == CKR_KEY_TYPE_INCONSISTENT);
    CHECK("C_VerifyRecoverInit with an unknown key: CKR_KEY_HANDLE_INVALID",
          f->C_VerifyRecoverInit(s, &pkcs, 0x7fffff) == CKR_KEY_HANDLE_INVALID);
}

/* Wrapping to an RSA key OpenSSL holds: PKCS #1 v1.5 and OAEP of an AES key,
 * RSA-AES of an EC private key; the script opens each with openssl. A
 * sensitive key goes nowhere under a public key the user made, and the user
 * cannot mark one trusted. */
static void wrap(CK_SESSION_HANDLE s) {
    unsigned char mod[1024], value[32];
    long mn = get_hex("peer.modulus", mod, sizeof mod), vn = get("aes.value", value, sizeof value);
    CK_OBJECT_HANDLE peer = mn > 0 ? rsa_public(s, mod, (CK_ULONG)mn, CKA_WRAP, CK_FALSE) : 0;
    CK_ATTRIBUTE at[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                         {CKA_VALUE, value, (CK_ULONG)(vn > 0 ? vn : 0)}, {CKA_SENSITIVE, &no, 1},
                         {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE aes = 0;
    CHECK("wrap inputs: OpenSSL's RSA public key and an AES key",
          peer && vn == 32 && f->C_CreateObject(s, at, 5, &aes) == CKR_OK);
    unsigned char blob[4096];
    CK_ULONG bn = 0;
    CK_MECHANISM pkcs = {CKM_RSA_PKCS, NULL, 0};
    CK_RV rv = f->C_WrapKey(s, &pkcs, peer, aes, NULL, &bn);
    CHECK("C_WrapKey CKM_RSA_PKCS length query: the modulus size", rv == CKR_OK && bn == (CK_ULONG)mn);
    bn = sizeof blob;
    rv = f->C_WrapKey(s, &pkcs, peer, aes, blob, &bn);
    CHECK("C_WrapKey CKM_RSA_PKCS", rv == CKR_OK && put("wrap.pkcs1", blob, bn));
    CK_RSA_PKCS_OAEP_PARAMS oaep = {CKM_SHA256, CKG_MGF1_SHA256, 0, NULL, 0};
    CK_MECHANISM om = {CKM_RSA_PKCS_OAEP, &oaep, sizeof oaep};
    bn = sizeof blob;
    rv = f->C_WrapKey(s, &om, peer, aes, blob, &bn);
    CHECK("C_WrapKey CKM_RSA_PKCS_OAEP (SHA-256)", rv == CKR_OK && put("wrap.oaep", blob, bn));

    CK_OBJECT_HANDLE ecpub = 0, ecpriv = 0;
    CK_MECHANISM eg = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE ept[] = {{CKA_EC_PARAMS, (void *)P256_OID, sizeof P256_OID}};
    CK_ATTRIBUTE est[] = {{CKA_SIGN, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_SENSITIVE, &no, 1}};
    rv = f->C_GenerateKeyPair(s, &eg, ept, 1, est, 3, &ecpub, &ecpriv);
    CHECK("C_WrapKey CKM_RSA_PKCS_OAEP of a private key: CKR_KEY_NOT_WRAPPABLE (secret keys only)",
          rv == CKR_OK && f->C_WrapKey(s, &om, peer, ecpriv, blob, &bn) == CKR_KEY_NOT_WRAPPABLE);
    CK_RSA_AES_KEY_WRAP_PARAMS rp = {256, &oaep};
    CK_MECHANISM rm = {CKM_RSA_AES_KEY_WRAP, &rp, sizeof rp};
    bn = 0;
    rv = f->C_WrapKey(s, &rm, peer, ecpriv, NULL, &bn);
    CK_ULONG need = bn;
    bn = sizeof blob;
    if (rv == CKR_OK) rv = f->C_WrapKey(s, &rm, peer, ecpriv, blob, &bn);
    CHECK("C_WrapKey CKM_RSA_AES_KEY_WRAP (AES-256, OAEP SHA-256) of an EC private key",
          rv == CKR_OK && bn == need && put("wrap.rsaaes", blob, bn) && put_spki(s, ecpub, "wrap.ecpub.spki"));
    CK_RSA_AES_KEY_WRAP_PARAMS nooaep = {256, NULL}, badbits = {100, &oaep};
    CK_MECHANISM r1 = {CKM_RSA_AES_KEY_WRAP, &nooaep, sizeof nooaep}, r2 = {CKM_RSA_AES_KEY_WRAP, &badbits, sizeof badbits},
                 r3 = {CKM_RSA_AES_KEY_WRAP, &rp, sizeof rp - 1};
    bn = sizeof blob;
    CHECK("CK_RSA_AES_KEY_WRAP_PARAMS with a NULL pOAEPParams: CKR_MECHANISM_PARAM_INVALID",
          f->C_WrapKey(s, &r1, peer, aes, blob, &bn) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("ulAESKeyBits 100: CKR_MECHANISM_PARAM_INVALID", f->C_WrapKey(s, &r2, peer, aes, blob, &bn) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("a short CK_RSA_AES_KEY_WRAP_PARAMS: CKR_MECHANISM_PARAM_INVALID",
          f->C_WrapKey(s, &r3, peer, aes, blob, &bn) == CKR_MECHANISM_PARAM_INVALID);

    /* The policy: a sensitive key under a user-made public key, a user-made trusted one. */
    CK_ATTRIBUTE st[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                         {CKA_VALUE, value, 32}, {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE sensitive = 0;
    f->C_CreateObject(s, st, 5, &sensitive);
    bn = sizeof blob;
    CHECK("a sensitive key under a public key the user made: CKR_KEY_NOT_WRAPPABLE",
          sensitive && f->C_WrapKey(s, &om, peer, sensitive, blob, &bn) == CKR_KEY_NOT_WRAPPABLE);
    CHECK("the user cannot create a CKA_TRUSTED public key: CKR_ATTRIBUTE_READ_ONLY",
          rsa_public(s, mod, (CK_ULONG)mn, CKA_WRAP, CK_TRUE) == 0);
    CK_ATTRIBUTE tr = {CKA_TRUSTED, &yes, 1};
    CHECK("... nor mark one trusted: CKR_ATTRIBUTE_READ_ONLY", f->C_SetAttributeValue(s, peer, &tr, 1) == CKR_ATTRIBUTE_READ_ONLY);

    /* The unwrapping pair for the second run, as token objects. */
    CK_MECHANISM gen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    char label[] = "unwrapper";
    CK_ATTRIBUTE pt[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_TOKEN, &yes, 1}, {CKA_LABEL, label, 9}};
    CK_ATTRIBUTE sp[] = {{CKA_UNWRAP, &yes, 1}, {CKA_DECRYPT, &no, 1}, {CKA_TOKEN, &yes, 1}, {CKA_LABEL, label, 9}};
    CK_OBJECT_HANDLE upub = 0, upriv = 0;
    rv = f->C_GenerateKeyPair(s, &gen, pt, 3, sp, 4, &upub, &upriv);
    CHECK("the unwrapping RSA pair (token objects)", rv == CKR_OK && put_spki(s, upub, "unwrapper.spki"));
}

/* SHA-3 signatures: CKM_SHA3_*_RSA_PKCS, CKM_SHA3_*_RSA_PKCS_PSS (salt = hash
 * size, MGF1 with the same SHA-3) and CKM_ECDSA_SHA3_*, signed in two parts
 * and written as sha3.<bits>.{pkcs1,pss,ecdsa} for openssl dgst -sha3-<bits>. */
static void sha3_signatures(CK_SESSION_HANDLE s) {
    CK_MECHANISM gen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 2048;
    CK_ATTRIBUTE pt[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}};
    CK_ATTRIBUTE st[] = {{CKA_SIGN, &yes, 1}};
    CK_OBJECT_HANDLE rpub = 0, rpriv = 0, epub = 0, epriv = 0;
    CK_RV rv = f->C_GenerateKeyPair(s, &gen, pt, 1, st, 1, &rpub, &rpriv);
    if (rv == CKR_OK) rv = gen_pair(s, CKM_EC_KEY_PAIR_GEN, P256_OID, sizeof P256_OID, CKA_SIGN, &epub, &epriv);
    unsigned char msg[] = "signed with SHA-3";
    CHECK("keys for the SHA-3 signatures", rv == CKR_OK && put_spki(s, rpub, "sha3.rsa.spki") &&
          put_spki(s, epub, "sha3.ec.spki") && put("sha3.msg", msg, sizeof msg - 1));
    const struct {
        int bits;
        CK_MECHANISM_TYPE pkcs, pss, ecdsa, hash;
        CK_RSA_PKCS_MGF_TYPE mgf;
    } v[] = {
        {224, CKM_SHA3_224_RSA_PKCS, CKM_SHA3_224_RSA_PKCS_PSS, CKM_ECDSA_SHA3_224, CKM_SHA3_224, CKG_MGF1_SHA3_224},
        {256, CKM_SHA3_256_RSA_PKCS, CKM_SHA3_256_RSA_PKCS_PSS, CKM_ECDSA_SHA3_256, CKM_SHA3_256, CKG_MGF1_SHA3_256},
        {384, CKM_SHA3_384_RSA_PKCS, CKM_SHA3_384_RSA_PKCS_PSS, CKM_ECDSA_SHA3_384, CKM_SHA3_384, CKG_MGF1_SHA3_384},
        {512, CKM_SHA3_512_RSA_PKCS, CKM_SHA3_512_RSA_PKCS_PSS, CKM_ECDSA_SHA3_512, CKM_SHA3_512, CKG_MGF1_SHA3_512},
    };
    const char *kind[3] = {"pkcs1", "pss", "ecdsa"};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++) {
        CK_RSA_PKCS_PSS_PARAMS pp = {v[i].hash, v[i].mgf, (CK_ULONG)v[i].bits / 8};
        CK_MECHANISM ms[3] = {{v[i].pkcs, NULL, 0}, {v[i].pss, &pp, sizeof pp}, {v[i].ecdsa, NULL, 0}};
        for (int k = 0; k < 3; k++) {
            char name[64], what[128];
            unsigned char sig[512];
            CK_ULONG n = sizeof sig;
            rv = f->C_SignInit(s, &ms[k], k == 2 ? epriv : rpriv);
            if (rv == CKR_OK) rv = f->C_SignUpdate(s, msg, 6);
            if (rv == CKR_OK) rv = f->C_SignUpdate(s, msg + 6, sizeof msg - 7);
            if (rv == CKR_OK) rv = f->C_SignFinal(s, sig, &n);
            snprintf(name, sizeof name, "sha3.%d.%s", v[i].bits, kind[k]);
            snprintf(what, sizeof what, "C_SignFinal SHA3-%d %s", v[i].bits, kind[k]);
            CHECK(what, rv == CKR_OK && put(name, sig, n));
            rv = f->C_VerifyInit(s, &ms[k], k == 2 ? epub : rpub);
            if (rv == CKR_OK) rv = f->C_Verify(s, msg, sizeof msg - 1, sig, n);
            snprintf(what, sizeof what, "C_Verify SHA3-%d %s", v[i].bits, kind[k]);
            CHECK(what, rv == CKR_OK);
        }
    }
    CK_RSA_PKCS_PSS_PARAMS wrong = {CKM_SHA256, CKG_MGF1_SHA3_256, 32};
    CK_MECHANISM mw = {CKM_SHA3_256_RSA_PKCS_PSS, &wrong, sizeof wrong};
    CHECK("CKM_SHA3_256_RSA_PKCS_PSS with hashAlg SHA-256: CKR_MECHANISM_PARAM_INVALID",
          f->C_SignInit(s, &mw, rpriv) == CKR_MECHANISM_PARAM_INVALID);
}

/* Second run: open what OpenSSL wrapped to the token's RSA key. */
static void unwrap(CK_SESSION_HANDLE s) {
    CK_OBJECT_HANDLE priv = find_label(s, CKO_PRIVATE_KEY, "unwrapper");
    CHECK("the unwrapping key is found again", priv != 0);
    unsigned char blob[4096], out[512];
    long bn = get("in.oaep", blob, sizeof blob);
    CK_RSA_PKCS_OAEP_PARAMS oaep = {CKM_SHA256, CKG_MGF1_SHA256, 0, NULL, 0};
    CK_MECHANISM om = {CKM_RSA_PKCS_OAEP, &oaep, sizeof oaep};
    CK_ATTRIBUTE at[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                         {CKA_ENCRYPT, &yes, 1}};
    CK_OBJECT_HANDLE aes = 0;
    CK_RV rv = f->C_UnwrapKey(s, &om, priv, blob, (CK_ULONG)(bn > 0 ? bn : 0), at, 3, &aes);
    CHECK("C_UnwrapKey CKM_RSA_PKCS_OAEP of OpenSSL's blob", rv == CKR_OK);
    unsigned char iv[16] = {0}, zero[16] = {0};
    CK_MECHANISM cbc = {CKM_AES_CBC, iv, 16};
    CK_ULONG on = sizeof out;
    rv = f->C_EncryptInit(s, &cbc, aes);
    if (rv == CKR_OK) rv = f->C_Encrypt(s, zero, 16, out, &on);
    CHECK("the unwrapped AES key encrypts (block written)", rv == CKR_OK && put("unwrapped.block", out, on));
    CK_ATTRIBUTE readable[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                               {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CHECK("unwrapped readable (not sensitive, extractable) with a private key: CKR_TEMPLATE_INCONSISTENT",
          f->C_UnwrapKey(s, &om, priv, blob, (CK_ULONG)bn, readable, 4, &aes) == CKR_TEMPLATE_INCONSISTENT);

    bn = get("in.rsaaes", blob, sizeof blob);
    CK_RSA_AES_KEY_WRAP_PARAMS rp = {256, &oaep};
    CK_MECHANISM rm = {CKM_RSA_AES_KEY_WRAP, &rp, sizeof rp};
    CK_ATTRIBUTE kt[] = {{CKA_CLASS, &priv_class, sizeof priv_class}, {CKA_KEY_TYPE, &ec_type, sizeof ec_type},
                         {CKA_SIGN, &yes, 1}};
    CK_OBJECT_HANDLE ec = 0;
    rv = f->C_UnwrapKey(s, &rm, priv, blob, (CK_ULONG)(bn > 0 ? bn : 0), kt, 3, &ec);
    CHECK("C_UnwrapKey CKM_RSA_AES_KEY_WRAP of OpenSSL's EC key", rv == CKR_OK);
    unsigned char msg[] = "signed by an unwrapped key";
    CK_MECHANISM ecdsa = {CKM_ECDSA_SHA256, NULL, 0};
    on = sizeof out;
    rv = f->C_SignInit(s, &ecdsa, ec);
    if (rv == CKR_OK) rv = f->C_Sign(s, msg, sizeof msg - 1, out, &on);
    CHECK("the unwrapped EC key signs (r||s written)", rv == CKR_OK && on == 64 && put("unwrapped.sig", out, on) &&
          put("unwrapped.msg", msg, sizeof msg - 1));
    blob[bn > 300 ? 300 : 0] ^= 1;
    CHECK("an altered RSA-AES blob: CKR_WRAPPED_KEY_INVALID",
          f->C_UnwrapKey(s, &rm, priv, blob, (CK_ULONG)bn, kt, 3, &ec) == CKR_WRAPPED_KEY_INVALID);
    CHECK("a blob shorter than the modulus: CKR_WRAPPED_KEY_LEN_RANGE",
          f->C_UnwrapKey(s, &rm, priv, blob, 100, kt, 3, &ec) == CKR_WRAPPED_KEY_LEN_RANGE);
}

int main(int argc, char **argv) {
    const char *pin = getenv("KS_TEST_PIN"), *so_pin = getenv("KS_TEST_SO_PIN");
    if (argc < 4 || !pin || !so_pin) {
        printf("usage: KS_TEST_PIN=.. KS_TEST_SO_PIN=.. asymmetric MODULE make|unwrap WORKDIR\n0 passed, 1 failed\n");
        return 1;
    }
    dir = argv[3];
    if (!(f = harness_load(argv[1]))) return 1;
    CHECK("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    int making = strcmp(argv[2], "make") == 0;
    CK_SLOT_ID slot = 0;
    if (making) {
        CK_UTF8CHAR label[32];
        memset(label, ' ', sizeof label); memcpy(label, "asymmetric", 10);
        CK_RV rv = f->C_InitToken(1, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin), label);
        CK_SESSION_HANDLE so;
        CK_SLOT_ID slots[16]; CK_ULONG ns = 16;
        if (rv == CKR_OK) rv = f->C_GetSlotList(CK_TRUE, slots, &ns);
        slot = slots[0];
        if (rv == CKR_OK) rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &so);
        if (rv == CKR_OK) rv = f->C_Login(so, CKU_SO, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin));
        if (rv == CKR_OK) rv = f->C_InitPIN(so, (CK_UTF8CHAR_PTR)pin, strlen(pin));
        f->C_CloseSession(so);
        CHECK("a token made with C_InitToken and C_InitPIN", rv == CKR_OK);
    } else {
        CK_SLOT_ID slots[16]; CK_ULONG ns = 16;
        CHECK("the token is there", f->C_GetSlotList(CK_TRUE, slots, &ns) == CKR_OK && ns >= 2);
        slot = slots[0];
    }
    CK_SESSION_HANDLE s;
    CK_RV rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    if (rv == CKR_OK) rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    CHECK("C_OpenSession and C_Login", rv == CKR_OK);
    if (making) {
        ed448(s);
        montgomery(s, "x25519", X25519_OID, sizeof X25519_OID, 32);
        montgomery(s, "x448", X448_OID, sizeof X448_OID, 56);
        recover(s);
        wrap(s);
        sha3_signatures(s);
    } else {
        unwrap(s);
    }
    f->C_CloseSession(s);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
