/*
 * libFuzzer target for the agent's gate (Sources/AgentProtocol/gate.c,
 * docs/agent.md "Connections"): the connections an agent has accepted and
 * reads without blocking until their first frame. Hostile clients hold the
 * other ends of socketpairs and write anything, in any pieces, in any order,
 * and close when they like. The input is a script:
 *   byte 0: the gate's limits: max_pending 1..4, max_per_pid 1..3, a byte
 *     budget of 64, 4100, 12000 or 1 MiB, a deadline of 60 s or 0 ms (every
 *     connection not finished at a service is late: "in time" refusals)
 *   then ops: 0 connect (pid from a byte; ksa_gate_add), 1 write n bytes,
 *     2 write a header (hello, control or any magic; any u32 length),
 *     3 write up to 256 KiB of one byte, 4 close the client's end,
 *     5 service (real poll, or every descriptor claimed ready) and take
 *     the events.
 * What must hold (an abort otherwise): a connection is refused at add exactly
 * when its process has its most; an add to a full gate pushes out one that
 * had waited longest (one event, at once); the gate never holds
 * more bytes than its budget; every connection ends in exactly one event with
 * its own descriptor and pid; a done event's frame is exactly the bytes that
 * were sent after the length (len == the header's length, kind == the
 * magic's, within the kind's bound), its descriptor is blocking again and
 * holds exactly the bytes sent after the frame; a refused event's descriptor
 * is open and its reason agrees with what was sent ("" only for a peer that
 * closed before 8 bytes, "sent nothing" only when nothing was sent). At the
 * end every client closes, one service ends every connection, the gate holds
 * 0 bytes and is freed (LeakSanitizer sees anything left).
 * Without -DFUZZ_MAIN_REPLAY a libFuzzer target (clang -fsanitize=fuzzer,address,undefined
 * with gate.c, spin.c and codec.c); with it, a plain program that replays
 * files (Tests/integration/62-fuzz-replay.sh, make test). With
 * -DFUZZ_MAKE_SEEDS it writes seed scripts to a directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../Sources/AgentProtocol/include/agent_protocol.h"

#define MAX_CONNS 16
#define MAX_SENT (2u << 20)

typedef struct {
    int client, agent;   /* client -1 once closed; agent -1 once its event came */
    pid_t pid;
    int64_t added_ms, added_by_ms;   /* the clock just before and just after ksa_gate_add */
    int closed;          /* the client closed its end */
    uint8_t *sent;       /* every byte the client's end accepted (grows, at most MAX_SENT) */
    size_t nsent, cap;
} conn;

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void send_bytes(conn *c, const uint8_t *p, size_t n) {
    if (c->closed) return;
    if (n > MAX_SENT - c->nsent) n = MAX_SENT - c->nsent;
    if (!n) return;
    if (c->nsent + n > c->cap) {
        size_t want = c->cap ? c->cap : 256;
        while (want < c->nsent + n) want *= 2;
        uint8_t *p2 = realloc(c->sent, want);
        if (!p2) abort();
        c->sent = p2;
        c->cap = want;
    }
    ssize_t w = send(c->client, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w <= 0) return;
    memcpy(c->sent + c->nsent, p, (size_t)w);
    c->nsent += (size_t)w;
}

static conn *by_agent_fd(conn *cs, int n, int fd) {
    for (int i = 0; i < n; i++)
        if (cs[i].agent == fd) return &cs[i];
    return NULL;
}

