// keyshare's own TCTI for the two TPM transports it documents, "swtpm:" and
// "device:" (docs/tpm.md, "Descriptors"). tpm2-tss 3.2 opens its sockets and
// the device without close-on-exec: its swtpm TCTI connects a socket for each
// command, its device TCTI keeps /dev/tpm* open for the connection, and a host
// thread that forks and execs while a TPM command of the module is in flight
// hands that descriptor to the child (measured: Tests/integration/c/tpmfork.c).
// Here every descriptor is created with SOCK_CLOEXEC / O_CLOEXEC in the same
// call, so there is no window at all. The wire formats are tpm2-tss's:
// swtpm's server port takes a raw TPM command and answers a raw response (one
// connection per command, as tpm2-tss does, so several processes take turns);
// a TPM character device takes one command per write() and gives the whole
// response to one read().
#include "tcti_cloexec.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define KTCTI_MAGIC 0x6b73746374690a01ull  // "kstcti", ours
#define KTCTI_MAX 4096                       // TPM2_MAX_COMMAND_SIZE of tpm2-tss

enum { KTCTI_SWTPM = 1, KTCTI_DEVICE = 2 };

typedef struct {
    TSS2_TCTI_CONTEXT_COMMON_V2 common;
    int kind;
    char host[256];
    char port[16];
    int fd;          // swtpm: the socket of the command in flight; device: the device
    size_t have;     // bytes of a received response not yet handed out
    uint8_t buf[KTCTI_MAX];
} ktcti;

static ktcti *ctx_of(TSS2_TCTI_CONTEXT *c) {
    ktcti *k = (ktcti *)c;
    return (k && k->common.v1.magic == KTCTI_MAGIC) ? k : NULL;
}

static int write_all(int fd, const uint8_t *p, size_t n, int sock) {
    while (n > 0) {
        ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int swtpm_connect(const ktcti *k) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(k->host, k->port, &hints, &res) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int rc;
        do { rc = connect(fd, a->ai_addr, a->ai_addrlen); } while (rc < 0 && errno == EINTR);
        if (rc < 0) { close(fd); fd = -1; }
    }
    freeaddrinfo(res);
    return fd;
}

static void drop_fd(ktcti *k) {
    if (k->fd >= 0) close(k->fd);
    k->fd = -1;
}

static TSS2_RC k_transmit(TSS2_TCTI_CONTEXT *c, size_t size, const uint8_t *command) {
    ktcti *k = ctx_of(c);
    if (!k) return TSS2_TCTI_RC_BAD_CONTEXT;
    if (!command || size < 10 || size > KTCTI_MAX) return TSS2_TCTI_RC_BAD_VALUE;
    k->have = 0;
    if (k->kind == KTCTI_SWTPM) {
        drop_fd(k);
        k->fd = swtpm_connect(k);
        if (k->fd < 0) return TSS2_TCTI_RC_IO_ERROR;
    }
    if (write_all(k->fd, command, size, k->kind == KTCTI_SWTPM) != 0) {
        if (k->kind == KTCTI_SWTPM) drop_fd(k);
        return TSS2_TCTI_RC_IO_ERROR;
    }
    return TSS2_RC_SUCCESS;
}

/// Reads the whole response once; a call with response NULL asks for its size (tpm2-tss's partial-read contract).
static TSS2_RC k_receive(TSS2_TCTI_CONTEXT *c, size_t *size, uint8_t *response, int32_t timeout) {
    (void)timeout;  // SAPI blocks (TSS2_TCTI_TIMEOUT_BLOCK); so do we
    ktcti *k = ctx_of(c);
    if (!k) return TSS2_TCTI_RC_BAD_CONTEXT;
    if (!size) return TSS2_TCTI_RC_BAD_REFERENCE;
    if (k->have == 0) {
        if (k->fd < 0) return TSS2_TCTI_RC_BAD_SEQUENCE;
        size_t total = 0;
        if (k->kind == KTCTI_DEVICE) {
            ssize_t r;
            do { r = read(k->fd, k->buf, sizeof k->buf); } while (r < 0 && errno == EINTR);
            if (r < 10) return TSS2_TCTI_RC_IO_ERROR;
            total = (size_t)r;
        } else {
            int ok = read_all(k->fd, k->buf, 10) == 0;
            size_t want = ok ? ((size_t)k->buf[2] << 24 | (size_t)k->buf[3] << 16 | (size_t)k->buf[4] << 8 | k->buf[5]) : 0;
            ok = ok && want >= 10 && want <= sizeof k->buf && read_all(k->fd, k->buf + 10, want - 10) == 0;
            drop_fd(k);  // one connection per command, as tpm2-tss's swtpm TCTI
            if (!ok) return TSS2_TCTI_RC_IO_ERROR;
            total = want;
        }
        k->have = total;
    }
    if (!response) { *size = k->have; return TSS2_RC_SUCCESS; }
    if (*size < k->have) { *size = k->have; return TSS2_TCTI_RC_INSUFFICIENT_BUFFER; }
    memcpy(response, k->buf, k->have);
    *size = k->have;
    k->have = 0;
    return TSS2_RC_SUCCESS;
}

