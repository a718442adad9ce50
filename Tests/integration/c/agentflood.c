/*
 * A hostile program of the agent's own user (84-agent-flood.sh, issue 26):
 * connections to the agent's socket that never finish a first frame.
 *
 *   agentflood SOCKET silent [-n N] [-p P] [-s S] [-t T] [-r]
 *       N connections (default 1100) spread over P processes (default 1),
 *       none sending a byte; -r: reconnect each one the agent closes.
 *   agentflood SOCKET hello [-n N] [-p P] [-s S] [-t T]
 *       N connections that each send a new client's hello (as the module
 *       does, agent_hello.h), wait for its answer, and then send nothing:
 *       past the gate, each holds a thread and descriptors in the agent.
 *   agentflood SOCKET big [-n N] [-z Z] [-s S]
 *       N connections (default 8) that each send the header of a 16 MiB
 *       control request ("KSC1") and 1 KiB of it, then stall; Z more
 *       (default 0) that send a hello's 8-byte header and nothing else.
 *
 * Each process raises its own RLIMIT_NOFILE, opens its connections (a full
 * backlog is retried for at most T seconds, default 3, then counted as
 * failed), prints
 * "ready" once every process has, then holds them for S seconds (default
 * 30) or until SIGUSR1/SIGTERM, noting when the agent closes each. At the
 * end each process prints one line:
 *   flood opened=X failed=F eof=E eof_s=0:A,5:B,... open=K reconnects=R
 * eof_s counts the closes by whole seconds after that connection's connect.
 * Children die with the parent (PR_SET_PDEATHSIG), so stopping the parent
 * by its PID stops them all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "agent_hello.h"

#define MAX_BUCKET 64

static volatile sig_atomic_t stop;
static void on_stop(int sig) { (void)sig; stop = 1; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static struct sockaddr_un sa;

/* A connected socket, or -1 once `until` has passed (the backlog stayed full). */
static int open_one(double until) {
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
        int e = errno;
        close(fd);
        if ((e != EAGAIN && e != EINPROGRESS) || now_s() >= until) return -1;
        nap_ms(5);
    }
}

