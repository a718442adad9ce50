/*
 * 82-agent-trust: a setuid-root PKCS #11 host, as sudo or su loading the
 * module through pam_p11 with the invoker's environment. Prints its real and
 * effective uid and C_Initialize's CK_RV ("uid 1000 euid 0 init 0x...").
 * Built with -DRECORD=\"PATH\" it is instead the program a hostile invoker
 * names in KEYSHARE_AGENT_PROGRAM: it writes its uids to PATH and exits.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include "pkcs11_shim.h"

int main(int argc, char **argv) {
#ifdef RECORD
    (void)argc; (void)argv;
    FILE *f = fopen(RECORD, "w");
    if (f) {
        fprintf(f, "ruid %d euid %d\n", (int)getuid(), (int)geteuid());
        fclose(f);
    }
    return 1;
#else
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f;
    if (!gfl || gfl(&f) != CKR_OK) return 1;
    CK_RV rv = f->C_Initialize(NULL);
    printf("uid %d euid %d init 0x%lx\n", (int)getuid(), (int)geteuid(), rv);
    if (rv == CKR_OK) f->C_Finalize(NULL);
    return 0;
#endif
}
