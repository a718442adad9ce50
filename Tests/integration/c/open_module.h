/* How the small agent hosts (agenthost.c, prompthost.c, spinhost.c,
 * unlockhost.c) load the module: dlopen, C_GetFunctionList, C_Initialize(NULL).
 * A failed C_Initialize prints "init 0x<rv>" on stdout, which the scripts
 * read. Include after pkcs11_shim.h. */
#ifndef KS_IT_OPEN_MODULE_H
#define KS_IT_OPEN_MODULE_H
#include <dlfcn.h>
#include <stdio.h>

static int open_module(const char *path, CK_FUNCTION_LIST_PTR *out) {
    void *h = dlopen(path, RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    if (!gfl || gfl(out) != CKR_OK) return 1;
    CK_RV rv = (*out)->C_Initialize(NULL);
    if (rv != CKR_OK) { printf("init 0x%lx\n", rv); return 1; }
    return 0;
}
#endif