static void send_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    double until = now_s() + 2;
    while (n && now_s() < until) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w > 0) { b += w; n -= (size_t)w; continue; }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) { nap_ms(1); continue; }
        return;
    }
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* One process's share: n connections of `kind` (0 silent, 1 big, 2 hello header only, 3 hello). */
static int run(int n_silent, int n_big, int n_head, int n_hello, int reconnect, double hold, double budget, int ready_fd) {
    int n = n_silent + n_big + n_head + n_hello;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = (rlim_t)n + 64;
        if (rl.rlim_max < rl.rlim_cur) rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "agentflood: cannot raise RLIMIT_NOFILE to %d: %s\n", n + 64, strerror(errno));
            return 2;
        }
    }
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    double *born = calloc((size_t)n, sizeof *born);
    int *kind = calloc((size_t)n, sizeof *kind);
    if (!pf || !born || !kind) return 2;
    static uint8_t big[8 + 1024];
    put32(big, 16u << 20);        /* the most a frame may announce (KSA_MAX_FRAME) */
    put32(big + 4, 0x3143534bu);  /* "KSC1": a control request */
    memset(big + 8, 'x', sizeof big - 8);
    uint8_t head[8];
    put32(head, 100);
    put32(head + 4, 0x3141534bu); /* "KSA1": a module hello */
    static uint8_t hello[8192];
    size_t hello_len = agent_hello(hello, 0);

    int opened = 0, failed = 0, eof = 0, reconnects = 0;
    unsigned buckets[MAX_BUCKET + 1] = {0};
    double until = now_s() + budget;
    for (int i = 0; i < n; i++) {
        kind[i] = i < n_silent ? 0 : i < n_silent + n_big ? 1 : i < n_silent + n_big + n_head ? 2 : 3;
        int fd = open_one(until);
        pf[i] = (struct pollfd){fd, POLLIN, 0};
        if (fd < 0) { failed++; continue; }
        opened++;
        born[i] = now_s();
        if (kind[i] == 1) send_all(fd, big, sizeof big);
        if (kind[i] == 2) send_all(fd, head, sizeof head);
        if (kind[i] == 3) {
            /* One at a time: each hello answered before the next (at most 2 s). */
            send_all(fd, hello, hello_len);
            struct pollfd w = {fd, POLLIN, 0};
            poll(&w, 1, 2000);
        }
    }
    if (ready_fd >= 0) { (void)!write(ready_fd, "r", 1); close(ready_fd); }

    double end = now_s() + hold;
    while (!stop && now_s() < end) {
        int r = poll(pf, (nfds_t)n, 100);
        if (r <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (pf[i].fd < 0 || !pf[i].revents) continue;
            char c[256];
            ssize_t got = recv(pf[i].fd, c, sizeof c, MSG_DONTWAIT);
            if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) continue;
            /* Closed by the agent (EOF or reset). */
            int at = (int)(now_s() - born[i]);
            buckets[at < MAX_BUCKET ? at : MAX_BUCKET]++;
            eof++;
            close(pf[i].fd);
            pf[i].fd = -1;
            if (reconnect && kind[i] == 0) {
                int fd = open_one(now_s() + 0.2);
                if (fd >= 0) { pf[i].fd = fd; born[i] = now_s(); reconnects++; }
            }
        }
    }
    int open_now = 0;
    for (int i = 0; i < n; i++) open_now += pf[i].fd >= 0;
    char hist[1024] = "";
    size_t used = 0;
    for (int b = 0; b <= MAX_BUCKET; b++)
        if (buckets[b] && used < sizeof hist - 32)
            used += (size_t)snprintf(hist + used, sizeof hist - used, "%s%d:%u", used ? "," : "", b, buckets[b]);
    printf("flood opened=%d failed=%d eof=%d eof_s=%s open=%d reconnects=%d\n", opened, failed, eof,
           used ? hist : "-", open_now, reconnects);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: agentflood SOCKET silent|hello|big [-n N] [-p P] [-z Z] [-s S] [-t T] [-r]\n");
        return 2;
    }
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
    int big = strcmp(argv[2], "big") == 0, hellos = strcmp(argv[2], "hello") == 0;
    int n = big ? 8 : 1100, procs = 1, heads = 0, reconnect = 0;
    double hold = 30, budget = 3;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-r")) reconnect = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-p")) procs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-z")) heads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-s")) hold = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-t")) budget = atof(argv[++i]);
        else { fprintf(stderr, "agentflood: unknown argument %s\n", argv[i]); return 2; }
    }
    if (procs < 1 || n < 0) return 2;
    struct sigaction act = {.sa_handler = on_stop};
    sigaction(SIGUSR1, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);

    int ready[2];
    if (pipe(ready) != 0) return 2;
    pid_t *kids = calloc((size_t)procs, sizeof *kids);
    for (int k = 0; k < procs; k++) {
        int share = n / procs + (k < n % procs);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1) _exit(2);
            close(ready[0]);
            _exit(run(big || hellos ? 0 : share, big ? share : 0, k == 0 ? heads : 0, hellos ? share : 0, reconnect, hold,
                      budget, ready[1]));
        }
        kids[k] = pid;
    }
    close(ready[1]);
    int got = 0;
    char c;
    while (got < procs && !stop) {
        ssize_t r = read(ready[0], &c, 1);
        if (r == 1) got++;
        else if (r == 0 || errno != EINTR) break;
    }
    printf("ready\n");
    fflush(stdout);
    while (!stop) {
        int status;
        pid_t w = waitpid(-1, &status, 0);
        if (w < 0 && errno == ECHILD) break;
    }
    if (stop)
        for (int k = 0; k < procs; k++) kill(kids[k], SIGUSR1);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {}
    return 0;
}
