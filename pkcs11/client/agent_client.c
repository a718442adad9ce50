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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "../abi/include/keyshare_abi.h"
#include "../../Sources/AgentProtocol/include/agent_protocol.h"
#include "keyshare_client.h"
#include "local_verify.h"

extern char **environ;

struct kc_conn {
    ksa_chan ch;                         /* the socket, the shared region (shm.c), the polling (spin.c) */
    unsigned generation;
    int timeout_ms;                      /* the socket's SO_RCVTIMEO now (-1: unknown) */
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
/* The agent's epoch page (Sources/AgentProtocol/epoch.c), read-only; NULL
 * without one. Replaced when a new agent-side client is made (another agent
 * after a restart gives another page); a page of this process's earlier
 * client stays mapped (a thread may still read it), one page per agent. */
static const volatile uint64_t *kc_epoch;
static dev_t kc_epoch_dev;
static ino_t kc_epoch_ino;

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
    c->timeout_ms = -1;
    c->all_next = kc_all;
    if (kc_all) kc_all->all_prev = c;
    kc_all = c;
    return c;
}

static void conn_free_locked(struct kc_conn *c) {
    if (c->all_prev) c->all_prev->all_next = c->all_next; else kc_all = c->all_next;
    if (c->all_next) c->all_next->all_prev = c->all_prev;
    close(c->ch.fd);
    ksa_chan_close_shm(&c->ch);
    ksa_buf_free(&c->buf);
    free(c);
}

/* ---- mode ----------------------------------------------------------------- */

/* Every variable is read with secure_getenv: nothing in a setuid or setgid
 * host (sudo or su loading the module through pam_p11), whose environment is
 * its invoker's. There the module uses the agent of its euid and that
 * user's store, logs nowhere, and starts no agent (connect.c). */

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
        const char *inproc = secure_getenv("KEYSHARE_IN_PROCESS");
        mode = !(inproc && strcmp(inproc, "1") == 0);
    }
    return mode;
}

/* No store and no agent (docs/agent.md, "No store, no agent"): the slot list of an empty store
 * comes from the engine's in-process tables, the only time agent mode loads the engine
 * (pkcs11/client/engine.c). NULL when it cannot be loaded: the calls then go to the agent path. */
static const CK_FUNCTION_LIST_3_2 *lazy_engine(void) {
    const struct ks_engine_pkcs11 *e = ks_engine();
    CK_INTERFACE_PTR i = NULL;
    CK_VERSION v = {3, 2};
    if (e == NULL || e->get_interface((CK_UTF8CHAR_PTR)"PKCS 11", &v, &i, 0) != CKR_OK || i == NULL) return NULL;
    return (const CK_FUNCTION_LIST_3_2 *)i->pFunctionList;
}

/* ---- connecting ------------------------------------------------------------ */

/* KEYSHARE_DEBUG as the in-process log reads it (Sources/PKCS11/Log.swift). */
static int debug_log_wanted(void) {
    const char *v = secure_getenv("KEYSHARE_DEBUG");
    return v && *v && strcmp(v, "0") != 0;
}

/* The descriptor the in-process module would log to: KEYSHARE_LOG opened by
 * this process (its cwd, its permissions), else stderr. */
static int debug_log_fd(int *opened) {
    const char *path = secure_getenv("KEYSHARE_LOG");
    *opened = 0;
    if (path && *path) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) { *opened = 1; return fd; }
    }
    return STDERR_FILENO;
}

/* Why the module refused or failed, where a person looks (docs/agent.md,
 * "Refusals"): one line in the debug log (KEYSHARE_DEBUG: KEYSHARE_LOG, else
 * stderr). Never a PIN or value: the lines name paths, owners and modes. */

void ks_client_note(const char *fmt, ...) {
    if (!debug_log_wanted()) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    char out[1100];
    int m = snprintf(out, sizeof out, "keyshare-pkcs11[%d]: %.*s\n", (int)getpid(), n, line);
    int opened, fd = debug_log_fd(&opened);
    if (m > 0) (void)!write(fd, out, (size_t)(m < (int)sizeof out ? m : (int)sizeof out - 1));
    if (opened) close(fd);
}

/* The program that serves as agent: $KEYSHARE_AGENT_PROGRAM, else `keyshare`
 * next to this module or in ../bin, else the usual prefixes. */
static int agent_program(char *out, size_t n) {
    const char *e = secure_getenv("KEYSHARE_AGENT_PROGRAM");
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

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int no_start(void) {
    const char *v = secure_getenv("KEYSHARE_AGENT_NO_START");
    return v && strcmp(v, "1") == 0;
}

/* Whether the store this process names exists (its keychain.db). stat, not
 * access(): access() checks with the real uid, so a setuid-root host (sudo,
 * su with pam_p11) run by a user who cannot search root's home took root's
 * missing store for one that exists (EACCES) and failed C_Initialize with
 * CKR_DEVICE_ERROR instead of showing no token. */
static int store_exists(void) {
    char store[4096], db[4200];
    if (ksa_store_home(store, sizeof store)) return 1;
    snprintf(db, sizeof db, "%s/keychain.db", store);
    struct stat st;
    return stat(db, &st) == 0 || errno != ENOENT;
}

/* Connects (starting the agent when allowed). fd, -1 no agent and none
 * started, -2 refused or failed (said in the debug log). */
static int connect_agent(int allow_start, pid_t *peer) {
    char prog[600] = "";
    if (allow_start && agent_program(prog, sizeof prog) != 0) prog[0] = '\0';
    char why[1024];
    int fd = ksa_connect_or_start(prog, allow_start && !no_start(), ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CONNECT_TIMEOUT_MS) < KSA_CONNECT_TIMEOUT_MS ? ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CONNECT_TIMEOUT_MS) : KSA_CONNECT_TIMEOUT_MS,
                                  peer, why, sizeof why);
    if (fd == -1 && allow_start && no_start()) {
        ks_client_note("the keyshare agent is not running and KEYSHARE_AGENT_NO_START=1 forbids starting it");
        return -2;
    }
    if (fd < -1) ks_client_note("%s", why);
    if (fd >= 0) {
        int shared;
        char base[512];
        if (!secure_getenv("KEYSHARE_AGENT_SOCKET") && ksa_agent_base(base, sizeof base, &shared) == 0 && shared)
            ks_client_note("XDG_RUNTIME_DIR is unset: using the agent directory %s (checked: ours, mode 0700)", base);
    }
    return fd < -1 ? -2 : fd;
}

/* An agent of an older protocol answers our hello with its version: ask it
 * to leave (docs/agent.md, "Upgrades"). Its pid is the listener's
 * (SO_PEERCRED at connect), of our uid (checked), and must be a `keyshare
 * agent` by its command line. SIGTERM makes a keyshare agent retire: it stops
 * listening at once and exits when its last client goes (an agent of 0.3.0
 * and before simply exits). Then the caller starts a new one. */
