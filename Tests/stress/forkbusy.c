/* fork() while other threads are inside the module (issue 12, docs/reliability.md
 * "Fork with busy threads"). A host as sshd / nginx / OpenVPN workers see it:
 * 4 threads sign, create and destroy token objects without pause while the
 * main thread forks FORKS times; each child does what the spec asks of a
 * forked child (C_Initialize, C_OpenSession, C_Login, C_SignInit, C_Sign) and
 * must finish within TIMEOUT seconds, else the parent kills it by its PID and
 * counts a failure. In-process, the child must also hold its own POSIX lock
 * on the store's WAL index (exit 15 otherwise; see holds_store_lock); in
 * agent mode (docs/agent.md) the child must have no store open at all (exit
 * 17). In both modes the child must start with no socket inherited from the
 * module, not even one a parent thread was using at the fork (exit 16), and
 * no mapping of a connection's shared region (docs/agent-transport.md "Round trips:
 * shared memory"; exit 18): the parent's calls would meet the child's there.
 *
 * Usage: forkbusy MODULE FORKS [TIMEOUT_SECONDS]   (PIN from the environment: PIN)
 *        forkbusy MODULE cost N: what a fork costs the parent with no other
 *        thread (fork() call, then the first signature after it, against
 *        signatures with no fork between; the child exits at once).
 * Output: "ok   - ..." / "FAIL - ..." lines and the figures (fork() call time in
 * the parent, child completion time, operations the busy threads did).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "pkcs11_shim.h"

#define THREADS 4

static CK_FUNCTION_LIST *f;
static CK_SLOT_ID slot;
static const char *pin;
static atomic_int stop;
static atomic_long ops[THREADS], errors[THREADS];
static atomic_ulong last_error[THREADS];
static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s\n", name); } } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static CK_OBJECT_HANDLE find_key(CK_SESSION_HANDLE s) {
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_KEY_TYPE kt = CKK_EC;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}};
    CK_OBJECT_HANDLE key = 0;
    CK_ULONG found = 0;
    if (f->C_FindObjectsInit(s, t, 2) != CKR_OK) return 0;
    f->C_FindObjects(s, &key, 1, &found);
    f->C_FindObjectsFinal(s);
    return found == 1 ? key : 0;
}

static CK_RV sign_once(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key) {
    CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
    unsigned char sig[160];
    CK_ULONG len = sizeof sig;
    CK_RV rv = f->C_SignInit(s, &m, key);
    if (rv != CKR_OK) return rv;
    rv = f->C_Sign(s, (CK_BYTE_PTR)"fork test data", 14, sig, &len);
    if (rv == CKR_OK && (len == 0 || len > sizeof sig)) rv = CKR_GENERAL_ERROR;
    return rv;
}

/* One busy thread: sign, create a token data object (private every other
 * time), destroy it, over and over: every path into SQLite and OpenSSL. */
static void *busy(void *arg) {
    long me = (long)arg;
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK) {
        atomic_fetch_add(&errors[me], 1);
        return NULL;
    }
    CK_OBJECT_HANDLE key = find_key(s);
    CK_OBJECT_CLASS data = CKO_DATA;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    char label[64];
    for (long i = 0; !atomic_load(&stop); i++) {
        CK_RV rv = sign_once(s, key);
        snprintf(label, sizeof label, "forkbusy-%ld-%ld", me, i);
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &data, sizeof data}, {CKA_TOKEN, &yes, 1},
                            {CKA_PRIVATE, (i & 1) ? &yes : &no, 1}, {CKA_LABEL, label, strlen(label)},
                            {CKA_VALUE, label, strlen(label)}};
        CK_OBJECT_HANDLE h = 0;
        if (rv == CKR_OK) rv = f->C_CreateObject(s, t, 5, &h);
        if (rv == CKR_OK) rv = f->C_DestroyObject(s, h);
        if (rv == CKR_OK) {
            atomic_fetch_add(&ops[me], 1);
        } else {
            atomic_fetch_add(&errors[me], 1);
            atomic_store(&last_error[me], rv);
        }
    }
    f->C_CloseSession(s);
    return NULL;
}

