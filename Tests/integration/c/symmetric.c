/* The symmetric mechanisms of issue 13 through the C ABI
 * (Tests/integration/68-symmetric.sh): AES-ECB/CTR/CTS/CMAC, DES and 3DES,
 * ChaCha20-Poly1305, the CBC_PAD / GCM / alternative-IV key wraps, and
 * message-based AEAD (PKCS #11 3.0 §5.13-5.14).
 *
 *   published vectors   SP 800-38A, RFC 3962 (as CS1), RFC 4493, SP 800-67,
 *                       FIPS 81, RFC 8439, the GCM spec's test case 4
 *   raw OpenSSL         random keys, lengths and splits, each output checked
 *                       against EVP in this process
 *   openssl CLI         files in OUTDIR that the script checks with `openssl
 *                       enc` / `openssl mac` (public NIST/FIPS keys only,
 *                       so nothing secret goes on a command line)
 *   arguments           NULL pointers, ulParameterLen, counter bits, IV and
 *                       nonce lengths, tag sizes, flags: the right CK_RV
 *   semantics           §5.2 termination, message lifetime, IV generators
 *   attacks             the CBC padding oracle (rule 6) and GCM IV reuse
 *                       (rule 7) run to their end
 *   isolation           single DES never loads "legacy" into the host's
 *                       default OpenSSL library context
 *
 * Usage: symmetric MODULE OUTDIR, with KS_TEST_SO_PIN and KS_TEST_PIN in the
 * environment (never on the command line). It makes its own token with
 * C_InitToken on the free slot (slot 1). Ends with "N passed, M failed". */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rand.h>
#include "p11host.h"

static int vectors;
static const char *outdir;
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
static const CK_SESSION_HANDLE BAD = 0x7ffff00dUL;

/* ---- helpers ---- */

static void put_hex(const char *name, const unsigned char *p, size_t n) {
    char h[1024] = {0};
    for (size_t i = 0; i < n && i < 500; i++) sprintf(h + 2 * i, "%02x", p[i]);
    p11host_put_file(outdir, name, (unsigned char *)h, strlen(h));
}

/* A secret key created from a known value: not sensitive, extractable,
 * every usage flag the tests need. */
static CK_OBJECT_HANDLE secret(CK_SESSION_HANDLE s, CK_KEY_TYPE type, const unsigned char *v, CK_ULONG n) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &type, sizeof type},
                        {CKA_VALUE, (void *)v, n}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1},
                        {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}, {CKA_SIGN, &yes, 1}, {CKA_VERIFY, &yes, 1},
                        {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    CK_RV rv = f->C_CreateObject(s, t, sizeof t / sizeof t[0], &h);
    if (rv != CKR_OK) NOTE("C_CreateObject key type 0x%lx: 0x%lx", type, rv);
    return h;
}

/* A generated AES-128 key with the given flags. */
static CK_OBJECT_HANDLE gen_aes(CK_SESSION_HANDLE s, CK_BBOOL enc, CK_BBOOL dec, CK_BBOOL wrap, CK_BBOOL unwrap,
                                CK_BBOOL extractable) {
    CK_ULONG len = 16;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &enc, 1}, {CKA_DECRYPT, &dec, 1},
                        {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &unwrap, 1}, {CKA_EXTRACTABLE, &extractable, 1}};
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, 6, &h) == CKR_OK ? h : 0;
}

/* Raw OpenSSL, for the cross-checks: one EVP cipher over the input. */
static int evp(const char *name, const unsigned char *key, const unsigned char *iv, int enc, int pad,
               const unsigned char *in, int n, unsigned char *out) {
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, NULL);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int a = 0, b = 0, ok = c && x && EVP_CipherInit_ex2(x, c, key, iv, enc, NULL) == 1 &&
                           EVP_CIPHER_CTX_set_padding(x, pad) == 1 && EVP_CipherUpdate(x, out, &a, in, n) == 1 &&
                           EVP_CipherFinal_ex(x, out + a, &b) == 1;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok ? a + b : -1;
}

static int evp_aead(const char *name, const unsigned char *key, const unsigned char *iv, int ivlen,
                    const unsigned char *aad, int aadlen, const unsigned char *in, int n, unsigned char *out,
                    unsigned char *tag, int taglen) {
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, NULL);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int a = 0, b = 0;
    int ok = c && x && EVP_EncryptInit_ex(x, c, NULL, NULL, NULL) == 1 &&
             EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_IVLEN, ivlen, NULL) == 1 &&
             EVP_EncryptInit_ex(x, NULL, NULL, key, iv) == 1 &&
             (aadlen == 0 || EVP_EncryptUpdate(x, NULL, &a, aad, aadlen) == 1) &&
             (n == 0 || EVP_EncryptUpdate(x, out, &a, in, n) == 1) && EVP_EncryptFinal_ex(x, out + (n ? a : 0), &b) == 1 &&
             EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, taglen, tag) == 1;
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok ? n : -1;
}

static int evp_cmac(const unsigned char *key, int keylen, const unsigned char *in, int n, unsigned char *mac) {
    EVP_MAC *m = EVP_MAC_fetch(NULL, "CMAC", NULL);
    EVP_MAC_CTX *x = m ? EVP_MAC_CTX_new(m) : NULL;
    char cipher[32];
    snprintf(cipher, sizeof cipher, "AES-%d-CBC", keylen * 8);
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string("cipher", cipher, 0), OSSL_PARAM_construct_end()};
    size_t len = 0;
    int ok = x && EVP_MAC_init(x, key, keylen, p) == 1 && EVP_MAC_update(x, in, n) == 1 &&
             EVP_MAC_final(x, mac, &len, 16) == 1 && len == 16;
    EVP_MAC_CTX_free(x);
    EVP_MAC_free(m);
    return ok;
}

static void rnd(unsigned char *p, int n) { RAND_bytes(p, n); }
static int rnd_below(int n) { unsigned r; RAND_bytes((unsigned char *)&r, sizeof r); return (int)(r % (unsigned)n); }

static CK_AES_CTR_PARAMS ctr_params(const unsigned char *cb, CK_ULONG bits) {
    CK_AES_CTR_PARAMS p;
    memset(&p, 0, sizeof p);
    p.ulCounterBits = bits;
    memcpy(p.cb, cb, 16);
    return p;
}

/* ---- groups ---- */

static void catalog(CK_SLOT_ID slot) {
    const CK_FLAGS ed = CKF_ENCRYPT | CKF_DECRYPT, msg = CKF_MESSAGE_ENCRYPT | CKF_MESSAGE_DECRYPT | CKF_MULTI_MESSAGE;
    struct { CK_MECHANISM_TYPE t; CK_FLAGS flags; CK_ULONG min, max; } want[] = {
        {CKM_AES_ECB, ed | CKF_WRAP | CKF_UNWRAP, 16, 32}, {CKM_AES_CTR, ed, 16, 32}, {CKM_AES_CTS, ed, 16, 32},
        {CKM_AES_CMAC, CKF_SIGN | CKF_VERIFY, 16, 32}, {CKM_AES_CMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 32},
        {CKM_AES_CBC_PAD, ed | CKF_WRAP | CKF_UNWRAP, 16, 32}, {CKM_AES_GCM, ed | CKF_WRAP | CKF_UNWRAP | msg, 16, 32},
        {CKM_AES_KEY_WRAP, CKF_WRAP | CKF_UNWRAP, 16, 32}, {CKM_AES_KEY_WRAP_PAD, CKF_WRAP | CKF_UNWRAP, 16, 32},
        {CKM_DES_KEY_GEN, CKF_GENERATE, 0, 0}, {CKM_DES3_KEY_GEN, CKF_GENERATE, 0, 0},
        {CKM_DES_ECB, ed, 0, 0}, {CKM_DES_CBC, ed, 0, 0}, {CKM_DES_CBC_PAD, ed, 0, 0},
        {CKM_DES3_ECB, ed | CKF_WRAP | CKF_UNWRAP, 0, 0}, {CKM_DES3_CBC, ed | CKF_WRAP | CKF_UNWRAP, 0, 0},
        {CKM_DES3_CBC_PAD, ed | CKF_WRAP | CKF_UNWRAP, 0, 0},
        {CKM_CHACHA20_KEY_GEN, CKF_GENERATE, 32, 32}, {CKM_CHACHA20_POLY1305, ed | msg, 32, 32},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CK_MECHANISM_INFO mi = {0};
        CK_RV rv = f->C_GetMechanismInfo(slot, want[i].t, &mi);
        if (rv != CKR_OK || mi.flags != want[i].flags || mi.ulMinKeySize != want[i].min || mi.ulMaxKeySize != want[i].max) {
            bad++;
            NOTE("mechanism 0x%lx: rv 0x%lx flags 0x%lx sizes %lu-%lu", want[i].t, rv, mi.flags, mi.ulMinKeySize, mi.ulMaxKeySize);
        }
    }
    CHECK("C_GetMechanismInfo: flags and key sizes of the 19 symmetric mechanisms", bad == 0);
    CK_MECHANISM_TYPE list[256];
    CK_ULONG n = 256;
    int found = 0;
    if (f->C_GetMechanismList(slot, list, &n) == CKR_OK)
        for (CK_ULONG i = 0; i < n; i++)
            for (size_t j = 0; j < sizeof want / sizeof want[0]; j++) found += list[i] == want[j].t;
    CHECK("C_GetMechanismList lists each of them once (AES-KW counted too)", found == (int)(sizeof want / sizeof want[0]));
}

