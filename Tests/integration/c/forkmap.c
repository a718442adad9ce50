/*
 * 55-fork: the module's fork handler must not unmap, in the child, the
 * address where the parent had an agent connection's shared region. The
 * region is mapped MADV_DONTFORK, so the child does not have it: the range is
 * free there, and another fork handler (registered first, so it runs first in
 * the child) or malloc may already have put a mapping of its own at it.
 * This host registers such a handler before loading the module, maps a page
 * at the region's address in the child, and checks the page survives.
 * Prints "region at 0x..., child page kept" (exit 0) or "... child page unmapped" (exit 1).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pkcs11_shim.h"
#include "open_module.h"

static void *region;
static void *placed = MAP_FAILED;

static void child_first(void) {
    if (!region) return;
    placed = mmap(region, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (placed != MAP_FAILED) memcpy(placed, "mine", 5);
}

static void *find_region(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    void *at = NULL;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "memfd:keyshare-agent")) { at = (void *)(uintptr_t)strtoull(line, NULL, 16); break; }
    if (f) fclose(f);
    return at;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    pthread_atfork(NULL, NULL, child_first);   /* before the module's own handlers */
    CK_FUNCTION_LIST_PTR f;
    if (open_module(argv[1], &f)) return 1;
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK || n == 0) { printf("no slot\n"); return 1; }
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slots[0], CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) { printf("no session\n"); return 1; }
    CK_SESSION_INFO info;
    f->C_GetSessionInfo(s, &info);
    region = find_region();
    if (!region) { printf("no shared region (KEYSHARE_AGENT_SHM=0?)\n"); return 1; }
    pid_t pid = fork();
    if (pid == 0) {
        if (placed == MAP_FAILED) { printf("region at %p: the child could not map there\n", region); _exit(3); }
        int kept = msync(placed, 4096, MS_ASYNC) == 0 && memcmp(placed, "mine", 5) == 0;
        _exit(kept ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("region at %p, child page %s (child status %d)\n", region, code == 0 ? "kept" : "unmapped", code);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    return code == 0 ? 0 : 1;
}