static void k_finalize(TSS2_TCTI_CONTEXT *c) {
    ktcti *k = ctx_of(c);
    if (!k) return;
    drop_fd(k);
    explicit_bzero(k->buf, sizeof k->buf);
}

static TSS2_RC k_cancel(TSS2_TCTI_CONTEXT *c) { (void)c; return TSS2_TCTI_RC_NOT_IMPLEMENTED; }

static TSS2_RC k_poll(TSS2_TCTI_CONTEXT *c, TSS2_TCTI_POLL_HANDLE *h, size_t *n) {
    (void)c; (void)h; (void)n;
    return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC k_locality(TSS2_TCTI_CONTEXT *c, uint8_t locality) {
    (void)c;
    return locality == 0 ? TSS2_RC_SUCCESS : TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC k_sticky(TSS2_TCTI_CONTEXT *c, TPM2_HANDLE *h, uint8_t sticky) {
    (void)c; (void)h; (void)sticky;
    return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

/// "host=H,port=P" in any order, both optional (tpm2-tss's swtpm defaults: localhost, 2321).
static int parse_swtpm(ktcti *k, const char *conf) {
    strcpy(k->host, "localhost");
    strcpy(k->port, "2321");
    while (conf && *conf) {
        const char *end = strchr(conf, ',');
        size_t len = end ? (size_t)(end - conf) : strlen(conf);
        if (len > 5 && !strncmp(conf, "host=", 5) && len - 5 < sizeof k->host) {
            memcpy(k->host, conf + 5, len - 5);
            k->host[len - 5] = 0;
        } else if (len > 5 && !strncmp(conf, "port=", 5) && len - 5 < sizeof k->port) {
            memcpy(k->port, conf + 5, len - 5);
            k->port[len - 5] = 0;
            char *e;
            long p = strtol(k->port, &e, 10);
            if (*e || p <= 0 || p > 65535) return -1;
        } else {
            return -1;
        }
        conf = end ? end + 1 : NULL;
    }
    return 0;
}

int ktcti_handles(const char *tcti) {
    return tcti && (!strcmp(tcti, "swtpm") || !strncmp(tcti, "swtpm:", 6) || !strcmp(tcti, "device") ||
                    !strncmp(tcti, "device:", 7));
}

TSS2_RC ktcti_open(const char *tcti, TSS2_TCTI_CONTEXT **out) {
    *out = NULL;
    if (!ktcti_handles(tcti)) return TSS2_TCTI_RC_BAD_VALUE;
    ktcti *k = calloc(1, sizeof *k);
    if (!k) return TSS2_TCTI_RC_MEMORY;
    k->fd = -1;
    const char *colon = strchr(tcti, ':');
    const char *conf = colon ? colon + 1 : "";
    if (!strncmp(tcti, "swtpm", 5)) {
        k->kind = KTCTI_SWTPM;
        // No probe connection here (tpm2-tss's swtpm TCTI makes one): swtpm
        // accepts one connection at a time from a short queue, and two probes
        // that were never served (a slot list's, then this) left the next
        // command's SYN dropped and retried after 1 s (measured: 1 login in 5).
        // A missing swtpm shows at the first command (TSS2_TCTI_RC_IO_ERROR);
        // ktpm_probe sends one for a token's presence.
        if (parse_swtpm(k, conf) != 0) { free(k); return TSS2_TCTI_RC_BAD_VALUE; }
    } else {
        k->kind = KTCTI_DEVICE;
        const char *path = *conf ? conf : "/dev/tpm0";  // tpm2-tss's default for "device:"
        do { k->fd = open(path, O_RDWR | O_CLOEXEC); } while (k->fd < 0 && errno == EINTR);
        if (k->fd < 0) { free(k); return TSS2_TCTI_RC_IO_ERROR; }
    }
    TSS2_TCTI_CONTEXT_COMMON_V1 *v1 = &k->common.v1;
    v1->magic = KTCTI_MAGIC;
    v1->version = 2;
    v1->transmit = k_transmit;
    v1->receive = k_receive;
    v1->finalize = k_finalize;
    v1->cancel = k_cancel;
    v1->getPollHandles = k_poll;
    v1->setLocality = k_locality;
    k->common.makeSticky = k_sticky;
    *out = (TSS2_TCTI_CONTEXT *)k;
    return TSS2_RC_SUCCESS;
}

void ktcti_close(TSS2_TCTI_CONTEXT *c) {
    if (!ctx_of(c)) return;
    k_finalize(c);
    free(c);
}
