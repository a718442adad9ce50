/*
 * A PKCS #11 host for 66-store-safety.sh that keeps the store open while the
 * test changes things under it (remounts, full disks, deleted WAL files).
 *   storehost MODULE < commands
 * Reads one command per line on stdin and prints "<command> 0x<CK_RV>":
 *   init, slot (first slot with a token), open (read/write session),
 *   login (user PIN from $PIN), badlogin (user PIN from $WRONG),
 *   sign (the first private key, ECDSA-SHA256 or SHA256-RSA-PKCS),
 *   create (a token data object), logout, finalize.
 * PINs come from the environment, never from argv.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST *f;
static CK_SESSION_HANDLE s;
static CK_SLOT_ID slot;

static CK_RV first_slot(void) {
    CK_SLOT_ID slots[16];
    CK_ULONG n = 16;
    CK_RV rv = f->C_GetSlotList(CK_TRUE, slots, &n);
    if (rv == CKR_OK && n == 0) return CKR_TOKEN_NOT_PRESENT;
    if (rv == CKR_OK) slot = slots[0];
    return rv;
}

static CK_RV login(const char *var) {
    const char *pin = getenv(var);
    if (!pin) return CKR_ARGUMENTS_BAD;
    return f->C_Login(s, CKU_USER, (CK_UTF8CHAR *)pin, strlen(pin));
}

static CK_RV sign(void) {
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}};
    CK_OBJECT_HANDLE h = 0;
    CK_ULONG n = 0;
    CK_RV rv = f->C_FindObjectsInit(s, t, 1);
    if (rv != CKR_OK) return rv;
    f->C_FindObjects(s, &h, 1, &n);
    f->C_FindObjectsFinal(s);
    if (n == 0) return CKR_KEY_HANDLE_INVALID;
    CK_KEY_TYPE type = 0;
    CK_ATTRIBUTE a = {CKA_KEY_TYPE, &type, sizeof type};
    if ((rv = f->C_GetAttributeValue(s, h, &a, 1)) != CKR_OK) return rv;
    CK_MECHANISM m = {type == CKK_EC ? CKM_ECDSA_SHA256 : CKM_SHA256_RSA_PKCS, NULL, 0};
    if ((rv = f->C_SignInit(s, &m, h)) != CKR_OK) return rv;
    unsigned char data[] = "message", sig[1024];
    CK_ULONG len = sizeof sig;
    return f->C_Sign(s, data, sizeof data - 1, sig, &len);
}

static CK_RV create(void) {
    CK_OBJECT_CLASS cls = CKO_DATA;
    CK_BBOOL yes = CK_TRUE;
    char label[] = "storehost-object", value[] = "value";
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_TOKEN, &yes, 1},
                        {CKA_LABEL, label, strlen(label)}, {CKA_VALUE, value, strlen(value)}};
    CK_OBJECT_HANDLE h;
    return f->C_CreateObject(s, t, 4, &h);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: storehost MODULE < commands\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(lib, "C_GetFunctionList");
    if (!get || get(&f) != CKR_OK) { fprintf(stderr, "no function list\n"); return 2; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        CK_RV rv = CKR_FUNCTION_NOT_SUPPORTED;
        if (!strcmp(line, "init")) rv = f->C_Initialize(NULL);
        else if (!strcmp(line, "slot")) rv = first_slot();
        else if (!strcmp(line, "open")) rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
        else if (!strcmp(line, "login")) rv = login("PIN");
        else if (!strcmp(line, "badlogin")) rv = login("WRONG");
        else if (!strcmp(line, "sign")) rv = sign();
        else if (!strcmp(line, "create")) rv = create();
        else if (!strcmp(line, "logout")) rv = f->C_Logout(s);
        else if (!strcmp(line, "finalize")) rv = f->C_Finalize(NULL);
        printf("%s 0x%lx\n", line, (unsigned long)rv);
    }
    return 0;
}