/* Whether this process itself holds a POSIX lock on the store's WAL index
 * (SQLite keeps a read lock on its DMS byte while a connection is open). A
 * child that opened its connection on top of SQLite's in-process records
 * inherited from the parent would believe it holds it without holding it;
 * another process could then reset the WAL under it. */
static int holds_store_lock(void) {
    const char *home = getenv("KEYSHARE_HOME");
    char path[4096];
    struct stat st;
    if (!home) return 1; /* cannot tell: not checked */
    snprintf(path, sizeof path, "%s/keychain.db-shm", home);
    if (stat(path, &st) != 0) return 0;
    FILE *l = fopen("/proc/locks", "r");
    if (!l) return 1;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, l)) {
        long pid; unsigned long inode; char kind[16];
        if (sscanf(line, "%*s %15s %*s %*s %ld %*x:%*x:%lu", kind, &pid, &inode) == 3)
            found = !strcmp(kind, "POSIX") && pid == (long)getpid() && inode == (unsigned long)st.st_ino;
    }
    fclose(l);
    return found;
}

/* How many of this process's descriptors are sockets (kind 's') or name the
 * store's database file (kind 'd'). */
static int count_fds(char kind) {
    const char *home = getenv("KEYSHARE_HOME");
    char db[4096] = "";
    if (home) snprintf(db, sizeof db, "%s/keychain.db", home);
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], target[4096];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        if (kind == 's' && !strncmp(target, "socket:", 7)) n++;
        if (kind == 'd' && *db && !strcmp(target, db)) n++;
    }
    closedir(d);
    return n;
}

/* How many mappings of the agent's shared regions (memfd "keyshare-agent") this process has. */
static int count_region_maps(void) {
    FILE *m = fopen("/proc/self/maps", "r");
    if (!m) return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, m))
        if (strstr(line, "/memfd:keyshare-agent")) n++;
    fclose(m);
    return n;
}

/* Agent mode: the parent, logged in and signing, has no store open (the
 * agent has it). Decided once in the parent, before the first fork. */
static int agent_mode;

/* The forked child: a fresh start as the spec asks. Exit codes name the step that failed. */
static void child(void) {
    /* Nothing of the parent's module connections is left in the child. */
    if (count_fds('s') != 0) _exit(16);
    if (count_region_maps() != 0) _exit(18);
    CK_RV rv = f->C_Initialize(NULL);
    if (rv != CKR_OK) _exit(10);
    CK_SESSION_HANDLE s;
    if (f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) _exit(11);
    if (f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) _exit(12);
    CK_OBJECT_HANDLE key = find_key(s);
    if (!key) _exit(13);
    if (sign_once(s, key) != CKR_OK) _exit(14);
    if (agent_mode ? count_fds('d') != 0 : !holds_store_lock()) _exit(agent_mode ? 17 : 15);
    f->C_Finalize(NULL);
    _exit(0);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The parent's cost of one fork: fork() itself (prepare and parent handlers
 * included) and the first signature after it (the store reopens), against a
 * signature with no fork before it. */