static int retire_old_agent(pid_t pid, unsigned version) {
    /* The process as a pidfd: the signal goes to the process whose command
     * line was read, never to another that took its pid meanwhile. A kernel
     * without pidfds (before 5.3) falls back to the pid. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0 && errno != ENOSYS) return -1;   /* gone already, or not ours to open */
    char path[64], cmd[256];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { if (pfd >= 0) close(pfd); return -1; }
    ssize_t n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    /* Still alive after the read: the /proc entry read was the pidfd's process
     * (a pid is reused only once its process is gone). */
#define ALIVE() (pfd >= 0 ? syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) == 0 : kill(pid, 0) == 0)
    if (n <= 0 || !ALIVE()) { if (pfd >= 0) close(pfd); return -1; }
    cmd[n] = '\0';
    const char *arg0 = cmd, *slash = strrchr(arg0, '/');
    const char *arg1 = cmd + strlen(cmd) + 1;
    if (strcmp(slash ? slash + 1 : arg0, "keyshare") != 0 || arg1 >= cmd + n || strcmp(arg1, "agent") != 0) {
        ks_client_note("the agent at pid %d speaks protocol %u, not %d, and is not a `keyshare agent`: not touching it",
                    (int)pid, version, KSA_VERSION);
        if (pfd >= 0) close(pfd);
        return -1;
    }
    ks_client_note("the keyshare agent pid %d speaks protocol %u, this module %d: asking it to retire", (int)pid, version, KSA_VERSION);
    int sent = pfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) : kill(pid, SIGTERM);
    if (sent != 0) { if (pfd >= 0) close(pfd); return -1; }
    /* Its socket goes at once (a retiring agent unlinks it); wait for that, bounded. */
    char sock[128];
    int rc = -1;
    if (ksa_socket_path(sock, sizeof sock) == 0) {
        for (int i = 0; i < 300; i++) {
            struct stat st;
            if (!ALIVE() || lstat(sock, &st) != 0) { rc = 0; break; }
            sleep_ms(10);
        }
    }
#undef ALIVE
    if (pfd >= 0) close(pfd);
    return rc;
}

/* Issue 27 ("Unlocks that are scoped"): whether this process authenticates a
 * person with the token, i.e. has libpam (a PAM stack: login, sshd, sudo,
 * pamtester, a screen locker...) or libcryptsetup (cryptsetup,
 * systemd-cryptsetup) loaded, linked or dlopen'ed. Told to the agent in the
 * hello (KSA_HELLO_AUTHENTICATOR): no `keyshare unlock` reaches such a
 * client, so pam_p11 and a LUKS token ask for the PIN as they should. */
static int authenticates_a_person(void) {
    if (dlsym(RTLD_DEFAULT, "pam_start") || dlsym(RTLD_DEFAULT, "crypt_init")) return 1;
    static const char *const libs[] = {"libpam.so.0", "libcryptsetup.so.12"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);   /* loaded RTLD_LOCAL too; never loads it */
        if (h) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

/* The hello: a new client (token all zero, with the access groups this
 * process asks for) or another connection of this one. *shm: the
 * connection's shared region when the agent gave one (shm.c). Returns 0, or
 * -1 broken (EOF: an agent just exiting), -2 refused (policy, unknown token:
 * CKR_TOKEN_NOT_PRESENT), -3 the store cannot be opened safely, -4 another
 * protocol version (*version), -5 no answer within the timeout (an agent
 * stuck or flooded: not retried, the caller's wait is that one timeout). */
static int hello(int fd, int attach, ksa_shm **shm, unsigned *version, const volatile uint64_t **epoch) {
    *shm = NULL;
    ksa_buf b;
    ksa_buf_init(&b);
    /* The debug log is the client's (docs/agent.md, "Debug log"): the agent
     * writes this client's call lines to the descriptor sent after the hello. */
    int log = !attach && debug_log_wanted();
    int want_shm = ksa_shm_wanted();
    static const uint8_t zero[KSA_TOKEN_LEN];
    /* The epoch page, for a new client that may verify here (local_verify.c). */
    int want_epoch = !attach && epoch && kv_wanted();
    uint16_t flags = (uint16_t)((log ? KSA_HELLO_LOG : 0) | (want_shm ? KSA_HELLO_SHM : 0) |
                                (want_epoch ? KSA_HELLO_EPOCH : 0) |
                                (!attach && authenticates_a_person() ? KSA_HELLO_AUTHENTICATOR : 0));
    if (attach) {
        ksa_hello_build(&b, flags, kc_token, NULL);
    } else {
        /* Where a person can be asked (the agent's prompt, issue 27): this
         * process's display variables and terminal, never the agent starter's. */
        char tty[256];
        const char *t = NULL;
        for (int fd = 0; fd <= 2 && !t; fd++)
            if (isatty(fd) && ttyname_r(fd, tty, sizeof tty) == 0) t = tty;
        /* A setuid or setgid host (AT_SECURE) runs with its invoker's
         * environment: DISPLAY, XAUTHORITY and the rest are the invoker's
         * choice, not where root's agent should show a prompt. None sent. */
        char *const *display_env = getauxval(AT_SECURE) ? NULL : environ;
        ksa_hello_build_full(&b, flags, zero, secure_getenv("KEYSHARE_ACCESS_GROUPS"), display_env, t);
    }
    /* A hello that gets no answer (an agent stuck or flooded) ends, bounded. */
    ksa_set_timeout(fd, ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_HELLO_TIMEOUT_MS) < KSA_HELLO_TIMEOUT_MS ? ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_HELLO_TIMEOUT_MS) : KSA_HELLO_TIMEOUT_MS);
    int rc = -1, sent = !b.failed && ksa_write_frame(fd, b.data, b.len) == 0, log_sent = 1;
    /* The log descriptor follows the hello. An agent that refuses the hello
     * (another protocol, a refusal) answers and closes at once, and this send
     * can then fail (EPIPE) while its answer waits to be read: read it all the
     * same, so the refusal or the version is seen (an older agent is retired,
     * issue 26), not taken for an agent that went away. */
    if (sent && log) {
        int opened, lfd = debug_log_fd(&opened);
        log_sent = ksa_send_fd(fd, lfd) == 0;
        if (opened) close(lfd);
    }
    if (sent && ksa_read_frame(fd, &b) == 0) {
        ksa_hello_reply h;
        int p = ksa_hello_reply_parse(b.data, b.len, &h);
        if (p == -2) {
            *version = h.version;
            rc = -4;
        } else if (p == 0 && h.status == 0 && !log_sent) {
            rc = -1;
        } else if (p == 0 && h.status == 0) {
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
            /* The epoch page's descriptor, when the agent says one follows. */
            if (rc == 0 && want_epoch && strcmp(h.reason, KSA_HELLO_EPOCH_REASON) == 0) {
                int efd = ksa_recv_fd(fd);
                if (efd == -2) rc = -1;
                if (efd >= 0) {
                    struct stat st;
                    if (kc_epoch && fstat(efd, &st) == 0 && st.st_dev == kc_epoch_dev && st.st_ino == kc_epoch_ino) {
                        *epoch = kc_epoch;   /* the same agent's page, mapped already */
                    } else if ((*epoch = ksa_epoch_map(efd)) != NULL && fstat(efd, &st) == 0) {
                        kc_epoch_dev = st.st_dev;
                        kc_epoch_ino = st.st_ino;
                    }
                    close(efd);
                }
            }
            if (rc == 0 && !attach) memcpy(kc_token, h.token, KSA_TOKEN_LEN);
        } else if (p == 0) {
            ks_client_note("the keyshare agent refused this process: %s", h.reason[0] ? h.reason : "no reason given");
            rc = h.status == KSA_HELLO_STORE_UNSAFE ? -3 : -2;
        }
    } else if (sent && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)) {
        ks_client_note("the keyshare agent did not answer the hello in time");
        rc = -5;
    }
    ksa_buf_free(&b);
    return rc;
}

