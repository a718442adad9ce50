/* The shared region's layout (shm.c; the fuzzer). Not public API: callers
 * hold ksa_shm pointers only, and Swift never imports the 64 KiB arrays. */
#ifndef KEYSHARE_AGENT_SHM_LAYOUT_H
#define KEYSHARE_AGENT_SHM_LAYOUT_H
#include "agent_protocol.h"

struct ksa_shm_dir {
    uint32_t state;  /* KSA_SHM_EMPTY ... (atomic: the receiver's and the sender's handshake) */
    uint32_t len;    /* the frame's length, valid while state is FULL */
    uint8_t pad[56]; /* the data on cache lines of its own */
    uint8_t data[KSA_SHM_DATA];
};
struct ksa_shm {
    struct ksa_shm_dir to_agent;
    struct ksa_shm_dir to_client;
};
_Static_assert(sizeof(struct ksa_shm_dir) == KSA_SHM_DIR_SIZE, "a direction is 64 KiB");
#endif
