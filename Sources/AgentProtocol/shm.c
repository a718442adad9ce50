/* Frames through a shared region beside the socket (include/agent_protocol.h,
 * docs/agent-transport.md "Round trips: shared memory").
 *
 * Why: with bounded polling (spin.c) a call through the agent no longer pays
 * two wakeups, but still four socket syscalls (send and receive, each side)
 * plus the polls' peeks: ~8 us a call measured here, a quarter of an
 * ML-KEM-768 encapsulation. When the receiver is polling anyway, the frame
 * can be handed over in memory: the sender copies it into the region and
 * flips a state word the receiver watches; no syscall on either side.
 *
 * The handshake, one state word per direction, changed only by compare-and-
 * swap, so a frame is never lost between "the receiver gives up polling" and
 * "the sender writes":
 *   receiver: EMPTY -> SPINNING (polls) -> SLEEPING (blocks in recv) -> EMPTY
 *             or, finding FULL: copies the frame out, wipes it, -> EMPTY
 *   sender:   EMPTY or SPINNING -> FULL after writing data and len;
 *             SLEEPING: the frame goes on the socket (which wakes the receiver);
 *             a frame too big for the region: EMPTY/SPINNING -> SOCKET, then
 *             the socket (the receiver, seeing SOCKET, reads the socket).
 * Futex parking (docs/agent-transport.md, "Round trips: futex parking"): polling
 * stops when the machine has no CPU to spare (spin.c), which is exactly
 * when several client threads call at once; each call then paid a send, a
 * recv and its peeks on both sides. Instead of SLEEPING a receiver first
 * goes PARKED and sleeps on the state word itself (FUTEX_WAIT, shared: the
 * memfd is mapped by both processes), at most park_ns; a sender that finds
 * PARKED writes the frame, flips PARKED -> FULL and wakes it (FUTEX_WAKE).
 * After park_ns the receiver flips PARKED -> SLEEPING (a sender that wrote
 * first wins the compare-and-swap: the frame is taken) and blocks in recv,
 * where a dead peer shows as EOF: a kill -9 of either side is seen within
 * park_ns, and an idle connection sleeps in recv as before (no CPU: a
 * parked waiter is asleep too). A hostile client can wake the agent's
 * waiter spuriously; each wake rereads the state word, and the park ends
 * at its deadline whatever the wakes.
 *
 * Calls and replies alternate, so a sender never finds FULL or SOCKET; the
 * agent takes either (or any other value) from a client as a broken
 * connection.
 *
 * The client is not trusted (the agent's security boundary, docs/agent.md):
 * the agent creates the region (a memfd sealed against shrinking and growing,
 * so no client can make the agent's mapping fault), reads each state word and
 * length once, bounds the length by the region, and copies the frame into its
 * own memory before the codec sees a byte (a client rewriting the region
 * meanwhile changes only its own request). Every loop that reads the client's
 * state word is bounded. Frames may carry a PIN: the receiver wipes what it
 * copied out, a sender that falls back to the socket wipes what it wrote.
 * Tests/fuzz/shm_fuzz.c drives the agent's side with hostile regions. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "agent_protocol.h"
#include "shm_layout.h"

/* A hostile client could flip its state word between the agent's load and
 * its compare-and-swap forever; the sender gives up after this many tries. */
#define SEND_TRIES 64
/* Polls between two yields (a peer on this CPU must get to run). */
#define POLLS_PER_YIELD 32u