/* A call's reply timeout (KEYSHARE_AGENT_TIMEOUT seconds, default 120): a
 * stuck agent ends the call with CKR_DEVICE_ERROR, never a hang. A blocking
 * C_WaitForSlotEvent waits as long as it must (0: none). */
static int call_timeout_ms(uint32_t fn, ksa_arg *args) {
    if (fn == KSA_FN_WaitForSlotEvent && !(args[0].ul & CKF_DONT_BLOCK)) return 0;
    return ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CALL_TIMEOUT_MS);
}

/* One call on one connection, in the connection's buffer `b` (kept, so a
 * call makes no allocation once it has grown; wiped after each call: a
 * request may hold a PIN). -1: the connection is broken; -2: no reply in time. */
static int round_trip(struct kc_conn *c, uint32_t id, int timeout);
static void frame_done(struct kc_conn *c);

static int exchange_in(struct kc_conn *c, uint32_t fn, ksa_arg *args, CK_RV *rv) {
    ksa_buf *bp = &c->buf;
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
    int rc = round_trip(c, id, call_timeout_ms(fn, args));
    if (rc == 0) {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);   /* the id, checked by round_trip */
        *rv = ksa_apply_reply(fn, args, &r);
    }
    frame_done(c);
    return rc;
}

/* The request frame the caller built in c->buf (u32 id first), on c; the
 * reply, checked to carry the same id, replaces it in c->buf (the caller
 * reads it, then resets the buffer: it may hold a PIN). 0, -1 broken, -2 no
 * reply within `timeout` ms (0: wait as long as it takes). */
static int round_trip(struct kc_conn *c, uint32_t id, int timeout) {
    ksa_chan *ch = &c->ch;
    ksa_buf *bp = &c->buf;
    if (bp->failed) return -1;
    if (timeout != c->timeout_ms) {
        ksa_set_timeout(ch->fd, timeout);
        c->timeout_ms = timeout;
    }
    int rc = -1;
    errno = 0;
    uint64_t began = ksa_mono_ns();
    /* Through the shared region when the agent polls for it, else the
     * socket; the reply likewise, polled for a little before blocking
     * (shm.c, spin.c: bounded, adaptive). */
    ksa_spin_active(1);
    int sent = ksa_chan_send(ch, bp->data, bp->len) == 0;
    int got = sent && ksa_chan_recv(ch, bp) == 0;
    ksa_spin_active(-1);
    if (got) {
        ksa_spin_done(&ch->spin);
        ksa_rd r = {bp->data, bp->len, 0};
        if (ksa_get_u32(&r) == id && !r.failed) rc = 0;
    } else if (timeout > 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT) &&
               ksa_mono_ns() - began >= (uint64_t)timeout * 900000u) {
        rc = -2;   /* no reply within the timeout (not a broken connection: the agent may still be busy) */
    }
    return rc;
}

static int exchange_frame(struct kc_conn *c, uint32_t id) {
    return round_trip(c, id, ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CALL_TIMEOUT_MS));
}

/* After a frame: the buffer wiped; an idle connection keeps a small one. */
static void frame_done(struct kc_conn *c) {
    ksa_buf_reset(&c->buf);
    if (c->buf.cap > (1u << 16)) ksa_buf_free(&c->buf);
}

static void drop_idle_locked(void) {
    while (kc_idle) {
        struct kc_conn *c = kc_idle;
        kc_idle = c->next;
        conn_free_locked(c);
    }
}

/* Lazy: C_Initialize found no store and no agent (docs/agent.md, "No store,
 * no agent"): a module load that only lists slots creates nothing and starts
 * nothing. Such calls are answered by the in-process module over an empty,
 * in-memory view of a store (ks_lazy_*, Support.swift); the first call that
 * needs a store (C_InitToken, C_OpenSession, ...) starts the agent. */
static int kc_lazy;

/* A new client at the agent: connect (starting it), hello, C_Initialize.
 * Called with kc_lock held. A hello that meets an agent just exiting (idle:
 * EOF) is retried, one that meets an agent of another protocol retires it
 * (when it is older) and starts ours; one that gets no answer in time ends
 * the call at once (CKR_DEVICE_ERROR): three attempts would triple the wait. */
static CK_RV start_client_locked(struct kc_conn **out, int allow_start) {
    int retired = 0;
    for (int attempt = 0; attempt < 3 + retired; attempt++) {
        pid_t peer = 0;
        int fd = connect_agent(allow_start, &peer);
        if (fd == -1) return CKR_DEVICE_ERROR;
        if (fd < 0) return CKR_DEVICE_ERROR;
        ksa_shm *shm;
        unsigned version = 0;
        const volatile uint64_t *epoch = NULL;
        int h = hello(fd, 0, &shm, &version, &epoch);
        if (h == -2) { close(fd); return CKR_TOKEN_NOT_PRESENT; }
        if (h == -3 || h == -5) { close(fd); ksa_shm_unmap(shm); return CKR_DEVICE_ERROR; }
        if (h == -4) {
            close(fd);
            /* Retired: this attempt does not count; the next one starts ours. */
            if (version < KSA_VERSION && !retired && retire_old_agent(peer, version) == 0) {
                retired = 1;
                sleep_ms(50);
                continue;
            }
            ks_client_note("the keyshare agent speaks protocol %u and this module %d: restart it (keyshare agent restart)",
                        version, KSA_VERSION);
            return CKR_DEVICE_ERROR;
        }
        if (h != 0) { close(fd); ksa_shm_unmap(shm); sleep_ms(100); continue; }
        struct kc_conn *c = conn_new_locked(fd, shm, kc_generation);
        if (!c) { close(fd); ksa_shm_unmap(shm); return CKR_HOST_MEMORY; }
        ksa_arg a[1] = {{.ul = 0}};
        CK_RV rv;
        int x = exchange_in(c, KSA_FN_Initialize, a, &rv);
        if (x == -2) {
            ks_client_note("the keyshare agent did not answer C_Initialize in time");
            conn_free_locked(c);
            return CKR_DEVICE_ERROR;
        }
        if (x != 0) { conn_free_locked(c); sleep_ms(20); continue; }
        if (rv != CKR_OK) { conn_free_locked(c); return rv; }
        __atomic_store_n(&kc_epoch, epoch, __ATOMIC_RELEASE);
        *out = c;
        return CKR_OK;
    }
    ks_client_note("cannot reach the keyshare agent after 3 attempts");
    return CKR_DEVICE_ERROR;
}

