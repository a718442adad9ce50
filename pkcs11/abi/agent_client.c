/*
 * The module as a client of the keyshare agent (docs/agent.md): every
 * PKCS #11 call is marshalled (Sources/AgentProtocol) and served by the
 * per-user agent, which holds the store, the logins and the keys. This
 * process holds sockets and nothing else: no SQLite handle, no key.
 *
 * Connections: one per concurrent call (an idle pool), all attached to one
 * agent-side client (the token from the first hello), so the process's
 * logins and sessions are shared by its threads as PKCS #11 requires.
 * Agent death: the call in flight gets CKR_DEVICE_REMOVED; the next call
 * starts (or finds) a new agent, initialises a fresh client there and goes
 * on; old session handles are then CKR_SESSION_HANDLE_INVALID.
 * Fork: the child closes every inherited connection and must call
 * C_Initialize (as in-process); it never talks on the parent's sockets.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "keyshare_abi.h"
#include "../../Sources/AgentProtocol/include/agent_protocol.h"

extern char **environ;

struct kc_conn {
    ksa_chan ch;                         /* the socket, the shared region (shm.c), the polling (spin.c) */
    unsigned generation;
    ksa_buf buf;                         /* the call buffer, kept across calls (wiped after each) */
    struct kc_conn *next;                /* the idle pool */
    struct kc_conn *all_prev, *all_next; /* every open connection, idle or in use */
};

static pthread_mutex_t kc_lock = PTHREAD_MUTEX_INITIALIZER;
static int kc_initialized;
static int kc_lost;            /* the agent went away; reconnect on the next call */
static unsigned kc_generation; /* bumped by C_Finalize, agent loss and fork */
static uint8_t kc_token[KSA_TOKEN_LEN];
static struct kc_conn *kc_idle;
static struct kc_conn *kc_all;
static uint32_t kc_next_id;

/* KEYSHARE_AGENT_SPIN_US of this process, read once (docs/agent.md, "Round trips"). */
static uint32_t kc_spin_us(void) {
    static int read_once;
    static uint32_t us;
    if (!__atomic_load_n(&read_once, __ATOMIC_ACQUIRE)) {
        us = ksa_spin_budget_us();
        __atomic_store_n(&read_once, 1, __ATOMIC_RELEASE);
    }
    return us;
}

/* Every connection is on kc_all (under kc_lock) from its creation to its
 * close, so the fork child can close those a parent thread was using at the
 * fork, not only the idle ones: a child holding a copy of the parent's socket
 * would keep the parent's agent-side client (its logins) alive after the
 * parent exits, and must never talk on it. */
static struct kc_conn *conn_new_locked(int fd, ksa_shm *shm, unsigned generation) {
    struct kc_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    ksa_chan_init(&c->ch, fd, shm, 0, kc_spin_us());
    c->generation = generation;
    c->all_next = kc_all;
    if (kc_all) kc_all->all_prev = c;
    kc_all = c;
    return c;
}

static void conn_free_locked(struct kc_conn *c) {
    if (c->all_prev) c->all_prev->all_next = c->all_next; else kc_all = c->all_next;
    if (c->all_next) c->all_next->all_prev = c->all_prev;
    close(c->ch.fd);
    /* In a fork child the region is not mapped (MADV_DONTFORK): munmap of
     * nothing is harmless. */
    ksa_chan_close_shm(&c->ch);
    ksa_buf_free(&c->buf);
    free(c);
}

/* ---- mode ----------------------------------------------------------------- */

/* The agent is the default (docs/agent.md): the keys stay out of the
 * application's address space. KEYSHARE_IN_PROCESS=1 chooses the weaker
 * in-process mode, for hosts that cannot reach an agent: the store, the
 * logins and the unlocked keys then live in the application, readable by
 * anything that can read its memory (a core, ptrace, /proc/PID/mem). It is
 * the only way to it (KEYSHARE_AGENT is no longer read: the agent needs no
 * opt-in). The agent sets KEYSHARE_IN_PROCESS=1 for itself, so a copy of
 * this module it loads (or a helper it starts) never connects back to it. */
int ks_agent_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *inproc = getenv("KEYSHARE_IN_PROCESS");
        mode = !(inproc && strcmp(inproc, "1") == 0);
    }
    return mode;
}

/* ---- connecting ------------------------------------------------------------ */

