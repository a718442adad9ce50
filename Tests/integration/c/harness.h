/* What the C hosts of the integration scripts (conformance.c, symmetric.c,
 * digestkdf.c, asymmetric.c, mechbreadth.c) share: loading the module under
 * test through C_GetInterface, and making a token on its free slot. Each host
 * keeps its own checks and its own output; a failure here prints the line
 * the scripts read as one failed check. */
#ifndef KS_IT_HARNESS_H
#define KS_IT_HARNESS_H
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "pkcs11_shim.h"

/* dlopen MODULE and take its default interface's function list; NULL (and
 * the "0 passed, 1 failed" line) when it cannot. */
static inline CK_FUNCTION_LIST_3_0 *harness_load(const char *module) {
    void *h = dlopen(module, RTLD_NOW);
    if (!h) { printf("dlopen: %s\n0 passed, 1 failed\n", dlerror()); return NULL; }
    CK_C_GetInterface gi = (CK_C_GetInterface)dlsym(h, "C_GetInterface");
    CK_INTERFACE_PTR ip = NULL;
    if (!gi || gi(NULL, NULL, &ip, 0) != CKR_OK) { printf("0 passed, 1 failed\n"); return NULL; }
    return (CK_FUNCTION_LIST_3_0 *)ip->pFunctionList;
}

/* C_InitToken on the free slot (1) with LABEL, the SO sets the user PIN;
 * the new token's slot (the one not in the list before), 0 on failure. */
static inline CK_SLOT_ID harness_make_token(CK_FUNCTION_LIST_3_0 *f, const char *label, const char *so_pin, const char *pin) {
    CK_UTF8CHAR lab[32];
    size_t n = strlen(label);
    memset(lab, ' ', sizeof lab); memcpy(lab, label, n < sizeof lab ? n : sizeof lab);
    CK_SLOT_ID before[16]; CK_ULONG nb = 16;
    if (f->C_GetSlotList(CK_TRUE, before, &nb) != CKR_OK) return 0;
    if (f->C_InitToken(1, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin), lab) != CKR_OK) return 0;
    CK_SLOT_ID slots[16]; CK_ULONG ns = 16;
    if (f->C_GetSlotList(CK_TRUE, slots, &ns) != CKR_OK) return 0;
    CK_SLOT_ID slot = 0;
    for (CK_ULONG i = 0; i < ns; i++) {
        int old = 0;
        for (CK_ULONG j = 0; j < nb; j++) old |= slots[i] == before[j];
        if (!old) slot = slots[i];
    }
    CK_SESSION_HANDLE s;
    if (!slot || f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) return 0;
    CK_RV rv = f->C_Login(s, CKU_SO, (CK_UTF8CHAR_PTR)so_pin, strlen(so_pin));
    if (rv == CKR_OK) rv = f->C_InitPIN(s, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    f->C_CloseSession(s);
    return rv == CKR_OK ? slot : 0;
}
#endif
