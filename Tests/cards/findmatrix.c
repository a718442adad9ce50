/*
 * findmatrix: do the find templates that work on one key also work on another?
 *
 *   findmatrix MODULE TOKEN_LABEL CLASS KEY_ID_HEX [TOKEN_LABEL2 KEY_ID_HEX2]
 *
 * Logs in (PIN from $KEYSHARE_TEST_PIN, and $KEYSHARE_TEST_PIN2 for the second
 * token), finds the key of class CLASS (private|public|cert) with CKA_ID
 * KEY_ID_HEX, and reads each attribute a consumer may search by. For every
 * attribute the key answers, C_FindObjects with {CKA_CLASS, that attribute}
 * must return the key; so must {CKA_CLASS, CKA_ID, attribute} and the
 * templates libp11, NSS, p11-kit and OpenSSH are known to send. With a second
 * key (a native one), every attribute the native key answers must be answered
 * by the first key too (the value may differ). Prints one line per failure
 * and "findmatrix: N templates, M failures"; exits 1 on a failure.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit-1/p11-kit/pkcs11.h>

#ifndef CKA_UNIQUE_ID
#define CKA_UNIQUE_ID 0x4UL
#endif
#ifndef CKA_PUBLIC_KEY_INFO
#define CKA_PUBLIC_KEY_INFO 0x129UL
#endif

static CK_FUNCTION_LIST_PTR f;

struct name { CK_ATTRIBUTE_TYPE type; const char *name; };
/* What consumers search keys by (values read from the key itself). */
static const struct name searchable[] = {
    {CKA_TOKEN, "CKA_TOKEN"}, {CKA_PRIVATE, "CKA_PRIVATE"}, {CKA_LABEL, "CKA_LABEL"}, {CKA_ID, "CKA_ID"},
    {CKA_KEY_TYPE, "CKA_KEY_TYPE"}, {CKA_SUBJECT, "CKA_SUBJECT"}, {CKA_SIGN, "CKA_SIGN"},
    {CKA_DECRYPT, "CKA_DECRYPT"}, {CKA_DERIVE, "CKA_DERIVE"}, {CKA_UNWRAP, "CKA_UNWRAP"},
    {CKA_SIGN_RECOVER, "CKA_SIGN_RECOVER"}, {CKA_VERIFY, "CKA_VERIFY"}, {CKA_ENCRYPT, "CKA_ENCRYPT"},
    {CKA_WRAP, "CKA_WRAP"}, {CKA_SENSITIVE, "CKA_SENSITIVE"}, {CKA_EXTRACTABLE, "CKA_EXTRACTABLE"},
    {CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE"}, {CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE"},
    {CKA_LOCAL, "CKA_LOCAL"}, {CKA_MODIFIABLE, "CKA_MODIFIABLE"}, {CKA_ALWAYS_AUTHENTICATE, "CKA_ALWAYS_AUTHENTICATE"},
    {CKA_WRAP_WITH_TRUSTED, "CKA_WRAP_WITH_TRUSTED"}, {CKA_KEY_GEN_MECHANISM, "CKA_KEY_GEN_MECHANISM"},
    {CKA_MODULUS, "CKA_MODULUS"}, {CKA_MODULUS_BITS, "CKA_MODULUS_BITS"}, {CKA_PUBLIC_EXPONENT, "CKA_PUBLIC_EXPONENT"},
    {CKA_EC_PARAMS, "CKA_EC_PARAMS"}, {CKA_EC_POINT, "CKA_EC_POINT"}, {CKA_PUBLIC_KEY_INFO, "CKA_PUBLIC_KEY_INFO"},
    {CKA_UNIQUE_ID, "CKA_UNIQUE_ID"}, {CKA_START_DATE, "CKA_START_DATE"}, {CKA_END_DATE, "CKA_END_DATE"},
    {CKA_VALUE, "CKA_VALUE"}, {CKA_ISSUER, "CKA_ISSUER"}, {CKA_SERIAL_NUMBER, "CKA_SERIAL_NUMBER"},
    {CKA_CERTIFICATE_TYPE, "CKA_CERTIFICATE_TYPE"},
};
#define NSEARCH (sizeof searchable / sizeof searchable[0])

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static CK_ULONG unhex(const char *s, CK_BYTE *out) {
    CK_ULONG n = 0;
    for (; s[0] && s[1]; s += 2) out[n++] = (CK_BYTE)(hexval(s[0]) << 4 | hexval(s[1]));
    return n;
}