static int connect_socket(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The program that serves as agent: $KEYSHARE_AGENT_PROGRAM, else `keyshare`
 * next to this module or in ../bin, else the usual prefixes. */
static int agent_program(char *out, size_t n) {
    const char *e = getenv("KEYSHARE_AGENT_PROGRAM");
    if (e && *e) {
        snprintf(out, n, "%s", e);
        return access(out, X_OK);
    }
    Dl_info info;
    if (dladdr((void *)agent_program, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        int len = slash ? (int)(slash - info.dli_fname) : 1;
        const char *base = slash ? info.dli_fname : ".";
        snprintf(out, n, "%.*s/keyshare", len, base);
        if (access(out, X_OK) == 0) return 0;
        snprintf(out, n, "%.*s/../bin/keyshare", len, base);
        if (access(out, X_OK) == 0) return 0;
    }
    const char *fallback[] = {"/usr/local/bin/keyshare", "/usr/bin/keyshare"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(out, n, "%s", fallback[i]);
        if (access(out, X_OK) == 0) return 0;
    }
    return -1;
}

/* The agent's environment: the few variables it needs, never the starter's
 * whole environment. The agent lives on after its first starter and serves
 * every process of the user, so a secret the starter happened to hold (a
 * PIN in a shell variable, a token) must not live on in it, nor a setting
 * that would change how it serves others. Kept: where it runs and finds
 * things (PATH, HOME, LANG, LC_ALL, XDG_RUNTIME_DIR, XDG_DATA_HOME,
 * KEYSHARE_HOME), its own settings (KEYSHARE_AGENT_*, the card driver's
 * KEYSHARE_DRIVER_*), and the configuration the external token modules it
 * loads read (SoftHSM2, OpenSC, PC/SC, tpm2-pkcs11) and the TPM it talks to
 * (KEYSHARE_TCTI). A starter may name more
 * in KEYSHARE_AGENT_ENV (space or comma separated): an explicit choice, as
 * `systemctl --user import-environment` is. KEYSHARE_KDF_LOG2N is not kept:
 * the agent wraps PINs at the default cost. */
static int agent_env_kept(const char *entry) {
    static const char *const names[] = {
        "PATH", "HOME", "LANG", "LC_ALL", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "KEYSHARE_HOME",
        "SOFTHSM2_CONF", "OPENSC_CONF", "PCSCLITE_CSOCK_NAME",
        "TPM2_PKCS11_STORE", "TPM2_PKCS11_TCTI", "TPM2_PKCS11_LOG_LEVEL",
        "KEYSHARE_TCTI",  /* which TPM the agent's TPM tokens use (docs/tpm.md) */
    };
    static const char *const prefixes[] = {"KEYSHARE_AGENT_", "KEYSHARE_DRIVER_"};
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry) return 0;
    size_t n = (size_t)(eq - entry);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == n && memcmp(entry, names[i], n) == 0) return 1;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    const char *extra = getenv("KEYSHARE_AGENT_ENV");
    for (const char *p = extra; p && *p;) {
        size_t len = strcspn(p, " ,");
        if (len == n && memcmp(p, entry, n) == 0) return 1;
        p += len;
        p += strspn(p, " ,");
    }
    return 0;
}

/* The kept entries of environ (pointers into it), NULL-terminated; free() it. */
static char **agent_env(void) {
    size_t count = 0;
    for (char **e = environ; e && *e; e++) count++;
    char **out = calloc(count + 1, sizeof *out);
    if (!out) return NULL;
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (agent_env_kept(*e)) out[k++] = *e;
    return out;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Connects, starting the agent when its socket is not live. Starters take
 * DIR/start.lock so one of several concurrent first users spawns the agent
 * and the others find it; the agent itself holds DIR/agent.lock for its
 * life, so even racing spawns end with exactly one agent listening. */
static int connect_or_start(void) {
    char path[128], dir[512];
    if (ksa_socket_path(path, sizeof path) || ksa_agent_dir(dir, sizeof dir)) return -1;
    int fd = connect_socket(path);
    if (fd >= 0) return fd;
    if (getenv("KEYSHARE_AGENT_NO_START") && strcmp(getenv("KEYSHARE_AGENT_NO_START"), "1") == 0) return -1;
    if (ksa_prepare_dir(dir, 1) != 0) return -1;
    char lockpath[600];
    snprintf(lockpath, sizeof lockpath, "%s/start.lock", dir);
    int lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock < 0) return -1;
    while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {}
    fd = connect_socket(path);
    if (fd < 0) {
        char prog[600];
        if (agent_program(prog, sizeof prog) == 0) {
            char *argv[] = {prog, "agent", "--daemonize", NULL};
            posix_spawnattr_t attr;
            posix_spawnattr_init(&attr);
            posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
            /* The agent outlives this process: it must not keep what this
             * process holds open without close-on-exec (a shell's `exec 9>lock`
             * held by flock, a pipe a caller waits to see closed). */
            posix_spawn_file_actions_t fa;
            posix_spawn_file_actions_init(&fa);
            posix_spawn_file_actions_addclosefrom_np(&fa, 3);
            pid_t pid;
            char **env = agent_env();
            int spawned = env && posix_spawn(&pid, prog, &fa, &attr, argv, env) == 0;
            posix_spawn_file_actions_destroy(&fa);
            if (spawned) {
                /* The first process exits once the agent listens (or lost the race). */
                int status;
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            }
            free(env);
            posix_spawnattr_destroy(&attr);
            for (int i = 0; i < 500 && fd < 0; i++) {
                fd = connect_socket(path);
                if (fd < 0) sleep_ms(10);
            }
        }
    }
    flock(lock, LOCK_UN);
    close(lock);
    return fd;
}

