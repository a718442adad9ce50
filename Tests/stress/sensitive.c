/* Sensitive keys stay in (issue 8, Tests/integration/65-sensitive.sh): every
 * PKCS #11 path that could reveal a sensitive or non-extractable key, tried
 * through the module's C entry points. A mechanism the module reports as
 * unsupported (C_GetMechanismInfo) or refuses counts as a closed path; the
 * output says which paths were closed how, so gaps are visible.
 * Usage: KEYSHARE_TEST_PIN=PIN sensitive MODULE [lock]   Output: "ok - ..." / "FAIL - ..." lines.
 * The user PIN comes from the environment, never argv (`ps` shows every
 * argument to every local user).
 * With "lock", only sets CKA_EXTRACTABLE false on every private key (then
 * `keyshare export` must refuse them).
 */
#include <dlfcn.h>
#include <openssl/aes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST *f;
static CK_SESSION_HANDLE s;
static CK_SLOT_ID slot;
static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static const unsigned char secret[32] = "0123456789abcdef-SECRET-K1-value";

static int supported(CK_MECHANISM_TYPE m, CK_FLAGS need) {
    CK_MECHANISM_INFO mi;
    return f->C_GetMechanismInfo(slot, m, &mi) == CKR_OK && (mi.flags & need) == need;
}

/* A session AES key with a known value (the key an attacker wants). */
static CK_OBJECT_HANDLE make_secret(CK_BBOOL sensitive, CK_BBOOL extractable) {
    CK_OBJECT_CLASS c = CKO_SECRET_KEY; CK_KEY_TYPE kt = CKK_AES;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &c, sizeof c}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, (void *)secret, 32},
                        {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &extractable, 1}, {CKA_TOKEN, &no, 1}};
    CK_OBJECT_HANDLE h = 0;
    return f->C_CreateObject(s, t, 6, &h) == CKR_OK ? h : 0;
}

/* One raw AES block decryption through the module: AES-CBC with a zero IV on one block. */
static int aes_block_decrypt(CK_OBJECT_HANDLE key, const unsigned char in[16], unsigned char out[16]) {
    unsigned char iv[16] = {0}; CK_MECHANISM m = {CKM_AES_CBC, iv, 16}; CK_ULONG ol = 16;
    return f->C_DecryptInit(s, &m, key) == CKR_OK && f->C_Decrypt(s, (CK_BYTE_PTR)in, 16, out, &ol) == CKR_OK && ol == 16;
}

/* Tookan: RFC 3394 unwrap done by hand with the wrapping key's own C_Decrypt (AES-CBC, one
 * block at a time). Returns 1 when it recovers a key (the integrity value checks out). */
static int unwrap_with_decrypt(CK_OBJECT_HANDLE kek, const unsigned char *c, CK_ULONG len, unsigned char *key) {
    if (len < 24 || len % 8 || len > 264) return 0;
    int n = (int)(len / 8) - 1;
    unsigned char a[8], r[33][8], b[16];
    memcpy(a, c, 8);
    for (int i = 1; i <= n; i++) memcpy(r[i], c + 8 * i, 8);
    for (int j = 5; j >= 0; j--)
        for (int i = n; i >= 1; i--) {
            unsigned long t = (unsigned long)(n * j + i);
            memcpy(b, a, 8);
            for (int k = 0; k < 8; k++) b[7 - k] ^= (unsigned char)(t >> (8 * k));
            memcpy(b + 8, r[i], 8);
            if (!aes_block_decrypt(kek, b, b)) return 0;
            memcpy(a, b, 8); memcpy(r[i], b + 8, 8);
        }
    for (int k = 0; k < 8; k++) if (a[k] != 0xA6) return 0;
    for (int i = 1; i <= n; i++) memcpy(key + 8 * (i - 1), r[i], 8);
    return 1;
}

static int value_hidden(CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE type) {
    unsigned char buf[4096]; CK_ATTRIBUTE a = {type, buf, sizeof buf};
    CK_RV rv = f->C_GetAttributeValue(s, h, &a, 1);
    return (rv == CKR_ATTRIBUTE_SENSITIVE || rv == CKR_ATTRIBUTE_TYPE_INVALID) && a.ulValueLen == CK_UNAVAILABLE_INFORMATION;
}

