/* Issue 13's second round of mechanisms through the C ABI
 * (Tests/integration/71-mech-breadth.sh): CKM_DES2_KEY_GEN, CBC-MAC
 * (CKM_AES_MAC(_GENERAL), CKM_DES3_MAC(_GENERAL)), CKM_AES_CCM,
 * CKM_AES_KEY_WRAP_KWP and the AES/DES3 ECB/CBC ENCRYPT_DATA derivations.
 * Run in process and through the agent (the default): the parameters
 * with pointers (CK_CCM_PARAMS, CK_*_CBC_ENCRYPT_DATA_PARAMS,
 * CK_KEY_DERIVATION_STRING_DATA) must cross the agent codec intact.
 *
 *   published vectors   RFC 3610 #1, SP 800-38C ex. 1, RFC 5649 §6,
 *                       SP 800-38A F.1.1 / F.2.1, SP 800-67
 *   raw OpenSSL         AES-CCM over random keys, nonces, AAD and lengths,
 *                       checked against EVP here (`openssl enc` has no AEAD)
 *   openssl CLI         files in OUTDIR the script checks with `openssl enc`
 *                       (published keys only: nothing secret on a command line)
 *   DSA, DH             RFC 6979 A.2.1's DSA key and signatures; the
 *                       module's DSA signature and DH secret written for
 *                       `openssl dgst -verify` / `openssl pkeyutl -derive`,
 *                       and the DH secret against EVP with a peer made here
 *   arguments           NULL pointers inside parameters, ulParameterLen,
 *                       a bad session first: the right CK_RV
 *
 * Usage: mechbreadth MODULE OUTDIR, with KS_TEST_SO_PIN and KS_TEST_PIN in
 * the environment. Ends with "N passed, M failed". */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include "p11host.h"


static const char *outdir;
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
static const CK_SESSION_HANDLE BAD = 0x7ffff00dUL;

static int same(const unsigned char *a, CK_ULONG an, const char *hex) {
    unsigned char b[256];
    size_t bn = p11host_unhex(hex, b);
    return an == bn && memcmp(a, b, bn) == 0;
}

/* A secret key of a known value: readable, every usage flag, derive too. */
static CK_OBJECT_HANDLE secret(CK_SESSION_HANDLE s, CK_KEY_TYPE type, const char *hex, CK_BBOOL sensitive) {
    unsigned char v[64];
    CK_ULONG n = p11host_unhex(hex, v);
    CK_BBOOL extractable = !sensitive;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_VALUE, v, n}, {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &extractable, 1},
                        {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}, {CKA_SIGN, &yes, 1}, {CKA_VERIFY, &yes, 1},
                        {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &yes, 1}, {CKA_DERIVE, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    CK_RV rv = f->C_CreateObject(s, t, sizeof t / sizeof t[0], &h);
    if (rv != CKR_OK) NOTE("C_CreateObject key type 0x%lx: 0x%lx", type, rv);
    return h;
}

static CK_RV mac(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE k, const unsigned char *in, CK_ULONG n,
                 unsigned char *out, CK_ULONG *outn) {
    CK_RV rv = f->C_SignInit(s, m, k);
    return rv != CKR_OK ? rv : f->C_Sign(s, (CK_BYTE_PTR)in, n, out, outn);
}

static CK_OBJECT_HANDLE derive(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE base, CK_KEY_TYPE type,
                               CK_ULONG len, CK_RV *rv) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_VALUE_LEN, &len, sizeof len}};
    CK_OBJECT_HANDLE h = 0;
    *rv = f->C_DeriveKey(s, m, base, t, len ? 5 : 4, &h);
    return h;
}

/* ---- the checks ---- */

static void catalog(CK_SLOT_ID slot) {
    struct { CK_MECHANISM_TYPE t; CK_ULONG min, max; CK_FLAGS flags; const char *name; } rows[] = {
        {CKM_DES2_KEY_GEN, 0, 0, CKF_GENERATE, "CKM_DES2_KEY_GEN"},
        {CKM_AES_MAC, 16, 32, CKF_SIGN | CKF_VERIFY, "CKM_AES_MAC"},
        {CKM_AES_MAC_GENERAL, 16, 32, CKF_SIGN | CKF_VERIFY, "CKM_AES_MAC_GENERAL"},
        {CKM_DES3_MAC, 0, 0, CKF_SIGN | CKF_VERIFY, "CKM_DES3_MAC"},
        {CKM_DES3_MAC_GENERAL, 0, 0, CKF_SIGN | CKF_VERIFY, "CKM_DES3_MAC_GENERAL"},
        {CKM_AES_CCM, 16, 32, CKF_ENCRYPT | CKF_DECRYPT, "CKM_AES_CCM"},
        {CKM_AES_KEY_WRAP_KWP, 16, 32, CKF_WRAP | CKF_UNWRAP, "CKM_AES_KEY_WRAP_KWP"},
        {CKM_AES_ECB_ENCRYPT_DATA, 16, 32, CKF_DERIVE, "CKM_AES_ECB_ENCRYPT_DATA"},
        {CKM_AES_CBC_ENCRYPT_DATA, 16, 32, CKF_DERIVE, "CKM_AES_CBC_ENCRYPT_DATA"},
        {CKM_DES3_ECB_ENCRYPT_DATA, 0, 0, CKF_DERIVE, "CKM_DES3_ECB_ENCRYPT_DATA"},
        {CKM_DES3_CBC_ENCRYPT_DATA, 0, 0, CKF_DERIVE, "CKM_DES3_CBC_ENCRYPT_DATA"},
        {CKM_DSA_PARAMETER_GEN, 1024, 3072, CKF_GENERATE, "CKM_DSA_PARAMETER_GEN"},
        {CKM_DSA_KEY_PAIR_GEN, 1024, 3072, CKF_GENERATE_KEY_PAIR, "CKM_DSA_KEY_PAIR_GEN"},
        {CKM_DSA, 1024, 3072, CKF_SIGN | CKF_VERIFY, "CKM_DSA"},
        {CKM_DSA_SHA256, 1024, 3072, CKF_SIGN | CKF_VERIFY, "CKM_DSA_SHA256"},
        {CKM_DH_PKCS_PARAMETER_GEN, 1024, 4096, CKF_GENERATE, "CKM_DH_PKCS_PARAMETER_GEN"},
        {CKM_DH_PKCS_KEY_PAIR_GEN, 1024, 4096, CKF_GENERATE_KEY_PAIR, "CKM_DH_PKCS_KEY_PAIR_GEN"},
        {CKM_DH_PKCS_DERIVE, 1024, 4096, CKF_DERIVE, "CKM_DH_PKCS_DERIVE"},
    };
    CK_MECHANISM_TYPE list[512];
    CK_ULONG n = 512;
    CK_RV rv = f->C_GetMechanismList(slot, list, &n);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int listed = 0;
        for (CK_ULONG j = 0; rv == CKR_OK && j < n; j++) listed |= list[j] == rows[i].t;
        CK_MECHANISM_INFO info;
        char name[160];
        snprintf(name, sizeof name, "C_GetMechanismList lists %s; C_GetMechanismInfo %lu-%lu, flags 0x%lx", rows[i].name,
                 rows[i].min, rows[i].max, rows[i].flags);
        CHECK(name, listed && f->C_GetMechanismInfo(slot, rows[i].t, &info) == CKR_OK && info.ulMinKeySize == rows[i].min &&
                    info.ulMaxKeySize == rows[i].max && info.flags == rows[i].flags);
    }
}

