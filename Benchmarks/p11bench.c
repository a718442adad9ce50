/*
 * p11bench: one program that dlopens PKCS #11 modules by path and runs the
 * same workloads on each, plus a raw-OpenSSL baseline in the same process,
 * and prints one table with absolute figures and ratios.
 *
 *   BENCH_PIN=PIN p11bench --module NAME=PATH [--module NAME=PATH] [--token LABEL]
 *            [--cli KEYSHARE_BIN] [--cli-home DIR]
 *
 * The first module is the subject, the second the reference: the ratio
 * columns are subject/reference and subject/raw. Each module must already
 * have an initialised token with the given label and the user PIN in
 * BENCH_PIN (Benchmarks/run.sh creates them with pkcs11-tool and `keyshare
 * token create`). The PIN is read from the environment only, never from
 * argv: every local user reads every process's command line (`ps`); the
 * child runs (cold start, RSS) inherit it the same way.
 *
 * Environment: BENCH_PIN (the tokens' user PIN, required), BENCH_SMOKE=1
 * (tiny counts, one repetition), BENCH_REPS (repetitions, default 5),
 * BENCH_TIME (seconds per repetition, default 0.25),
 * BENCH_MAX_OBJECTS (largest find population, default 100000),
 * BENCH_REF_MAX_OBJECTS (cap for the reference module, default 10000),
 * BENCH_ONLY (run only rows whose name contains this string, for profiling),
 * BENCH_KDF_LOG2N (scrypt cost reported as the KDF's own cost, default 15),
 * BENCH_CPU=1 (single-thread rows as operations per second of the thread's
 * CPU time, not wall time: on a loaded shared machine the wall clock also
 * counts other processes' time slices, which made the issue-13 ratios swing
 * by +-30 %; the clock is read at the start and end only, so it adds
 * nothing per operation).
 *
 * Every figure is the median of BENCH_REPS repetitions; the spread is
 * (max-min)/median. Nothing is asserted about speed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <p11-kit/pkcs11.h>
/* PKCS #11 3.0 (the message API for the symmetric rows) on top of p11-kit's 2.40 header. */
#include "../pkcs11/types/pkcs11_shim.h"
#include <sqlite3.h>

/* How the raw column's libcrypto was linked (Makefile: OPENSSL_MODE). */
#ifndef BENCH_RAW_LINK
#define BENCH_RAW_LINK "as the compiler found it"
#endif

#ifndef CKK_EC_EDWARDS
#define CKK_EC_EDWARDS 0x40UL
#endif
#ifndef CKM_EDDSA
#define CKM_EDDSA 0x1057UL
#endif

/* ------------------------------------------------------------------ utils */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "p11bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static int SMOKE, REPS;
static double RUNTIME;
static long MAX_OBJECTS, REF_MAX_OBJECTS;
static const char *ONLY;
static int KDF_LOG2N;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --------------------------------------------------------------- results */

enum { RAW = 0, SUBJ = 1, REF = 2, NCOL = 3 };
enum dir { HIGHER, LOWER };

typedef struct {
    char section[64];
    char name[112];
    char unit[12];
    enum dir dir;
    int have[NCOL];
    double med[NCOL], spread[NCOL];
    char note[NCOL][48];
} row_t;

static row_t rows[256];
static int nrows;
static const char *colname[NCOL] = {"raw OpenSSL", "subject", "reference"};
static char cursection[64];

static row_t *row(const char *unit, enum dir d, const char *fmt, ...) {
    row_t *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->name, sizeof r->name, fmt, ap);
    va_end(ap);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    snprintf(r->section, sizeof r->section, "%s", cursection);
    r->dir = d;
    return r;
}

static int wanted(const char *name) { return !ONLY || strstr(name, ONLY) != NULL; }

static void put(row_t *r, int col, double *samples, int n) {
    if (n <= 0) return;
    qsort(samples, n, sizeof *samples, cmp_double);
    double med = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    r->have[col] = 1;
    r->med[col] = med;
    r->spread[col] = med > 0 ? (samples[n - 1] - samples[0]) / med : 0;
}

static void put1(row_t *r, int col, double v) { put(r, col, &v, 1); }

static void note(row_t *r, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note[col], sizeof r->note[col], fmt, ap);
    va_end(ap);
}

static void fmtval(char *out, size_t n, const row_t *r, int c) {
    if (!r->have[c]) {
        snprintf(out, n, "%s", r->note[c][0] ? r->note[c] : "-");
        return;
    }
    double v = r->med[c];
    char num[32];
    if (v >= 100) snprintf(num, sizeof num, "%.0f", v);
    else if (v >= 10) snprintf(num, sizeof num, "%.1f", v);
    else if (v >= 1) snprintf(num, sizeof num, "%.2f", v);
    else snprintf(num, sizeof num, "%.3g", v);
    if (REPS > 1 && r->spread[c] > 0) snprintf(out, n, "%s ±%.0f%%", num, r->spread[c] * 50);
    else snprintf(out, n, "%s", num);
}

static void fmtratio(char *out, size_t n, const row_t *r, int a, int b) {
    if (!r->have[a] || !r->have[b] || r->med[b] == 0) { snprintf(out, n, "-"); return; }
    snprintf(out, n, "%.2f", r->med[a] / r->med[b]);
}

static void print_table(void) {
    const char *last = "";
    printf("\n| workload | unit | %s | %s | %s | %s/%s | %s/raw |\n", colname[SUBJ], colname[REF], colname[RAW],
           colname[SUBJ], colname[REF], colname[SUBJ]);
    printf("|---|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < nrows; i++) {
        row_t *r = &rows[i];
        if (strcmp(r->section, last)) {
            printf("| **%s** | | | | | | |\n", r->section);
            last = r->section;
        }
        char v[NCOL][64], q1[16], q2[16];
        for (int c = 0; c < NCOL; c++) fmtval(v[c], sizeof v[c], r, c);
        fmtratio(q1, sizeof q1, r, SUBJ, REF);
        fmtratio(q2, sizeof q2, r, SUBJ, RAW);
        printf("| %s | %s %s | %s | %s | %s | %s | %s |\n", r->name, r->unit, r->dir == HIGHER ? "↑" : "↓", v[SUBJ],
               v[REF], v[RAW], q1, q2);
    }
    printf("\n");
    fflush(stdout);
}

/* ------------------------------------------------------------ PKCS #11 */

typedef struct {
    const char *name, *path;
    void *dl;
    CK_FUNCTION_LIST_PTR f;
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE s;
    long maxobjs;
} mod_t;

static mod_t mods[NCOL];
static int nmods;
static const char *TOKEN = "bench", *PIN;

static const char *rvname(CK_RV rv) {
    static char buf[32];
    switch (rv) {
    case CKR_OK: return "CKR_OK";
    case CKR_MECHANISM_INVALID: return "MECHANISM_INVALID";
    case CKR_MECHANISM_PARAM_INVALID: return "MECH_PARAM_INVALID";
    case CKR_ATTRIBUTE_VALUE_INVALID: return "ATTR_VALUE_INVALID";
    case CKR_ATTRIBUTE_TYPE_INVALID: return "ATTR_TYPE_INVALID";
    case CKR_TEMPLATE_INCOMPLETE: return "TEMPLATE_INCOMPLETE";
    case CKR_TEMPLATE_INCONSISTENT: return "TEMPLATE_INCONSISTENT";
    case CKR_KEY_TYPE_INCONSISTENT: return "KEY_TYPE_INCONSISTENT";
    case CKR_FUNCTION_NOT_SUPPORTED: return "FUNC_NOT_SUPPORTED";
    case CKR_GENERAL_ERROR: return "GENERAL_ERROR";
    case CKR_DEVICE_ERROR: return "DEVICE_ERROR";
    case CKR_USER_NOT_LOGGED_IN: return "USER_NOT_LOGGED_IN";
    case CKR_DATA_LEN_RANGE: return "DATA_LEN_RANGE";
    default: snprintf(buf, sizeof buf, "CKR 0x%lx", (unsigned long)rv); return buf;
    }
}

#define CK(call)                                                                     \
    do {                                                                             \
        CK_RV rv_ = (call);                                                          \
        if (rv_ != CKR_OK) die("%s: %s failed: %s", m->name, #call, rvname(rv_));   \
    } while (0)

static CK_FUNCTION_LIST_PTR load(const char *path, void **dl) {
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) die("dlopen %s: %s", path, dlerror());
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(*dl, "C_GetFunctionList");
    if (!gfl) die("%s has no C_GetFunctionList", path);
    CK_FUNCTION_LIST_PTR f;
    if (gfl(&f) != CKR_OK) die("C_GetFunctionList failed for %s", path);
    return f;
}

static CK_SLOT_ID find_slot(CK_FUNCTION_LIST_PTR f, const char *label) {
    CK_SLOT_ID slots[64];
    CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) die("C_GetSlotList failed");
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        char l[33];
        memcpy(l, ti.label, 32);
        l[32] = 0;
        for (int j = 31; j >= 0 && l[j] == ' '; j--) l[j] = 0;
        if (!strcmp(l, label) && (ti.flags & CKF_TOKEN_INITIALIZED)) return slots[i];
    }
    die("no token labelled %s", label);
    return 0;
}