/* Published vectors through the C ABI. */
static void published(CK_SESSION_HANDLE s) {
    unsigned char k128[16], k3[24], kd[8], ivd[8], pt[64], exp[128], out[256], cb[16];
    CK_ULONG n;
    p11host_unhex("2b7e151628aed2a6abf7158809cf4f3c", k128);
    p11host_unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710", pt);
    CK_OBJECT_HANDLE aes = secret(s, CKK_AES, k128, 16);

    CK_MECHANISM ecb = {CKM_AES_ECB, NULL, 0};
    p11host_unhex("3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4", exp);
    n = sizeof out;
    CHECK("SP 800-38A F.1.1 ECB-AES128 encrypt", p11host_crypt1(s, 1, &ecb, aes, pt, 64, out, &n) == CKR_OK && n == 64 && !memcmp(out, exp, 64));
    n = sizeof out;
    CHECK("SP 800-38A F.1.2 ECB-AES128 decrypt, multi-part", p11host_cryptn(s, 0, &ecb, aes, exp, 64, out, &n, 20) == CKR_OK && n == 64 && !memcmp(out, pt, 64));
    vectors += 2;

    p11host_unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", cb);
    CK_AES_CTR_PARAMS cp = ctr_params(cb, 128);
    CK_MECHANISM ctr = {CKM_AES_CTR, &cp, sizeof cp};
    p11host_unhex("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee", exp);
    n = sizeof out;
    CHECK("SP 800-38A F.5.1 CTR-AES128 encrypt, multi-part", p11host_cryptn(s, 1, &ctr, aes, pt, 64, out, &n, 7) == CKR_OK && n == 64 && !memcmp(out, exp, 64));
    n = sizeof out;
    CHECK("SP 800-38A F.5.2 CTR-AES128 decrypt", p11host_crypt1(s, 0, &ctr, aes, exp, 64, out, &n) == CKR_OK && !memcmp(out, pt, 64));
    vectors += 2;

    /* RFC 3962 B, 17-byte case, as CS1 (the last partial block before the last full one). */
    unsigned char kk[16], iv0[16] = {0};
    p11host_unhex("636869636b656e207465726979616b69", kk);
    CK_OBJECT_HANDLE chicken = secret(s, CKK_AES, kk, 16);
    CK_MECHANISM cts = {CKM_AES_CTS, iv0, 16};
    p11host_unhex("97c6353568f2bf8cb4d8a580362da7ff7f", exp);
    n = sizeof out;
    CHECK("RFC 3962 17-byte vector (as CS1) through CKM_AES_CTS",
          p11host_crypt1(s, 1, &cts, chicken, (unsigned char *)"I would like the ", 17, out, &n) == CKR_OK && n == 17 && !memcmp(out, exp, 17));
    vectors++;

    /* RFC 4493 §4, examples 1-4. */
    const char *macs[] = {"bb1d6929e95937287fa37d129b756746", "070a16b46b4d4144f79bdd9dd04a287c",
                          "dfa66747de9ae63030ca32611497c827", "51f0bebf7e3b9d92fc49741779363cfe"};
    const CK_ULONG lens[] = {0, 16, 40, 64};
    CK_MECHANISM cmac = {CKM_AES_CMAC, NULL, 0};
    int cmac_ok = 1;
    for (int i = 0; i < 4; i++) {
        unsigned char mac[16], want[16];
        CK_ULONG ml = 16;
        p11host_unhex(macs[i], want);
        cmac_ok &= f->C_SignInit(s, &cmac, aes) == CKR_OK && f->C_Sign(s, pt, lens[i], mac, &ml) == CKR_OK && ml == 16 &&
                   !memcmp(mac, want, 16) && f->C_VerifyInit(s, &cmac, aes) == CKR_OK &&
                   f->C_Verify(s, pt, lens[i], mac, 16) == CKR_OK;
        vectors++;
    }
    CHECK("RFC 4493 examples 1-4 through C_Sign and C_Verify (CKM_AES_CMAC)", cmac_ok);
    CK_ULONG four = 4;
    CK_MECHANISM cmacg = {CKM_AES_CMAC_GENERAL, &four, sizeof four};
    unsigned char mac4[16];
    CK_ULONG ml = sizeof mac4;
    CHECK("CKM_AES_CMAC_GENERAL with 4 bytes: the first 4 of example 2",
          f->C_SignInit(s, &cmacg, aes) == CKR_OK && f->C_Sign(s, pt, 16, mac4, &ml) == CKR_OK && ml == 4 &&
          !memcmp(mac4, "\x07\x0a\x16\xb4", 4));
    /* A running CMAC survives C_GetOperationState / C_SetOperationState (example 4 in two halves). */
    unsigned char state[128], mac[16], want4[16];
    CK_ULONG sn = sizeof state, ml4 = sizeof mac;
    p11host_unhex(macs[3], want4);
    CHECK("C_GetOperationState / C_SetOperationState carry a running CKM_AES_CMAC over (RFC 4493 example 4)",
          f->C_SignInit(s, &cmac, aes) == CKR_OK && f->C_SignUpdate(s, pt, 30) == CKR_OK &&
          f->C_GetOperationState(s, state, &sn) == CKR_OK && f->C_SignInit(s, NULL, 0) == CKR_OK &&
          f->C_SetOperationState(s, state, sn, 0, aes) == CKR_OK && f->C_SignUpdate(s, pt + 30, 34) == CKR_OK &&
          f->C_SignFinal(s, mac, &ml4) == CKR_OK && ml4 == 16 && !memcmp(mac, want4, 16));

    p11host_unhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123", k3);
    CK_OBJECT_HANDLE tdes = secret(s, CKK_DES3, k3, 24);
    CK_MECHANISM ecb3 = {CKM_DES3_ECB, NULL, 0};
    p11host_unhex("a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900", exp);
    n = sizeof out;
    CHECK("SP 800-67 Appendix B TDEA-ECB (the standard's \"qufck\")",
          p11host_crypt1(s, 1, &ecb3, tdes, (unsigned char *)"The qufck brown fox jump", 24, out, &n) == CKR_OK && n == 24 && !memcmp(out, exp, 24));
    vectors++;
    p11host_unhex("0123456789abcdef", kd);
    p11host_unhex("1234567890abcdef", ivd);
    CK_OBJECT_HANDLE des = secret(s, CKK_DES, kd, 8);
    CK_MECHANISM ecbd = {CKM_DES_ECB, NULL, 0}, cbcd = {CKM_DES_CBC, ivd, 8};
    n = sizeof out;
    CHECK("FIPS 81 Table B1 DES-ECB", p11host_crypt1(s, 1, &ecbd, des, (unsigned char *)"Now is t", 8, out, &n) == CKR_OK && n == 8 &&
          !memcmp(out, "\x3f\xa4\x0e\x8a\x98\x4d\x48\x15", 8));
    p11host_unhex("e5c7cdde872bf27c43e934008c389c0f683788499a7c05f6", exp);
    n = sizeof out;
    CHECK("FIPS 81 Table C1 DES-CBC, multi-part",
          p11host_cryptn(s, 1, &cbcd, des, (unsigned char *)"Now is the time for all ", 24, out, &n, 5) == CKR_OK && n == 24 && !memcmp(out, exp, 24));
    vectors += 2;

    /* RFC 8439 §2.8.2. */
    unsigned char ck[32], nonce[12], aad[12];
    for (int i = 0; i < 32; i++) ck[i] = (unsigned char)(0x80 + i);
    p11host_unhex("070000004041424344454647", nonce);
    p11host_unhex("50515253c0c1c2c3c4c5c6c7", aad);
    CK_OBJECT_HANDLE chacha = secret(s, CKK_CHACHA20, ck, 32);
    const char *lad = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    unsigned char cexp[130];
    p11host_unhex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
          "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc"
          "3ff4def08e4b7a9de576d26586cec64b6116" "1ae10b594f09e26a7e902ecbd0600691", cexp);
    CK_SALSA20_CHACHA20_POLY1305_PARAMS cpp = {nonce, 12, aad, 12};
    CK_MECHANISM cm = {CKM_CHACHA20_POLY1305, &cpp, sizeof cpp};
    n = sizeof out;
    CHECK("RFC 8439 §2.8.2 through C_Encrypt (ciphertext || tag)",
          p11host_crypt1(s, 1, &cm, chacha, (unsigned char *)lad, 114, out, &n) == CKR_OK && n == 130 && !memcmp(out, cexp, 130));
    n = sizeof out;
    CHECK("and back through multi-part C_Decrypt", p11host_cryptn(s, 0, &cm, chacha, cexp, 130, out, &n, 17) == CKR_OK && n == 114 &&
          !memcmp(out, lad, 114));
    vectors++;
    /* The same through the message API: the tag goes to pTag, not the output. */
    unsigned char tag[16];
    CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS mp = {nonce, 12, tag};
    CK_MECHANISM cmsg = {CKM_CHACHA20_POLY1305, NULL, 0};
    n = sizeof out;
    CHECK("RFC 8439 through C_EncryptMessage (tag written to pTag)",
          f->C_MessageEncryptInit(s, &cmsg, chacha) == CKR_OK &&
          f->C_EncryptMessage(s, &mp, sizeof mp, aad, 12, (CK_BYTE_PTR)lad, 114, out, &n) == CKR_OK && n == 114 &&
          !memcmp(out, cexp, 114) && !memcmp(tag, cexp + 114, 16) && f->C_MessageEncryptFinal(s) == CKR_OK);
    vectors++;

    /* GCM test case 4 through C_EncryptMessage and C_DecryptMessageBegin/Next. */
    unsigned char gk[16], giv[12], gaad[20], gpt[60], gct[60], gtag[16], mtag[16];
    p11host_unhex("feffe9928665731c6d6a8f9467308308", gk);
    p11host_unhex("cafebabefacedbaddecaf888", giv);
    p11host_unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2", gaad);
    p11host_unhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39", gpt);
    p11host_unhex("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091", gct);
    p11host_unhex("5bc94fbc3221a5db94fae95ae7121a47", gtag);
    CK_OBJECT_HANDLE gkey = secret(s, CKK_AES, gk, 16);
    CK_GCM_MESSAGE_PARAMS gp = {giv, 12, 0, CKG_NO_GENERATE, mtag, 128};
    CK_MECHANISM gm = {CKM_AES_GCM, NULL, 0};
    n = sizeof out;
    CHECK("GCM test case 4 through C_EncryptMessage",
          f->C_MessageEncryptInit(s, &gm, gkey) == CKR_OK &&
          f->C_EncryptMessage(s, &gp, sizeof gp, gaad, 20, gpt, 60, out, &n) == CKR_OK && n == 60 &&
          !memcmp(out, gct, 60) && !memcmp(mtag, gtag, 16) && f->C_MessageEncryptFinal(s) == CKR_OK);
    memcpy(mtag, gtag, 16);
    CK_ULONG a = sizeof out, b = sizeof out;
    CHECK("GCM test case 4 through C_DecryptMessageBegin / Next",
          f->C_MessageDecryptInit(s, &gm, gkey) == CKR_OK && f->C_DecryptMessageBegin(s, &gp, sizeof gp, gaad, 20) == CKR_OK &&
          f->C_DecryptMessageNext(s, &gp, sizeof gp, gct, 33, out, &a, 0) == CKR_OK && a == 0 &&
          f->C_DecryptMessageNext(s, &gp, sizeof gp, gct + 33, 27, out, &b, CKF_END_OF_MESSAGE) == CKR_OK && b == 60 &&
          !memcmp(out, gpt, 60) && f->C_MessageDecryptFinal(s) == CKR_OK);
    vectors += 2;
}

