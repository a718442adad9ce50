#ifndef KEYSHARE_CLINUX_CALLER_CHECK_H
#define KEYSHARE_CLINUX_CALLER_CHECK_H
// For the agent's caller check (Sources/KeySharing/CallerCheck.swift): the
// file system a program lives on (ProgramIdentity.swift), and network
// namespaces (UnixSocketDiag.swift: the kernel makes an accepted Unix socket
// in the CLIENT's network namespace, and sock_diag finds a socket only from
// the namespace it lives in).
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define KEYSHARE_SIOCGSKNS 0x894C        /* linux/sockios.h */
#define KEYSHARE_NS_GET_USERNS 0xb701    /* linux/nsfs.h: _IO(0xb7, 0x1) */
#define KEYSHARE_CLONE_NEWUSER 0x10000000
#define KEYSHARE_CLONE_NEWNET 0x40000000
#define KEYSHARE_NETLINK_SOCK_DIAG 4
#define KEYSHARE_MSG_CMSG_CLOEXEC 0x40000000

/// The f_type (linux/magic.h) of the file system holding `fd`, or -errno.
static inline long keyshare_fs_type(int fd) {
    struct statfs s;
    return fstatfs(fd, &s) == 0 ? (long)s.f_type : -errno;
}

/// The network namespace a socket lives in, as a descriptor (SIOCGSKNS), or
/// -errno. The kernel asks for CAP_NET_ADMIN over that namespace: root, or the
/// owner of the user namespace that owns it (a rootless `unshare -Urn`).
static inline int keyshare_socket_netns(int sock) {
    int fd = ioctl(sock, KEYSHARE_SIOCGSKNS, 0);
    return fd >= 0 ? fd : -errno;
}

/// A NETLINK_SOCK_DIAG socket made inside the network namespace `netns_fd`,
/// returned close-on-exec, or -errno (EPERM: the namespace cannot be entered).
///
/// setns() into a user namespace needs a single-threaded process, so a child
/// does it: it enters the user namespace that owns the network namespace when
/// that is not ours (NS_GET_USERNS; the user who made a rootless namespace owns
/// it and may enter it: full capabilities there, none outside), then the
/// network namespace, makes the socket and sends it back over a socket pair
/// (SCM_RIGHTS) with its errno, and exits. Between fork and _exit the child
/// makes only system calls (async-signal-safe: the agent is multi-threaded).
/// The parent waits at most timeout_ms for the answer, kills the child if it
/// has none, and always reaps it.
static inline int keyshare_sock_diag_in_netns(int netns_fd, int timeout_ms) {
    extern int setns(int, int);
    int userns = ioctl(netns_fd, KEYSHARE_NS_GET_USERNS, 0);
    if (userns >= 0) {
        struct stat theirs, ours;
        if (fstat(userns, &theirs) == 0 && stat("/proc/self/ns/user", &ours) == 0 &&
            theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) {
            close(userns);
            userns = -1;  /* ours: enter the network namespace directly */
        }
    }
    /* NS_GET_USERNS fails (EPERM) for an owner outside our user namespace:
       the child then tries the network namespace alone (root may). */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        if (userns >= 0) close(userns);
        return -e;
    }
    pid_t child = fork();
    if (child == 0) {
        int err = 0, nl = -1;
        if (userns >= 0 && setns(userns, KEYSHARE_CLONE_NEWUSER) != 0) err = errno;
        else if (setns(netns_fd, KEYSHARE_CLONE_NEWNET) != 0) err = errno;
        else if ((nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, KEYSHARE_NETLINK_SOCK_DIAG)) < 0) err = errno;
        union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(int))]; } control;
        memset(&control, 0, sizeof control);
        struct iovec iov = { .iov_base = &err, .iov_len = sizeof err };
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        if (nl >= 0) {
            m.msg_control = control.space;
            m.msg_controllen = sizeof control.space;
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &nl, sizeof nl);
        }
        (void)sendmsg(sv[1], &m, MSG_NOSIGNAL);
        _exit(0);
    }
    int fork_errno = errno;
    close(sv[1]);
    if (userns >= 0) close(userns);
    if (child < 0) {
        close(sv[0]);
        return -fork_errno;
    }
    int result = -ETIMEDOUT;
    struct pollfd p = { .fd = sv[0], .events = POLLIN, .revents = 0 };
    int ready;
    while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {}
    if (ready > 0) {
        int err = 0;
        union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(int))]; } control;
        struct iovec iov = { .iov_base = &err, .iov_len = sizeof err };
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control.space;
        m.msg_controllen = sizeof control.space;
        ssize_t n = recvmsg(sv[0], &m, KEYSHARE_MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        int fd = -1;
        for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(c), sizeof fd);
        }
        if (n == (ssize_t)sizeof err && err == 0 && fd >= 0) result = fd;
        else {
            if (fd >= 0) close(fd);
            result = n == (ssize_t)sizeof err && err != 0 ? -err : -EIO;
        }
    }
    close(sv[0]);
    if (result == -ETIMEDOUT) kill(child, SIGKILL);
    /* The child exits right after its answer (or was killed): reap it. ECHILD
       when SIGCHLD is ignored (reaped by the kernel). */
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    return result;
}

#endif