static inline uint32_t load_state(const ksa_shm_dir *d) { return __atomic_load_n(&d->state, __ATOMIC_ACQUIRE); }
static inline int cas_state(ksa_shm_dir *d, uint32_t expect, uint32_t want) {
    return __atomic_compare_exchange_n(&d->state, &expect, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
static inline void set_state(ksa_shm_dir *d, uint32_t v) { __atomic_store_n(&d->state, v, __ATOMIC_RELEASE); }

static void wipe(volatile uint8_t *p, size_t n) {
    /* volatile: the region outlives this call, but a compiler may not know that. */
    memset((void *)p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* Shared futexes (no FUTEX_PRIVATE_FLAG): the word is in a memfd both
 * processes map. The wait is relative and bounded; EINTR, EAGAIN (the word
 * changed) and ETIMEDOUT all just make the caller reread the word. */
static void futex_wait(uint32_t *word, uint32_t expect, uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    (void)syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0);
}
static void futex_wake(uint32_t *word) { (void)syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0); }

uint32_t ksa_shm_park_us(void) {
    const char *v = getenv("KEYSHARE_AGENT_PARK_US");
    if (v == NULL || *v == '\0') return KSA_SHM_PARK_US_DEFAULT;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end != '\0' || v[0] == '-') return KSA_SHM_PARK_US_DEFAULT;
    return n > 1000000u ? 1000000u : (uint32_t)n;
}

int ksa_shm_wanted(void) {
    const char *v = getenv("KEYSHARE_AGENT_SHM");
    return !(v && strcmp(v, "0") == 0);
}

int ksa_shm_create(void) {
    int fd = memfd_create("keyshare-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if (ftruncate(fd, sizeof(ksa_shm)) != 0
        || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

ksa_shm *ksa_shm_map(int fd) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(ksa_shm)) return NULL;
    void *p = mmap(NULL, sizeof(ksa_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return NULL;
    /* A fork child must not share the parent's region (the parent's calls
     * would meet the child's): required, so a child never has the region
     * mapped and never unmaps its old address (the client's fork handler
     * forgets it: that range is free in the child, or already another
     * mapping). Without MADV_DONTFORK the connection uses sockets only.
     * A core dump must not keep a frame that carried a PIN: best effort. */
    if (madvise(p, sizeof(ksa_shm), MADV_DONTFORK) != 0) {
        munmap(p, sizeof(ksa_shm));
        return NULL;
    }
    (void)madvise(p, sizeof(ksa_shm), MADV_DONTDUMP);
    return p;
}

void ksa_shm_unmap(ksa_shm *shm) {
    if (shm) munmap(shm, sizeof(ksa_shm));
}

size_t ksa_shm_size(void) { return sizeof(ksa_shm); }
uint32_t *ksa_shm_state(ksa_shm *shm, int to_agent) { return to_agent ? &shm->to_agent.state : &shm->to_client.state; }
uint32_t *ksa_shm_len(ksa_shm *shm, int to_agent) { return to_agent ? &shm->to_agent.len : &shm->to_client.len; }
uint8_t *ksa_shm_data(ksa_shm *shm, int to_agent) { return to_agent ? shm->to_agent.data : shm->to_client.data; }

void ksa_chan_init(ksa_chan *c, int fd, ksa_shm *shm, int agent_side, uint32_t spin_us) {
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->shm = shm;
    if (shm) {
        c->in = agent_side ? &shm->to_agent : &shm->to_client;
        c->out = agent_side ? &shm->to_client : &shm->to_agent;
    }
    ksa_spin_init(&c->spin, spin_us);
    c->spin.own = agent_side ? 0 : 1;
    c->park_ns = (uint64_t)ksa_shm_park_us() * 1000u;
}

void ksa_chan_close_shm(ksa_chan *c) {
    ksa_shm_unmap(c->shm);
    c->shm = NULL;
    c->in = c->out = NULL;
}

int ksa_chan_send(ksa_chan *c, const uint8_t *p, size_t n) {
    if (!c->shm) {
        c->sock_out++;
        return ksa_write_frame(c->fd, p, n);
    }
    if (n > KSA_MAX_FRAME) return -1;
    ksa_shm_dir *d = c->out;
    int wrote = 0;
    for (int tries = 0; tries < SEND_TRIES; tries++) {
        uint32_t s = load_state(d);
        if (s == KSA_SHM_SLEEPING) break;
        if (s != KSA_SHM_EMPTY && s != KSA_SHM_SPINNING && s != KSA_SHM_PARKED) {
            /* FULL or SOCKET (a frame not taken: calls and replies alternate,
             * so never from a well-behaved peer) or garbage. */
            if (wrote) wipe(d->data, n);
            return -1;
        }
        if (n > KSA_SHM_DATA) {
            if (!cas_state(d, s, KSA_SHM_SOCKET)) continue;
            if (s == KSA_SHM_PARKED) futex_wake(&d->state);
            c->sock_out++;
            return ksa_write_frame(c->fd, p, n);
        }
        if (!wrote) {
            memcpy(d->data, p, n);
            __atomic_store_n(&d->len, (uint32_t)n, __ATOMIC_RELAXED);
            wrote = 1;
        }
        if (cas_state(d, s, KSA_SHM_FULL)) {
            c->shm_out++;
            if (s == KSA_SHM_PARKED) {
                futex_wake(&d->state);
                c->wakes_out++;
            }
            return 0;
        }
    }
    if (wrote) wipe(d->data, n);
    if (load_state(d) != KSA_SHM_SLEEPING) return -1; /* a state word that would not settle */
    c->sock_out++;
    return ksa_write_frame(c->fd, p, n);
}

/* The frame in the region: the length read once and bounded, the bytes
 * copied out (the codec works on this side's copy), wiped, EMPTY. */
static int take(ksa_chan *c, ksa_buf *b) {
    ksa_shm_dir *d = c->in;
    uint32_t n = __atomic_load_n(&d->len, __ATOMIC_RELAXED);
    if (n > KSA_SHM_DATA) return -1;
    if (b->cap < n || b->cap == 0) {
        size_t cap = n < 4096 ? 4096 : n;
        uint8_t *big = malloc(cap);
        if (!big) return -1;
        ksa_buf_free(b);
        b->data = big;
        b->cap = cap;
    }
    memcpy(b->data, d->data, n);
    b->len = n;
    wipe(d->data, n);
    set_state(d, KSA_SHM_EMPTY);
    c->shm_in++;
    return 0;
}

/* The frame comes on the socket (the sender saw SLEEPING, or wrote SOCKET). */
static int from_socket(ksa_chan *c, ksa_buf *b) {
    int rc = ksa_read_frame_next(c->fd, b);
    if (rc == 0) {
        set_state(c->in, KSA_SHM_EMPTY);
        c->sock_in++;
    }
    return rc;
}

/* What a state the receiver did not set itself means. */
static int settle(ksa_chan *c, ksa_buf *b, uint32_t s) {
    if (s == KSA_SHM_FULL) return take(c, b);
    if (s == KSA_SHM_SOCKET) return from_socket(c, b);
    return -1;
}

/* PARKED (set by this side): sleep on the state word until the sender flips
 * it, at most park_ns; then SLEEPING and recv (the peer's death shows there). */
static int park(ksa_chan *c, ksa_buf *b) {
    ksa_shm_dir *d = c->in;
    uint64_t end = ksa_mono_ns() + c->park_ns;
    for (;;) {
        uint32_t s = load_state(d);
        if (s != KSA_SHM_PARKED) {
            c->parked_in++;
            return settle(c, b, s);
        }
        uint64_t now = ksa_mono_ns();
        if (now >= end) break;
        futex_wait(&d->state, KSA_SHM_PARKED, end - now);
    }
    if (!cas_state(d, KSA_SHM_PARKED, KSA_SHM_SLEEPING)) {
        c->parked_in++;
        return settle(c, b, load_state(d));
    }
    return from_socket(c, b);
}

int ksa_chan_recv(ksa_chan *c, ksa_buf *b) {
    ksa_buf_reset(b);
    if (!c->shm) {
        (void)ksa_spin_wait(c->fd, &c->spin);
        c->sock_in++;
        return ksa_read_frame_next(c->fd, b);
    }
    ksa_shm_dir *d = c->in;
    uint32_t s = load_state(d);
    if (s != KSA_SHM_EMPTY) return settle(c, b, s);
    uint64_t end = ksa_spin_start(&c->spin);
    if (end != 0) {
        if (!cas_state(d, KSA_SHM_EMPTY, KSA_SHM_SPINNING)) {
            ksa_spin_hit(&c->spin);
            return settle(c, b, load_state(d));
        }
        for (uint32_t i = 1;; i++) {
            s = load_state(d);
            if (s != KSA_SHM_SPINNING) {
                ksa_spin_hit(&c->spin);
                return settle(c, b, s);
            }
            ksa_spin_pause();
            /* The peer may share this CPU: let it run now and then. */
            if (i % POLLS_PER_YIELD == 0) {
                sched_yield();
                if (ksa_mono_ns() >= end) break;
            }
        }
        ksa_spin_miss(&c->spin);
        if (c->park_ns) {
            if (!cas_state(d, KSA_SHM_SPINNING, KSA_SHM_PARKED)) return settle(c, b, load_state(d));
            return park(c, b);
        }
        if (!cas_state(d, KSA_SHM_SPINNING, KSA_SHM_SLEEPING)) return settle(c, b, load_state(d));
    } else if (c->park_ns) {
        if (!cas_state(d, KSA_SHM_EMPTY, KSA_SHM_PARKED)) return settle(c, b, load_state(d));
        return park(c, b);
    } else if (!cas_state(d, KSA_SHM_EMPTY, KSA_SHM_SLEEPING)) {
        return settle(c, b, load_state(d));
    }
    /* Asleep in recv: the sender sees SLEEPING and uses the socket. */
    return from_socket(c, b);
}
