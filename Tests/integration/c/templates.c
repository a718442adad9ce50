/* CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE and CKA_DERIVE_TEMPLATE through the
 * C ABI (Tests/integration/73-template-attrs.sh), written from PKCS #11 3.0:
 * the key tables (§4.8-4.10: which class has which), §5.7.5
 * C_GetAttributeValue's rules for an attribute whose value is an array of
 * attributes, §5.18.4 C_WrapKey (a key that does not match the wrapping
 * key's CKA_WRAP_TEMPLATE is not wrapped), §5.18.5 C_UnwrapKey and §5.18.6
 * C_DeriveKey (the key's template is added to the caller's; a conflict is
 * CKR_TEMPLATE_INCONSISTENT).
 *
 * The same program runs against SoftHSM2 (PEER=softhsm in the environment):
 * then the checks where the two differ on purpose print "DIFF" with
 * SoftHSM2's answer, and the two that would make SoftHSM2 read through a
 * NULL pointer are skipped (docs/pkcs11-conformance.md lists each).
 *
 * Usage: templates MODULE create|reopen LABEL, with KS_TEST_SO_PIN and
 * KS_TEST_PIN in the environment. `create` makes a token LABEL and runs every
 * check, leaving a token key with a CKA_WRAP_TEMPLATE; `reopen`, a new
 * process, reads it back. Ends with "N passed, M failed". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"
#include "harness.h"

static int pass, fail, diff;
static int softhsm;
static CK_FUNCTION_LIST_3_0 *f;
static CK_SESSION_HANDLE s;

/* On SoftHSM2 a check that does not hold is a difference (printed, listed
 * in the docs), not a failure of this module. */
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else if (softhsm) { diff++; printf("DIFF - %s (line %d)\n", name, __LINE__); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)
/* A check whose answer differs on SoftHSM2 on purpose: on SoftHSM2, print what it gave. */
#define CHECK_RV(name, got, want) do { CK_RV g_ = (got), w_ = (want); \
    if (g_ == w_) { pass++; printf("ok   - %s\n", name); } \
    else if (softhsm) { diff++; printf("DIFF - %s: SoftHSM2 gives 0x%lx, keyshare 0x%lx\n", name, g_, w_); } \
    else { fail++; printf("FAIL - %s: 0x%lx, want 0x%lx (line %d)\n", name, g_, w_, __LINE__); } } while (0)
#define SKIP_ON_SOFTHSM(name) if (softhsm) { printf("skip - %s (SoftHSM2 would read through a NULL pointer)\n", name); } else

static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
static CK_OBJECT_CLASS secret = CKO_SECRET_KEY, data_class = CKO_DATA;
static CK_KEY_TYPE aes = CKK_AES;
static CK_ULONG len16 = 16, len32 = 32;

/* The module's function list: its 3.0 interface, else (SoftHSM2 2.6 is a
 * 2.40 module) C_GetFunctionList's, whose layout the 3.0 list begins with;
 * only 2.40 functions are called here. */
static CK_FUNCTION_LIST_3_0 *load(const char *module) {
    void *h = dlopen(module, RTLD_NOW);
    if (!h) { printf("dlopen: %s\n0 passed, 1 failed\n", dlerror()); return NULL; }
    if (dlsym(h, "C_GetInterface")) return harness_load(module);
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR l = NULL;
    if (!gfl || gfl(&l) != CKR_OK) { printf("0 passed, 1 failed\n"); return NULL; }
    return (CK_FUNCTION_LIST_3_0 *)l;
}

/* The first slot with a token not yet initialised: C_InitToken on it with
 * LABEL, the SO sets the user PIN; the slot that then holds LABEL. */
static CK_SLOT_ID make_token(const char *label, const char *so, const char *pin) {
    CK_SLOT_ID slots[64]; CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return (CK_SLOT_ID)-1;
    CK_UTF8CHAR lab[32];
    memset(lab, ' ', 32); memcpy(lab, label, strlen(label));
    CK_SLOT_ID target = (CK_SLOT_ID)-1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && !(ti.flags & CKF_TOKEN_INITIALIZED)) { target = slots[i]; break; }
    }
    if (target == (CK_SLOT_ID)-1 || f->C_InitToken(target, (CK_UTF8CHAR_PTR)so, strlen(so), lab) != CKR_OK) return (CK_SLOT_ID)-1;
    n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return (CK_SLOT_ID)-1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && !memcmp(ti.label, lab, 32)) {
            CK_SESSION_HANDLE h;
            if (f->C_OpenSession(slots[i], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h) != CKR_OK) return (CK_SLOT_ID)-1;
            CK_RV rv = f->C_Login(h, CKU_SO, (CK_UTF8CHAR_PTR)so, strlen(so));
            if (rv == CKR_OK) rv = f->C_InitPIN(h, (CK_UTF8CHAR_PTR)pin, strlen(pin));
            f->C_CloseSession(h);
            return rv == CKR_OK ? slots[i] : (CK_SLOT_ID)-1;
        }
    }
    return (CK_SLOT_ID)-1;
}

