#ifndef KEYSHARE_CLINUX_SHIM_H
#define KEYSHARE_CLINUX_SHIM_H
// Linux calls Swift cannot import directly (variadic prototypes), as inline
// wrappers; no library to link.
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/// PR_SET_DUMPABLE: 0 makes the process non-dumpable (no core, no same-uid
/// ptrace or /proc/PID/mem). Returns prctl's result.
static inline int keyshare_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}

/// PR_GET_DUMPABLE: 1 dumpable, 0 not, -1 error.
static inline int keyshare_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}
/// Detaches the calling (single-threaded) process for `keyshare agent
/// --daemonize`: forks; the parent waits until the child reports on a pipe
/// (a byte '1' listening, '0' another agent already runs) and exits 0, or 1
/// when the child died first. The child starts a new session and gets the
/// pipe's write end in *ready_fd. Returns 0 in the child, -1 on error.
static inline int keyshare_daemonize(int *ready_fd) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) {
        close(p[1]);
        char c = 0;
        ssize_t n;
        /* Only EINTR is retried: another read error (EIO, EBADF) is the
         * child's failure to report, not a reason to spin forever. */
        do { n = read(p[0], &c, 1); } while (n < 0 && errno == EINTR);
        _exit(n == 1 ? 0 : 1);
    }
    close(p[0]);
    setsid();
    *ready_fd = p[1];
    return 0;
}

/// SO_PEERCRED of a connected Unix socket: 0 and the peer's pid and uid, or -1.
static inline int keyshare_peer_cred(int fd, pid_t *pid, uid_t *uid) {
    /* struct ucred's layout, without depending on _GNU_SOURCE. */
    struct { pid_t pid; uid_t uid; gid_t gid; } cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    return 0;
}
/// accept4 with SOCK_CLOEXEC (accept4 needs _GNU_SOURCE, which Swift's Glibc may not have).
static inline int keyshare_accept_cloexec(int fd) {
    extern int accept4(int, struct sockaddr *, socklen_t *, int);
    return accept4(fd, 0, 0, SOCK_CLOEXEC);
}

/// The glibc malloc settings under which the agent runs (docs/reliability.md,
/// "Agent: key material zeroed at logout"): every free() overwrites the
/// chunk (perturb), and no per-thread cache (tcache) keeps small chunks
/// aside without that overwrite. So a decrypted PKCS #8, a token key copy
/// or a parsed component leaves nothing behind once freed, whichever Swift
/// array or OpenSSL buffer held it. Tunables are read only at exec.
#define KEYSHARE_AGENT_MALLOC_TUNABLES "glibc.malloc.perturb=165:glibc.malloc.tcache_count=0"

/// 1 when this process runs under KEYSHARE_AGENT_MALLOC_TUNABLES.
static inline int keyshare_agent_heap_scrubbed(void) {
    const char *t = getenv("GLIBC_TUNABLES");
    return t && strstr(t, KEYSHARE_AGENT_MALLOC_TUNABLES) != NULL;
}

/// Re-executes the running program (/proc/self/exe, same argv, same pid, so
/// systemd's LISTEN_PID still matches) with KEYSHARE_AGENT_MALLOC_TUNABLES
/// added to GLIBC_TUNABLES, unless they are in force already. Returns only
/// when they are (0) or the exec failed (-1; the caller goes on with
/// mallopt(M_PERTURB) alone).
static inline int keyshare_agent_scrub_heap(char *const argv[]) {
    if (keyshare_agent_heap_scrubbed()) return 0;
    const char *old = getenv("GLIBC_TUNABLES");
    char value[1024];
    int n = snprintf(value, sizeof value, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "",
                     KEYSHARE_AGENT_MALLOC_TUNABLES);
    if (n < 0 || (size_t)n >= sizeof value || setenv("GLIBC_TUNABLES", value, 1) != 0) return -1;
    execv("/proc/self/exe", argv);
    if (old) setenv("GLIBC_TUNABLES", old, 1); else unsetenv("GLIBC_TUNABLES");
    mallopt(M_PERTURB, 165);
    return -1;
}

/// Closes every descriptor from 3 up: a daemonizing agent keeps nothing its
/// starter held open without close-on-exec (a lock, a pipe someone waits on).
static inline void keyshare_close_from(int lowfd) {
    closefrom(lowfd);
}

/// The connecting process of a Unix socket as a pidfd: SO_PEERPIDFD (Linux
/// 6.5+: the very process that connected), else pidfd_open(pid) (Linux 5.3+;
/// the caller must then confirm the pid still holds the connection, as the
/// agent's caller check does, so a reused pid is not taken for the client).
/// -1 when neither works.
static inline int keyshare_peer_pidfd(int sock, pid_t pid) {
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(sock, SOL_SOCKET, 77 /* SO_PEERPIDFD */, &pidfd, &len) == 0 && pidfd >= 0) return pidfd;
    extern long syscall(long, ...);
    long fd = syscall(434 /* pidfd_open */, (long)pid, 0L);
    if (fd >= 0) fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    return fd >= 0 ? (int)fd : -1;
}

/// The agent's wake-up pipe: SIGTERM and SIGINT write 'T' to it (a retire
/// request, docs/agent.md "Upgrades"), other threads write 'W' (a new pidfd to
/// watch, a stop request). Returns the read end (non-blocking) and sets
/// *write_end; -1 on failure.
static int keyshare_wake_write_fd = -1;
static void keyshare_on_term(int sig) {
    (void)sig;
    int saved = errno;
    char c = 'T';
    if (keyshare_wake_write_fd >= 0) (void)!write(keyshare_wake_write_fd, &c, 1);
    errno = saved;
}
static inline int keyshare_wake_pipe(int *write_end) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    keyshare_wake_write_fd = p[1];
    *write_end = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = keyshare_on_term;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return p[0];
}

/// RLIMIT_NOFILE's soft limit raised to its hard limit (a busy agent holds a
/// descriptor per connection); returns the new soft limit.
static inline long keyshare_raise_nofile(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    if (r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
        getrlimit(RLIMIT_NOFILE, &r);
    }
    return (long)r.rlim_cur;
}
#endif
