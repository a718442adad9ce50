/*
 * Reaching the agent: the one way the module and the CLI connect to it and
 * start it (docs/agent.md, "Start, exit, uniqueness").
 *
 * Before a byte is sent: the socket's directory is checked (ours, 0700, not a
 * link, every ancestor ours or root's: paths.c) and the listener's
 * credentials (SO_PEERCRED uid = our euid), so a socket another user planted
 * (XDG_RUNTIME_DIR unset under cron or su, or pointing at someone else's
 * directory under sudo -E) never receives a PIN. Every wait is bounded.
 * The agent is started with the same minimal environment whoever starts it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "agent_protocol.h"

extern char **environ;

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int64_t now_ms(void) { return (int64_t)(ksa_mono_ns() / 1000000u); }

int ksa_timeout_ms(const char *name, int fallback_ms) {
    const char *v = secure_getenv(name);
    if (!v || !*v) return fallback_ms;
    char *end;
    double s = strtod(v, &end);
    /* Written so NaN fails too ("nan" parses; converting it to int is
     * undefined and gave INT_MIN: a negative SO_RCVTIMEO, i.e. no timeout). */
    if (*end || !(s >= 0 && s <= 86400)) return fallback_ms;
    /* At least 1 ms: 0 (or 0.0001 s) would be SO_RCVTIMEO 0, which is "wait forever". */
    int ms = (int)(s * 1000);
    return ms > 0 ? ms : 1;
}