/* Random keys, lengths and splits, each result checked against raw OpenSSL. */
static void against_evp(CK_SESSION_HANDLE s, int rounds) {
    static unsigned char key[32], iv[16], in[600], mod[700], ref[700], tag[16], aad[40];
    int bad[8] = {0};
    const char *names[8] = {"AES-ECB", "AES-CTR", "AES-CBC-CTS", "AES-CMAC", "DES-EDE3-CBC (PKCS #7)",
                            "ChaCha20-Poly1305", "GCM message, CKG_GENERATE_RANDOM", "AES-CBC-PAD multi-part"};
    for (int r = 0; r < rounds; r++) {
        int ks = (int[]){16, 24, 32}[r % 3];
        rnd(key, 32); rnd(iv, 16); rnd(in, sizeof in); rnd(aad, sizeof aad);
        int n = rnd_below(512), step = 1 + rnd_below(70);
        CK_ULONG m;
        CK_OBJECT_HANDLE k = secret(s, CKK_AES, key, ks);
        char name[32];
        /* ECB: whole blocks. */
        int nb = n / 16 * 16;
        snprintf(name, sizeof name, "AES-%d-ECB", ks * 8);
        CK_MECHANISM ecb = {CKM_AES_ECB, NULL, 0};
        m = sizeof mod;
        bad[0] += p11host_cryptn(s, 1, &ecb, k, in, nb, mod, &m, step) != CKR_OK || evp(name, key, NULL, 1, 0, in, nb, ref) != (int)m ||
                  memcmp(mod, ref, m);
        /* CTR: any length, a random counter block with all 128 bits counting. */
        CK_AES_CTR_PARAMS cp = ctr_params(iv, 128);
        CK_MECHANISM ctr = {CKM_AES_CTR, &cp, sizeof cp};
        snprintf(name, sizeof name, "AES-%d-CTR", ks * 8);
        m = sizeof mod;
        bad[1] += p11host_cryptn(s, 1, &ctr, k, in, n, mod, &m, step) != CKR_OK || evp(name, key, iv, 1, 0, in, n, ref) != (int)m ||
                  memcmp(mod, ref, m);
        /* CTS: at least one block. */
        int nc = n < 16 ? 16 : n;
        CK_MECHANISM cts = {CKM_AES_CTS, iv, 16};
        snprintf(name, sizeof name, "AES-%d-CBC-CTS", ks * 8);
        m = sizeof mod;
        bad[2] += p11host_cryptn(s, 1, &cts, k, in, nc, mod, &m, step) != CKR_OK || evp(name, key, iv, 1, 0, in, nc, ref) != (int)m ||
                  memcmp(mod, ref, m);
        m = sizeof ref;
        bad[2] += p11host_cryptn(s, 0, &cts, k, mod, nc, ref, &m, step) != CKR_OK || m != (CK_ULONG)nc || memcmp(ref, in, nc);
        /* CMAC, multi-part. */
        CK_MECHANISM cmac = {CKM_AES_CMAC, NULL, 0};
        unsigned char mac[16], want[16];
        CK_ULONG ml = 16;
        int ok = f->C_SignInit(s, &cmac, k) == CKR_OK;
        for (int i = 0; ok && i < n; i += step) ok = f->C_SignUpdate(s, in + i, n - i < step ? n - i : step) == CKR_OK;
        ok = ok && f->C_SignFinal(s, mac, &ml) == CKR_OK && evp_cmac(key, ks, in, n, want) && !memcmp(mac, want, 16);
        bad[3] += !ok;
        /* 3DES-CBC-PAD with a parity-fixed random key. */
        unsigned char k3[24];
        rnd(k3, 24);
        for (int i = 0; i < 24; i++) { k3[i] &= 0xFE; k3[i] |= !(__builtin_popcount(k3[i]) & 1); }
        CK_OBJECT_HANDLE t = secret(s, CKK_DES3, k3, 24);
        CK_MECHANISM des3 = {CKM_DES3_CBC_PAD, iv, 8};
        m = sizeof mod;
        bad[4] += p11host_cryptn(s, 1, &des3, t, in, n, mod, &m, step) != CKR_OK ||
                  evp("DES-EDE3-CBC", k3, iv, 1, 1, in, n, ref) != (int)m || memcmp(mod, ref, m);
        /* ChaCha20-Poly1305 with a random nonce and AAD. */
        CK_OBJECT_HANDLE c = secret(s, CKK_CHACHA20, key, 32);
        int al = rnd_below(40);
        CK_SALSA20_CHACHA20_POLY1305_PARAMS cpp = {iv, 12, aad, (CK_ULONG)al};
        CK_MECHANISM cm = {CKM_CHACHA20_POLY1305, &cpp, sizeof cpp};
        m = sizeof mod;
        bad[5] += p11host_cryptn(s, 1, &cm, c, in, n, mod, &m, step) != CKR_OK || m != (CK_ULONG)n + 16 ||
                  evp_aead("ChaCha20-Poly1305", key, iv, 12, aad, al, in, n, ref, tag, 16) != n || memcmp(mod, ref, n) ||
                  memcmp(mod + n, tag, 16);
        /* GCM message with a random IV the module makes: EVP under the IV handed back. */
        unsigned char giv[12] = {0}, gtag[16];
        CK_GCM_MESSAGE_PARAMS gp = {giv, 12, 0, CKG_GENERATE_RANDOM, gtag, 128};
        CK_MECHANISM gm = {CKM_AES_GCM, NULL, 0};
        m = sizeof mod;
        ok = f->C_MessageEncryptInit(s, &gm, k) == CKR_OK &&
             f->C_EncryptMessage(s, &gp, sizeof gp, aad, al, in, n, mod, &m) == CKR_OK && m == (CK_ULONG)n &&
             f->C_MessageEncryptFinal(s) == CKR_OK;
        snprintf(name, sizeof name, "AES-%d-GCM", ks * 8);
        ok = ok && evp_aead(name, key, giv, 12, aad, al, in, n, ref, tag, 16) == n && !memcmp(mod, ref, n) &&
             !memcmp(gtag, tag, 16);
        bad[6] += !ok;
        /* CBC-PAD: multi-part equals raw OpenSSL too. */
        CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, 16};
        snprintf(name, sizeof name, "AES-%d-CBC", ks * 8);
        m = sizeof mod;
        bad[7] += p11host_cryptn(s, 1, &cbc, k, in, n, mod, &m, step) != CKR_OK || evp(name, key, iv, 1, 1, in, n, ref) != (int)m ||
                  memcmp(mod, ref, m);
        f->C_DestroyObject(s, k); f->C_DestroyObject(s, t); f->C_DestroyObject(s, c);
    }
    for (int i = 0; i < 8; i++) {
        char line[160];
        snprintf(line, sizeof line, "%s equals raw OpenSSL over %d random keys, lengths 0-511 and splits", names[i], rounds);
        if (bad[i]) NOTE("%s: %d mismatches", names[i], bad[i]);
        CHECK(line, bad[i] == 0);
    }
}

/* Outputs for the script's `openssl` CLI checks, under public keys only. */
static void for_cli(CK_SESSION_HANDLE s) {
    unsigned char k128[16], k256[32], k3[24], kd[8], cb[16], iv8[8], iv16[16], data[300], out[400], kv[20], alt8[8], alt4[4];
    CK_ULONG n;
    p11host_unhex("2b7e151628aed2a6abf7158809cf4f3c", k128);
    p11host_unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", k256);
    p11host_unhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123", k3);
    p11host_unhex("0123456789abcdef", kd);
    rnd(cb, 16); rnd(iv8, 8); rnd(iv16, 16); rnd(data, sizeof data); rnd(kv, 20); rnd(alt8, 8); rnd(alt4, 4);
    p11host_put_file(outdir, "data.bin", data, 257);
    put_hex("cb.hex", cb, 16); put_hex("iv8.hex", iv8, 8); put_hex("iv16.hex", iv16, 16);
    put_hex("alt8.hex", alt8, 8); put_hex("alt4.hex", alt4, 4);
    CK_OBJECT_HANDLE a1 = secret(s, CKK_AES, k128, 16), a2 = secret(s, CKK_AES, k256, 32);
    CK_OBJECT_HANDLE t = secret(s, CKK_DES3, k3, 24), d = secret(s, CKK_DES, kd, 8);

    CK_AES_CTR_PARAMS cp = ctr_params(cb, 128);
    CK_MECHANISM ctr = {CKM_AES_CTR, &cp, sizeof cp}, ecb = {CKM_AES_ECB, NULL, 0};
    n = sizeof out;
    if (p11host_crypt1(s, 1, &ctr, a1, data, 257, out, &n) == CKR_OK) p11host_put_file(outdir, "ctr128.bin", out, n);
    n = sizeof out;
    if (p11host_cryptn(s, 1, &ecb, a2, data, 256, out, &n, 48) == CKR_OK) p11host_put_file(outdir, "ecb256.bin", out, n);
    CK_MECHANISM cmac = {CKM_AES_CMAC, NULL, 0};
    CK_ULONG ml = 16;
    if (f->C_SignInit(s, &cmac, a1) == CKR_OK && f->C_Sign(s, data, 257, out, &ml) == CKR_OK) put_hex("cmac128.hex", out, ml);
    ml = 16;
    if (f->C_SignInit(s, &cmac, a2) == CKR_OK && f->C_Sign(s, data, 100, out, &ml) == CKR_OK) put_hex("cmac256.hex", out, ml);
    CK_MECHANISM des3 = {CKM_DES3_CBC_PAD, iv8, 8}, des = {CKM_DES_CBC_PAD, iv8, 8};
    n = sizeof out;
    if (p11host_crypt1(s, 1, &des3, t, data, 257, out, &n) == CKR_OK) p11host_put_file(outdir, "des3.bin", out, n);
    n = sizeof out;
    if (p11host_cryptn(s, 1, &des, d, data, 257, out, &n, 30) == CKR_OK) p11host_put_file(outdir, "des.bin", out, n);

    /* Wraps of a non-sensitive key under the public AES-128 key. */
    CK_OBJECT_HANDLE target = secret(s, CKK_GENERIC_SECRET, kv, 20);
    p11host_put_file(outdir, "target.bin", kv, 20);
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, alt8, 8}, kwp = {CKM_AES_KEY_WRAP_PAD, alt4, 4}, cbcpad = {CKM_AES_CBC_PAD, iv16, 16};
    unsigned char t16[16];
    memcpy(t16, kv, 16);
    CK_OBJECT_HANDLE target16 = secret(s, CKK_AES, t16, 16);
    p11host_put_file(outdir, "target16.bin", t16, 16);
    n = sizeof out;
    if (f->C_WrapKey(s, &kw, a1, target16, out, &n) == CKR_OK) p11host_put_file(outdir, "kw-alt.bin", out, n);
    n = sizeof out;
    if (f->C_WrapKey(s, &kwp, a1, target, out, &n) == CKR_OK) p11host_put_file(outdir, "kwp-alt.bin", out, n);
    n = sizeof out;
    if (f->C_WrapKey(s, &cbcpad, a1, target, out, &n) == CKR_OK) p11host_put_file(outdir, "cbcpad-wrap.bin", out, n);
}