static CK_SESSION_HANDLE open_rw(mod_t *m) {
    CK_SESSION_HANDLE s;
    CK(m->f->C_OpenSession(m->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
    return s;
}

static void module_up(mod_t *m) {
    m->f = load(m->path, &m->dl);
    CK_C_INITIALIZE_ARGS args = {0};
    args.flags = CKF_OS_LOCKING_OK;
    CK(m->f->C_Initialize(&args));
    m->slot = find_slot(m->f, TOKEN);
    m->s = open_rw(m);
    CK(m->f->C_Login(m->s, CKU_USER, (CK_UTF8CHAR_PTR)PIN, strlen(PIN)));
}

/* ---------------------------------------------------------------- keys */

typedef enum { K_P256, K_P384, K_ED25519, K_RSA2048, K_RSA3072, NKEYS } keyid_t;
static EVP_PKEY *rawkey[NKEYS];
/* handles per module: [mod][key] */
static CK_OBJECT_HANDLE privh[NCOL][NKEYS], pubh[NCOL][NKEYS];
static char keyerr[NCOL][NKEYS][48];

static EVP_PKEY *gen_raw(keyid_t k) {
    EVP_PKEY *p = NULL;
    switch (k) {
    case K_P256: p = EVP_EC_gen("P-256"); break;
    case K_P384: p = EVP_EC_gen("P-384"); break;
    case K_ED25519: p = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"); break;
    case K_RSA2048: p = EVP_RSA_gen(2048); break;
    case K_RSA3072: p = EVP_RSA_gen(3072); break;
    default: break;
    }
    if (!p) die("OpenSSL key generation failed");
    return p;
}

static const unsigned char OID_P256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const unsigned char OID_P384[] = {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};
static const unsigned char OID_ED25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};

typedef struct { unsigned char *p; size_t n; } buf_t;

static buf_t bnparam(EVP_PKEY *k, const char *name) {
    BIGNUM *bn = NULL;
    buf_t b = {0};
    if (!EVP_PKEY_get_bn_param(k, name, &bn)) die("no %s", name);
    b.n = BN_num_bytes(bn);
    b.p = malloc(b.n ? b.n : 1);
    BN_bn2bin(bn, b.p);
    BN_clear_free(bn);
    return b;
}

static buf_t octparam(EVP_PKEY *k, const char *name) {
    buf_t b = {0};
    size_t n = 0;
    if (!EVP_PKEY_get_octet_string_param(k, name, NULL, 0, &n)) die("no %s", name);
    b.p = malloc(n);
    EVP_PKEY_get_octet_string_param(k, name, b.p, n, &b.n);
    return b;
}

/* The same key material goes into every module with C_CreateObject, so each
 * column signs with identical keys. */
static void import_key(int col, mod_t *m, keyid_t k) {
    EVP_PKEY *p = rawkey[k];
    CK_OBJECT_CLASS cpriv = CKO_PRIVATE_KEY, cpub = CKO_PUBLIC_KEY;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_KEY_TYPE kt;
    unsigned char id[2] = {0xbe, (unsigned char)k};
    char label[32];
    snprintf(label, sizeof label, "bench-key-%d", (int)k);
    CK_ATTRIBUTE pv[16], pb[10];
    int npv = 0, npb = 0;
#define A(arr, n, t, v, l) (arr[n].type = (t), arr[n].pValue = (void *)(v), arr[n].ulValueLen = (l), n++)
    A(pv, npv, CKA_CLASS, &cpriv, sizeof cpriv);
    A(pv, npv, CKA_TOKEN, &yes, 1);
    A(pv, npv, CKA_PRIVATE, &yes, 1);
    A(pv, npv, CKA_SIGN, &yes, 1);
    A(pv, npv, CKA_ID, id, 2);
    A(pv, npv, CKA_LABEL, label, strlen(label));
    A(pb, npb, CKA_CLASS, &cpub, sizeof cpub);
    A(pb, npb, CKA_TOKEN, &yes, 1);
    A(pb, npb, CKA_PRIVATE, &no, 1);
    A(pb, npb, CKA_VERIFY, &yes, 1);
    A(pb, npb, CKA_ID, id, 2);
    A(pb, npb, CKA_LABEL, label, strlen(label));
    buf_t parts[8] = {0};
    unsigned char point[200];
    if (k == K_RSA2048 || k == K_RSA3072) {
        kt = CKK_RSA;
        static const char *names[8] = {OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D,
                                       OSSL_PKEY_PARAM_RSA_FACTOR1, OSSL_PKEY_PARAM_RSA_FACTOR2,
                                       OSSL_PKEY_PARAM_RSA_EXPONENT1, OSSL_PKEY_PARAM_RSA_EXPONENT2,
                                       OSSL_PKEY_PARAM_RSA_COEFFICIENT1};
        static const CK_ATTRIBUTE_TYPE types[8] = {CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT,
                                                   CKA_PRIME_1, CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2,
                                                   CKA_COEFFICIENT};
        for (int i = 0; i < 8; i++) {
            parts[i] = bnparam(p, names[i]);
            A(pv, npv, types[i], parts[i].p, parts[i].n);
        }
        A(pv, npv, CKA_DECRYPT, &yes, 1);
        A(pb, npb, CKA_MODULUS, parts[0].p, parts[0].n);
        A(pb, npb, CKA_PUBLIC_EXPONENT, parts[1].p, parts[1].n);
        A(pb, npb, CKA_ENCRYPT, &yes, 1);
    } else {
        const unsigned char *oid = k == K_P256 ? OID_P256 : k == K_P384 ? OID_P384 : OID_ED25519;
        size_t oidlen = k == K_P256 ? sizeof OID_P256 : k == K_P384 ? sizeof OID_P384 : sizeof OID_ED25519;
        kt = k == K_ED25519 ? CKK_EC_EDWARDS : CKK_EC;
        if (k == K_ED25519) parts[0] = octparam(p, OSSL_PKEY_PARAM_PRIV_KEY);
        else {
            parts[0] = bnparam(p, OSSL_PKEY_PARAM_PRIV_KEY);
            size_t want = k == K_P256 ? 32 : 48; /* fixed width scalar */
            if (parts[0].n < want) {
                unsigned char *q = calloc(1, want);
                memcpy(q + want - parts[0].n, parts[0].p, parts[0].n);
                free(parts[0].p);
                parts[0].p = q;
                parts[0].n = want;
            }
        }
        parts[1] = octparam(p, OSSL_PKEY_PARAM_PUB_KEY);
        point[0] = 0x04;
        point[1] = (unsigned char)parts[1].n;
        memcpy(point + 2, parts[1].p, parts[1].n);
        A(pv, npv, CKA_EC_PARAMS, oid, oidlen);
        A(pv, npv, CKA_VALUE, parts[0].p, parts[0].n);
        A(pb, npb, CKA_EC_PARAMS, oid, oidlen);
        A(pb, npb, CKA_EC_POINT, point, parts[1].n + 2);
    }
    A(pv, npv, CKA_KEY_TYPE, &kt, sizeof kt);
    A(pb, npb, CKA_KEY_TYPE, &kt, sizeof kt);
#undef A
    CK_RV rv = m->f->C_CreateObject(m->s, pv, npv, &privh[col][k]);
    if (rv != CKR_OK) snprintf(keyerr[col][k], sizeof keyerr[col][k], "n/a (key import: %s)", rvname(rv));
    rv = m->f->C_CreateObject(m->s, pb, npb, &pubh[col][k]);
    if (rv != CKR_OK && !keyerr[col][k][0])
        snprintf(keyerr[col][k], sizeof keyerr[col][k], "n/a (pubkey import: %s)", rvname(rv));
    for (int i = 0; i < 8; i++) free(parts[i].p);
}

/* ------------------------------------------------------------ workloads */

/* A workload op: returns 0 on success, else a CK_RV / nonzero. */
typedef struct work work_t;
struct work {
    int col;
    mod_t *m;
    CK_SESSION_HANDLE s;
    keyid_t key;
    int kind; /* see below */
    unsigned char data[64];
    size_t datalen;
    unsigned char sig[512];
    CK_ULONG siglen;
    unsigned char ct[512];
    CK_ULONG ctlen;
    CK_RV err;
    long ops;
};

enum { W_PKCS1, W_PSS, W_PLAIN /* ECDSA raw digest, EdDSA message */ };

static CK_RSA_PKCS_PSS_PARAMS pss = {CKM_SHA256, CKG_MGF1_SHA256, 32};
static CK_RSA_PKCS_OAEP_PARAMS oaep = {CKM_SHA_1, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0};

static CK_MECHANISM mech_for(keyid_t k, int kind) {
    CK_MECHANISM mm = {0};
    if (k == K_RSA2048 || k == K_RSA3072) {
        if (kind == W_PSS) { mm.mechanism = CKM_SHA256_RSA_PKCS_PSS; mm.pParameter = &pss; mm.ulParameterLen = sizeof pss; }
        else mm.mechanism = CKM_SHA256_RSA_PKCS;
    } else if (k == K_ED25519) mm.mechanism = CKM_EDDSA;
    else mm.mechanism = CKM_ECDSA;
    return mm;
}

static int raw_sign(work_t *w) {
    EVP_PKEY *p = rawkey[w->key];
    size_t len = sizeof w->sig;
    int ok;
    if (w->key == K_P256 || w->key == K_P384) {
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(p, NULL);
        ok = c && EVP_PKEY_sign_init(c) > 0 && EVP_PKEY_sign(c, w->sig, &len, w->data, w->datalen) > 0;
        EVP_PKEY_CTX_free(c);
    } else {
        EVP_MD_CTX *mc = EVP_MD_CTX_new();
        EVP_PKEY_CTX *pc = NULL;
        ok = EVP_DigestSignInit(mc, &pc, w->key == K_ED25519 ? NULL : EVP_sha256(), NULL, p) > 0;
        if (ok && w->kind == W_PSS)
            ok = EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING) > 0 &&
                 EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, 32) > 0;
        ok = ok && EVP_DigestSign(mc, w->sig, &len, w->data, w->datalen) > 0;
        EVP_MD_CTX_free(mc);
    }
    w->siglen = len;
    return !ok;
}

static int raw_verify(work_t *w) {
    EVP_PKEY *p = rawkey[w->key];
    int ok;
    if (w->key == K_P256 || w->key == K_P384) {
        /* PKCS #11 signatures are r||s; raw keeps OpenSSL's DER form. */
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(p, NULL);
        ok = c && EVP_PKEY_verify_init(c) > 0 && EVP_PKEY_verify(c, w->sig, w->siglen, w->data, w->datalen) == 1;
        EVP_PKEY_CTX_free(c);
    } else {
        EVP_MD_CTX *mc = EVP_MD_CTX_new();
        EVP_PKEY_CTX *pc = NULL;
        ok = EVP_DigestVerifyInit(mc, &pc, w->key == K_ED25519 ? NULL : EVP_sha256(), NULL, p) > 0;
        if (ok && w->kind == W_PSS)
            ok = EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING) > 0 &&
                 EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, 32) > 0;
        ok = ok && EVP_DigestVerify(mc, w->sig, w->siglen, w->data, w->datalen) == 1;
        EVP_MD_CTX_free(mc);
    }
    return !ok;
}

