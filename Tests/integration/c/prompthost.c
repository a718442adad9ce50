/*
 * The protected authentication path and the consent question (86-agent-prompt.sh,
 * docs/agent.md "The agent's prompt"): loads the module, opens a session on
 * the token labelled $KEYSHARE_TEST_TOKEN (default "work") and runs its
 * commands in order, in one process, one line each:
 *   "flags"     "flags protected=0|1 login=0|1" from C_GetTokenInfo
 *   "login"     C_Login(CKU_USER, NULL_PTR, 0): "login 0xRV"
 *   "loginpin"  C_Login(CKU_USER, $KEYSHARE_TEST_PIN): "loginpin 0xRV"
 *   "loginlen"  C_Login(CKU_USER, NULL_PTR, 4): "loginlen 0xRV"
 *   "logout"    C_Logout: "logout 0xRV"
 *   "sign"      C_SignInit + C_Sign with the first EC private key: "sign 0xRV"
 *   "derive"    C_DeriveKey (ECDH1, the key's own public point): "derive 0xRV"
 *   "sleepN"    sleeps N seconds (the process stays: "Allow once" lasts its life)
 * The PIN comes from the environment, never a command line.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pkcs11_shim.h"
#include "open_module.h"

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;

static CK_RV find_key(CK_OBJECT_HANDLE *key) {
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = CKK_EC;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_ULONG found = 0;
    CK_RV rv;
    if ((rv = f->C_FindObjectsInit(s, t, 2)) != CKR_OK) return rv;
    rv = f->C_FindObjects(s, key, 1, &found);
    f->C_FindObjectsFinal(s);
    if (rv != CKR_OK) return rv;
    return found == 1 ? CKR_OK : CKR_KEY_HANDLE_INVALID;
}

static CK_RV sign(void) {
    CK_OBJECT_HANDLE key;
    CK_RV rv = find_key(&key);
    if (rv != CKR_OK) return rv;
    CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
    if ((rv = f->C_SignInit(s, &m, key)) != CKR_OK) return rv;
    CK_BYTE data[] = "prompt host", sig[256];
    CK_ULONG sl = sizeof sig;
    return f->C_Sign(s, data, sizeof data - 1, sig, &sl);
}

/* ECDH with the key's own public point (any valid point will do). */
static CK_RV derive(void) {
    CK_OBJECT_HANDLE key, pub;
    CK_RV rv = find_key(&key);
    if (rv != CKR_OK) return rv;
    CK_OBJECT_CLASS pc = CKO_PUBLIC_KEY;
    CK_KEY_TYPE kt = CKK_EC;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &pc, sizeof pc}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_ULONG found = 0;
    if ((rv = f->C_FindObjectsInit(s, t, 2)) != CKR_OK) return rv;
    rv = f->C_FindObjects(s, &pub, 1, &found);
    f->C_FindObjectsFinal(s);
    if (rv != CKR_OK || found != 1) return rv != CKR_OK ? rv : CKR_KEY_HANDLE_INVALID;
    CK_BYTE point[200];
    CK_ATTRIBUTE a = {CKA_EC_POINT, point, sizeof point};
    if ((rv = f->C_GetAttributeValue(s, pub, &a, 1)) != CKR_OK) return rv;
    /* CKA_EC_POINT is a DER OCTET STRING: the raw point follows its 2-byte header (P-256: 65 bytes). */
    CK_ECDH1_DERIVE_PARAMS p = {CKD_NULL, 0, NULL, a.ulValueLen - 2, point + 2};
    CK_MECHANISM m = {CKM_ECDH1_DERIVE, &p, sizeof p};
    CK_OBJECT_CLASS sc = CKO_SECRET_KEY;
    CK_KEY_TYPE gk = CKK_GENERIC_SECRET;
    CK_ULONG len = 32;
    CK_BBOOL no = CK_FALSE;
    CK_ATTRIBUTE tt[] = {{CKA_CLASS, &sc, sizeof sc}, {CKA_KEY_TYPE, &gk, sizeof gk}, {CKA_VALUE_LEN, &len, sizeof len},
                         {CKA_TOKEN, &no, sizeof no}};
    CK_OBJECT_HANDLE out;
    return f->C_DeriveKey(s, &m, key, tt, 4, &out);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (open_module(argv[1], &f)) return 1;
    CK_RV rv;
    const char *want = getenv("KEYSHARE_TEST_TOKEN") ? getenv("KEYSHARE_TEST_TOKEN") : "work";
    CK_SLOT_ID slots[16], slot = 0;
    CK_ULONG n = 16;
    CK_TOKEN_INFO ti;
    int have = 0;
    if ((rv = f->C_GetSlotList(CK_TRUE, slots, &n)) != CKR_OK) { printf("slots 0x%lx\n", rv); return 1; }
    for (CK_ULONG i = 0; i < n && !have; i++) {
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t l = strlen(want);
        if (l <= 32 && !memcmp(ti.label, want, l) && (l == 32 || ti.label[l] == ' ')) { slot = slots[i]; have = 1; }
    }
    if (!have) { printf("no token %s\n", want); return 1; }
    if ((rv = f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s)) != CKR_OK) {
        printf("open 0x%lx\n", rv);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        const char *c = argv[i];
        if (!strcmp(c, "flags")) {
            rv = f->C_GetTokenInfo(slot, &ti);
            printf("flags protected=%d login=%d rv 0x%lx\n", !!(ti.flags & CKF_PROTECTED_AUTHENTICATION_PATH),
                   !!(ti.flags & CKF_LOGIN_REQUIRED), rv);
        } else if (!strcmp(c, "login")) {
            printf("login 0x%lx\n", f->C_Login(s, CKU_USER, NULL, 0));
        } else if (!strcmp(c, "loginlen")) {
            printf("loginlen 0x%lx\n", f->C_Login(s, CKU_USER, NULL, 4));
        } else if (!strcmp(c, "loginpin")) {
            const char *pin = getenv("KEYSHARE_TEST_PIN");
            printf("loginpin 0x%lx\n", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, pin ? strlen(pin) : 0));
        } else if (!strcmp(c, "logout")) {
            printf("logout 0x%lx\n", f->C_Logout(s));
        } else if (!strcmp(c, "sign")) {
            printf("sign 0x%lx\n", sign());
        } else if (!strcmp(c, "derive")) {
            printf("derive 0x%lx\n", derive());
        } else if (!strncmp(c, "sleep", 5)) {
            sleep((unsigned)atoi(c + 5));
        } else {
            printf("unknown %s\n", c);
        }
        fflush(stdout);
    }
    f->C_Finalize(NULL);
    return 0;
}