/* Argument checks through the C ABI: each gets its own CK_RV and nothing crashes. */
static void arguments(CK_SESSION_HANDLE s) {
    unsigned char k[32] = {1}, buf[256], iv[16] = {0};
    CK_OBJECT_HANDLE aes = secret(s, CKK_AES, k, 16), chacha = secret(s, CKK_CHACHA20, k, 32);
    CK_ULONG n;
    CK_AES_CTR_PARAMS cp = ctr_params(iv, 128);
    struct { const char *what; CK_MECHANISM m; CK_OBJECT_HANDLE key; CK_RV want; } cases[] = {
        {"CKM_AES_CTR with a NULL parameter and its length", {CKM_AES_CTR, NULL, sizeof cp}, aes, CKR_ARGUMENTS_BAD},
        {"CKM_AES_CTR with no parameter", {CKM_AES_CTR, NULL, 0}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_AES_CTR with ulParameterLen one short", {CKM_AES_CTR, &cp, sizeof cp - 1}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_AES_CTS with a 15-byte IV", {CKM_AES_CTS, iv, 15}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_AES_ECB with a parameter", {CKM_AES_ECB, iv, 16}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_DES3_CBC with a 16-byte IV", {CKM_DES3_CBC, iv, 16}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_DES_CBC_PAD with a 7-byte IV", {CKM_DES_CBC_PAD, iv, 7}, aes, CKR_MECHANISM_PARAM_INVALID},
        {"CKM_CHACHA20_POLY1305 with a parameter of the wrong size", {CKM_CHACHA20_POLY1305, buf, 8}, chacha,
         CKR_MECHANISM_PARAM_INVALID},
        {"CKM_AES_ECB with a ChaCha20 key", {CKM_AES_ECB, NULL, 0}, chacha, CKR_KEY_TYPE_INCONSISTENT},
        {"CKM_DES3_ECB with an AES key", {CKM_DES3_ECB, NULL, 0}, aes, CKR_KEY_TYPE_INCONSISTENT},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CK_RV rv = f->C_EncryptInit(s, &cases[i].m, cases[i].key);
        if (rv != cases[i].want) { bad++; NOTE("%s: 0x%lx, expected 0x%lx", cases[i].what, rv, cases[i].want); }
        if (rv == CKR_OK) f->C_EncryptInit(s, NULL, 0);
    }
    CHECK("C_EncryptInit parameter checks (NULL, sizes, IV lengths, key types): 10 cases", bad == 0);
    CK_ULONG bits[] = {0, 129, (CK_ULONG)-1};
    bad = 0;
    for (int i = 0; i < 3; i++) {
        cp.ulCounterBits = bits[i];
        CK_MECHANISM m = {CKM_AES_CTR, &cp, sizeof cp};
        bad += f->C_EncryptInit(s, &m, aes) != CKR_MECHANISM_PARAM_INVALID;
    }
    CHECK("CK_AES_CTR_PARAMS ulCounterBits 0, 129 and ~0: CKR_MECHANISM_PARAM_INVALID", bad == 0);
    unsigned char nonce[24] = {0};
    CK_SALSA20_CHACHA20_POLY1305_PARAMS c8 = {nonce, 8, NULL, 0}, c24 = {nonce, 24, NULL, 0}, cnull = {NULL, 12, NULL, 0},
                                        aadnull = {nonce, 12, NULL, 5};
    CK_MECHANISM m8 = {CKM_CHACHA20_POLY1305, &c8, sizeof c8}, m24 = {CKM_CHACHA20_POLY1305, &c24, sizeof c24},
                 mnull = {CKM_CHACHA20_POLY1305, &cnull, sizeof cnull}, maad = {CKM_CHACHA20_POLY1305, &aadnull, sizeof aadnull};
    CHECK("ChaCha20-Poly1305 with 64- and 192-bit nonces, a NULL nonce, a NULL AAD with a length: CKR_MECHANISM_PARAM_INVALID",
          f->C_EncryptInit(s, &m8, chacha) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_EncryptInit(s, &m24, chacha) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_EncryptInit(s, &mnull, chacha) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_EncryptInit(s, &maad, chacha) == CKR_MECHANISM_PARAM_INVALID);
    CK_ULONG zero = 0, seventeen = 17;
    CK_MECHANISM g0 = {CKM_AES_CMAC_GENERAL, &zero, sizeof zero}, g17 = {CKM_AES_CMAC_GENERAL, &seventeen, sizeof seventeen},
                 gshort = {CKM_AES_CMAC_GENERAL, &seventeen, 4}, cmacp = {CKM_AES_CMAC, &zero, sizeof zero};
    CHECK("CMAC_GENERAL lengths 0 and 17, a 4-byte CK_MAC_GENERAL_PARAMS, CMAC with a parameter: CKR_MECHANISM_PARAM_INVALID",
          f->C_SignInit(s, &g0, aes) == CKR_MECHANISM_PARAM_INVALID && f->C_SignInit(s, &g17, aes) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_SignInit(s, &gshort, aes) == CKR_MECHANISM_PARAM_INVALID && f->C_SignInit(s, &cmacp, aes) == CKR_MECHANISM_PARAM_INVALID);
    unsigned char kwiv[8] = {1};
    CK_MECHANISM kw5 = {CKM_AES_KEY_WRAP, kwiv, 5}, kwp8 = {CKM_AES_KEY_WRAP_PAD, kwiv, 8};
    n = sizeof buf;
    CHECK("AES key wrap with a 5-byte IV, key wrap pad with an 8-byte IV: CKR_MECHANISM_PARAM_INVALID",
          f->C_WrapKey(s, &kw5, aes, chacha, buf, &n) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_WrapKey(s, &kwp8, aes, chacha, buf, &n) == CKR_MECHANISM_PARAM_INVALID);

    /* §5.2 for the new mechanisms: an error ends the operation, a length query keeps it. */
    cp.ulCounterBits = 8;
    cp.cb[15] = 0xFE;
    CK_MECHANISM ctr8 = {CKM_AES_CTR, &cp, sizeof cp};
    n = sizeof buf;
    CHECK("CTR with 8 counter bits at 0xFE: 33 bytes are CKR_DATA_LEN_RANGE, and the operation ends",
          f->C_EncryptInit(s, &ctr8, aes) == CKR_OK && f->C_Encrypt(s, buf, 33, buf, &n) == CKR_DATA_LEN_RANGE &&
          f->C_EncryptFinal(s, buf, &n) == CKR_OPERATION_NOT_INITIALIZED);
    n = sizeof buf;
    CHECK("... and 32 bytes go through", f->C_EncryptInit(s, &ctr8, aes) == CKR_OK && f->C_Encrypt(s, buf, 32, buf, &n) == CKR_OK && n == 32);
    CK_MECHANISM cts = {CKM_AES_CTS, iv, 16};
    n = 0;
    CHECK("CTS: a length query keeps the operation, a NULL length pointer ends it",
          f->C_EncryptInit(s, &cts, aes) == CKR_OK && f->C_Encrypt(s, buf, 20, NULL, &n) == CKR_OK && n == 20 &&
          f->C_Encrypt(s, buf, 20, buf, NULL) == CKR_ARGUMENTS_BAD && f->C_EncryptInit(s, &cts, aes) == CKR_OK);
    f->C_EncryptInit(s, NULL, 0);
    n = sizeof buf;
    CHECK("CTS with 15 bytes: CKR_DATA_LEN_RANGE", f->C_EncryptInit(s, &cts, aes) == CKR_OK &&
          f->C_Encrypt(s, buf, 15, buf, &n) == CKR_DATA_LEN_RANGE);
    /* Wrong parity or size on C_CreateObject. */
    unsigned char k3[24];
    p11host_unhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEE0123", k3);  /* one parity bit off */
    CK_KEY_TYPE t3 = CKK_DES3, tc = CKK_CHACHA20;
    CK_ATTRIBUTE bad3[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &t3, sizeof t3}, {CKA_VALUE, k3, 24}};
    CK_ATTRIBUTE badc[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &tc, sizeof tc}, {CKA_VALUE, k, 16}};
    CK_OBJECT_HANDLE h;
    CHECK("C_CreateObject: a 3DES key with a parity bit wrong and a 16-byte ChaCha20 key are CKR_ATTRIBUTE_VALUE_INVALID",
          f->C_CreateObject(s, bad3, 3, &h) == CKR_ATTRIBUTE_VALUE_INVALID && f->C_CreateObject(s, badc, 3, &h) == CKR_ATTRIBUTE_VALUE_INVALID);
    /* Generated DES keys: odd parity, and CKA_VALUE_LEN if given must be the size. */
    CK_MECHANISM g3 = {CKM_DES3_KEY_GEN, NULL, 0}, gd = {CKM_DES_KEY_GEN, NULL, 0}, gc = {CKM_CHACHA20_KEY_GEN, NULL, 0};
    CK_ATTRIBUTE readable[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    int parity = 1;
    for (int i = 0; i < 20; i++) {
        CK_OBJECT_HANDLE g = 0;
        unsigned char v[24];
        CK_ATTRIBUTE va = {CKA_VALUE, v, 24};
        if (f->C_GenerateKey(s, i % 2 ? &g3 : &gd, readable, 2, &g) != CKR_OK || f->C_GetAttributeValue(s, g, &va, 1) != CKR_OK ||
            va.ulValueLen != (CK_ULONG)(i % 2 ? 24 : 8)) { parity = 0; break; }
        for (CK_ULONG j = 0; j < va.ulValueLen; j++) parity &= __builtin_popcount(v[j]) & 1;
        f->C_DestroyObject(s, g);
    }
    CHECK("20 generated DES and 3DES keys all have odd parity and the right size", parity);
    CK_ULONG sixteen = 16, thirtytwo = 32;
    CK_ATTRIBUTE len16[] = {{CKA_VALUE_LEN, &sixteen, sizeof sixteen}}, len32[] = {{CKA_VALUE_LEN, &thirtytwo, sizeof thirtytwo}};
    CHECK("CKM_DES3_KEY_GEN with CKA_VALUE_LEN 16: CKR_TEMPLATE_INCONSISTENT; ChaCha20 with 32: a key",
          f->C_GenerateKey(s, &g3, len16, 1, &h) == CKR_TEMPLATE_INCONSISTENT && f->C_GenerateKey(s, &gc, len32, 1, &h) == CKR_OK);
}