static const char *K128 = "2b7e151628aed2a6abf7158809cf4f3c";
static const char *P4 = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                        "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
static const char *K3 = "0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123";
static const char *C3 = "a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900";

static void ccm(CK_SESSION_HANDLE s) {
    CK_OBJECT_HANDLE k1 = secret(s, CKK_AES, "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf", CK_FALSE);
    unsigned char nonce[13], aad[8], pt[23], out[64], back[64];
    p11host_unhex("00000003020100a0a1a2a3a4a5", nonce);
    for (int i = 0; i < 8; i++) aad[i] = (unsigned char)i;
    for (int i = 0; i < 23; i++) pt[i] = (unsigned char)(8 + i);
    const char *want = "588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0";
    CK_CCM_PARAMS p = {23, nonce, 13, aad, 8, 8};
    CK_MECHANISM m = {CKM_AES_CCM, &p, sizeof p};
    CK_ULONG n = sizeof out;
    CHECK("CKM_AES_CCM: RFC 3610 packet vector #1, C_Encrypt", p11host_crypt1(s, 1, &m, k1, pt, 23, out, &n) == CKR_OK && same(out, n, want));
    n = sizeof out;
    CHECK("CKM_AES_CCM: RFC 3610 #1 multi-part (5-byte parts; the final call gives it all)",
          p11host_cryptn(s, 1, &m, k1, pt, 23, out, &n, 5) == CKR_OK && same(out, n, want));
    CK_ULONG bn = sizeof back;
    CHECK("CKM_AES_CCM: RFC 3610 #1 decrypts, single- and multi-part",
          p11host_crypt1(s, 0, &m, k1, out, n, back, &bn) == CKR_OK && bn == 23 && memcmp(back, pt, 23) == 0 &&
          (bn = sizeof back, p11host_cryptn(s, 0, &m, k1, out, n, back, &bn, 3)) == CKR_OK && bn == 23 && memcmp(back, pt, 23) == 0);
    out[30] ^= 1;
    bn = sizeof back;
    CHECK("CKM_AES_CCM: a flipped MAC bit is CKR_ENCRYPTED_DATA_INVALID", p11host_crypt1(s, 0, &m, k1, out, n, back, &bn) == CKR_ENCRYPTED_DATA_INVALID);
    CHECK("CKM_AES_CCM: the failed decryption ended the operation (C_Decrypt: CKR_OPERATION_NOT_INITIALIZED)",
          f->C_Decrypt(s, out, n, back, &bn) == CKR_OPERATION_NOT_INITIALIZED);
    /* SP 800-38C Appendix C, example 1. */
    CK_OBJECT_HANDLE k2 = secret(s, CKK_AES, "404142434445464748494a4b4c4d4e4f", CK_FALSE);
    unsigned char n2[7], a2[8], p2[4];
    p11host_unhex("10111213141516", n2); p11host_unhex("0001020304050607", a2); p11host_unhex("20212223", p2);
    CK_CCM_PARAMS q = {4, n2, 7, a2, 8, 4};
    CK_MECHANISM m2 = {CKM_AES_CCM, &q, sizeof q};
    n = sizeof out;
    CHECK("CKM_AES_CCM: SP 800-38C example 1 (7-byte nonce, 4-byte MAC)",
          p11host_crypt1(s, 1, &m2, k2, p2, 4, out, &n) == CKR_OK && same(out, n, "7162015b4dac255d"));
    /* Arguments. */
    CK_CCM_PARAMS nullNonce = {4, NULL, 7, a2, 8, 4};
    CK_MECHANISM mn = {CKM_AES_CCM, &nullNonce, sizeof nullNonce};
    CHECK("CKM_AES_CCM: pNonce NULL with ulNonceLen 7 is CKR_MECHANISM_PARAM_INVALID", f->C_EncryptInit(s, &mn, k2) == CKR_MECHANISM_PARAM_INVALID);
    CK_CCM_PARAMS nullAAD = {4, n2, 7, NULL, 8, 4};
    CK_MECHANISM ma = {CKM_AES_CCM, &nullAAD, sizeof nullAAD};
    CHECK("CKM_AES_CCM: pAAD NULL with ulAADLen 8 is CKR_MECHANISM_PARAM_INVALID", f->C_EncryptInit(s, &ma, k2) == CKR_MECHANISM_PARAM_INVALID);
    CK_CCM_PARAMS oddMAC = {4, n2, 7, a2, 8, 5};
    CK_MECHANISM mo = {CKM_AES_CCM, &oddMAC, sizeof oddMAC};
    CHECK("CKM_AES_CCM: a 5-byte MAC is CKR_MECHANISM_PARAM_INVALID", f->C_EncryptInit(s, &mo, k2) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM ms = {CKM_AES_CCM, &q, sizeof q - 1};
    CHECK("CKM_AES_CCM: ulParameterLen one short is CKR_MECHANISM_PARAM_INVALID", f->C_EncryptInit(s, &ms, k2) == CKR_MECHANISM_PARAM_INVALID);
    CHECK("CKM_AES_CCM on a bad session: CKR_SESSION_HANDLE_INVALID first", f->C_EncryptInit(BAD, &mn, k2) == CKR_SESSION_HANDLE_INVALID);
    n = sizeof out;
    CHECK("CKM_AES_CCM: input shorter than ulDataLen is CKR_DATA_LEN_RANGE", p11host_crypt1(s, 1, &m2, k2, p2, 3, out, &n) == CKR_DATA_LEN_RANGE);
}

/* AES-CCM against EVP in this process: random keys (16/24/32), nonces
 * (7-13), MAC lengths, AAD and payload lengths. */
static void ccm_against_evp(CK_SESSION_HANDLE s, int rounds) {
    int ok = 0;
    for (int r = 0; r < rounds; r++) {
        unsigned char key[32], nonce[13], aad[40], pt[300], out[400], ref[400], tag[16];
        int kl = 16 + 8 * (r % 3), nl = 7 + r % 7, tl = 4 + 2 * (r % 7), al = r % 3 == 0 ? 0 : r % 40, pl = (r * 37) % 300;
        RAND_bytes(key, kl); RAND_bytes(nonce, nl); RAND_bytes(aad, al); RAND_bytes(pt, pl);
        char hex[65] = {0};
        for (int i = 0; i < kl; i++) sprintf(hex + 2 * i, "%02x", key[i]);
        CK_OBJECT_HANDLE k = secret(s, CKK_AES, hex, CK_FALSE);
        CK_CCM_PARAMS p = {(CK_ULONG)pl, nonce, (CK_ULONG)nl, al ? aad : NULL, (CK_ULONG)al, (CK_ULONG)tl};
        CK_MECHANISM m = {CKM_AES_CCM, &p, sizeof p};
        CK_ULONG n = sizeof out;
        CK_RV rv = r % 2 ? p11host_cryptn(s, 1, &m, k, pt, pl, out, &n, 1 + r % 50) : p11host_crypt1(s, 1, &m, k, pt, pl, out, &n);
        const char *name = kl == 16 ? "AES-128-CCM" : kl == 24 ? "AES-192-CCM" : "AES-256-CCM";
        EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, NULL);
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
        int a = 0, b = 0;
        int good = c && x && EVP_EncryptInit_ex2(x, c, NULL, NULL, NULL) == 1 &&
                   EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_IVLEN, nl, NULL) == 1 &&
                   EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, tl, NULL) == 1 &&
                   EVP_EncryptInit_ex2(x, NULL, key, nonce, NULL) == 1 && EVP_EncryptUpdate(x, NULL, &a, NULL, pl) == 1 &&
                   (al == 0 || EVP_EncryptUpdate(x, NULL, &a, aad, al) == 1) && EVP_EncryptUpdate(x, ref, &a, pt, pl) == 1 &&
                   EVP_EncryptFinal_ex(x, ref + a, &b) == 1 && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, tl, tag) == 1;
        EVP_CIPHER_CTX_free(x);
        EVP_CIPHER_free(c);
        unsigned char back[400];
        CK_ULONG bn = sizeof back;
        if (good && rv == CKR_OK && n == (CK_ULONG)(pl + tl) && memcmp(out, ref, pl) == 0 && memcmp(out + pl, tag, tl) == 0 &&
            p11host_cryptn(s, 0, &m, k, out, n, back, &bn, 1 + r % 33) == CKR_OK && bn == (CK_ULONG)pl && memcmp(back, pt, pl) == 0)
            ok++;
        else
            NOTE("round %d: key %d nonce %d tag %d aad %d data %d: rv 0x%lx", r, kl, nl, tl, al, pl, rv);
        f->C_DestroyObject(s, k);
    }
    char name[128];
    snprintf(name, sizeof name, "CKM_AES_CCM = EVP AES-CCM on %d random keys, nonces, MAC and data lengths (both ways)", rounds);
    CHECK(name, ok == rounds);
}