static int raw_decrypt(work_t *w) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(rawkey[w->key], NULL);
    unsigned char out[512];
    size_t len = sizeof out;
    int ok = c && EVP_PKEY_decrypt_init(c) > 0 && EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) > 0 &&
             EVP_PKEY_CTX_set_rsa_oaep_md(c, EVP_sha1()) > 0 && EVP_PKEY_CTX_set_rsa_mgf1_md(c, EVP_sha1()) > 0 &&
             EVP_PKEY_decrypt(c, out, &len, w->ct, w->ctlen) > 0;
    EVP_PKEY_CTX_free(c);
    return !ok;
}

static int p11_sign(work_t *w) {
    CK_MECHANISM mm = mech_for(w->key, w->kind);
    CK_RV rv = w->m->f->C_SignInit(w->s, &mm, privh[w->col][w->key]);
    if (rv != CKR_OK) return w->err = rv, 1;
    w->siglen = sizeof w->sig;
    rv = w->m->f->C_Sign(w->s, w->data, w->datalen, w->sig, &w->siglen);
    if (rv != CKR_OK) return w->err = rv, 1;
    return 0;
}

static int p11_verify(work_t *w) {
    CK_MECHANISM mm = mech_for(w->key, w->kind);
    CK_RV rv = w->m->f->C_VerifyInit(w->s, &mm, pubh[w->col][w->key]);
    if (rv != CKR_OK) return w->err = rv, 1;
    rv = w->m->f->C_Verify(w->s, w->data, w->datalen, w->sig, w->siglen);
    if (rv != CKR_OK) return w->err = rv, 1;
    return 0;
}

static int p11_decrypt(work_t *w) {
    CK_MECHANISM mm = {CKM_RSA_PKCS_OAEP, &oaep, sizeof oaep};
    CK_RV rv = w->m->f->C_DecryptInit(w->s, &mm, privh[w->col][w->key]);
    if (rv != CKR_OK) return w->err = rv, 1;
    unsigned char out[512];
    CK_ULONG len = sizeof out;
    rv = w->m->f->C_Decrypt(w->s, w->ct, w->ctlen, out, &len);
    if (rv != CKR_OK) return w->err = rv, 1;
    return 0;
}

typedef int (*opfn)(work_t *);

/* Runs op for RUNTIME seconds (at least once); returns ops/s, or -1 on error. */
static int CPUCLOCK;

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double run_for(opfn op, work_t *w) {
    long n = 0;
    double c0 = CPUCLOCK ? thread_cpu() : 0;
    double t0 = now(), t;
    do {
        if (op(w)) return -1;
        n++;
        t = now();
    } while ((SMOKE ? n < 2 : t - t0 < RUNTIME));
    w->ops = n;
    if (CPUCLOCK) {
        double c = thread_cpu() - c0;
        return c > 0 ? n / c : n / (t - t0);
    }
    return n / (t - t0);
}

typedef struct { opfn op; work_t *w; double rate; pthread_barrier_t *bar; } thr_t;

static void *thr_main(void *arg) {
    thr_t *t = arg;
    pthread_barrier_wait(t->bar);
    t->rate = run_for(t->op, t->w);
    return NULL;
}

/* nthreads copies of w (each with its own session) running at once; the sum of their rates. */
static double run_threads(opfn op, work_t *w, int nthreads) {
    if (nthreads == 1) return run_for(op, w);
    work_t ws[8];
    thr_t ts[8];
    pthread_t th[8];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, nthreads);
    for (int i = 0; i < nthreads; i++) {
        ws[i] = *w;
        if (w->m && i > 0) {
            CK_SESSION_HANDLE s;
            if (w->m->f->C_OpenSession(w->m->slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return -1;
            ws[i].s = s;
        }
        ts[i] = (thr_t){op, &ws[i], 0, &bar};
        pthread_create(&th[i], NULL, thr_main, &ts[i]);
    }
    double sum = 0;
    int bad = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        if (ts[i].rate < 0) { bad = 1; w->err = ws[i].err; }
        sum += ts[i].rate;
        if (w->m && i > 0) w->m->f->C_CloseSession(ws[i].s);
    }
    pthread_barrier_destroy(&bar);
    return bad ? -1 : sum;
}

/* One throughput row: the op on each column, REPS times, interleaved. */
static void rate_row(row_t *r, opfn rawop, opfn p11op, work_t *proto, int nthreads) {
    double samples[NCOL][64];
    int ns[NCOL] = {0};
    int failed[NCOL] = {0};
    for (int c = 0; c < nmods + 1; c++) {
        if (c > 0 && keyerr[c][proto->key][0]) { note(r, c, "%s", keyerr[c][proto->key]); failed[c] = 1; }
        if (c == 0 && !rawop) failed[c] = 1;
    }
    for (int rep = 0; rep < REPS; rep++) {
        for (int c = 0; c < nmods + 1; c++) {
            if (failed[c]) continue;
            work_t w = *proto;
            w.col = c;
            w.m = c ? &mods[c] : NULL;
            w.s = c ? mods[c].s : 0;
            double v = run_threads(c ? p11op : rawop, &w, nthreads);
            if (v < 0) {
                failed[c] = 1;
                note(r, c, "n/a (%s)", c ? rvname(w.err) : "OpenSSL error");
                continue;
            }
            samples[c][ns[c]++] = v;
        }
    }
    for (int c = 0; c < nmods + 1; c++) if (!failed[c]) put(r, c, samples[c], ns[c]);
}

/* Prepares the signature (per column: PKCS #11 r||s vs OpenSSL DER) for verify rows. */
static void crypto_rows(void) {
    static const struct { keyid_t k; int kind; const char *what; } combos[] = {
        {K_P256, W_PLAIN, "ECDSA P-256 (CKM_ECDSA, 32-byte digest)"},
        {K_P384, W_PLAIN, "ECDSA P-384 (CKM_ECDSA, 48-byte digest)"},
        {K_ED25519, W_PLAIN, "Ed25519 (CKM_EDDSA, 32-byte message)"},
        {K_RSA2048, W_PKCS1, "RSA-2048 PKCS #1 (CKM_SHA256_RSA_PKCS)"},
        {K_RSA2048, W_PSS, "RSA-2048 PSS (CKM_SHA256_RSA_PKCS_PSS)"},
        {K_RSA3072, W_PKCS1, "RSA-3072 PKCS #1 (CKM_SHA256_RSA_PKCS)"},
        {K_RSA3072, W_PSS, "RSA-3072 PSS (CKM_SHA256_RSA_PKCS_PSS)"},
    };
    int n = sizeof combos / sizeof combos[0];
    for (int verify = 0; verify < 2; verify++) {
        snprintf(cursection, sizeof cursection, verify ? "verify (C_VerifyInit+C_Verify)" : "sign (C_SignInit+C_Sign)");
        for (int i = 0; i < n; i++) {
            for (int nt = 1; nt <= 2; nt++) {
                char name[120];
                snprintf(name, sizeof name, "%s %s, %d thread%s", verify ? "verify" : "sign", combos[i].what, nt,
                         nt > 1 ? "s" : "");
                if (!wanted(name)) continue;
                row_t *r = row("ops/s", HIGHER, "%s", name);
                work_t w = {0};
                w.key = combos[i].k;
                w.kind = combos[i].kind;
                w.datalen = combos[i].k == K_P384 ? 48 : 32;
                memset(w.data, 0x5a, w.datalen);
                if (!verify) { rate_row(r, raw_sign, p11_sign, &w, nt); continue; }
                /* verify: each column verifies its own signature */
                double samples[NCOL][64];
                int ns[NCOL] = {0}, failed[NCOL] = {0};
                work_t per[NCOL];
                for (int c = 0; c < nmods + 1; c++) {
                    per[c] = w;
                    per[c].col = c;
                    per[c].m = c ? &mods[c] : NULL;
                    per[c].s = c ? mods[c].s : 0;
                    if (c && keyerr[c][w.key][0]) { note(r, c, "%s", keyerr[c][w.key]); failed[c] = 1; continue; }
                    if (c ? p11_sign(&per[c]) : raw_sign(&per[c])) {
                        note(r, c, "n/a (sign: %s)", c ? rvname(per[c].err) : "OpenSSL");
                        failed[c] = 1;
                    }
                }
                for (int rep = 0; rep < REPS; rep++)
                    for (int c = 0; c < nmods + 1; c++) {
                        if (failed[c]) continue;
                        double v = run_threads(c ? p11_verify : raw_verify, &per[c], nt);
                        if (v < 0) { failed[c] = 1; note(r, c, "n/a (%s)", c ? rvname(per[c].err) : "OpenSSL"); continue; }
                        samples[c][ns[c]++] = v;
                    }
                for (int c = 0; c < nmods + 1; c++) if (!failed[c]) put(r, c, samples[c], ns[c]);
            }
        }
    }
    /* RSA-2048 OAEP decrypt of a 32-byte secret */
    snprintf(cursection, sizeof cursection, "decrypt (C_DecryptInit+C_Decrypt)");
    const char *name = "decrypt RSA-2048 OAEP SHA-1 (SoftHSM2 2.6 has no other), 1 thread";
    if (wanted(name)) {
        row_t *r = row("ops/s", HIGHER, "%s", name);
        work_t w = {0};
        w.key = K_RSA2048;
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(rawkey[K_RSA2048], NULL);
        unsigned char secret[32];
        memset(secret, 0x33, 32);
        size_t len = sizeof w.ct;
        if (!(EVP_PKEY_encrypt_init(c) > 0 && EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_OAEP_PADDING) > 0 &&
              EVP_PKEY_CTX_set_rsa_oaep_md(c, EVP_sha1()) > 0 && EVP_PKEY_CTX_set_rsa_mgf1_md(c, EVP_sha1()) > 0 &&
              EVP_PKEY_encrypt(c, w.ct, &len, secret, 32) > 0))
            die("OAEP encrypt failed");
        EVP_PKEY_CTX_free(c);
        w.ctlen = len;
        rate_row(r, raw_decrypt, p11_decrypt, &w, 1);
    }
}

/* --------------------------------------------- symmetric throughput */

/* 16 KiB messages, three ways each: the module's best API for the job
 * against what a careful EVP user does, and the classic per-message
 * C_EncryptInit + C_Encrypt against a new EVP context per message.
 *   message  GCM / ChaCha20-Poly1305: one C_MessageEncryptInit, then
 *            C_EncryptMessage per message; raw: one keyed EVP context,
 *            a new IV per message (EVP_EncryptInit_ex2 with the IV only)
 *   stream   CTR: one C_EncryptInit, C_EncryptUpdate per 16 KiB part;
 *            raw: EVP_EncryptUpdate per part on one context
 *   single   C_EncryptInit + C_Encrypt per message; raw: a new EVP
 *            context, init, update, final (+ tag) per message
 * Keys are session objects of the same value in every module. */
