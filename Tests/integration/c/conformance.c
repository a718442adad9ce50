/* PKCS #11 3.0 conformance checks for issue 13 (Tests/integration/56-conformance.sh).
 * Each group is written from the spec text it names and from what other
 * soft tokens (SoftHSM2, Kryoptic) do:
 *   versions and token flags (§5.4.3, §5.5.3), RSA generation sizes,
 *   argument order (§5.1.7), operation termination (§5.2, §5.8-§5.17),
 *   AES-GCM parameters, secret-key usage defaults, and the wrap policy
 *   (each known key-extraction attack run to its end, each ordinary
 *   template used as its writers use it), and CKA_ALLOWED_MECHANISMS at
 *   every Init that takes a key.
 * Usage: conformance MODULE VERSION_MAJOR VERSION_MINOR, with the PINs in the
 * environment (KS_TEST_SO_PIN, KS_TEST_PIN), never on the command line. It
 * makes its own token with C_InitToken on the free slot (slot 1). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"
#include "harness.h"

static int pass, fail;
/* Printed when an attack got the victim key's value out (so a run against
 * an older module shows which attacks worked, not only which checks failed). */
#define LEAK_NOTE(leaked, what) do { if (leaked) printf("  note: %s recovered the sensitive key's value\n", what); } while (0)
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s%s\n", public_keys ? "public session keys: " : "", name); } \
    else { fail++; printf("FAIL - %s%s (line %d)\n", public_keys ? "public session keys: " : "", name, __LINE__); } } while (0)
static int public_keys;

static CK_FUNCTION_LIST_3_0 *f;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
static CK_KEY_TYPE aes_type = CKK_AES;
static const CK_SESSION_HANDLE BAD = 0x7ffff00dUL;

/* ---- helpers ---- */

/* Issue 29: with public_keys set, every key the helpers and wrap_policy make is a session key born
 * CKA_PRIVATE=false (no login needed), so the attacks run again on public session keys. Each
 * template has a spare last slot that takes this attribute. */
static CK_ATTRIBUTE public_attr = {CKA_PRIVATE, &no, 1};
#define PUBLIC_SLOT(t, n) (public_keys ? ((t)[n] = public_attr, (CK_ULONG)(n) + 1) : (CK_ULONG)(n))

/* An AES-256 key generated on the token with the given usage flags. */
static CK_OBJECT_HANDLE gen_aes(CK_SESSION_HANDLE s, CK_BBOOL enc, CK_BBOOL dec, CK_BBOOL wrap, CK_BBOOL unwrap,
                                CK_BBOOL extractable) {
    CK_ULONG len = 32;
    CK_ATTRIBUTE t[7] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &enc, 1}, {CKA_DECRYPT, &dec, 1},
                         {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &unwrap, 1}, {CKA_EXTRACTABLE, &extractable, 1}};
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, PUBLIC_SLOT(t, 6), &h) == CKR_OK ? h : 0;
}

/* An AES-128 key created from a value the caller knows (sensitive, extractable). */
static CK_OBJECT_HANDLE create_aes(CK_SESSION_HANDLE s, const unsigned char *value, CK_BBOOL enc, CK_BBOOL dec,
                                   CK_BBOOL wrap, CK_BBOOL unwrap) {
    CK_ATTRIBUTE t[10] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                          {CKA_VALUE, (void *)value, 16}, {CKA_ENCRYPT, &enc, 1}, {CKA_DECRYPT, &dec, 1},
                          {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &unwrap, 1}, {CKA_SENSITIVE, &yes, 1},
                          {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, PUBLIC_SLOT(t, 9), &h) == CKR_OK ? h : 0;
}

static CK_BBOOL get_bool(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE type) {
    CK_BBOOL v = 0xff;
    CK_ATTRIBUTE a = {type, &v, 1};
    return f->C_GetAttributeValue(s, h, &a, 1) == CKR_OK ? v : 0xff;
}

/* One AES block through CKM_AES_CBC with a zero IV: AES itself (encrypt)
 * or its inverse (decrypt). This is what lets a caller with C_Encrypt or
 * C_Decrypt on a key build or open any wrapped-key format. */
static int aes_block(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE k, int encrypt, const unsigned char *in, unsigned char *out) {
    unsigned char iv[16] = {0};
    CK_MECHANISM m = {CKM_AES_CBC, iv, 16};
    CK_ULONG n = 16;
    if (encrypt) {
        if (f->C_EncryptInit(s, &m, k) != CKR_OK) return 0;
        return f->C_Encrypt(s, (CK_BYTE_PTR)in, 16, out, &n) == CKR_OK && n == 16;
    }
    if (f->C_DecryptInit(s, &m, k) != CKR_OK) return 0;
    return f->C_Decrypt(s, (CK_BYTE_PTR)in, 16, out, &n) == CKR_OK && n == 16;
}

/* RFC 3394 unwrap of a 24-byte blob (a 16-byte key) with C_Decrypt on `k`. */
static int kw_open_with_decrypt(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE k, const unsigned char *blob, unsigned char *key) {
    unsigned char a[8], r[2][8], b[16];
    memcpy(a, blob, 8); memcpy(r[0], blob + 8, 8); memcpy(r[1], blob + 16, 8);
    for (int j = 5; j >= 0; j--)
        for (int i = 2; i >= 1; i--) {
            unsigned long t = 2UL * j + i;
            memcpy(b, a, 8); b[7] ^= (unsigned char)t;
            memcpy(b + 8, r[i - 1], 8);
            if (!aes_block(s, k, 0, b, b)) return 0;
            memcpy(a, b, 8); memcpy(r[i - 1], b + 8, 8);
        }
    for (int i = 0; i < 8; i++) if (a[i] != 0xA6) return 0;
    memcpy(key, r[0], 8); memcpy(key + 8, r[1], 8);
    return 1;
}

/* RFC 3394 wrap of a 16-byte key with C_Encrypt on `k`. */
static int kw_forge_with_encrypt(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE k, const unsigned char *key, unsigned char *blob) {
    unsigned char a[8], r[2][8], b[16];
    memset(a, 0xA6, 8); memcpy(r[0], key, 8); memcpy(r[1], key + 8, 8);
    for (int j = 0; j <= 5; j++)
        for (int i = 1; i <= 2; i++) {
            memcpy(b, a, 8); memcpy(b + 8, r[i - 1], 8);
            if (!aes_block(s, k, 1, b, b)) return 0;
            memcpy(a, b, 8); a[7] ^= (unsigned char)(2 * j + i);
            memcpy(r[i - 1], b + 8, 8);
        }
    memcpy(blob, a, 8); memcpy(blob + 8, r[0], 8); memcpy(blob + 16, r[1], 8);
    return 1;
}

static CK_RV wrap(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE kek, CK_OBJECT_HANDLE key, unsigned char *blob, CK_ULONG *n) {
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
    *n = 64;
    return f->C_WrapKey(s, &kw, kek, key, blob, n);
}

static CK_RV unwrap(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE kek, unsigned char *blob, CK_ULONG n, CK_ATTRIBUTE *extra,
                    CK_ULONG extra_count, CK_OBJECT_HANDLE *out) {
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
    CK_ATTRIBUTE t[9] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type}};
    CK_ULONG c = 2;
    for (CK_ULONG i = 0; i < extra_count && i < 6; i++) t[c++] = extra[i];
    return f->C_UnwrapKey(s, &kw, kek, blob, n, t, PUBLIC_SLOT(t, c), out);
}

/* ---- groups ---- */

static void versions_and_flags(CK_SLOT_ID slot, int major, int minor) {
    CK_INFO info;
    CHECK("C_GetInfo", f->C_GetInfo(&info) == CKR_OK);
    CHECK("libraryVersion is the product version (KeyshareVersion)",
          info.libraryVersion.major == major && info.libraryVersion.minor == minor);
    CK_TOKEN_INFO ti;
    CHECK("C_GetTokenInfo", f->C_GetTokenInfo(slot, &ti) == CKR_OK);
    CHECK("token firmwareVersion and hardwareVersion are the product version",
          ti.firmwareVersion.major == major && ti.firmwareVersion.minor == minor &&
          ti.hardwareVersion.major == major && ti.hardwareVersion.minor == minor);
    CHECK("token flags advertise CKF_DUAL_CRYPTO_OPERATIONS", (ti.flags & CKF_DUAL_CRYPTO_OPERATIONS) != 0);
}

