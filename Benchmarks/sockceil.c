/* Ceiling of one agent-mode C_EncryptInit + C_Encrypt of a 16 KiB message:
 * two strictly alternating round trips over an AF_UNIX stream socket
 * (init: ~128 B each way; encrypt: 16 KiB + header in, 16 KiB + tag out),
 * the server doing no crypto. Reports messages/s and MB/s of plaintext: the
 * ceiling of the agent mode rows (docs/benchmarks.md).
 * With ONE set, only the 16 KiB round trip: the ceiling of C_EncryptMessage
 * and C_EncryptUpdate, one call per message.
 *   cc -O2 -o sockceil Benchmarks/sockceil.c && ./sockceil [SECONDS [ONE]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define MSG 16384
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int rd(int fd, char *b, size_t n) { size_t g = 0; while (g < n) { ssize_t r = recv(fd, b + g, n - g, 0); if (r <= 0) return -1; g += r; } return 0; }
static int wr(int fd, const char *b, size_t n) { size_t g = 0; while (g < n) { ssize_t r = send(fd, b + g, n - g, MSG_NOSIGNAL); if (r <= 0) return -1; g += r; } return 0; }
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int one = argc > 2;
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    static char buf[MSG + 256];
    pid_t p = fork();
    if (p == 0) {
        close(sv[0]);
        for (;;) {
            if (!one && (rd(sv[1], buf, 128) || wr(sv[1], buf, 128))) _exit(0);
            if (rd(sv[1], buf, MSG + 64) || wr(sv[1], buf, MSG + 48)) _exit(0);
        }
    }
    close(sv[1]);
    long n = 0;
    double t0 = now(), t;
    do {
        if (!one) { wr(sv[0], buf, 128); rd(sv[0], buf, 128); }
        wr(sv[0], buf, MSG + 64); rd(sv[0], buf, MSG + 48);
        n++;
        t = now();
    } while (t - t0 < secs);
    close(sv[0]);
    waitpid(p, NULL, 0);
    printf("%.0f msgs/s, %.0f MB/s\n", n / (t - t0), n / (t - t0) * MSG / 1e6);
    return 0;
}