int ksa_connect(const char *path, int timeout_ms, pid_t *peer_pid, char *why, size_t n) {
    struct stat st;
    if (lstat(path, &st) != 0) return -1;   /* no agent */
    if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
        snprintf(why, n, "refusing %s: not a socket of uid %u (owner uid %u, mode %04o)", path,
                 (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    /* A full backlog (the agent is not accepting: stopped, or flooded) makes
     * a non-blocking connect fail with EAGAIN and leaves the socket
     * unconnected (AF_UNIX queues nothing, and polling it for POLLOUT says
     * nothing): try again on a new socket, bounded. */
    int64_t end = now_ms() + timeout_ms;
    int fd;
    for (;;) {
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) break;
        int e = errno;
        close(fd);
        if (e != EAGAIN) return -1;
        if (now_ms() >= end) {
            snprintf(why, n, "the keyshare agent at %s accepts no connection (waited %d ms): it is stuck or flooded",
                     path, timeout_ms);
            return -3;
        }
        nap_ms(10);
    }
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t len = sizeof cred;
    errno = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
        snprintf(why, n, "refusing %s: its listener's credentials are unknown (SO_PEERCRED: %s), not uid %u", path,
                 strerror(errno ? errno : EINVAL), (unsigned)geteuid());
        close(fd);
        return -2;
    }
    if (cred.uid != geteuid()) {
        snprintf(why, n, "refusing %s: it is served by uid %u (pid %d), not by uid %u", path,
                 (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
        close(fd);
        return -2;
    }
    if (peer_pid) *peer_pid = cred.pid;
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* ---- the agent's environment ------------------------------------------------ */

/* The agent lives on after its starter and serves every process of the user:
 * it gets the same few variables whoever starts it (the module, the CLI), never
 * a starter's secrets or settings. Kept: where it runs and finds things (PATH,
 * HOME, LANG, LC_ALL, XDG_RUNTIME_DIR, XDG_DATA_HOME), keyshare's own agent
 * settings (KEYSHARE_AGENT_*), which TPM it uses (KEYSHARE_TCTI), its prompt
 * program (KEYSHARE_PINENTRY). KEYSHARE_HOME is set to the store the starter
 * resolved (absolute, so the agent's working directory does not matter).
 * Not kept: KEYSHARE_KDF_LOG2N (the agent wraps PINs at the default cost, and
 * drops it itself too), KEYSHARE_DEBUG/LOG (the log is per client), driver
 * configuration (stored with each driver: `keyshare driver add --env`). */
static int kept(const char *entry) {
    static const char *const names[] = {
        "PATH", "HOME", "LANG", "LC_ALL", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "KEYSHARE_TCTI", "KEYSHARE_PINENTRY",
    };
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry) return 0;
    size_t n = (size_t)(eq - entry);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == n && memcmp(entry, names[i], n) == 0) return 1;
    return strncmp(entry, "KEYSHARE_AGENT_", 15) == 0;
}

int ksa_agent_env_kept(const char *entry) { return kept(entry); }

/* ---- starting ------------------------------------------------------------------ */

static int start_locked(const char *program, const char *dir, char *why, size_t n) {
    char store[PATH_MAX];
    if (ksa_store_home(store, sizeof store)) {
        snprintf(why, n, "cannot resolve the store's path");
        return -1;
    }
    size_t count = 0;
    for (char **e = environ; e && *e; e++) count++;
    char **env = calloc(count + 2, sizeof *env);
    char *home = NULL;
    if (!env || asprintf(&home, "KEYSHARE_HOME=%s", store) < 0) {
        free(env);
        snprintf(why, n, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (kept(*e)) env[k++] = *e;
    env[k++] = home;
    char *argv[] = {(char *)program, "agent", "--daemonize", NULL};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    /* The agent outlives this process: it must not keep what this process
     * holds open without close-on-exec (a shell's flock'ed descriptor, a pipe
     * a caller waits to see closed). */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    pid_t pid;
    int rc = posix_spawn(&pid, program, &fa, &attr, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(home);
    free(env);
    if (rc != 0) {
        snprintf(why, n, "cannot start the keyshare agent %s: %s", program, strerror(rc));
        return -1;
    }
    /* The first process exits once the agent listens (or lost the race):
     * bounded, so a stuck start cannot hang the caller. */
    int status;
    for (int64_t end = now_ms() + 15000;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) break;
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            snprintf(why, n, "the keyshare agent did not start within 15 s (see %s/agent.log)", dir);
            return -1;
        }
        nap_ms(5);
    }
    return 0;
}

int ksa_connect_or_start(const char *program, int allow_start, int timeout_ms, pid_t *peer_pid, char *why, size_t n) {
    char path[128], dir[512];
    why[0] = '\0';
    if (ksa_socket_path(path, sizeof path) || ksa_agent_dir(dir, sizeof dir)) {
        snprintf(why, n, "the keyshare agent's socket path is too long (over 107 bytes)");
        return -2;
    }
    if (ksa_check_dir(dir, allow_start, why, n) != 0) {
        /* A missing directory without leave to create it is no agent; anything else is a refusal. */
        if (!allow_start && errno == ENOENT) return -1;
        return -2;
    }
    int fd = ksa_connect(path, timeout_ms, peer_pid, why, n);
    if (fd != -1 || !allow_start) return fd;
    /* A sandboxed process (its own user namespace: bwrap, flatpak, unshare -U,
     * a rootless container) starts no agent: the agent would see the
     * sandbox's files, where the sandbox can put any program at the path a
     * policy rule names. It uses the agent socket bound into it, or none. */
    if (ksa_in_user_namespace()) {
        snprintf(why, n, "no keyshare agent at %s, and a process in a user namespace of its own (a sandbox or container) "
                 "does not start one: start it outside (keyshare agent, or the systemd socket unit) and bind its socket in "
                 "(keyshare agent socket)", path);
        return -2;
    }
    if (!program || !*program) {
        snprintf(why, n, "the keyshare agent is not running and no keyshare program was found to start it");
        return -2;
    }
    /* A setuid or setgid program (sudo, su: pam_p11) runs with its invoker's
     * environment: an agent started from it would run the invoker's choice
     * of program (KEYSHARE_AGENT_PROGRAM), prompt (KEYSHARE_PINENTRY, PATH)
     * and settings with the program's privileges. It uses an agent that
     * runs for its euid, or none. */
    if (getauxval(AT_SECURE)) {
        snprintf(why, n, "no keyshare agent at %s, and a setuid or setgid program does not start one "
                 "(its environment is its invoker's): start the agent of uid %u otherwise", path, (unsigned)geteuid());
        return -2;
    }
    char lockpath[600];
    snprintf(lockpath, sizeof lockpath, "%s/start.lock", dir);
    int lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock < 0) {
        snprintf(why, n, "cannot open %s: %s", lockpath, strerror(errno));
        return -2;
    }
    /* Another starter holds the lock while its agent comes up: wait, bounded. */
    int64_t end = now_ms() + 20000;
    while (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        if (now_ms() > end) {
            close(lock);
            snprintf(why, n, "%s is held by another process for over 20 s", lockpath);
            return -2;
        }
        nap_ms(10);
    }
    fd = ksa_connect(path, timeout_ms, peer_pid, why, n);
    if (fd == -1 && start_locked(program, dir, why, n) == 0) {
        for (int i = 0; i < 500 && fd == -1; i++) {
            fd = ksa_connect(path, timeout_ms, peer_pid, why, n);
            if (fd == -1) nap_ms(10);
        }
        if (fd == -1) snprintf(why, n, "the keyshare agent did not start (see %s/agent.log)", dir);
    }
    flock(lock, LOCK_UN);
    close(lock);
    return fd >= 0 ? fd : (fd == -1 ? -2 : fd);
}

int ksa_set_timeout(int fd, int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    int a = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int b = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return a || b ? -1 : 0;
}
