/*
 * A misbehaving PKCS #11 module for 40-tokens.sh. C_GetSlotList reads the
 * file named by $FAKEMOD_CONTROL: "crash" segfaults, "hang" never returns,
 * anything else reports no slots. Only the few entries keyshare's driver
 * needs are filled; the rest are NULL (callers must treat that as
 * "not supported").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <p11-kit-1/p11-kit/pkcs11.h>

static void behave(void) {
    const char *path = getenv("FAKEMOD_CONTROL");
    char buf[16] = {0};
    FILE *fp = path ? fopen(path, "r") : NULL;
    if (fp) { fread(buf, 1, sizeof buf - 1, fp); fclose(fp); }
    if (!strncmp(buf, "crash", 5)) raise(SIGSEGV);
    if (!strncmp(buf, "hang", 4)) for (;;) pause();
}

static CK_RV fm_Initialize(CK_VOID_PTR a) { (void)a; return CKR_OK; }
static CK_RV fm_Finalize(CK_VOID_PTR a) { (void)a; return CKR_OK; }
static CK_RV fm_GetSlotList(CK_BBOOL present, CK_SLOT_ID_PTR list, CK_ULONG_PTR count) {
    (void)present; (void)list;
    behave();
    *count = 0;
    return CKR_OK;
}

static CK_FUNCTION_LIST table;

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out) {
    memset(&table, 0, sizeof table);
    table.version.major = 2;
    table.version.minor = 40;
    table.C_Initialize = fm_Initialize;
    table.C_Finalize = fm_Finalize;
    table.C_GetSlotList = fm_GetSlotList;
    *out = &table;
    return CKR_OK;
}
