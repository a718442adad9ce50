/* Post-quantum rows of `make bench` (issue 18, docs/benchmarks.md): ML-DSA-65 sign and verify,
 * ML-KEM-768 encapsulate and decapsulate through the module (PKCS #11 3.2: CKM_ML_DSA,
 * C_EncapsulateKey / C_DecapsulateKey) against raw OpenSSL 3.5 EVP in the same process. Linked
 * with the same OpenSSL the module carries (the bundled static 3.5, or a system ≥ 3.5), so the raw
 * column is the engine the module runs on. The module's mode is the environment's (through the
 * agent by default; KEYSHARE_IN_PROCESS=1 in-process): run.sh runs it once in each.
 *
 * Each row: BENCH_REPS (5) timed windows of BENCH_WINDOW_MS (300) per column, alternating raw and
 * module, median ops/s; the ratio is module ÷ raw. Per operation both columns do the same work: a
 * fresh signing context per signature (EVP_DigestSignInit_ex / C_SignInit), and for the KEM the
 * module also stores the shared secret as a session key object (C_EncapsulateKey's output), which
 * raw EVP does not; the objects are destroyed after each window, untimed.
 *
 * BENCH_LATENCY=N (N calls) adds, per KEM row, the distribution of single calls through the
 * module (mean, min, median, p90, p99, p99.9, in us; objects destroyed every 1,000 calls,
 * untimed): the mean is what ops/s sees, the median what a call usually costs, and the gap
 * between them the tail (docs/agent-transport.md, "Round trips").
 *
 * Usage: pqbench MODULE TOKEN_LABEL, PIN in BENCH_PIN. Prints a markdown table. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <features.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include "../pkcs11/abi/include/pkcs11_3_2.h"

#if !__GLIBC_PREREQ(2, 38)
/* The bundled libcrypto.a was built against glibc 2.41 (Sources/COpenSSLSupport/support.c). */
long __isoc23_strtol(const char *nptr, char **endptr, int base);
long __isoc23_strtol(const char *nptr, char **endptr, int base) { return strtol(nptr, endptr, base); }
#endif

static CK_FUNCTION_LIST_3_2 *f;
static CK_SESSION_HANDLE sess;
static CK_OBJECT_HANDLE dsa_pub, dsa_priv, kem_pub, kem_priv;
static EVP_PKEY *raw_dsa, *raw_kem;
static unsigned char msg[32], sig[4096], psig[4096], ct[1088], pct[1088], ss[32];
static size_t sig_len, ct_len;
static CK_ULONG p11_sig_len, p11_ct_len;
static CK_OBJECT_HANDLE made[200000];
static size_t nmade;
static int failed;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int raw_sign(void) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    size_t n = sizeof sig;
    int ok = EVP_DigestSignInit_ex(c, NULL, NULL, NULL, NULL, raw_dsa, NULL) == 1 && EVP_DigestSign(c, sig, &n, msg, sizeof msg) == 1;
    EVP_MD_CTX_free(c);
    sig_len = n;
    return ok;
}
static int raw_verify(void) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = EVP_DigestVerifyInit_ex(c, NULL, NULL, NULL, NULL, raw_dsa, NULL) == 1 && EVP_DigestVerify(c, sig, sig_len, msg, sizeof msg) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}
static int raw_encap(void) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, raw_kem, NULL);
    size_t cn = sizeof ct, sn = sizeof ss;
    int ok = EVP_PKEY_encapsulate_init(c, NULL) == 1 && EVP_PKEY_encapsulate(c, ct, &cn, ss, &sn) == 1;
    EVP_PKEY_CTX_free(c);
    ct_len = cn;
    return ok;
}
static int raw_decap(void) {
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, raw_kem, NULL);
    size_t sn = sizeof ss;
    int ok = EVP_PKEY_decapsulate_init(c, NULL) == 1 && EVP_PKEY_decapsulate(c, ss, &sn, ct, ct_len) == 1;
    EVP_PKEY_CTX_free(c);
    return ok;
}

static CK_MECHANISM mldsa = {CKM_ML_DSA, NULL, 0}, mlkem = {CKM_ML_KEM, NULL, 0};
static CK_BBOOL no = CK_FALSE;
static CK_ATTRIBUTE secret_t[] = {{CKA_TOKEN, &no, 1}};

