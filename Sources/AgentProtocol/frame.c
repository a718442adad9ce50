/* Length-prefixed frames over a stream socket (include/agent_protocol.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "agent_protocol.h"

/* The rest of a frame whose first bytes are in: bounded by KSA_FRAME_TIMEOUT_MS
 * (a peer that sends a header and stalls must not hold a thread forever). */
static int read_rest_until(int fd, uint8_t *p, size_t n, int64_t *deadline) {
    int64_t end = *deadline;
    while (n) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) { errno = ECONNRESET; return -1; }   /* EOF: not a timeout */
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        int64_t now = (int64_t)(ksa_mono_ns() / 1000000u);
        if (end < 0) *deadline = end = now + KSA_FRAME_TIMEOUT_MS;
        if (now >= end) { errno = ETIMEDOUT; return -1; }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)(end - now)) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

static int read_rest(int fd, uint8_t *p, size_t n) {
    int64_t end = -1;
    return read_rest_until(fd, p, n, &end);
}

/* The rest of a frame of n bytes into b, whose first `have` are in
 * b->data: the buffer grows with what arrives (doubling from 64 KiB), never
 * ahead of it, within one frame deadline. A peer that announces 16 MiB and
 * stalls holds what it sent, not 16 MiB (the agent's malloc perturbs, so
 * touches, every byte it hands out: 20 such calls were +330 MB of RSS).
 * b->len counts the bytes in, so a reset wipes no more than the buffer. */
static int read_growing(int fd, ksa_buf *b, size_t have, size_t n) {
    int64_t end = -1;
    b->len = have;
    while (have < n) {
        if (have == b->cap) {
            size_t want = b->cap < (64u << 10) ? (64u << 10) : b->cap * 2;
            if (want > n) want = n;
            uint8_t *d = malloc(want);
            if (!d) return -1;
            if (have) memcpy(d, b->data, have);
            ksa_buf_free(b);   /* wiped: the bytes so far may hold a PIN */
            b->data = d;
            b->cap = want;
            b->len = have;
        }
        size_t chunk = (b->cap < n ? b->cap : n) - have;
        int rc = read_rest_until(fd, b->data + have, chunk, &end);
        if (rc) return -1;
        have += chunk;
        b->len = have;
    }
    return 0;
}

/* The first bytes of a frame: blocking (up to the socket's SO_RCVTIMEO: the
 * caller's choice), then the rest with the frame deadline. */
static int read_all(int fd, uint8_t *p, size_t n) {
    if (!n) return 0;
    ssize_t r;
    do r = recv(fd, p, n, 0); while (r < 0 && errno == EINTR);
    if (r == 0) errno = ECONNRESET;   /* EOF: not a timeout */
    if (r <= 0) return -1;
    return read_rest(fd, p + r, n - (size_t)r);
}

/* Header and payload in one sendmsg (two iovecs): one syscall and no copy
 * of the payload (an earlier version copied frames up to 4 KiB into a stack
 * buffer, then wiped it, per message). */
