/*
 * Hot-plug checks for 40-tokens.sh, driving a PKCS #11 module directly.
 *   slotevent MODULE slots                 slot IDs with a token, one per line
 *   slotevent MODULE wait                  blocks in C_WaitForSlotEvent, prints "event SLOT MS"
 *   slotevent MODULE dontblock             prints the CKF_DONT_BLOCK return value (0x8 = CKR_NO_EVENT)
 *   slotevent MODULE finalize              a thread blocks in C_WaitForSlotEvent, main calls
 *                                          C_Finalize after 300 ms: prints "woken MS rv=0x.."
 *   slotevent MODULE uniqueid UID          how many objects, over all slots, have CKA_UNIQUE_ID UID
 *   slotevent MODULE session LABEL GOFILE [KEYLABEL]
 *                                          opens a session on token LABEL (and with KEYLABEL logs
 *                                          in with the PIN in $KEYSHARE_TEST_PIN and starts a
 *                                          CKM_SHA256_RSA_PKCS signature with that key), prints
 *                                          "ready", waits for GOFILE, then prints the return values
 *                                          of C_GetSessionInfo, C_FindObjectsInit and C_Sign.
 * The PIN comes from the environment, never argv: every local user can read
 * every process's command line (`ps`).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <p11-kit-1/p11-kit/pkcs11.h>
#ifndef CKA_UNIQUE_ID
#define CKA_UNIQUE_ID 0x4UL
#endif

static CK_FUNCTION_LIST_PTR f;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
}

static void *waiter(void *arg) {
    double *out = arg;
    CK_SLOT_ID slot;
    CK_RV rv = f->C_WaitForSlotEvent(0, &slot, NULL);
    out[0] = now_ms();
    out[1] = (double)rv;
    return NULL;
}

static CK_SLOT_ID slot_by_label(const char *label) {
    CK_SLOT_ID slots[64];
    CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return (CK_SLOT_ID)-1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t len = strlen(label);
        if (len <= 32 && memcmp(ti.label, label, len) == 0 && (len == 32 || ti.label[len] == ' ')) return slots[i];
    }
    return (CK_SLOT_ID)-1;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: slotevent MODULE MODE ...\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    CK_RV (*get)(CK_FUNCTION_LIST_PTR_PTR) = (CK_RV (*)(CK_FUNCTION_LIST_PTR_PTR))dlsym(h, "C_GetFunctionList");
    if (!get || get(&f) != CKR_OK) { fprintf(stderr, "no function list\n"); return 2; }
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    CK_RV rv = f->C_Initialize(&args);
    if (rv != CKR_OK) { fprintf(stderr, "C_Initialize 0x%lx\n", rv); return 2; }
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argv[2];
    if (!strcmp(mode, "slots")) {
        CK_SLOT_ID slots[64];
        CK_ULONG n = 64;
        rv = f->C_GetSlotList(CK_TRUE, slots, &n);
        for (CK_ULONG i = 0; rv == CKR_OK && i < n; i++) printf("%lu\n", slots[i]);
    } else if (!strcmp(mode, "wait")) {
        double start = now_ms();
        CK_SLOT_ID slot = 0;
        printf("waiting\n");
        rv = f->C_WaitForSlotEvent(0, &slot, NULL);
        printf("event %lu %.0f rv=0x%lx\n", slot, now_ms() - start, rv);
    } else if (!strcmp(mode, "dontblock")) {
        CK_SLOT_ID slot;
        printf("rv=0x%lx\n", f->C_WaitForSlotEvent(CKF_DONT_BLOCK, &slot, NULL));
    } else if (!strcmp(mode, "finalize")) {
        pthread_t t;
        double out[2] = {0, 0};
        pthread_create(&t, NULL, waiter, out);
        usleep(300000);
        double start = now_ms();
        f->C_Finalize(NULL);
        pthread_join(t, NULL);
        printf("woken %.0f rv=0x%lx\n", out[0] - start, (CK_RV)out[1]);
        return 0;
    } else if (!strcmp(mode, "uniqueid") && argc >= 4) {
        CK_SLOT_ID slots[64];
        CK_ULONG n = 64, found = 0;
        f->C_GetSlotList(CK_TRUE, slots, &n);
        for (CK_ULONG i = 0; i < n; i++) {
            CK_SESSION_HANDLE s;
            if (f->C_OpenSession(slots[i], CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) continue;
            CK_ATTRIBUTE t[] = { { CKA_UNIQUE_ID, argv[3], strlen(argv[3]) } };
            CK_OBJECT_HANDLE o[8];
            CK_ULONG k = 0;
            if (f->C_FindObjectsInit(s, t, 1) == CKR_OK) {
                f->C_FindObjects(s, o, 8, &k);
                f->C_FindObjectsFinal(s);
            }
            found += k;
            f->C_CloseSession(s);
        }
        printf("found %lu\n", found);
    } else if (!strcmp(mode, "session") && argc >= 5) {
        CK_SLOT_ID slot = slot_by_label(argv[3]);
        CK_SESSION_HANDLE s;
        if (slot == (CK_SLOT_ID)-1 || f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) {
            printf("no session\n");
            return 1;
        }
        int signing = argc >= 6;
        if (signing) {
            const char *pin = getenv("KEYSHARE_TEST_PIN");
            if (!pin) {
                fprintf(stderr, "slotevent: set KEYSHARE_TEST_PIN to the token's user PIN\n");
                return 2;
            }
            rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
            CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
            CK_ATTRIBUTE tmpl[] = { { CKA_CLASS, &cls, sizeof cls }, { CKA_LABEL, argv[5], strlen(argv[5]) } };
            CK_OBJECT_HANDLE key;
            CK_ULONG n = 0;
            f->C_FindObjectsInit(s, tmpl, 2);
            f->C_FindObjects(s, &key, 1, &n);
            f->C_FindObjectsFinal(s);
            CK_MECHANISM m = { CKM_SHA256_RSA_PKCS, NULL, 0 };
            CK_RV irv = n == 1 ? f->C_SignInit(s, &m, key) : CKR_KEY_HANDLE_INVALID;
            printf("login=0x%lx signinit=0x%lx\n", rv, irv);
        }
        printf("ready\n");
        while (access(argv[4], F_OK) != 0) usleep(20000);
        CK_SESSION_INFO si;
        printf("getsessioninfo=0x%lx\n", f->C_GetSessionInfo(s, &si));
        if (signing) {
            CK_BYTE sig[1024];
            CK_ULONG len = sizeof sig;
            printf("sign=0x%lx\n", f->C_Sign(s, (CK_BYTE_PTR)"data", 4, sig, &len));
        }
        CK_ATTRIBUTE none[1];
        printf("findinit=0x%lx\n", f->C_FindObjectsInit(s, none, 0));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    f->C_Finalize(NULL);
    return 0;
}
