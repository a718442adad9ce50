/*
 * A long-running host for 15-agent-unlock.sh: loads the module, opens a
 * session on the first token slot, never calls C_Login unless told, and for
 * each line on stdin prints one line:
 *   "state"   C_GetSessionInfo's state (0 RO public .. 3 RW user)
 *   "sign"    finds the first EC private key and signs: the CK_RV in hex
 *   "login"   C_Login(CKU_USER, $KEYSHARE_TEST_PIN): the CK_RV in hex
 *   "logout"  C_Logout: the CK_RV in hex
 * EOF ends it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"
#include "open_module.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;

static CK_RV sign(void) {
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = CKK_EC;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_OBJECT_HANDLE key;
    CK_ULONG found = 0;
    CK_RV rv;
    if ((rv = f->C_FindObjectsInit(s, t, 2)) != CKR_OK) return rv;
    rv = f->C_FindObjects(s, &key, 1, &found);
    f->C_FindObjectsFinal(s);
    if (rv != CKR_OK) return rv;
    if (found != 1) return CKR_KEY_HANDLE_INVALID;
    CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
    if ((rv = f->C_SignInit(s, &m, key)) != CKR_OK) return rv;
    CK_BYTE data[] = "unlock host", sig[256];
    CK_ULONG sl = sizeof sig;
    return f->C_Sign(s, data, sizeof data - 1, sig, &sl);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (open_module(argv[1], &f)) return 1;
    CK_RV rv;
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    if ((rv = f->C_GetSlotList(CK_TRUE, slots, &n)) != CKR_OK || n == 0) { printf("slots 0x%lx\n", rv); return 1; }
    if ((rv = f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) != CKR_OK) {
        printf("open 0x%lx\n", rv);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "state", 5)) {
            CK_SESSION_INFO info;
            rv = f->C_GetSessionInfo(s, &info);
            printf("state %lu rv 0x%lx\n", rv == CKR_OK ? info.state : 99, rv);
        } else if (!strncmp(line, "sign", 4)) {
            printf("sign 0x%lx\n", sign());
        } else if (!strncmp(line, "login", 5)) {
            const char *pin = getenv("KEYSHARE_TEST_PIN");
            printf("login 0x%lx\n", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, pin ? strlen(pin) : 0));
        } else if (!strncmp(line, "logout", 6)) {
            printf("logout 0x%lx\n", f->C_Logout(s));
        }
        fflush(stdout);
    }
    f->C_Finalize(NULL);
    return 0;
}
