/*
 * The agent's gate (docs/agent.md, "Connections"): accepted connections wait
 * here, read without blocking by the agent's one poll loop, until their first
 * frame (a module hello or a CLI control request) is complete. Only then does
 * a connection get a thread. So a program holding a thousand silent
 * connections costs a thousand descriptors and no thread, and is bounded:
 *
 * - at most `max_pending` connections wait, at most `max_per_pid` of one
 *   process (SO_PEERCRED at accept); when all `max_pending` wait, a new one
 *   takes the place of the one that has waited longest (a real client sends
 *   its hello at once, so it is through long before 255 newer connections
 *   could push it out: several processes holding silent connections must
 *   not lock every new client out until the deadline);
 * - each must complete its first frame within `deadline_ms` of its accept;
 * - the frame's length is checked against its kind (a hello is small, a
 *   control request may carry data) when its first 8 bytes are in, and its
 *   memory grows only as its bytes arrive, within a byte budget shared by
 *   every waiting connection;
 * - a refusal closes nothing itself: the agent logs the reason and closes.
 * Exactly the frame's bytes are read, so the descriptor a hello may carry
 * right after it (ksa_send_fd) stays in the socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "agent_protocol.h"

typedef struct {
    int fd;
    pid_t pid;
    int64_t deadline;
    uint8_t head[8];
    uint32_t head_have;
    uint32_t len;
    int kind;
    uint8_t *body;
    size_t have, cap;
} pending;

struct ksa_gate {
    pending *slots;
    unsigned count, max, per_pid;
    size_t budget, used;
    int deadline_ms;
    /* Finished connections not yet taken (ksa_gate_take). */
    ksa_gate_event *events;
    unsigned nevents, cap_events;
};

static int64_t now_ms(void) { return (int64_t)(ksa_mono_ns() / 1000000u); }

static void wipe_free(uint8_t *p, size_t n) {
    if (!p) return;
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
    free(p);
}

ksa_gate *ksa_gate_new(unsigned max_pending, unsigned max_per_pid, size_t byte_budget, int deadline_ms) {
    ksa_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->slots = calloc(max_pending ? max_pending : 1, sizeof *g->slots);
    /* Between two takes: an event per slot (service), and one per
     * connection pushed out by ksa_gate_add. */
    g->events = calloc(2 * (max_pending ? max_pending : 1), sizeof *g->events);
    if (!g->slots || !g->events) {
        free(g->slots);
        free(g->events);
        free(g);
        return NULL;
    }
    g->max = max_pending;
    g->cap_events = 2 * (max_pending ? max_pending : 1);
    g->per_pid = max_per_pid;
    g->budget = byte_budget;
    g->deadline_ms = deadline_ms;
    return g;
}

unsigned ksa_gate_count(const ksa_gate *g) { return g->count; }
size_t ksa_gate_bytes(const ksa_gate *g) { return g->used; }

static void finish(ksa_gate *g, unsigned i, const char *why);

int ksa_gate_add(ksa_gate *g, int fd, pid_t pid, const char **why) {
    if (!g->max) {
        *why = "too many connections are waiting for their first frame";
        return -1;
    }
    unsigned mine = 0, oldest = 0;
    for (unsigned i = 0; i < g->count; i++) {
        mine += g->slots[i].pid == pid;
        if (g->slots[i].deadline < g->slots[oldest].deadline) oldest = i;
    }
    if (mine >= g->per_pid) {
        *why = "this process already has the most connections that may wait for their first frame";
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        *why = "cannot make the connection non-blocking";
        return -1;
    }
    if (g->count >= g->max)
        finish(g, oldest, "pushed out of the full gate by a newer connection (the longest waiting)");
    pending *p = &g->slots[g->count++];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->pid = pid;
    p->deadline = now_ms() + g->deadline_ms;
    return 0;
}

int ksa_gate_pollfds(const ksa_gate *g, struct pollfd *out, int max) {
    int k = 0;
    for (unsigned i = 0; i < g->count && k < max; i++) out[k++] = (struct pollfd){g->slots[i].fd, POLLIN, 0};
    return k;
}

int ksa_gate_timeout_ms(const ksa_gate *g) {
    if (!g->count) return -1;
    int64_t now = now_ms(), first = g->slots[0].deadline;
    for (unsigned i = 1; i < g->count; i++)
        if (g->slots[i].deadline < first) first = g->slots[i].deadline;
    return first <= now ? 0 : (int)(first - now);
}

/* Ends slot i: an event (done with the frame, or refused with why), the slot freed. */
static void finish(ksa_gate *g, unsigned i, const char *why) {
    pending *p = &g->slots[i];
    ksa_gate_event ev = {.fd = p->fd, .pid = p->pid, .kind = why ? 0 : p->kind, .why = why};
    if (!why) {
        ev.data = p->body;
        ev.len = p->len;
        ev.cap = p->cap;
    } else {
        wipe_free(p->body, p->cap);
    }
    g->used -= p->cap;
    if (g->nevents < g->cap_events) g->events[g->nevents++] = ev;
    else { /* cannot happen: at most one event per slot between takes */
        if (ev.data) wipe_free(ev.data, ev.cap);
        close(ev.fd);
    }
    g->slots[i] = g->slots[--g->count];
}

