/* Length-prefixed frames over a stream socket (include/agent_protocol.h). */
#include <errno.h>
#include <stdlib.h>
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