static void cbc_mac(CK_SESSION_HANDLE s) {
    unsigned char data[80], out[32];
    CK_ULONG n;
    p11host_unhex(P4, data);
    CK_OBJECT_HANDLE k = secret(s, CKK_AES, K128, CK_FALSE);
    CK_MECHANISM m = {CKM_AES_MAC, NULL, 0};
    n = sizeof out;
    CHECK("CKM_AES_MAC of SP 800-38A's P1: the first 8 bytes of its ECB encryption (F.1.1)",
          mac(s, &m, k, data, 16, out, &n) == CKR_OK && same(out, n, "3ad77bb40d7a3660"));
    CK_ULONG len = 16;
    CK_MECHANISM g = {CKM_AES_MAC_GENERAL, &len, sizeof len};
    /* F.2.1's IV folded into P1: the CBC-MAC is F.2.1's last block. */
    unsigned char chained[64];
    memcpy(chained, data, 64);
    for (int i = 0; i < 16; i++) chained[i] ^= (unsigned char)i;
    n = sizeof out;
    CHECK("CKM_AES_MAC_GENERAL (16) of (P1 xor IV) P2 P3 P4 = SP 800-38A F.2.1's last CBC block",
          mac(s, &g, k, chained, 64, out, &n) == CKR_OK && same(out, n, "3ff1caa1681fac09120eca307586e1a7"));
    n = 0;
    CHECK("CKM_AES_MAC_GENERAL: a length query answers ulMacLength",
          f->C_SignInit(s, &g, k) == CKR_OK && f->C_Sign(s, data, 20, NULL, &n) == CKR_OK && n == 16);
    CHECK("... and the MAC of 20 bytes (zero-padded) follows", f->C_Sign(s, data, 20, out, &n) == CKR_OK && n == 16);
    p11host_put_file(outdir, "aesmac20.bin", out, n);
    p11host_put_file(outdir, "data20.bin", data, 20);
    CHECK("C_VerifyInit/C_Verify CKM_AES_MAC_GENERAL accepts it",
          f->C_VerifyInit(s, &g, k) == CKR_OK && f->C_Verify(s, data, 20, out, 16) == CKR_OK);
    CK_ULONG bad = 17;
    CK_MECHANISM gb = {CKM_AES_MAC_GENERAL, &bad, sizeof bad};
    CHECK("CKM_AES_MAC_GENERAL with 17 is CKR_MECHANISM_PARAM_INVALID", f->C_SignInit(s, &gb, k) == CKR_MECHANISM_PARAM_INVALID);
    CK_OBJECT_HANDLE t3 = secret(s, CKK_DES3, K3, CK_FALSE);
    unsigned char fox[24];
    memcpy(fox, "The qufck brown fox jump", 24);
    CK_MECHANISM d = {CKM_DES3_MAC, NULL, 0};
    n = sizeof out;
    CHECK("CKM_DES3_MAC of SP 800-67's first block: the first 4 bytes of its encryption",
          mac(s, &d, t3, fox, 8, out, &n) == CKR_OK && same(out, n, "a826fd8c"));
    /* Two-key 3DES (CKK_DES2): K1 K2 of SP 800-67's key; the script checks the MAC with openssl -des-ede-cbc. */
    CK_OBJECT_HANDLE t2 = secret(s, CKK_DES2, "0123456789ABCDEF23456789ABCDEF01", CK_FALSE);
    CK_ULONG eight = 8;
    CK_MECHANISM dg = {CKM_DES3_MAC_GENERAL, &eight, sizeof eight};
    n = sizeof out;
    CHECK("CKM_DES3_MAC_GENERAL (8) with a DES2 key over 21 bytes", mac(s, &dg, t2, fox, 21, out, &n) == CKR_OK && n == 8);
    p11host_put_file(outdir, "des2mac21.bin", out, n);
    p11host_put_file(outdir, "fox21.bin", fox, 21);
}