static int cost(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, int n) {
    double plain = 0, forked = 0, forkCall = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now();
        if (sign_once(s, key) != CKR_OK) return 1;
        plain += now() - t0;
        fflush(stdout);
        t0 = now();
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        forkCall += now() - t0;
        waitpid(pid, NULL, 0);
        t0 = now();
        if (sign_once(s, key) != CKR_OK) return 1;
        forked += now() - t0;
    }
    printf("  %d forks, no other thread: fork() %.3f ms; signature after a fork %.3f ms, without %.3f ms (mean)\n",
           n, forkCall / n * 1e3, forked / n * 1e3, plain / n * 1e3);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: forkbusy MODULE FORKS [TIMEOUT_SECONDS] (PIN in the environment)\n");
        return 2;
    }
    pin = getenv("PIN");
    int forks = strcmp(argv[2], "cost") ? atoi(argv[2]) : 1;
    double timeout = argc > 3 ? atof(argv[3]) : 5;
    if (!pin || forks <= 0) { fprintf(stderr, "forkbusy: PIN unset or bad FORKS\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    CK_C_GetFunctionList gfl = h ? (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList") : NULL;
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) { printf("FAIL - load\n0 passed, 1 failed\n"); return 1; }
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK || n == 0) { printf("FAIL - no token\n0 passed, 1 failed\n"); return 1; }
    slot = slots[0];
    CK_SESSION_HANDLE s;
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    CHECK("parent: login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) == CKR_OK);
    CK_OBJECT_HANDLE key = find_key(s);
    CHECK("parent: an EC key signs", key && sign_once(s, key) == CKR_OK);
    if (!strcmp(argv[2], "cost")) return cost(s, key, argc > 3 ? atoi(argv[3]) : 200);
    agent_mode = count_fds('d') == 0;
    printf("  mode: %s\n", agent_mode ? "agent (no store open here)" : "in-process");

    pthread_t tid[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&tid[i], NULL, busy, (void *)i);
    /* Let every thread get going before the first fork. */
    for (double until = now() + 5; now() < until;) {
        long started = 0;
        for (int i = 0; i < THREADS; i++) started += atomic_load(&ops[i]) > 0 || atomic_load(&errors[i]) > 0;
        if (started == THREADS) break;
        usleep(1000);
    }

    /* The child's "no region mapped" (exit 18) means something only if the parent has them. */
    if (agent_mode && !getenv("KEYSHARE_AGENT_SHM"))
        CHECK("parent: its agent connections have shared regions", count_region_maps() > 0);

    double *forkTime = calloc((size_t)forks, sizeof(double)), *childTime = calloc((size_t)forks, sizeof(double));
    int ok = 0, timeouts = 0, failed = 0, codes[256] = {0};
    srand((unsigned)getpid());
    for (int i = 0; i < forks; i++) {
        usleep((useconds_t)(rand() % 20000)); /* land the fork anywhere in the threads' loops */
        fflush(stdout);
        double t0 = now();
        pid_t pid = fork();
        if (pid == 0) child();
        double t1 = now();
        forkTime[i] = t1 - t0;
        if (pid < 0) { failed++; continue; }
        int status = 0, done = 0;
        while (now() - t1 < timeout) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) { done = 1; break; }
            if (r < 0 && errno != EINTR) break;
            usleep(2000);
        }
        childTime[i] = now() - t1;
        if (!done) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timeouts++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            ok++;
        } else {
            failed++;
            codes[WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WTERMSIG(status) & 127)]++;
        }
    }
    atomic_store(&stop, 1);
    long total = 0, errs = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        total += atomic_load(&ops[i]);
        errs += atomic_load(&errors[i]);
        if (atomic_load(&errors[i])) fprintf(stderr, "thread %d: %ld errors, last CK_RV 0x%lx\n", i,
                                             atomic_load(&errors[i]), atomic_load(&last_error[i]));
    }
    qsort(forkTime, (size_t)forks, sizeof(double), cmp);
    qsort(childTime, (size_t)forks, sizeof(double), cmp);
    printf("  forks %d: ok %d, timed out %d, failed %d", forks, ok, timeouts, failed);
    for (int c = 0; c < 256; c++) if (codes[c]) printf(" (exit %d: %d)", c, codes[c]);
    printf("\n  child Initialize..Sign: median %.1f ms, max %.1f ms; fork() in the parent: median %.2f ms, max %.2f ms\n",
           childTime[forks / 2] * 1e3, childTime[forks - 1] * 1e3, forkTime[forks / 2] * 1e3, forkTime[forks - 1] * 1e3);
    printf("  slowest children:");
    for (int i = forks - 1; i >= 0 && i >= forks - 5; i--) printf(" %.0f", childTime[i] * 1e3);
    printf(" ms\n");
    printf("  busy threads: %ld sign+create+destroy rounds, %ld errors\n", total, errs);
    char name[160];
    snprintf(name, sizeof name, "%d forks with %d busy threads: every child signed within %.0f s", forks, THREADS, timeout);
    CHECK(name, ok == forks);
    CHECK("busy threads kept working across the forks (no error)", errs == 0 && total > 0);
    CHECK("parent still signs after the forks", sign_once(s, key) == CKR_OK);
    f->C_Finalize(NULL);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