/* The message API through the C ABI: argument order, lifetime, write-backs. */
static void message_api(CK_SESSION_HANDLE s) {
    unsigned char k[16], iv[12] = {0}, tag[16], buf[256], pt[64];
    rnd(k, 16); rnd(pt, 64);
    CK_OBJECT_HANDLE key = secret(s, CKK_AES, k, 16);
    CK_MECHANISM gm = {CKM_AES_GCM, NULL, 0}, cbc = {CKM_AES_CBC, buf, 16};
    CK_GCM_MESSAGE_PARAMS gp = {iv, 12, 0, CKG_NO_GENERATE, tag, 128};
    CK_ULONG n;
    const CK_RV W = CKR_SESSION_HANDLE_INVALID;
    int bad = 0;
#define O(call) do { CK_RV rv_ = (call); if (rv_ != W) { bad++; NOTE("%s: 0x%lx", #call, rv_); } } while (0)
    O(f->C_MessageEncryptInit(BAD, NULL, 1));
    O(f->C_EncryptMessage(BAD, NULL, 4, NULL, 4, NULL, 4, NULL, NULL));
    O(f->C_EncryptMessageBegin(BAD, NULL, 4, NULL, 4));
    O(f->C_EncryptMessageNext(BAD, NULL, 4, NULL, 4, NULL, NULL, 99));
    O(f->C_MessageEncryptFinal(BAD));
    O(f->C_MessageDecryptInit(BAD, NULL, 1));
    O(f->C_DecryptMessage(BAD, NULL, 4, NULL, 4, NULL, 4, NULL, NULL));
    O(f->C_DecryptMessageBegin(BAD, NULL, 4, NULL, 4));
    O(f->C_DecryptMessageNext(BAD, NULL, 4, NULL, 4, NULL, NULL, 99));
    O(f->C_MessageDecryptFinal(BAD));
#undef O
    CHECK("the 10 message functions answer CKR_SESSION_HANDLE_INVALID before argument errors", bad == 0);
    n = sizeof buf;
    CHECK("without C_MessageEncryptInit: CKR_OPERATION_NOT_INITIALIZED",
          f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, pt, 16, buf, &n) == CKR_OPERATION_NOT_INITIALIZED &&
          f->C_EncryptMessageBegin(s, &gp, sizeof gp, NULL, 0) == CKR_OPERATION_NOT_INITIALIZED &&
          f->C_MessageDecryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED);
    CHECK("C_MessageEncryptInit: CKM_AES_CBC is CKR_MECHANISM_INVALID, a 5-byte parameter CKR_MECHANISM_PARAM_INVALID, "
          "a NULL parameter with a length CKR_ARGUMENTS_BAD",
          f->C_MessageEncryptInit(s, &cbc, key) == CKR_MECHANISM_INVALID &&
          f->C_MessageEncryptInit(s, &(CK_MECHANISM){CKM_AES_GCM, buf, 5}, key) == CKR_MECHANISM_PARAM_INVALID &&
          f->C_MessageEncryptInit(s, &(CK_MECHANISM){CKM_AES_GCM, NULL, 5}, key) == CKR_ARGUMENTS_BAD);
    CHECK("C_MessageEncryptInit with a CK_GCM_MESSAGE_PARAMS (as the cryptoki crate passes) is accepted",
          f->C_MessageEncryptInit(s, &(CK_MECHANISM){CKM_AES_GCM, &gp, sizeof gp}, key) == CKR_OK &&
          f->C_MessageEncryptInit(s, &gm, key) == CKR_OPERATION_ACTIVE);
    CHECK("C_MessageEncryptInit with NULL ends the process", f->C_MessageEncryptInit(s, NULL, 0) == CKR_OK &&
          f->C_MessageEncryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED);
    f->C_MessageEncryptInit(s, &gm, key);
    /* Per-message parameter errors are CKR_ARGUMENTS_BAD (3.0 lists no MECHANISM_PARAM_INVALID here). */
    CK_GCM_MESSAGE_PARAMS nullIv = gp, nullTag = gp, badTag = gp, zeroIv = gp, fixedTooBig = gp;
    nullIv.pIv = NULL; nullTag.pTag = NULL; badTag.ulTagBits = 100; zeroIv.ulIvLen = 0; fixedTooBig.ulIvFixedBits = 97;
    struct { const char *what; void *p; CK_ULONG len; } pc[] = {
        {"NULL pParameter", NULL, sizeof gp}, {"ulParameterLen short", &gp, sizeof gp - 8}, {"NULL pIv", &nullIv, sizeof gp},
        {"NULL pTag", &nullTag, sizeof gp}, {"ulTagBits 100", &badTag, sizeof gp}, {"ulIvLen 0", &zeroIv, sizeof gp},
        {"ulIvFixedBits past the IV", &fixedTooBig, sizeof gp},
    };
    bad = 0;
    for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
        n = sizeof buf;
        CK_RV rv = f->C_EncryptMessage(s, pc[i].p, pc[i].len, NULL, 0, pt, 16, buf, &n);
        if (rv != CKR_ARGUMENTS_BAD) { bad++; NOTE("%s: 0x%lx", pc[i].what, rv); }
    }
    n = sizeof buf;
    bad += f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 4, pt, 16, buf, &n) != CKR_ARGUMENTS_BAD;
    bad += f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, NULL, 16, buf, &n) != CKR_ARGUMENTS_BAD;
    bad += f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, pt, 16, buf, NULL) != CKR_ARGUMENTS_BAD;
    CHECK("C_EncryptMessage argument errors (10 kinds): CKR_ARGUMENTS_BAD, and the process goes on", bad == 0 &&
          f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, pt, 16, buf, &n) == CKR_OK && n == 16);
    /* Length query and short buffer write nothing back and take no IV. */
    unsigned char civ[12] = {0xA1, 0xA2, 0xA3, 0xA4}, ctag[16];
    CK_GCM_MESSAGE_PARAMS cnt = {civ, 12, 32, CKG_GENERATE_COUNTER, ctag, 96};
    memset(ctag, 0xEE, 16);
    n = 0;
    int untouched = f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 20, NULL, &n) == CKR_OK && n == 20 &&
                    civ[11] == 0 && ctag[0] == 0xEE;
    n = 3;
    untouched &= f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 20, buf, &n) == CKR_BUFFER_TOO_SMALL && n == 20 &&
                 ctag[0] == 0xEE;
    CHECK("a length query and CKR_BUFFER_TOO_SMALL write no IV or tag back", untouched);
    unsigned char first[12], ref[64], rtag[16];
    n = sizeof buf;
    int gen = f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 20, buf, &n) == CKR_OK && n == 20;
    memcpy(first, civ, 12);
    n = sizeof buf;
    gen &= f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 20, buf, &n) == CKR_OK;
    CHECK("CKG_GENERATE_COUNTER: IVs A1A2A3A4|0...0 then |0...1 written to pIv, the 12-byte tag to pTag",
          gen && !memcmp(first, "\xA1\xA2\xA3\xA4\0\0\0\0\0\0\0\0", 12) && !memcmp(civ, "\xA1\xA2\xA3\xA4\0\0\0\0\0\0\0\1", 12) &&
          evp_aead("AES-128-GCM", k, civ, 12, NULL, 0, pt, 20, ref, rtag, 12) == 20 && !memcmp(ref, buf, 20) &&
          !memcmp(rtag, ctag, 12));
    /* Begin/Next: the IV at Begin, the tag at the last part; flags checked; errors end the message. */
    CK_ULONG a = sizeof buf, b = sizeof buf;
    int multi = f->C_EncryptMessageBegin(s, &cnt, sizeof cnt, (CK_BYTE_PTR)"hdr", 3) == CKR_OK && civ[11] == 2 &&
                f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 30, buf, &a, 0) == CKR_OK && a == 30 &&
                f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt + 30, 34, buf + 30, &b, CKF_END_OF_MESSAGE) == CKR_OK && b == 34;
    CHECK("C_EncryptMessageBegin/Next: the same as EVP under the IV from Begin",
          multi && evp_aead("AES-128-GCM", k, civ, 12, (unsigned char *)"hdr", 3, pt, 64, ref, rtag, 12) == 64 &&
          !memcmp(ref, buf, 64) && !memcmp(rtag, ctag, 12));
    n = sizeof buf;
    CHECK("C_EncryptMessageNext without Begin: CKR_OPERATION_NOT_INITIALIZED",
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, &n, 0) == CKR_OPERATION_NOT_INITIALIZED);
    f->C_EncryptMessageBegin(s, &cnt, sizeof cnt, NULL, 0);
    n = sizeof buf;
    CHECK("flags other than 0 and CKF_END_OF_MESSAGE: CKR_ARGUMENTS_BAD, and that message ends",
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, &n, 2) == CKR_ARGUMENTS_BAD &&
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, &n, 0) == CKR_OPERATION_NOT_INITIALIZED);
    f->C_EncryptMessageBegin(s, &cnt, sizeof cnt, NULL, 0);
    n = sizeof buf;
    CHECK("a NULL length pointer in C_EncryptMessageNext ends the message too",
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, NULL, 0) == CKR_ARGUMENTS_BAD &&
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, &n, 0) == CKR_OPERATION_NOT_INITIALIZED);
    n = sizeof buf;
    CHECK("... while the process goes on", f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 8, buf, &n) == CKR_OK);
    f->C_EncryptMessageBegin(s, &cnt, sizeof cnt, NULL, 0);
    n = sizeof buf;
    CHECK("C_EncryptMessage during a Begin/Next message: CKR_OPERATION_ACTIVE, and the message ends",
          f->C_EncryptMessage(s, &cnt, sizeof cnt, NULL, 0, pt, 8, buf, &n) == CKR_OPERATION_ACTIVE &&
          f->C_EncryptMessageNext(s, &cnt, sizeof cnt, pt, 4, buf, &n, 0) == CKR_OPERATION_NOT_INITIALIZED);
    CK_GCM_MESSAGE_PARAMS other = cnt;
    other.ulIvFixedBits = 64;
    n = sizeof buf;
    CHECK("another IV layout in the same process: CKR_ARGUMENTS_BAD (the counter could repeat an IV)",
          f->C_EncryptMessage(s, &other, sizeof other, NULL, 0, pt, 8, buf, &n) == CKR_ARGUMENTS_BAD);
    CK_GCM_MESSAGE_PARAMS rnd64 = cnt;
    rnd64.ivGenerator = CKG_GENERATE_RANDOM;
    n = sizeof buf;
    CHECK("CKG_GENERATE_RANDOM with 64 random bits: CKR_ARGUMENTS_BAD (SP 800-38D wants 96)",
          f->C_MessageEncryptFinal(s) == CKR_OK && f->C_MessageEncryptInit(s, &gm, key) == CKR_OK &&
          f->C_EncryptMessage(s, &rnd64, sizeof rnd64, NULL, 0, pt, 8, buf, &n) == CKR_ARGUMENTS_BAD);
    f->C_MessageEncryptFinal(s);

    /* Decryption: the tag from pTag; bad tags and lengths. */
    unsigned char div[12], dtag[16], ct[64];
    rnd(div, 12);
    evp_aead("AES-128-GCM", k, div, 12, NULL, 0, pt, 64, ct, dtag, 16);
    CK_GCM_MESSAGE_PARAMS dp = {div, 12, 0, CKG_NO_GENERATE, dtag, 128};
    n = 0;
    CHECK("C_DecryptMessage: length query, then the plaintext",
          f->C_MessageDecryptInit(s, &gm, key) == CKR_OK && f->C_DecryptMessage(s, &dp, sizeof dp, NULL, 0, ct, 64, NULL, &n) == CKR_OK &&
          n == 64 && f->C_DecryptMessage(s, &dp, sizeof dp, NULL, 0, ct, 64, buf, &n) == CKR_OK && !memcmp(buf, pt, 64));
    dtag[3] ^= 1;
    n = sizeof buf;
    CHECK("a wrong tag: CKR_ENCRYPTED_DATA_INVALID, and the process goes on",
          f->C_DecryptMessage(s, &dp, sizeof dp, NULL, 0, ct, 64, buf, &n) == CKR_ENCRYPTED_DATA_INVALID &&
          (dtag[3] ^= 1, f->C_DecryptMessage(s, &dp, sizeof dp, NULL, 0, ct, 64, buf, &n) == CKR_OK));
    a = sizeof buf; b = 10; n = sizeof buf;
    CHECK("C_DecryptMessageNext keeps the plaintext until the tag checks; a short final buffer keeps the message",
          f->C_DecryptMessageBegin(s, &dp, sizeof dp, NULL, 0) == CKR_OK &&
          f->C_DecryptMessageNext(s, &dp, sizeof dp, ct, 50, buf, &a, 0) == CKR_OK && a == 0 &&
          f->C_DecryptMessageNext(s, &dp, sizeof dp, ct + 50, 14, buf, &b, CKF_END_OF_MESSAGE) == CKR_BUFFER_TOO_SMALL && b == 64 &&
          f->C_DecryptMessageNext(s, &dp, sizeof dp, ct + 50, 14, buf, &n, CKF_END_OF_MESSAGE) == CKR_OK && n == 64 &&
          !memcmp(buf, pt, 64));
    CHECK("C_MessageDecryptFinal ends the process", f->C_MessageDecryptFinal(s) == CKR_OK &&
          f->C_MessageDecryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED);
    /* C_SessionCancel with CKF_MESSAGE_ENCRYPT / _DECRYPT ends a process (and a message in it). */
    f->C_MessageEncryptInit(s, &gm, key);
    f->C_MessageDecryptInit(s, &gm, key);
    f->C_EncryptMessageBegin(s, &dp, sizeof dp, NULL, 0);
    unsigned char st[128];
    CK_ULONG stn = sizeof st;
    CHECK("C_GetOperationState with a message process active: CKR_STATE_UNSAVEABLE",
          f->C_GetOperationState(s, st, &stn) == CKR_STATE_UNSAVEABLE);
    CHECK("C_SessionCancel(CKF_MESSAGE_ENCRYPT) ends the encrypting process and its message, not the decrypting one",
          f->C_SessionCancel(s, CKF_MESSAGE_ENCRYPT) == CKR_OK && f->C_MessageEncryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED &&
          f->C_SessionCancel(s, CKF_MESSAGE_DECRYPT) == CKR_OK && f->C_MessageDecryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED);
    /* Message signing stays unsupported, after the session check. */
    CHECK("C_MessageSignInit / C_MessageVerifyInit: CKR_FUNCTION_NOT_SUPPORTED",
          f->C_MessageSignInit(s, &gm, key) == CKR_FUNCTION_NOT_SUPPORTED &&
          f->C_MessageVerifyInit(s, &gm, key) == CKR_FUNCTION_NOT_SUPPORTED);
    /* ChaCha20-Poly1305 message parameters. */
    unsigned char ck[32], cn[12], ctg[16];
    rnd(ck, 32); rnd(cn, 12);
    CK_OBJECT_HANDLE chacha = secret(s, CKK_CHACHA20, ck, 32);
    CK_MECHANISM cm = {CKM_CHACHA20_POLY1305, NULL, 0};
    CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS c8 = {cn, 8, ctg}, cnull = {cn, 12, NULL}, cok = {cn, 12, ctg};
    n = sizeof buf;
    CHECK("ChaCha20-Poly1305 messages: an 8-byte nonce, a NULL pTag, a GCM-sized parameter are CKR_ARGUMENTS_BAD; "
          "the output matches EVP",
          f->C_MessageEncryptInit(s, &cm, chacha) == CKR_OK &&
          f->C_EncryptMessage(s, &c8, sizeof c8, NULL, 0, pt, 8, buf, &n) == CKR_ARGUMENTS_BAD &&
          f->C_EncryptMessage(s, &cnull, sizeof cnull, NULL, 0, pt, 8, buf, &n) == CKR_ARGUMENTS_BAD &&
          f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, pt, 8, buf, &n) == CKR_ARGUMENTS_BAD &&
          f->C_EncryptMessage(s, &cok, sizeof cok, (CK_BYTE_PTR)"a", 1, pt, 40, buf, &n) == CKR_OK && n == 40 &&
          evp_aead("ChaCha20-Poly1305", ck, cn, 12, (unsigned char *)"a", 1, pt, 40, ref, rtag, 16) == 40 &&
          !memcmp(ref, buf, 40) && !memcmp(rtag, ctg, 16) && f->C_MessageEncryptFinal(s) == CKR_OK);
    CHECK("a GCM process needs an AES key, a ChaCha20 one a ChaCha20 key",
          f->C_MessageEncryptInit(s, &gm, chacha) == CKR_KEY_TYPE_INCONSISTENT &&
          f->C_MessageEncryptInit(s, &cm, key) == CKR_KEY_TYPE_INCONSISTENT);
}