/* Reads what slot p has waiting. 1 complete, 0 more to come, -1 refused (why). */
static int step(ksa_gate *g, pending *p, const char **why) {
    for (;;) {
        if (p->head_have < 8) {
            ssize_t r = recv(p->fd, p->head + p->head_have, 8 - p->head_have, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
            if (r <= 0) { *why = NULL; return -2; }   /* closed before a frame: nothing to say */
            p->head_have += (uint32_t)r;
            if (p->head_have < 8) continue;
            uint32_t len = (uint32_t)p->head[0] | (uint32_t)p->head[1] << 8 | (uint32_t)p->head[2] << 16 | (uint32_t)p->head[3] << 24;
            uint32_t magic = (uint32_t)p->head[4] | (uint32_t)p->head[5] << 8 | (uint32_t)p->head[6] << 16 | (uint32_t)p->head[7] << 24;
            if (magic == KSA_MAGIC) {
                p->kind = KSA_GATE_HELLO;
                if (len > KSA_HELLO_MAX_FRAME || len < 8) { *why = "a hello of an impossible length"; return -1; }
            } else if (magic == KSA_CONTROL_MAGIC) {
                p->kind = KSA_GATE_CONTROL;
                if (len > KSA_MAX_FRAME || len < 8) { *why = "a control request of an impossible length"; return -1; }
            } else {
                *why = "not a keyshare hello or control request";
                return -1;
            }
            p->len = len;
            size_t first = len < 4096 ? len : 4096;
            if (g->used + first > g->budget) { *why = "the agent holds its most bytes of unfinished first frames"; return -1; }
            p->body = malloc(first);
            if (!p->body) { *why = "out of memory"; return -1; }
            p->cap = first;
            g->used += first;
            memcpy(p->body, p->head + 4, 4);
            p->have = 4;
        }
        if (p->have == p->len) return 1;
        if (p->have == p->cap) {
            /* Grow with what arrives, never ahead of it: double, up to the frame. */
            size_t want = p->cap * 2 < p->len ? p->cap * 2 : p->len;
            if (g->used - p->cap + want > g->budget) { *why = "the agent holds its most bytes of unfinished first frames"; return -1; }
            uint8_t *bigger = malloc(want);
            if (!bigger) { *why = "out of memory"; return -1; }
            memcpy(bigger, p->body, p->have);
            wipe_free(p->body, p->cap);
            g->used = g->used - p->cap + want;
            p->body = bigger;
            p->cap = want;
        }
        ssize_t r = recv(p->fd, p->body + p->have, p->cap - p->have, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (r <= 0) { *why = "the connection closed in the middle of its first frame"; return -1; }
        p->have += (size_t)r;
    }
}

void ksa_gate_service(ksa_gate *g, const struct pollfd *pfds, int n) {
    int64_t now = now_ms();
    for (unsigned i = 0; i < g->count;) {
        pending *p = &g->slots[i];
        int ready = 0;
        for (int k = 0; k < n; k++)
            if (pfds[k].fd == p->fd) { ready = pfds[k].revents != 0; break; }
        const char *why = NULL;
        int rc = ready ? step(g, p, &why) : 0;
        if (rc == 1) {
            /* Blocking again for the thread that takes it over. */
            int fl = fcntl(p->fd, F_GETFL);
            if (fl >= 0) fcntl(p->fd, F_SETFL, fl & ~O_NONBLOCK);
            finish(g, i, NULL);
            continue;
        }
        if (rc == -1) { finish(g, i, why); continue; }
        if (rc == -2) { finish(g, i, ""); continue; }
        if (now >= p->deadline) {
            finish(g, i, p->head_have ? "its first frame did not arrive in time" : "it sent nothing in time");
            continue;
        }
        i++;
    }
}

int ksa_gate_take(ksa_gate *g, ksa_gate_event *ev) {
    if (!g->nevents) return 0;
    *ev = g->events[0];
    memmove(g->events, g->events + 1, (g->nevents - 1) * sizeof *g->events);
    g->nevents--;
    return 1;
}

void ksa_gate_free(ksa_gate *g) {
    if (!g) return;
    for (unsigned i = 0; i < g->count; i++) {
        wipe_free(g->slots[i].body, g->slots[i].cap);
        close(g->slots[i].fd);
    }
    for (unsigned i = 0; i < g->nevents; i++) {
        wipe_free(g->events[i].data, g->events[i].cap);
        close(g->events[i].fd);
    }
    free(g->slots);
    free(g->events);
    free(g);
}