/* One event: checked against what its client sent, then closed and freed. */
static void check_event(conn *cs, int n, const ksa_gate_event *ev) {
    conn *c = by_agent_fd(cs, n, ev->fd);
    if (!c || ev->fd < 0 || ev->pid != c->pid) abort();
    if (fcntl(ev->fd, F_GETFD) < 0) abort();
    if (ev->kind) {
        if (ev->why || !ev->data || c->nsent < 8) abort();
        uint32_t len = le32(c->sent), magic = le32(c->sent + 4);
        int kind = magic == KSA_MAGIC ? KSA_GATE_HELLO : magic == KSA_CONTROL_MAGIC ? KSA_GATE_CONTROL : 0;
        if (ev->kind != kind || ev->len != len || ev->cap < ev->len || len < 8) abort();
        if (len > (kind == KSA_GATE_HELLO ? KSA_HELLO_MAX_FRAME : KSA_MAX_FRAME)) abort();
        if (c->nsent < 4 + (size_t)len || memcmp(ev->data, c->sent + 4, len) != 0) abort();
        int fl = fcntl(ev->fd, F_GETFL);
        if (fl < 0 || (fl & O_NONBLOCK)) abort();
        /* Exactly the frame was read: what follows it is still in the socket. */
        static uint8_t rest[MAX_SENT];
        size_t have = 0;
        for (;;) {
            ssize_t r = recv(ev->fd, rest + have, sizeof rest - have, MSG_DONTWAIT);
            if (r <= 0) break;
            have += (size_t)r;
        }
        if (have != c->nsent - 4 - len || memcmp(rest, c->sent + 4 + len, have) != 0) abort();
        free(ev->data);
    } else {
        if (!ev->why || ev->data) abort();
        if (!ev->why[0] && (!c->closed || c->nsent >= 8)) abort();
        if (!strcmp(ev->why, "it sent nothing in time") && c->nsent != 0) abort();
        if (!strcmp(ev->why, "the connection closed in the middle of its first frame") && !c->closed) abort();
        if (!strcmp(ev->why, "not a keyshare hello or control request")) {
            uint32_t magic = c->nsent >= 8 ? le32(c->sent + 4) : KSA_MAGIC;
            if (magic == KSA_MAGIC || magic == KSA_CONTROL_MAGIC) abort();
        }
        if (!strcmp(ev->why, "a hello of an impossible length")) {
            if (c->nsent < 8 || le32(c->sent + 4) != KSA_MAGIC) abort();
            uint32_t len = le32(c->sent);
            if (len >= 8 && len <= KSA_HELLO_MAX_FRAME) abort();
        }
    }
    close(ev->fd);
    c->agent = -1;
}

static const char pushed_out[] = "pushed out of the full gate by a newer connection (the longest waiting)";

/* After an add to a full gate: exactly one event, the push-out of a connection
 * that had waited longest (no other waiting one was added before it). */
static void take_pushed_out(ksa_gate *g, conn *cs, int n) {
    ksa_gate_event ev;
    if (ksa_gate_take(g, &ev) != 1 || !ev.why || strcmp(ev.why, pushed_out) != 0) abort();
    conn *c = by_agent_fd(cs, n, ev.fd);
    if (!c || c == &cs[n - 1]) abort();
    for (int k = 0; k < n - 1; k++)
        if (cs[k].agent >= 0 && cs[k].added_by_ms < c->added_ms) abort();
    check_event(cs, n, &ev);
    if (ksa_gate_take(g, &ev) != 0) abort();
}

