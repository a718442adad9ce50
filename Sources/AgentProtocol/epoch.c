/*
 * The agent's epoch page (docs/agent-transport.md, "Verify in the client"): one
 * counter the agent moves whenever something may have changed the answer
 * of a C_VerifyInit it gave before, published read-only to every client
 * that asks for it at its hello, so a client can tell without a round trip
 * that a public key it was handed is still the one the agent would use.
 *
 * What moves it (over-invalidating is harmless, missing a change is not):
 * - every PKCS #11 call served that may change what another client finds
 *   (ksa_epoch_fn_changes: object creation, change and destruction, PIN and
 *   token calls, any function not known to be harmless), by any client,
 *   before its reply leaves the agent. A client's own logins, sessions and
 *   session objects are its own: its module drops its tickets itself when it
 *    calls C_Login, C_Logout, C_CloseSession... (pairs.c), so those do
 *   not end every other client's;
 * - every control request of the CLI (ControlServer.swift: unlock, lock,
 *   generate, ...);
 * - any write, creation, deletion or rename in the store's directory, seen by
 *   a watcher thread (inotify): another process writing the store directly
 *   (the CLI's import, a module in KEYSHARE_IN_PROCESS=1 mode).
 *
 * The page is a sealed memfd: F_SEAL_SHRINK and F_SEAL_GROW (a client's
 * mapping never faults) and F_SEAL_FUTURE_WRITE after the agent's own
 * writable mapping, so no client (nor anything that gets its descriptor)
 * can map it writable or write it: it could otherwise freeze the counter for
 * every client of the agent. A kernel without F_SEAL_FUTURE_WRITE (< 5.1)
 * gets no page, and its clients verify through the agent as before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent_protocol.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static pthread_mutex_t epoch_lock = PTHREAD_MUTEX_INITIALIZER;
static int epoch_fd = -1;
static uint64_t *epoch_word;   /* the agent's writable mapping (NULL: no page) */

/* Called with epoch_lock held. */
static int epoch_create_locked(void) {
    if (epoch_word) return 0;
    int fd = memfd_create("keyshare-epoch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    void *p = MAP_FAILED;
    if (ftruncate(fd, KSA_EPOCH_PAGE) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
        p = mmap(NULL, KSA_EPOCH_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
        if (p != MAP_FAILED) munmap(p, KSA_EPOCH_PAGE);
        close(fd);
        return -1;
    }
    (void)madvise(p, KSA_EPOCH_PAGE, MADV_DONTFORK);
    uint64_t *w = p;
    __atomic_store_n(w, 1, __ATOMIC_RELEASE);
    epoch_fd = fd;
    __atomic_store_n(&epoch_word, w, __ATOMIC_RELEASE);
    return 0;
}

void ksa_epoch_bump(void) {
    uint64_t *w = __atomic_load_n(&epoch_word, __ATOMIC_ACQUIRE);
    if (w) __atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
}

int ksa_epoch_fd(void) {
    pthread_mutex_lock(&epoch_lock);
    int fd = epoch_create_locked() == 0 ? epoch_fd : -1;
    pthread_mutex_unlock(&epoch_lock);
    return fd;
}

/* The watcher: one read per batch of events, one bump per batch (a commit
 * writes the WAL several times: one bump is enough, the counter only has to
 * move). The bump happens after the write that caused the event returned in
 * the writer; a C_VerifyInit answered by a client in between (microseconds,
 * the watcher's wakeup) still sees the old key: docs/agent.md says so. */
static void *epoch_watch(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        ksa_epoch_bump();
        if (n <= 0) break;   /* the watch is gone: counted as a change, then nothing is watched */
        /* The directory itself removed or moved: its watch ends (IN_IGNORED follows). */
        int gone = 0;
        for (ssize_t at = 0; at + (ssize_t)sizeof(struct inotify_event) <= n;) {
            const struct inotify_event *e = (const struct inotify_event *)(const void *)(buf + at);
            if (e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) gone |= !(e->mask & IN_Q_OVERFLOW);
            at += (ssize_t)sizeof *e + e->len;
        }
        if (gone) break;
    }
    close(fd);
    /* Nothing watches the store any more: every ticket is refused from now on
     * (the counter moves on every read of it: ksa_epoch_watch_lost). */
    uint64_t *w = __atomic_load_n(&epoch_word, __ATOMIC_ACQUIRE);
    if (w) __atomic_store_n(w + 1, 1, __ATOMIC_RELEASE);
    return NULL;
}

int ksa_epoch_watch(const char *dir) {
    static int started;
    pthread_mutex_lock(&epoch_lock);
    int rc = -1;
    if (started) {
        rc = 0;
    } else if (epoch_create_locked() == 0) {
        int fd = inotify_init1(IN_CLOEXEC);
        if (fd >= 0 && inotify_add_watch(fd, dir, IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                                      IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF) >= 0) {
            pthread_t t;
            pthread_attr_t a;
            pthread_attr_init(&a);
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&a, 64 << 10);
            if (pthread_create(&t, &a, epoch_watch, (void *)(intptr_t)fd) == 0) {
                started = 1;
                rc = 0;
                fd = -1;
            }
            pthread_attr_destroy(&a);
        }
        if (fd >= 0) close(fd);
        if (rc != 0) {
            /* No watcher: no page either (a client would trust a counter that misses the store's changes). */
            munmap(epoch_word, KSA_EPOCH_PAGE);
            close(epoch_fd);
            epoch_word = NULL;
            epoch_fd = -1;
        }
    }
    pthread_mutex_unlock(&epoch_lock);
    return rc;
}