enum { S_GCM, S_CTR, S_CHACHA, NSYM };
enum { ST_MESSAGE, ST_STREAM, ST_SINGLE };
/* Message sizes (issue 30): 64 bytes (the per-call cost), 16 KiB (a TLS record) and
 * 1 MiB (bulk: more than the agent's 64 KiB shared region, so through the socket). */
#define SYM_MAX (1 << 20)
static size_t SYM_MSG = 16384;
static const char *symname[NSYM] = {"AES-256-GCM", "AES-256-CTR", "ChaCha20-Poly1305"};
static CK_OBJECT_HANDLE symh[NCOL][NSYM];
static char symerr[NCOL][NSYM][48];
static unsigned char symkey[32], symiv[16], symin[SYM_MAX], symout[SYM_MAX + 64], symtag[16];
static EVP_CIPHER *symcipher[NSYM];
static EVP_CIPHER_CTX *symctx;       /* raw: the long-lived context of the message and stream rows */
static CK_FUNCTION_LIST_3_0 *sym30;  /* the module's 3.0 list (message rows) */

static CK_MECHANISM sym_mech(int kind, CK_GCM_PARAMS *g, CK_AES_CTR_PARAMS *c, CK_SALSA20_CHACHA20_POLY1305_PARAMS *h) {
    *g = (CK_GCM_PARAMS){symiv, 12, 96, NULL, 0, 128};
    c->ulCounterBits = 128;
    memcpy(c->cb, symiv, 16);
    *h = (CK_SALSA20_CHACHA20_POLY1305_PARAMS){symiv, 12, NULL, 0};
    return kind == S_GCM ? (CK_MECHANISM){CKM_AES_GCM, g, sizeof *g}
         : kind == S_CTR ? (CK_MECHANISM){CKM_AES_CTR, c, sizeof *c}
                         : (CK_MECHANISM){CKM_CHACHA20_POLY1305, h, sizeof *h};
}

static int raw_single(work_t *w) {
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int a = 0, b = 0, ok = c && EVP_EncryptInit_ex2(c, symcipher[w->kind], symkey, symiv, NULL) == 1 &&
                           EVP_EncryptUpdate(c, symout, &a, symin, (int)SYM_MSG) == 1 &&
                           EVP_EncryptFinal_ex(c, symout + a, &b) == 1;
    if (ok && w->kind != S_CTR) ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, symout + a + b) == 1;
    EVP_CIPHER_CTX_free(c);
    return !ok;
}

static int raw_message(work_t *w) {
    int a = 0, b = 0;
    int ok = EVP_EncryptInit_ex2(symctx, NULL, NULL, symiv, NULL) == 1 &&
             EVP_EncryptUpdate(symctx, symout, &a, symin, (int)SYM_MSG) == 1 && EVP_EncryptFinal_ex(symctx, symout + a, &b) == 1 &&
             EVP_CIPHER_CTX_ctrl(symctx, EVP_CTRL_AEAD_GET_TAG, 16, symtag) == 1;
    (void)w;
    return !ok;
}

static int raw_stream(work_t *w) {
    int a = 0;
    (void)w;
    return EVP_EncryptUpdate(symctx, symout, &a, symin, (int)SYM_MSG) != 1;
}

static int p11_single(work_t *w) {
    CK_GCM_PARAMS g; CK_AES_CTR_PARAMS c; CK_SALSA20_CHACHA20_POLY1305_PARAMS h;
    CK_MECHANISM m = sym_mech(w->kind, &g, &c, &h);
    CK_RV rv = w->m->f->C_EncryptInit(w->s, &m, symh[w->col][w->kind]);
    if (rv != CKR_OK) return w->err = rv, 1;
    CK_ULONG len = sizeof symout;
    rv = w->m->f->C_Encrypt(w->s, symin, SYM_MSG, symout, &len);
    if (rv != CKR_OK) return w->err = rv, 1;
    return 0;
}

static int p11_message(work_t *w) {
    CK_GCM_MESSAGE_PARAMS g = {symiv, 12, 0, CKG_NO_GENERATE, symtag, 128};
    CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS h = {symiv, 12, symtag};
    CK_ULONG len = sizeof symout;
    CK_RV rv = w->kind == S_GCM ? sym30->C_EncryptMessage(w->s, &g, sizeof g, NULL, 0, symin, SYM_MSG, symout, &len)
                                : sym30->C_EncryptMessage(w->s, &h, sizeof h, NULL, 0, symin, SYM_MSG, symout, &len);
    return rv != CKR_OK ? (w->err = rv, 1) : 0;
}

static int p11_stream(work_t *w) {
    CK_ULONG len = sizeof symout;
    CK_RV rv = w->m->f->C_EncryptUpdate(w->s, symin, SYM_MSG, symout, &len);
    return rv != CKR_OK ? (w->err = rv, 1) : 0;
}

/* Sets up (start 1) or tears down (start 0) a column's long-lived state. */
static CK_RV sym_setup(int c, int kind, int style, int start) {
    if (c == RAW) {
        if (start) {
            symctx = EVP_CIPHER_CTX_new();
            if (!symctx || EVP_EncryptInit_ex2(symctx, symcipher[kind], symkey, symiv, NULL) != 1) return CKR_FUNCTION_FAILED;
        } else {
            EVP_CIPHER_CTX_free(symctx);
            symctx = NULL;
        }
        return CKR_OK;
    }
    if (style == ST_MESSAGE) {
        if (c != SUBJ || !sym30) return CKR_FUNCTION_NOT_SUPPORTED;  /* SoftHSM2 2.6 is a 2.40 module */
        CK_MECHANISM m = {kind == S_GCM ? CKM_AES_GCM : CKM_CHACHA20_POLY1305, NULL, 0};
        return start ? sym30->C_MessageEncryptInit(mods[c].s, &m, symh[c][kind]) : sym30->C_MessageEncryptFinal(mods[c].s);
    }
    CK_GCM_PARAMS g; CK_AES_CTR_PARAMS ct; CK_SALSA20_CHACHA20_POLY1305_PARAMS h;
    CK_MECHANISM m = sym_mech(kind, &g, &ct, &h);
    if (start) return mods[c].f->C_EncryptInit(mods[c].s, &m, symh[c][kind]);
    CK_ULONG len = sizeof symout;
    return mods[c].f->C_EncryptFinal(mods[c].s, symout, &len);
}

/* A small keyed operation, where the per-call cost of the module (session
 * and key lookups, CKA_ALLOWED_MECHANISMS, the agent's round trips) is most
 * of the time: C_SignInit + C_Sign of HMAC-SHA256 over 32 bytes with a
 * session generic-secret key; raw: HMAC() one-shot with the same key. */
static CK_OBJECT_HANDLE hmach[NCOL];
static unsigned char hmackey[32];
static EVP_MAC *hmacalg;

static int raw_hmac(work_t *w) {
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_construct_end()};
    EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmacalg);
    size_t len = 0;
    int ok = c && EVP_MAC_init(c, hmackey, sizeof hmackey, p) == 1 && EVP_MAC_update(c, w->data, w->datalen) == 1 &&
             EVP_MAC_final(c, w->sig, &len, sizeof w->sig) == 1;
    EVP_MAC_CTX_free(c);
    return !ok;
}

static int p11_hmac(work_t *w) {
    CK_MECHANISM mm = {CKM_SHA256_HMAC, NULL, 0};
    CK_RV rv = w->m->f->C_SignInit(w->s, &mm, hmach[w->col]);
    if (rv != CKR_OK) return w->err = rv, 1;
    w->siglen = sizeof w->sig;
    rv = w->m->f->C_Sign(w->s, w->data, w->datalen, w->sig, &w->siglen);
    return rv != CKR_OK ? (w->err = rv, 1) : 0;
}

static void hmac_row(void) {
    const char *name = "sign HMAC-SHA256 (CKM_SHA256_HMAC, 32-byte message), 1 thread";
    if (!wanted(name)) return;
    snprintf(cursection, sizeof cursection, "sign (C_SignInit+C_Sign)");
    row_t *r = row("ops/s", HIGHER, "%s", name);
    RAND_bytes(hmackey, sizeof hmackey);
    hmacalg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    for (int c = 1; c <= nmods; c++) {
        CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
        CK_KEY_TYPE kt = CKK_GENERIC_SECRET;
        CK_BBOOL yes = CK_TRUE;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt},
                            {CKA_VALUE, hmackey, 32}, {CKA_SIGN, &yes, 1}};
        CK_RV rv = mods[c].f->C_CreateObject(mods[c].s, t, 4, &hmach[c]);
        if (rv != CKR_OK) { note(r, c, "n/a (key import: %s)", rvname(rv)); hmach[c] = CK_INVALID_HANDLE; }
    }
    work_t w = {0};
    w.datalen = 32;
    memset(w.data, 0x5a, w.datalen);
    double samples[NCOL][64];
    int ns[NCOL] = {0}, failed[NCOL] = {0};
    for (int c = 1; c <= nmods; c++) if (hmach[c] == CK_INVALID_HANDLE) failed[c] = 1;
    for (int rep = 0; rep < REPS; rep++)
        for (int c = 0; c < nmods + 1; c++) {
            if (failed[c]) continue;
            work_t x = w;
            x.col = c;
            x.m = c ? &mods[c] : NULL;
            x.s = c ? mods[c].s : 0;
            double v = run_for(c ? p11_hmac : raw_hmac, &x);
            if (v < 0) { failed[c] = 1; note(r, c, "n/a (%s)", c ? rvname(x.err) : "OpenSSL error"); continue; }
            samples[c][ns[c]++] = v;
        }
    for (int c = 0; c < nmods + 1; c++) if (!failed[c]) put(r, c, samples[c], ns[c]);
}

/* The copy limit (issue 30, docs/benchmarks.md "Limits"): an out-of-process
 * module must copy the data in and out (the caller's buffer, the frame, the
 * shared region or the socket, the agent's copy, the reply the same way
 * back). memcpy between two buffers of the message's size, in this process,
 * is the yardstick each bulk row's limit is derived from. Raw column only. */