static void service(ksa_gate *g, conn *cs, int n, int real_poll, unsigned max, size_t budget) {
    struct pollfd pfds[MAX_CONNS];
    int k = ksa_gate_pollfds(g, pfds, MAX_CONNS);
    if (k != (int)ksa_gate_count(g)) abort();
    for (int i = 0; i < k; i++) {
        conn *c = by_agent_fd(cs, n, pfds[i].fd);
        if (!c || pfds[i].events != POLLIN) abort();
        if (!real_poll) pfds[i].revents = POLLIN;
    }
    if (real_poll && k) (void)poll(pfds, (nfds_t)k, 0);
    ksa_gate_service(g, pfds, k);
    ksa_gate_event ev;
    while (ksa_gate_take(g, &ev) == 1) check_event(cs, n, &ev);
    unsigned count = ksa_gate_count(g);
    if (count > max || ksa_gate_bytes(g) > budget) abort();
    if ((ksa_gate_timeout_ms(g) < 0) != (count == 0)) abort();
    unsigned waiting = 0;
    for (int i = 0; i < n; i++) waiting += cs[i].agent >= 0;
    if (waiting != count) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const size_t budgets[4] = {64, 4100, 12000, 1u << 20};
    uint8_t cfg = data[0];
    unsigned max = 1 + (cfg & 3), per_pid = 1 + ((cfg >> 2) & 3) % 3;
    size_t budget = budgets[(cfg >> 4) & 3];
    ksa_gate *g = ksa_gate_new(max, per_pid, budget, (cfg >> 6) & 1 ? 0 : 60000);
    if (!g) abort();
    conn cs[MAX_CONNS];
    int n = 0;
    static uint8_t bulk[256u << 10];
    size_t i = 1;
#define NEXT() (i < size ? data[i++] : 0)
    while (i < size) {
        uint8_t op = NEXT() % 6;
        conn *c = NULL;
        if (op >= 1 && op <= 4) {
            uint8_t which = NEXT();
            if (!n) continue;
            c = &cs[which % n];
        }
        switch (op) {
        case 0: {
            pid_t pid = 100 + NEXT() % 3;
            if (n == MAX_CONNS) break;
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) abort();
            unsigned waiting = 0, mine = 0;
            for (int k = 0; k < n; k++) {
                waiting += cs[k].agent >= 0;
                mine += cs[k].agent >= 0 && cs[k].pid == pid;
            }
            /* Refused only for its process's limit; a full gate pushes out its longest waiter. */
            const char *why = NULL;
            int64_t before = (int64_t)(ksa_mono_ns() / 1000000u);
            int rc = ksa_gate_add(g, sv[0], pid, &why);
            int64_t after = (int64_t)(ksa_mono_ns() / 1000000u);
            if ((rc != 0) != (mine >= per_pid)) abort();
            if (rc != 0) {
                if (!why || !why[0]) abort();
                ksa_gate_event ev;
                if (ksa_gate_take(g, &ev) != 0) abort();
                close(sv[0]);
                close(sv[1]);
                break;
            }
            cs[n++] = (conn){.client = sv[1], .agent = sv[0], .pid = pid, .added_ms = before, .added_by_ms = after};
            if (waiting >= max) take_pushed_out(g, cs, n);
            else {
                ksa_gate_event ev;
                if (ksa_gate_take(g, &ev) != 0) abort();
            }
            if (ksa_gate_count(g) > max) abort();
            break;
        }
        case 1: {
            size_t len = NEXT();
            if (len > size - i) len = size - i;
            send_bytes(c, data + i, len);
            i += len;
            break;
        }
        case 2: {
            uint8_t h[8], kind = NEXT() % 3;
            uint32_t magic = kind == 0 ? KSA_MAGIC : kind == 1 ? KSA_CONTROL_MAGIC : 0;
            for (int k = 0; k < 4; k++) h[k] = NEXT();
            for (int k = 0; k < 4; k++) {
                uint8_t m = (uint8_t)(magic >> (8 * k));
                h[4 + k] = kind == 2 ? NEXT() : m;
            }
            send_bytes(c, h, 8);
            break;
        }
        case 3: {
            size_t len = (size_t)NEXT() << 8;
            len = (len | NEXT()) * 4;
            memset(bulk, NEXT(), len < sizeof bulk ? len : sizeof bulk);
            send_bytes(c, bulk, len < sizeof bulk ? len : sizeof bulk);
            break;
        }
        case 4:
            if (!c->closed) {
                close(c->client);
                c->client = -1;
                c->closed = 1;
            }
            break;
        case 5:
            service(g, cs, n, NEXT() & 1, max, budget);
            break;
        }
    }
#undef NEXT
    /* Every client goes: one service ends every connection. */
    for (int k = 0; k < n; k++)
        if (!cs[k].closed) {
            close(cs[k].client);
            cs[k].closed = 1;
        }
    service(g, cs, n, 1, max, budget);
    if (ksa_gate_count(g) != 0 || ksa_gate_bytes(g) != 0) abort();
    ksa_gate_free(g);
    for (int k = 0; k < n; k++) free(cs[k].sent);
    return 0;
}

#include "replay_main.h"

#ifdef FUZZ_MAKE_SEEDS
/* Seeds: a hello in one write and in pieces with the descriptor byte after it,
 * a control request, two processes, limits reached, a bad magic, a close. */

