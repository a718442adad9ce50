/*
 * Mixed load that survives the death of the keyshare agent (77-agent-kill.sh,
 * Tests/stress/agent-kill.sh; issue 16).
 *
 * Usage: agentload MODULE LOGDIR SECONDS
 * One process, one session: logs in (PIN from $KEYSHARE_TEST_PIN, never argv),
 * then loops until SECONDS have passed: sign with the first RSA key, create a
 * token data object with a unique label, find it by label, destroy every
 * second one. Writes "C label" to LOGDIR/ops-PID.log only after C_CreateObject
 * returned CKR_OK, "d label" before C_DestroyObject and "D label" after it
 * returned CKR_OK, so the check afterwards knows which objects must exist
 * ("C" with neither "d" nor "D") and which must be gone ("D").
 *
 * When the agent dies the calls answer CKR_DEVICE_REMOVED (the call in flight)
 * and then CKR_SESSION_HANDLE_INVALID (the old session at the new agent);
 * the stale key and object handles are CKR_*_HANDLE_INVALID. On those the
 * process opens a new session, logs in, finds its key again and goes on: a
 * "recoveries" count. Any other CK_RV is an error. It must also make progress
 * after its last recovery (ops_after > 0), which means the module restarted
 * the agent.
 * Prints "pid P ops O recoveries R ops_after A errors E (...)" and exits with
 * min(E, 100), or 101 when nothing succeeded after the last recovery.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SLOT_ID slot;
static CK_SESSION_HANDLE s = CK_INVALID_HANDLE;
static CK_OBJECT_HANDLE key;
static int errors, recoveries, removed, invalid;

static int recoverable(CK_RV rv) {
    return rv == CKR_DEVICE_REMOVED || rv == CKR_SESSION_HANDLE_INVALID || rv == CKR_SESSION_CLOSED ||
           rv == CKR_KEY_HANDLE_INVALID || rv == CKR_OBJECT_HANDLE_INVALID || rv == CKR_USER_NOT_LOGGED_IN;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A new session, logged in, with the RSA key found. */
static CK_RV fresh(void) {
    CK_RV rv;
    if (s != CK_INVALID_HANDLE) f->C_CloseSession(s);
    s = CK_INVALID_HANDLE;
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    if ((rv = f->C_GetSlotList(CK_TRUE, slots, &n)) != CKR_OK) return rv;
    if (n == 0) return CKR_TOKEN_NOT_PRESENT;
    slot = slots[0];
    if ((rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) != CKR_OK) return rv;
    const char *pin = getenv("KEYSHARE_TEST_PIN");
    rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) return rv;
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = CKK_RSA;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_ULONG found = 0;
    if ((rv = f->C_FindObjectsInit(s, t, 2)) != CKR_OK) return rv;
    rv = f->C_FindObjects(s, &key, 1, &found);
    f->C_FindObjectsFinal(s);
    if (rv != CKR_OK) return rv;
    return found == 1 ? CKR_OK : CKR_KEY_HANDLE_INVALID;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    if (!gfl || gfl(&f) != CKR_OK) return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/ops-%d.log", argv[2], (int)getpid());
    FILE *log = fopen(path, "w");
    if (!log) return 1;
    double end = now() + atof(argv[3]);
    CK_RV rv = f->C_Initialize(NULL);
    if (rv != CKR_OK) { fprintf(stderr, "C_Initialize 0x%lx\n", rv); return 1; }
    long ops = 0, after = 0;
    int needs_fresh = 1;
    for (long i = 0; now() < end; i++) {
        if (needs_fresh) {
            rv = fresh();
            if (rv != CKR_OK) {
                if (!recoverable(rv)) { errors++; fprintf(stderr, "pid %d: fresh session -> 0x%lx\n", (int)getpid(), rv); }
                usleep(20000);
                continue;
            }
            needs_fresh = 0;
        }
        const char *what = "";
        char label[64];
        snprintf(label, sizeof label, "kill-%d-%ld", (int)getpid(), i);
        CK_MECHANISM m = {CKM_SHA256_RSA_PKCS, NULL, 0};
        CK_BYTE sig[512];
        CK_ULONG sl = sizeof sig;
        CK_OBJECT_CLASS dc = CKO_DATA;
        CK_BBOOL yes = CK_TRUE;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}, {CKA_TOKEN, &yes, 1}, {CKA_LABEL, label, strlen(label)},
                            {CKA_VALUE, "value", 5}};
        CK_OBJECT_HANDLE obj, hit[2];
        CK_ULONG found = 0;
        if ((rv = f->C_SignInit(s, &m, key)) != CKR_OK) { what = "C_SignInit"; goto failed; }
        if ((rv = f->C_Sign(s, (CK_BYTE_PTR)"load", 4, sig, &sl)) != CKR_OK) { what = "C_Sign"; goto failed; }
        if ((rv = f->C_CreateObject(s, t, 4, &obj)) != CKR_OK) { what = "C_CreateObject"; goto failed; }
        fprintf(log, "C %s\n", label);
        fflush(log);
        if ((rv = f->C_FindObjectsInit(s, &t[2], 1)) != CKR_OK) { what = "C_FindObjectsInit"; goto failed; }
        rv = f->C_FindObjects(s, hit, 2, &found);
        CK_RV rv2 = f->C_FindObjectsFinal(s);
        if (rv == CKR_OK) rv = rv2;
        if (rv != CKR_OK) { what = "C_FindObjects"; goto failed; }
        if (found != 1 || hit[0] != obj) { errors++; fprintf(stderr, "pid %d: %s found %lu times\n", (int)getpid(), label, found); }
        if (i % 2) {
            fprintf(log, "d %s\n", label); /* attempted: its outcome is unknown if the agent dies now */
            fflush(log);
            if ((rv = f->C_DestroyObject(s, obj)) != CKR_OK) { what = "C_DestroyObject"; goto failed; }
            fprintf(log, "D %s\n", label);
            fflush(log);
        }
        ops++;
        after++;
        continue;
    failed:
        if (recoverable(rv)) {
            recoveries++;
            if (rv == CKR_DEVICE_REMOVED) removed++;
            if (rv == CKR_SESSION_HANDLE_INVALID) invalid++;
            after = 0;
            needs_fresh = 1;
        } else {
            errors++;
            fprintf(stderr, "pid %d: %s -> 0x%lx\n", (int)getpid(), what, rv);
            if (errors > 100) break;
        }
    }
    f->C_Finalize(NULL);
    fclose(log);
    printf("pid %d ops %ld recoveries %d ops_after %ld errors %d (device_removed %d session_handle_invalid %d)\n",
           (int)getpid(), ops, recoveries, after, errors, removed, invalid);
    if (errors) return errors > 100 ? 100 : errors;
    return after > 0 ? 0 : 101;
}
