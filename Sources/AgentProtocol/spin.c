/* Bounded adaptive polling before a blocking read (include/agent_protocol.h,
 * docs/agent-transport.md "Round trips: bounded polling").
 *
 * Why: a call through the agent is a ping-pong on a Unix socket. When the
 * client and the agent's connection thread run on different CPUs, each
 * blocking recv puts its CPU to sleep and the peer's send must wake it: an
 * IPI and, in a VM whose guest does not halt-poll (this machine: KVM with
 * guest_halt_poll_ns=0), an exit from HLT on each side. Measured here that
 * costs 14-30 us per empty call, more than an ML-KEM-768 encapsulation. A
 * reader that keeps its CPU for a few microseconds and finds the frame
 * already there avoids both wakeups.
 *
 * Bounded and adaptive, so it costs nothing when it cannot help:
 * - at most `budget_ns` per wait (KEYSHARE_AGENT_SPIN_US, 0 = never);
 * - only while no other call of this process is in progress (issue 30:
 *   ksa_spin_active; several threads calling at once park instead, shm.c);
 * - only while the machine has a CPU to spare (runnable tasks <= CPUs,
 *   sampled from /proc/loadavg at most every 20 ms): on a busy machine a
 *   spinning reader would take the CPU from the very peer it waits for, or
 *   from other work, so it blocks at once as before;
 * - after a wait the budget did not cover (a long operation: RSA key
 *   generation, a client busy between calls, an idle one), the next waits
 *   block without spinning, 2, 4, ... up to 64 of them, until a spin is
 *   answered again: an idle connection spins once and then sleeps, and a
 *   long operation burns at most one budget in 64 calls;
 * - the client learns how long its calls take (ksa_spin_done): a call
 *   answered within KSA_SPIN_LEARN_MAX_US (400 us: ML-KEM, ML-DSA verify,
 *   RSA decryption) is polled for 5/4 of the longest recent one (decaying by 1/8 a call), so a call a little
 *   over the base budget does not pay both wakeups; a longer one keeps the
 *   base budget and the back-off.
 * Never reads: it only peeks, so the frame is read by the usual code with
 * every bound it has (16 MiB, protocol checks). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include "agent_protocol.h"

#define SPIN_SKIP_MAX 64u
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif
#define SPIN_US_MAX 1000u

static uint64_t mono_ns(int coarse) {
    struct timespec t;
    clock_gettime(coarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint32_t ksa_spin_budget_us(void) {
    const char *v = getenv("KEYSHARE_AGENT_SPIN_US");
    if (v == NULL || *v == '\0') return KSA_SPIN_US_DEFAULT;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end != '\0' || v[0] == '-') return KSA_SPIN_US_DEFAULT;
    return n > SPIN_US_MAX ? SPIN_US_MAX : (uint32_t)n;
}

void ksa_spin_init(ksa_spin *s, uint32_t budget_us) {
    memset(s, 0, sizeof *s);
    s->budget_ns = budget_us * 1000u;
}

/* One sample: runnable tasks (the 4th field of /proc/loadavg, "R/T") at
 * most the online CPUs. */
static int sample_spare(void) {
    int result = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[128];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            /* "0.10 0.20 0.30 R/T LASTPID" */
            const char *p = buf;
            for (int field = 0; field < 3 && p; field++) {
                p = strchr(p, ' ');
                if (p) p++;
            }
            if (p) {
                long running = strtol(p, NULL, 10);
                result = cpus >= 2 && running >= 1 && running <= cpus;
            }
        }
    }
    return result;
}

/* Whether a CPU is free for polling, from samples at most every 20 ms per
 * process (a stale answer only decides whether to poll a little). The count
 * is an instant's: with client and agent both busy on 2 CPUs, any passing
 * task (a kernel worker, another process's sampler) tips one sample over,
 * and a lone such sample used to stop polling for 20 ms, some 500 ML-KEM
 * calls, each then paying the socket and two wakeups (about 1 in 50 calls
 * in `make bench`). So one busy sample alone keeps polling and looks again
 * after 2 ms; two in a row mean the machine is busy (until a sample says
 * otherwise). Relaxed atomics: threads may race on the sample, any of their
 * values is a valid one. */