/* op 1 with the bytes of a whole frame (u32 length + payload), in pieces of `piece`. */
static void put_frame(ksa_buf *s, uint8_t which, const ksa_buf *payload, size_t piece) {
    ksa_buf f;
    ksa_buf_init(&f);
    ksa_put_u32(&f, (uint32_t)payload->len);
    ksa_put_raw(&f, payload->data, payload->len);
    for (size_t off = 0; off < f.len; off += piece) {
        size_t n = f.len - off < piece ? f.len - off : piece;
        ksa_put_u8(s, 1);
        ksa_put_u8(s, which);
        ksa_put_u8(s, (uint8_t)n);
        ksa_put_raw(s, f.data + off, n);
        ksa_put_u8(s, 5);
        ksa_put_u8(s, 1);
    }
    ksa_buf_free(&f);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    static const uint8_t zero[KSA_TOKEN_LEN];
    ksa_buf hello, control, s;
    ksa_buf_init(&hello);
    ksa_buf_init(&control);
    ksa_buf_init(&s);
    ksa_hello_build(&hello, KSA_HELLO_LOG | KSA_HELLO_SHM, zero, "com.example.app");
    ksa_put_u32(&control, KSA_CONTROL_MAGIC);
    ksa_put_u16(&control, 1);
    ksa_put_u16(&control, 3);
    ksa_put_u32(&control, 0);
    const uint8_t cfgs[] = {0x33, 0x30, 0x00, 0x10, 0x73};
    for (size_t k = 0; k < sizeof cfgs; k++) {
        /* One client: a hello in one piece, then the descriptor byte. */
        ksa_buf_reset(&s);
        ksa_put_u8(&s, cfgs[k]);
        ksa_put_u8(&s, 0); ksa_put_u8(&s, 0);
        put_frame(&s, 0, &hello, 200);
        ksa_put_u8(&s, 1); ksa_put_u8(&s, 0); ksa_put_u8(&s, 1); ksa_put_u8(&s, 1);
        ksa_put_u8(&s, 5); ksa_put_u8(&s, 1);
        write_seed(argv[1], &s);
    }
    /* A hello in 3-byte pieces beside a control request from another process. */
    ksa_buf_reset(&s);
    ksa_put_u8(&s, 0x37);
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 0);
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 1);
    put_frame(&s, 0, &hello, 3);
    put_frame(&s, 1, &control, 5);
    write_seed(argv[1], &s);
    /* Three connections of one process, a fourth of another (limits). */
    ksa_buf_reset(&s);
    ksa_put_u8(&s, 0x32);
    for (int k = 0; k < 3; k++) { ksa_put_u8(&s, 0); ksa_put_u8(&s, 0); }
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 2);
    ksa_put_u8(&s, 5); ksa_put_u8(&s, 1);
    write_seed(argv[1], &s);
    /* A big control request in bulk writes (growth, budget), a bad magic, a close mid-frame. */
    ksa_buf_reset(&s);
    ksa_put_u8(&s, 0x23);
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 0);
    ksa_put_u8(&s, 2); ksa_put_u8(&s, 0); ksa_put_u8(&s, 1); ksa_put_u32(&s, 40000);
    ksa_put_u8(&s, 3); ksa_put_u8(&s, 0); ksa_put_u8(&s, 0x27); ksa_put_u8(&s, 0x10); ksa_put_u8(&s, 0x41);
    ksa_put_u8(&s, 5); ksa_put_u8(&s, 1);
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 1);
    ksa_put_u8(&s, 2); ksa_put_u8(&s, 1); ksa_put_u8(&s, 2); ksa_put_u32(&s, 16); ksa_put_u32(&s, 0x46464947);
    ksa_put_u8(&s, 0); ksa_put_u8(&s, 2);
    ksa_put_u8(&s, 2); ksa_put_u8(&s, 2); ksa_put_u8(&s, 0); ksa_put_u32(&s, 60);
    ksa_put_u8(&s, 4); ksa_put_u8(&s, 2);
    ksa_put_u8(&s, 5); ksa_put_u8(&s, 0);
    write_seed(argv[1], &s);
    ksa_buf_free(&hello);
    ksa_buf_free(&control);
    ksa_buf_free(&s);
    printf("%d seeds\n", seed_no);
    return 0;
}
#endif
