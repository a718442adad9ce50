/* Concurrency stress host for libkeyshare-pkcs11.so (issue 8).
 *
 * Why: the store is shared by every process that loads the module; this drives
 * N processes x M threads through sign, verify, C_CreateObject, C_DestroyObject,
 * C_FindObjects and C_SetAttributeValue (plus one process that logs in and out
 * in a loop) and counts every return value that is not CKR_OK. Each thread
 * records what it created ("C label"), changed ("S label") and destroyed
 * ("D label") in LOGDIR, so `check` mode can prove nothing was lost or revived.
 *
 * Usage: stress run   MODULE TOKEN NPROC NTHREADS OPS LOGDIR
 *        stress check MODULE TOKEN LOGDIR      (also signs with every key)
 *        stress op MODULE TOKEN create|destroy|set LABEL   (one write, for the crash harness)
 *        stress pairs MODULE TOKEN [LOGDIR]  (every private key has its certificate and public
 *                                         key; with LOGDIR also the check above)
 *        stress store DBFILE   (integrity_check ok, no token without its wrapped keys; libsqlite3,
 *                               dlopened so the host needs no headers and starts in milliseconds)
 * The user PIN is read from the environment, KEYSHARE_TEST_PIN (run, check,
 * op, pairs), never from argv: every local user reads every process's
 * command line (`ps`).
 * Exit status: the number of unexpected errors (capped at 100), 0 = pass.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pkcs11_shim.h"

static CK_FUNCTION_LIST *f;
static CK_SLOT_ID slot;
static const char *pin, *logdir;
static int ops, errors;
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static void unexpected(const char *what, CK_RV rv) {
    pthread_mutex_lock(&err_lock);
    errors++;
    fprintf(stderr, "pid %d: %s -> 0x%lx\n", (int)getpid(), what, (unsigned long)rv);
    pthread_mutex_unlock(&err_lock);
}
/* In the TSan run (keep_going) errors are expected and threads carry on. */
static int keep_going;
#define CALL(what, expr) do { CK_RV rv_ = (expr); if (rv_ != CKR_OK) { unexpected(what, rv_); if (!keep_going) goto out; } } while (0)

static int load(const char *module, const char *token) {
    void *h = dlopen(module, RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return -1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    if (!gfl || gfl(&f) != CKR_OK) return -1;
    CK_C_INITIALIZE_ARGS args = {0};
    args.flags = CKF_OS_LOCKING_OK;
    if (f->C_Initialize(&args) != CKR_OK) return -1;
    CK_SLOT_ID slots[64]; CK_ULONG n = 64;
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK) return -1;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (f->C_GetTokenInfo(slots[i], &ti) != CKR_OK) continue;
        size_t l = strlen(token);
        if (l <= 32 && memcmp(ti.label, token, l) == 0 && (l == 32 || ti.label[l] == ' ')) { slot = slots[i]; return 0; }
    }
    fprintf(stderr, "token %s not found\n", token);
    return -1;
}

static CK_ULONG find(CK_SESSION_HANDLE s, CK_ATTRIBUTE *t, CK_ULONG n, CK_OBJECT_HANDLE *out, CK_ULONG max) {
    CK_ULONG found = 0;
    CK_RV rv = f->C_FindObjectsInit(s, t, n);
    if (rv != CKR_OK) { unexpected("C_FindObjectsInit", rv); return 0; }
    rv = f->C_FindObjects(s, out, max, &found);
    if (rv != CKR_OK) unexpected("C_FindObjects", rv);
    rv = f->C_FindObjectsFinal(s);
    if (rv != CKR_OK) unexpected("C_FindObjectsFinal", rv);
    return found;
}

/* Sign then verify with every private key that has a matching public key (same CKA_ID).
 * The CLI deletes one identity in a loop meanwhile, so a key found a moment ago
 * may be gone: OBJECT/KEY_HANDLE_INVALID on a key is expected and only counted. */
static int gone_keys;
#define KEYCALL(what, expr) do { CK_RV rv_ = (expr); if (rv_ == CKR_OBJECT_HANDLE_INVALID || rv_ == CKR_KEY_HANDLE_INVALID) \
    { __atomic_add_fetch(&gone_keys, 1, __ATOMIC_RELAXED); goto next; } if (rv_ != CKR_OK) { unexpected(what, rv_); if (!keep_going) goto out; } } while (0)
