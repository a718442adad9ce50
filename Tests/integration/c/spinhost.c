/*
 * A host for 79-agent-spin.sh (docs/agent-transport.md, "Round trips: bounded
 * polling"): loads the module, opens a session, makes N empty calls
 * (C_GetSessionInfo) and prints "ready US" (mean microseconds per call),
 * then for each line on stdin:
 *   "run"    N more empty calls, prints "US" per call
 *   "keygen" one RSA-3072 C_GenerateKeyPair (session objects, a long call in
 *            the agent), prints the CK_RV in hex and this process's CPU
 *            microseconds spent during the call (polling must not burn them)
 * EOF ends it (C_Finalize). N is argv[2] (default 2000).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "pkcs11_shim.h"
#include "open_module.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

static double empty_calls(int n) {
    CK_SESSION_INFO info;
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        if (f->C_GetSessionInfo(s, &info) != CKR_OK) return -1;
    return (now_us() - t0) / n;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int n = argc > 2 ? atoi(argv[2]) : 2000;
    if (open_module(argv[1], &f)) return 1;
    CK_RV rv;
    CK_SLOT_ID slots[8];
    CK_ULONG ns = 8;
    if ((rv = f->C_GetSlotList(CK_TRUE, slots, &ns)) != CKR_OK || ns == 0
        || (rv = f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) != CKR_OK) {
        printf("error 0x%lx\n", rv);
        return 1;
    }
    const char *pin = getenv("KEYSHARE_TEST_PIN");
    if (pin && (rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin))) != CKR_OK) {
        printf("login 0x%lx\n", rv);
        return 1;
    }
    printf("ready %.1f\n", empty_calls(n));
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "keygen", 6) == 0) {
            CK_MECHANISM m = {CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
            CK_ULONG bits = 3072;
            CK_BBOOL no = CK_FALSE;
            CK_ATTRIBUTE pub[] = {{CKA_MODULUS_BITS, &bits, sizeof bits}, {CKA_TOKEN, &no, 1}};
            CK_ATTRIBUTE priv[] = {{CKA_TOKEN, &no, 1}};
            CK_OBJECT_HANDLE pk, sk;
            double c0 = cpu_us();
            rv = f->C_GenerateKeyPair(s, &m, pub, 2, priv, 1, &pk, &sk);
            printf("0x%lx %.0f\n", rv, cpu_us() - c0);
        } else {
            printf("%.1f\n", empty_calls(n));
        }
        fflush(stdout);
    }
    f->C_Finalize(NULL);
    return 0;
}