/* The copy-free paths (Runtime.cipherDirect, cipherUpdateDirect, the
 * direct C_EncryptMessage): in place, partly overlapping (the copying
 * path then), length queries, short buffers, NULL input. Each result is
 * checked against the same call with separate buffers. */
static void direct_paths(CK_SESSION_HANDLE s) {
    unsigned char k[32], iv[16], pt[200], ref[260], buf[300], tag[16], tag2[16];
    rnd(k, 32); rnd(iv, 16); rnd(pt, sizeof pt);
    CK_OBJECT_HANDLE key = secret(s, CKK_AES, k, 32);
    CK_AES_CTR_PARAMS cp = ctr_params(iv, 128);
    CK_MECHANISM ctr = {CKM_AES_CTR, &cp, sizeof cp};
    CK_GCM_PARAMS gp = {iv, 12, 96, NULL, 0, 128};
    CK_MECHANISM gcm = {CKM_AES_GCM, &gp, sizeof gp};
    CK_ULONG n = sizeof ref, m;
    p11host_crypt1(s, 1, &ctr, key, pt, 150, ref, &n);
    memcpy(buf, pt, 150);
    m = sizeof buf;
    CHECK("CTR C_Encrypt in place (output = input) equals separate buffers",
          f->C_EncryptInit(s, &ctr, key) == CKR_OK && f->C_Encrypt(s, buf, 150, buf, &m) == CKR_OK && m == 150 &&
          !memcmp(buf, ref, 150));
    memcpy(buf, pt, 150);
    m = sizeof buf - 3;
    CHECK("CTR C_Encrypt with the output 3 bytes into the input (the copying path) equals separate buffers",
          f->C_EncryptInit(s, &ctr, key) == CKR_OK && f->C_Encrypt(s, buf, 150, buf + 3, &m) == CKR_OK && m == 150 &&
          !memcmp(buf + 3, ref, 150));
    memcpy(buf + 3, pt, 150);
    m = sizeof buf;
    CHECK("... and 3 bytes before it",
          f->C_EncryptInit(s, &ctr, key) == CKR_OK && f->C_Encrypt(s, buf + 3, 150, buf, &m) == CKR_OK && m == 150 &&
          !memcmp(buf, ref, 150));
    m = 10;
    CK_ULONG q = 0;
    CHECK("CTR C_Encrypt: a short buffer is CKR_BUFFER_TOO_SMALL with the size, a length query too, both keep it",
          f->C_EncryptInit(s, &ctr, key) == CKR_OK && f->C_Encrypt(s, pt, 150, buf, &m) == CKR_BUFFER_TOO_SMALL && m == 150 &&
          f->C_Encrypt(s, pt, 150, NULL, &q) == CKR_OK && q == 150 && (m = sizeof buf, f->C_Encrypt(s, pt, 150, buf, &m)) == CKR_OK &&
          !memcmp(buf, ref, 150));
    m = sizeof buf;
    CHECK("CTR C_Encrypt with a NULL input and a length: CKR_ARGUMENTS_BAD, and the operation ends",
          f->C_EncryptInit(s, &ctr, key) == CKR_OK && f->C_Encrypt(s, NULL, 16, buf, &m) == CKR_ARGUMENTS_BAD &&
          f->C_Encrypt(s, pt, 16, buf, &m) == CKR_OPERATION_NOT_INITIALIZED);
    /* C_EncryptUpdate (copy-free for CTR): parts in place equal one call. */
    memcpy(buf, pt, 150);
    int ok = f->C_EncryptInit(s, &ctr, key) == CKR_OK;
    for (int i = 0; ok && i < 150; i += 37) {
        CK_ULONG part = 150 - i < 37 ? 150 - i : 37, got = part - 1;
        ok = f->C_EncryptUpdate(s, buf + i, part, buf + i, &got) == CKR_BUFFER_TOO_SMALL && got == part &&
             f->C_EncryptUpdate(s, buf + i, part, buf + i, &got) == CKR_OK && got == part;
    }
    m = 0;
    CHECK("CTR C_EncryptUpdate in place in 37-byte parts, each after a short buffer, equals C_Encrypt",
          ok && f->C_EncryptFinal(s, NULL, &m) == CKR_OK && m == 0 && f->C_EncryptFinal(s, buf, &m) == CKR_OK &&
          !memcmp(buf, ref, 150));
    /* GCM single-part: ciphertext and tag in place. */
    n = sizeof ref;
    p11host_crypt1(s, 1, &gcm, key, pt, 100, ref, &n);
    memcpy(buf, pt, 100);
    m = sizeof buf;
    CHECK("GCM C_Encrypt in place: ciphertext || tag as with separate buffers",
          n == 116 && f->C_EncryptInit(s, &gcm, key) == CKR_OK && f->C_Encrypt(s, buf, 100, buf, &m) == CKR_OK && m == 116 &&
          !memcmp(buf, ref, 116));
    memcpy(buf + 5, pt, 100);
    m = sizeof buf;
    CHECK("GCM C_Encrypt with overlapping buffers equals separate buffers",
          f->C_EncryptInit(s, &gcm, key) == CKR_OK && f->C_Encrypt(s, buf + 5, 100, buf, &m) == CKR_OK && m == 116 &&
          !memcmp(buf, ref, 116));
    m = 115;
    CHECK("GCM C_Encrypt with a buffer one byte short: CKR_BUFFER_TOO_SMALL, 116",
          f->C_EncryptInit(s, &gcm, key) == CKR_OK && f->C_Encrypt(s, pt, 100, buf, &m) == CKR_BUFFER_TOO_SMALL && m == 116 &&
          f->C_EncryptInit(s, NULL, 0) == CKR_OK);
    /* C_EncryptMessage in place and overlapping. */
    CK_MECHANISM gm = {CKM_AES_GCM, NULL, 0};
    CK_GCM_MESSAGE_PARAMS mp = {iv, 12, 0, CKG_NO_GENERATE, tag, 128}, mp2 = {iv, 12, 0, CKG_NO_GENERATE, tag2, 128};
    n = sizeof ref;
    f->C_MessageEncryptInit(s, NULL, 0);  /* message_api left one running */
    ok = f->C_MessageEncryptInit(s, &gm, key) == CKR_OK &&
         f->C_EncryptMessage(s, &mp, sizeof mp, (CK_BYTE_PTR)"aad", 3, pt, 100, ref, &n) == CKR_OK && n == 100;
    memcpy(buf, pt, 100);
    m = sizeof buf;
    CHECK("C_EncryptMessage in place equals separate buffers (ciphertext and tag)",
          ok && f->C_EncryptMessage(s, &mp2, sizeof mp2, (CK_BYTE_PTR)"aad", 3, buf, 100, buf, &m) == CKR_OK && m == 100 &&
          !memcmp(buf, ref, 100) && !memcmp(tag, tag2, 16));
    memcpy(buf + 7, pt, 100);
    memset(tag2, 0, 16);
    m = sizeof buf;
    CHECK("C_EncryptMessage with overlapping buffers equals separate buffers",
          f->C_EncryptMessage(s, &mp2, sizeof mp2, (CK_BYTE_PTR)"aad", 3, buf + 7, 100, buf, &m) == CKR_OK && m == 100 &&
          !memcmp(buf, ref, 100) && !memcmp(tag, tag2, 16));
    /* The process stays active for main's logout check. */
}