static CK_SLOT_ID find_token(const char *label) {
    CK_SLOT_ID slots[64]; CK_ULONG n = 64;
    CK_UTF8CHAR lab[32];
    memset(lab, ' ', 32); memcpy(lab, label, strlen(label));
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return (CK_SLOT_ID)-1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && !memcmp(ti.label, lab, 32)) return slots[i];
    }
    return (CK_SLOT_ID)-1;
}

/* An AES key made from VALUE (16 bytes), extractable and not sensitive (so
 * the wrap/decrypt separation rules, which guard sensitive keys, stay out
 * of the way of the template rules), with CKA_ID `id` (NULL: none). */
static CK_OBJECT_HANDLE aes_key(const char *id, CK_BBOOL sensitive) {
    static unsigned char v[16] = "0123456789abcdef";
    CK_ATTRIBUTE t[8] = {
        {CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_VALUE, v, 16},
        {CKA_TOKEN, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}, {CKA_SENSITIVE, &sensitive, 1},
    };
    CK_ULONG n = 6;
    if (id) { t[n].type = CKA_ID; t[n].pValue = (void *)id; t[n].ulValueLen = strlen(id); n++; }
    CK_OBJECT_HANDLE h = 0;
    CK_RV rv = f->C_CreateObject(s, t, n, &h);
    return rv == CKR_OK ? h : 0;
}

/* C_GenerateKey AES-256 with WRAP/UNWRAP (no ENCRYPT/DECRYPT), plus EXTRA. */
static CK_RV wrapping_key(CK_ATTRIBUTE *extra, CK_ULONG nextra, CK_BBOOL token, CK_OBJECT_HANDLE *h) {
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_ATTRIBUTE t[16] = {
        {CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_VALUE_LEN, &len32, sizeof len32},
        {CKA_TOKEN, &token, 1}, {CKA_WRAP, &yes, 1}, {CKA_UNWRAP, &yes, 1}, {CKA_ENCRYPT, &no, 1},
        {CKA_DECRYPT, &no, 1}, {CKA_PRIVATE, &yes, 1},
    };
    CK_ULONG n = 9;
    for (CK_ULONG i = 0; i < nextra; i++) t[n++] = extra[i];
    return f->C_GenerateKey(s, &m, t, n, h);
}

static CK_RV get1(CK_OBJECT_HANDLE h, CK_ATTRIBUTE *a) { return f->C_GetAttributeValue(s, h, a, 1); }

static int label_is(CK_OBJECT_HANDLE h, const char *want) {
    char buf[64]; CK_ATTRIBUTE a = {CKA_LABEL, buf, sizeof buf};
    return get1(h, &a) == CKR_OK && a.ulValueLen == strlen(want) && !memcmp(buf, want, a.ulValueLen);
}

static CK_RV wrap(CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, unsigned char *out, CK_ULONG *n) {
    CK_MECHANISM m = {CKM_AES_KEY_WRAP, NULL, 0};
    return f->C_WrapKey(s, &m, w, k, out, n);
}

static CK_RV unwrap(CK_OBJECT_HANDLE w, unsigned char *blob, CK_ULONG n, CK_ATTRIBUTE *extra, CK_ULONG nextra,
                    CK_OBJECT_HANDLE *out) {
    CK_MECHANISM m = {CKM_AES_KEY_WRAP, NULL, 0};
    CK_ATTRIBUTE t[12] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_TOKEN, &no, 1}};
    CK_ULONG c = 3;
    for (CK_ULONG i = 0; i < nextra; i++) t[c++] = extra[i];
    return f->C_UnwrapKey(s, &m, w, blob, n, t, c, out);
}