static int p11_sign(void) {
    CK_ULONG n = sizeof psig;
    int ok = f->C_SignInit(sess, &mldsa, dsa_priv) == CKR_OK && f->C_Sign(sess, msg, sizeof msg, psig, &n) == CKR_OK;
    p11_sig_len = n;
    return ok;
}
static int p11_verify(void) {
    return f->C_VerifyInit(sess, &mldsa, dsa_pub) == CKR_OK && f->C_Verify(sess, msg, sizeof msg, psig, p11_sig_len) == CKR_OK;
}
static int p11_encap(void) {
    CK_ULONG n = sizeof pct;
    CK_OBJECT_HANDLE h = 0;
    int ok = f->C_EncapsulateKey(sess, &mlkem, kem_pub, secret_t, 1, pct, &n, &h) == CKR_OK;
    if (ok && nmade < sizeof made / sizeof made[0]) made[nmade++] = h;
    p11_ct_len = n;
    return ok;
}
static int p11_decap(void) {
    CK_OBJECT_HANDLE h = 0;
    int ok = f->C_DecapsulateKey(sess, &mlkem, kem_priv, secret_t, 1, pct, p11_ct_len, &h) == CKR_OK;
    if (ok && nmade < sizeof made / sizeof made[0]) made[nmade++] = h;
    return ok;
}

static void cleanup(void) {
    for (size_t i = 0; i < nmade; i++) f->C_DestroyObject(sess, made[i]);
    nmade = 0;
}

static double window(int (*op)(void), double ms) {
    long n = 0;
    double t0 = now(), t;
    do {
        if (!op()) { failed = 1; return 0; }
        n++;
        t = now();
    } while ((t - t0) * 1000 < ms);
    cleanup();
    return n / (t - t0);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* BENCH_LATENCY: n single calls of op, each timed. */
static void latency(const char *name, int (*op)(void)) {
    const char *v = getenv("BENCH_LATENCY");
    long n = v ? atol(v) : 0;
    if (n < 100) return;
    if (n > 1000000) n = 1000000;
    double *t = malloc((size_t)n * sizeof *t), sum = 0;
    if (!t) return;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        if (!op()) { failed = 1; free(t); return; }
        t[i] = (now() - t0) * 1e6;
        sum += t[i];
        if (nmade >= 1000) cleanup();
    }
    cleanup();
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("| %s, %ld single calls (us) | mean %.1f | min %.1f, median %.1f, p90 %.1f | p99 %.1f, p99.9 %.1f |\n", name, n,
           sum / n, t[0], t[n / 2], t[n * 9 / 10], t[n * 99 / 100], t[n * 999 / 1000]);
    free(t);
}