static int cpu_to_spare(void) {
    static uint64_t sampled_at;
    static int busy_streak; /* consecutive busy samples, at most 2 */
    uint64_t now = mono_ns(1);
    uint64_t at = __atomic_load_n(&sampled_at, __ATOMIC_RELAXED);
    int streak = __atomic_load_n(&busy_streak, __ATOMIC_RELAXED);
    uint64_t period = streak == 1 ? 2000000u : 20000000u;
    if (at != 0 && now - at < period) return streak < 2;
    streak = sample_spare() ? 0 : (streak < 2 ? streak + 1 : 2);
    __atomic_store_n(&busy_streak, streak, __ATOMIC_RELAXED);
    __atomic_store_n(&sampled_at, now ? now : 1, __ATOMIC_RELAXED);
    return streak < 2;
}

uint64_t ksa_mono_ns(void) { return mono_ns(0); }

static int active_calls;
void ksa_spin_active(int delta) { __atomic_add_fetch(&active_calls, delta, __ATOMIC_RELAXED); }

uint64_t ksa_spin_start(ksa_spin *s) {
    if (s->budget_ns == 0) return 0;
    uint64_t start = mono_ns(0);
    s->wait_start_ns = start;
    if (s->skip) {
        s->skip--;
        return 0;
    }
    if (!(s->flags & KSA_SPIN_ALWAYS) &&
        (__atomic_load_n(&active_calls, __ATOMIC_RELAXED) > (int)s->own || !cpu_to_spare())) return 0;
    return start + (s->learned_ns > s->budget_ns ? s->learned_ns : s->budget_ns);
}

void ksa_spin_hit(ksa_spin *s) {
    s->misses = 0;
    s->spins_answered++;
}

/* Not answered within the budget: block for the next 2, 4, ... 64 waits. */
void ksa_spin_miss(ksa_spin *s) {
    if (s->misses < 6) s->misses++;
    s->skip = 1u << s->misses;
    if (s->skip > SPIN_SKIP_MAX) s->skip = SPIN_SKIP_MAX;
    s->spins_missed++;
}

void ksa_spin_pause(void) { cpu_relax(); }

int ksa_spin_wait(int fd, ksa_spin *s) {
    uint64_t end = ksa_spin_start(s);
    if (end == 0) return 0;
    for (;;) {
        uint8_t c;
        ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r > 0 || r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            /* A frame (or EOF, or an error the read will see): answered. */
            ksa_spin_hit(s);
            return 1;
        }
        /* The peer may share this CPU (the scheduler often places a wakee
         * on its waker's CPU): yield, so it runs now rather than after the
         * budget. With nothing else runnable here (cpu_to_spare), the yield
         * returns at once and this is a plain poll. */
        sched_yield();
        cpu_relax();
        if (mono_ns(0) >= end) break;
    }
    ksa_spin_miss(s);
    return 0;
}

void ksa_spin_done(ksa_spin *s) {
    if (s->budget_ns == 0 || s->wait_start_ns == 0) return;
    uint64_t took = mono_ns(0) - s->wait_start_ns;
    s->wait_start_ns = 0;
    if (took > (uint64_t)KSA_SPIN_LEARN_MAX_US * 1000u) {
        /* A long call or an idle peer: forget quickly, keep the back-off. */
        s->learned_ns /= 2;
        return;
    }
    /* Answered within the learning cap: poll about that long next time (the
     * most of the recent answers, decaying by 1/8 a call, so a quick Init
     * between two slower calls does not reset it), and drop the back-off a
     * near miss set. */
    uint64_t want = took + took / 4, kept = s->learned_ns - s->learned_ns / 8;
    if (want < kept) want = kept;
    s->learned_ns = want > s->budget_ns ? (uint32_t)want : 0;
    s->skip = 0;
    s->misses = 0;
}