/* The hello: a new client (token all zero, with the store and the access
 * groups this process asks for) or another connection of this one. */
/* KEYSHARE_DEBUG as the in-process log reads it (Sources/PKCS11/Log.swift). */
static int debug_log_wanted(void) {
    const char *v = getenv("KEYSHARE_DEBUG");
    return v && *v && strcmp(v, "0") != 0;
}

/* The descriptor the in-process module would log to: KEYSHARE_LOG opened by
 * this process (its cwd, its permissions), else stderr. */
static int debug_log_fd(int *opened) {
    const char *path = getenv("KEYSHARE_LOG");
    *opened = 0;
    if (path && *path) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) { *opened = 1; return fd; }
    }
    return STDERR_FILENO;
}

/* A store path of the client's environment as the agent must read it: a
 * relative one is resolved against the CLIENT's working directory, as the
 * in-process mode would open it (the agent's cwd is not the client's).
 * Returns `v` itself when it is absolute, empty or unset; else a malloc'd
 * copy in *owned (NULL when the cwd is unknown: then `v` as is). */
static const char *absolute_path(const char *v, char **owned) {
    *owned = NULL;
    if (v == NULL || v[0] == '\0' || v[0] == '/') return v;
    char *cwd = getcwd(NULL, 0);
    if (cwd == NULL) return v;
    size_t n = strlen(cwd) + 1 + strlen(v) + 1;
    char *out = malloc(n);
    if (out != NULL) snprintf(out, n, "%s/%s", cwd, v);
    free(cwd);
    *owned = out;
    return out != NULL ? out : v;
}

/* *shm: the connection's shared region when the agent gave one (shm.c). */
static int hello(int fd, int attach, ksa_shm **shm) {
    *shm = NULL;
    ksa_buf b;
    ksa_buf_init(&b);
    /* The debug log is the client's (docs/agent.md, "Debug log"): the agent
     * writes this client's call lines to the descriptor sent after the hello. */
    int log = !attach && debug_log_wanted();
    int want_shm = ksa_shm_wanted();
    ksa_put_u32(&b, KSA_MAGIC);
    ksa_put_u16(&b, KSA_VERSION);
    ksa_put_u16(&b, (uint16_t)((log ? KSA_HELLO_LOG : 0) | (want_shm ? KSA_HELLO_SHM : 0)));
    static const uint8_t zero[KSA_TOKEN_LEN];
    ksa_put_raw(&b, attach ? kc_token : zero, KSA_TOKEN_LEN);
    if (!attach) {
        char *owned[3];
        const char *home = absolute_path(getenv("KEYSHARE_HOME"), &owned[0]);
        const char *groups = getenv("KEYSHARE_ACCESS_GROUPS");
        const char *xdg = absolute_path(getenv("XDG_DATA_HOME"), &owned[1]);
        const char *h = absolute_path(getenv("HOME"), &owned[2]);
        const char *vals[] = {home, xdg, h, groups};
        for (int i = 0; i < 4; i++) {
            ksa_put_u8(&b, vals[i] != NULL);
            size_t n = vals[i] ? strlen(vals[i]) : 0;
            ksa_put_u32(&b, (uint32_t)n);
            if (n) ksa_put_raw(&b, vals[i], n);
        }
        for (int i = 0; i < 3; i++) free(owned[i]);
    }
    int rc = -1, sent = !b.failed && ksa_write_frame(fd, b.data, b.len) == 0;
    if (sent && log) {
        int opened, lfd = debug_log_fd(&opened);
        sent = ksa_send_fd(fd, lfd) == 0;
        if (opened) close(lfd);
    }
    if (sent && ksa_read_frame(fd, &b) == 0) {
        ksa_rd r = {b.data, b.len, 0};
        uint32_t magic = ksa_get_u32(&r);
        uint16_t version = ksa_get_u16(&r);
        uint16_t status = ksa_get_u16(&r);
        const uint8_t *token = ksa_get_raw(&r, KSA_TOKEN_LEN);
        if (!r.failed && magic == KSA_MAGIC && version == KSA_VERSION && status == 0) {
            rc = 0;
            /* The region's descriptor (or the byte alone: none). */
            if (want_shm) {
                int sfd = ksa_recv_fd(fd);
                if (sfd == -2) rc = -1;
                if (sfd >= 0) {
                    *shm = ksa_shm_map(sfd);
                    close(sfd);
                }
            }
            if (rc == 0 && !attach) memcpy(kc_token, token, KSA_TOKEN_LEN);
        } else if (!r.failed && status == KSA_HELLO_STORE_UNSAFE) {
            rc = -3; /* the store cannot be opened safely */
        } else if (!r.failed && status != 0) {
            rc = -2; /* refused (policy, unknown token) */
        }
    }
    ksa_buf_free(&b);
    return rc;
}

/* One call on one connection, in the connection's buffer `b` (kept, so a
 * call makes no allocation once it has grown; wiped after each call: a
 * request may hold a PIN). -1: the connection is broken. */