/* A connection for one call. */
static CK_RV acquire(struct kc_conn **out) {
    pthread_mutex_lock(&kc_lock);
    if (!kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    if (kc_lost || kc_lazy) {
        /* The agent died, or there was none yet: a fresh client at an agent (started if need be). */
        struct kc_conn *c = NULL;
        CK_RV rv = start_client_locked(&c, 1);
        if (rv != CKR_OK) {
            pthread_mutex_unlock(&kc_lock);
            return kc_lazy ? rv : CKR_DEVICE_REMOVED;
        }
        if (kc_lazy && lazy_engine()) (void)lazy_engine()->C_Finalize(NULL);
        kc_lost = 0;
        kc_lazy = 0;
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
    pid_t peer = 0;
    int fd = connect_agent(0, &peer);
    ksa_shm *shm = NULL;
    unsigned version = 0;
    if (fd >= 0 && hello(fd, 1, &shm, &version, NULL) == 0) {
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

/* broken: 1 the connection broke (the agent is gone: start over at the next
 * call), 2 it timed out (only this connection is dropped: the agent may still
 * be busy with the call). */
static void release(struct kc_conn *c, int broken) {
    pthread_mutex_lock(&kc_lock);
    if (broken == 1) {
        if (c->generation == kc_generation && kc_initialized) {
            kc_lost = 1;
            kc_generation++;
            drop_idle_locked();
        }
        conn_free_locked(c);
    } else if (broken || c->generation != kc_generation || !kc_initialized) {
        conn_free_locked(c);
    } else {
        c->next = kc_idle;
        kc_idle = c;
    }
    pthread_mutex_unlock(&kc_lock);
}

/* The calls a lazy client (no store, no agent) answers itself. */
static int lazy_call(uint32_t fn) {
    switch (fn) {
    case KSA_FN_GetInfo: case KSA_FN_GetSlotList: case KSA_FN_GetSlotInfo: case KSA_FN_GetTokenInfo:
    case KSA_FN_GetMechanismList: case KSA_FN_GetMechanismInfo:
        return 1;
    default:
        return 0;
    }
}

/* ---- pairs: an init and its one-shot call in one round trip ------------------
 *
 * Issue 30: C_SignInit + C_Sign was two round trips, each a context switch
 * each way once several threads call at once (the agent's CPU went to
 * switching, not signing). An init whose encoded request (session,
 * mechanism with its parameter, key) is byte for byte the last one that
 * succeeded on that session is answered CKR_OK here and travels with the
 * call that follows, in one frame (KSA_FN_Pair, serve.c): the agent runs
 * the init and, when it succeeds, the call. Any other call first sends the
 * pending init alone (that session's; every session's for a call that can
 * change what an init finds: login, logout, object changes, closing), and
 * such calls also forget which inits succeeded, so the next init goes alone
 * and its errors come from C_XInit as before. What is left: an init that
 * succeeded with the same bytes and now fails (a key another process
 * deleted, an unlock that expired in between) reports its error from the
 * call, as when that happens right after the init returned; documented in
 * docs/agent.md ("Round trips: init and call in one frame").
 * KEYSHARE_AGENT_PAIR=0 turns it off. */
#define KC_PAIR_SLOTS 256u
#define KC_PAIR_MAX 512u   /* the largest encoded init kept (an RSA-PSS or GCM init is < 100 bytes) */
#define KC_TICKETS 2       /* verify tickets per slot (local_verify.c) */
#define KC_TICKET_MAX 128u /* the largest encoded C_VerifyInit with a ticket (an RSA-PSS one is < 100 bytes) */
struct kc_pair {
    pthread_mutex_t lock;
    CK_SESSION_HANDLE h;
    int known;     /* init[0..n) succeeded last on session h */
    int pending;   /* that init was answered here and waits for its call */
    int active;    /* an operation may still be active on session h: the next init goes alone
                      (the agent answers CKR_OPERATION_ACTIVE if it is); cleared only by a
                      one-shot call seen to end the operation */
    uint32_t n;
    uint8_t init[KC_PAIR_MAX];   /* u32 fn, then the arguments, as ksa_encode_request wrote them */
    /* Issue 30, verify in the client (docs/agent.md, "Verify in the client"). With
     * the agent's epoch page, `known` holds only while the page reads `epoch`,
     * the value read before that init was sent: anything the agent did since
     * that may change an init's answer (another process destroying the key,
     * setting CKA_VERIFY false, a logout...) sends the next init alone, so its
     * error comes from C_XInit. */
    const volatile uint64_t *page;
    uint64_t epoch;
    /* Tickets: C_VerifyInit requests the agent accepted with a mechanism
     * local_verify.c runs, each with the public key the agent verifies with
     * (the object's CKA_PUBLIC_KEY_INFO: a public, non-private key of a
     * keyshare token), valid while the page reads the epoch read before that
     * init was sent. Kept apart from the one init above, so a session that
     * alternates C_SignInit and C_VerifyInit keeps its verify ticket. `local`:
     * the pending init was answered with tickets[cur], and C_Verify may run
     * here (else it goes to the agent as a pair). */
    struct kc_ticket {
        CK_SESSION_HANDLE h;   /* 0: none */
        uint32_t n;
        uint8_t init[KC_TICKET_MAX];
        const volatile uint64_t *page;
        uint64_t epoch;
        void *key;
        void *ctx;             /* key's verify context for mech, lent to one C_Verify at a time */
        kv_mech mech;
        uint32_t siglen;
    } tickets[KC_TICKETS];
    int local, cur;
};

/* Drops ticket t (called with its slot's lock held). */
static void ticket_drop_locked(struct kc_ticket *t) {
    kv_ctx_free(t->ctx);
    kv_key_free(t->key);
    t->ctx = t->key = NULL;
    t->h = 0;
}

static void tickets_drop_locked(struct kc_pair *p) {
    for (int i = 0; i < KC_TICKETS; i++) ticket_drop_locked(&p->tickets[i]);
    p->local = 0;
}
static struct kc_pair kc_pairs[KC_PAIR_SLOTS];
static int kc_pending;    /* pending inits, all slots (atomic) */
static int kc_pairs_off;  /* KEYSHARE_AGENT_PAIR=0, or an agent without pairs (atomic) */

/* C_Initialize, C_Finalize: nothing pending, nothing known (the sessions are gone). */
static void kc_pairs_forget(void) {
    for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
        pthread_mutex_lock(&kc_pairs[i].lock);
        kc_pairs[i].pending = kc_pairs[i].known = kc_pairs[i].active = kc_pairs[i].local = 0;
        kc_pairs[i].h = 0;
        tickets_drop_locked(&kc_pairs[i]);
        pthread_mutex_unlock(&kc_pairs[i].lock);
    }
    __atomic_store_n(&kc_pending, 0, __ATOMIC_RELEASE);
    const char *v = getenv("KEYSHARE_AGENT_PAIR");
    __atomic_store_n(&kc_pairs_off, v && strcmp(v, "0") == 0, __ATOMIC_RELEASE);
}

static void kc_pairs_init(void) {
    for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
        pthread_mutex_init(&kc_pairs[i].lock, NULL);
        kc_pairs[i].h = 0;
        kc_pairs[i].known = kc_pairs[i].pending = kc_pairs[i].active = kc_pairs[i].local = 0;
        kc_pairs[i].n = 0;
        kc_pairs[i].page = NULL;
        /* A fork child's tickets are dropped, not freed (a parent thread may have been using them). */
        memset(kc_pairs[i].tickets, 0, sizeof kc_pairs[i].tickets);
    }
    __atomic_store_n(&kc_pending, 0, __ATOMIC_RELEASE);
    const char *v = getenv("KEYSHARE_AGENT_PAIR");
    __atomic_store_n(&kc_pairs_off, v && strcmp(v, "0") == 0, __ATOMIC_RELEASE);
}

static struct kc_pair *pair_slot(CK_SESSION_HANDLE h) {
    uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull;
    return &kc_pairs[(x >> 56) % KC_PAIR_SLOTS];
}

static int pair_init_fn(uint32_t fn) {
    return fn == KSA_FN_SignInit || fn == KSA_FN_VerifyInit || fn == KSA_FN_EncryptInit || fn == KSA_FN_DecryptInit;
}
static int pair_call_fn(uint32_t fn) {
    return fn == KSA_FN_Sign || fn == KSA_FN_Verify || fn == KSA_FN_Encrypt || fn == KSA_FN_Decrypt;
}

/* The functions whose first argument is not a session, and those that can
 * change what an init finds anywhere in the process: they send every pending
 * init first and forget the successful ones. */
static int pair_global_fn(uint32_t fn) {
    switch (fn) {
    case KSA_FN_Initialize: case KSA_FN_Finalize: case KSA_FN_GetInfo: case KSA_FN_GetSlotList:
    case KSA_FN_GetSlotInfo: case KSA_FN_GetTokenInfo: case KSA_FN_GetMechanismList: case KSA_FN_GetMechanismInfo:
    case KSA_FN_InitToken: case KSA_FN_OpenSession: case KSA_FN_CloseAllSessions: case KSA_FN_WaitForSlotEvent:
    case KSA_FN_Login: case KSA_FN_Logout: case KSA_FN_LoginUser: case KSA_FN_CloseSession: case KSA_FN_DestroyObject:
    case KSA_FN_SetAttributeValue: case KSA_FN_CopyObject: case KSA_FN_InitPIN: case KSA_FN_SetPIN:
    case KSA_FN_SessionCancel: case KSA_FN_SetOperationState:
        return 1;
    default:
        return 0;
    }
}

static int exchange_frame(struct kc_conn *c, uint32_t id);
static void frame_done(struct kc_conn *c);

/* Sends one pending init alone (its reply's rv only: an init has no
 * outputs). Called with the slot's lock held. A failure is remembered as
 * "not known"; the call that follows then meets CKR_OPERATION_NOT_INITIALIZED. */
static void pair_flush_locked(struct kc_pair *p) {
    if (!p->pending) return;
    p->pending = 0;
    p->local = 0;
    __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    struct kc_conn *c;
    if (acquire(&c) != CKR_OK) { p->known = 0; return; }
    ksa_buf *bp = &c->buf;
    ksa_buf_reset(bp);
    uint32_t id = __atomic_add_fetch(&kc_next_id, 1, __ATOMIC_RELAXED);
    ksa_put_u32(bp, id);
    ksa_put_raw(bp, p->init, p->n);
    int x = exchange_frame(c, id);
    CK_RV rv = CKR_DEVICE_ERROR;
    if (x == 0) {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);
        rv = ksa_get_u64(&r);
        if (r.failed) rv = CKR_DEVICE_ERROR;
    }
    frame_done(c);
    release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (rv != CKR_OK) p->known = 0;
}

/* Before a call that is not a pair's: session h's pending init goes first
 * (every session's, and every "known" forgotten, for a global function). */
static void pair_flush_for(uint32_t fn, ksa_arg *args) {
    if (pair_global_fn(fn)) {
        for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
            struct kc_pair *p = &kc_pairs[i];
            pthread_mutex_lock(&p->lock);
            pair_flush_locked(p);
            p->known = 0;
            /* A call that can change what an init finds: no ticket outlives it (C_Login,
             * C_Logout, C_CloseSession change this client only, and the agent's epoch
             * does not move for them: epoch.c). */
            if (!ksa_epoch_fn_reads(fn)) tickets_drop_locked(p);
            pthread_mutex_unlock(&p->lock);
        }
        return;
    }
    if (!__atomic_load_n(&kc_pending, __ATOMIC_ACQUIRE)) return;
    struct kc_pair *p = pair_slot(args[0].ul);
    pthread_mutex_lock(&p->lock);
    if (p->h == args[0].ul) pair_flush_locked(p);
    pthread_mutex_unlock(&p->lock);
}