static void bench(const char *name, int (*raw)(void), int (*p11)(void), int reps, double ms) {
    /* BENCH_ONLY=WORD runs only the rows whose name holds WORD (profiling one operation). */
    const char *only = getenv("BENCH_ONLY");
    if (only && *only && !strstr(name, only)) return;
    double r[32], m[32];
    for (int i = 0; i < reps; i++) {
        r[i] = window(raw, ms);
        m[i] = window(p11, ms);
    }
    qsort(r, reps, sizeof *r, cmp);
    qsort(m, reps, sizeof *m, cmp);
    double rm = r[reps / 2], mm = m[reps / 2];
    printf("| %s | %.0f | %.0f | %.2f× |\n", name, rm, mm, rm > 0 ? mm / rm : 0);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: pqbench MODULE TOKEN_LABEL (PIN in BENCH_PIN)\n"); return 2; }
    const char *pin = getenv("BENCH_PIN");
    if (!pin) { fprintf(stderr, "pqbench: BENCH_PIN must be set\n"); return 2; }
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 5;
    double ms = getenv("BENCH_WINDOW_MS") ? atof(getenv("BENCH_WINDOW_MS")) : 300;
    if (getenv("BENCH_SMOKE") && strcmp(getenv("BENCH_SMOKE"), "0")) { reps = 1; ms = 50; }
    if (reps < 1 || reps > 31) reps = 5;
    void *h = dlopen(argv[1], RTLD_NOW);
    CK_C_GetInterface gi = h ? (CK_C_GetInterface)dlsym(h, "C_GetInterface") : NULL;
    CK_INTERFACE_PTR ip = NULL;
    CK_VERSION v32 = {3, 2};
    if (!gi || gi((CK_UTF8CHAR_PTR) "PKCS 11", &v32, &ip, 0) != CKR_OK) { fprintf(stderr, "pqbench: no 3.2 interface\n"); return 1; }
    f = ip->pFunctionList;
    if (f->C_Initialize(NULL) != CKR_OK) { fprintf(stderr, "pqbench: C_Initialize failed\n"); return 1; }
    CK_SLOT_ID slots[16];
    CK_ULONG ns = 16;
    f->C_GetSlotList(CK_TRUE, slots, &ns);
    CK_SLOT_ID slot = (CK_SLOT_ID)-1;
    for (CK_ULONG i = 0; i < ns; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && !strncmp((char *)ti.label, argv[2], strlen(argv[2]))) slot = slots[i];
    }
    if (slot == (CK_SLOT_ID)-1 || f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess) != CKR_OK
        || f->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) {
        fprintf(stderr, "pqbench: no token %s, or the login failed\n", argv[2]);
        return 1;
    }
    CK_MECHANISM_INFO mi;
    if (f->C_GetMechanismInfo(slot, CKM_ML_DSA, &mi) != CKR_OK) {
        printf("pqbench: the module offers no post-quantum mechanism (its OpenSSL is older than 3.5): rows skipped\n");
        return 0;
    }
    CK_ULONG d65 = CKP_ML_DSA_65, k768 = CKP_ML_KEM_768;
    CK_ATTRIBUTE dt[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &d65, sizeof d65}};
    CK_ATTRIBUTE kt[] = {{CKA_TOKEN, &no, 1}, {CKA_PARAMETER_SET, &k768, sizeof k768}};
    CK_MECHANISM dg = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0}, kg = {CKM_ML_KEM_KEY_PAIR_GEN, NULL, 0};
    if (f->C_GenerateKeyPair(sess, &dg, dt, 2, dt, 1, &dsa_pub, &dsa_priv) != CKR_OK
        || f->C_GenerateKeyPair(sess, &kg, kt, 2, kt, 1, &kem_pub, &kem_priv) != CKR_OK) {
        fprintf(stderr, "pqbench: key pair generation failed\n");
        return 1;
    }
    raw_dsa = EVP_PKEY_Q_keygen(NULL, NULL, "ML-DSA-65");
    raw_kem = EVP_PKEY_Q_keygen(NULL, NULL, "ML-KEM-768");
    if (!raw_dsa || !raw_kem) { fprintf(stderr, "pqbench: this OpenSSL cannot make ML-DSA/ML-KEM keys\n"); return 1; }
    memset(msg, 0x5a, sizeof msg);
    const char *mode = getenv("KEYSHARE_IN_PROCESS") && !strcmp(getenv("KEYSHARE_IN_PROCESS"), "1") ? "in-process" : "agent";
    printf("| post-quantum, %s (%s, median of %d × %.0f ms) | raw OpenSSL ops/s | keyshare ops/s | keyshare ÷ raw |\n",
           mode, OpenSSL_version(OPENSSL_VERSION), reps, ms);
    printf("|---|---|---|---|\n");
    /* sig / ct feed verify / decapsulate: the sign and encapsulate rows run first. */
    bench("sign ML-DSA-65 (CKM_ML_DSA, 32-byte message)", raw_sign, p11_sign, reps, ms);
    p11_sign();
    raw_sign();
    bench("verify ML-DSA-65", raw_verify, p11_verify, reps, ms);
    bench("encapsulate ML-KEM-768 (C_EncapsulateKey)", raw_encap, p11_encap, reps, ms);
    raw_encap();
    p11_encap();
    cleanup();
    bench("decapsulate ML-KEM-768 (C_DecapsulateKey)", raw_decap, p11_decap, reps, ms);
    latency("encapsulate ML-KEM-768", p11_encap);
    latency("decapsulate ML-KEM-768", p11_decap);
    f->C_Logout(sess);
    f->C_Finalize(NULL);
    if (failed) { fprintf(stderr, "pqbench: an operation failed\n"); return 1; }
    return 0;
}