static int exchange_in(ksa_chan *ch, ksa_buf *bp, uint32_t fn, ksa_arg *args, CK_RV *rv) {
    ksa_buf_reset(bp);
    uint32_t id = __atomic_add_fetch(&kc_next_id, 1, __ATOMIC_RELAXED);
    ksa_put_u32(bp, id);
    ksa_put_u32(bp, fn);
    CK_RV erv = ksa_encode_request(fn, args, bp);
    if (erv != CKR_OK) {
        ksa_buf_reset(bp);
        *rv = erv;
        return 0;
    }
    int rc = -1;
    /* Through the shared region when the agent polls for it, else the
     * socket; the reply likewise, polled for a little before blocking
     * (shm.c, spin.c: bounded, adaptive). */
    int sent = ksa_chan_send(ch, bp->data, bp->len) == 0;
    if (sent && ksa_chan_recv(ch, bp) == 0) {
        ksa_spin_done(&ch->spin);
        ksa_rd r = {bp->data, bp->len, 0};
        if (ksa_get_u32(&r) == id && !r.failed) {
            *rv = ksa_apply_reply(fn, args, &r);
            rc = 0;
        }
    }
    ksa_buf_reset(bp);
    /* An idle connection keeps a small buffer, not the one a big call grew. */
    if (bp->cap > (1u << 16)) ksa_buf_free(bp);
    return rc;
}

static void drop_idle_locked(void) {
    while (kc_idle) {
        struct kc_conn *c = kc_idle;
        kc_idle = c->next;
        conn_free_locked(c);
    }
}

/* A new client at the agent: connect (starting it), hello, C_Initialize.
 * Called with kc_lock held. A hello that meets an agent just exiting (idle)
 * is retried. */
static CK_RV start_client_locked(struct kc_conn **out) {
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = connect_or_start();
        if (fd < 0) return CKR_DEVICE_ERROR;
        ksa_shm *shm;
        int h = hello(fd, 0, &shm);
        if (h == -2) { close(fd); return CKR_TOKEN_NOT_PRESENT; }
        if (h == -3) { close(fd); return CKR_DEVICE_ERROR; }
        if (h != 0) { close(fd); ksa_shm_unmap(shm); sleep_ms(20); continue; }
        struct kc_conn *c = conn_new_locked(fd, shm, kc_generation);
        if (!c) { close(fd); ksa_shm_unmap(shm); return CKR_HOST_MEMORY; }
        ksa_arg a[1] = {{.ul = 0}};
        CK_RV rv;
        if (exchange_in(&c->ch, &c->buf, KSA_FN_Initialize, a, &rv) != 0) { conn_free_locked(c); sleep_ms(20); continue; }
        if (rv != CKR_OK) { conn_free_locked(c); return rv; }
        *out = c;
        return CKR_OK;
    }
    return CKR_DEVICE_ERROR;
}

/* A connection for one call. */
static CK_RV acquire(struct kc_conn **out) {
    pthread_mutex_lock(&kc_lock);
    if (!kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    if (kc_lost) {
        /* The agent died: a fresh client at a new agent (started if need be). */
        struct kc_conn *c = NULL;
        CK_RV rv = start_client_locked(&c);
        if (rv != CKR_OK) {
            pthread_mutex_unlock(&kc_lock);
            return CKR_DEVICE_REMOVED;
        }
        kc_lost = 0;
        *out = c;
        pthread_mutex_unlock(&kc_lock);
        return CKR_OK;
    }
    if (kc_idle) {
        *out = kc_idle;
        kc_idle = kc_idle->next;
        pthread_mutex_unlock(&kc_lock);
        return CKR_OK;
    }
    unsigned gen = kc_generation;
    pthread_mutex_unlock(&kc_lock);
    /* Another connection of this client, for a concurrent call. */
    char path[128];
    int fd = ksa_socket_path(path, sizeof path) == 0 ? connect_socket(path) : -1;
    ksa_shm *shm = NULL;
    if (fd >= 0 && hello(fd, 1, &shm) == 0) {
        pthread_mutex_lock(&kc_lock);
        struct kc_conn *c = conn_new_locked(fd, shm, gen);
        pthread_mutex_unlock(&kc_lock);
        if (c) {
            *out = c;
            return CKR_OK;
        }
    }
    ksa_shm_unmap(shm);
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&kc_lock);
    if (gen == kc_generation) { kc_lost = 1; kc_generation++; drop_idle_locked(); }
    pthread_mutex_unlock(&kc_lock);
    return CKR_DEVICE_REMOVED;
}

static void release(struct kc_conn *c, int broken) {
    pthread_mutex_lock(&kc_lock);
    if (broken) {
        if (c->generation == kc_generation && kc_initialized) {
            kc_lost = 1;
            kc_generation++;
            drop_idle_locked();
        }
        conn_free_locked(c);
    } else if (c->generation != kc_generation || !kc_initialized) {
        conn_free_locked(c);
    } else {
        c->next = kc_idle;
        kc_idle = c;
    }
    pthread_mutex_unlock(&kc_lock);
}

