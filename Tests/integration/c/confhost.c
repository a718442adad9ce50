/* A host with an OpenSSL configuration of its own (issue 29): it links the system libcrypto, as
 * openssl s_client does, and with `host` as its second argument loads OPENSSL_CONF first
 * (OPENSSL_init_crypto with OPENSSL_INIT_LOAD_CONFIG), as s_client does; with `quiet` it never
 * touches OpenSSL itself. Then, through the module (in-process or through the agent, as the
 * environment says), it makes a token and runs digests, signatures, a cipher, random bytes and
 * an RSA key, each checked against the known answer or its own verification, and finally checks
 * that the host's OpenSSL error queue is empty. 92-openssl-isolation.sh reads the marker
 * provider's log and LD_DEBUG's to tell whether the module loaded anything the configuration
 * names. PINs from KS_TEST_SO_PIN / KS_TEST_PIN. */
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include "p11host.h"

static int sign_verify(CK_SESSION_HANDLE s, CK_MECHANISM *m, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub) {
    unsigned char data[] = "keyshare issue 29", sig[1024];
    CK_ULONG n = sizeof sig;
    return f->C_SignInit(s, m, priv) == CKR_OK && f->C_Sign(s, data, sizeof data, sig, &n) == CKR_OK
        && f->C_VerifyInit(s, m, pub) == CKR_OK && f->C_Verify(s, data, sizeof data, sig, n) == CKR_OK
        && (sig[0] ^= 1, f->C_VerifyInit(s, m, pub) == CKR_OK && f->C_Verify(s, data, sizeof data, sig, n) == CKR_SIGNATURE_INVALID);
}

int main(int argc, char **argv) {
    const char *so, *pin;
    if (!p11host_args(argc, 2, "confhost MODULE host|quiet", &so, &pin)) return 2;
    int host = strcmp(argv[2], "host") == 0;
    if (host) {
        CHECK("the host loads its OPENSSL_CONF", OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL) == 1);
        /* The configuration is in force in the host: its default context prefers the marker's SHA-256. */
        EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
        const char *who = md ? OSSL_PROVIDER_get0_name(EVP_MD_get0_provider(md)) : "none";
        CHECKF(md && strcmp(who, "marker") == 0, "in the host, SHA-256 comes from the configured provider (%s)", who);
        EVP_MD_free(md);
        ERR_clear_error();
    }
    if (!(f = harness_load(argv[1])) || !p11host_initialize()) return 1;
    CK_SLOT_ID slot = p11host_make_token("isolation", so, pin);
    CHECK("a token is made (C_InitToken, C_InitPIN: the PIN's key derivation)", slot != 0);
    CK_SESSION_HANDLE s = 0;
    CHECK("a user session", slot && p11host_user_session(slot, pin, &s) == CKR_OK);

    static const unsigned char abc_sha256[32] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
        0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    CK_MECHANISM sha = {CKM_SHA256, NULL, 0};
    unsigned char d[32];
    CK_ULONG dn = sizeof d;
    CHECK("C_Digest(CKM_SHA256, \"abc\") is FIPS 180-4's answer",
          f->C_DigestInit(s, &sha) == CKR_OK && f->C_Digest(s, (CK_BYTE_PTR) "abc", 3, d, &dn) == CKR_OK && dn == 32
              && memcmp(d, abc_sha256, 32) == 0);

    CK_BYTE p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE ecpub[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE ecpriv[] = {{CKA_SIGN, &yes, 1}};
    CK_MECHANISM ecgen = {CKM_EC_KEY_PAIR_GEN, NULL, 0}, ecdsa = {CKM_ECDSA_SHA256, NULL, 0};
    CK_OBJECT_HANDLE epub = 0, epriv = 0;
    CHECK("an EC P-256 pair signs (CKM_ECDSA_SHA256) and verifies",
          f->C_GenerateKeyPair(s, &ecgen, ecpub, 2, ecpriv, 1, &epub, &epriv) == CKR_OK && sign_verify(s, &ecdsa, epriv, epub));

    CK_ULONG bits = 2048;
    CK_ATTRIBUTE rsapub[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1}};
    CK_MECHANISM rsagen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_RSA_PKCS_PSS_PARAMS pss = {CKM_SHA256, CKG_MGF1_SHA256, 32};
    CK_MECHANISM pssm = {CKM_SHA256_RSA_PKCS_PSS, &pss, sizeof pss};
    CK_OBJECT_HANDLE rpub = 0, rpriv = 0;
    CHECK("an RSA-2048 pair signs (CKM_SHA256_RSA_PKCS_PSS) and verifies",
          f->C_GenerateKeyPair(s, &rsagen, rsapub, 2, ecpriv, 1, &rpub, &rpriv) == CKR_OK && sign_verify(s, &pssm, rpriv, rpub));

    CK_ULONG len = 32;
    CK_ATTRIBUTE aest[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}};
    CK_MECHANISM aesgen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE aes = 0;
    unsigned char iv[12] = {1}, ct[64], pt[64];
    CK_GCM_PARAMS gcm = {iv, sizeof iv, 96, NULL, 0, 128};
    CK_MECHANISM gm = {CKM_AES_GCM, &gcm, sizeof gcm};
    CK_ULONG cn = sizeof ct, pn = sizeof pt;
    CHECK("an AES-256 key encrypts and decrypts (CKM_AES_GCM)",
          f->C_GenerateKey(s, &aesgen, aest, 3, &aes) == CKR_OK && f->C_EncryptInit(s, &gm, aes) == CKR_OK
              && f->C_Encrypt(s, (CK_BYTE_PTR) "sixteen byte msg", 16, ct, &cn) == CKR_OK && cn == 32
              && f->C_DecryptInit(s, &gm, aes) == CKR_OK && f->C_Decrypt(s, ct, cn, pt, &pn) == CKR_OK && pn == 16
              && memcmp(pt, "sixteen byte msg", 16) == 0);
    unsigned char r1[32] = {0}, r2[32] = {0};
    CHECK("C_GenerateRandom gives bytes", f->C_GenerateRandom(s, r1, 32) == CKR_OK && f->C_GenerateRandom(s, r2, 32) == CKR_OK
                                              && memcmp(r1, r2, 32) != 0);
    f->C_Logout(s);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);

    unsigned long e = ERR_peek_error();
    char buf[120] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    CHECKF(e == 0, "the host's OpenSSL error queue is empty after the module's calls%s%s", e ? ": " : "", buf);
    (void)no;
    return p11host_report();
}