/* The pure reads: a call of any other function may change what a
 * C_VerifyInit of the same client finds (or is a function this list does not
 * know yet). */
int ksa_epoch_fn_reads(uint32_t fn) {
    switch (fn) {
    case KSA_FN_GetInfo: case KSA_FN_GetSlotList: case KSA_FN_GetSlotInfo: case KSA_FN_GetTokenInfo:
    case KSA_FN_GetMechanismList: case KSA_FN_GetMechanismInfo: case KSA_FN_OpenSession: case KSA_FN_GetSessionInfo:
    case KSA_FN_GetOperationState: case KSA_FN_GetObjectSize: case KSA_FN_GetAttributeValue:
    case KSA_FN_FindObjectsInit: case KSA_FN_FindObjects: case KSA_FN_FindObjectsFinal:
    case KSA_FN_EncryptInit: case KSA_FN_Encrypt: case KSA_FN_EncryptUpdate: case KSA_FN_EncryptFinal:
    case KSA_FN_DecryptInit: case KSA_FN_Decrypt: case KSA_FN_DecryptUpdate: case KSA_FN_DecryptFinal:
    case KSA_FN_DigestInit: case KSA_FN_Digest: case KSA_FN_DigestUpdate: case KSA_FN_DigestKey: case KSA_FN_DigestFinal:
    case KSA_FN_SignInit: case KSA_FN_Sign: case KSA_FN_SignUpdate: case KSA_FN_SignFinal:
    case KSA_FN_VerifyInit: case KSA_FN_Verify: case KSA_FN_VerifyUpdate: case KSA_FN_VerifyFinal:
    case KSA_FN_SeedRandom: case KSA_FN_GenerateRandom: case KSA_FN_GetFunctionStatus: case KSA_FN_WaitForSlotEvent:
    case KSA_FN_DigestEncryptUpdate: case KSA_FN_DecryptDigestUpdate: case KSA_FN_SignEncryptUpdate:
    case KSA_FN_DecryptVerifyUpdate: case KSA_FN_WrapKey: case KSA_FN_WrapKeyAuthenticated:
    case KSA_FN_MessageEncryptInit: case KSA_FN_EncryptMessage: case KSA_FN_EncryptMessageBegin:
    case KSA_FN_EncryptMessageNext: case KSA_FN_MessageEncryptFinal: case KSA_FN_MessageDecryptInit:
    case KSA_FN_DecryptMessage: case KSA_FN_DecryptMessageBegin: case KSA_FN_DecryptMessageNext:
    case KSA_FN_MessageDecryptFinal: case KSA_FN_MessageSignInit: case KSA_FN_SignMessage: case KSA_FN_SignMessageBegin:
    case KSA_FN_SignMessageNext: case KSA_FN_MessageSignFinal: case KSA_FN_MessageVerifyInit: case KSA_FN_VerifyMessage:
    case KSA_FN_VerifyMessageBegin: case KSA_FN_VerifyMessageNext: case KSA_FN_MessageVerifyFinal:
    case KSA_FN_VerifySignatureInit: case KSA_FN_VerifySignature: case KSA_FN_VerifySignatureUpdate:
    case KSA_FN_VerifySignatureFinal: case KSA_FN_GetSessionValidationFlags:
        return 1;
    default:
        return 0;
    }
}

/* What may change another client's C_VerifyInit: not the reads, and not what
 * only changes the calling client's own state (its logins, sessions and the
 * session objects they hold, its operations). */
int ksa_epoch_fn_changes(uint32_t fn) {
    if (ksa_epoch_fn_reads(fn)) return 0;
    switch (fn) {
    case KSA_FN_Initialize: case KSA_FN_Finalize: case KSA_FN_Login: case KSA_FN_LoginUser: case KSA_FN_Logout:
    case KSA_FN_CloseSession: case KSA_FN_CloseAllSessions: case KSA_FN_SessionCancel: case KSA_FN_CancelFunction:
    case KSA_FN_SignRecoverInit: case KSA_FN_SignRecover: case KSA_FN_VerifyRecoverInit: case KSA_FN_VerifyRecover:
    case KSA_FN_SetOperationState:
        return 0;
    default:
        return 1;
    }
}

/* ---- the client's side ---------------------------------------------------- */

const volatile uint64_t *ksa_epoch_map(int fd) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != KSA_EPOCH_PAGE) return NULL;
    /* Sealed against shrinking (else a truncation would make every read fault)
     * and against writes: the agent said so; checked all the same. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE)) != (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE)) return NULL;
    void *p = mmap(NULL, KSA_EPOCH_PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return NULL;
    return p;
}

uint64_t ksa_epoch_read(const volatile uint64_t *page) {
    if (!page) return 0;
    /* Word 1 set: the agent's watcher is gone; nothing is current any more. */
    if (__atomic_load_n(&page[1], __ATOMIC_ACQUIRE)) return 0;
    return __atomic_load_n(&page[0], __ATOMIC_ACQUIRE);
}