static int contains(const unsigned char *hay, CK_ULONG n, const unsigned char *needle, CK_ULONG k) {
    for (CK_ULONG i = 0; i + k <= n; i++) if (!memcmp(hay + i, needle, k)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *pin = getenv("KEYSHARE_TEST_PIN");
    if (argc < 2 || !pin) {
        fprintf(stderr, "usage: KEYSHARE_TEST_PIN=PIN sensitive MODULE [lock]\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    CK_C_GetFunctionList gfl = h ? (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList") : NULL;
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) { printf("FAIL - load\n0 passed, 1 failed\n"); return 1; }
    CK_SLOT_ID slots[8]; CK_ULONG n = 8;
    f->C_GetSlotList(CK_TRUE, slots, &n);
    slot = slots[0];
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    CHECK("login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) == CKR_OK);
    if (argc > 2 && !strcmp(argv[2], "lock")) {
        CK_OBJECT_CLASS c = CKO_PRIVATE_KEY; CK_ATTRIBUTE q1[] = {{CKA_CLASS, &c, sizeof c}};
        CK_OBJECT_HANDLE ks[8]; CK_ULONG m = 0; int all = 1;
        f->C_FindObjectsInit(s, q1, 1); f->C_FindObjects(s, ks, 8, &m); f->C_FindObjectsFinal(s);
        CK_ATTRIBUTE ne = {CKA_EXTRACTABLE, &no, 1};
        for (CK_ULONG k = 0; k < m; k++) all &= f->C_SetAttributeValue(s, ks[k], &ne, 1) == CKR_OK;
        CHECK("CKA_EXTRACTABLE true->false allowed on every private key", m > 0 && all);
        f->C_Finalize(NULL);
        printf("%d passed, %d failed\n", pass, fail);
        return fail != 0;
    }

    /* Imported private key: components and the stored PKCS #8 never readable. */
    CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY; CK_ATTRIBUTE q[] = {{CKA_CLASS, &pc, sizeof pc}};
    CK_OBJECT_HANDLE keys[8]; n = 0;
    f->C_FindObjectsInit(s, q, 1); f->C_FindObjects(s, keys, 8, &n); f->C_FindObjectsFinal(s);
    CHECK("imported private keys found", n >= 2);
    int hidden = 1;
    CK_ATTRIBUTE_TYPE comps[] = {CKA_VALUE, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1,
                                 CKA_EXPONENT_2, CKA_COEFFICIENT, 0x80004B53UL};
    for (CK_ULONG k = 0; k < n; k++)
        for (size_t c = 0; c < sizeof comps / sizeof comps[0]; c++) hidden &= value_hidden(keys[k], comps[c]);
    CHECK("private key components and PKCS #8: SENSITIVE or TYPE_INVALID, length unavailable", hidden);
    CK_ATTRIBUTE unsens = {CKA_SENSITIVE, &no, 1};
    CHECK("private key: CKA_SENSITIVE cannot go back to false", n && f->C_SetAttributeValue(s, keys[0], &unsens, 1) != CKR_OK);
    CK_OBJECT_HANDLE copy = 0;
    CHECK("private key: copy as non-sensitive refused", n && f->C_CopyObject(s, keys[0], &unsens, 1, &copy) != CKR_OK);

    /* Secret keys: sensitive / non-extractable rules. */
    CK_OBJECT_HANDLE sens = make_secret(CK_TRUE, CK_TRUE), locked = make_secret(CK_TRUE, CK_FALSE), plain = make_secret(CK_FALSE, CK_TRUE);
    if (!sens || !locked || !plain) {
        printf("  (secret-key objects not supported by C_CreateObject: secret-key paths closed)\n");
    } else {
        unsigned char buf[64]; CK_ATTRIBUTE a = {CKA_VALUE, buf, sizeof buf};
        CHECK("non-sensitive secret readable (control)", f->C_GetAttributeValue(s, plain, &a, 1) == CKR_OK && a.ulValueLen == 32);
        CHECK("sensitive secret: CKA_VALUE hidden", value_hidden(sens, CKA_VALUE) && value_hidden(locked, CKA_VALUE));
        CHECK("CKA_SENSITIVE true->false refused", f->C_SetAttributeValue(s, sens, &unsens, 1) != CKR_OK && value_hidden(sens, CKA_VALUE));
        CK_ATTRIBUTE ext = {CKA_EXTRACTABLE, &yes, 1};
        CHECK("CKA_EXTRACTABLE false->true refused", f->C_SetAttributeValue(s, locked, &ext, 1) != CKR_OK);
        CHECK("copy of sensitive as non-sensitive refused", f->C_CopyObject(s, sens, &unsens, 1, &copy) != CKR_OK);
        CHECK("copy of non-extractable as extractable refused", f->C_CopyObject(s, locked, &ext, 1, &copy) != CKR_OK);
        copy = 0;
        if (f->C_CopyObject(s, sens, NULL, 0, &copy) == CKR_OK) CHECK("plain copy stays sensitive", value_hidden(copy, CKA_VALUE));
        CK_BBOOL as = 0, ne = 1; CK_ATTRIBUTE fl[] = {{CKA_ALWAYS_SENSITIVE, &as, 1}, {CKA_NEVER_EXTRACTABLE, &ne, 1}};
        CHECK("created (not generated) key: ALWAYS_SENSITIVE and NEVER_EXTRACTABLE false",
              f->C_GetAttributeValue(s, sens, fl, 2) == CKR_OK && !as && !ne);
        CK_ATTRIBUTE setas = {CKA_ALWAYS_SENSITIVE, &yes, 1};
        CHECK("CKA_ALWAYS_SENSITIVE is read-only", f->C_SetAttributeValue(s, sens, &setas, 1) != CKR_OK);

        /* Wrap paths. A wrapping key with WRAP and DECRYPT (Tookan): wrap K1, decrypt the blob. */
        CK_MECHANISM_TYPE wraps[] = {CKM_AES_KEY_WRAP, CKM_AES_KEY_WRAP_PAD, CKM_AES_CBC_PAD, CKM_AES_ECB, CKM_AES_CBC};
        const char *names[] = {"AES_KEY_WRAP", "AES_KEY_WRAP_PAD", "AES_CBC_PAD", "AES_ECB", "AES_CBC"};
        CK_OBJECT_HANDLE kek = 0;
        if (supported(CKM_AES_KEY_GEN, CKF_GENERATE)) {
            CK_ULONG len = 32;
            CK_ATTRIBUTE kt[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_WRAP, &yes, 1}, {CKA_DECRYPT, &yes, 1},
                                 {CKA_ENCRYPT, &yes, 1}, {CKA_UNWRAP, &yes, 1}, {CKA_TOKEN, &no, 1}};
            CK_MECHANISM gm = {CKM_AES_KEY_GEN, NULL, 0};
            if (f->C_GenerateKey(s, &gm, kt, 6, &kek) != CKR_OK) kek = 0;
        }
        for (size_t w = 0; w < sizeof wraps / sizeof wraps[0]; w++) {
            char name[160];
            if (!supported(wraps[w], CKF_WRAP) || !kek) {
                printf("ok   - %s: path closed (%s)\n", names[w], kek ? "mechanism has no CKF_WRAP" : "no AES key generation");
                pass++; continue;
            }
            unsigned char iv[16] = {0}, out[256], clear[256]; CK_ULONG ol = sizeof out, cl = sizeof clear;
            CK_MECHANISM m = {wraps[w], wraps[w] == CKM_AES_CBC_PAD || wraps[w] == CKM_AES_CBC ? iv : NULL,
                              wraps[w] == CKM_AES_CBC_PAD || wraps[w] == CKM_AES_CBC ? 16 : 0};
            snprintf(name, sizeof name, "%s: non-extractable key cannot be wrapped", names[w]);
            CHECK(name, f->C_WrapKey(s, &m, kek, locked, out, &ol) == CKR_KEY_UNEXTRACTABLE);
            ol = sizeof out;
            if (f->C_WrapKey(s, &m, kek, sens, out, &ol) != CKR_OK) {
                printf("ok   - %s: wrapping a sensitive key refused (closed)\n", names[w]); pass++; continue;
            }
            int leaked = 0;
            if (f->C_DecryptInit(s, &m, kek) == CKR_OK && f->C_Decrypt(s, out, ol, clear, &cl) == CKR_OK)
                leaked = contains(clear, cl, secret, 32);
            snprintf(name, sizeof name, "%s: wrap then C_Decrypt with the same key does not reveal the key", names[w]);
            CHECK(name, !leaked);
        }
        /* Tookan 1: a generated (unknown) key with WRAP and DECRYPT wraps K1 (RFC 3394); the
           caller then undoes the wrap block by block with the same key's C_Decrypt (AES-CBC). */
        if (kek && supported(CKM_AES_KEY_WRAP, CKF_WRAP)) {
            unsigned char out[64], got[64]; CK_ULONG ol = sizeof out;
            CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
            int leaked = f->C_WrapKey(s, &kw, kek, sens, out, &ol) == CKR_OK && unwrap_with_decrypt(kek, out, ol, got)
                         && !memcmp(got, secret, 32);
            CHECK("Tookan: AES_KEY_WRAP with a WRAP+DECRYPT key, then its AES-CBC C_Decrypt, does not reveal the key", !leaked);
        }
        /* Tookan 2: a wrapping key the caller knows (C_CreateObject with CKA_VALUE, WRAP and
           DECRYPT). PKCS #11 lets any wrapping key wrap a sensitive but extractable key; the
           spec's guard is CKA_WRAP_WITH_TRUSTED, so: with it set the wrap must fail; without it
           the wrap works (and the attack recovers the key: printed as the documented limit,
           and it is also the positive control of the hand-made unwrap above). */
        {
            static const unsigned char known[32] = "attacker-knows-this-32-byte-key!";
            CK_OBJECT_CLASS c = CKO_SECRET_KEY; CK_KEY_TYPE kt = CKK_AES;
            CK_ATTRIBUTE t[] = {{CKA_CLASS, &c, sizeof c}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, (void *)known, 32},
                                {CKA_WRAP, &yes, 1}, {CKA_DECRYPT, &yes, 1}, {CKA_TOKEN, &no, 1}};
            CK_OBJECT_HANDLE kk = 0; unsigned char out[64], got[64], got2[64]; CK_ULONG ol = sizeof out;
            CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
            int created = f->C_CreateObject(s, t, 6, &kk) == CKR_OK;
            if (created && supported(CKM_AES_KEY_WRAP, CKF_WRAP)) {
                CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
                CK_ATTRIBUTE tt[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, (void *)secret, 32},
                                     {CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_WRAP_WITH_TRUSTED, &yes, 1}, {CKA_TOKEN, &no, 1}};
                CK_OBJECT_HANDLE guarded = 0;
                CK_RV rv = f->C_CreateObject(s, tt, 7, &guarded);
                CHECK("CKA_WRAP_WITH_TRUSTED key: not wrappable under an untrusted key",
                      rv != CKR_OK || f->C_WrapKey(s, &kw, kk, guarded, out, &ol) != CKR_OK);
                ol = sizeof out;
                /* Control for the hand-made unwrap: a decrypt-only key undoes an OpenSSL wrap. */
                CK_ATTRIBUTE dt[] = {{CKA_CLASS, &c, sizeof c}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, (void *)known, 32},
                                     {CKA_DECRYPT, &yes, 1}, {CKA_TOKEN, &no, 1}};
                CK_OBJECT_HANDLE dk = 0; AES_KEY ek; unsigned char ctl[40], back[32];
                AES_set_encrypt_key(known, 256, &ek);
                CHECK("control: the hand-made RFC 3394 unwrap works through C_Decrypt",
                      f->C_CreateObject(s, dt, 5, &dk) == CKR_OK && AES_wrap_key(&ek, NULL, ctl, secret, 32) == 40
                      && unwrap_with_decrypt(dk, ctl, 40, back) && !memcmp(back, secret, 32));
                if (f->C_WrapKey(s, &kw, kk, sens, out, &ol) == CKR_OK) {
                    AES_KEY ak; AES_set_decrypt_key(known, 256, &ak);
                    int offline = AES_unwrap_key(&ak, NULL, got, out, (unsigned)ol) == 32 && !memcmp(got, secret, 32);
                    int by_hand = unwrap_with_decrypt(kk, out, ol, got2) && !memcmp(got2, secret, 32);
                    printf("  (limit, as PKCS #11 specifies: a sensitive but extractable key wraps under a caller-known key: "
                           "recovered offline %s, by C_Decrypt %s)\n", offline ? "yes" : "no", by_hand ? "yes" : "no");
                }
            }
        }
        /* RSA: wrap with a public key whose private half the caller can use to decrypt. */
        printf("  (RSA OAEP/PKCS wrap: %s)\n", supported(CKM_RSA_PKCS_OAEP, CKF_WRAP) || supported(CKM_RSA_PKCS, CKF_WRAP)
               ? "offered: see the generated-key checks" : "no CKF_WRAP: path closed");
    }

    /* A key generated by `keyshare key generate` (label gen-cli): ALWAYS_SENSITIVE, NEVER_EXTRACTABLE. */
    CK_ATTRIBUTE gq[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_LABEL, "gen-cli", 7}};
    CK_OBJECT_HANDLE gk; n = 0;
    f->C_FindObjectsInit(s, gq, 2); f->C_FindObjects(s, &gk, 1, &n); f->C_FindObjectsFinal(s);
    if (n == 1) {
        CK_BBOOL as = 0, ne = 0, ex = 1; CK_ATTRIBUTE fl[] = {{CKA_ALWAYS_SENSITIVE, &as, 1}, {CKA_NEVER_EXTRACTABLE, &ne, 1}, {CKA_EXTRACTABLE, &ex, 1}};
        CHECK("CLI-generated key: ALWAYS_SENSITIVE, NEVER_EXTRACTABLE true, EXTRACTABLE false",
              f->C_GetAttributeValue(s, gk, fl, 3) == CKR_OK && as && ne && !ex);
        CK_ATTRIBUTE ext = {CKA_EXTRACTABLE, &yes, 1};
        CHECK("CLI-generated key: cannot be made extractable", f->C_SetAttributeValue(s, gk, &ext, 1) != CKR_OK
              && f->C_CopyObject(s, gk, &ext, 1, &copy) != CKR_OK);
    }

    /* A key pair generated in the module: ALWAYS_SENSITIVE, NEVER_EXTRACTABLE, unwrappable. */
    if (supported(CKM_EC_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR)) {
        static const unsigned char p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
        CK_ATTRIBUTE pub[] = {{CKA_EC_PARAMS, (void *)p256, sizeof p256}, {CKA_TOKEN, &no, 1}};
        CK_ATTRIBUTE priv[] = {{CKA_SENSITIVE, &yes, 1}, {CKA_EXTRACTABLE, &no, 1}, {CKA_TOKEN, &no, 1}, {CKA_SIGN, &yes, 1}};
        CK_MECHANISM gm = {CKM_EC_KEY_PAIR_GEN, NULL, 0}; CK_OBJECT_HANDLE hp, hk;
        if (f->C_GenerateKeyPair(s, &gm, pub, 2, priv, 4, &hp, &hk) == CKR_OK) {
            CK_BBOOL as = 0, ne = 0; CK_ATTRIBUTE fl[] = {{CKA_ALWAYS_SENSITIVE, &as, 1}, {CKA_NEVER_EXTRACTABLE, &ne, 1}};
            CHECK("generated EC key: ALWAYS_SENSITIVE and NEVER_EXTRACTABLE true", f->C_GetAttributeValue(s, hk, fl, 2) == CKR_OK && as && ne);
            CHECK("generated EC key: CKA_VALUE hidden", value_hidden(hk, CKA_VALUE));
            CK_ATTRIBUTE ext = {CKA_EXTRACTABLE, &yes, 1};
            CHECK("generated EC key: copy as extractable refused", f->C_CopyObject(s, hk, &ext, 1, &copy) != CKR_OK);
        } else { fail++; printf("FAIL - EC key pair generation offered but failed\n"); }
    } else printf("  (CKM_EC_KEY_PAIR_GEN not offered: generated-key checks skipped)\n");
    f->C_Finalize(NULL);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
