/*
 * tpmfork: a host that starts programs while it signs with a TPM key
 * (docs/tpm.md, "Descriptors"). One thread signs COUNT times in a row with
 * the first EC private key of a token (CKM_ECDSA); meanwhile the main thread
 * starts this program again ("tpmfork --child") with posix_spawn, which lists
 * its own descriptors and reports every socket or TPM device it inherited. A
 * TPM connection opened without close-on-exec shows up in the children
 * started while a TPM command is in flight. posix_spawn (what glibc's
 * system() and popen() and most language runtimes use) runs no atfork
 * handler, so the module's fork gate (Keychain/ForkSafety.swift), which
 * keeps a plain fork() out of module calls, does not keep it out. Checked
 * once more after the signing: the host then holds no TPM descriptor at all.
 *
 *   TPMSIGN_PIN=PIN tpmfork MODULE TOKEN_LABEL COUNT
 *
 * Output: "children=N leaked=L signs=S failed=F"; exit 0 when L == 0 and every signature was made.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pkcs11_shim.h"

/// The child: its exit status is the number of sockets and TPM devices it inherited.
static int child(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 100;
    int dfd = dirfd(d), found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd < 3 || fd == dfd) continue;
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (!strncmp(target, "socket:", 7) || !strncmp(target, "/dev/tpm", 8)) found++;
    }
    closedir(d);
    return found > 99 ? 99 : found;
}

static CK_FUNCTION_LIST_PTR f;
static CK_SESSION_HANDLE s;
static CK_OBJECT_HANDLE key;
static long count, failed;
static volatile int done;

static void *signer(void *arg) {
    (void)arg;
    unsigned char digest[32], sig[256];
    memset(digest, 0x5A, sizeof digest);
    CK_MECHANISM m = {CKM_ECDSA, NULL, 0};
    for (long i = 0; i < count; i++) {
        digest[0] = (unsigned char)i;
        CK_ULONG sl = sizeof sig;
        if (f->C_SignInit(s, &m, key) != CKR_OK || f->C_Sign(s, digest, sizeof digest, sig, &sl) != CKR_OK) failed++;
    }
    done = 1;
    return NULL;
}

static const char *self;

extern char **environ;

/// Starts one child; returns how many descriptors it inherited.
static int spawn(void) {
    fflush(stdout);
    pid_t pid;
    char *argv[] = {(char *)self, "--child", NULL};
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) return 0;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {}
    return WIFEXITED(st) && WEXITSTATUS(st) < 100 ? WEXITSTATUS(st) : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--child")) return child();
    if (argc != 4) { fprintf(stderr, "usage: TPMSIGN_PIN=PIN tpmfork MODULE TOKEN_LABEL COUNT\n"); return 2; }
    self = "/proc/self/exe";
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { exe[n] = 0; self = exe; }
    const char *pin = getenv("TPMSIGN_PIN");
    if (!pin) { fprintf(stderr, "tpmfork: TPMSIGN_PIN is not set\n"); return 2; }
    count = atol(argv[3]);
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "tpmfork: %s\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_C_INITIALIZE_ARGS args = {.flags = CKF_OS_LOCKING_OK};
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(&args) != CKR_OK) { fprintf(stderr, "tpmfork: module init failed\n"); return 1; }
    CK_SLOT_ID slots[64];
    CK_ULONG ns = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &ns) != CKR_OK) return 1;
    CK_SLOT_ID slot = (CK_SLOT_ID)-1;
    size_t want = strlen(argv[2]);
    for (CK_ULONG i = 0; i < ns; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t len = 32;
        while (len > 0 && ti.label[len - 1] == ' ') len--;
        if (len == want && !memcmp(ti.label, argv[2], len)) { slot = slots[i]; break; }
    }
    if (slot == (CK_SLOT_ID)-1) { fprintf(stderr, "tpmfork: no token %s\n", argv[2]); return 1; }
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) return 1;
    CK_RV rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    if (rv != CKR_OK) { fprintf(stderr, "tpmfork: C_Login: 0x%lx\n", (unsigned long)rv); return 1; }
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = CKK_EC;
    CK_ATTRIBUTE tmpl[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_ULONG found = 0;
    if (f->C_FindObjectsInit(s, tmpl, 2) != CKR_OK || f->C_FindObjects(s, &key, 1, &found) != CKR_OK || found != 1) {
        fprintf(stderr, "tpmfork: no EC private key\n");
        return 1;
    }
    f->C_FindObjectsFinal(s);
    pthread_t t;
    if (pthread_create(&t, NULL, signer, NULL) != 0) return 1;
    long children = 0, leaked = 0;
    while (!done) { leaked += spawn(); children++; }
    pthread_join(t, NULL);
    leaked += spawn();  // after the signing: nothing of the TPM may stay open
    children++;
    printf("children=%ld leaked=%ld signs=%ld failed=%ld\n", children, leaked, count - failed, failed);
    f->C_Logout(s);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    return leaked == 0 && failed == 0 ? 0 : 1;
}
