/* The connect-then-exec race against the agent's policy (76-agent-policy):
 * a process connects as one program and sends its hello as another.
 *
 *   policyrace SOCK hello            connect (close-on-exec), hello, print the status
 *   policyrace SOCK hello-inherit    connect WITHOUT close-on-exec, hello, print the status
 *   policyrace SOCK exec PROGRAM     connect without close-on-exec, then exec PROGRAM,
 *                                    which sends the hello on the inherited socket
 *   policyrace SOCK hello-fd N       (what PROGRAM runs) hello on descriptor N
 *
 * Prints "status N" (the agent's hello status: 0 accepted, 3 refused) or
 * "closed" when the agent dropped the connection. The hello names the
 * store in KEYSHARE_HOME, as the module's does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_protocol.h" /* KSA_MAGIC, KSA_VERSION: the hello speaks the protocol under test */

static int connect_to(const char *path, int cloexec) {
    int fd = socket(AF_UNIX, SOCK_STREAM | (cloexec ? SOCK_CLOEXEC : 0), 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(2); }
    return fd;
}

static void put(uint8_t **p, const void *v, size_t n) { memcpy(*p, v, n); *p += n; }

static int hello(int fd) {
    uint8_t msg[8192], *p = msg + 4;
    uint32_t magic = KSA_MAGIC, n;
    uint16_t version = KSA_VERSION, flags = 0;
    uint8_t token[16] = {0};
    put(&p, &magic, 4); put(&p, &version, 2); put(&p, &flags, 2); put(&p, token, 16);
    const char *home = getenv("KEYSHARE_HOME");
    const char *groups = getenv("KEYSHARE_ACCESS_GROUPS");
    const char *vals[4] = {home, NULL, getenv("HOME"), groups};
    for (int i = 0; i < 4; i++) {
        uint8_t present = vals[i] != NULL;
        n = vals[i] ? (uint32_t)strlen(vals[i]) : 0;
        if (n > 2048) n = 0;
        put(&p, &present, 1); put(&p, &n, 4);
        if (n) put(&p, vals[i], n);
    }
    n = (uint32_t)(p - msg - 4);
    memcpy(msg, &n, 4);
    if (write(fd, msg, (size_t)(p - msg)) != p - msg) { puts("closed"); return 1; }
    uint8_t r[4 + 24];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = read(fd, r + got, sizeof r - got);
        if (k <= 0) { puts("closed"); return 1; }
        got += (size_t)k;
    }
    uint16_t status;
    memcpy(&status, r + 4 + 6, 2);
    printf("status %u\n", status);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    if (!strcmp(argv[2], "hello")) return hello(connect_to(argv[1], 1));
    if (!strcmp(argv[2], "hello-inherit")) return hello(connect_to(argv[1], 0));
    if (!strcmp(argv[2], "hello-fd") && argc == 4) return hello(atoi(argv[3]));
    if (!strcmp(argv[2], "exec") && argc == 4) {
        int fd = connect_to(argv[1], 0);
        char num[16];
        snprintf(num, sizeof num, "%d", fd);
        execl(argv[3], argv[3], argv[1], "hello-fd", num, (char *)NULL);
        perror("exec");
        return 2;
    }
    return 2;
}