static void des2(CK_SESSION_HANDLE s) {
    CK_MECHANISM gen = {CKM_DES2_KEY_GEN, NULL, 0};
    /* A token object, for the script's `keyshare list` check. */
    CK_ATTRIBUTE t[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_TOKEN, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    unsigned char v[32];
    CK_KEY_TYPE type = 0;
    CK_ATTRIBUTE a = {CKA_KEY_TYPE, &type, sizeof type};
    CK_ULONG n;
    int parity = 1;
    CK_RV rv = f->C_GenerateKey(s, &gen, t, 3, &h);
    n = p11host_value(s, h, v, sizeof v);
    for (CK_ULONG i = 0; i < n; i++) parity &= __builtin_popcount(v[i]) % 2;
    CHECK("C_GenerateKey CKM_DES2_KEY_GEN: a 16-byte CKK_DES2 key with odd parity",
          rv == CKR_OK && n == 16 && parity && f->C_GetAttributeValue(s, h, &a, 1) == CKR_OK && type == CKK_DES2);
    CK_OBJECT_HANDLE k = secret(s, CKK_DES2, "0123456789ABCDEF23456789ABCDEF01", CK_FALSE);
    unsigned char fox[24], out[40];
    memcpy(fox, "The qufck brown fox jump", 24);
    /* ECB: no parameter, so this also runs through an agent whatever its codec knows of DES IVs. */
    CK_MECHANISM ecb = {CKM_DES3_ECB, NULL, 0};
    n = sizeof out;
    CHECK("CKM_DES3_ECB with a DES2 key", p11host_crypt1(s, 1, &ecb, k, fox, 24, out, &n) == CKR_OK && n == 24);
    p11host_put_file(outdir, "des2ecb.bin", out, n);
    p11host_put_file(outdir, "fox24.bin", fox, 24);
}

static void kwp(CK_SESSION_HANDLE s) {
    CK_OBJECT_HANDLE kek = secret(s, CKK_AES, "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8", CK_FALSE);
    /* A created KEK is not local: it wraps only non-sensitive keys (KeyUsagePolicy rule 2). It may not decrypt. */
    CK_OBJECT_HANDLE t20 = secret(s, CKK_GENERIC_SECRET, "c37b7e6492584340bed12207808941155068f738", CK_FALSE);
    CK_OBJECT_HANDLE t7 = secret(s, CKK_GENERIC_SECRET, "466f7250617369", CK_FALSE);
    CK_MECHANISM m = {CKM_AES_KEY_WRAP_KWP, NULL, 0};
    unsigned char out[64];
    CK_ULONG n = 0;
    CK_RV rv = f->C_WrapKey(s, &m, kek, t20, NULL, &n);
    CHECK("C_WrapKey CKM_AES_KEY_WRAP_KWP: length query 32", rv == CKR_OK && n == 32);
    CHECK("C_WrapKey CKM_AES_KEY_WRAP_KWP: RFC 5649 §6 (20-byte key)",
          f->C_WrapKey(s, &m, kek, t20, out, &n) == CKR_OK &&
          same(out, n, "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"));
    n = sizeof out;
    unsigned char std[4] = {0xA6, 0x59, 0x59, 0xA6};
    CK_MECHANISM mi = {CKM_AES_KEY_WRAP_KWP, std, 4};
    CHECK("C_WrapKey CKM_AES_KEY_WRAP_KWP with the standard IV as parameter: RFC 5649 §6 (7-byte key)",
          f->C_WrapKey(s, &mi, kek, t7, out, &n) == CKR_OK && same(out, n, "afbeb0f07dfbf5419200f2ccb50bb24f"));
    CK_KEY_TYPE gt = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &gt, sizeof gt},
                        {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &no, 1}};
    CK_OBJECT_HANDLE back = 0;
    CK_ULONG vl = 0;
    CK_ATTRIBUTE a = {CKA_VALUE_LEN, &vl, sizeof vl};
    CHECK("C_UnwrapKey CKM_AES_KEY_WRAP_KWP: the 7-byte key comes back",
          f->C_UnwrapKey(s, &m, kek, out, n, t, 4, &back) == CKR_OK && f->C_GetAttributeValue(s, back, &a, 1) == CKR_OK && vl == 7);
    out[0] ^= 1;
    CHECK("C_UnwrapKey CKM_AES_KEY_WRAP_KWP: a changed blob is CKR_WRAPPED_KEY_INVALID",
          f->C_UnwrapKey(s, &m, kek, out, n, t, 4, &back) == CKR_WRAPPED_KEY_INVALID);
    n = sizeof out;
    CHECK("C_WrapKey CKM_AES_KEY_WRAP_KWP of the 20-byte key, for openssl -id-aes192-wrap-pad",
          f->C_WrapKey(s, &m, kek, t20, out, &n) == CKR_OK);
    p11host_put_file(outdir, "kwp20.bin", out, n);
    unsigned char k20[20];
    p11host_put_file(outdir, "key20.bin", k20, p11host_unhex("c37b7e6492584340bed12207808941155068f738", k20));
}