/* Rule 6: the CBC padding oracle of Bardou et al. (CRYPTO 2012) run to its
 * end. W can wrap and unwrap; S is sensitive and extractable, its value
 * known to the test. If C_WrapKey(W, CBC_PAD, S) works, C_UnwrapKey(W,
 * CBC_PAD with a chosen IV, first block) says whether the padding is valid,
 * which decrypts that block byte by byte. */
static void padding_oracle(CK_SESSION_HANDLE s) {
    unsigned char secretv[16] = "0123456789abcdef", iv[16] = {0}, blob[64], d[16], x[16], got[16];
    CK_KEY_TYPE aes = CKK_AES, gen = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE st[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes, sizeof aes},
                         {CKA_VALUE, secretv, 16}, {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1},
                         {CKA_WRAP, &no, 1}};
    CK_OBJECT_HANDLE S = 0, W = gen_aes(s, no, no, yes, yes, no), wrapOnly = gen_aes(s, no, no, yes, no, no);
    f->C_CreateObject(s, st, 6, &S);
    CK_MECHANISM cbcpad = {CKM_AES_CBC_PAD, iv, 16};
    CK_ULONG n = sizeof blob;
    CK_RV rv = f->C_WrapKey(s, &cbcpad, W, S, blob, &n);
    long queries = 0;
    int leaked = 0;
    if (rv == CKR_OK) {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &gen, sizeof gen},
                            {CKA_SENSITIVE, &yes, 1}};
        int ok = 1;
        for (int pos = 15; pos >= 0 && ok; pos--) {
            int padv = 16 - pos, found = 0;
            for (int j = pos + 1; j < 16; j++) x[j] = d[j] ^ (unsigned char)padv;
            for (int g = 0; g < 256 && !found; g++) {
                x[pos] = (unsigned char)g;
                /* The block's padding is checked with x as its IV; for the
                 * first byte (a whole block of padding, which leaves no key)
                 * x goes in front as a ciphertext block instead, so the
                 * result is a 16-byte key. */
                unsigned char two[32], zero[16] = {0};
                memcpy(two, x, 16);
                memcpy(two + 16, blob, 16);
                CK_MECHANISM probe = {CKM_AES_CBC_PAD, pos ? x : zero, 16};
                CK_OBJECT_HANDLE h = 0;
                queries++;
                if (f->C_UnwrapKey(s, &probe, W, pos ? blob : two, pos ? 16 : 32, t, 3, &h) != CKR_OK) continue;
                f->C_DestroyObject(s, h);
                if (pos == 15) {  /* rule out a longer valid pad by changing the byte before */
                    x[14] ^= 1;
                    CK_MECHANISM again = {CKM_AES_CBC_PAD, x, 16};
                    int still = f->C_UnwrapKey(s, &again, W, blob, 16, t, 3, &h) == CKR_OK;
                    if (still) f->C_DestroyObject(s, h);
                    x[14] ^= 1;
                    if (!still) continue;
                }
                d[pos] = (unsigned char)(g ^ padv);
                found = 1;
            }
            ok = found;
        }
        for (int i = 0; i < 16; i++) got[i] = d[i] ^ iv[i];
        leaked = ok && !memcmp(got, secretv, 16);
    }
    if (leaked) NOTE("note: the padding oracle recovered the sensitive key's value in %ld C_UnwrapKey calls", queries);
    CHECK("padding-oracle attack fails: C_WrapKey(CBC_PAD) of a sensitive key under a key that can unwrap is CKR_KEY_NOT_WRAPPABLE",
          rv == CKR_KEY_NOT_WRAPPABLE && !leaked);
    n = sizeof blob;
    CHECK("a wrap-only key (no oracle) wraps it with CBC_PAD", f->C_WrapKey(s, &cbcpad, wrapOnly, S, blob, &n) == CKR_OK && n == 32);
}

/* C_WrapKey / C_UnwrapKey with the block modes (BlockWrap.swift): pkcs11test's
 * CKM_DES3_ECB flow (WrapUnwrap, WrapInvalid, TookanAttackA1), the spec's zero
 * padding, and rules 6 and 9. The blob splitting that rule 6 stops is run as
 * far as a test can: with it off, the first block of a sensitive 3DES key's
 * ECB blob, unwrapped three times over as a 3DES key, is single DES under the
 * key's first third (56 bits, found by exhaustive search off the token). */
