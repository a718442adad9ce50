/*
 * cpuop: the CPU a signature costs through the agent, client and agent
 * together (issue 30, docs/benchmarks.md "Limits"). On a shared 2-CPU
 * machine the wall-clock rows swing with other processes' load; the CPU time
 * of both processes per operation swings much less. Generates a session key
 * pair (EC P-256 or RSA-2048) in the token labelled "t", then NTHREADS
 * threads (one session each) make NOPS C_SignInit+C_Sign each (KIND ecv:
 * C_VerifyInit+C_Verify); prints ops/s (wall), the client's and the agent's
 * CPU microseconds per operation and the client's context switches.
 *   PIN=... AGENTPID_FILE=$(keyshare agent socket --dir)/agent.pid cpuop MODULE NTHREADS NOPS ec|rsa|ecv
 *   cc -O2 -I/usr/include/p11-kit-1 -o cpuop Benchmarks/cpuop.c -ldl -lpthread
 * The PIN comes from the environment, never argv.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <p11-kit/pkcs11.h>

static CK_FUNCTION_LIST *f;
static CK_SLOT_ID slot;
static CK_OBJECT_HANDLE priv, pub;
static int nops;
static const char *kind;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat). */
static long ticks_of(int pid) {
    char path[64], b[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *x = fopen(path, "r");
    if (!x) return 0;
    size_t n = fread(b, 1, sizeof b - 1, x);
    fclose(x);
    b[n] = 0;
    char *q = strrchr(b, ')');
    long ut = 0, st = 0;
    int field = 2;
    for (char *t = q ? strtok(q + 2, " ") : NULL; t; t = strtok(NULL, " ")) {
        field++;
        if (field == 14) ut = atol(t);
        if (field == 15) { st = atol(t); break; }
    }
    return ut + st;
}

static void *run(void *arg) {
    (void)arg;
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) abort();
    CK_BYTE d[32] = {1}, sig[512];
    CK_ULONG sl = sizeof sig;
    CK_MECHANISM m = {strcmp(kind, "rsa") ? CKM_ECDSA : CKM_SHA256_RSA_PKCS, NULL, 0};
    int verify = !strcmp(kind, "ecv");
    if (verify && (f->C_SignInit(s, &m, priv) != CKR_OK || f->C_Sign(s, d, 32, sig, &sl) != CKR_OK)) abort();
    for (int i = 0; i < nops; i++) {
        if (verify) {
            if (f->C_VerifyInit(s, &m, pub) != CKR_OK || f->C_Verify(s, d, 32, sig, sl) != CKR_OK) abort();
        } else {
            CK_ULONG n = sizeof sig;
            if (f->C_SignInit(s, &m, priv) != CKR_OK || f->C_Sign(s, d, 32, sig, &n) != CKR_OK) abort();
        }
    }
    f->C_CloseSession(s);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: cpuop MODULE NTHREADS NOPS ec|rsa|ecv\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    CK_C_GetFunctionList gfl = h ? (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList") : NULL;
    int nt = atoi(argv[2]);
    nops = atoi(argv[3]);
    kind = argv[4];
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK || nt < 1 || nt > 16) return 1;
    CK_SLOT_ID slots[16];
    CK_ULONG n = 16;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return 1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) == CKR_OK && ti.label[0] == 't' && ti.label[1] == ' ') { slot = slots[i]; break; }
    }
    CK_SESSION_HANDLE s;
    const char *pin = getenv("PIN");
    if (!pin || f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK ||
        f->C_Login(s, CKU_USER, (CK_BYTE *)pin, strlen(pin)) != CKR_OK)
        return 2;
    CK_BBOOL yes = CK_TRUE;
    CK_RV rv;
    if (!strcmp(kind, "rsa")) {
        CK_ULONG bits = 2048;
        CK_BYTE e[] = {1, 0, 1};
        CK_ATTRIBUTE pt[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_PUBLIC_EXPONENT, e, 3}, {CKA_VERIFY, &yes, 1}};
        CK_ATTRIBUTE st[] = {{CKA_SIGN, &yes, 1}};
        CK_MECHANISM gm = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
        rv = f->C_GenerateKeyPair(s, &gm, pt, 3, st, 1, &pub, &priv);
    } else {
        CK_BYTE oid[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
        CK_ATTRIBUTE pt[] = {{CKA_EC_PARAMS, oid, sizeof oid}, {CKA_VERIFY, &yes, 1}};
        CK_ATTRIBUTE st[] = {{CKA_SIGN, &yes, 1}};
        CK_MECHANISM gm = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
        rv = f->C_GenerateKeyPair(s, &gm, pt, 2, st, 1, &pub, &priv);
    }
    if (rv != CKR_OK) return 3;
    int agent = 0;
    const char *pf = getenv("AGENTPID_FILE");
    FILE *x = pf ? fopen(pf, "r") : NULL;
    if (x) {
        if (fscanf(x, "%d", &agent) != 1) agent = 0;
        fclose(x);
    }
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    long a0 = ticks_of(agent);
    double t0 = now();
    pthread_t th[16];
    for (int i = 0; i < nt; i++) pthread_create(&th[i], NULL, run, NULL);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    double dt = now() - t0;
    getrusage(RUSAGE_SELF, &r1);
    long a1 = ticks_of(agent);
    double cc = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
    double ac = (a1 - a0) / (double)sysconf(_SC_CLK_TCK);
    long total = (long)nt * nops;
    printf("%s %d threads: %.0f ops/s wall; CPU/op client %.1f us agent %.1f us total %.1f us; "
           "voluntary switches %ld involuntary %ld\n",
           kind, nt, total / dt, cc / total * 1e6, ac / total * 1e6, (cc + ac) / total * 1e6,
           r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw);
    f->C_Logout(s);
    f->C_Finalize(NULL);
    return 0;
}