static CK_RV kc_call(uint32_t fn, ksa_arg *args) {
    struct kc_conn *c;
    CK_RV rv = acquire(&c);
    if (rv != CKR_OK) return rv;
    int broken = exchange_in(&c->ch, &c->buf, fn, args, &rv) != 0;
    release(c, broken);
    return broken ? CKR_DEVICE_REMOVED : rv;
}

/* ---- fork --------------------------------------------------------------------- */

/* prepare takes kc_lock, so the fork happens with the connection lists
 * consistent and no thread inside them (a thread holds kc_lock only for
 * list updates, or while it starts the process's agent client). The parent
 * releases it; the child releases it too, having closed every connection it
 * inherited (idle or in use by a parent thread: none is the child's, and the
 * parent's copies stay open: a descriptor is per process). The child must
 * call C_Initialize (as in-process), which makes its own agent-side client. */
static void kc_fork_prepare(void) { pthread_mutex_lock(&kc_lock); }
static void kc_fork_parent(void) { pthread_mutex_unlock(&kc_lock); }
static void kc_fork_child(void) {
    kc_idle = NULL;
    while (kc_all) conn_free_locked(kc_all);
    kc_initialized = 0;
    kc_lost = 0;
    kc_generation++;
    pthread_mutex_unlock(&kc_lock);
}

__attribute__((constructor)) static void kc_register(void) {
    pthread_atfork(kc_fork_prepare, kc_fork_parent, kc_fork_child);
}

/* ---- the entry points ----------------------------------------------------- */

#define ARGS(...) ksa_arg a[KSA_MAX_ARGS] = {__VA_ARGS__}
#define UL(x) {.ul = (CK_ULONG)(x)}
#define IN(p, n) {.ptr = (void *)(p), .len = (n)}
#define OUT(p, pn) {.ptr = (void *)(p), .plen = (pn)}
#define PTR(p) {.ptr = (void *)(p)}
#define OUTUL(p) {.plen = (p)}
#define TMPL(p, n) {.ptr = (void *)(p), .len = (n)}

static CK_RV kc_C_Initialize(CK_VOID_PTR pInitArgs) {
    if (pInitArgs) {
        CK_C_INITIALIZE_ARGS *a = pInitArgs;
        int n = (a->CreateMutex != NULL) + (a->DestroyMutex != NULL) + (a->LockMutex != NULL) + (a->UnlockMutex != NULL);
        if (a->pReserved != NULL || (n != 0 && n != 4)) return CKR_ARGUMENTS_BAD;
    }
    pthread_mutex_lock(&kc_lock);
    if (kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_ALREADY_INITIALIZED;
    }
    struct kc_conn *c = NULL;
    CK_RV rv = start_client_locked(&c);
    if (rv == CKR_OK) {
        kc_initialized = 1;
        kc_lost = 0;
        c->generation = kc_generation;
        c->next = kc_idle;
        kc_idle = c;
    }
    pthread_mutex_unlock(&kc_lock);
    return rv;
}

