/* libFuzzer harness for the module's template and mechanism-parameter decoding
 * (issue 8), through the real C entry points of an ASan-built
 * libkeyshare-pkcs11.so (KEYSHARE_FUZZ_MODULE). The first input byte picks the
 * call; the rest is decoded into a CK_ATTRIBUTE template or a CK_MECHANISM.
 * Pointers the caller owns are always valid with truthful lengths (a lying
 * caller is outside the contract); everything else is the fuzzer's. Parameter
 * structs that carry pointers (OAEP, GCM, ECDH1) are built with pointers into
 * the input. Without -DFUZZ_MAIN_REPLAY this is a libFuzzer target; with it, a
 * plain program that replays files (Tests/fuzz/replay.sh, make test).
 * Setup (token "fuzz", PIN 1234-user, keys) is done by Tests/fuzz/run-fuzz.sh.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST *f;
static CK_SESSION_HANDLE s;
static CK_OBJECT_HANDLE objs[32];
static CK_ULONG nobjs;

static const CK_ATTRIBUTE_TYPE types[] = {
    CKA_CLASS, CKA_TOKEN, CKA_PRIVATE, CKA_LABEL, CKA_APPLICATION, CKA_VALUE, CKA_OBJECT_ID,
    CKA_CERTIFICATE_TYPE, CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_KEY_TYPE, CKA_SUBJECT, CKA_ID,
    CKA_SENSITIVE, CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP, CKA_SIGN, CKA_VERIFY, CKA_DERIVE,
    CKA_MODULUS, CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT, CKA_PRIME_1,
    CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT, CKA_VALUE_LEN, CKA_EXTRACTABLE,
    CKA_LOCAL, CKA_NEVER_EXTRACTABLE, CKA_ALWAYS_SENSITIVE, CKA_MODIFIABLE, CKA_COPYABLE,
    CKA_DESTROYABLE, CKA_EC_PARAMS, CKA_EC_POINT, CKA_ALWAYS_AUTHENTICATE, CKA_UNIQUE_ID,
    CKA_CERTIFICATE_CATEGORY, CKA_TRUSTED, CKA_START_DATE, CKA_END_DATE, CKA_ALLOWED_MECHANISMS,
    CKA_URL, CKA_HASH_OF_SUBJECT_PUBLIC_KEY, CKA_KEY_GEN_MECHANISM, 0x80004B53UL /* CKA_KEYSHARE_PKCS8 */,
};
static const CK_MECHANISM_TYPE mechs[] = {
    CKM_RSA_PKCS, CKM_RSA_X_509, CKM_SHA256_RSA_PKCS, CKM_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS,
    CKM_SHA512_RSA_PKCS_PSS, CKM_RSA_PKCS_OAEP, CKM_ECDSA, CKM_ECDSA_SHA256, CKM_ECDSA_SHA384,
    CKM_EDDSA, CKM_SHA256, CKM_SHA_1, CKM_SHA256_HMAC, CKM_AES_ECB, CKM_AES_CBC, CKM_AES_CBC_PAD,
    CKM_AES_GCM, CKM_AES_KEY_WRAP, CKM_AES_KEY_WRAP_PAD, CKM_ECDH1_DERIVE, CKM_AES_KEY_GEN,
    CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_EC_KEY_PAIR_GEN, CKM_GENERIC_SECRET_KEY_GEN, CKM_AES_CTR,
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct in { const uint8_t *p; size_t n; };
static unsigned take(struct in *in) { if (!in->n) return 0; in->n--; return *in->p++; }
static const uint8_t *take_bytes(struct in *in, size_t *len) {
    if (*len > in->n) *len = in->n;
    const uint8_t *p = in->p; in->p += *len; in->n -= *len; return p;
}

/* Up to 16 attributes: a type (a known one, or 4 raw bytes), a length byte, the value. */
static CK_ULONG template_from(struct in *in, CK_ATTRIBUTE *t, uint8_t store[16][256]) {
    CK_ULONG n = take(in) % 17;
    for (CK_ULONG i = 0; i < n; i++) {
        unsigned sel = take(in);
        CK_ATTRIBUTE_TYPE type = types[sel % COUNT(types)];
        if (sel >= 0xF0) { type = 0; for (int k = 0; k < 4; k++) type = type << 8 | take(in); }
        if (type & CKF_ARRAY_ATTRIBUTE && type != CKA_ALLOWED_MECHANISMS) type = CKA_LABEL;  /* nested pointers */
        size_t len = take(in);
        const uint8_t *v = take_bytes(in, &len);
        memcpy(store[i], v, len);
        t[i].type = type;
        t[i].pValue = (len == 0 && (sel & 1)) ? NULL : store[i];
        t[i].ulValueLen = len;
    }
    return n;
}

/* A mechanism: known type or raw, parameter raw bytes, or a pointer-carrying struct built properly. */
static void mechanism_from(struct in *in, CK_MECHANISM *m, uint8_t *buf, size_t cap) {
    unsigned sel = take(in);
    m->mechanism = mechs[sel % COUNT(mechs)];
    if (sel >= 0xF8) { m->mechanism = 0; for (int k = 0; k < 4; k++) m->mechanism = m->mechanism << 8 | take(in); }
    size_t len = take(in) % cap;
    const uint8_t *v = take_bytes(in, &len);
    memcpy(buf, v, len);
    m->pParameter = len || (sel & 1) ? buf : NULL;
    m->ulParameterLen = len;
    /* The three parameter structs the module decodes that carry pointers are always built
       here with valid pointers and truthful lengths (raw bytes there would be a lying caller,
       as the first crash input of this harness was); a wrong ulParameterLen is still tried. */
    static CK_RSA_PKCS_OAEP_PARAMS oaep; static CK_GCM_PARAMS gcm; static CK_ECDH1_DERIVE_PARAMS ecdh;
    static uint8_t extra[512];
    size_t half = len / 2;
    unsigned shape = take(in);
    CK_ULONG wrong = (shape & 0x80) ? (shape & 1 ? 1 : (CK_ULONG)-1) : 0;   /* 0: exact size */
    if (m->mechanism == CKM_RSA_PKCS_OAEP) {
        oaep = (CK_RSA_PKCS_OAEP_PARAMS){take(in) % 8 + 0x250, take(in) % 5, take(in) & 1, buf, half};
        m->pParameter = &oaep; m->ulParameterLen = sizeof oaep - (wrong == 1);
    } else if (m->mechanism == CKM_AES_GCM) {
        memcpy(extra, buf, len);
        gcm = (CK_GCM_PARAMS){extra, half, (shape & 2) ? half * 8 : take(in), extra + half, len - half, take(in)};
        m->pParameter = &gcm; m->ulParameterLen = sizeof gcm - (wrong == 1);
    } else if (m->mechanism == CKM_ECDH1_DERIVE) {
        ecdh = (CK_ECDH1_DERIVE_PARAMS){take(in) % 3, half, buf, len - half, buf + half};
        m->pParameter = &ecdh; m->ulParameterLen = sizeof ecdh - (wrong == 1);
    }
}

static void drain(void) { CK_OBJECT_HANDLE h[8]; CK_ULONG n; while (f->C_FindObjects(s, h, 8, &n) == CKR_OK && n) {} f->C_FindObjectsFinal(s); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *module = getenv("KEYSHARE_FUZZ_MODULE");
    void *h = module ? dlopen(module, RTLD_NOW) : NULL;
    if (!h) { fprintf(stderr, "set KEYSHARE_FUZZ_MODULE: %s\n", module ? dlerror() : ""); exit(2); }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) exit(2);
    CK_SLOT_ID slots[8]; CK_ULONG n = 8;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK || n < 2) { fprintf(stderr, "no token\n"); exit(2); }
    if (f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) exit(2);
    if (f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)"1234-user", 9) != CKR_OK) { fprintf(stderr, "login\n"); exit(2); }
    f->C_FindObjectsInit(s, NULL, 0);
    f->C_FindObjects(s, objs, 32, &nobjs);
    f->C_FindObjectsFinal(s);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct in in = {data, size};
    CK_ATTRIBUTE t[16]; static uint8_t store[16][256];
    CK_MECHANISM m; static uint8_t param[512];
    uint8_t out[2048]; CK_ULONG outlen = sizeof out;
    CK_OBJECT_HANDLE key = nobjs ? objs[take(&in) % nobjs] : 0, h = 0, h2 = 0;
    switch (take(&in) % 10) {
    case 0: { CK_ULONG n = template_from(&in, t, store);
        if (f->C_CreateObject(s, t, n, &h) == CKR_OK) f->C_DestroyObject(s, h);
        break; }
    case 1: { CK_ULONG n = template_from(&in, t, store);
        if (f->C_FindObjectsInit(s, t, n) == CKR_OK) drain();
        break; }
    case 2: { CK_ULONG n = template_from(&in, t, store);   /* lengths are the buffers' real sizes */
        for (CK_ULONG i = 0; i < n; i++) t[i].ulValueLen = t[i].pValue ? 256 : 0;
        f->C_GetAttributeValue(s, key, t, n); break; }
    case 3: mechanism_from(&in, &m, param, sizeof param);
        if (f->C_SignInit(s, &m, key) == CKR_OK) f->C_Sign(s, (CK_BYTE_PTR)"0123456789abcdef0123456789abcdef", 32, out, &outlen);
        break;
    case 4: mechanism_from(&in, &m, param, sizeof param);
        if (f->C_VerifyInit(s, &m, key) == CKR_OK) f->C_Verify(s, (CK_BYTE_PTR)"data", 4, out, 64);
        break;
    case 5: mechanism_from(&in, &m, param, sizeof param);
        if (f->C_EncryptInit(s, &m, key) == CKR_OK) f->C_Encrypt(s, (CK_BYTE_PTR)"0123456789abcdef", 16, out, &outlen);
        break;
    case 6: mechanism_from(&in, &m, param, sizeof param);
        if (f->C_DecryptInit(s, &m, key) == CKR_OK) f->C_Decrypt(s, param, 16, out, &outlen);
        break;
    case 7: { mechanism_from(&in, &m, param, sizeof param); CK_ULONG n = template_from(&in, t, store);
        if (f->C_GenerateKey(s, &m, t, n, &h) == CKR_OK) f->C_DestroyObject(s, h);
        if (f->C_GenerateKeyPair(s, &m, t, n / 2, t + n / 2, n - n / 2, &h, &h2) == CKR_OK) { f->C_DestroyObject(s, h); f->C_DestroyObject(s, h2); }
        break; }
    case 8: { mechanism_from(&in, &m, param, sizeof param); CK_ULONG n = template_from(&in, t, store);
        CK_OBJECT_HANDLE other = nobjs ? objs[take(&in) % nobjs] : 0;
        f->C_WrapKey(s, &m, key, other, out, &outlen);
        if (f->C_UnwrapKey(s, &m, key, param, take(&in), t, n, &h) == CKR_OK) f->C_DestroyObject(s, h);
        if (f->C_DeriveKey(s, &m, key, t, n, &h) == CKR_OK) f->C_DestroyObject(s, h);
        break; }
    case 9: { CK_ULONG n = template_from(&in, t, store);   /* set attributes on a fresh session object */
        CK_OBJECT_CLASS dc = CKO_DATA; CK_ATTRIBUTE base[] = {{CKA_CLASS, &dc, sizeof dc}};
        if (f->C_CreateObject(s, base, 1, &h) == CKR_OK) {
            f->C_SetAttributeValue(s, h, t, n);
            if (f->C_CopyObject(s, h, t, n, &h2) == CKR_OK) f->C_DestroyObject(s, h2);
            f->C_DestroyObject(s, h);
        }
        break; }
    }
    return 0;
}

#ifdef FUZZ_MAIN_REPLAY
/* Replay mode: each argument is an input file (a corpus entry or a crash reproducer). */
int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb"); if (!fp) continue;
        static uint8_t buf[1 << 16]; size_t len = fread(buf, 1, sizeof buf, fp); fclose(fp);
        LLVMFuzzerTestOneInput(buf, len); n++;
    }
    f->C_Finalize(NULL);
    printf("replayed %d inputs\n", n);
    return 0;
}
#endif