static unsigned char *memcpy_dst;
static int raw_memcpy(work_t *w) {
    (void)w;
    memcpy(memcpy_dst, symin, SYM_MSG);
    __asm__ __volatile__("" : : "r"(memcpy_dst) : "memory");
    return 0;
}

static void memcpy_rows(void) {
    /* Not 64 bytes: a copy that small is shorter than the clock read run_for makes per operation. */
    static const size_t sizes[] = {16384, SYM_MAX};
    memcpy_dst = malloc(SYM_MAX);
    if (!memcpy_dst) return;
    snprintf(cursection, sizeof cursection, "the copy limit (raw column: this machine's memcpy)");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        SYM_MSG = sizes[z];
        char name[96];
        snprintf(name, sizeof name, "memcpy %zu bytes (the copy limit of the rows above)", SYM_MSG);
        if (!wanted(name)) continue;
        row_t *r = row("MB/s", HIGHER, "%s", name);
        double samples[64];
        int n = 0;
        for (int rep = 0; rep < REPS; rep++) {
            work_t w = {0};
            double v = run_for(raw_memcpy, &w);
            if (v > 0) samples[n++] = v * SYM_MSG / 1e6;
        }
        if (n) put(r, RAW, samples, n);
    }
    SYM_MSG = 16384;
    free(memcpy_dst);
}

static void sym_rows(void) {
    RAND_bytes(symkey, sizeof symkey); RAND_bytes(symiv, sizeof symiv); RAND_bytes(symin, sizeof symin);
    symcipher[S_GCM] = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    symcipher[S_CTR] = EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL);
    symcipher[S_CHACHA] = EVP_CIPHER_fetch(NULL, "ChaCha20-Poly1305", NULL);
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(mods[SUBJ].dl, "C_GetInterface");
    CK_INTERFACE_PTR ip = NULL;
    if (gi && gi(NULL, NULL, &ip, 0) == CKR_OK && ip && ((CK_VERSION *)ip->pFunctionList)->major >= 3)
        sym30 = ip->pFunctionList;
    for (int c = 1; c <= nmods; c++)
        for (int k = 0; k < NSYM; k++) {
            CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
            CK_KEY_TYPE kt = k == S_CHACHA ? CKK_CHACHA20 : CKK_AES;
            CK_BBOOL yes = CK_TRUE;
            CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt},
                                {CKA_VALUE, symkey, 32}, {CKA_ENCRYPT, &yes, 1}};
            CK_RV rv = mods[c].f->C_CreateObject(mods[c].s, t, 4, &symh[c][k]);
            if (rv != CKR_OK) snprintf(symerr[c][k], sizeof symerr[c][k], "n/a (key import: %s)", rvname(rv));
        }
    static const struct { int kind, style; const char *how; } rowsdef[] = {
        {S_GCM, ST_MESSAGE, "C_EncryptMessage (raw: keyed ctx, new IV)"},
        {S_CHACHA, ST_MESSAGE, "C_EncryptMessage (raw: keyed ctx, new IV)"},
        {S_CTR, ST_STREAM, "C_EncryptUpdate parts (raw: one ctx)"},
        {S_GCM, ST_SINGLE, "C_EncryptInit+C_Encrypt (raw: new ctx)"},
        {S_CHACHA, ST_SINGLE, "C_EncryptInit+C_Encrypt (raw: new ctx)"},
        {S_CTR, ST_SINGLE, "C_EncryptInit+C_Encrypt (raw: new ctx)"},
    };
    opfn p11ops[] = {p11_message, p11_stream, p11_single}, rawops[] = {raw_message, raw_stream, raw_single};
    static const size_t sizes[] = {16384, SYM_MAX, 64};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (size_t i = 0; i < sizeof rowsdef / sizeof rowsdef[0]; i++) {
        int k = rowsdef[i].kind, st = rowsdef[i].style;
        SYM_MSG = sizes[z];
        /* 64 bytes: the small-operation goal's row, AES-GCM (both APIs) only. */
        if (SYM_MSG == 64 && k != S_GCM) continue;
        char name[160], size[24];
        if (SYM_MSG >= (1u << 20)) snprintf(size, sizeof size, "%zu MiB", SYM_MSG >> 20);
        else if (SYM_MSG >= 1024) snprintf(size, sizeof size, "%zu KiB", SYM_MSG >> 10);
        else snprintf(size, sizeof size, "%zu B", SYM_MSG);
        snprintf(name, sizeof name, "encrypt %s %s, %s", symname[k], size, rowsdef[i].how);
        snprintf(cursection, sizeof cursection, "symmetric encryption, %s messages", size);
        if (!wanted(name)) continue;
        row_t *r = row("MB/s", HIGHER, "%s", name);
        double samples[NCOL][64];
        int ns[NCOL] = {0}, failed[NCOL] = {0};
        for (int c = 1; c <= nmods; c++) if (symerr[c][k][0]) { note(r, c, "%s", symerr[c][k]); failed[c] = 1; }
        if (!symcipher[k]) { note(r, RAW, "n/a (no cipher)"); failed[RAW] = 1; }
        for (int rep = 0; rep < REPS; rep++)
            for (int c = 0; c < nmods + 1; c++) {
                if (failed[c]) continue;
                work_t w = {0};
                w.kind = k;
                w.col = c;
                w.m = c ? &mods[c] : NULL;
                w.s = c ? mods[c].s : 0;
                CK_RV rv = st == ST_SINGLE ? CKR_OK : sym_setup(c, k, st, 1);
                if (rv != CKR_OK) {
                    failed[c] = 1;
                    note(r, c, rv == CKR_FUNCTION_NOT_SUPPORTED ? "n/a (no message API)" : "n/a (%s)", rvname(rv));
                    continue;
                }
                double v = run_for(c ? p11ops[st] : rawops[st], &w);
                if (st != ST_SINGLE) sym_setup(c, k, st, 0);
                if (v < 0) { failed[c] = 1; note(r, c, "n/a (%s)", c ? rvname(w.err) : "OpenSSL error"); continue; }
                samples[c][ns[c]++] = v * SYM_MSG / 1e6;
            }
        for (int c = 0; c < nmods + 1; c++) if (!failed[c]) put(r, c, samples[c], ns[c]);
    }
    SYM_MSG = 16384;
    memcpy_rows();
}

/* --------------------------------------------------- objects and find */

static void make_id(unsigned char *id, long i) {
    /* 20 bytes like a SHA-1 key identifier, derived from i */
    for (int j = 0; j < 20; j++) id[j] = (unsigned char)((i >> ((j % 4) * 8)) ^ (j * 37));
}

/* The population: even i a data object, odd i an EC public key object
 * (CKA_ID is not a data-object attribute); every object has a unique label. */
static unsigned char popl_point[67];

static CK_RV create_obj(mod_t *m, long i, const char *prefix, CK_OBJECT_HANDLE *h) {
    CK_OBJECT_CLASS cls = (i & 1) ? CKO_PUBLIC_KEY : CKO_DATA;
    CK_KEY_TYPE kt = CKK_EC;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    char label[48];
    snprintf(label, sizeof label, "%s-%07ld", prefix, i);
    unsigned char id[20], value[32];
    make_id(id, i);
    memset(value, (int)(i & 0xff), sizeof value);
    char app[] = "p11bench";
    if (!popl_point[0]) {
        buf_t b = octparam(rawkey[K_P256], OSSL_PKEY_PARAM_PUB_KEY);
        popl_point[0] = 0x04;
        popl_point[1] = (unsigned char)b.n;
        memcpy(popl_point + 2, b.p, b.n);
        free(b.p);
    }
    if (i & 1) {
        CK_ATTRIBUTE t[] = {
            {CKA_CLASS, &cls, sizeof cls}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &no, 1},
            {CKA_LABEL, label, strlen(label)}, {CKA_ID, id, sizeof id}, {CKA_KEY_TYPE, &kt, sizeof kt},
            {CKA_EC_PARAMS, (void *)OID_P256, sizeof OID_P256}, {CKA_EC_POINT, popl_point, sizeof popl_point},
            {CKA_VERIFY, &yes, 1},
        };
        return m->f->C_CreateObject(m->s, t, sizeof t / sizeof t[0], h);
    }
    CK_ATTRIBUTE t[] = {
        {CKA_CLASS, &cls, sizeof cls}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &no, 1},
        {CKA_LABEL, label, strlen(label)}, {CKA_APPLICATION, app, strlen(app)}, {CKA_VALUE, value, sizeof value},
    };
    return m->f->C_CreateObject(m->s, t, sizeof t / sizeof t[0], h);
}

/* One find: Init, FindObjects, Final; returns the number of matches or -1. */
static long find_one(mod_t *m, CK_ATTRIBUTE *t, CK_ULONG n) {
    CK_OBJECT_HANDLE hs[16];
    CK_ULONG got = 0;
    if (m->f->C_FindObjectsInit(m->s, t, n) != CKR_OK) return -1;
    if (m->f->C_FindObjects(m->s, hs, 16, &got) != CKR_OK) return -1;
    if (m->f->C_FindObjectsFinal(m->s) != CKR_OK) return -1;
    return (long)got;
}

/* Median time of one find (ms) by CKA_ID or CKA_LABEL for object i. */
static double find_ms(mod_t *m, long i, int bylabel, double *samples, int *ns) {
    unsigned char id[20];
    char label[48];
    make_id(id, i);
    snprintf(label, sizeof label, "obj-%07ld", i);
    CK_ATTRIBUTE t = bylabel ? (CK_ATTRIBUTE){CKA_LABEL, label, strlen(label)} : (CK_ATTRIBUTE){CKA_ID, id, sizeof id};
    *ns = 0;
    for (int rep = 0; rep < REPS; rep++) {
        long n = 0;
        double t0 = now(), t1;
        do {
            long got = find_one(m, &t, 1);
            if (got != 1) return -1;
            n++;
            t1 = now();
        } while (!SMOKE && t1 - t0 < RUNTIME / 2);
        samples[(*ns)++] = (t1 - t0) * 1000 / n;
    }
    return 0;
}

/* ------------------------------------------------------- child probes */

static const char *SELF;

/* Child: dlopen, C_Initialize, login, finalize; prints "load_ms dlopen_init_ms init_login_fin_ms login_ms
 * find_ms dlopen_init_opensession_ms" (the last: what an application pays before its first real call,
 * through the agent when it runs already). */
