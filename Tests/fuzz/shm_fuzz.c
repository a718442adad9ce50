/*
 * libFuzzer target for the agent's side of the shared region (Sources/AgentProtocol/shm.c,
 * docs/agent-transport.md "Round trips: shared memory"): a hostile client owns half of
 * the region and the other end of the socket, and may write anything there,
 * in any order. The input is a script of such writes, interleaved with the
 * agent's receives and sends:
 *   op 0: to_agent.state = byte        op 1: to_agent.len = u32
 *   op 2: n bytes into to_agent.data    op 3: a well-formed frame on the socket (n bytes)
 *   op 4: n raw bytes on the socket (any header)
 *   op 5: the agent receives (ksa_chan_recv): a frame it returns is at most
 *         KSA_MAX_FRAME, read whole (ASan sees any overread), and the region
 *         state is EMPTY after a frame from the region
 *   op 6: the agent sends a reply of u16 * 2 bytes (up to 128 KiB: both paths);
 *         the client end of the socket is drained
 *   op 7: to_client.state = byte
 * The agent's socket is non-blocking and the harness is built with
 * -DKSA_FRAME_TIMEOUT_MS=0 (frame.c waits that long for the rest of a frame
 * whose first bytes are in; here nobody can send it), so a script that makes
 * it wait for a frame that never comes ends that receive with -1 (a broken
 * connection) rather than waiting. The first byte chooses the polling budget (0 or 1 us)
 * and the futex parking (none or 1 us; state 5 is PARKED).
 * Without -DFUZZ_MAIN_REPLAY a libFuzzer target (clang -fsanitize=fuzzer,address
 * with shm.c, spin.c, frame.c and codec.c); with it, a plain program that replays files
 * (Tests/integration/62-fuzz-replay.sh, make test).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../Sources/AgentProtocol/include/agent_protocol.h"
#include "../../Sources/AgentProtocol/shm_layout.h"

static ksa_shm *agent_map, *client_map;

static void setup(void) {
    if (agent_map) return;
    int fd = ksa_shm_create();
    if (fd < 0) abort();
    agent_map = ksa_shm_map(fd);
    client_map = ksa_shm_map(fd);
    close(fd);
    if (!agent_map || !client_map) abort();
}

static void drain(int fd) {
    uint8_t junk[4096];
    while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    if (size < 1) return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    memset(client_map, 0, sizeof *client_map);
    ksa_chan agent;
    ksa_chan_init(&agent, sv[0], agent_map, 1, data[0] & 1);
    agent.spin.flags = KSA_SPIN_ALWAYS;
    /* Bit 1 of the first byte: futex parking (1 us, so a script waits little) or none. */
    agent.park_ns = (data[0] & 2) ? 1000 : 0;
    ksa_buf b;
    ksa_buf_init(&b);
    static uint8_t reply[128 << 10];
    size_t i = 1;
#define NEXT() (i < size ? data[i++] : 0)
    while (i < size) {
        uint8_t op = NEXT() % 8;
        switch (op) {
        case 0: client_map->to_agent.state = NEXT() % 8; break;
        case 1: {
            uint32_t v = 0;
            for (int k = 0; k < 4; k++) v = v << 8 | NEXT();
            client_map->to_agent.len = v;
            break;
        }
        case 2: {
            size_t n = NEXT();
            for (size_t k = 0; k < n && i < size; k++) client_map->to_agent.data[k] = NEXT();
            break;
        }
        case 3: {
            uint8_t frame[256];
            size_t n = NEXT();
            for (size_t k = 0; k < n; k++) frame[k] = NEXT();
            (void)ksa_write_frame(sv[1], frame, n);
            break;
        }
        case 4: {
            uint8_t raw[256];
            size_t n = NEXT();
            for (size_t k = 0; k < n; k++) raw[k] = NEXT();
            (void)send(sv[1], raw, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        }
        case 5: {
            uint64_t from_region = agent.shm_in;
            if (ksa_chan_recv(&agent, &b) == 0) {
                if (b.len > KSA_MAX_FRAME) abort();
                if (agent.shm_in != from_region) {
                    if (b.len > KSA_SHM_DATA) abort();
                    if (agent_map->to_agent.state != KSA_SHM_EMPTY) abort();
                }
                volatile uint8_t sum = 0;
                for (size_t k = 0; k < b.len; k++) sum ^= b.data[k];
                (void)sum;
            }
            break;
        }
        case 6: {
            size_t n = (size_t)NEXT() << 8;
            n = (n | NEXT()) * 2;
            memset(reply, (int)n, n < sizeof reply ? n : sizeof reply);
            if (n > sizeof reply) n = sizeof reply;
            uint64_t via_region = agent.shm_out;
            if (ksa_chan_send(&agent, reply, n) == 0 && agent.shm_out != via_region) {
                if (n > KSA_SHM_DATA || client_map->to_client.state != KSA_SHM_FULL || client_map->to_client.len != n) abort();
                client_map->to_client.state = KSA_SHM_EMPTY;
            }
            drain(sv[1]);
            break;
        }
        case 7: client_map->to_client.state = NEXT() % 8; break;
        }
    }
#undef NEXT
    ksa_buf_free(&b);
    close(sv[0]);
    close(sv[1]);
    return 0;
}

#include "replay_main.h"