static void rsa_sizes(CK_SESSION_HANDLE s, CK_SLOT_ID slot) {
    CK_MECHANISM_INFO mi;
    CHECK("CKM_RSA_PKCS_KEY_PAIR_GEN offers 1024-16384 bits",
          f->C_GetMechanismInfo(slot, CKM_RSA_PKCS_KEY_PAIR_GEN, &mi) == CKR_OK && mi.ulMinKeySize == 1024 &&
          mi.ulMaxKeySize == 16384);
    CHECK("CKM_RSA_PKCS offers the same range",
          f->C_GetMechanismInfo(slot, CKM_RSA_PKCS, &mi) == CKR_OK && mi.ulMinKeySize == 1024 && mi.ulMaxKeySize == 16384);
    CK_MECHANISM gen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_ULONG bits = 1024;
    CK_ATTRIBUTE pub[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE priv[] = {{CKA_SIGN, &yes, 1}};
    CK_OBJECT_HANDLE hp = 0, hk = 0;
    CHECK("C_GenerateKeyPair RSA 1024", f->C_GenerateKeyPair(s, &gen, pub, 2, priv, 1, &hp, &hk) == CKR_OK);
    CK_ULONG got = 0;
    CK_ATTRIBUTE a = {CKA_MODULUS_BITS, &got, sizeof got};
    CHECK("the public key has CKA_MODULUS_BITS 1024", f->C_GetAttributeValue(s, hp, &a, 1) == CKR_OK && got == 1024);
    CK_MECHANISM sm = {CKM_SHA256_RSA_PKCS, NULL, 0};
    unsigned char sig[256]; CK_ULONG n = sizeof sig;
    CHECK("it signs (128-byte signature)", f->C_SignInit(s, &sm, hk) == CKR_OK &&
          f->C_Sign(s, (CK_BYTE_PTR)"data", 4, sig, &n) == CKR_OK && n == 128);
    CHECK("and verifies", f->C_VerifyInit(s, &sm, hp) == CKR_OK && f->C_Verify(s, (CK_BYTE_PTR)"data", 4, sig, n) == CKR_OK);
    bits = 512;
    CHECK("RSA 512: CKR_KEY_SIZE_RANGE", f->C_GenerateKeyPair(s, &gen, pub, 2, priv, 1, &hp, &hk) == CKR_KEY_SIZE_RANGE);
    bits = 16392;
    CHECK("RSA 16392: CKR_KEY_SIZE_RANGE", f->C_GenerateKeyPair(s, &gen, pub, 2, priv, 1, &hp, &hk) == CKR_KEY_SIZE_RANGE);
}

/* §5.1.7: session-handle errors (§5.1.2) before §5.1.6 errors such as
 * CKR_ARGUMENTS_BAD or CKR_MECHANISM_INVALID. Every entry point that takes
 * a session, called on a bad one with NULL pointers, non-zero lengths and
 * an unknown mechanism. */
static void argument_order(void) {
    CK_MECHANISM junk = {0x7fffff01UL, NULL, 0};
    CK_ATTRIBUTE bad_t = {CKA_VALUE, NULL, 99};
    CK_ULONG len = 8; CK_OBJECT_HANDLE h;
    unsigned char buf[8];
    const CK_RV W = CKR_SESSION_HANDLE_INVALID;
    int bad = 0;
#define O(call) do { CK_RV rv_ = (call); if (rv_ != W) { bad++; printf("  %s: 0x%lx\n", #call, rv_); } } while (0)
    O(f->C_GetSessionInfo(BAD, NULL));
    O(f->C_Login(BAD, CKU_USER, NULL, 4));
    O(f->C_LoginUser(BAD, CKU_USER, NULL, 4, NULL, 3));
    O(f->C_InitPIN(BAD, NULL, 4));
    O(f->C_SetPIN(BAD, NULL, 4, NULL, 4));
    O(f->C_CreateObject(BAD, &bad_t, 1, NULL));
    O(f->C_CopyObject(BAD, 1, &bad_t, 1, NULL));
    O(f->C_GetObjectSize(BAD, 1, NULL));
    O(f->C_GetAttributeValue(BAD, 1, NULL, 3));
    O(f->C_SetAttributeValue(BAD, 1, &bad_t, 1));
    O(f->C_FindObjectsInit(BAD, &bad_t, 1));
    O(f->C_FindObjects(BAD, NULL, 4, NULL));
    O(f->C_EncryptInit(BAD, &junk, 1));
    O(f->C_Encrypt(BAD, NULL, 4, NULL, NULL));
    O(f->C_EncryptUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_EncryptFinal(BAD, NULL, NULL));
    O(f->C_DecryptInit(BAD, &junk, 1));
    O(f->C_Decrypt(BAD, NULL, 4, NULL, NULL));
    O(f->C_DecryptUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_DecryptFinal(BAD, NULL, NULL));
    O(f->C_DigestInit(BAD, &junk));
    O(f->C_Digest(BAD, NULL, 4, NULL, NULL));
    O(f->C_DigestUpdate(BAD, NULL, 4));
    O(f->C_DigestKey(BAD, 1));
    O(f->C_DigestFinal(BAD, NULL, NULL));
    O(f->C_SignInit(BAD, &junk, 1));
    O(f->C_Sign(BAD, NULL, 4, NULL, NULL));
    O(f->C_SignUpdate(BAD, NULL, 4));
    O(f->C_SignFinal(BAD, NULL, NULL));
    O(f->C_SignRecoverInit(BAD, NULL, 1));
    O(f->C_SignRecover(BAD, NULL, 4, NULL, NULL));
    O(f->C_VerifyInit(BAD, &junk, 1));
    O(f->C_Verify(BAD, NULL, 4, NULL, 4));
    O(f->C_VerifyUpdate(BAD, NULL, 4));
    O(f->C_VerifyFinal(BAD, NULL, 4));
    O(f->C_VerifyRecoverInit(BAD, NULL, 1));
    O(f->C_VerifyRecover(BAD, NULL, 4, NULL, NULL));
    O(f->C_DigestEncryptUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_DecryptDigestUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_SignEncryptUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_DecryptVerifyUpdate(BAD, NULL, 4, NULL, NULL));
    O(f->C_GenerateKey(BAD, &junk, &bad_t, 1, NULL));
    O(f->C_GenerateKeyPair(BAD, &junk, &bad_t, 1, &bad_t, 1, NULL, NULL));
    O(f->C_WrapKey(BAD, &junk, 1, 2, NULL, NULL));
    O(f->C_UnwrapKey(BAD, &junk, 1, NULL, 4, &bad_t, 1, NULL));
    O(f->C_DeriveKey(BAD, &junk, 1, &bad_t, 1, NULL));
    O(f->C_SeedRandom(BAD, NULL, 4));
    O(f->C_GenerateRandom(BAD, NULL, 4));
    O(f->C_GetOperationState(BAD, NULL, NULL));
    O(f->C_SessionCancel(BAD, 0));
    O(f->C_MessageEncryptInit(BAD, &junk, 1));
    O(f->C_EncryptMessage(BAD, NULL, 4, NULL, 0, NULL, 4, NULL, NULL));
    O(f->C_MessageSignInit(BAD, &junk, 1));
    /* The unknown mechanism alone (valid pointers otherwise). */
    O(f->C_EncryptInit(BAD, &junk, 1));
    O(f->C_GenerateKey(BAD, &junk, NULL, 0, &h));
    O(f->C_Digest(BAD, buf, 8, buf, &len));
#undef O
    CHECK("every session entry point answers CKR_SESSION_HANDLE_INVALID before argument and mechanism errors", bad == 0);
}

static void login_null_pin(CK_SESSION_HANDLE s, CK_SLOT_ID slot, const char *pin) {
    CK_TOKEN_INFO ti;
    CHECK("C_Login with a NULL PIN (no protected path): CKR_ARGUMENTS_BAD",
          f->C_Login(s, CKU_USER, NULL, 0) == CKR_ARGUMENTS_BAD);
    CHECK("C_Login with a NULL PIN and a length: CKR_ARGUMENTS_BAD",
          f->C_Login(s, CKU_USER, NULL, 4) == CKR_ARGUMENTS_BAD);
    CHECK("C_LoginUser with a NULL PIN: CKR_ARGUMENTS_BAD",
          f->C_LoginUser(s, CKU_USER, NULL, 0, (CK_UTF8CHAR_PTR)"u", 1) == CKR_ARGUMENTS_BAD);
    CHECK("no failed login was counted (no CKF_USER_PIN_COUNT_LOW)",
          f->C_GetTokenInfo(slot, &ti) == CKR_OK && (ti.flags & (CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_LOCKED)) == 0);
    CHECK("login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) == CKR_OK);
}

/* §5.2 / §5.8: only CKR_BUFFER_TOO_SMALL and a successful length query leave
 * an operation active; a single-part operation kept by a length query is
 * finished by the same single-part call. */
static void termination(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_OBJECT_HANDLE hmac) {
    unsigned char iv[16] = {1}, data[32] = {2}, out[128];
    CK_ULONG n;
    const CK_ULONG HUGE = 1UL << 40;
    CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, 16}, sha = {CKM_SHA256, NULL, 0}, mac = {CKM_SHA256_HMAC, NULL, 0};

    f->C_EncryptInit(s, &cbc, key);
    CHECK("C_Encrypt with a NULL length pointer: CKR_ARGUMENTS_BAD", f->C_Encrypt(s, data, 5, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation (C_EncryptInit works)", f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    CHECK("C_EncryptUpdate with a NULL length pointer", f->C_EncryptUpdate(s, data, 5, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    CHECK("C_EncryptFinal with a NULL length pointer", f->C_EncryptFinal(s, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    n = 0;
    CHECK("C_Encrypt length query", f->C_Encrypt(s, data, 5, NULL, &n) == CKR_OK && n == 16);
    n = sizeof out;
    CHECK("C_EncryptUpdate after a single-part length query: CKR_OPERATION_ACTIVE",
          f->C_EncryptUpdate(s, data, 5, out, &n) == CKR_OPERATION_ACTIVE);
    n = sizeof out;
    CHECK("... and that ended it", f->C_Encrypt(s, data, 5, out, &n) == CKR_OPERATION_NOT_INITIALIZED);
    f->C_EncryptInit(s, &cbc, key);
    n = 0; f->C_Encrypt(s, data, 5, NULL, &n);
    n = sizeof out;
    CHECK("C_EncryptFinal after a single-part length query: CKR_OPERATION_ACTIVE",
          f->C_EncryptFinal(s, out, &n) == CKR_OPERATION_ACTIVE);
    f->C_EncryptInit(s, &cbc, key);
    n = 0; f->C_Encrypt(s, data, 5, NULL, &n);
    n = sizeof out;
    CHECK("the same single-part call finishes it", f->C_Encrypt(s, data, 5, out, &n) == CKR_OK && n == 16);
    memcpy(data, out, 16);

    f->C_DecryptInit(s, &cbc, key);
    CHECK("C_Decrypt with a NULL length pointer: CKR_ARGUMENTS_BAD", f->C_Decrypt(s, data, 16, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation (C_DecryptInit works)", f->C_DecryptInit(s, &cbc, key) == CKR_OK);
    CHECK("C_DecryptUpdate with a length no buffer has", f->C_DecryptUpdate(s, NULL, HUGE, out, &n) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_DecryptInit(s, &cbc, key) == CKR_OK);
    CHECK("C_DecryptFinal with a NULL length pointer", f->C_DecryptFinal(s, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_DecryptInit(s, &cbc, key) == CKR_OK);
    f->C_DecryptFinal(s, NULL, NULL);

    f->C_DigestInit(s, &sha);
    CHECK("C_Digest with a NULL length pointer: CKR_ARGUMENTS_BAD", f->C_Digest(s, data, 5, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation (C_DigestInit works)", f->C_DigestInit(s, &sha) == CKR_OK);
    CHECK("C_DigestUpdate with a length no buffer has", f->C_DigestUpdate(s, NULL, HUGE) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_DigestInit(s, &sha) == CKR_OK);
    CHECK("C_DigestFinal with a NULL length pointer", f->C_DigestFinal(s, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_DigestInit(s, &sha) == CKR_OK);
    n = 0;
    CHECK("C_Digest length query", f->C_Digest(s, data, 5, NULL, &n) == CKR_OK && n == 32);
    CHECK("C_DigestUpdate after it: CKR_OPERATION_ACTIVE, and the operation ends",
          f->C_DigestUpdate(s, data, 5) == CKR_OPERATION_ACTIVE && f->C_DigestInit(s, &sha) == CKR_OK);
    f->C_DigestFinal(s, out, &(CK_ULONG){sizeof out});

    f->C_SignInit(s, &mac, hmac);
    CHECK("C_Sign with a NULL length pointer: CKR_ARGUMENTS_BAD", f->C_Sign(s, data, 5, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation (C_SignInit works)", f->C_SignInit(s, &mac, hmac) == CKR_OK);
    CHECK("C_SignUpdate with a length no buffer has", f->C_SignUpdate(s, NULL, HUGE) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_SignInit(s, &mac, hmac) == CKR_OK);
    CHECK("C_SignFinal with a NULL length pointer", f->C_SignFinal(s, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_SignInit(s, &mac, hmac) == CKR_OK);
    n = 0;
    CHECK("C_Sign length query", f->C_Sign(s, data, 5, NULL, &n) == CKR_OK && n == 32);
    CHECK("C_SignUpdate after it: CKR_OPERATION_ACTIVE, and the operation ends",
          f->C_SignUpdate(s, data, 5) == CKR_OPERATION_ACTIVE && f->C_SignInit(s, &mac, hmac) == CKR_OK);
    n = sizeof out;
    f->C_Sign(s, data, 5, out, &n);

    f->C_VerifyInit(s, &mac, hmac);
    CHECK("C_Verify with a signature length no buffer has: CKR_ARGUMENTS_BAD",
          f->C_Verify(s, data, 5, NULL, HUGE) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation (C_VerifyInit works)", f->C_VerifyInit(s, &mac, hmac) == CKR_OK);
    CHECK("C_VerifyUpdate with a length no buffer has", f->C_VerifyUpdate(s, NULL, HUGE) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_VerifyInit(s, &mac, hmac) == CKR_OK);
    CHECK("C_VerifyFinal with a length no buffer has", f->C_VerifyFinal(s, NULL, HUGE) == CKR_ARGUMENTS_BAD);
    CHECK("... ended the operation", f->C_VerifyInit(s, &mac, hmac) == CKR_OK);
    f->C_VerifyFinal(s, out, 32);

    f->C_DigestInit(s, &sha); f->C_EncryptInit(s, &cbc, key);
    CHECK("C_DigestEncryptUpdate with a NULL length pointer: CKR_ARGUMENTS_BAD",
          f->C_DigestEncryptUpdate(s, data, 16, out, NULL) == CKR_ARGUMENTS_BAD);
    CHECK("... ended both operations", f->C_DigestInit(s, &sha) == CKR_OK && f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    f->C_DigestFinal(s, NULL, NULL); f->C_EncryptFinal(s, NULL, NULL);
    f->C_SignInit(s, &mac, hmac); f->C_EncryptInit(s, &cbc, key);
    CHECK("C_SignEncryptUpdate with a length no buffer has",
          f->C_SignEncryptUpdate(s, NULL, HUGE, out, &n) == CKR_ARGUMENTS_BAD);
    CHECK("... ended both operations", f->C_SignInit(s, &mac, hmac) == CKR_OK && f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    f->C_SignFinal(s, NULL, NULL); f->C_EncryptFinal(s, NULL, NULL);

    CHECK("C_EncryptInit with pMechanism NULL_PTR ends an active encryption (3.0 §5.8)",
          f->C_EncryptInit(s, &cbc, key) == CKR_OK && f->C_EncryptInit(s, NULL, key) == CKR_OK &&
          f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    f->C_EncryptInit(s, NULL, 0);
    CHECK("C_MessageEncryptInit with a mechanism that is not an AEAD: CKR_MECHANISM_INVALID, and no message process starts",
          f->C_MessageEncryptInit(s, &cbc, key) == CKR_MECHANISM_INVALID &&
          f->C_MessageEncryptFinal(s) == CKR_OPERATION_NOT_INITIALIZED);
}

static void gcm(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key) {
    unsigned char iv[12] = {9, 8, 7}, aad[5] = "head", pt[48], one[64], multi[64], back[64];
    for (int i = 0; i < 48; i++) pt[i] = (unsigned char)i;
    CK_GCM_PARAMS g = {iv, 12, 96, aad, 5, 128};
    CK_MECHANISM m = {CKM_AES_GCM, &g, sizeof g};
    CK_ULONG n = sizeof one;
    CHECK("GCM single-part", f->C_EncryptInit(s, &m, key) == CKR_OK && f->C_Encrypt(s, pt, 48, one, &n) == CKR_OK && n == 64);
    g.ulIvBits = 0;
    CK_ULONG n0 = sizeof multi;
    CHECK("ulIvBits 0 with ulIvLen 12 is accepted, same ciphertext",
          f->C_EncryptInit(s, &m, key) == CKR_OK && f->C_Encrypt(s, pt, 48, multi, &n0) == CKR_OK && n0 == 64 &&
          memcmp(one, multi, 64) == 0);
    g.ulIvBits = 12;  /* a 2.40-era caller that put bytes in the bits field */
    n0 = sizeof multi;
    CHECK("ulIvBits disagreeing with 8*ulIvLen is tolerated (ulIvLen is authoritative)",
          f->C_EncryptInit(s, &m, key) == CKR_OK && f->C_Encrypt(s, pt, 48, multi, &n0) == CKR_OK &&
          memcmp(one, multi, 64) == 0);
    g.ulIvBits = 96;
    CK_ULONG a = sizeof multi, b = sizeof multi - 20, c;
    CHECK("GCM C_EncryptUpdate returns its ciphertext at once",
          f->C_EncryptInit(s, &m, key) == CKR_OK && f->C_EncryptUpdate(s, pt, 20, multi, &a) == CKR_OK && a == 20);
    b = sizeof multi - a;
    CHECK("a second update too", f->C_EncryptUpdate(s, pt + 20, 28, multi + a, &b) == CKR_OK && b == 28);
    c = 0;
    CHECK("C_EncryptFinal length is the tag", f->C_EncryptFinal(s, NULL, &c) == CKR_OK && c == 16);
    CHECK("C_EncryptFinal gives the tag", f->C_EncryptFinal(s, multi + 48, &c) == CKR_OK && c == 16);
    CHECK("multi-part output equals single-part output", memcmp(one, multi, 64) == 0);
    CK_ULONG d1 = sizeof back, d2 = sizeof back, d3 = sizeof back;
    CHECK("multi-part GCM decryption holds plaintext until the tag is checked",
          f->C_DecryptInit(s, &m, key) == CKR_OK && f->C_DecryptUpdate(s, one, 40, back, &d1) == CKR_OK && d1 == 0 &&
          f->C_DecryptUpdate(s, one + 40, 24, back, &d2) == CKR_OK && d2 == 0 &&
          f->C_DecryptFinal(s, back, &d3) == CKR_OK && d3 == 48 && memcmp(back, pt, 48) == 0);
}

static void defaults(CK_SESSION_HANDLE s) {
    unsigned char v[16] = {3};
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                        {CKA_VALUE, v, 16}};
    CK_OBJECT_HANDLE created = 0, generated = 0;
    CHECK("C_CreateObject AES key with no usage flags", f->C_CreateObject(s, t, 3, &created) == CKR_OK);
    CK_ULONG len = 16;
    CK_ATTRIBUTE g[] = {{CKA_VALUE_LEN, &len, sizeof len}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CHECK("C_GenerateKey AES key with no usage flags", f->C_GenerateKey(s, &gen, g, 1, &generated) == CKR_OK);
    CK_OBJECT_HANDLE keys[2] = {created, generated};
    for (int i = 0; i < 2; i++) {
        CK_OBJECT_HANDLE k = keys[i];
        CHECK(i ? "generated: ENCRYPT DECRYPT SIGN VERIFY WRAP UNWRAP true, DERIVE false (SoftHSM2's defaults)"
                : "created: ENCRYPT DECRYPT SIGN VERIFY WRAP UNWRAP true, DERIVE false (SoftHSM2's defaults)",
              get_bool(s, k, CKA_ENCRYPT) == 1 && get_bool(s, k, CKA_DECRYPT) == 1 && get_bool(s, k, CKA_SIGN) == 1 &&
              get_bool(s, k, CKA_VERIFY) == 1 && get_bool(s, k, CKA_WRAP) == 1 && get_bool(s, k, CKA_UNWRAP) == 1 &&
              get_bool(s, k, CKA_DERIVE) == 0);
        unsigned char in[16] = {4}, ct[16], pt[16];
        CHECK(i ? "generated default key encrypts and decrypts" : "created default key encrypts and decrypts",
              aes_block(s, k, 1, in, ct) && aes_block(s, k, 0, ct, pt) && memcmp(in, pt, 16) == 0);
    }
}

/* The wrap policy: each ordinary template works, each attack fails. The
 * attacker is the logged-in user with the API only (the Tookan model). */
static void wrap_policy(CK_SESSION_HANDLE s) {
    unsigned char secret[16] = "0123456789abcdef", got[16], blob[64], iv[16] = {0}, ct[64], pt[64];
    CK_ULONG n;
    CK_OBJECT_HANDLE nk;

    /* Ordinary templates. */
    CK_OBJECT_HANDLE all = gen_aes(s, yes, yes, yes, yes, no);
    CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, 16};
    CK_ULONG c1 = sizeof ct, p1 = sizeof pt;
    CHECK("a key with ENCRYPT+DECRYPT+WRAP+UNWRAP (binding / pkcs11-tool default) decrypts",
          all && f->C_EncryptInit(s, &cbc, all) == CKR_OK && f->C_Encrypt(s, secret, 16, ct, &c1) == CKR_OK &&
          f->C_DecryptInit(s, &cbc, all) == CKR_OK && f->C_Decrypt(s, ct, c1, pt, &p1) == CKR_OK && p1 == 16 &&
          memcmp(pt, secret, 16) == 0);
    CK_OBJECT_HANDLE kek = gen_aes(s, no, no, yes, yes, no);
    CK_OBJECT_HANDLE data = gen_aes(s, yes, yes, no, no, yes);
    CHECK("a generated KEK (WRAP+UNWRAP only) wraps a sensitive extractable data key",
          kek && data && wrap(s, kek, data, blob, &n) == CKR_OK && n == 40);
    CK_ATTRIBUTE usage[] = {{CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}};
    CHECK("and unwraps it back", unwrap(s, kek, blob, n, usage, 2, &nk) == CKR_OK &&
          get_bool(s, nk, CKA_SENSITIVE) == 1);
    CK_OBJECT_HANDLE open = 0;
    {
        CK_ATTRIBUTE t[7] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                             {CKA_VALUE, secret, 16}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1},
                             {CKA_WRAP, &no, 1}};
        f->C_CreateObject(s, t, PUBLIC_SLOT(t, 6), &open);
    }
    CHECK("a non-sensitive key wraps under a key that can also decrypt (its value is readable anyway)",
          open && wrap(s, all, open, blob, &n) == CKR_OK);
    /* python-pkcs11's test_aes test_wrap: the same key unwraps it readable
     * (a key that can decrypt never wrapped a sensitive key: rule 1). */
    {
        CK_ATTRIBUTE rd[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
        CK_OBJECT_HANDLE back = 0;
        unsigned char v[16] = {0};
        CK_ATTRIBUTE va = {CKA_VALUE, v, 16};
        CK_RV urv = unwrap(s, all, blob, n, rd, 2, &back);
        CHECK("a key with ENCRYPT+DECRYPT+WRAP+UNWRAP unwraps a key as readable (not sensitive, extractable) with its value",
              urv == CKR_OK && f->C_GetAttributeValue(s, back, &va, 1) == CKR_OK && memcmp(v, secret, 16) == 0);
    }

    /* The victim: a sensitive, extractable key whose value the test knows
     * (so it can tell whether an attack recovered it). */
    CK_OBJECT_HANDLE S = create_aes(s, secret, yes, yes, no, no);
    CHECK("victim key", S != 0);

    /* Attack 1 (Clulow wrap/decrypt): wrap under K, decrypt the blob with K. */
    CK_OBJECT_HANDLE K = gen_aes(s, no, yes, yes, no, no);
    CK_RV rv = wrap(s, K, S, blob, &n);
    int leaked = rv == CKR_OK && kw_open_with_decrypt(s, K, blob, got) && memcmp(got, secret, 16) == 0;
    LEAK_NOTE(leaked, "wrap/decrypt");
    CHECK("wrap/decrypt attack fails: C_WrapKey under a key that can decrypt is CKR_KEY_NOT_WRAPPABLE",
          rv == CKR_KEY_NOT_WRAPPABLE && !leaked);

    /* Attack 2 (known wrapping key): create a KEK from a known value, wrap S. */
    unsigned char known[16] = "attacker-key-val";
    CK_OBJECT_HANDLE KK = create_aes(s, known, no, no, yes, no);
    rv = wrap(s, KK, S, blob, &n);
    LEAK_NOTE(rv == CKR_OK, "wrapping under a key of known value (decryptable off the token)");
    CHECK("known-wrapping-key attack fails: a created (imported) key does not wrap sensitive keys",
          KK && rv == CKR_KEY_NOT_WRAPPABLE);

    /* Attack 3 (encrypt/unwrap): forge a blob of a known value with C_Encrypt,
     * unwrap it as a wrapping key, wrap S under it (then open it off the
     * token). The unwrap is allowed (OpenSC's --usage-wrap keys can encrypt);
     * the planted key is not local, so it wraps no sensitive key. */
    CK_OBJECT_HANDLE U = gen_aes(s, yes, no, no, yes, no);
    unsigned char forged[24], planted_value[16] = "planted-key-0001";
    int forged_ok = U && kw_forge_with_encrypt(s, U, planted_value, forged);
    CK_ATTRIBUTE wrapflag[] = {{CKA_WRAP, &yes, 1}, {CKA_DECRYPT, &no, 1}};
    CK_OBJECT_HANDLE planted = 0;
    rv = unwrap(s, U, forged, 24, wrapflag, 2, &planted);
    CHECK("a key that can encrypt unwraps (the forged blob becomes a key)", forged_ok && rv == CKR_OK);
    rv = planted ? wrap(s, planted, S, blob, &n) : CKR_GENERAL_ERROR;
    LEAK_NOTE(rv == CKR_OK, "encrypt/unwrap (S wrapped under the planted key of known value)");
    CHECK("encrypt/unwrap attack fails: the planted key does not wrap sensitive keys (CKR_KEY_NOT_WRAPPABLE)",
          rv == CKR_KEY_NOT_WRAPPABLE);

    /* Attack 4 (flag change / copy): K2 wraps S while it cannot decrypt,
     * then K2 or a copy of it gains CKA_DECRYPT. */
    CK_OBJECT_HANDLE K2 = gen_aes(s, no, no, yes, no, no);
    CHECK("a wrap-only generated key wraps the sensitive key", wrap(s, K2, S, blob, &n) == CKR_OK && n == 24);
    CK_ATTRIBUTE dec_on[] = {{CKA_DECRYPT, &yes, 1}};
    CHECK("C_SetAttributeValue CKA_DECRYPT on it: CKR_ATTRIBUTE_READ_ONLY",
          f->C_SetAttributeValue(s, K2, dec_on, 1) == CKR_ATTRIBUTE_READ_ONLY);
    CK_ATTRIBUTE copy_t[] = {{CKA_WRAP, &no, 1}, {CKA_DECRYPT, &yes, 1}};
    CK_OBJECT_HANDLE K2c = 0;
    rv = f->C_CopyObject(s, K2, copy_t, 2, &K2c);
    leaked = (rv == CKR_OK && kw_open_with_decrypt(s, K2c, blob, got) && memcmp(got, secret, 16) == 0) ||
             kw_open_with_decrypt(s, K2, blob, got);
    LEAK_NOTE(leaked, "the copy attack");
    CHECK("copy attack fails: a copy cannot change CKA_WRAP/CKA_DECRYPT, and the blob stays closed",
          rv == CKR_ATTRIBUTE_READ_ONLY && !leaked);
    CK_ATTRIBUTE same[] = {{CKA_WRAP, &yes, 1}};
    CHECK("setting a fixed flag to the value it has is accepted", f->C_SetAttributeValue(s, K2, same, 1) == CKR_OK);

    /* Attack 5 (re-import): wrap S under a KEK, unwrap it as non-sensitive. */
    CHECK("the KEK wraps S", wrap(s, kek, S, blob, &n) == CKR_OK);
    CK_ATTRIBUTE readable[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_ATTRIBUTE unreadable[] = {{CKA_SENSITIVE, &no, 1}};
    CK_OBJECT_HANDLE copy = 0;
    rv = unwrap(s, kek, blob, n, readable, 2, &copy);
    leaked = 0;
    if (rv == CKR_OK) {
        CK_ATTRIBUTE va = {CKA_VALUE, got, 16};
        leaked = f->C_GetAttributeValue(s, copy, &va, 1) == CKR_OK && memcmp(got, secret, 16) == 0;
    }
    LEAK_NOTE(leaked, "re-import");
    CHECK("re-import attack fails: unwrapping as readable under a key that can wrap is CKR_TEMPLATE_INCONSISTENT",
          rv == CKR_TEMPLATE_INCONSISTENT && !leaked);
    CHECK("a non-sensitive unextractable unwrap (pkcs11-tool --unwrap's template) is allowed",
          unwrap(s, kek, blob, n, unreadable, 1, &copy) == CKR_OK);

    /* Attack 6 (re-imported wrapping key): wrap an extractable KEK W, unwrap
     * it as W' with DECRYPT, wrap S under W, decrypt with W'. */
    CK_OBJECT_HANDLE W = gen_aes(s, no, no, yes, no, yes);
    CK_ULONG wn = 0;
    rv = wrap(s, kek, W, blob, &wn);
    leaked = 0;
    if (rv == CKR_OK) {
        CK_ATTRIBUTE decflag[] = {{CKA_DECRYPT, &yes, 1}, {CKA_WRAP, &no, 1}, {CKA_UNWRAP, &no, 1}};
        CK_OBJECT_HANDLE Wp = 0;
        unsigned char sblob[64];
        CK_ULONG sn;
        if (unwrap(s, kek, blob, wn, decflag, 3, &Wp) == CKR_OK && wrap(s, W, S, sblob, &sn) == CKR_OK)
            leaked = kw_open_with_decrypt(s, Wp, sblob, got) && memcmp(got, secret, 16) == 0;
    }
    LEAK_NOTE(leaked, "the re-imported wrapping key");
    CHECK("re-imported-wrapping-key attack fails: a sensitive key that can wrap is not wrapped (CKR_KEY_NOT_WRAPPABLE)",
          rv == CKR_KEY_NOT_WRAPPABLE && !leaked);

    /* Attack 7 (derive from the wrapping key, found by the third-party
     * re-run of 2026-11-24): a generated wrap-only key D with CKA_DERIVE
     * wraps S; CKM_XOR_BASE_AND_DATA with zero data (or
     * CKM_EXTRACT_KEY_FROM_KEY at bit 0) gives a key of D's value with
     * CKA_DECRYPT, which opens the blob. */
    {
        CK_ULONG len = 32;
        CK_ATTRIBUTE dt[7] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &no, 1}, {CKA_DECRYPT, &no, 1},
                              {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &no, 1}, {CKA_DERIVE, &yes, 1}};
        CK_MECHANISM gm = {CKM_AES_KEY_GEN, NULL, 0};
        CK_OBJECT_HANDLE D = 0, Dd = 0;
        unsigned char zeros[32] = {0};
        CK_KEY_DERIVATION_STRING_DATA sd = {zeros, 32};
        CK_MECHANISM xm = {CKM_XOR_BASE_AND_DATA, &sd, sizeof sd};
        CK_ATTRIBUTE ut[5] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                              {CKA_VALUE_LEN, &len, sizeof len}, {CKA_DECRYPT, &yes, 1}};
        CK_ULONG un = PUBLIC_SLOT(ut, 4);
        CK_RV grv = f->C_GenerateKey(s, &gm, dt, PUBLIC_SLOT(dt, 6), &D);
        rv = grv == CKR_OK ? wrap(s, D, S, blob, &n) : grv;
        leaked = rv == CKR_OK && f->C_DeriveKey(s, &xm, D, ut, un, &Dd) == CKR_OK &&
                 kw_open_with_decrypt(s, Dd, blob, got) && memcmp(got, secret, 16) == 0;
        LEAK_NOTE(leaked, "derive from the wrapping key");
        CHECK("derive-from-wrapping-key attack fails: a key that can derive does not wrap sensitive keys (CKR_KEY_NOT_WRAPPABLE)",
              grv == CKR_OK && rv == CKR_KEY_NOT_WRAPPABLE && !leaked);
        /* The same after the wrap: K2 (wrap-only, no DERIVE) wrapped S above;
         * CKA_DERIVE cannot be switched on, on it or on a copy. */
        CHECK("K2 wraps S again", wrap(s, K2, S, blob, &n) == CKR_OK && n == 24);
        CK_ATTRIBUTE der_on[] = {{CKA_DERIVE, &yes, 1}};
        CK_OBJECT_HANDLE K2d = 0;
        CK_RV srv = f->C_SetAttributeValue(s, K2, der_on, 1);
        CK_RV crv = f->C_CopyObject(s, K2, der_on, 1, &K2d);
        leaked = (srv == CKR_OK && f->C_DeriveKey(s, &xm, K2, ut, un, &Dd) == CKR_OK &&
                  kw_open_with_decrypt(s, Dd, blob, got) && memcmp(got, secret, 16) == 0) ||
                 (crv == CKR_OK && f->C_DeriveKey(s, &xm, K2d, ut, un, &Dd) == CKR_OK &&
                  kw_open_with_decrypt(s, Dd, blob, got) && memcmp(got, secret, 16) == 0);
        LEAK_NOTE(leaked, "CKA_DERIVE switched on after the wrap");
        CHECK("CKA_DERIVE on a secret key is fixed: C_SetAttributeValue and C_CopyObject are CKR_ATTRIBUTE_READ_ONLY",
              srv == CKR_ATTRIBUTE_READ_ONLY && crv == CKR_ATTRIBUTE_READ_ONLY && !leaked);
    }

    /* python-pkcs11's test_rsa test_key_wrap: an ordinary RSA pair (the
     * private key can DECRYPT and UNWRAP) unwraps a readable key wrapped to
     * its public half: C_Decrypt would open the blob anyway. Without
     * CKA_DECRYPT the private key keeps rule 4. */
    {
        CK_MECHANISM rg = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
        CK_ULONG bits = 1024;
        CK_ATTRIBUTE pt[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_WRAP, &yes, 1}, {CKA_ENCRYPT, &yes, 1}};
        CK_ATTRIBUTE dec[3] = {{CKA_UNWRAP, &yes, 1}, {CKA_DECRYPT, &yes, 1}};
        CK_ATTRIBUTE nodec[3] = {{CKA_UNWRAP, &yes, 1}, {CKA_DECRYPT, &no, 1}};
        CK_ULONG dn = PUBLIC_SLOT(dec, 2), nn = PUBLIC_SLOT(nodec, 2);
        CK_OBJECT_HANDLE pub1 = 0, priv1 = 0, pub2 = 0, priv2 = 0, back = 0;
        CK_RSA_PKCS_OAEP_PARAMS op = {CKM_SHA256, CKG_MGF1_SHA256, 0, NULL, 0};
        CK_MECHANISM om = {CKM_RSA_PKCS_OAEP, &op, sizeof op};
        CK_ATTRIBUTE rt[5] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                              {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
        CK_ULONG rtn = PUBLIC_SLOT(rt, 4);
        unsigned char rb[256], v[16] = {0};
        CK_ULONG rn = sizeof rb;
        CK_ATTRIBUTE va = {CKA_VALUE, v, 16};
        int made = f->C_GenerateKeyPair(s, &rg, pt, 3, dec, dn, &pub1, &priv1) == CKR_OK &&
                   f->C_GenerateKeyPair(s, &rg, pt, 3, nodec, nn, &pub2, &priv2) == CKR_OK;
        CK_RV urv = made && f->C_WrapKey(s, &om, pub1, open, rb, &rn) == CKR_OK
                        ? f->C_UnwrapKey(s, &om, priv1, rb, rn, rt, rtn, &back) : CKR_GENERAL_ERROR;
        CHECK("an RSA private key with DECRYPT+UNWRAP unwraps a readable key (OAEP) with its value",
              urv == CKR_OK && f->C_GetAttributeValue(s, back, &va, 1) == CKR_OK && memcmp(v, secret, 16) == 0);
        rn = sizeof rb;
        urv = made && f->C_WrapKey(s, &om, pub2, open, rb, &rn) == CKR_OK
                  ? f->C_UnwrapKey(s, &om, priv2, rb, rn, rt, rtn, &back) : CKR_GENERAL_ERROR;
        CHECK("one without CKA_DECRYPT keeps rule 4: a readable key is CKR_TEMPLATE_INCONSISTENT",
              urv == CKR_TEMPLATE_INCONSISTENT);
    }
}

/* ---- keys born public in a session (issue 29) ---- */

/* A secret or private key made as a session object with CKA_PRIVATE=false is a public object of
 * the session: made and used without a login, alive after C_Logout. A token key stays refused; a
 * private key never becomes public (copy, set, a key derived from it) nor is wrapped under a
 * public key; then every attack of wrap_policy runs again with public session keys, no login. */
static void public_session_keys(CK_SLOT_ID slot, const char *pin) {
    CK_SESSION_HANDLE s;
    CK_MECHANISM gm = {CKM_AES_KEY_GEN, NULL, 0}, ecgen = {CKM_EC_KEY_PAIR_GEN, NULL, 0}, ecdsa = {CKM_ECDSA, NULL, 0};
    CK_ULONG len = 32;
    CHECK("issue 29: a session for the public-key checks", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) == CKR_OK);
    f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    public_keys = 1;
    CK_OBJECT_HANDLE pub = gen_aes(s, yes, yes, no, no, no), kek = gen_aes(s, no, no, yes, yes, no);
    public_keys = 0;
    CK_OBJECT_HANDLE priv = gen_aes(s, yes, yes, no, no, yes);
    CHECK("logged in, a session AES key with CKA_PRIVATE=false is made, and says CKA_PRIVATE false",
          pub && priv && get_bool(s, pub, CKA_PRIVATE) == 0 && get_bool(s, priv, CKA_PRIVATE) == 1);
    CK_ATTRIBUTE tok[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &no, 1}};
    CK_OBJECT_HANDLE h = 0;
    CHECK("a token AES key with CKA_PRIVATE=false stays CKR_TEMPLATE_INCONSISTENT",
          f->C_GenerateKey(s, &gm, tok, 3, &h) == CKR_TEMPLATE_INCONSISTENT);
    unsigned char blob[64];
    CK_ULONG n;
    CHECK("a private key is not wrapped under a public session KEK (CKR_KEY_NOT_WRAPPABLE), a public one is",
          wrap(s, kek, priv, blob, &n) == CKR_KEY_NOT_WRAPPABLE && gen_aes(s, no, no, no, no, yes) &&
          (public_keys = 1, h = gen_aes(s, yes, no, no, no, yes), public_keys = 0, wrap(s, kek, h, blob, &n) == CKR_OK));
    CK_ATTRIBUTE pubt[] = {{CKA_PRIVATE, &no, 1}};
    CK_OBJECT_HANDLE c = 0;
    CHECK("a private key is not copied or set public (CKR_TEMPLATE_INCONSISTENT)",
          f->C_CopyObject(s, priv, pubt, 1, &c) == CKR_TEMPLATE_INCONSISTENT &&
          f->C_SetAttributeValue(s, priv, pubt, 1) == CKR_TEMPLATE_INCONSISTENT);
    {
        CK_ATTRIBUTE dt[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_DERIVE, &yes, 1}};
        CK_OBJECT_HANDLE D = 0, Dd = 0;
        unsigned char zeros[32] = {0};
        CK_KEY_DERIVATION_STRING_DATA sd = {zeros, 32};
        CK_MECHANISM xm = {CKM_XOR_BASE_AND_DATA, &sd, sizeof sd};
        CK_ATTRIBUTE ut[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type},
                             {CKA_VALUE_LEN, &len, sizeof len}, {CKA_PRIVATE, &no, 1}};
        CHECK("a key of a private key's value (XOR with zeros) is not made public (CKR_TEMPLATE_INCONSISTENT)",
              f->C_GenerateKey(s, &gm, dt, 2, &D) == CKR_OK && f->C_DeriveKey(s, &xm, D, ut, 4, &Dd) == CKR_TEMPLATE_INCONSISTENT);
    }
    CHECK("C_Logout", f->C_Logout(s) == CKR_OK);
    unsigned char in[16] = "public after all", out[16], back[16];
    CHECK("after C_Logout the public session key still encrypts and decrypts",
          aes_block(s, pub, 1, in, out) && aes_block(s, pub, 0, out, back) && memcmp(in, back, 16) == 0);
    CK_MECHANISM cbc = {CKM_AES_CBC, in, 16};
    CHECK("the private one is CKR_USER_NOT_LOGGED_IN", f->C_EncryptInit(s, &cbc, priv) == CKR_USER_NOT_LOGGED_IN);
    /* No login at all from here (pkcs11test's way). */
    CK_BYTE p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE ept[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_VERIFY, &yes, 1}, {CKA_PRIVATE, &no, 1}};
    CK_ATTRIBUTE eprt[] = {{CKA_SIGN, &yes, 1}, {CKA_PRIVATE, &no, 1}};
    CK_OBJECT_HANDLE ep = 0, ek = 0;
    unsigned char dg[32] = {7}, sig[64];
    CK_ULONG sn = sizeof sig;
    CHECK("without a login, a public session EC pair is generated, signs and verifies",
          f->C_GenerateKeyPair(s, &ecgen, ept, 3, eprt, 2, &ep, &ek) == CKR_OK && f->C_SignInit(s, &ecdsa, ek) == CKR_OK &&
          f->C_Sign(s, dg, 32, sig, &sn) == CKR_OK && f->C_VerifyInit(s, &ecdsa, ep) == CKR_OK &&
          f->C_Verify(s, dg, 32, sig, sn) == CKR_OK);
    CK_ATTRIBUTE noflag[] = {{CKA_VALUE_LEN, &len, sizeof len}};
    CHECK("without a login, a session key with no CKA_PRIVATE (private by default) is CKR_USER_NOT_LOGGED_IN",
          f->C_GenerateKey(s, &gm, noflag, 1, &h) == CKR_USER_NOT_LOGGED_IN);
    public_keys = 1;
    wrap_policy(s);
    public_keys = 0;
    f->C_CloseSession(s);
}

/* ---- CKA_ALLOWED_MECHANISMS (base §4.7, Common key attributes) ---- */

/* A key whose list does not name the mechanism cannot be used with it at
 * any Init that takes the key (CKR_MECHANISM_INVALID, as SoftHSM2 answers);
 * an empty list allows everything; the list is stored, read back, copied
 * and changed. */
static void allowed_mechanisms(CK_SESSION_HANDLE s) {
    CK_MECHANISM_TYPE cbc[] = {CKM_AES_CBC_PAD, CKM_AES_KEY_WRAP_PAD};
    CK_ULONG len = 16;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1},
                        {CKA_WRAP, &no, 1}, {CKA_UNWRAP, &yes, 1}, {CKA_DERIVE, &yes, 1},
                        {CKA_ALLOWED_MECHANISMS, cbc, sizeof cbc}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE k = 0;
    CK_RV rv = f->C_GenerateKey(s, &gen, t, 7, &k);
    CHECK("C_GenerateKey with CKA_ALLOWED_MECHANISMS {AES_CBC_PAD, AES_KEY_WRAP_PAD}", rv == CKR_OK);
    if (rv != CKR_OK) { printf("  rv 0x%lx\n", rv); return; }

    CK_MECHANISM_TYPE back[4] = {0};
    CK_ATTRIBUTE q = {CKA_ALLOWED_MECHANISMS, NULL, 0};
    rv = f->C_GetAttributeValue(s, k, &q, 1);
    CHECK("C_GetAttributeValue(CKA_ALLOWED_MECHANISMS) length is 2 CK_MECHANISM_TYPEs",
          rv == CKR_OK && q.ulValueLen == sizeof cbc);
    q.pValue = back; q.ulValueLen = sizeof back;
    rv = f->C_GetAttributeValue(s, k, &q, 1);
    CHECK("the list reads back as given", rv == CKR_OK && q.ulValueLen == sizeof cbc &&
          back[0] == CKM_AES_CBC_PAD && back[1] == CKM_AES_KEY_WRAP_PAD);

    unsigned char iv[16] = {0};
    CK_MECHANISM ecb = {CKM_AES_ECB, NULL, 0}, pad = {CKM_AES_CBC_PAD, iv, 16}, ctr_m = {CKM_AES_KEY_WRAP, NULL, 0};
    CHECK("C_EncryptInit(AES_ECB) with a key that allows only CBC_PAD/KEY_WRAP_PAD is CKR_MECHANISM_INVALID",
          f->C_EncryptInit(s, &ecb, k) == CKR_MECHANISM_INVALID);
    CHECK("C_DecryptInit(AES_ECB) is CKR_MECHANISM_INVALID", f->C_DecryptInit(s, &ecb, k) == CKR_MECHANISM_INVALID);
    rv = f->C_EncryptInit(s, &pad, k);
    CHECK("C_EncryptInit(AES_CBC_PAD), a listed mechanism, works", rv == CKR_OK);
    if (rv == CKR_OK) f->C_EncryptInit(s, NULL, k);
    rv = f->C_DecryptInit(s, &pad, k);
    CHECK("C_DecryptInit(AES_CBC_PAD) works", rv == CKR_OK);
    if (rv == CKR_OK) f->C_DecryptInit(s, NULL, k);
    CK_MECHANISM gcm_m = {CKM_AES_GCM, NULL, 0};
    CHECK("C_MessageEncryptInit(AES_GCM) is CKR_MECHANISM_INVALID",
          f->C_MessageEncryptInit(s, &gcm_m, k) == CKR_MECHANISM_INVALID);
    CHECK("C_MessageDecryptInit(AES_GCM) is CKR_MECHANISM_INVALID",
          f->C_MessageDecryptInit(s, &gcm_m, k) == CKR_MECHANISM_INVALID);

    /* C_UnwrapKey: the unwrapping key's list names KEY_WRAP_PAD, not KEY_WRAP. */
    unsigned char blob[24] = {0};
    CK_ATTRIBUTE ut[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &aes_type, sizeof aes_type}};
    CK_OBJECT_HANDLE u = 0;
    CHECK("C_UnwrapKey(AES_KEY_WRAP) under it is CKR_MECHANISM_INVALID",
          f->C_UnwrapKey(s, &ctr_m, k, blob, sizeof blob, ut, 2, &u) == CKR_MECHANISM_INVALID);

    /* C_DeriveKey: the base key's list names neither. */
    unsigned char data[16] = {1};
    CK_KEY_DERIVATION_STRING_DATA sd = {data, sizeof data};
    CK_MECHANISM concat = {CKM_CONCATENATE_BASE_AND_DATA, &sd, sizeof sd};
    CK_KEY_TYPE gs = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE dt[] = {{CKA_CLASS, &secret_class, sizeof secret_class}, {CKA_KEY_TYPE, &gs, sizeof gs}};
    CK_OBJECT_HANDLE d = 0;
    CHECK("C_DeriveKey(CONCATENATE_BASE_AND_DATA) from it is CKR_MECHANISM_INVALID",
          f->C_DeriveKey(s, &concat, k, dt, 2, &d) == CKR_MECHANISM_INVALID);

    /* C_DigestKey: the digest's mechanism must be listed too. */
    CK_MECHANISM sha = {CKM_SHA256, NULL, 0};
    rv = f->C_DigestInit(s, &sha);
    CHECK("C_DigestKey of it under SHA256 is CKR_MECHANISM_INVALID",
          rv == CKR_OK && f->C_DigestKey(s, k) == CKR_MECHANISM_INVALID);
    f->C_DigestInit(s, NULL);

    /* C_SetAttributeValue changes the list (no footnote in the table: modifiable). */
    CK_MECHANISM_TYPE ecb_only[] = {CKM_AES_ECB, CKM_SHA256, CKM_CONCATENATE_BASE_AND_DATA};
    CK_ATTRIBUTE set = {CKA_ALLOWED_MECHANISMS, ecb_only, sizeof ecb_only};
    rv = f->C_SetAttributeValue(s, k, &set, 1);
    CHECK("C_SetAttributeValue(CKA_ALLOWED_MECHANISMS) works", rv == CKR_OK);
    rv = f->C_EncryptInit(s, &ecb, k);
    CHECK("after it, C_EncryptInit(AES_ECB) works", rv == CKR_OK);
    if (rv == CKR_OK) f->C_EncryptInit(s, NULL, k);
    CHECK("and C_EncryptInit(AES_CBC_PAD) is CKR_MECHANISM_INVALID",
          f->C_EncryptInit(s, &pad, k) == CKR_MECHANISM_INVALID);
    rv = f->C_DeriveKey(s, &concat, k, dt, 2, &d);
    CHECK("and C_DeriveKey(CONCATENATE_BASE_AND_DATA) works", rv == CKR_OK);
    rv = f->C_DigestInit(s, &sha);
    CHECK("and C_DigestKey under SHA256 works", rv == CKR_OK && f->C_DigestKey(s, k) == CKR_OK);
    f->C_DigestInit(s, NULL);

    CK_ATTRIBUTE none = {CKA_ALLOWED_MECHANISMS, NULL, 0};
    rv = f->C_SetAttributeValue(s, k, &none, 1);
    CHECK("an empty list allows every mechanism", rv == CKR_OK && f->C_EncryptInit(s, &pad, k) == CKR_OK);
    f->C_EncryptInit(s, NULL, k);

    CK_MECHANISM_TYPE odd[1] = {CKM_AES_ECB};
    CK_ATTRIBUTE bad = {CKA_ALLOWED_MECHANISMS, odd, 5};
    CHECK("a value that is no CK_MECHANISM_TYPE array is CKR_ATTRIBUTE_VALUE_INVALID",
          f->C_SetAttributeValue(s, k, &bad, 1) == CKR_ATTRIBUTE_VALUE_INVALID);

    /* C_CopyObject carries and takes the list. */
    CK_MECHANISM_TYPE only_pad[] = {CKM_AES_CBC_PAD};
    CK_ATTRIBUTE ct = {CKA_ALLOWED_MECHANISMS, only_pad, sizeof only_pad};
    CK_OBJECT_HANDLE c = 0;
    rv = f->C_CopyObject(s, k, &ct, 1, &c);
    CHECK("C_CopyObject with CKA_ALLOWED_MECHANISMS: the copy refuses AES_ECB",
          rv == CKR_OK && f->C_EncryptInit(s, &ecb, c) == CKR_MECHANISM_INVALID);

    /* Sign, verify and the recover functions: an RSA pair whose private half allows SHA256_RSA_PKCS only. */
    CK_ULONG bits = 1024;
    CK_MECHANISM_TYPE sig[] = {CKM_SHA256_RSA_PKCS};
    CK_ATTRIBUTE pub[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_VERIFY, &yes, 1},
                          {CKA_VERIFY_RECOVER, &yes, 1}, {CKA_ALLOWED_MECHANISMS, sig, sizeof sig}};
    CK_ATTRIBUTE priv[] = {{CKA_SIGN, &yes, 1}, {CKA_SIGN_RECOVER, &yes, 1}, {CKA_ALLOWED_MECHANISMS, sig, sizeof sig}};
    CK_MECHANISM rsagen = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
    CK_OBJECT_HANDLE hp = 0, hk = 0;
    rv = f->C_GenerateKeyPair(s, &rsagen, pub, 4, priv, 3, &hp, &hk);
    CHECK("C_GenerateKeyPair with CKA_ALLOWED_MECHANISMS on both halves", rv == CKR_OK);
    CK_MECHANISM pkcs = {CKM_RSA_PKCS, NULL, 0}, s256 = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CHECK("C_SignInit(RSA_PKCS) is CKR_MECHANISM_INVALID", f->C_SignInit(s, &pkcs, hk) == CKR_MECHANISM_INVALID);
    CHECK("C_VerifyInit(RSA_PKCS) is CKR_MECHANISM_INVALID", f->C_VerifyInit(s, &pkcs, hp) == CKR_MECHANISM_INVALID);
    CHECK("C_SignRecoverInit(RSA_PKCS) is CKR_MECHANISM_INVALID",
          f->C_SignRecoverInit(s, &pkcs, hk) == CKR_MECHANISM_INVALID);
    CHECK("C_VerifyRecoverInit(RSA_PKCS) is CKR_MECHANISM_INVALID",
          f->C_VerifyRecoverInit(s, &pkcs, hp) == CKR_MECHANISM_INVALID);
    rv = f->C_SignInit(s, &s256, hk);
    CHECK("C_SignInit(SHA256_RSA_PKCS) works", rv == CKR_OK);
    if (rv == CKR_OK) f->C_SignInit(s, NULL, hk);

    /* C_WrapKey: the wrapping key's list decides. A non-sensitive target (the wrap policy leaves it alone). */
    CK_MECHANISM_TYPE kwp[] = {CKM_AES_KEY_WRAP_PAD};
    CK_ATTRIBUTE wt[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_WRAP, &yes, 1}, {CKA_DECRYPT, &no, 1},
                         {CKA_ALLOWED_MECHANISMS, kwp, sizeof kwp}};
    CK_OBJECT_HANDLE w = 0;
    rv = f->C_GenerateKey(s, &gen, wt, 4, &w);
    CK_ATTRIBUTE tt[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_OBJECT_HANDLE target = 0;
    if (rv == CKR_OK) rv = f->C_GenerateKey(s, &gen, tt, 3, &target);
    CHECK("a wrapping key that allows AES_KEY_WRAP_PAD only, and a key to wrap", rv == CKR_OK);
    unsigned char wrapped[64];
    CK_ULONG wn = sizeof wrapped;
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0}, kwpad = {CKM_AES_KEY_WRAP_PAD, NULL, 0};
    CHECK("C_WrapKey(AES_KEY_WRAP) is CKR_MECHANISM_INVALID",
          f->C_WrapKey(s, &kw, w, target, wrapped, &wn) == CKR_MECHANISM_INVALID);
    wn = sizeof wrapped;
    CHECK("C_WrapKey(AES_KEY_WRAP_PAD) works", f->C_WrapKey(s, &kwpad, w, target, wrapped, &wn) == CKR_OK);
}

int main(int argc, char **argv) {
    const char *pin = getenv("KS_TEST_PIN"), *so_pin = getenv("KS_TEST_SO_PIN");
    if (argc < 4 || !pin || !so_pin) {
        printf("usage: KS_TEST_PIN=.. KS_TEST_SO_PIN=.. conformance MODULE MAJOR MINOR\n0 passed, 1 failed\n");
        return 1;
    }
    if (!(f = harness_load(argv[1]))) return 1;

    CHECK("before C_Initialize a bad session is CKR_CRYPTOKI_NOT_INITIALIZED",
          f->C_EncryptInit(BAD, NULL, 0) == CKR_CRYPTOKI_NOT_INITIALIZED &&
          f->C_Login(BAD, CKU_USER, NULL, 0) == CKR_CRYPTOKI_NOT_INITIALIZED);
    CHECK("C_Initialize", f->C_Initialize(NULL) == CKR_OK);
    CK_SLOT_ID slot = harness_make_token(f, "conformance", so_pin, pin);
    CHECK("a token made with C_InitToken and C_InitPIN", slot != 0);
    versions_and_flags(slot, atoi(argv[2]), atoi(argv[3]));
    argument_order();

    CK_SESSION_HANDLE s;
    CHECK("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) == CKR_OK);
    login_null_pin(s, slot, pin);
    rsa_sizes(s, slot);
    CK_OBJECT_HANDLE key = gen_aes(s, yes, yes, no, no, no);
    CK_OBJECT_HANDLE mac = 0;
    {
        CK_ULONG len = 32;
        CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_SIGN, &yes, 1}, {CKA_VERIFY, &yes, 1}};
        CK_MECHANISM m = {CKM_GENERIC_SECRET_KEY_GEN, NULL, 0};
        f->C_GenerateKey(s, &m, t, 3, &mac);
    }
    CHECK("keys for the operation checks", key && mac);
    termination(s, key, mac);
    /* Each later group in a session of its own, so a failure above (an
     * operation left active) cannot spill into it. Keys are session objects
     * of `s`, visible to every session of the token. */
    CK_SESSION_HANDLE s2, s3, s4;
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s2);
    gcm(s2, key);
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s3);
    defaults(s3);
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s4);
    wrap_policy(s4);
    CK_SESSION_HANDLE s5;
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s5);
    allowed_mechanisms(s5);
    f->C_CloseSession(s5);
    f->C_CloseSession(s4); f->C_CloseSession(s3); f->C_CloseSession(s2);
    f->C_CloseSession(s);
    public_session_keys(slot, pin);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