static int child_init(const char *path) {
    double t0 = now();
    void *dl;
    CK_FUNCTION_LIST_PTR f = load(path, &dl);
    CK_C_INITIALIZE_ARGS args = {0};
    args.flags = CKF_OS_LOCKING_OK;
    double t1 = now();
    if (f->C_Initialize(&args) != CKR_OK) return 1;
    double t2 = now();
    CK_SLOT_ID slot = find_slot(f, TOKEN);
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return 1;
    double t3 = now();
    if (f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)PIN, strlen(PIN)) != CKR_OK) return 1;
    double t4 = now();
    /* one find so a lazily loading module has done its work */
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t = {CKA_CLASS, &cls, sizeof cls};
    find_one(&(mod_t){.f = f, .s = s}, &t, 1);
    double t5 = now();
    f->C_Finalize(NULL);
    double t6 = now();
    printf("%f %f %f %f %f %f\n", (t1 - t0) * 1e3, (t2 - t0) * 1e3, (t6 - t1) * 1e3, (t4 - t3) * 1e3, (t5 - t4) * 1e3,
           (t3 - t0) * 1e3);
    return 0;
}

/* Child: holds the module with every object found and touched; prints peak RSS in KiB. */
static int child_rss(const char *path) {
    void *dl;
    CK_FUNCTION_LIST_PTR f = load(path, &dl);
    CK_C_INITIALIZE_ARGS args = {0};
    args.flags = CKF_OS_LOCKING_OK;
    if (f->C_Initialize(&args) != CKR_OK) return 1;
    CK_SLOT_ID slot = find_slot(f, TOKEN);
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return 1;
    if (f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)PIN, strlen(PIN)) != CKR_OK) return 1;
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    if (f->C_FindObjectsInit(s, NULL, 0) != CKR_OK) return 1;
    CK_OBJECT_HANDLE hs[1024];
    CK_ULONG got;
    long total = 0;
    char label[64];
    do {
        if (f->C_FindObjects(s, hs, 1024, &got) != CKR_OK) return 1;
        total += got;
    } while (got > 0);
    f->C_FindObjectsFinal(s);
    /* read one attribute of a few objects, as a consumer listing them would */
    CK_ATTRIBUTE a = {CKA_LABEL, label, sizeof label};
    f->C_GetAttributeValue(s, hs[0], &a, 1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%ld %ld %ld\n", ru.ru_maxrss, ru0.ru_maxrss, total);
    f->C_Finalize(NULL);
    return 0;
}

/* Child: signing in NTHREADS threads (one session each) with key KEY (ECDSA
 * P-256 or RSA-2048 PKCS #1) after "ready" on stdout and a byte on stdin, so
 * sibling processes start together; prints the summed ops/s. PATH "raw"
 * signs with a fresh OpenSSL key instead (the raw column); else the module's
 * key "bench-key-KEY". */
static int child_sign(const char *path, int nthreads, int key) {
    work_t w = {0};
    w.key = key == K_RSA2048 ? K_RSA2048 : K_P256;
    w.kind = w.key == K_RSA2048 ? W_PKCS1 : W_PLAIN;
    w.datalen = 32;
    memset(w.data, 0x5a, 32);
    mod_t mm = {.name = "child", .path = path}, *m = &mm;
    if (!strcmp(path, "raw")) {
        rawkey[w.key] = gen_raw(w.key);
    } else {
        module_up(m);
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        char label[32];
        snprintf(label, sizeof label, "bench-key-%d", (int)w.key);
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_LABEL, label, strlen(label)}};
        CK_ULONG got = 0;
        CK(m->f->C_FindObjectsInit(m->s, t, 2));
        CK(m->f->C_FindObjects(m->s, &privh[SUBJ][w.key], 1, &got));
        CK(m->f->C_FindObjectsFinal(m->s));
        if (got != 1) return 1;
        w.col = SUBJ;
        w.m = m;
        w.s = m->s;
    }
    printf("ready\n");
    fflush(stdout);
    char go;
    if (read(0, &go, 1) != 1) return 1;
    double v = run_threads(w.m ? p11_sign : raw_sign, &w, nthreads);
    printf("%f\n", v);
    if (m->f) m->f->C_Finalize(NULL);
    return v < 0;
}