static int sign_all(CK_SESSION_HANDLE s, int *signed_keys) {
    CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &pc, sizeof pc}};
    CK_OBJECT_HANDLE keys[64];
    CK_ULONG n = find(s, t, 1, keys, 64);
    for (CK_ULONG i = 0; i < n; i++) {
        CK_KEY_TYPE kt; unsigned char id[64];
        CK_ATTRIBUTE a[] = {{CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_ID, id, sizeof id}};
        KEYCALL("C_GetAttributeValue", f->C_GetAttributeValue(s, keys[i], a, 2));
        CK_OBJECT_CLASS uc = CKO_PUBLIC_KEY;
        CK_ATTRIBUTE q[] = {{CKA_CLASS, &uc, sizeof uc}, {CKA_ID, id, a[1].ulValueLen}};
        CK_OBJECT_HANDLE pub; CK_ULONG np = find(s, q, 2, &pub, 1);
        CK_MECHANISM m = {kt == CKK_RSA ? CKM_SHA256_RSA_PKCS : kt == CKK_EC ? CKM_ECDSA_SHA256 : CKM_EDDSA, NULL, 0};
        unsigned char sig[1024]; CK_ULONG sl = sizeof sig;
        KEYCALL("C_SignInit", f->C_SignInit(s, &m, keys[i]));
        KEYCALL("C_Sign", f->C_Sign(s, (CK_BYTE_PTR)"stress", 6, sig, &sl));
        if (np == 1) {
            KEYCALL("C_VerifyInit", f->C_VerifyInit(s, &m, pub));
            CALL("C_Verify", f->C_Verify(s, (CK_BYTE_PTR)"stress", 6, sig, sl));
        }
        (*signed_keys)++;
    next:;
    }
    return (int)n;
out:
    return -1;
}

struct worker { int proc, thread; };

static void *work(void *arg) {
    struct worker *w = arg;
    char path[512]; snprintf(path, sizeof path, "%s/ops-%d-%d.log", logdir, w->proc, w->thread);
    FILE *log = fopen(path, "w");
    CK_SESSION_HANDLE s;
    if (!log) { unexpected("fopen log", 0); return NULL; }
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
    CK_OBJECT_HANDLE mine[8]; char labels[8][64]; int live = 0;
    for (int i = 0; i < ops; i++) {
        int dummy = 0;
        switch (i % 5) {
        case 0: if (sign_all(s, &dummy) < 0) goto out; break;
        case 1: { /* create a token data object, private every other time */
            CK_OBJECT_CLASS dc = CKO_DATA; CK_BBOOL yes = CK_TRUE, priv = (i / 5) % 2 ? CK_TRUE : CK_FALSE;
            char label[64]; snprintf(label, sizeof label, "st-%d-%d-%d", w->proc, w->thread, i);
            CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &priv, 1},
                                {CKA_LABEL, label, strlen(label)}, {CKA_VALUE, "value-1", 7}};
            CK_OBJECT_HANDLE h;
            CALL("C_CreateObject", f->C_CreateObject(s, t, 5, &h));
            fprintf(log, "C %s\n", label); fflush(log);
            if (live < 8) { mine[live] = h; strcpy(labels[live], label); live++; }
            break; }
        case 2: if (live > 0) { /* change the value of the newest */
            CK_ATTRIBUTE t[] = {{CKA_VALUE, "value-2", 7}};
            CALL("C_SetAttributeValue", f->C_SetAttributeValue(s, mine[live - 1], t, 1));
            fprintf(log, "S %s\n", labels[live - 1]); fflush(log);
        } break;
        case 3: { CK_OBJECT_CLASS dc = CKO_DATA; CK_OBJECT_HANDLE hs[256];
            CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}};
            find(s, t, 1, hs, 256); break; }
        case 4: if (live > 0 && (i / 5) % 2) { /* destroy the oldest, keep the rest */
            CALL("C_DestroyObject", f->C_DestroyObject(s, mine[0]));
            fprintf(log, "D %s\n", labels[0]); fflush(log);
            memmove(mine, mine + 1, sizeof mine[0] * (live - 1)); memmove(labels, labels + 1, sizeof labels[0] * (live - 1)); live--;
        } break;
        }
    }
    f->C_CloseSession(s);
out:
    fclose(log);
    return NULL;
}

/* One process per run logs in and out in a loop (logins are per process, so it
 * does not disturb the workers), signing while logged in. */
static void churn(void) {
    CK_SESSION_HANDLE s;
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s));
    for (int i = 0; i < ops / 5 + 1; i++) {
        int k = 0;
        CALL("C_Login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)));
        if (sign_all(s, &k) < 0) goto out;
        CALL("C_Logout", f->C_Logout(s));
    }
out:;
}

/* TSan run only (one process): a thread that logs the whole process out and in
 * again while the workers run, so the login table races with everything. The
 * workers then see expected USER_NOT_LOGGED_IN / handle errors: in that run only
 * ThreadSanitizer's verdict counts. */
