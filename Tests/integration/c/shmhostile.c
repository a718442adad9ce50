/* A hostile client of the agent's shared region (79-agent-spin; docs/agent.md
 * "Round trips: shared memory"): says hello asking for a region, checks what
 * it got, then scribbles over all of it (random bytes, state words set to
 * every value) from a second thread while sending random frames on the
 * socket, reconnecting whenever the agent drops it, for a second. The agent must survive it and go on serving its other
 * clients; this program only reports what it saw.
 *
 *   shmhostile SOCK
 * Prints "region N bytes", "sealed (...)" or "not sealed: ...", then
 * "scribbled: C connections, F frames sent, K closed by the agent" (a
 * connection the agent closes is made again, for a second in all). Exit 0
 * when every connection got a region. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent_hello.h" /* the hello; agent_protocol.h: KSA_HELLO_SHM, KSA_SHM_DIR_SIZE */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static uint8_t *region;
static size_t region_len;
static volatile int stop;

static void *scribble(void *arg) {
    (void)arg;
    uint64_t s = 0x1234567u;
    while (!stop) {
        uint64_t r = next(&s);
        switch (r % 4) {
        case 0: /* a state word (either direction) to any value, often a valid one */
            __atomic_store_n((uint32_t *)(region + ((r >> 8) & 1) * KSA_SHM_DIR_SIZE), (uint32_t)((r >> 16) % 8), __ATOMIC_RELEASE);
            break;
        case 1: /* a length word to anything */
            __atomic_store_n((uint32_t *)(region + ((r >> 8) & 1) * KSA_SHM_DIR_SIZE + 4), (uint32_t)(r >> 32), __ATOMIC_RELEASE);
            break;
        default: /* random bytes anywhere */
            for (int k = 0; k < 64; k++) region[next(&s) % region_len] = (uint8_t)r;
        }
    }
    return NULL;
}

/* One hostile connection: hello, the region, then scribbling and random
 * frames until the agent closes it or `until`. 1: closed by the agent, 0:
 * still open, -1: no region. Reports the first region's size and seals. */
static int session(const char *path, double until, int first, int *frames) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return -1; }
    /* The hello, as the module sends it, asking for a region. */
    uint8_t msg[8192];
    size_t len = agent_hello(msg, KSA_HELLO_SHM);
    uint8_t r[4 + 26];   /* the reply frame with an empty reason (hello.c) */
    int ok = write(fd, msg, len) == (ssize_t)len;
    for (size_t got = 0; ok && got < sizeof r;) {
        ssize_t k = read(fd, r + got, sizeof r - got);
        if (k <= 0) ok = 0; else got += (size_t)k;
    }
    uint16_t status = 1;
    if (ok) memcpy(&status, r + 4 + 6, 2);
    /* The region's byte, with its descriptor. */
    uint8_t byte;
    struct iovec iov = {&byte, 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = NULL;
    if (ok && status == 0 && recvmsg(fd, &m, MSG_CMSG_CLOEXEC) == 1) c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
        printf("no region (hello status %u)\n", status);
        close(fd);
        return -1;
    }
    int rfd;
    memcpy(&rfd, CMSG_DATA(c), sizeof rfd);
    struct stat st;
    if (fstat(rfd, &st) != 0) { close(rfd); close(fd); return -1; }
    region_len = (size_t)st.st_size;
    if (first) {
        printf("region %zu bytes\n", region_len);
        /* Shrinking it would make the agent's next access fault (SIGBUS). */
        if (ftruncate(rfd, 0) == 0) puts("not sealed: shrunk to 0");
        else if (ftruncate(rfd, st.st_size * 2) == 0) puts("not sealed: grown");
        else printf("sealed (%s)\n", strerror(errno));
    }
    region = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
    close(rfd);
    if (region == MAP_FAILED) { close(fd); return -1; }
    stop = 0;
    pthread_t t;
    pthread_create(&t, NULL, scribble, NULL);
    /* Random frames on the socket meanwhile. */
    int closed = 0;
    while (now() < until && !closed) {
        uint8_t f[4 + 256];
        uint32_t len = (uint32_t)(next(&rng) % 256);
        memcpy(f, &len, 4);
        for (uint32_t k = 0; k < len; k++) f[4 + k] = (uint8_t)next(&rng);
        if (send(fd, f, 4 + len, MSG_NOSIGNAL) < 0) { closed = 1; break; }
        (*frames)++;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5) > 0) {
            uint8_t junk[4096];
            if (recv(fd, junk, sizeof junk, MSG_DONTWAIT) == 0) closed = 1;
        }
    }
    stop = 1;
    pthread_join(t, NULL);
    munmap(region, region_len);
    close(fd);
    return closed;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int sessions = 0, closed = 0, frames = 0;
    double until = now() + 1.0;
    while (now() < until) {
        int rc = session(argv[1], until, sessions == 0, &frames);
        if (rc < 0) return 1;
        sessions++;
        closed += rc;
    }
    printf("scribbled: %d connections, %d frames sent, %d closed by the agent\n", sessions, frames, closed);
    return 0;
}