static CK_SESSION_HANDLE open_logged_in(const char *label, const char *pinvar) {
    CK_SLOT_ID slots[64];
    CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return CK_INVALID_HANDLE;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t len = strlen(label);
        if (len > 32 || memcmp(ti.label, label, len) != 0 || (len < 32 && ti.label[len] != ' ')) continue;
        CK_SESSION_HANDLE s;
        if (f->C_OpenSession(slots[i], CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return CK_INVALID_HANDLE;
        const char *pin = getenv(pinvar);
        if (pin == NULL) { fprintf(stderr, "findmatrix: $%s is not set\n", pinvar); exit(2); }
        CK_RV rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, (CK_ULONG)strlen(pin));
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) { fprintf(stderr, "findmatrix: C_Login 0x%lx\n", rv); exit(2); }
        return s;
    }
    return CK_INVALID_HANDLE;
}

/* Handles matching the template (at most 256). */
static CK_ULONG find(CK_SESSION_HANDLE s, CK_ATTRIBUTE *t, CK_ULONG count, CK_OBJECT_HANDLE *out) {
    if (f->C_FindObjectsInit(s, t, count) != CKR_OK) return 0;
    CK_ULONG n = 0;
    if (f->C_FindObjects(s, out, 256, &n) != CKR_OK) n = 0;
    f->C_FindObjectsFinal(s);
    return n;
}

static CK_OBJECT_HANDLE find_key(CK_SESSION_HANDLE s, CK_OBJECT_CLASS *cls, CK_BYTE *id, CK_ULONG idlen) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, cls, sizeof *cls}, {CKA_ID, id, idlen}};
    CK_OBJECT_HANDLE h[256];
    return find(s, t, 2, h) >= 1 ? h[0] : CK_INVALID_HANDLE;
}

/* The value of one attribute, or NULL when the object does not answer it. */
static CK_BYTE *value(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE type, CK_ULONG *len) {
    CK_ATTRIBUTE a = {type, NULL, 0};
    if (f->C_GetAttributeValue(s, o, &a, 1) != CKR_OK || a.ulValueLen == CK_UNAVAILABLE_INFORMATION) return NULL;
    CK_BYTE *v = malloc(a.ulValueLen + 1);
    a.pValue = v;
    if (f->C_GetAttributeValue(s, o, &a, 1) != CKR_OK) { free(v); return NULL; }
    *len = a.ulValueLen;
    return v;
}