/* NPROC children of child_sign at once; the sum of their ops/s, or -1. */
static double run_sign_procs(const char *path, int nproc, int nthreads, int key) {
    int to[8][2], from[8][2];
    pid_t pid[8];
    char nt[8], kk[8];
    snprintf(nt, sizeof nt, "%d", nthreads);
    snprintf(kk, sizeof kk, "%d", key);
    for (int i = 0; i < nproc; i++) {
        if (pipe(to[i]) || pipe(from[i])) return -1;
        pid[i] = fork();
        if (pid[i] == 0) {
            dup2(to[i][0], 0);
            dup2(from[i][1], 1);
            for (int j = 0; j <= i; j++) { close(to[j][0]); close(to[j][1]); close(from[j][0]); close(from[j][1]); }
            execl(SELF, SELF, "--child", "sign", path, "--token", TOKEN, "--threads", nt, "--key", kk, (char *)NULL);  /* BENCH_PIN inherited */
            _exit(127);
        }
        close(to[i][0]);
        close(from[i][1]);
    }
    FILE *in[8];
    int ok = 1;
    signal(SIGPIPE, SIG_IGN); /* a child that died early must not kill the run */
    char line[64];
    for (int i = 0; i < nproc; i++) {
        in[i] = fdopen(from[i][0], "r");
        if (!in[i] || !fgets(line, sizeof line, in[i]) || strncmp(line, "ready", 5)) ok = 0;
    }
    for (int i = 0; i < nproc; i++) { if (write(to[i][1], "g", 1) != 1) ok = 0; close(to[i][1]); }
    double sum = 0;
    for (int i = 0; i < nproc; i++) {
        double v = -1;
        if (!in[i] || fscanf(in[i], "%lf", &v) != 1 || v < 0) ok = 0;
        sum += v;
        if (in[i]) fclose(in[i]);
        int st;
        waitpid(pid[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) ok = 0;
    }
    return ok ? sum : -1;
}

/* The scaling targets (issues 16, 30): 2 processes x 2 threads of
 * ECDSA P-256 and RSA-2048 signing against the 1-thread row of the same run. */
static void multiproc_rows(void) {
    static const struct { int key; const char *what, *one; } kinds[] = {
        {K_P256, "ECDSA P-256", "sign ECDSA P-256 (CKM_ECDSA, 32-byte digest), 1 thread"},
        {K_RSA2048, "RSA-2048 PKCS #1", "sign RSA-2048 PKCS #1 (CKM_SHA256_RSA_PKCS), 1 thread"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char name[96];
        snprintf(name, sizeof name, "sign %s, 2 processes × 2 threads", kinds[k].what);
        if (!wanted(name)) continue;
        snprintf(cursection, sizeof cursection, "sign (C_SignInit+C_Sign)");
        row_t *r = row("ops/s", HIGHER, "%s", name);
        row_t *q = row("×", HIGHER, "  2 processes × 2 threads ÷ 1 thread (%s)", kinds[k].what);
        const row_t *one = NULL;
        for (int i = 0; i < nrows; i++)
            if (!strcmp(rows[i].name, kinds[k].one)) one = &rows[i];
        double samples[NCOL][64];
        int ns[NCOL] = {0};
        for (int rep = 0; rep < REPS; rep++)
            for (int c = 0; c <= nmods; c++) {
                double v = run_sign_procs(c ? mods[c].path : "raw", 2, 2, kinds[k].key);
                if (v >= 0) samples[c][ns[c]++] = v;
            }
        for (int c = 0; c <= nmods; c++) {
            if (!ns[c]) { note(r, c, "n/a (child failed)"); continue; }
            put(r, c, samples[c], ns[c]);
            if (one && one->have[c] && one->med[c] > 0) put1(q, c, r->med[c] / one->med[c]);
        }
    }
}

static int run_child(const char *mode, const char *path, double *vals, int nvals) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --child %s '%s' --token '%s'", SELF, mode, path, TOKEN);  /* BENCH_PIN is inherited */
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int got = 0;
    for (int i = 0; i < nvals; i++) got += fscanf(p, "%lf", &vals[i]) == 1;
    int st = pclose(p);
    return (got == nvals && st == 0) ? 0 : -1;
}

static void cold_rows(long nobjs) {
    char name[96];
    snprintf(name, sizeof name, "dlopen + C_GetFunctionList + C_Initialize, %ld objects", nobjs);
    if (!wanted(name) && !wanted("cold")) return;
    row_t *r1 = row("ms", LOWER, "%s", name);
    row_t *r2 = row("ms", LOWER, "C_Initialize→OpenSession→Login→find→Finalize cold, %ld objects", nobjs);
    row_t *r3 = row("ms", LOWER, "  of which C_Login, %ld objects", nobjs);
    row_t *r4 = row("ms", LOWER, "  of which first find after login, %ld objects", nobjs);
    row_t *r5 = row("ms", LOWER, "  all but C_Login (the KDF's share), %ld objects", nobjs);
    row_t *r6 = row("ms", LOWER, "dlopen + C_Initialize + C_OpenSession, %ld objects", nobjs);
    for (int c = 1; c <= nmods; c++) {
        double s1[64], s2[64], s3[64], s4[64], s5[64], s6[64];
        int n = 0;
        for (int rep = 0; rep < REPS; rep++) {
            double v[6];
            if (run_child("init", mods[c].path, v, 6)) { note(r1, c, "n/a (child failed)"); break; }
            s1[n] = v[1]; s2[n] = v[2]; s3[n] = v[3]; s4[n] = v[4]; s5[n] = v[2] - v[3]; s6[n] = v[5]; n++;
        }
        put(r1, c, s1, n); put(r2, c, s2, n); put(r3, c, s3, n); put(r4, c, s4, n); put(r5, c, s5, n); put(r6, c, s6, n);
    }
}

/* ------------------------------------------------------ scrypt (KDF) */

static void kdf_row(void) {
    if (!wanted("KDF")) return;
    row_t *r = row("ms", LOWER, "KDF alone: scrypt N=2^%d r=8 p=1 (keyshare's PIN KDF)", KDF_LOG2N);
    double s[64];
    int n = 0;
    for (int rep = 0; rep < REPS; rep++) {
        unsigned char out[32];
        double t0 = now();
        if (!EVP_PBE_scrypt("123456", 6, (const unsigned char *)"saltsaltsaltsalt", 16, 1ULL << KDF_LOG2N, 8, 1,
                            1ULL << 30, out, 32))
            break;
        s[n++] = (now() - t0) * 1e3;
    }
    put(r, RAW, s, n);
}

/* ------------------------------------------------- durable-write floor */

/* What one durable commit costs on this disk, whoever makes it: a 4 KiB
 * overwrite + fdatasync, and the smallest SQLite transaction (one 200-byte row,
 * WAL, synchronous=FULL). Every C_CreateObject that is durable on return pays
 * at least one of these, so they bound the create rows; they go in the raw
 * (baseline) column. */
static double floor_fdatasync(const char *dir, int n) {
    char path[512];
    snprintf(path, sizeof path, "%s/floor.dat", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    unsigned char buf[4096];
    memset(buf, 0x5a, sizeof buf);
    for (int i = 0; i < 256; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) { close(fd); return -1; }
    fsync(fd);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        if (pwrite(fd, buf, sizeof buf, (off_t)(i % 256) * 4096) != (ssize_t)sizeof buf || fdatasync(fd)) {
            close(fd);
            return -1;
        }
    }
    double dt = now() - t0;
    close(fd);
    unlink(path);
    return n / dt;
}

static double floor_sqlite(const char *dir, int n) {
    char path[512], wal[520], shm[520];
    snprintf(path, sizeof path, "%s/floor.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    sqlite3 *db = NULL;
    double rate = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK) goto out;
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                         "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL);", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    sqlite3_stmt *ins = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO t (v) VALUES (?)", -1, &ins, NULL) != SQLITE_OK) goto out;
    unsigned char v[200];
    memset(v, 0xa5, sizeof v);
    double t0 = now();
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        ok = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_bind_blob(ins, 1, v, sizeof v, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(ins) == SQLITE_DONE &&
             sqlite3_reset(ins) == SQLITE_OK && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    }
    if (ok) rate = n / (now() - t0);
    sqlite3_finalize(ins);
out:
    sqlite3_close(db);
    unlink(path);
    unlink(wal);
    unlink(shm);
    return rate;
}

static void floor_rows(void) {
    const char *dir = getenv("BENCH_SCRATCH") ? getenv("BENCH_SCRATCH") : "/tmp";
    int n = SMOKE ? 20 : 2000;
    struct { const char *name; double (*fn)(const char *, int); } f[] = {
        {"durable-write floor: 4 KiB overwrite + fdatasync", floor_fdatasync},
        {"durable-write floor: SQLite 1-row transaction (WAL, FULL)", floor_sqlite},
    };
    for (int k = 0; k < 2; k++) {
        if (!wanted(f[k].name) && !wanted("C_CreateObject")) continue;
        row_t *r = row("ops/s", HIGHER, "%s", f[k].name);
        double s[64];
        int m = 0;
        for (int rep = 0; rep < REPS && rep < 64; rep++) {
            double v = f[k].fn(dir, n);
            if (v < 0) { note(r, RAW, "n/a (%s)", strerror(errno)); m = 0; break; }
            s[m++] = v;
        }
        put(r, RAW, s, m);
    }
}

/* ------------------------------------------------------- keygen rows */

static int p11_genpair(work_t *w) {
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ULONG bits = 2048;
    unsigned char e[] = {1, 0, 1};
    CK_ATTRIBUTE pub_ec[] = {{CKA_TOKEN, &yes, 1}, {CKA_EC_PARAMS, (void *)OID_P256, sizeof OID_P256}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE pub_rsa[] = {{CKA_TOKEN, &yes, 1}, {CKA_MODULUS_BITS, &bits, sizeof bits},
                              {CKA_PUBLIC_EXPONENT, e, 3}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE priv[] = {{CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1}, {CKA_SENSITIVE, &yes, 1},
                           {CKA_SIGN, &yes, 1}, {CKA_EXTRACTABLE, &no, 1}};
    int rsa = w->key == K_RSA2048;
    CK_MECHANISM mm = {rsa ? CKM_RSA_PKCS_KEY_PAIR_GEN : CKM_EC_KEY_PAIR_GEN, NULL, 0};
    CK_OBJECT_HANDLE hp, hv;
    CK_RV rv = w->m->f->C_GenerateKeyPair(w->s, &mm, rsa ? pub_rsa : pub_ec, rsa ? 4 : 3, priv, 5, &hp, &hv);
    if (rv != CKR_OK) return w->err = rv, 1;
    return 0;
}

static int raw_genpair(work_t *w) {
    EVP_PKEY *p = w->key == K_RSA2048 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    if (!p) return 1;
    EVP_PKEY_free(p);
    return 0;
}

static void keygen_rows(void) {
    snprintf(cursection, sizeof cursection, "key generation (token keys)");
    double save = RUNTIME;
    if (wanted("C_GenerateKeyPair EC")) {
        row_t *r = row("ops/s", HIGHER, "C_GenerateKeyPair EC P-256");
        work_t w = {0};
        w.key = K_P256;
        RUNTIME = save / 2;
        rate_row(r, raw_genpair, p11_genpair, &w, 1);
    }
    if (wanted("C_GenerateKeyPair RSA")) {
        row_t *r = row("ops/s", HIGHER, "C_GenerateKeyPair RSA-2048");
        work_t w = {0};
        w.key = K_RSA2048;
        RUNTIME = 0; /* one key per repetition: RSA generation time varies widely */
        rate_row(r, raw_genpair, p11_genpair, &w, 1);
    }
    RUNTIME = save;
}

/* ---------------------------------------------------- keyshare CLI */

static const char *CLI, *CLI_HOME;

static double run_cmd_ms(const char *cmd) {
    double t0 = now();
    int st = system(cmd);
    double dt = (now() - t0) * 1e3;
    return st == 0 ? dt : -1;
}

static void cli_list_row(long nobjs) {
    snprintf(cursection, sizeof cursection, "keyshare CLI");
    row_t *r = row("ms", LOWER, "keyshare list (%ld items, public)", nobjs);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' list --token '%s' > /dev/null", CLI, TOKEN);
    double s[64];
    int n = 0;
    for (int rep = 0; rep < REPS; rep++) {
        double v = run_cmd_ms(cmd);
        if (v < 0) { note(r, SUBJ, "n/a (failed)"); return; }
        s[n++] = v;
    }
    put(r, SUBJ, s, n);
    snprintf(cursection, sizeof cursection, "find one object (Init+FindObjects+Final)");
}

/* n distinct PKCS #12 files (P-256 key, self-signed certificate, OpenSSL 3
 * defaults: PBES2 AES-256-CBC, PBKDF2 2048 iterations, SHA-256 MAC). */
static int make_p12s(const char *dir, int n, const char *password) {
    for (int i = 0; i < n; i++) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        char cn[64];
        snprintf(cn, sizeof cn, "bench identity %d", i);
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), i + 1);
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 365);
        X509_set_pubkey(x, k);
        X509_NAME *nm = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (unsigned char *)cn, -1, -1, 0);
        X509_set_issuer_name(x, nm);
        if (!X509_sign(x, k, EVP_sha256())) return -1;
        PKCS12 *p12 = PKCS12_create(password, cn, k, x, NULL, 0, 0, 0, 0, 0);
        if (!p12) return -1;
        char path[4096];
        snprintf(path, sizeof path, "%s/id-%04d.p12", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f) return -1;
        i2d_PKCS12_fp(f, p12);
        fclose(f);
        PKCS12_free(p12);
        X509_free(x);
        EVP_PKEY_free(k);
    }
    return 0;
}

static void cli_import_row(void) {
    if (!CLI || !CLI_HOME || !wanted("keyshare import")) return;
    int n = SMOKE ? 3 : 1000;
    snprintf(cursection, sizeof cursection, "keyshare CLI");
    row_t *r = row("s", LOWER, "keyshare import of %d PKCS #12 files (one command)", n);
    char dir[] = "/tmp/p11bench-p12.XXXXXX";
    if (!mkdtemp(dir)) { note(r, SUBJ, "n/a (mkdtemp)"); return; }
    setenv("BENCH_P12PW", "bench-p12", 1);
    if (make_p12s(dir, n, "bench-p12")) { note(r, SUBJ, "n/a (p12 generation)"); return; }
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "KEYSHARE_HOME='%s' '%s' import --token '%s' --pin-source env:BENCH_PIN "
             "--password-source env:BENCH_P12PW '%s'/*.p12 > /dev/null 2>&1",
             CLI_HOME, CLI, TOKEN, dir);
    double v = run_cmd_ms(cmd);
    if (v < 0) note(r, SUBJ, "n/a (import failed)");
    else put1(r, SUBJ, v / 1e3);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

/* ------------------------------------------------ object / find curve */

