/*
 * A signing host for 13-agent.sh: loads the module, logs in (PIN from
 * $KEYSHARE_TEST_PIN), signs with the first RSA private key, prints "ready"
 * and then, for each line on stdin:
 *   "sign"  signs on the same session and prints the CK_RV in hex
 *   "renew" opens a new session, logs in, signs, prints the CK_RV
 *   "logout" C_Logout, "closeall" C_CloseAllSessions(slot), "close"
 *           C_CloseSession, "finalize" C_Finalize then C_Initialize: each
 *           prints the CK_RV (76-agent-keys: the agent's memory after each)
 *   "shared" opens a new session WITHOUT C_Login and signs (the agent's
 *           `keyshare unlock` logs it in), prints the CK_RV
 *   "ec"     signs with the first EC private key (ECDSA) on the same
 *           session, prints the CK_RV (75-agent-core: RSA and EC in one host)
 *   "waiter" starts a thread blocked in C_WaitForSlotEvent (no flags) and
 *           prints 0x0 (76-agent-keys: the process then dies with it blocked)
 * EOF ends it. Used for the core-dump check (gcore while it holds a logged-in
 * session) and the agent-restart check (kill -9 of the agent in between).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pkcs11_shim.h"
#include "open_module.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;
static CK_SLOT_ID slot;

static CK_RV session_and_sign(int fresh, int login, int ec) {
    CK_RV rv;
    if (fresh) {
        CK_SLOT_ID slots[8];
        CK_ULONG n = 8;
        if ((rv = f->C_GetSlotList(CK_TRUE, slots, &n)) != CKR_OK) return rv;
        if (n == 0) return CKR_TOKEN_NOT_PRESENT;
        slot = slots[0];
        if ((rv = f->C_OpenSession(slots[0], CKF_SERIAL_SESSION, NULL, NULL, &s)) != CKR_OK) return rv;
        if (!login) goto find;
        const char *pin = getenv("KEYSHARE_TEST_PIN");
        rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) return rv;
    }
find:;
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = ec ? CKK_EC : CKK_RSA;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_OBJECT_HANDLE key;
    CK_ULONG found = 0;
    if ((rv = f->C_FindObjectsInit(s, t, 2)) != CKR_OK) return rv;
    rv = f->C_FindObjects(s, &key, 1, &found);
    f->C_FindObjectsFinal(s);
    if (rv != CKR_OK) return rv;
    if (found != 1) return CKR_KEY_HANDLE_INVALID;
    CK_MECHANISM m = {ec ? CKM_ECDSA_SHA256 : CKM_SHA256_RSA_PKCS, NULL, 0};
    if ((rv = f->C_SignInit(s, &m, key)) != CKR_OK) return rv;
    CK_BYTE data[] = "agent host", sig[1024];
    CK_ULONG sl = sizeof sig;
    return f->C_Sign(s, data, sizeof data - 1, sig, &sl);
}

static void *waiter(void *arg) {
    (void)arg;
    CK_SLOT_ID any;
    f->C_WaitForSlotEvent(0, &any, NULL);   /* blocks until an event or C_Finalize */
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (open_module(argv[1], &f)) return 1;
    CK_RV rv;
    rv = session_and_sign(1, 1, 0);
    printf("%s 0x%lx\n", rv == CKR_OK ? "ready" : "error", rv);
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "logout", 6) == 0) rv = f->C_Logout(s);
        else if (strncmp(line, "closeall", 8) == 0) rv = f->C_CloseAllSessions(slot);
        else if (strncmp(line, "close", 5) == 0) rv = f->C_CloseSession(s);
        else if (strncmp(line, "finalize", 8) == 0) {
            rv = f->C_Finalize(NULL);
            if (rv == CKR_OK) rv = f->C_Initialize(NULL);
        } else if (strncmp(line, "shared", 6) == 0) rv = session_and_sign(1, 0, 0);
        else if (strncmp(line, "ec", 2) == 0) rv = session_and_sign(0, 1, 1);
        else if (strncmp(line, "waiter", 6) == 0) {
            pthread_t t;
            rv = pthread_create(&t, NULL, waiter, NULL) == 0 ? CKR_OK : CKR_GENERAL_ERROR;
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);   /* let it reach the agent and block there */
        }
        else rv = session_and_sign(strncmp(line, "renew", 5) == 0, 1, 0);
        printf("0x%lx\n", rv);
        fflush(stdout);
    }
    f->C_Finalize(NULL);
    return 0;
}
