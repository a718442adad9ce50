#ifndef KEYSHARE_CLINUX_SPAWN_PROMPT_H
#define KEYSHARE_CLINUX_SPAWN_PROMPT_H
// The agent's prompt program (pinentry, issue 27): started with posix_spawn
// (no fork of the agent: no atfork handler, no copy of its memory), spoken to
// over a socket pair (send with MSG_NOSIGNAL: a pinentry that dies cannot
// SIGPIPE the agent).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

// glibc 2.34+, declared under _GNU_SOURCE only.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);

/// Starts `path` with one end of a new socket pair as its stdin and stdout,
/// stderr on /dev/null, no other descriptor of the agent (closefrom 3: client
/// sockets, the store, pidfds), default signal dispositions and an empty
/// mask, in a process group of its own (so the whole group can be killed).
/// On success returns the pid and sets *fd to the agent's end (close-on-exec);
/// on failure returns -errno.
static inline pid_t keyshare_spawn_prompt(const char *path, char *const argv[], char *const envp[], int *fd) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return -rc;
    }
    *fd = sv[0];
    return pid;
}
#endif