/* C_XInit: answered here (1, *rv = CKR_OK) when the same init succeeded last
 * on this session; else 0 (the caller sends it, then pair_learn). */
/* Whether slot p's "known" init still holds by the epoch page (called with its lock held). */
static int pair_current_locked(const struct kc_pair *p, const volatile uint64_t *page, uint64_t now) {
    if (!p->page) return 1;   /* learnt without a page: the rules before it (docs/agent.md) */
    return p->page == page && now != 0 && now == p->epoch;
}

static int pair_try_init(uint32_t fn, ksa_arg *args, uint8_t *enc, uint32_t *encn,
                         const volatile uint64_t **page_out, uint64_t *epoch_out) {
    /* Read before anything is sent: a change after this read moves the page past it. */
    const volatile uint64_t *page = __atomic_load_n(&kc_epoch, __ATOMIC_ACQUIRE);
    uint64_t now = ksa_epoch_read(page);
    *page_out = page;
    *epoch_out = now;
    ksa_buf b;
    ksa_buf_init(&b);
    ksa_put_u32(&b, fn);
    int usable = ksa_encode_request(fn, args, &b) == CKR_OK && !b.failed && b.len <= KC_PAIR_MAX;
    *encn = 0;
    if (usable) {
        memcpy(enc, b.data, b.len);
        *encn = (uint32_t)b.len;
    }
    ksa_buf_free(&b);
    CK_SESSION_HANDLE h = args[0].ul;
    struct kc_pair *p = pair_slot(h);
    int answered = 0;
    pthread_mutex_lock(&p->lock);
    /* A pending init of this session (a second C_XInit: it goes alone, and
     * the agent answers CKR_OPERATION_ACTIVE) or of another in this slot goes first. */
    int again = p->pending && p->h == h;
    pair_flush_locked(p);
    /* A ticket for this very init, still current: it becomes the learnt init again. */
    /* Only while this slot follows session h (p->h) and no operation of h may
     * be active: otherwise a second init could be answered here that the
     * agent refuses with CKR_OPERATION_ACTIVE. */
    int t = -1;
    if (!again && usable && fn == KSA_FN_VerifyInit && page && now && p->h == h && !p->active) {
        for (int i = 0; i < KC_TICKETS && t < 0; i++) {
            struct kc_ticket *k = &p->tickets[i];
            if (k->h == h && k->key && k->n == *encn && memcmp(k->init, enc, *encn) == 0 && k->page == page &&
                k->epoch == now)
                t = i;
        }
        if (t >= 0) {
            p->known = 1;
            p->n = *encn;
            memcpy(p->init, enc, *encn);
            p->page = page;
            p->epoch = now;
        }
    }
    if (!again && usable && p->known && !p->active && p->h == h && p->n == *encn && memcmp(p->init, enc, *encn) == 0) {
        if (pair_current_locked(p, page, now)) {
            p->pending = 1;
            p->local = t >= 0;
            p->cur = t;
            __atomic_add_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
            answered = 1;
        } else {
            p->known = 0;   /* the agent may answer otherwise now: this init goes alone */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return answered;
}

/* After an init sent alone: remember it when it succeeded. */
static void pair_learn(CK_SESSION_HANDLE h, const uint8_t *enc, uint32_t n, CK_RV rv,
                       const volatile uint64_t *page, uint64_t epoch) {
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (!p->pending) {
        if (rv == CKR_OK && n > 0 && (!page || epoch != 0)) {
            p->h = h;
            p->known = 1;
            p->active = 1;
            p->n = n;
            memcpy(p->init, enc, n);
            p->page = page;
            p->epoch = epoch;
        } else if (p->h == h) {
            p->known = 0;
            p->active = 1;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

/* After C_Sign, C_Verify, C_Encrypt or C_Decrypt on session h: whether it
 * ended the operation (PKCS #11 3.0 5.2: every call does, except one that
 * returns CKR_BUFFER_TOO_SMALL and a successful length query, whose output
 * pointer is NULL; C_Verify has no output). Only then may the next identical
 * init be answered here: an operation of that kind starts only by an init,
 * which sets `active` (sent alone) or is pending (answered here), so an
 * update or final in between never leaves `active` clear. */
static void pair_ended(uint32_t fn, ksa_arg *args, CK_RV rv) {
    CK_SESSION_HANDLE h = args[0].ul;
    int ended = fn == KSA_FN_Verify || !(rv == CKR_BUFFER_TOO_SMALL || (rv == CKR_OK && args[2].ptr == NULL));
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (p->h == h) p->active = !ended;
    pthread_mutex_unlock(&p->lock);
}

/* C_Sign, C_Verify, C_Encrypt, C_Decrypt: with this session's pending init
 * in one frame (1, *rv set), or 0 (no pending init: the caller sends it as usual). */
static int pair_call(uint32_t fn, ksa_arg *args, CK_RV *rv) {
    CK_SESSION_HANDLE h = args[0].ul;
    struct kc_pair *p = pair_slot(h);
    uint8_t init[KC_PAIR_MAX];
    uint32_t n = 0;
    pthread_mutex_lock(&p->lock);
    /* C_Verify after an init answered with the ticket: verified here when the
     * answer is CKR_OK or CKR_SIGNATURE_INVALID (local_verify.c); any other
     * input goes to the agent with the init, as a pair. */
    struct kc_ticket *tk = p->local && p->cur >= 0 && p->cur < KC_TICKETS ? &p->tickets[p->cur] : NULL;
    if (fn == KSA_FN_Verify && tk && p->pending && p->h == h && tk->h == h && tk->key && args[1].ptr && args[2].ptr &&
        args[2].len == tk->siglen && args[1].len <= (1u << 20)) {
        void *key = tk->key, *ctx = tk->ctx;
        kv_mech mech = tk->mech;
        uint32_t siglen = tk->siglen;
        kv_key_ref(key);
        tk->ctx = NULL;   /* lent to this call */
        pthread_mutex_unlock(&p->lock);
        if (!ctx) ctx = kv_ctx(key, &mech);
        int v = kv_verify(key, ctx, &mech, siglen, args[1].ptr, args[1].len, args[2].ptr, args[2].len);
        pthread_mutex_lock(&p->lock);
        if (ctx && tk->key == key && !tk->ctx) tk->ctx = ctx, ctx = NULL;   /* back to the ticket, if still its own */
        pthread_mutex_unlock(&p->lock);
        kv_ctx_free(ctx);
        kv_key_free(key);
        pthread_mutex_lock(&p->lock);
        if (v >= 0 && p->local && p->pending && p->h == h) {
            /* The operation ends with C_Verify, here as at the agent. */
            p->pending = p->local = 0;
            p->active = 0;
            __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&p->lock);
            *rv = v ? CKR_OK : CKR_SIGNATURE_INVALID;
            return 1;
        }
    }
    p->local = 0;
    int mine = p->pending && p->h == h && p->n >= 4;
    uint32_t init_fn = mine ? (uint32_t)(p->init[0] | p->init[1] << 8 | p->init[2] << 16 | (uint32_t)p->init[3] << 24) : 0;
    if (mine && !ksa_pair_allowed(init_fn, fn)) {
        /* Another call after the init (C_Sign after C_VerifyInit...): the init goes alone first. */
        pair_flush_locked(p);
        mine = 0;
    }
    if (mine) {
        n = p->n;
        memcpy(init, p->init, n);
        p->pending = 0;
        __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&p->lock);
    if (!mine) return 0;

    struct kc_conn *c;
    CK_RV arv = acquire(&c);
    if (arv != CKR_OK) { *rv = arv; return 1; }
    ksa_buf *bp = &c->buf;
    ksa_buf_reset(bp);
    uint32_t id = __atomic_add_fetch(&kc_next_id, 1, __ATOMIC_RELAXED);
    ksa_put_u32(bp, id);
    ksa_put_u32(bp, KSA_FN_Pair);
    ksa_put_u32(bp, n);
    ksa_put_raw(bp, init, n);
    ksa_put_u32(bp, fn);
    CK_RV erv = ksa_encode_request(fn, args, bp);
    int x = -3;
    if (erv == CKR_OK && !bp->failed) x = exchange_frame(c, id);
    int again = 0;
    if (x == -3) {
        /* The call cannot be encoded (it fails with its own CK_RV): the init alone, then the call as usual. */
        again = 1;
    } else if (x == -2) {
        *rv = CKR_DEVICE_ERROR;
    } else if (x != 0) {
        *rv = CKR_DEVICE_REMOVED;
    } else {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);
        CK_RV frv = ksa_get_u64(&r);
        (void)ksa_get_u8(&r);
        if (frv == CKR_FUNCTION_NOT_SUPPORTED && !r.failed && r.left == 0) {
            /* An agent without pairs: never again; this time the two calls one by one. */
            __atomic_store_n(&kc_pairs_off, 1, __ATOMIC_RELEASE);
            again = 1;
        } else {
            uint32_t m = ksa_get_u32(&r);
            const uint8_t *first = r.failed || m > r.left ? NULL : ksa_get_raw(&r, m);
            if (frv != CKR_OK || !first || m < 8) {
                *rv = frv != CKR_OK ? frv : CKR_DEVICE_ERROR;
            } else {
                ksa_rd one = {first, m, 0};
                CK_RV irv = ksa_get_u64(&one);
                if (one.failed) irv = CKR_DEVICE_ERROR;
                if (irv != CKR_OK) {
                    pair_learn(h, NULL, 0, irv, NULL, 0);
                    *rv = irv;
                } else {
                    *rv = ksa_apply_reply(fn, args, &r);
                    pair_ended(fn, args, *rv);
                }
            }
        }
    }
    frame_done(c);
    release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (!again) return 1;
    /* Back to one by one: the init (its rv decides), then the call as usual. */
    pthread_mutex_lock(&p->lock);
    p->h = h;
    p->n = n;
    memcpy(p->init, init, n);
    p->pending = 1;
    __atomic_add_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    pair_flush_locked(p);
    int ok = p->known;
    pthread_mutex_unlock(&p->lock);
    if (!ok) { *rv = CKR_OPERATION_NOT_INITIALIZED; return 1; }
    return 0;
}

/* After a C_VerifyInit the agent accepted, sent alone: the ticket, when the
 * mechanism is one local_verify.c runs and the key is a public, non-private
 * key object of a keyshare token whose CKA_PUBLIC_KEY_INFO gives the key the
 * agent verifies with. Two or three round trips, once per session, key and
 * mechanism; stored only while that init is still the slot's, learnt at
 * `epoch` (the read before the init was sent: a change since moves the page,
 * and the ticket is never used). Anything unexpected: no ticket. */
/* A read for the ticket, outside the pair rules: C_GetTokenInfo is a call that
 * forgets every learnt init (pair_global_fn), the one just learnt included;
 * these three reads change nothing, and the session has no pending init. */
static CK_RV ticket_read(uint32_t fn, ksa_arg *args) {
    struct kc_conn *c;
    CK_RV rv = acquire(&c);
    if (rv != CKR_OK) return rv;
    int x = exchange_in(c, fn, args, &rv);
    release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    return x ? CKR_DEVICE_ERROR : rv;
}

static void ticket_fetch(ksa_arg *args, const uint8_t *enc, uint32_t encn, const volatile uint64_t *page, uint64_t epoch) {
    kv_mech mech;
    if (!kv_wanted() || !kv_mechanism(args[1].ptr, &mech) || !kv_available()) return;
    CK_SESSION_HANDLE h = args[0].ul;
    const char *why = NULL;
    CK_OBJECT_HANDLE key = args[2].ul;
    /* A keyshare token's own key: "keyshare soft" (an external token's keys
     * come and go with a card the epoch does not follow). */
    CK_SESSION_INFO si;
    CK_TOKEN_INFO ti;
    static const char model[16] = "keyshare soft   ";
    ksa_arg sa[KSA_MAX_ARGS] = {{.ul = h}, {.ptr = &si}};
    ksa_arg ta[KSA_MAX_ARGS] = {{0}, {.ptr = &ti}};
    CK_RV srv = ticket_read(KSA_FN_GetSessionInfo, sa);
    ta[0].ul = si.slotID;
    if (srv != CKR_OK || ticket_read(KSA_FN_GetTokenInfo, ta) != CKR_OK || memcmp(ti.model, model, sizeof model) != 0) {
        ks_client_note("C_VerifyInit on session %lu: verified by the agent (not a keyshare soft token's key)", h);
        return;
    }
    CK_OBJECT_CLASS cls = 0;
    CK_BBOOL priv = CK_TRUE;
    uint8_t *spki = malloc(4096);
    if (!spki) return;
    CK_ATTRIBUTE t[3] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_PRIVATE, &priv, sizeof priv}, {CKA_PUBLIC_KEY_INFO, spki, 4096}};
    CK_ULONG caps[3];
    ksa_arg ga[KSA_MAX_ARGS] = {{.ul = h}, {.ul = key}, {.ptr = t, .len = 3, .plen = caps}};
    CK_RV rv = ticket_read(KSA_FN_GetAttributeValue, ga);
    void *k = NULL;
    uint32_t siglen = 0;
    if (rv == CKR_OK && t[0].ulValueLen == sizeof cls && cls == CKO_PUBLIC_KEY && t[1].ulValueLen == sizeof priv &&
        priv == CK_FALSE && t[2].ulValueLen > 0 && t[2].ulValueLen <= 4096)
        k = kv_key(spki, t[2].ulValueLen, &mech, &siglen);
    else
        why = rv != CKR_OK ? "its attributes cannot be read" : cls != CKO_PUBLIC_KEY ? "not a public key object"
            : priv != CK_FALSE ? "a private object (CKA_PRIVATE)" : "no CKA_PUBLIC_KEY_INFO";
    free(spki);
    if (!k) {
        ks_client_note("C_VerifyInit on session %lu key %lu: verified by the agent (%s)", h, key,
                       why ? why : "a key this module does not verify");
        return;
    }
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (encn <= KC_TICKET_MAX && ksa_epoch_read(page) == epoch) {
        /* This init's ticket, else a free one, else the other session's. */
        struct kc_ticket *t = NULL;
        for (int i = 0; i < KC_TICKETS && !t; i++)
            if (p->tickets[i].h == h && p->tickets[i].n == encn && memcmp(p->tickets[i].init, enc, encn) == 0) t = &p->tickets[i];
        for (int i = 0; i < KC_TICKETS && !t; i++)
            if (p->tickets[i].h == 0 || p->tickets[i].epoch != epoch) t = &p->tickets[i];
        if (!t) t = &p->tickets[h % KC_TICKETS];
        if (p->local && t == &p->tickets[p->cur]) t = NULL;   /* in use by a pending init: not replaced */
        if (t) {
            ticket_drop_locked(t);
            t->h = h;
            t->n = encn;
            memcpy(t->init, enc, encn);
            t->page = page;
            t->epoch = epoch;
            t->key = k;
            t->mech = mech;
            t->siglen = siglen;
            k = NULL;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (k) ks_client_note("C_VerifyInit on session %lu key %lu: changed meanwhile, no ticket", h, key);
    else ks_client_note("C_VerifyInit on session %lu key %lu: the same init again is verified in this process", h, key);
    kv_key_free(k);
}

static CK_RV kc_call(uint32_t fn, ksa_arg *args) {
    const CK_FUNCTION_LIST_3_2 *L;
    if (__atomic_load_n(&kc_lazy, __ATOMIC_ACQUIRE) && lazy_call(fn) && (L = lazy_engine()) != NULL) {
        /* The in-process module over the empty view (Module.initialize: no store). */
        switch (fn) {
        case KSA_FN_GetInfo: return L->C_GetInfo(args[0].ptr);
        case KSA_FN_GetSlotList: return L->C_GetSlotList((CK_BBOOL)(args[0].ul != 0), args[1].ptr, args[1].plen);
        case KSA_FN_GetSlotInfo: return L->C_GetSlotInfo(args[0].ul, args[1].ptr);
        case KSA_FN_GetTokenInfo: return L->C_GetTokenInfo(args[0].ul, args[1].ptr);
        case KSA_FN_GetMechanismList: return L->C_GetMechanismList(args[0].ul, args[1].ptr, args[1].plen);
        case KSA_FN_GetMechanismInfo: return L->C_GetMechanismInfo(args[0].ul, args[1].ul, args[2].ptr);
        }
    }
    uint8_t enc[KC_PAIR_MAX];
    uint32_t encn = 0;
    int learn = 0;
    const volatile uint64_t *page = NULL;
    uint64_t epoch = 0;
    if (!__atomic_load_n(&kc_pairs_off, __ATOMIC_ACQUIRE)) {
        if (pair_init_fn(fn)) {
            if (pair_try_init(fn, args, enc, &encn, &page, &epoch)) return CKR_OK;
            learn = 1;
        } else if (pair_call_fn(fn)) {
            CK_RV prv;
            if (pair_call(fn, args, &prv)) return prv;
        } else {
            pair_flush_for(fn, args);
        }
    } else if (__atomic_load_n(&kc_pending, __ATOMIC_ACQUIRE)) {
        pair_flush_for(KSA_FN_Finalize, args);   /* turned off with inits pending: send them all */
    }
    struct kc_conn *c;
    CK_RV rv = acquire(&c);
    if (rv != CKR_OK) return rv;
    int x = exchange_in(c, fn, args, &rv);
    release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (learn) {
        pair_learn(args[0].ul, enc, encn, x == 0 ? rv : CKR_DEVICE_ERROR, page, epoch);
        if (x == 0 && rv == CKR_OK && fn == KSA_FN_VerifyInit && page && epoch) ticket_fetch(args, enc, encn, page, epoch);
    }
    else if (x == 0 && pair_call_fn(fn) && !__atomic_load_n(&kc_pairs_off, __ATOMIC_ACQUIRE)) pair_ended(fn, args, rv);
    if (x == -2) {
        ks_client_note("the keyshare agent did not answer call %u within %d ms (KEYSHARE_AGENT_TIMEOUT): CKR_DEVICE_ERROR",
                    fn, call_timeout_ms(fn, args));
        return CKR_DEVICE_ERROR;
    }
    return x ? CKR_DEVICE_REMOVED : rv;
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
    kc_lazy = 0;   /* the in-process module's own fork handlers drop its runtime */
    kc_idle = NULL;
    /* The regions were mapped MADV_DONTFORK (shm.c: a region without it is
     * never used), so none is mapped here: its old address is free, or
     * already another mapping (a fork handler or malloc that ran first).
     * Forgotten, never unmapped. */
    for (struct kc_conn *c = kc_all; c; c = c->all_next) c->ch.shm = NULL, c->ch.in = c->ch.out = NULL;
    while (kc_all) conn_free_locked(kc_all);
    kc_initialized = 0;
    kc_lost = 0;
    kc_generation++;
    kc_pairs_init();   /* a parent thread may have held a slot's lock: fresh ones, nothing pending */
    kc_epoch = NULL;   /* the parent's agent-side client's page: the child makes its own client */
    pthread_mutex_unlock(&kc_lock);
}

__attribute__((constructor)) static void kc_register(void) {
    kc_pairs_init();
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
    /* Before kc_lock: a pair slot's lock is taken before kc_lock, never after. */
    kc_pairs_forget();
    pthread_mutex_lock(&kc_lock);
    if (kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_ALREADY_INITIALIZED;
    }
    /* No store and no agent: list the free slot from an empty view, start
     * nothing, create nothing (docs/agent.md, "No store, no agent"). */
    if (!store_exists()) {
        pid_t peer;
        int fd = connect_agent(0, &peer);
        if (fd == -2) {
            pthread_mutex_unlock(&kc_lock);
            return CKR_DEVICE_ERROR;
        }
        if (fd >= 0) close(fd);
        if (fd == -1 && lazy_engine() && lazy_engine()->C_Initialize(NULL) == CKR_OK) {
            kc_initialized = 1;
            kc_lost = 0;
            __atomic_store_n(&kc_lazy, 1, __ATOMIC_RELEASE);
            ks_client_note("no store at this process's KEYSHARE_HOME and no agent: listing only, nothing started or created");
            pthread_mutex_unlock(&kc_lock);
            return CKR_OK;
        }
    }
    struct kc_conn *c = NULL;
    CK_RV rv = start_client_locked(&c, 1);
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
    kc_pairs_forget();   /* the pending inits die with the sessions */
    /* A connection for the Finalize call, also when every connection is in
     * use by another thread (blocked in C_WaitForSlotEvent, say): the
     * agent-side C_Finalize is what wakes such a call (CKR_CRYPTOKI_NOT_INITIALIZED),
     * as in-process. Not when the agent is lost: nothing to finalise there. */
    struct kc_conn *c = NULL;
    pthread_mutex_lock(&kc_lock);
    int need = kc_initialized && !kc_lost && !kc_lazy && !kc_idle;
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
    if (kc_lazy) {
        if (lazy_engine()) (void)lazy_engine()->C_Finalize(NULL);
        __atomic_store_n(&kc_lazy, 0, __ATOMIC_RELEASE);
    }
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
            (void)exchange_in(c, KSA_FN_Finalize, a, &rv);
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
#include "../abi/include/function_lists.h"
#include "../abi/include/shared_tables.h"

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