static void object_rows(void) {
    static const long full_stages[] = {100, 1000, 10000, 100000}, smoke_stages[] = {10, 100};
    const long *stages = SMOKE ? smoke_stages : full_stages;
    const long refstage = SMOKE ? 100 : 10000; /* create/destroy, cold start and `keyshare list` run here */
    long have[NCOL] = {0};
    long create_n[NCOL] = {0};
    int broken[NCOL] = {0};
    char why[NCOL][48] = {{0}};
    int nst = SMOKE ? 2 : 4;
    int do_find = wanted("find"), do_cold = wanted("cold") || wanted("C_Initialize"), do_rss = wanted("RSS");
    int do_create = wanted("C_CreateObject") || wanted("C_DestroyObject") || do_find || do_rss || wanted("keyshare list");
    if (!do_create && !do_cold) return;
    row_t *fid[4] = {0}, *flab[4] = {0};

    snprintf(cursection, sizeof cursection, "module load and login (cold process)");
    kdf_row();
    if (do_cold) cold_rows(0);
    snprintf(cursection, sizeof cursection, "objects");
    row_t *rc = NULL, *rd = NULL, *rc10 = NULL;
    floor_rows();
    if (do_create) {
        rc10 = row("s", LOWER, "create %ld token objects (half data, half EC public keys), total", refstage);
        rc = row("ops/s", HIGHER, "C_CreateObject token object (0→%ld objects)", refstage);
        rd = row("ops/s", HIGHER, "C_DestroyObject token object (at %ld objects)", refstage);
    }
    snprintf(cursection, sizeof cursection, "find one object (Init+FindObjects+Final)");
    for (int st = 0; st < nst && do_create; st++) {
        long target = stages[st];
        if (target > MAX_OBJECTS) break;
        if (do_find) {
            fid[st] = row("ms", LOWER, "find by CKA_ID among %ld objects", target);
            flab[st] = row("ms", LOWER, "find by CKA_LABEL among %ld objects", target);
        }
        for (int c = 1; c <= nmods; c++) {
            if (broken[c]) continue;
            if (target > mods[c].maxobjs) {
                snprintf(why[c], sizeof why[c], "not run (cap %ld)", mods[c].maxobjs);
                if (fid[st]) { note(fid[st], c, "%s", why[c]); note(flab[st], c, "%s", why[c]); }
                continue;
            }
            double t0 = now();
            while (have[c] < target) {
                CK_OBJECT_HANDLE h;
                CK_RV rv = create_obj(&mods[c], have[c], "obj", &h);
                if (rv != CKR_OK) {
                    broken[c] = 1;
                    snprintf(why[c], sizeof why[c], "n/a (create: %s)", rvname(rv));
                    break;
                }
                have[c]++;
                if (have[c] % 10000 == 0 && !SMOKE) { fprintf(stderr, "  %s: %ld objects\r", mods[c].name, have[c]); }
                if (have[c] <= refstage) create_n[c]++;
            }
            double dt = now() - t0;
            /* creation rate over the objects 0..10000 */
            static double acc[NCOL];
            if (target <= refstage) acc[c] += dt;
            if (target == refstage && !broken[c]) {
                put1(rc10, c, acc[c]);
                put1(rc, c, create_n[c] / acc[c]);
                /* destroy rate: create then destroy a batch of temporaries */
                long nb = SMOKE ? 5 : 1000;
                CK_OBJECT_HANDLE *hs = calloc(nb, sizeof *hs);
                int ok = 1;
                for (long i = 0; i < nb && ok; i++) ok = create_obj(&mods[c], 9000000 + i, "tmp", &hs[i]) == CKR_OK;
                double d0 = now();
                for (long i = 0; i < nb && ok; i++) ok = mods[c].f->C_DestroyObject(mods[c].s, hs[i]) == CKR_OK;
                if (ok) put1(rd, c, nb / (now() - d0));
                else note(rd, c, "n/a (destroy failed)");
                free(hs);
            }
            if (broken[c]) {
                if (fid[st]) { note(fid[st], c, "%s", why[c]); note(flab[st], c, "%s", why[c]); }
                continue;
            }
            if (fid[st]) {
                double s[64];
                int ns;
                if (find_ms(&mods[c], (target / 2) | 1, 0, s, &ns) == 0) put(fid[st], c, s, ns);
                else note(fid[st], c, "n/a (find failed)");
                if (find_ms(&mods[c], target - 1, 1, s, &ns) == 0) put(flab[st], c, s, ns);
                else note(flab[st], c, "n/a (find failed)");
            }
        }
        if (!SMOKE) fprintf(stderr, "  stage %ld done\n", target);
        if (target == refstage && do_cold) {
            snprintf(cursection, sizeof cursection, "module load and login (cold process)");
            cold_rows(target);
            snprintf(cursection, sizeof cursection, "find one object (Init+FindObjects+Final)");
        }
        if (target == refstage && CLI && wanted("keyshare list")) cli_list_row(have[SUBJ]);
    }
    if (rc && !rc->have[RAW]) note(rc, RAW, "-");
    if (do_rss) {
        snprintf(cursection, sizeof cursection, "memory");
        long most = 0;
        for (int c = 1; c <= nmods; c++) if (have[c] > most) most = have[c];
        row_t *r = row("MiB", LOWER, "peak RSS, process holding the module, all objects found (%ld objects)", most);
        row_t *r0 = row("MiB", LOWER, "  peak RSS after C_Login, before the find");
        for (int c = 1; c <= nmods; c++) {
            double v[3];
            if (run_child("rss", mods[c].path, v, 3)) { note(r, c, "n/a (child failed)"); continue; }
            put1(r, c, v[0] / 1024);
            put1(r0, c, v[1] / 1024);
            if ((long)v[2] < most) note(r, c, "%.0f (%ld objects)", v[0] / 1024, (long)v[2]), r->have[c] = 0;
        }
    }
}

/* ------------------------------------------------------------------ main */

static double envd(const char *n, double d) {
    const char *v = getenv(n);
    return v && *v ? atof(v) : d;
}

int main(int argc, char **argv) {
    SELF = "/proc/self/exe";
    static char selfpath[4096];
    ssize_t sl = readlink("/proc/self/exe", selfpath, sizeof selfpath - 1);
    if (sl > 0) { selfpath[sl] = 0; SELF = selfpath; }
    SMOKE = envd("BENCH_SMOKE", 0) != 0;
    REPS = SMOKE ? 1 : (int)envd("BENCH_REPS", 5);
    if (REPS < 1) REPS = 1;
    if (REPS > 64) REPS = 64;
    RUNTIME = envd("BENCH_TIME", 0.25);
    CPUCLOCK = envd("BENCH_CPU", 0) != 0;
    MAX_OBJECTS = (long)envd("BENCH_MAX_OBJECTS", SMOKE ? 100 : 100000);
    REF_MAX_OBJECTS = (long)envd("BENCH_REF_MAX_OBJECTS", 10000);
    KDF_LOG2N = (int)envd("BENCH_KDF_LOG2N", envd("KEYSHARE_KDF_LOG2N", 15));
    ONLY = getenv("BENCH_ONLY");
    if (ONLY && !*ONLY) ONLY = NULL;

    const char *child = NULL, *childpath = NULL;
    int childthreads = 2, childkey = K_P256;
    nmods = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--module") && i + 1 < argc) {
            char *spec = argv[++i], *eq = strchr(spec, '=');
            if (!eq || nmods == 2) die("--module NAME=PATH (at most two)");
            *eq = 0;
            mods[++nmods].name = spec;
            mods[nmods].path = eq + 1;
        } else if (!strcmp(argv[i], "--token") && i + 1 < argc) TOKEN = argv[++i];
        else if (!strcmp(argv[i], "--pin")) die("give the PIN in BENCH_PIN, not on the command line (`ps` shows it to every local user)");
        else if (!strcmp(argv[i], "--cli") && i + 1 < argc) CLI = argv[++i];
        else if (!strcmp(argv[i], "--cli-home") && i + 1 < argc) CLI_HOME = argv[++i];
        else if (!strcmp(argv[i], "--child") && i + 2 < argc) { child = argv[++i]; childpath = argv[++i]; }
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) childthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--key") && i + 1 < argc) childkey = atoi(argv[++i]);
        else die("usage: BENCH_PIN=PIN p11bench --module NAME=PATH [--module NAME=PATH] [--token L] [--cli BIN] [--cli-home DIR]");
    }
    PIN = getenv("BENCH_PIN");
    if (!PIN || !*PIN) die("set BENCH_PIN to the tokens' user PIN");
    if (child && !strcmp(child, "sign")) return child_sign(childpath, childthreads, childkey);
    if (child) return !strcmp(child, "init") ? child_init(childpath) : child_rss(childpath);
    if (nmods == 0) die("give at least one --module NAME=PATH");
    colname[SUBJ] = mods[1].name;
    colname[REF] = nmods > 1 ? mods[2].name : "-";
    mods[1].maxobjs = MAX_OBJECTS;
    mods[2].maxobjs = REF_MAX_OBJECTS < MAX_OBJECTS ? REF_MAX_OBJECTS : MAX_OBJECTS;

    struct utsname_s { char s[256]; } un = {{0}};
    FILE *cpu = popen("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2", "r");
    if (cpu) { if (!fgets(un.s, sizeof un.s, cpu)) un.s[0] = 0; pclose(cpu); }
    un.s[strcspn(un.s, "\n")] = 0;
    double load[3] = {0};
    getloadavg(load, 3);
    time_t tt = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&tt));
    printf("p11bench %s: %ld CPUs (%s), %s; load average at start %.2f %.2f %.2f; %s\n", date,
           sysconf(_SC_NPROCESSORS_ONLN), un.s, OpenSSL_version(OPENSSL_VERSION), load[0], load[1], load[2],
           SMOKE ? "SMOKE MODE (tiny counts, figures meaningless)" : "");
    printf("repetitions %d x %.2f s, medians; ± is half the (max-min) spread over the median%s\n", REPS, RUNTIME,
           CPUCLOCK ? "; single-thread rows per second of thread CPU time (BENCH_CPU=1)" : "");
    for (int c = 1; c <= nmods; c++) printf("  %s: %s\n", mods[c].name, mods[c].path);
    /* Which OpenSSL each column ran (issue 13): the raw column is the libcrypto this binary
     * linked, which the Makefile makes keyshare's engine's own (the bundle when OPENSSL_MODE=bundled;
     * the module itself is C and links none: docs/architecture.md, "Images"). */
    const char *modssl = getenv("BENCH_MODULE_OPENSSL");
    printf("OpenSSL: raw column %s (%s, linked %s); %s engine %s; a reference module uses its own "
           "(SoftHSM2: the system libcrypto)\n", OpenSSL_version(OPENSSL_VERSION),
           OpenSSL_version(OPENSSL_DIR), BENCH_RAW_LINK, colname[SUBJ],
           modssl && *modssl ? modssl : "(not told: BENCH_MODULE_OPENSSL unset)");
    fflush(stdout);

    for (int c = 1; c <= nmods; c++) module_up(&mods[c]);
    for (int k = 0; k < NKEYS; k++) {
        rawkey[k] = gen_raw((keyid_t)k);
        for (int c = 1; c <= nmods; c++) import_key(c, &mods[c], (keyid_t)k);
    }
    crypto_rows();
    multiproc_rows();
    hmac_row();
    sym_rows();
    object_rows();
    keygen_rows();
    cli_import_row();
    for (int c = 1; c <= nmods; c++) {
        mods[c].f->C_Logout(mods[c].s);
        mods[c].f->C_Finalize(NULL);
    }
    getloadavg(load, 3);
    printf("load average at end %.2f %.2f %.2f\n", load[0], load[1], load[2]);
    print_table();
    return 0;
}