static CK_RV kc_C_Finalize(CK_VOID_PTR pReserved) {
    if (pReserved) return CKR_ARGUMENTS_BAD;
    /* A connection for the Finalize call, also when every connection is in
     * use by another thread (blocked in C_WaitForSlotEvent, say): the
     * agent-side C_Finalize is what wakes such a call (CKR_CRYPTOKI_NOT_INITIALIZED),
     * as in-process. Not when the agent is lost: nothing to finalise there. */
    struct kc_conn *c = NULL;
    pthread_mutex_lock(&kc_lock);
    int need = kc_initialized && !kc_lost && !kc_idle;
    pthread_mutex_unlock(&kc_lock);
    if (need && acquire(&c) != CKR_OK) c = NULL;
    pthread_mutex_lock(&kc_lock);
    if (!kc_initialized) {
        if (c) conn_free_locked(c);
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    if (!c && kc_idle) {
        c = kc_idle;
        kc_idle = c->next;
    }
    int lost = kc_lost;
    kc_initialized = 0;
    kc_lost = 0;
    kc_generation++;
    drop_idle_locked();
    pthread_mutex_unlock(&kc_lock);
    /* The agent finalises the client when its last connection closes; the
     * explicit call ends its sessions and logins now (as in-process). */
    if (c) {
        if (!lost) {
            ksa_arg a[1] = {{0}};
            CK_RV rv;
            (void)exchange_in(&c->ch, &c->buf, KSA_FN_Finalize, a, &rv);
        }
        pthread_mutex_lock(&kc_lock);
        conn_free_locked(c);
        pthread_mutex_unlock(&kc_lock);
    }
    return CKR_OK;
}

#define CALL(fn) return kc_call(KSA_FN_##fn, a)

static CK_RV kc_C_GetInfo(CK_INFO_PTR p) { ARGS(PTR(p)); CALL(GetInfo); }
static CK_RV kc_C_GetSlotList(CK_BBOOL t, CK_SLOT_ID_PTR p, CK_ULONG_PTR n) { ARGS(UL(t), OUT(p, n)); CALL(GetSlotList); }
static CK_RV kc_C_GetSlotInfo(CK_SLOT_ID s, CK_SLOT_INFO_PTR p) { ARGS(UL(s), PTR(p)); CALL(GetSlotInfo); }
static CK_RV kc_C_GetTokenInfo(CK_SLOT_ID s, CK_TOKEN_INFO_PTR p) { ARGS(UL(s), PTR(p)); CALL(GetTokenInfo); }
static CK_RV kc_C_WaitForSlotEvent(CK_FLAGS f, CK_SLOT_ID_PTR s, CK_VOID_PTR r) { ARGS(UL(f), OUTUL(s), PTR(r)); CALL(WaitForSlotEvent); }
static CK_RV kc_C_GetMechanismList(CK_SLOT_ID s, CK_MECHANISM_TYPE_PTR p, CK_ULONG_PTR n) { ARGS(UL(s), OUT(p, n)); CALL(GetMechanismList); }
static CK_RV kc_C_GetMechanismInfo(CK_SLOT_ID s, CK_MECHANISM_TYPE t, CK_MECHANISM_INFO_PTR p) { ARGS(UL(s), UL(t), PTR(p)); CALL(GetMechanismInfo); }
static CK_RV kc_C_InitToken(CK_SLOT_ID s, CK_UTF8CHAR_PTR pin, CK_ULONG n, CK_UTF8CHAR_PTR label) { ARGS(UL(s), IN(pin, n), IN(label, label ? 32 : 0)); CALL(InitToken); }
static CK_RV kc_C_InitPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR pin, CK_ULONG n) { ARGS(UL(h), IN(pin, n)); CALL(InitPIN); }
static CK_RV kc_C_SetPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR o, CK_ULONG on, CK_UTF8CHAR_PTR nw, CK_ULONG nn) { ARGS(UL(h), IN(o, on), IN(nw, nn)); CALL(SetPIN); }
static CK_RV kc_C_OpenSession(CK_SLOT_ID s, CK_FLAGS f, CK_VOID_PTR app, CK_NOTIFY notify, CK_SESSION_HANDLE_PTR ph) {
    /* Notify callbacks are accepted and never called, as in-process. */
    (void)app; (void)notify;
    ARGS(UL(s), UL(f), OUTUL(ph)); CALL(OpenSession);
}
static CK_RV kc_C_CloseSession(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(CloseSession); }
static CK_RV kc_C_CloseAllSessions(CK_SLOT_ID s) { ARGS(UL(s)); CALL(CloseAllSessions); }
static CK_RV kc_C_GetSessionInfo(CK_SESSION_HANDLE h, CK_SESSION_INFO_PTR p) { ARGS(UL(h), PTR(p)); CALL(GetSessionInfo); }
static CK_RV kc_C_GetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG_PTR n) { ARGS(UL(h), OUT(p, n)); CALL(GetOperationState); }
static CK_RV kc_C_SetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n, CK_OBJECT_HANDLE e, CK_OBJECT_HANDLE k) { ARGS(UL(h), IN(p, n), UL(e), UL(k)); CALL(SetOperationState); }
static CK_RV kc_C_Login(CK_SESSION_HANDLE h, CK_USER_TYPE u, CK_UTF8CHAR_PTR pin, CK_ULONG n) { ARGS(UL(h), UL(u), IN(pin, n)); CALL(Login); }
static CK_RV kc_C_Logout(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(Logout); }
static CK_RV kc_C_CreateObject(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), TMPL(t, n), OUTUL(o)); CALL(CreateObject); }
static CK_RV kc_C_CopyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR no) { ARGS(UL(h), UL(o), TMPL(t, n), OUTUL(no)); CALL(CopyObject); }
static CK_RV kc_C_DestroyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o) { ARGS(UL(h), UL(o)); CALL(DestroyObject); }
static CK_RV kc_C_GetObjectSize(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ULONG_PTR n) { ARGS(UL(h), UL(o), OUTUL(n)); CALL(GetObjectSize); }
static CK_RV kc_C_GetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n) {
    /* The caller's capacities bound what the reply may write. */
    CK_ULONG small[16];
    CK_ULONG *caps = small;
    if (t && n > 16) {
        if (n > 1u << 16) return CKR_ARGUMENTS_BAD;
        caps = calloc(n, sizeof *caps);
        if (!caps) return CKR_HOST_MEMORY;
    }
    ksa_arg a[KSA_MAX_ARGS] = {UL(h), UL(o), {.ptr = t, .len = n, .plen = caps}};
    CK_RV rv = kc_call(KSA_FN_GetAttributeValue, a);
    if (caps != small) free(caps);
    return rv;
}
static CK_RV kc_C_SetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n) { ARGS(UL(h), UL(o), TMPL(t, n)); CALL(SetAttributeValue); }
static CK_RV kc_C_FindObjectsInit(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR t, CK_ULONG n) { ARGS(UL(h), TMPL(t, n)); CALL(FindObjectsInit); }
static CK_RV kc_C_FindObjects(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE_PTR p, CK_ULONG max, CK_ULONG_PTR n) { ARGS(UL(h), {.ptr = p, .ul = max, .plen = n}); CALL(FindObjects); }
static CK_RV kc_C_FindObjectsFinal(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(FindObjectsFinal); }