static void encrypt_data(CK_SESSION_HANDLE s) {
    unsigned char data[64], out[64];
    p11host_unhex(P4, data);
    CK_OBJECT_HANDLE base = secret(s, CKK_AES, K128, CK_FALSE);
    CK_KEY_DERIVATION_STRING_DATA sd = {data, 32};
    CK_MECHANISM ecb = {CKM_AES_ECB_ENCRYPT_DATA, &sd, sizeof sd};
    CK_RV rv;
    CK_OBJECT_HANDLE h = derive(s, &ecb, base, CKK_GENERIC_SECRET, 0, &rv);
    CK_ULONG n = p11host_value(s, h, out, sizeof out);
    CHECK("C_DeriveKey CKM_AES_ECB_ENCRYPT_DATA: SP 800-38A F.1.1's C1 C2 as the key value",
          rv == CKR_OK && same(out, n, "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"));
    CK_AES_CBC_ENCRYPT_DATA_PARAMS cp;
    for (int i = 0; i < 16; i++) cp.iv[i] = (unsigned char)i;
    cp.pData = data;
    cp.length = 64;
    CK_MECHANISM cbc = {CKM_AES_CBC_ENCRYPT_DATA, &cp, sizeof cp};
    h = derive(s, &cbc, base, CKK_GENERIC_SECRET, 0, &rv);
    n = p11host_value(s, h, out, sizeof out);
    CHECK("C_DeriveKey CKM_AES_CBC_ENCRYPT_DATA: SP 800-38A F.2.1's ciphertext as the key value (64 bytes)",
          rv == CKR_OK && same(out, n, "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
                                       "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7"));
    h = derive(s, &cbc, base, CKK_AES, 16, &rv);
    n = p11host_value(s, h, out, sizeof out);
    CHECK("C_DeriveKey CKM_AES_CBC_ENCRYPT_DATA, CKK_AES with CKA_VALUE_LEN 16: the first block",
          rv == CKR_OK && same(out, n, "7649abac8119b246cee98e9b12e9197d"));
    /* For the CLI: 48 bytes of random data under the published key with a random IV. */
    unsigned char rnd[48];
    RAND_bytes(rnd, 48);
    RAND_bytes(cp.iv, 16);
    cp.pData = rnd;
    cp.length = 48;
    h = derive(s, &cbc, base, CKK_GENERIC_SECRET, 0, &rv);
    n = p11host_value(s, h, out, sizeof out);
    CHECK("C_DeriveKey CKM_AES_CBC_ENCRYPT_DATA on random data, for openssl enc", rv == CKR_OK && n == 48);
    p11host_put_file(outdir, "ecd-data.bin", rnd, 48);
    p11host_put_file(outdir, "ecd-iv.bin", cp.iv, 16);
    p11host_put_file(outdir, "ecd-key.bin", out, n);
    /* Arguments. */
    cp.pData = NULL;
    CHECK("CKM_AES_CBC_ENCRYPT_DATA with pData NULL and length 48: CKR_MECHANISM_PARAM_INVALID",
          (derive(s, &cbc, base, CKK_GENERIC_SECRET, 0, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
    cp.pData = rnd;
    cp.length = 20;
    CHECK("CKM_AES_CBC_ENCRYPT_DATA with 20 bytes (not whole blocks): CKR_MECHANISM_PARAM_INVALID",
          (derive(s, &cbc, base, CKK_GENERIC_SECRET, 0, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
    cp.length = 16;
    CHECK("CKM_AES_CBC_ENCRYPT_DATA, 16 bytes of data for a 32-byte AES key: CKR_MECHANISM_PARAM_INVALID (python-pkcs11's NEGATIVE_256_BIT_SHORT_DATA)",
          (derive(s, &cbc, base, CKK_AES, 32, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM shortp = {CKM_AES_CBC_ENCRYPT_DATA, &cp, sizeof cp - 1};
    CHECK("CKM_AES_CBC_ENCRYPT_DATA with ulParameterLen one short: CKR_MECHANISM_PARAM_INVALID",
          (derive(s, &shortp, base, CKK_GENERIC_SECRET, 0, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
    CK_OBJECT_HANDLE h2 = 0;
    CHECK("CKM_AES_ECB_ENCRYPT_DATA on a bad session: CKR_SESSION_HANDLE_INVALID first",
          f->C_DeriveKey(BAD, &shortp, base, NULL, 0, &h2) == CKR_SESSION_HANDLE_INVALID);
    CK_OBJECT_HANDLE hidden = secret(s, CKK_AES, K128, CK_TRUE);
    h = derive(s, &ecb, hidden, CKK_GENERIC_SECRET, 0, &rv);
    CK_ATTRIBUTE va = {CKA_VALUE, NULL, 0};
    CHECK("CKM_AES_ECB_ENCRYPT_DATA from a sensitive base: the new key is sensitive though the template says not",
          rv == CKR_OK && f->C_GetAttributeValue(s, h, &va, 1) == CKR_ATTRIBUTE_SENSITIVE);
    /* 3DES. */
    CK_OBJECT_HANDLE t3 = secret(s, CKK_DES3, K3, CK_FALSE);
    unsigned char fox[24];
    memcpy(fox, "The qufck brown fox jump", 24);
    CK_KEY_DERIVATION_STRING_DATA fd = {fox, 24};
    CK_MECHANISM e3 = {CKM_DES3_ECB_ENCRYPT_DATA, &fd, sizeof fd};
    h = derive(s, &e3, t3, CKK_GENERIC_SECRET, 0, &rv);
    n = p11host_value(s, h, out, sizeof out);
    CHECK("C_DeriveKey CKM_DES3_ECB_ENCRYPT_DATA: SP 800-67's ciphertext as the key value", rv == CKR_OK && same(out, n, C3));
    CK_DES_CBC_ENCRYPT_DATA_PARAMS dp;
    memset(dp.iv, 0, 8);
    dp.pData = fox;
    dp.length = 24;
    CK_MECHANISM c3 = {CKM_DES3_CBC_ENCRYPT_DATA, &dp, sizeof dp};
    h = derive(s, &c3, t3, CKK_DES3, 0, &rv);
    n = p11host_value(s, h, out, sizeof out);
    int parity = n == 24;
    for (CK_ULONG i = 0; i < n; i++) parity &= __builtin_popcount(out[i]) % 2;
    CHECK("C_DeriveKey CKM_DES3_CBC_ENCRYPT_DATA to a CKK_DES3 key: 24 bytes with odd parity", rv == CKR_OK && parity);
}

/* ---- DSA and DH ---- */

static const char *DSA_P = "86F5CA03DCFEB225063FF830A0C769B9DD9D6153AD91D7CE27F787C43278B447E6533B86B18BED6E8A48B784A14C252C"
                           "5BE0DBF60B86D6385BD2F12FB763ED8873ABFD3F5BA2E0A8C0A59082EAC056935E529DAF7C610467899C77ADEDFC846C"
                           "881870B7B19B2B58F9BE0521A17002E3BDD6B86685EE90B3D9A1B02B782B1779";
static const char *DSA_Q = "996F967F6C8E388D9E28D01E205FBA957A5698B1";
static const char *DSA_G = "07B0F92546150B62514BB771E2A0C0CE387F03BDA6C56B505209FF25FD3C133D89BBCD97E904E09114D9A7DEFDEADFC9"
                           "078EA544D2E401AEECC40BB9FBBF78FD87995A10A1C27CB7789B594BA7EFB5C4326A9FE59A070E136DB77175464ADCA4"
                           "17BE5DCE2F40D10A46A3A3943F26AB7FD9C0398FF8C76EE0A56826A8A88F1DBD";
static const char *DSA_X = "411602CB19A6CCC34494D79D98EF1E7ED5AF25F7";
static const char *DSA_Y = "5DF5E01DED31D0297E274E1691C192FE5868FEF9E19A84776454B100CF16F65392195A38B90523E2542EE61871C0440C"
                           "B87C322FC4B4D2EC5E1E7EC766E1BE8D4CE935437DC11C3C8FD426338933EBFE739CB3465F4D3668C5E473508253B1E6"
                           "82F65CBDC4FAE93C2EA212390E54905A86E2223170B44EAA7DA5DD9FFCFB7F3B";

/* An EVP_PKEY of `name` from big-endian components (NULL ones left out). */
static EVP_PKEY *ffc_pkey(const char *name, const unsigned char *p, int pn, const unsigned char *q, int qn,
                          const unsigned char *g, int gn, const unsigned char *pub, int yn) {
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    BIGNUM *bp = BN_bin2bn(p, pn, NULL), *bq = q ? BN_bin2bn(q, qn, NULL) : NULL, *bg = BN_bin2bn(g, gn, NULL),
           *by = BN_bin2bn(pub, yn, NULL);
    OSSL_PARAM_BLD_push_BN(b, "p", bp);
    if (bq) OSSL_PARAM_BLD_push_BN(b, "q", bq);
    OSSL_PARAM_BLD_push_BN(b, "g", bg);
    OSSL_PARAM_BLD_push_BN(b, "pub", by);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, name, NULL);
    EVP_PKEY *k = NULL;
    if (!c || EVP_PKEY_fromdata_init(c) != 1 || EVP_PKEY_fromdata(c, &k, EVP_PKEY_PUBLIC_KEY, params) != 1) k = NULL;
    EVP_PKEY_CTX_free(c);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(b);
    BN_free(bp); BN_free(bq); BN_free(bg); BN_free(by);
    return k;
}

static void put_pem(const char *name, EVP_PKEY *k, int private) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) return;
    if (private) PEM_write_PrivateKey(fp, k, NULL, NULL, 0, NULL, NULL); else PEM_write_PUBKEY(fp, k);
    fclose(fp);
}

static CK_OBJECT_HANDLE ffc_object(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *value) {
    unsigned char p[128], q[20], g[128], v[128];
    CK_ULONG pn = p11host_unhex(DSA_P, p), qn = p11host_unhex(DSA_Q, q), gn = p11host_unhex(DSA_G, g), vn = p11host_unhex(value, v);
    CK_KEY_TYPE type = CKK_DSA;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &type, sizeof type}, {CKA_PRIME, p, pn},
                        {CKA_SUBPRIME, q, qn}, {CKA_BASE, g, gn}, {CKA_VALUE, v, vn}};
    CK_OBJECT_HANDLE h = 0;
    CK_RV rv = f->C_CreateObject(s, t, 6, &h);
    if (rv != CKR_OK) NOTE("C_CreateObject DSA class %lu: 0x%lx", cls, rv);
    return h;
}

static void dsa(CK_SESSION_HANDLE s) {
    CK_OBJECT_HANDLE pub = ffc_object(s, CKO_PUBLIC_KEY, DSA_Y), priv = ffc_object(s, CKO_PRIVATE_KEY, DSA_X);
    unsigned char sig[64], sample[6];
    memcpy(sample, "sample", 6);
    p11host_unhex("4BC3B686AEA70145856814A6F1BB53346F02101E410697B92295D994D21EDD2F4ADA85566F6F94C1", sig);
    CK_MECHANISM m224 = {CKM_DSA_SHA224, NULL, 0};
    CHECK("CKM_DSA_SHA224: RFC 6979 A.2.1's signature of \"sample\" verifies",
          f->C_VerifyInit(s, &m224, pub) == CKR_OK && f->C_Verify(s, sample, 6, sig, 40) == CKR_OK);
    sig[5] ^= 1;
    CHECK("CKM_DSA_SHA224: with one bit changed, CKR_SIGNATURE_INVALID",
          f->C_VerifyInit(s, &m224, pub) == CKR_OK && f->C_Verify(s, sample, 6, sig, 40) == CKR_SIGNATURE_INVALID);
    CK_MECHANISM m256 = {CKM_DSA_SHA256, NULL, 0};
    CK_ULONG n = 0;
    CHECK("CKM_DSA_SHA256 with RFC 6979's private key: length query 40, then r || s",
          f->C_SignInit(s, &m256, priv) == CKR_OK && f->C_Sign(s, sample, 6, NULL, &n) == CKR_OK && n == 40 &&
          f->C_Sign(s, sample, 6, sig, &n) == CKR_OK && n == 40);
    /* r || s to DER for openssl dgst. */
    unsigned char der[64];
    int dn = 0;
    der[dn++] = 0x30; der[dn++] = 0;
    for (int half = 0; half < 2; half++) {
        unsigned char *v = sig + 20 * half;
        int i = 0;
        while (i < 19 && v[i] == 0) i++;
        int len = 20 - i + (v[i] & 0x80 ? 1 : 0);
        der[dn++] = 0x02; der[dn++] = (unsigned char)len;
        if (v[i] & 0x80) der[dn++] = 0;
        memcpy(der + dn, v + i, 20 - i);
        dn += 20 - i;
    }
    der[1] = (unsigned char)(dn - 2);
    p11host_put_file(outdir, "dsa-sig.der", der, dn);
    p11host_put_file(outdir, "dsa-data.bin", sample, 6);
    unsigned char p[128], q[20], g[128], y[128];
    EVP_PKEY *k = ffc_pkey("DSA", p, p11host_unhex(DSA_P, p), q, p11host_unhex(DSA_Q, q), g, p11host_unhex(DSA_G, g), y, p11host_unhex(DSA_Y, y));
    CHECK("RFC 6979's DSA public key as a PEM file for openssl dgst", k != NULL);
    if (k) put_pem("dsa-pub.pem", k, 0);
    EVP_PKEY_free(k);
    /* A generated token key pair on this domain, for the script's `keyshare list`. */
    CK_MECHANISM gen = {CKM_DSA_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE pt[] = {{CKA_PRIME, p, 128}, {CKA_SUBPRIME, q, 20}, {CKA_BASE, g, 128}, {CKA_TOKEN, &yes, 1}};
    CK_ATTRIBUTE st[] = {{CKA_TOKEN, &yes, 1}};
    CK_OBJECT_HANDLE gp = 0, gs = 0;
    CHECK("C_GenerateKeyPair CKM_DSA_KEY_PAIR_GEN on RFC 6979's domain (token objects)",
          f->C_GenerateKeyPair(s, &gen, pt, 4, st, 1, &gp, &gs) == CKR_OK);
    CK_ATTRIBUTE missing[] = {{CKA_PRIME, p, 128}, {CKA_BASE, g, 128}};
    CHECK("CKM_DSA_KEY_PAIR_GEN without CKA_SUBPRIME: CKR_TEMPLATE_INCOMPLETE",
          f->C_GenerateKeyPair(s, &gen, missing, 2, st, 1, &gp, &gs) == CKR_TEMPLATE_INCOMPLETE);
}

static void dh(CK_SESSION_HANDLE s) {
    CK_MECHANISM pg = {CKM_DH_PKCS_PARAMETER_GEN, NULL, 0};
    CK_ULONG bits = 1024;
    CK_ATTRIBUTE t[] = {{CKA_PRIME_BITS, &bits, sizeof bits}};
    CK_OBJECT_HANDLE dp = 0;
    CHECK("C_GenerateKey CKM_DH_PKCS_PARAMETER_GEN (1024 bits)", f->C_GenerateKey(s, &pg, t, 1, &dp) == CKR_OK);
    unsigned char p[512], g[512], ya[512], z[512];
    CK_ATTRIBUTE a[] = {{CKA_PRIME, p, sizeof p}, {CKA_BASE, g, sizeof g}};
    if (f->C_GetAttributeValue(s, dp, a, 2) != CKR_OK) { CHECK("the domain parameters' CKA_PRIME and CKA_BASE", 0); return; }
    CK_MECHANISM kg = {CKM_DH_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE pubt[] = {{CKA_PRIME, p, a[0].ulValueLen}, {CKA_BASE, g, a[1].ulValueLen}};
    CK_OBJECT_HANDLE pa = 0, sa = 0;
    CHECK("C_GenerateKeyPair CKM_DH_PKCS_KEY_PAIR_GEN on them", f->C_GenerateKeyPair(s, &kg, pubt, 2, NULL, 0, &pa, &sa) == CKR_OK);
    CK_ULONG yan = p11host_value(s, pa, ya, sizeof ya);
    /* The peer, in this process: a DH key on the same p and g. */
    EVP_PKEY *params = ffc_pkey("DH", p, (int)a[0].ulValueLen, NULL, 0, g, (int)a[1].ulValueLen, ya, (int)yan);
    EVP_PKEY_CTX *kc = params ? EVP_PKEY_CTX_new_from_pkey(NULL, params, NULL) : NULL;
    EVP_PKEY *peer = NULL;
    if (!kc || EVP_PKEY_keygen_init(kc) != 1 || EVP_PKEY_generate(kc, &peer) != 1) peer = NULL;
    EVP_PKEY_CTX_free(kc);
    BIGNUM *pubB = NULL;
    unsigned char yb[512];
    int ybn = peer && EVP_PKEY_get_bn_param(peer, "pub", &pubB) == 1 ? BN_bn2bin(pubB, yb) : 0;
    BN_free(pubB);
    CHECK("a DH peer made with EVP on the module's domain", ybn > 0);
    CK_MECHANISM d = {CKM_DH_PKCS_DERIVE, yb, (CK_ULONG)ybn};
    CK_RV rv;
    CK_OBJECT_HANDLE k = derive(s, &d, sa, CKK_GENERIC_SECRET, 0, &rv);
    CK_ULONG zn = p11host_value(s, k, z, sizeof z);
    /* EVP's side: the peer's private key with the module's public value. */
    unsigned char ref[512];
    size_t rn = sizeof ref;
    EVP_PKEY_CTX *dc = peer ? EVP_PKEY_CTX_new_from_pkey(NULL, peer, NULL) : NULL;
    unsigned int pad = 1;
    OSSL_PARAM pp[] = {OSSL_PARAM_construct_uint("pad", &pad), OSSL_PARAM_construct_end()};
    int good = dc && EVP_PKEY_derive_init(dc) == 1 && EVP_PKEY_CTX_set_params(dc, pp) == 1 &&
               EVP_PKEY_derive_set_peer(dc, params) == 1 && EVP_PKEY_derive(dc, ref, &rn) == 1;
    EVP_PKEY_CTX_free(dc);
    CHECK("C_DeriveKey CKM_DH_PKCS_DERIVE: Z = EVP's DH secret of the peer (padded to the size of p)",
          rv == CKR_OK && good && zn == rn && zn == a[0].ulValueLen && memcmp(z, ref, zn) == 0);
    if (peer) { put_pem("dh-peer.pem", peer, 1); put_pem("dh-module-pub.pem", params, 0); }
    p11host_put_file(outdir, "dh-z.bin", z, zn);
    EVP_PKEY_free(peer);
    EVP_PKEY_free(params);
    unsigned char one = 1;
    CK_MECHANISM bad = {CKM_DH_PKCS_DERIVE, &one, 1};
    CHECK("CKM_DH_PKCS_DERIVE with the public value 1: CKR_MECHANISM_PARAM_INVALID",
          (derive(s, &bad, sa, CKK_GENERIC_SECRET, 0, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM none = {CKM_DH_PKCS_DERIVE, NULL, 0};
    CHECK("CKM_DH_PKCS_DERIVE with no public value: CKR_MECHANISM_PARAM_INVALID",
          (derive(s, &none, sa, CKK_GENERIC_SECRET, 0, &rv), rv) == CKR_MECHANISM_PARAM_INVALID);
}

int main(int argc, char **argv) {
    const char *so_pin, *pin;
    if (!p11host_args(argc, 2, "mechbreadth MODULE OUTDIR", &so_pin, &pin)) return 1;
    outdir = argv[2];
    int rounds = getenv("BREADTH_ROUNDS") ? atoi(getenv("BREADTH_ROUNDS")) : 40;
    if (!(f = harness_load(argv[1]))) return 1;
    CHECK("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    CK_SLOT_ID slot = p11host_make_token("breadth", so_pin, pin);
    CHECK("a token made with C_InitToken and C_InitPIN", slot != 0);
    CK_SESSION_HANDLE s;
    CHECK("C_OpenSession and C_Login", p11host_user_session(slot, pin, &s) == CKR_OK);
    catalog(slot);
    des2(s);
    cbc_mac(s);
    ccm(s);
    ccm_against_evp(s, rounds);
    kwp(s);
    encrypt_data(s);
    dsa(s);
    dh(s);
    f->C_CloseSession(s);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    return p11host_report();
}
