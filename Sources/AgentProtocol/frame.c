/* Length-prefixed frames over a stream socket (include/agent_protocol.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "agent_protocol.h"

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int ksa_write_frame(int fd, const uint8_t *p, size_t n) {
    if (n > KSA_MAX_FRAME) return -1;
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    /* One send for small frames: header and payload in one segment. */
    if (n <= 4096) {
        uint8_t tmp[4 + 4096];
        for (int i = 0; i < 4; i++) tmp[i] = h[i];
        for (size_t i = 0; i < n; i++) tmp[4 + i] = p[i];
        int rc = write_all(fd, tmp, 4 + n);
        for (size_t i = 0; i < 4 + n; i++) ((volatile uint8_t *)tmp)[i] = 0;
        return rc;
    }
    if (write_all(fd, h, 4)) return -1;
    return write_all(fd, p, n);
}

int ksa_read_frame(int fd, ksa_buf *b) {
    ksa_buf_reset(b);
    uint8_t h[4];
    if (read_all(fd, h, 4)) return -1;
    size_t n = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
    if (n > KSA_MAX_FRAME) return -1;
    if (b->cap < n) {
        ksa_buf_free(b);
        b->data = malloc(n);
        if (!b->data) return -1;
        b->cap = n;
    }
    b->len = n;
    return read_all(fd, b->data, n);
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
    ssize_t n;
    do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
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