#define INIT_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k) { ARGS(UL(h), PTR(m), UL(k)); CALL(name); }
#define ONESHOT_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), IN(i, in), OUT(o, on)); CALL(name); }
#define UPDATE_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR i, CK_ULONG in) { ARGS(UL(h), IN(i, in)); CALL(name); }
#define FINAL_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), OUT(o, on)); CALL(name); }

INIT_FN(EncryptInit) ONESHOT_FN(Encrypt) ONESHOT_FN(EncryptUpdate) FINAL_FN(EncryptFinal)
INIT_FN(DecryptInit) ONESHOT_FN(Decrypt) ONESHOT_FN(DecryptUpdate) FINAL_FN(DecryptFinal)
static CK_RV kc_C_DigestInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m) { ARGS(UL(h), PTR(m)); CALL(DigestInit); }
ONESHOT_FN(Digest) UPDATE_FN(DigestUpdate) FINAL_FN(DigestFinal)
static CK_RV kc_C_DigestKey(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE k) { ARGS(UL(h), UL(k)); CALL(DigestKey); }
INIT_FN(SignInit) ONESHOT_FN(Sign) UPDATE_FN(SignUpdate) FINAL_FN(SignFinal)
INIT_FN(SignRecoverInit) ONESHOT_FN(SignRecover)
INIT_FN(VerifyInit) UPDATE_FN(VerifyUpdate) UPDATE_FN(VerifyFinal)
static CK_RV kc_C_Verify(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(d, dn), IN(s, sn)); CALL(Verify); }
INIT_FN(VerifyRecoverInit) ONESHOT_FN(VerifyRecover)
ONESHOT_FN(DigestEncryptUpdate) ONESHOT_FN(DecryptDigestUpdate) ONESHOT_FN(SignEncryptUpdate) ONESHOT_FN(DecryptVerifyUpdate)

static CK_RV kc_C_GenerateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), TMPL(t, n), OUTUL(k)); CALL(GenerateKey); }
static CK_RV kc_C_GenerateKeyPair(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR pt, CK_ULONG pn, CK_ATTRIBUTE_PTR st, CK_ULONG sn, CK_OBJECT_HANDLE_PTR pk, CK_OBJECT_HANDLE_PTR sk) { ARGS(UL(h), PTR(m), TMPL(pt, pn), TMPL(st, sn), OUTUL(pk), OUTUL(sk)); CALL(GenerateKeyPair); }
static CK_RV kc_C_WrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), PTR(m), UL(w), UL(k), OUT(o, on)); CALL(WrapKey); }
static CK_RV kc_C_UnwrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE u, CK_BYTE_PTR w, CK_ULONG wn, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(u), IN(w, wn), TMPL(t, tn), OUTUL(k)); CALL(UnwrapKey); }
/* 3.2 key encapsulation (issue 18, ML-KEM). */
static CK_RV kc_C_EncapsulateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR c, CK_ULONG_PTR cn, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), PTR(m), UL(k), TMPL(t, tn), OUT(c, cn), OUTUL(o)); CALL(EncapsulateKey); }
static CK_RV kc_C_DecapsulateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR c, CK_ULONG cn, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), PTR(m), UL(k), TMPL(t, tn), IN(c, cn), OUTUL(o)); CALL(DecapsulateKey); }
static CK_RV kc_C_DeriveKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE b, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(b), TMPL(t, n), OUTUL(k)); CALL(DeriveKey); }
static CK_RV kc_C_SeedRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n) { ARGS(UL(h), IN(p, n)); CALL(SeedRandom); }
static CK_RV kc_C_GenerateRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n) { ARGS(UL(h), {.ptr = p, .ul = n}); CALL(GenerateRandom); }
static CK_RV kc_C_GetFunctionStatus(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(GetFunctionStatus); }
static CK_RV kc_C_CancelFunction(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(CancelFunction); }
static CK_RV kc_C_LoginUser(CK_SESSION_HANDLE h, CK_USER_TYPE u, CK_UTF8CHAR_PTR pin, CK_ULONG pn, CK_UTF8CHAR_PTR user, CK_ULONG un) { ARGS(UL(h), UL(u), IN(pin, pn), IN(user, un)); CALL(LoginUser); }
static CK_RV kc_C_SessionCancel(CK_SESSION_HANDLE h, CK_FLAGS f) { ARGS(UL(h), UL(f)); CALL(SessionCancel); }

/* Message-based functions. The per-message parameter crosses in and out
 * (Sources/AgentProtocol/struct_params.c): the IV a generator made and the
 * tag come back into the caller's struct when the module wrote them. */