int ksa_write_frame(int fd, const uint8_t *p, size_t n) {
    if (n > KSA_MAX_FRAME) return -1;
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    struct iovec iov[2] = {{h, 4}, {(void *)p, n}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = n ? 2 : 1};
    size_t left = 4 + n;
    while (left) {
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        left -= (size_t)w;
        /* A partial send (a large frame): skip what went. */
        while (m.msg_iovlen && (size_t)w >= m.msg_iov[0].iov_len) {
            w -= (ssize_t)m.msg_iov[0].iov_len;
            m.msg_iov++;
            m.msg_iovlen--;
        }
        if (m.msg_iovlen) {
            m.msg_iov[0].iov_base = (uint8_t *)m.msg_iov[0].iov_base + w;
            m.msg_iov[0].iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Zeroes, for the tail copies read_frame_next leaves beyond len. */
static void wipe(uint8_t *p, size_t n) {
    if (p && n) {
        memset(p, 0, n);
        __asm__ __volatile__("" : : "r"(p) : "memory");
    }
}

/* A buffer of at least n bytes; the old block (maybe a PIN) wiped before it goes. */
static int ensure_cap(ksa_buf *b, size_t n) {
    if (b->cap >= n) return 0;
    uint8_t *d = malloc(n);
    if (!d) return -1;
    ksa_buf_free(b);
    b->data = d;
    b->cap = n;
    return 0;
}

int ksa_read_frame(int fd, ksa_buf *b) {
    ksa_buf_reset(b);
    uint8_t h[4];
    if (read_all(fd, h, 4)) return -1;
    size_t n = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
    if (n > KSA_MAX_FRAME) return -1;
    return read_growing(fd, b, 0, n);
}

/* As ksa_read_frame, in one recv for a frame that fits the buffer: reads
 * whatever is there, up to the buffer's capacity (at least 4 KiB). Only
 * where the peer never sends ahead (calls and replies strictly alternate
 * once the hello is done: the hello's descriptor byte must not be swallowed,
 * so the hello itself is read with ksa_read_frame). Bytes past the frame
 * are a protocol violation (-1). */
int ksa_read_frame_next(int fd, ksa_buf *b) {
    ksa_buf_reset(b);
    if (ensure_cap(b, 4096)) return -1;
    ssize_t got;
    do got = recv(fd, b->data, b->cap, 0); while (got < 0 && errno == EINTR);
    if (got == 0) errno = ECONNRESET;   /* EOF: not a timeout */
    if (got <= 0) return -1;
    if (got < 4 && read_rest(fd, b->data + got, 4 - (size_t)got)) return -1;
    if (got < 4) got = 4;
    uint8_t *d = b->data;
    size_t n = (size_t)d[0] | (size_t)d[1] << 8 | (size_t)d[2] << 16 | (size_t)d[3] << 24;
    if (n > KSA_MAX_FRAME || (size_t)got > 4 + n) {
        wipe(b->data, (size_t)got);
        return -1;
    }
    size_t have = (size_t)got - 4;
    memmove(d, d + 4, have);
    wipe(d + have, 4);  /* the last 4 bytes read, copied down: no second copy */
    return read_growing(fd, b, have, n);
}

/* The client's debug-log descriptor (docs/agent.md, "Debug log"): one byte
 * carrying the descriptor as SCM_RIGHTS, or the byte alone when fd < 0. The
 * byte always goes, so the agent never waits for a descriptor that is not
 * coming. */
int ksa_send_fd(int sock, int fd) {
    uint8_t byte = fd >= 0;
    struct iovec iov = {&byte, 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
        if (n == 1) return 0;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EBADF && fd >= 0) {   /* fd not open (a closed stderr): the byte alone */
            byte = 0; m.msg_control = NULL; m.msg_controllen = 0; fd = -1;
            continue;
        }
        return -1;
    }
}

/* The agent's side: the descriptor (close-on-exec), -1 when the byte came
 * alone, -2 on a broken connection. Anything but one descriptor is closed. */
int ksa_recv_fd(int sock) {
    uint8_t byte;
    struct iovec iov = {&byte, 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int) * 4)]; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    /* The byte follows its frame at once: bounded like the rest of a frame. */
    struct pollfd pf = {sock, POLLIN, 0};
    int ready;
    do ready = poll(&pf, 1, KSA_FRAME_TIMEOUT_MS); while (ready < 0 && errno == EINTR);
    if (ready != 1) return -2;
    ssize_t n;
    do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT); while (n < 0 && errno == EINTR);
    if (n != 1) return -2;
    int got = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < 0 && count == 1) got = fd; else close(fd);
        }
    }
    if (m.msg_flags & MSG_CTRUNC) { if (got >= 0) close(got); return -1; }
    return got;
}

int ksa_log_fd_nonblocking(int fd) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return fd;
    if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) return fd;   /* a file (or a socket: MSG_DONTWAIT) */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    /* O_NOCTTY: the agent leads its session, and a terminal must not become its own. */
    int mine = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close(fd);
    return mine;
}