static CK_SESSION_HANDLE login_session;
static void *churn_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < ops / 5 + 1; i++) {
        f->C_Logout(login_session);
        f->C_Login(login_session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
    }
    return NULL;
}

static int run_process(const char *module, const char *token, int proc, int nthreads) {
    if (load(module, token) != 0) return 100;
    CK_SESSION_HANDLE login;
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &login));
    if (proc < 0) { churn(); goto out; }
    CALL("C_Login", f->C_Login(login, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)));
    pthread_t th[64], ch; struct worker ws[64];
    login_session = login;
    int churning = getenv("STRESS_IN_PROCESS") && pthread_create(&ch, NULL, churn_thread, NULL) == 0;
    for (int t = 0; t < nthreads && t < 64; t++) { ws[t] = (struct worker){proc, t}; pthread_create(&th[t], NULL, work, &ws[t]); }
    for (int t = 0; t < nthreads && t < 64; t++) pthread_join(th[t], NULL);
    if (churning) pthread_join(ch, NULL);
out:
    if (gone_keys) fprintf(stderr, "pid %d: %d keys deleted by the CLI while in use (expected)\n", (int)getpid(), gone_keys);
    f->C_Finalize(NULL);
    return errors > 100 ? 100 : errors;
}

/* check: every label logged C and not D exists exactly once (with value-2 when
 * logged S), every label logged D is gone; every key still signs. */
static int check(const char *module, const char *token) {
    if (load(module, token) != 0) return 100;
    CK_SESSION_HANDLE s;
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s));
    CALL("C_Login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)));
    char cmd[600]; snprintf(cmd, sizeof cmd, "cat %s/ops-*.log 2>/dev/null", logdir);
    FILE *p = popen(cmd, "r");
    char line[128]; int present = 0, gone = 0;
    static char state[1 << 14][128]; static char kind[1 << 16]; int nstate = 0;
    while (p && fgets(line, sizeof line, p) && nstate < (1 << 14)) {
        line[strcspn(line, "\n")] = 0;
        int j; for (j = 0; j < nstate && strcmp(state[j], line + 2); j++) {}
        if (j == nstate) { snprintf(state[nstate], sizeof state[0], "%s", line + 2); kind[nstate++] = line[0]; }
        else if (kind[j] != 'D') kind[j] = line[0];
    }
    if (p) pclose(p);
    for (int j = 0; j < nstate; j++) {
        CK_OBJECT_CLASS dc = CKO_DATA;
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}, {CKA_LABEL, state[j], strlen(state[j])}};
        CK_OBJECT_HANDLE h[2]; CK_ULONG n = find(s, t, 2, h, 2);
        if (kind[j] == 'D') { if (n != 0) unexpected(state[j], 0xD); else gone++; continue; }
        if (n != 1) { unexpected(state[j], 0xC0 + n); continue; }
        char v[16] = {0}; CK_ATTRIBUTE a[] = {{CKA_VALUE, v, sizeof v - 1}};
        CALL("C_GetAttributeValue", f->C_GetAttributeValue(s, h[0], a, 1));
        if (kind[j] == 'S' && strcmp(v, "value-2")) unexpected(state[j], 0x5);
        present++;
    }
    int signed_keys = 0;
    if (sign_all(s, &signed_keys) < 1) unexpected("no key signs", 0);
    printf("check: %d objects present, %d destroyed and gone, %d keys signed and verified\n", present, gone, signed_keys);
out:
    f->C_Finalize(NULL);
    return errors > 100 ? 100 : errors;
}

/* One write for the crash harness (Tests/stress/crash.sh): exit 0 only once it returned CKR_OK. */
static int one_op(const char *module, const char *token, const char *op, const char *label) {
    if (load(module, token) != 0) return 100;
    CK_SESSION_HANDLE s;
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
    CALL("C_Login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)));
    CK_OBJECT_CLASS dc = CKO_DATA; CK_BBOOL yes = CK_TRUE;
    if (!strcmp(op, "create")) {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}, {CKA_TOKEN, &yes, 1}, {CKA_PRIVATE, &yes, 1},
                            {CKA_LABEL, (void *)label, strlen(label)}, {CKA_VALUE, "value-1", 7}};
        CK_OBJECT_HANDLE h;
        CALL("C_CreateObject", f->C_CreateObject(s, t, 5, &h));
    } else {
        CK_ATTRIBUTE t[] = {{CKA_CLASS, &dc, sizeof dc}, {CKA_LABEL, (void *)label, strlen(label)}};
        CK_OBJECT_HANDLE h; if (find(s, t, 2, &h, 1) != 1) { unexpected("op target missing", 0); goto out; }
        if (!strcmp(op, "destroy")) CALL("C_DestroyObject", f->C_DestroyObject(s, h));
        else { CK_ATTRIBUTE v[] = {{CKA_VALUE, "value-2", 7}}; CALL("C_SetAttributeValue", f->C_SetAttributeValue(s, h, v, 1)); }
    }
