/* The connect-then-exec race against the agent's policy (14-agent-policy):
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

#include "agent_hello.h" /* the hello of the protocol under test */

static int connect_to(const char *path, int cloexec) {
    int fd = socket(AF_UNIX, SOCK_STREAM | (cloexec ? SOCK_CLOEXEC : 0), 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(2); }
    return fd;
}

static int hello(int fd) {
    uint8_t msg[8192];
    size_t len = agent_hello(msg, 0);
    if (write(fd, msg, len) != (ssize_t)len) { puts("closed"); return 1; }
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