static CK_OBJECT_HANDLE gen_des3(CK_SESSION_HANDLE s, CK_BBOOL dec, CK_BBOOL wrap, CK_BBOOL unwrap, CK_BBOOL sensitive) {
    CK_ATTRIBUTE t[] = {{CKA_ENCRYPT, &no, 1}, {CKA_DECRYPT, &dec, 1}, {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &unwrap, 1},
                        {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_MECHANISM m = {CKM_DES3_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, 6, &h) == CKR_OK ? h : 0;
}

static void block_wrap(CK_SESSION_HANDLE s, CK_SLOT_ID slot) {
    unsigned char k3[24], out[64], back[64], t16[16], t20[20];
    p11host_unhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123", k3);
    rnd(t16, 16); rnd(t20, 20);
    CK_MECHANISM_INFO mi;
    CHECK("C_GetMechanismInfo: CKM_DES3_ECB, CKM_DES3_CBC_PAD and CKM_AES_ECB have CKF_WRAP and CKF_UNWRAP",
          f->C_GetMechanismInfo(slot, CKM_DES3_ECB, &mi) == CKR_OK && (mi.flags & (CKF_WRAP | CKF_UNWRAP)) == (CKF_WRAP | CKF_UNWRAP) &&
          f->C_GetMechanismInfo(slot, CKM_DES3_CBC_PAD, &mi) == CKR_OK && (mi.flags & CKF_WRAP) &&
          f->C_GetMechanismInfo(slot, CKM_AES_ECB, &mi) == CKR_OK && (mi.flags & CKF_UNWRAP) &&
          f->C_GetMechanismInfo(slot, CKM_DES_ECB, &mi) == CKR_OK && !(mi.flags & CKF_WRAP));
    CK_OBJECT_HANDLE kek = secret(s, CKK_DES3, k3, 24), a16 = secret(s, CKK_AES, t16, 16), g20 = secret(s, CKK_GENERIC_SECRET, t20, 20);
    p11host_put_file(outdir, "block-target16.bin", t16, 16);
    p11host_put_file(outdir, "block-target20.bin", t20, 20);
    CK_MECHANISM ecb = {CKM_DES3_ECB, NULL, 0}, cbc = {CKM_DES3_CBC, k3, 8};
    CK_ULONG n = 0;
    CK_RV rv = f->C_WrapKey(s, &ecb, kek, a16, NULL, &n);
    CHECK("C_WrapKey CKM_DES3_ECB length query: 16", rv == CKR_OK && n == 16);
    n = sizeof out;
    if (f->C_WrapKey(s, &ecb, kek, a16, out, &n) == CKR_OK) p11host_put_file(outdir, "des3-ecb-wrap.bin", out, n);
    CK_ULONG bn = sizeof back;
    CHECK("C_WrapKey CKM_DES3_ECB = C_Encrypt CKM_DES3_ECB of the value under the same key",
          n == 16 && p11host_crypt1(s, 1, &ecb, kek, t16, 16, back, &bn) == CKR_OK && bn == 16 && !memcmp(out, back, 16));
    n = sizeof out;
    if (f->C_WrapKey(s, &cbc, kek, g20, out, &n) == CKR_OK) p11host_put_file(outdir, "des3-cbc-wrap.bin", out, n);
    CHECK("C_WrapKey CKM_DES3_CBC of a 20-byte key: 24 bytes (zero padding)", n == 24);
    CK_KEY_TYPE gen = CKK_GENERIC_SECRET;
    CK_ULONG twenty = 20, eight = 8;
    CK_ATTRIBUTE ut[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &gen, sizeof gen},
                         {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_VALUE_LEN, &twenty, sizeof twenty}};
    CK_OBJECT_HANDLE h = 0;
    unsigned char v[64];
    CK_ATTRIBUTE get = {CKA_VALUE, v, sizeof v};
    CHECK("C_UnwrapKey CKM_DES3_CBC with CKA_VALUE_LEN 20 gives the key back",
          f->C_UnwrapKey(s, &cbc, kek, out, 24, ut, 5, &h) == CKR_OK &&
          f->C_GetAttributeValue(s, h, &get, 1) == CKR_OK && get.ulValueLen == 20 && !memcmp(v, t20, 20));
    ut[4].pValue = &eight;
    CHECK("C_UnwrapKey CKM_DES3_CBC cutting more than the padding (CKA_VALUE_LEN 8 of 24): CKR_WRAPPED_KEY_INVALID",
          f->C_UnwrapKey(s, &cbc, kek, out, 24, ut, 5, &h) == CKR_WRAPPED_KEY_INVALID);
    CHECK("C_UnwrapKey CKM_DES3_ECB of 20 bytes: CKR_WRAPPED_KEY_LEN_RANGE",
          f->C_UnwrapKey(s, &ecb, kek, out, 20, ut, 4, &h) == CKR_WRAPPED_KEY_LEN_RANGE);

    /* pkcs11test ROUserSessionTest.WrapUnwrap: a readable 3DES key under a 3DES key with WRAP, UNWRAP and DECRYPT. */
    CK_OBJECT_HANDLE k1 = gen_des3(s, no, no, no, no), k2 = gen_des3(s, yes, yes, yes, yes);
    n = sizeof out;
    bn = sizeof back;
    unsigned char k1v[24];
    CK_ATTRIBUTE k1get = {CKA_VALUE, k1v, 24};
    CHECK("pkcs11test's flow: C_WrapKey CKM_DES3_ECB of a readable 3DES key; C_Decrypt with the wrapping key gives its value",
          f->C_WrapKey(s, &ecb, k2, k1, out, &n) == CKR_OK && n == 24 && p11host_crypt1(s, 0, &ecb, k2, out, n, back, &bn) == CKR_OK &&
          f->C_GetAttributeValue(s, k1, &k1get, 1) == CKR_OK && bn == 24 && !memcmp(back, k1v, 24));
    CK_KEY_TYPE des3 = CKK_DES3;
    CK_ATTRIBUTE k3t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &des3, sizeof des3},
                          {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CHECK("pkcs11test's flow: C_UnwrapKey CKM_DES3_ECB of that blob as a 3DES key",
          f->C_UnwrapKey(s, &ecb, k2, out, n, k3t, 5, &h) == CKR_OK);
    /* TookanAttackA1: a sensitive key under a key with WRAP and DECRYPT (rule 1). */
    CK_OBJECT_HANDLE victim = gen_des3(s, no, no, no, yes), wd = gen_des3(s, yes, yes, no, yes);
    n = sizeof out;
    CHECK("Tookan A1 with CKM_DES3_ECB: a sensitive key under a key that can decrypt is CKR_KEY_NOT_WRAPPABLE",
          f->C_WrapKey(s, &ecb, wd, victim, out, &n) == CKR_KEY_NOT_WRAPPABLE);

    /* Rule 6: the split. The victim's value is known to the test (created by value, sensitive). */
    CK_ATTRIBUTE vt[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &des3, sizeof des3},
                         {CKA_VALUE, k3, 24}, {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_WRAP, &no, 1}};
    CK_OBJECT_HANDLE S = 0, W = gen_des3(s, no, yes, yes, yes), wrapOnly = gen_des3(s, no, yes, no, yes);
    f->C_CreateObject(s, vt, 6, &S);
    n = sizeof out;
    rv = f->C_WrapKey(s, &ecb, W, S, out, &n);
    int split = 0;
    if (rv == CKR_OK) {
        unsigned char three[24], zero[8] = {0}, k111[24], e1[8], e2[8];
        for (int i = 0; i < 3; i++) memcpy(three + 8 * i, out, 8);
        CK_ATTRIBUTE st[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &des3, sizeof des3},
                             {CKA_ENCRYPT, &yes, 1}};
        CK_ULONG en = 8;
        for (int i = 0; i < 3; i++) memcpy(k111 + 8 * i, k3, 8);
        split = f->C_UnwrapKey(s, &ecb, W, three, 24, st, 3, &h) == CKR_OK && p11host_crypt1(s, 1, &ecb, h, zero, 8, e1, &en) == CKR_OK &&
                evp("DES-EDE3-ECB", k111, NULL, 1, 0, zero, 8, e2) == 8 && !memcmp(e1, e2, 8);
    }
    if (split) NOTE("note: the ECB blob split: a key made of its first block is single DES under the victim's first 8 bytes");
    CHECK("blob splitting fails: C_WrapKey(CKM_DES3_ECB) of a sensitive key under a key that can unwrap is CKR_KEY_NOT_WRAPPABLE",
          rv == CKR_KEY_NOT_WRAPPABLE && !split);
    n = sizeof out;
    CHECK("a wrap-only 3DES key wraps the sensitive 3DES key with CKM_DES3_ECB", f->C_WrapKey(s, &ecb, wrapOnly, S, out, &n) == CKR_OK && n == 24);
    /* Rule 9: a sensitive AES-256 key is never wrapped under 3DES (112 bits). */
    CK_ULONG l32 = 32;
    CK_ATTRIBUTE at[] = {{CKA_VALUE_LEN, &l32, sizeof l32}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_WRAP, &no, 1}};
    CK_MECHANISM ag = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE aesVictim = 0;
    f->C_GenerateKey(s, &ag, at, 3, &aesVictim);
    n = sizeof out;
    CHECK("a sensitive AES-256 key under a wrap-only 3DES key: CKR_KEY_NOT_WRAPPABLE (weaker wrapping key)",
          aesVictim && f->C_WrapKey(s, &ecb, wrapOnly, aesVictim, out, &n) == CKR_KEY_NOT_WRAPPABLE);
}

/* Rule 7: GCM IV reuse run to its end. A key the caller knows and the
 * victim wrapped under one GCM IV: blob1 ^ blob2 ^ known = victim. */
static void gcm_iv_reuse(CK_SESSION_HANDLE s) {
    unsigned char secretv[16] = "fedcba9876543210", known[16] = "known-key-value!", iv[12] = {7}, b1[64], b2[64], got[16];
    CK_KEY_TYPE aes = CKK_AES;
    CK_ATTRIBUTE st[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes, sizeof aes},
                         {CKA_VALUE, secretv, 16}, {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1},
                         {CKA_WRAP, &no, 1}};
    CK_OBJECT_HANDLE S = 0, W = gen_aes(s, no, no, yes, no, no), K = secret(s, CKK_AES, known, 16);
    f->C_CreateObject(s, st, 6, &S);
    CK_GCM_PARAMS g = {iv, 12, 96, NULL, 0, 128};
    CK_MECHANISM m = {CKM_AES_GCM, &g, sizeof g};
    CK_ULONG n1 = sizeof b1, n2 = sizeof b2;
    CK_RV r1 = f->C_WrapKey(s, &m, W, K, b1, &n1), r2 = f->C_WrapKey(s, &m, W, S, b2, &n2);
    int leaked = 0;
    if (r1 == CKR_OK && r2 == CKR_OK) {
        for (int i = 0; i < 16; i++) got[i] = b1[i] ^ b2[i] ^ known[i];
        leaked = !memcmp(got, secretv, 16);
    }
    if (leaked) NOTE("note: GCM IV reuse recovered the sensitive key's value");
    CHECK("GCM IV-reuse attack fails: a known key wraps with GCM, the sensitive one is CKR_KEY_NOT_WRAPPABLE",
          r1 == CKR_OK && n1 == 32 && r2 == CKR_KEY_NOT_WRAPPABLE && !leaked);
}

int main(int argc, char **argv) {
    const char *so_pin, *pin;
    if (!p11host_args(argc, 2, "symmetric MODULE OUTDIR", &so_pin, &pin)) return 1;
    outdir = argv[2];
    int rounds = getenv("SYMMETRIC_ROUNDS") ? atoi(getenv("SYMMETRIC_ROUNDS")) : 60;
    if (!(f = harness_load(argv[1]))) return 1;

    CHECK("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    CK_SLOT_ID slot = p11host_make_token("symmetric", so_pin, pin);
    CHECK("a token made with C_InitToken and C_InitPIN", slot != 0);
    CK_SESSION_HANDLE s;
    CHECK("C_OpenSession and C_Login", p11host_user_session(slot, pin, &s) == CKR_OK);
    catalog(slot);
    published(s);
    printf("  %d published vectors checked through the module\n", vectors);
    against_evp(s, rounds);
    for_cli(s);
    arguments(s);
    message_api(s);
    direct_paths(s);
    padding_oracle(s);
    gcm_iv_reuse(s);
    block_wrap(s, slot);
    unsigned char buf[16];
    CK_ULONG n = sizeof buf;
    CK_GCM_MESSAGE_PARAMS gp = {buf, 12, 0, CKG_NO_GENERATE, buf, 128};
    /* direct_paths left a message process running; logout must end it (it holds key material). */
    CHECK("C_Logout ends an active message process",
          f->C_Logout(s) == CKR_OK && f->C_EncryptMessage(s, &gp, sizeof gp, NULL, 0, buf, 1, buf, &n) == CKR_OPERATION_NOT_INITIALIZED);
    /* Single DES ran above through keyshare's own library context: the
     * host's default context must still have no legacy provider and no DES. */
    EVP_CIPHER *des = EVP_CIPHER_fetch(NULL, "DES-ECB", NULL);
    CHECK("after single DES in the module, this process's default OpenSSL context has no legacy provider and no DES-ECB",
          des == NULL && !OSSL_PROVIDER_available(NULL, "legacy"));
    EVP_CIPHER_free(des);
    f->C_CloseSession(s);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    return p11host_report();
}