static int contains(CK_OBJECT_HANDLE *h, CK_ULONG n, CK_OBJECT_HANDLE o) {
    for (CK_ULONG i = 0; i < n; i++) if (h[i] == o) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 7) {
        fprintf(stderr, "usage: findmatrix MODULE TOKEN CLASS ID_HEX [TOKEN2 ID_HEX2]\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    CK_RV (*get)(CK_FUNCTION_LIST_PTR_PTR) = (CK_RV (*)(CK_FUNCTION_LIST_PTR_PTR))dlsym(lib, "C_GetFunctionList");
    if (!get || get(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) { fprintf(stderr, "findmatrix: cannot initialise\n"); return 2; }
    CK_OBJECT_CLASS cls = !strcmp(argv[3], "private") ? CKO_PRIVATE_KEY : !strcmp(argv[3], "public") ? CKO_PUBLIC_KEY : CKO_CERTIFICATE;
    CK_BYTE id[128], id2[128];
    CK_ULONG idlen = unhex(argv[4], id);
    CK_SESSION_HANDLE s = open_logged_in(argv[2], "KEYSHARE_TEST_PIN");
    if (s == CK_INVALID_HANDLE) { fprintf(stderr, "findmatrix: no token %s\n", argv[2]); return 2; }
    CK_OBJECT_HANDLE key = find_key(s, &cls, id, idlen);
    if (key == CK_INVALID_HANDLE) { fprintf(stderr, "findmatrix: no %s object with CKA_ID %s on %s\n", argv[3], argv[4], argv[2]); return 1; }

    int templates = 0, failures = 0;
    for (size_t i = 0; i < NSEARCH; i++) {
        CK_ULONG len = 0;
        CK_BYTE *v = value(s, key, searchable[i].type, &len);
        if (v == NULL) continue;
        CK_OBJECT_HANDLE h[256];
        CK_ATTRIBUTE one[] = {{CKA_CLASS, &cls, sizeof cls}, {searchable[i].type, v, len}};
        templates++;
        if (!contains(h, find(s, one, 2, h), key)) { printf("not found by {CKA_CLASS, %s}\n", searchable[i].name); failures++; }
        CK_ATTRIBUTE two[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_ID, id, idlen}, {searchable[i].type, v, len}};
        templates++;
        if (!contains(h, find(s, two, 3, h), key)) { printf("not found by {CKA_CLASS, CKA_ID, %s}\n", searchable[i].name); failures++; }
        CK_ATTRIBUTE alone[] = {{searchable[i].type, v, len}};
        templates++;
        if (!contains(h, find(s, alone, 1, h), key)) { printf("not found by {%s}\n", searchable[i].name); failures++; }
        free(v);
    }
    /* Every key attribute answered together: what a consumer copying a key's
     * template back into a search sends. */
    {
        CK_ATTRIBUTE all[NSEARCH + 1];
        CK_ULONG n = 0;
        all[n++] = (CK_ATTRIBUTE){CKA_CLASS, &cls, sizeof cls};
        for (size_t i = 0; i < NSEARCH; i++) {
            CK_ULONG len = 0;
            CK_BYTE *v = value(s, key, searchable[i].type, &len);
            if (v) all[n++] = (CK_ATTRIBUTE){searchable[i].type, v, len};
        }
        CK_OBJECT_HANDLE h[256];
        templates++;
        if (!contains(h, find(s, all, n, h), key)) { printf("not found by all %lu attributes it answers\n", n); failures++; }
        for (CK_ULONG i = 1; i < n; i++) free(all[i].pValue);
    }
    if (argc == 7) {
        CK_ULONG id2len = unhex(argv[6], id2);
        CK_SESSION_HANDLE s2 = open_logged_in(argv[5], "KEYSHARE_TEST_PIN2");
        CK_OBJECT_HANDLE native = s2 == CK_INVALID_HANDLE ? CK_INVALID_HANDLE : find_key(s2, &cls, id2, id2len);
        if (native == CK_INVALID_HANDLE) { fprintf(stderr, "findmatrix: no reference key on %s\n", argv[5]); return 2; }
        for (size_t i = 0; i < NSEARCH; i++) {
            CK_ULONG l1 = 0, l2 = 0;
            CK_BYTE *vn = value(s2, native, searchable[i].type, &l2);
            if (vn == NULL) continue;
            CK_BYTE *vk = value(s, key, searchable[i].type, &l1);
            templates++;
            if (vk == NULL) { printf("%s: answered by the native key, not by this one\n", searchable[i].name); failures++; }
            /* Attributes that say what kind of object it is must agree. */
            else if ((searchable[i].type == CKA_PRIVATE || searchable[i].type == CKA_TOKEN || searchable[i].type == CKA_SENSITIVE
                      || searchable[i].type == CKA_KEY_TYPE || searchable[i].type == CKA_EXTRACTABLE)
                     && (l1 != l2 || memcmp(vk, vn, l1) != 0)) {
                printf("%s: differs from the native key's\n", searchable[i].name);
                failures++;
            }
            free(vn);
            free(vk);
        }
    }
    printf("findmatrix: %d templates, %d failures\n", templates, failures);
    f->C_Finalize(NULL);
    return failures == 0 ? 0 : 1;
}