out:
    return errors ? 1 : 0;
}

/* No half-made identity: each private key has a certificate and a public key with its CKA_ID. */
static int pairs(const char *module, const char *token) {
    if (load(module, token) != 0) return 100;
    CK_SESSION_HANDLE s;
    CALL("C_OpenSession", f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s));
    CALL("C_Login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)));
    CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY, cc = CKO_CERTIFICATE, uc = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &pc, sizeof pc}};
    CK_OBJECT_HANDLE keys[256], h; CK_ULONG n = find(s, t, 1, keys, 256);
    for (CK_ULONG i = 0; i < n; i++) {
        unsigned char id[64]; CK_ATTRIBUTE a[] = {{CKA_ID, id, sizeof id}};
        CALL("C_GetAttributeValue", f->C_GetAttributeValue(s, keys[i], a, 1));
        CK_ATTRIBUTE qc[] = {{CKA_CLASS, &cc, sizeof cc}, {CKA_ID, id, a[0].ulValueLen}};
        CK_ATTRIBUTE qu[] = {{CKA_CLASS, &uc, sizeof uc}, {CKA_ID, id, a[0].ulValueLen}};
        if (find(s, qc, 2, &h, 1) != 1) unexpected("private key without its certificate", 0);
        if (find(s, qu, 2, &h, 1) != 1) unexpected("private key without its public key", 0);
    }
    printf("pairs: %lu private keys checked\n", (unsigned long)n);
out:
    f->C_Finalize(NULL);
    return errors ? 1 : 0;
}

typedef int (*sq_open)(const char *, void **, int, const char *);
typedef int (*sq_exec)(void *, const char *, int (*)(void *, int, char **, char **), void *, char **);
static int row_cb(void *out, int n, char **v, char **c) { (void)n; (void)c; snprintf(out, 64, "%s", v[0] ? v[0] : "NULL"); return 0; }
static int store_check(const char *path) {
    void *h = dlopen("libsqlite3.so.0", RTLD_NOW);
    sq_open op = h ? (sq_open)dlsym(h, "sqlite3_open_v2") : NULL; sq_exec ex = h ? (sq_exec)dlsym(h, "sqlite3_exec") : NULL;
    void *db = NULL; char ic[64] = "", half[64] = "";
    if (!op || !ex || op(path, &db, 0x1 /* READONLY */, NULL) != 0) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    ex(db, "PRAGMA busy_timeout=15000", NULL, NULL, NULL);
    ex(db, "PRAGMA integrity_check", row_cb, ic, NULL);
    ex(db, "SELECT count(*) FROM tokens WHERE so_wrapped IS NULL OR so_salt IS NULL OR "
           "(user_pin_initialized = 1 AND user_wrapped IS NULL)", row_cb, half, NULL);
    if (strcmp(ic, "ok") || strcmp(half, "0")) { fprintf(stderr, "integrity_check: %s; tokens without wrapped keys: %s\n", ic, half); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "store")) return store_check(argv[2]);
    pin = getenv("KEYSHARE_TEST_PIN");
    if (!pin) { fprintf(stderr, "stress: set KEYSHARE_TEST_PIN to the token's user PIN\n"); return 100; }
    if (argc >= 6 && !strcmp(argv[1], "op")) return one_op(argv[2], argv[3], argv[4], argv[5]);
    if (argc >= 4 && !strcmp(argv[1], "pairs")) {
        int r = pairs(argv[2], argv[3]);
        if (r || argc < 5) return r;
        logdir = argv[4]; return check(argv[2], argv[3]);
    }
    if (argc >= 5 && !strcmp(argv[1], "check")) { logdir = argv[4]; return check(argv[2], argv[3]); }
    if (argc < 8 || strcmp(argv[1], "run")) { fprintf(stderr, "usage: see the header of stress.c\n"); return 100; }
    int nproc = atoi(argv[4]), nthreads = atoi(argv[5]); ops = atoi(argv[6]); logdir = argv[7];
    keep_going = getenv("STRESS_IN_PROCESS") != NULL;
    if (nproc == 1 && keep_going) return run_process(argv[2], argv[3], 0, nthreads);  /* TSan run */
    int total = 0;
    for (int p = -1; p < nproc; p++) {
        if (fork() == 0) _exit(run_process(argv[2], argv[3], p, nthreads));
    }
    int st;
    while (wait(&st) > 0) total += WIFEXITED(st) ? WEXITSTATUS(st) : 100;
    return total > 100 ? 100 : total;
}