static void check_getattribute(CK_OBJECT_HANDLE w) {
    /* W's CKA_WRAP_TEMPLATE is {CKA_CLASS = CKO_SECRET_KEY, CKA_ID = "wrap-ok"}. */
    const CK_ULONG two = 2 * sizeof(CK_ATTRIBUTE);
    CK_ATTRIBUTE a = {CKA_WRAP_TEMPLATE, NULL, 0};
    CK_RV rv = get1(w, &a);
    CHECK("§5.7.5 pValue NULL: ulValueLen = 2 x sizeof(CK_ATTRIBUTE), CKR_OK", rv == CKR_OK && a.ulValueLen == two);

    CK_ATTRIBUTE one[1] = {{0, NULL, 0}};
    a.pValue = one; a.ulValueLen = sizeof one;
    rv = get1(w, &a);
    CHECK("§5.7.5 room for 1 of 2 entries: CKR_BUFFER_TOO_SMALL, ulValueLen CK_UNAVAILABLE_INFORMATION",
          rv == CKR_BUFFER_TOO_SMALL && a.ulValueLen == CK_UNAVAILABLE_INFORMATION);

    CK_ATTRIBUTE in[3];
    for (int i = 0; i < 3; i++) { in[i].type = 0xdeadUL; in[i].pValue = NULL; in[i].ulValueLen = 0; }
    a.pValue = in; a.ulValueLen = sizeof in;
    rv = get1(w, &a);
    CHECK("§5.7.5 inner pValue NULL: CKR_OK, inner lengths (8, 7) and types set, outer length 2 entries",
          rv == CKR_OK && a.ulValueLen == two && in[0].type == CKA_CLASS && in[0].ulValueLen == sizeof(CK_ULONG) &&
          in[1].type == CKA_ID && in[1].ulValueLen == 7);

    CK_ULONG cls = 0; char small[3] = {0};
    in[0].type = in[1].type = 0xdeadUL;
    in[0].pValue = &cls; in[0].ulValueLen = sizeof cls;
    in[1].pValue = small; in[1].ulValueLen = sizeof small;
    a.pValue = in; a.ulValueLen = two;
    rv = get1(w, &a);
    CHECK("§5.7.5 an inner buffer too small: CKR_BUFFER_TOO_SMALL, it CK_UNAVAILABLE_INFORMATION, the other copied",
          rv == CKR_BUFFER_TOO_SMALL && in[1].ulValueLen == CK_UNAVAILABLE_INFORMATION && in[0].ulValueLen == sizeof cls &&
          cls == CKO_SECRET_KEY && in[1].type == CKA_ID);

    char id[16] = {0}; cls = 0;
    in[0].pValue = &cls; in[0].ulValueLen = sizeof cls;
    in[1].pValue = id; in[1].ulValueLen = sizeof id;
    CK_ATTRIBUTE two_attrs[2] = {{CKA_WRAP_TEMPLATE, in, 3 * sizeof(CK_ATTRIBUTE)}, {CKA_LABEL, NULL, 0}};
    rv = f->C_GetAttributeValue(s, w, two_attrs, 2);
    CHECK("§5.7.5 room for all: CKR_OK, values copied, outer ulValueLen = 2 entries (a 3-entry buffer given)",
          rv == CKR_OK && two_attrs[0].ulValueLen == two && cls == CKO_SECRET_KEY && in[1].ulValueLen == 7 &&
          !memcmp(id, "wrap-ok", 7) && two_attrs[1].ulValueLen != CK_UNAVAILABLE_INFORMATION);

    CK_ATTRIBUTE u = {CKA_UNWRAP_TEMPLATE, NULL, 0};
    rv = get1(w, &u);
    CHECK("CKA_UNWRAP_TEMPLATE length query: 1 entry", rv == CKR_OK && u.ulValueLen == sizeof(CK_ATTRIBUTE));
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: templates MODULE create|reopen LABEL\n"); return 2; }
    const char *so = getenv("KS_TEST_SO_PIN"), *pin = getenv("KS_TEST_PIN");
    softhsm = getenv("PEER") && !strcmp(getenv("PEER"), "softhsm");
    if (!so || !pin) { printf("0 passed, 1 failed\n"); return 1; }
    if (!(f = load(argv[1]))) return 1;
    if (f->C_Initialize(NULL) != CKR_OK) { printf("C_Initialize failed\n0 passed, 1 failed\n"); return 1; }
    int reopen = !strcmp(argv[2], "reopen");
    CK_SLOT_ID slot = reopen ? find_token(argv[3]) : make_token(argv[3], so, pin);
    if (slot == (CK_SLOT_ID)-1 || f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK ||
        f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) {
        printf("no token\n0 passed, 1 failed\n");
        return 1;
    }
    CK_RV rv;
    char persist_label[] = "tmpl-persist";

    if (reopen) {
        /* The token key `create` left, read back by a new process. */
        CK_ATTRIBUTE q[] = {{CKA_LABEL, persist_label, strlen(persist_label)}};
        CK_OBJECT_HANDLE h = 0; CK_ULONG n = 0;
        rv = f->C_FindObjectsInit(s, q, 1);
        if (rv == CKR_OK) rv = f->C_FindObjects(s, &h, 1, &n);
        f->C_FindObjectsFinal(s);
        CHECK("reopen: the token key with a CKA_WRAP_TEMPLATE is found", rv == CKR_OK && n == 1);
        check_getattribute(h);
        f->C_Finalize(NULL);
        printf("%d passed, %d failed\n", pass, fail);
        return fail != 0;
    }

    /* ---- accepted, on the classes that have them --------------------------------- */
    CK_ULONG nclass = CKO_SECRET_KEY;
    CK_ATTRIBUTE wt[] = {{CKA_CLASS, &nclass, sizeof nclass}, {CKA_ID, "wrap-ok", 7}};
    CK_ATTRIBUTE ut[] = {{CKA_LABEL, "from-W", 6}};
    CK_ATTRIBUTE extra[] = {{CKA_WRAP_TEMPLATE, wt, sizeof wt}, {CKA_UNWRAP_TEMPLATE, ut, sizeof ut},
                            {CKA_LABEL, persist_label, strlen(persist_label)}};
    CK_OBJECT_HANDLE w = 0, wt_token = 0;
    rv = wrapping_key(extra, 2, CK_FALSE, &w);
    CHECK("C_GenerateKey AES with CKA_WRAP_TEMPLATE and CKA_UNWRAP_TEMPLATE: CKR_OK", rv == CKR_OK);
    rv = wrapping_key(extra, 3, CK_TRUE, &wt_token);
    CHECK("C_GenerateKey of a token key with them: CKR_OK", rv == CKR_OK);
    if (w) check_getattribute(w);

    CK_ATTRIBUTE plain = {CKA_WRAP_TEMPLATE, NULL, 0};
    CK_OBJECT_HANDLE k_none = aes_key(NULL, CK_FALSE);
    rv = get1(k_none, &plain);
    CHECK("a key made without one: CKA_WRAP_TEMPLATE is empty (length 0), CKR_OK", rv == CKR_OK && plain.ulValueLen == 0);

    static unsigned char v[16] = "0123456789abcdef";
    CK_ATTRIBUTE created[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_VALUE, v, 16},
                              {CKA_TOKEN, &no, 1}, {CKA_DERIVE_TEMPLATE, ut, sizeof ut}};
    CK_OBJECT_HANDLE hc = 0;
    rv = f->C_CreateObject(s, created, 5, &hc);
    CHECK_RV("C_CreateObject AES with CKA_DERIVE_TEMPLATE: CKR_OK", rv, CKR_OK);

    CK_ATTRIBUTE data_t[] = {{CKA_CLASS, &data_class, sizeof data_class}, {CKA_TOKEN, &no, 1},
                             {CKA_WRAP_TEMPLATE, wt, sizeof wt}};
    CK_OBJECT_HANDLE hd = 0;
    rv = f->C_CreateObject(s, data_t, 3, &hd);
    CHECK_RV("C_CreateObject CKO_DATA with CKA_WRAP_TEMPLATE: CKR_ATTRIBUTE_TYPE_INVALID", rv, CKR_ATTRIBUTE_TYPE_INVALID);

    /* Key pair: the public key may carry CKA_WRAP_TEMPLATE, the private key
     * CKA_UNWRAP_TEMPLATE and CKA_DERIVE_TEMPLATE; not the other way round. */
    CK_MECHANISM ecgen = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    static unsigned char p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE pub[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_TOKEN, &no, 1}, {CKA_WRAP_TEMPLATE, wt, sizeof wt}};
    CK_ATTRIBUTE priv[] = {{CKA_TOKEN, &no, 1}, {CKA_DERIVE, &yes, 1}, {CKA_UNWRAP_TEMPLATE, ut, sizeof ut},
                           {CKA_DERIVE_TEMPLATE, ut, sizeof ut}};
    CK_OBJECT_HANDLE hpub = 0, hpriv = 0;
    rv = f->C_GenerateKeyPair(s, &ecgen, pub, 3, priv, 4, &hpub, &hpriv);
    CHECK_RV("C_GenerateKeyPair EC: CKA_WRAP_TEMPLATE on the public, UNWRAP/DERIVE_TEMPLATE on the private: CKR_OK", rv, CKR_OK);
    if (rv == CKR_OK) {
        CK_ATTRIBUTE q = {CKA_DERIVE_TEMPLATE, NULL, 0};
        CHECK("the private key's CKA_DERIVE_TEMPLATE reads back (1 entry)",
              get1(hpriv, &q) == CKR_OK && q.ulValueLen == sizeof(CK_ATTRIBUTE));
    }
    CK_ATTRIBUTE pub_bad[] = {{CKA_EC_PARAMS, p256, sizeof p256}, {CKA_TOKEN, &no, 1}, {CKA_UNWRAP_TEMPLATE, ut, sizeof ut}};
    CK_ATTRIBUTE priv_ok[] = {{CKA_TOKEN, &no, 1}};
    rv = f->C_GenerateKeyPair(s, &ecgen, pub_bad, 3, priv_ok, 1, &hpub, &hpriv);
    CHECK_RV("CKA_UNWRAP_TEMPLATE on a public key: CKR_ATTRIBUTE_TYPE_INVALID", rv, CKR_ATTRIBUTE_TYPE_INVALID);

    /* ---- the nested template is checked -------------------------------------- */
    CK_OBJECT_HANDLE hx = 0;
    CK_ATTRIBUTE odd[] = {{CKA_WRAP_TEMPLATE, wt, sizeof wt - 1}};
    rv = wrapping_key(odd, 1, CK_FALSE, &hx);
    CHECK_RV("ulValueLen not a multiple of sizeof(CK_ATTRIBUTE): CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    CK_ATTRIBUTE inner_tpl[] = {{CKA_UNWRAP_TEMPLATE, ut, sizeof ut}};
    CK_ATTRIBUTE nested[] = {{CKA_WRAP_TEMPLATE, inner_tpl, sizeof inner_tpl}};
    rv = wrapping_key(nested, 1, CK_FALSE, &hx);
    CHECK_RV("a template inside a template: CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    CK_ULONG four = 1;
    CK_ATTRIBUTE badbool[] = {{CKA_EXTRACTABLE, &four, sizeof four}};
    CK_ATTRIBUTE bb[] = {{CKA_WRAP_TEMPLATE, badbool, sizeof badbool}};
    rv = wrapping_key(bb, 1, CK_FALSE, &hx);
    CHECK_RV("an inner CK_BBOOL of 8 bytes: CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    CK_ATTRIBUTE unknown[] = {{0x7ffff123UL, "x", 1}};
    CK_ATTRIBUTE uk[] = {{CKA_WRAP_TEMPLATE, unknown, sizeof unknown}};
    rv = wrapping_key(uk, 1, CK_FALSE, &hx);
    CHECK_RV("an inner attribute type no object has: CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    SKIP_ON_SOFTHSM("an inner value with a length and a NULL pointer: CKR_ATTRIBUTE_VALUE_INVALID") {
        CK_ATTRIBUTE nullv[] = {{CKA_ID, NULL, 4}};
        CK_ATTRIBUTE nv[] = {{CKA_WRAP_TEMPLATE, nullv, sizeof nullv}};
        rv = wrapping_key(nv, 1, CK_FALSE, &hx);
        CHECK_RV("an inner value with a length and a NULL pointer: CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    }
    SKIP_ON_SOFTHSM("the template's own pointer NULL with a length: CKR_ARGUMENTS_BAD") {
        CK_ATTRIBUTE np[] = {{CKA_WRAP_TEMPLATE, NULL, 2 * sizeof(CK_ATTRIBUTE)}};
        rv = wrapping_key(np, 1, CK_FALSE, &hx);
        CHECK_RV("the template's own pointer NULL with a length: CKR_ARGUMENTS_BAD", rv, CKR_ARGUMENTS_BAD);
    }
    CK_ATTRIBUTE many[65];
    for (int i = 0; i < 65; i++) { many[i].type = CKA_ID; many[i].pValue = "a"; many[i].ulValueLen = 1; }
    CK_ATTRIBUTE mt[] = {{CKA_WRAP_TEMPLATE, many, sizeof many}};
    rv = wrapping_key(mt, 1, CK_FALSE, &hx);
    CHECK_RV("65 inner attributes (the bound is 64): CKR_ATTRIBUTE_VALUE_INVALID", rv, CKR_ATTRIBUTE_VALUE_INVALID);
    CK_ATTRIBUTE empty_t[] = {{CKA_WRAP_TEMPLATE, NULL, 0}};
    rv = wrapping_key(empty_t, 1, CK_FALSE, &hx);
    CHECK("an empty template (NULL, 0): CKR_OK", rv == CKR_OK);

    /* ---- changes, copies, searches -------------------------------------------- */
    CK_ATTRIBUTE set[] = {{CKA_WRAP_TEMPLATE, ut, sizeof ut}};
    rv = f->C_SetAttributeValue(s, w, set, 1);
    CHECK_RV("C_SetAttributeValue CKA_WRAP_TEMPLATE: CKR_ATTRIBUTE_READ_ONLY (fixed at creation)", rv, CKR_ATTRIBUTE_READ_ONLY);
    CK_OBJECT_HANDLE copy = 0;
    rv = f->C_CopyObject(s, w, set, 1, &copy);
    CHECK_RV("C_CopyObject changing CKA_WRAP_TEMPLATE: CKR_ATTRIBUTE_READ_ONLY", rv, CKR_ATTRIBUTE_READ_ONLY);
    rv = f->C_CopyObject(s, w, NULL, 0, &copy);
    CK_ATTRIBUTE cq = {CKA_WRAP_TEMPLATE, NULL, 0};
    CHECK("C_CopyObject keeps the template (2 entries)",
          rv == CKR_OK && get1(copy, &cq) == CKR_OK && cq.ulValueLen == 2 * sizeof(CK_ATTRIBUTE));
    CK_ATTRIBUTE fq[] = {{CKA_WRAP_TEMPLATE, wt, sizeof wt}};
    CK_OBJECT_HANDLE found[8]; CK_ULONG nf = 99;
    rv = f->C_FindObjectsInit(s, fq, 1);
    CK_RV rv2 = rv == CKR_OK ? f->C_FindObjects(s, found, 8, &nf) : rv;
    f->C_FindObjectsFinal(s);
    CHECK("C_FindObjects with CKA_WRAP_TEMPLATE in the template: CKR_OK, no object (as SoftHSM2)",
          rv == CKR_OK && rv2 == CKR_OK && nf == 0);

    /* ---- C_WrapKey: the key to wrap must match CKA_WRAP_TEMPLATE ------------------ */
    CK_OBJECT_HANDLE k_ok = aes_key("wrap-ok", CK_FALSE), k_other = aes_key("other", CK_FALSE);
    unsigned char blob[64]; CK_ULONG nb = sizeof blob;
    rv = wrap(w, k_ok, blob, &nb);
    CHECK("C_WrapKey of a key matching the template: CKR_OK", rv == CKR_OK && nb == 24);
    unsigned char blob2[64]; CK_ULONG nb2 = sizeof blob2;
    CHECK("C_WrapKey of a key with another CKA_ID: CKR_KEY_NOT_WRAPPABLE", wrap(w, k_other, blob2, &nb2) == CKR_KEY_NOT_WRAPPABLE);
    nb2 = sizeof blob2;
    CHECK("C_WrapKey of a key with no CKA_ID: CKR_KEY_NOT_WRAPPABLE", wrap(w, k_none, blob2, &nb2) == CKR_KEY_NOT_WRAPPABLE);
    nb2 = 0;
    CHECK("C_WrapKey length query of a non-matching key: CKR_KEY_NOT_WRAPPABLE",
          f->C_WrapKey(s, &(CK_MECHANISM){CKM_AES_KEY_WRAP, NULL, 0}, w, k_other, NULL, &nb2) == CKR_KEY_NOT_WRAPPABLE);

    /* Templates never loosen the wrap/decrypt separation: a sensitive key
     * matching the template of a wrapping key that can decrypt stays unwrapped. */
    CK_ATTRIBUTE dec_extra[] = {{CKA_WRAP_TEMPLATE, wt, sizeof wt}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_ATTRIBUTE wd[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_VALUE_LEN, &len16, sizeof len16}, {CKA_TOKEN, &no, 1},
                         {CKA_WRAP, &yes, 1}, {CKA_DECRYPT, &yes, 1}, dec_extra[0]};
    CK_OBJECT_HANDLE wdec = 0;
    rv = f->C_GenerateKey(s, &gen, wd, 6, &wdec);
    CK_OBJECT_HANDLE k_sens = aes_key("wrap-ok", CK_TRUE);
    nb2 = sizeof blob2;
    rv = rv == CKR_OK ? wrap(wdec, k_sens, blob2, &nb2) : rv;
    CHECK_RV("a matching sensitive key under a template key that can decrypt: still CKR_KEY_NOT_WRAPPABLE", rv,
             CKR_KEY_NOT_WRAPPABLE);

    /* ---- C_UnwrapKey: CKA_UNWRAP_TEMPLATE merged ------------------------------------ */
    CK_OBJECT_HANDLE u1 = 0;
    rv = unwrap(w, blob, nb, NULL, 0, &u1);
    CHECK_RV("C_UnwrapKey with no CKA_LABEL given: CKR_OK", rv, CKR_OK);
    if (rv == CKR_OK) CHECK("the unwrapped key took CKA_LABEL \"from-W\" from CKA_UNWRAP_TEMPLATE", label_is(u1, "from-W"));
    CK_ATTRIBUTE same[] = {{CKA_LABEL, "from-W", 6}};
    rv = unwrap(w, blob, nb, same, 1, &u1);
    CHECK("C_UnwrapKey naming the same CKA_LABEL: CKR_OK", rv == CKR_OK && label_is(u1, "from-W"));
    CK_ATTRIBUTE conflict[] = {{CKA_LABEL, "mine", 4}};
    rv = unwrap(w, blob, nb, conflict, 1, &u1);
    CHECK("C_UnwrapKey with another CKA_LABEL: CKR_TEMPLATE_INCONSISTENT", rv == CKR_TEMPLATE_INCONSISTENT);

    /* An unwrap template that would make a readable key under a key that can
     * also wrap (rule 4 of the separation) is refused like the caller's own. */
    CK_ATTRIBUTE loose[] = {{CKA_SENSITIVE, &no, 1}, {CKA_EXTRACTABLE, &yes, 1}};
    CK_ATTRIBUTE lx[] = {{CKA_UNWRAP_TEMPLATE, loose, sizeof loose}};
    CK_OBJECT_HANDLE wl = 0, u2 = 0;
    rv = wrapping_key(lx, 1, CK_FALSE, &wl);
    unsigned char blob3[64]; CK_ULONG nb3 = sizeof blob3;
    if (rv == CKR_OK) rv = wrap(wl, k_ok, blob3, &nb3);
    if (rv == CKR_OK) rv = unwrap(wl, blob3, nb3, NULL, 0, &u2);
    CHECK_RV("an unwrap template asking a readable key under a key that also wraps: CKR_TEMPLATE_INCONSISTENT", rv,
             CKR_TEMPLATE_INCONSISTENT);

    /* ---- C_DeriveKey: CKA_DERIVE_TEMPLATE merged ------------------------------------ */
    CK_ATTRIBUTE dt[] = {{CKA_LABEL, "derived", 7}};
    CK_ATTRIBUTE base_t[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes}, {CKA_VALUE, v, 16},
                             {CKA_TOKEN, &no, 1}, {CKA_DERIVE, &yes, 1}, {CKA_DERIVE_TEMPLATE, dt, sizeof dt}};
    CK_OBJECT_HANDLE base = 0, d1 = 0;
    rv = f->C_CreateObject(s, base_t, 6, &base);
    CHECK_RV("C_CreateObject a derivation key with CKA_DERIVE_TEMPLATE: CKR_OK", rv, CKR_OK);
    unsigned char data[16] = "derivation-data";
    CK_KEY_DERIVATION_STRING_DATA sd = {data, 16};
    CK_MECHANISM dm = {CKM_AES_ECB_ENCRYPT_DATA, &sd, sizeof sd};
    CK_ATTRIBUTE dk[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &aes, sizeof aes},
                         {CKA_VALUE_LEN, &len16, sizeof len16}, {CKA_TOKEN, &no, 1}, {CKA_LABEL, "other", 5}};
    if (base) {
        rv = f->C_DeriveKey(s, &dm, base, dk, 4, &d1);
        CHECK("C_DeriveKey: CKR_OK, the key took CKA_LABEL \"derived\" from CKA_DERIVE_TEMPLATE",
              rv == CKR_OK && label_is(d1, "derived"));
        rv = f->C_DeriveKey(s, &dm, base, dk, 5, &d1);
        CHECK("C_DeriveKey with another CKA_LABEL: CKR_TEMPLATE_INCONSISTENT", rv == CKR_TEMPLATE_INCONSISTENT);
    }

    /* SP 800-108 with an additional key: the derive template reaches both
     * keys; the additional key's own template carries a CKA_UNWRAP_TEMPLATE
     * (a template inside a mechanism parameter, across the agent too). */
    CK_KEY_TYPE gen_t = CKK_GENERIC_SECRET;
    CK_ATTRIBUTE kbase_t[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &gen_t, sizeof gen_t}, {CKA_VALUE, v, 16},
                              {CKA_TOKEN, &no, 1}, {CKA_DERIVE, &yes, 1}, {CKA_DERIVE_TEMPLATE, dt, sizeof dt}};
    CK_OBJECT_HANDLE kbase = 0;
    rv = f->C_CreateObject(s, kbase_t, 6, &kbase);
    if (rv == CKR_OK) {
        CK_SP800_108_COUNTER_FORMAT ctr = {CK_FALSE, 32};
        CK_PRF_DATA_PARAM prf[2] = {{CK_SP800_108_ITERATION_VARIABLE, &ctr, sizeof ctr}, {CK_SP800_108_BYTE_ARRAY, data, 16}};
        CK_ATTRIBUTE add_ut[] = {{CKA_ID, "add", 3}};
        CK_ATTRIBUTE add_t[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &gen_t, sizeof gen_t},
                                {CKA_VALUE_LEN, &len16, sizeof len16}, {CKA_TOKEN, &no, 1},
                                {CKA_UNWRAP_TEMPLATE, add_ut, sizeof add_ut}};
        CK_OBJECT_HANDLE add_h = 0, main_h = 0;
        CK_DERIVED_KEY dk = {add_t, 5, &add_h};
        CK_SP800_108_KDF_PARAMS kp = {CKM_SHA256_HMAC, 2, prf, 1, &dk};
        CK_MECHANISM km = {CKM_SP800_108_COUNTER_KDF, &kp, sizeof kp};
        CK_ATTRIBUTE main_t[] = {{CKA_CLASS, &secret, sizeof secret}, {CKA_KEY_TYPE, &gen_t, sizeof gen_t},
                                 {CKA_VALUE_LEN, &len16, sizeof len16}, {CKA_TOKEN, &no, 1}};
        rv = f->C_DeriveKey(s, &km, kbase, main_t, 4, &main_h);
        CK_ATTRIBUTE aq = {CKA_UNWRAP_TEMPLATE, NULL, 0};
        CHECK("SP 800-108: CKA_DERIVE_TEMPLATE reaches the key and the additional key; the additional key's "
              "nested CKA_UNWRAP_TEMPLATE is kept",
              rv == CKR_OK && label_is(main_h, "derived") && label_is(add_h, "derived") &&
              get1(add_h, &aq) == CKR_OK && aq.ulValueLen == sizeof(CK_ATTRIBUTE));
    } else {
        CHECK("SP 800-108 base key with CKA_DERIVE_TEMPLATE made", 0);
    }

    /* ---- across C_Finalize / C_Initialize ----------------------------------------- */
    f->C_Finalize(NULL);
    rv = f->C_Initialize(NULL);
    slot = find_token(argv[3]);
    if (rv == CKR_OK) rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    if (rv == CKR_OK) rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    CK_ATTRIBUTE q[] = {{CKA_LABEL, persist_label, strlen(persist_label)}};
    CK_OBJECT_HANDLE h = 0; CK_ULONG n = 0;
    if (rv == CKR_OK) rv = f->C_FindObjectsInit(s, q, 1);
    if (rv == CKR_OK) rv = f->C_FindObjects(s, &h, 1, &n);
    f->C_FindObjectsFinal(s);
    CK_ATTRIBUTE pq = {CKA_WRAP_TEMPLATE, NULL, 0};
    CHECK("after C_Finalize and C_Initialize the token key's CKA_WRAP_TEMPLATE still has 2 entries",
          rv == CKR_OK && n == 1 && get1(h, &pq) == CKR_OK && pq.ulValueLen == 2 * sizeof(CK_ATTRIBUTE));
    f->C_Finalize(NULL);
    if (softhsm) printf("  %d differences from keyshare\n", diff);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
