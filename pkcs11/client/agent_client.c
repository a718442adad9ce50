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
#include "client_internal.h"

extern char **environ;


pthread_mutex_t kc_lock = PTHREAD_MUTEX_INITIALIZER;
int kc_initialized;
int kc_lost;            /* the agent went away; reconnect on the next call */
unsigned kc_generation; /* bumped by C_Finalize, agent loss and fork */
uint8_t kc_token[KSA_TOKEN_LEN];
struct kc_conn *kc_idle;
struct kc_conn *kc_all;
uint32_t kc_next_id;
/* The agent's epoch page (Sources/AgentProtocol/epoch.c), read-only; NULL
 * without one. Replaced when a new agent-side client is made (another agent
 * after a restart gives another page); a page of this process's earlier
 * client stays mapped (a thread may still read it), one page per agent. */
const volatile uint64_t *kc_epoch;
dev_t kc_epoch_dev;
ino_t kc_epoch_ino;

/* KEYSHARE_AGENT_SPIN_US of this process, read once (docs/agent-transport.md, "Round trips"). */
uint32_t kc_spin_us(void) {
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
struct kc_conn *kc_conn_new_locked(int fd, ksa_shm *shm, unsigned generation) {
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

void kc_conn_free_locked(struct kc_conn *c) {
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
const CK_FUNCTION_LIST_3_2 *kc_lazy_engine(void) {
    const struct ks_engine_pkcs11 *e = ks_engine();
    CK_INTERFACE_PTR i = NULL;
    CK_VERSION v = {3, 2};
    if (e == NULL || e->get_interface((CK_UTF8CHAR_PTR)"PKCS 11", &v, &i, 0) != CKR_OK || i == NULL) return NULL;
    return (const CK_FUNCTION_LIST_3_2 *)i->pFunctionList;
}

/* Ends the empty view (kc_lazy) when an agent takes over or the host finalizes. */
void kc_lazy_finalize(void) {
    const CK_FUNCTION_LIST_3_2 *L = kc_lazy_engine();
    if (L) (void)L->C_Finalize(NULL);
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
int kc_store_exists(void) {
    char store[4096], db[4200];
    if (ksa_store_home(store, sizeof store)) return 1;
    snprintf(db, sizeof db, "%s/keychain.db", store);
    struct stat st;
    return stat(db, &st) == 0 || errno != ENOENT;
}

/* Connects (starting the agent when allowed). fd, -1 no agent and none
 * started, -2 refused or failed (said in the debug log). */
int kc_connect_agent(int allow_start, pid_t *peer) {
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
int kc_call_timeout_ms(uint32_t fn, ksa_arg *args) {
    if (fn == KSA_FN_WaitForSlotEvent && !(args[0].ul & CKF_DONT_BLOCK)) return 0;
    return ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CALL_TIMEOUT_MS);
}

/* One call on one connection, in the connection's buffer `b` (kept, so a
 * call makes no allocation once it has grown; wiped after each call: a
 * request may hold a PIN). -1: the connection is broken; -2: no reply in time. */
int kc_round_trip(struct kc_conn *c, uint32_t id, int timeout);
void kc_frame_done(struct kc_conn *c);

int kc_exchange_in(struct kc_conn *c, uint32_t fn, ksa_arg *args, CK_RV *rv) {
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
    int rc = kc_round_trip(c, id, kc_call_timeout_ms(fn, args));
    if (rc == 0) {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);   /* the id, checked by round_trip */
        *rv = ksa_apply_reply(fn, args, &r);
    }
    kc_frame_done(c);
    return rc;
}

/* The request frame the caller built in c->buf (u32 id first), on c; the
 * reply, checked to carry the same id, replaces it in c->buf (the caller
 * reads it, then resets the buffer: it may hold a PIN). 0, -1 broken, -2 no
 * reply within `timeout` ms (0: wait as long as it takes). */
int kc_round_trip(struct kc_conn *c, uint32_t id, int timeout) {
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

int kc_exchange_frame(struct kc_conn *c, uint32_t id) {
    return kc_round_trip(c, id, ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", KSA_CALL_TIMEOUT_MS));
}

/* After a frame: the buffer wiped; an idle connection keeps a small one. */
void kc_frame_done(struct kc_conn *c) {
    ksa_buf_reset(&c->buf);
    if (c->buf.cap > (1u << 16)) ksa_buf_free(&c->buf);
}

void kc_drop_idle_locked(void) {
    while (kc_idle) {
        struct kc_conn *c = kc_idle;
        kc_idle = c->next;
        kc_conn_free_locked(c);
    }
}

/* Lazy: C_Initialize found no store and no agent (docs/agent.md, "No store,
 * no agent"): a module load that only lists slots creates nothing and starts
 * nothing. Such calls are answered by the in-process module over an empty,
 * in-memory view of a store (ks_lazy_*, Support.swift); the first call that
 * needs a store (C_InitToken, C_OpenSession, ...) starts the agent. */
int kc_lazy;

/* A new client at the agent: connect (starting it), hello, C_Initialize.
 * Called with kc_lock held. A hello that meets an agent just exiting (idle:
 * EOF) is retried, one that meets an agent of another protocol retires it
 * (when it is older) and starts ours; one that gets no answer in time ends
 * the call at once (CKR_DEVICE_ERROR): three attempts would triple the wait. */
CK_RV kc_start_client_locked(struct kc_conn **out, int allow_start) {
    int retired = 0;
    for (int attempt = 0; attempt < 3 + retired; attempt++) {
        pid_t peer = 0;
        int fd = kc_connect_agent(allow_start, &peer);
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
        struct kc_conn *c = kc_conn_new_locked(fd, shm, kc_generation);
        if (!c) { close(fd); ksa_shm_unmap(shm); return CKR_HOST_MEMORY; }
        ksa_arg a[1] = {{.ul = 0}};
        CK_RV rv;
        int x = kc_exchange_in(c, KSA_FN_Initialize, a, &rv);
        if (x == -2) {
            ks_client_note("the keyshare agent did not answer C_Initialize in time");
            kc_conn_free_locked(c);
            return CKR_DEVICE_ERROR;
        }
        if (x != 0) { kc_conn_free_locked(c); sleep_ms(20); continue; }
        if (rv != CKR_OK) { kc_conn_free_locked(c); return rv; }
        __atomic_store_n(&kc_epoch, epoch, __ATOMIC_RELEASE);
        *out = c;
        return CKR_OK;
    }
    ks_client_note("cannot reach the keyshare agent after 3 attempts");
    return CKR_DEVICE_ERROR;
}

/* A connection for one call. */
CK_RV kc_acquire(struct kc_conn **out) {
    pthread_mutex_lock(&kc_lock);
    if (!kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    if (kc_lost || kc_lazy) {
        /* The agent died, or there was none yet: a fresh client at an agent (started if need be). */
        struct kc_conn *c = NULL;
        CK_RV rv = kc_start_client_locked(&c, 1);
        if (rv != CKR_OK) {
            pthread_mutex_unlock(&kc_lock);
            return kc_lazy ? rv : CKR_DEVICE_REMOVED;
        }
        if (kc_lazy) kc_lazy_finalize();
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
    int fd = kc_connect_agent(0, &peer);
    ksa_shm *shm = NULL;
    unsigned version = 0;
    if (fd >= 0 && hello(fd, 1, &shm, &version, NULL) == 0) {
        pthread_mutex_lock(&kc_lock);
        struct kc_conn *c = kc_conn_new_locked(fd, shm, gen);
        pthread_mutex_unlock(&kc_lock);
        if (c) {
            *out = c;
            return CKR_OK;
        }
    }
    ksa_shm_unmap(shm);
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&kc_lock);
    if (gen == kc_generation) { kc_lost = 1; kc_generation++; kc_drop_idle_locked(); }
    pthread_mutex_unlock(&kc_lock);
    return CKR_DEVICE_REMOVED;
}

/* broken: 1 the connection broke (the agent is gone: start over at the next
 * call), 2 it timed out (only this connection is dropped: the agent may still
 * be busy with the call). */
void kc_release(struct kc_conn *c, int broken) {
    pthread_mutex_lock(&kc_lock);
    if (broken == 1) {
        if (c->generation == kc_generation && kc_initialized) {
            kc_lost = 1;
            kc_generation++;
            kc_drop_idle_locked();
        }
        kc_conn_free_locked(c);
    } else if (broken || c->generation != kc_generation || !kc_initialized) {
        kc_conn_free_locked(c);
    } else {
        c->next = kc_idle;
        kc_idle = c;
    }
    pthread_mutex_unlock(&kc_lock);
}

/* The calls a lazy client (no store, no agent) answers itself. */
int kc_lazy_call(uint32_t fn) {
    switch (fn) {
    case KSA_FN_GetInfo: case KSA_FN_GetSlotList: case KSA_FN_GetSlotInfo: case KSA_FN_GetTokenInfo:
    case KSA_FN_GetMechanismList: case KSA_FN_GetMechanismInfo:
        return 1;
    default:
        return 0;
    }
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
    while (kc_all) kc_conn_free_locked(kc_all);
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

