/*
 * An agent of an older protocol (83-agent-lifetime.sh, issue 26 defect 10): it
 * listens where the agent would, answers every hello as keyshare 0.3.0's agent
 * answers a client of another version (u32 magic, u16 version 4, u16 status 1,
 * 16-byte token: "other protocol version"), and exits on SIGTERM, writing
 * "TERM" to its record file first, as 0.3.0's agent exits on it. Run it as
 * `exec -a keyshare oldagent agent SOCKET RECORD`, so its command line is a
 * `keyshare agent`'s. A hello that carries display variables (hello field 2,
 * "DISPLAY=...") also writes "display" (82-agent-trust: a setuid host sends none).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *sock_path, *record;

static void note(const char *what) {
    FILE *f = fopen(record, "a");
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}

static void on_term(int sig) {
    (void)sig;
    note("TERM");
    unlink(sock_path);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc != 4 || strcmp(argv[1], "agent") != 0) return 2;
    sock_path = argv[2];
    record = argv[3];
    signal(SIGTERM, on_term);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, sock_path, sizeof a.sun_path - 1);
    unlink(sock_path);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 8) != 0) { perror("listen"); return 1; }
    note("listening");
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        uint8_t buf[65536];
        ssize_t n = read(c, buf, sizeof buf);
        if (n >= 10) {
            char line[64];
            snprintf(line, sizeof line, "hello v%u", (unsigned)(buf[8] | buf[9] << 8));
            note(line);
            if (memmem(buf, (size_t)n, "DISPLAY=", 8)) note("display");
            uint8_t r[4 + 24] = {24, 0, 0, 0, 'K', 'S', 'A', '1', 4, 0, 1, 0};
            (void)!write(c, r, sizeof r);
        }
        close(c);
    }
}