#define MSG_INIT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k) { ARGS(UL(h), PTR(m), UL(k)); CALL(name); }
#define MSG_FINAL(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(name); }
MSG_INIT(MessageEncryptInit) MSG_FINAL(MessageEncryptFinal) MSG_INIT(MessageDecryptInit) MSG_FINAL(MessageDecryptFinal)
MSG_INIT(MessageSignInit) MSG_FINAL(MessageSignFinal) MSG_INIT(MessageVerifyInit) MSG_FINAL(MessageVerifyFinal)
#define MSG_ONESHOT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR ad, CK_ULONG adn, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), IN(p, pn), IN(ad, adn), IN(i, in), OUT(o, on)); CALL(name); }
#define MSG_BEGIN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR ad, CK_ULONG adn) { ARGS(UL(h), IN(p, pn), IN(ad, adn)); CALL(name); }
#define MSG_NEXT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on, CK_FLAGS f) { ARGS(UL(h), IN(p, pn), IN(i, in), OUT(o, on), UL(f)); CALL(name); }
MSG_ONESHOT(EncryptMessage) MSG_BEGIN(EncryptMessageBegin) MSG_NEXT(EncryptMessageNext)
MSG_ONESHOT(DecryptMessage) MSG_BEGIN(DecryptMessageBegin) MSG_NEXT(DecryptMessageNext)
static CK_RV kc_C_SignMessage(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG_PTR sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), OUT(s, sn)); CALL(SignMessage); }
static CK_RV kc_C_SignMessageBegin(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn) { ARGS(UL(h), IN(p, pn)); CALL(SignMessageBegin); }
static CK_RV kc_C_SignMessageNext(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG_PTR sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), OUT(s, sn)); CALL(SignMessageNext); }
static CK_RV kc_C_VerifyMessage(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), IN(s, sn)); CALL(VerifyMessage); }
static CK_RV kc_C_VerifyMessageBegin(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn) { ARGS(UL(h), IN(p, pn)); CALL(VerifyMessageBegin); }
static CK_RV kc_C_VerifyMessageNext(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), IN(s, sn)); CALL(VerifyMessageNext); }

/* PKCS #11 3.2 (issue 18; the agent serves them with Sources/AgentProtocol/v32_params.c). The
 * signature crosses at init; the associated data as input bytes. */
static CK_RV kc_C_VerifySignatureInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), PTR(m), UL(k), IN(s, sn)); CALL(VerifySignatureInit); }
static CK_RV kc_C_VerifySignature(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn) { ARGS(UL(h), IN(d, dn)); CALL(VerifySignature); }
static CK_RV kc_C_VerifySignatureUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn) { ARGS(UL(h), IN(d, dn)); CALL(VerifySignatureUpdate); }
static CK_RV kc_C_VerifySignatureFinal(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(VerifySignatureFinal); }
static CK_RV kc_C_GetSessionValidationFlags(CK_SESSION_HANDLE h, CK_SESSION_VALIDATION_FLAGS_TYPE t, CK_FLAGS_PTR f) { ARGS(UL(h), UL(t), OUTUL(f)); CALL(GetSessionValidationFlags); }
static CK_RV kc_C_WrapKeyAuthenticated(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, CK_BYTE_PTR ad, CK_ULONG adn, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), PTR(m), UL(w), UL(k), IN(ad, adn), OUT(o, on)); CALL(WrapKeyAuthenticated); }
static CK_RV kc_C_UnwrapKeyAuthenticated(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE u, CK_BYTE_PTR w, CK_ULONG wn, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR ad, CK_ULONG adn, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(u), IN(w, wn), TMPL(t, tn), IN(ad, adn), OUTUL(k)); CALL(UnwrapKeyAuthenticated); }

/* The client tables, selected by function_table.c in agent mode. */
#include "function_lists.h"

static const CK_FUNCTION_LIST kc_functions_2_40 = {
    .version = {2, 40},
    KS_FUNCTIONS_2_40(kc)
};

static const CK_FUNCTION_LIST_3_0 kc_functions_3_0 = {
    .version = {3, 0},
    KS_FUNCTIONS_2_40(kc)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(kc)
};

/* PKCS #11 3.2 (issue 18): C_GetInfo reports 3.2 only through this table; the 3.2 entries not
 * served yet are the shared not-supported ones (functions_3_2.c), which need no round trip. */
static CK_RV kc_C_GetInfo_3_2(CK_INFO_PTR p)
{
    CK_RV rv = kc_C_GetInfo(p);
    if (rv == CKR_OK)
        p->cryptokiVersion = (CK_VERSION){3, 2};
    return rv;
}

static const CK_FUNCTION_LIST_3_2 kc_functions_3_2 = {
    .version = {3, 2},
    KS_FUNCTIONS_2_40_GETINFO(kc, kc_C_GetInfo_3_2)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(kc)
    KS_FUNCTIONS_3_2_EXTRA(kc)
};

const CK_FUNCTION_LIST *kc_function_list_2_40(void) { return &kc_functions_2_40; }
const CK_FUNCTION_LIST_3_0 *kc_function_list_3_0(void) { return &kc_functions_3_0; }
const CK_FUNCTION_LIST_3_2 *kc_function_list_3_2(void) { return &kc_functions_3_2; }
