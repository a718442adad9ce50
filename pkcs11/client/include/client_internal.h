/*
 * What the agent client's files share (agent_client.c: connections; pairs.c: pairs, tickets and
 * kc_call; client_calls.c: the entry points). None of it is exported: the module's version script
 * keeps everything but the three C_Get* local.
 */
#ifndef KEYSHARE_CLIENT_INTERNAL_H
#define KEYSHARE_CLIENT_INTERNAL_H
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "../../abi/include/keyshare_abi.h"
#include "../../../Sources/AgentProtocol/include/agent_protocol.h"

struct kc_conn {
    ksa_chan ch;                         /* the socket, the shared region (shm.c), the polling (spin.c) */
    unsigned generation;
    int timeout_ms;                      /* the socket's SO_RCVTIMEO now (-1: unknown) */
    ksa_buf buf;                         /* the call buffer, kept across calls (wiped after each) */
    struct kc_conn *next;                /* the idle pool */
    struct kc_conn *all_prev, *all_next; /* every open connection, idle or in use */
};

/* agent_client.c: the process's client state, under kc_lock. */
extern pthread_mutex_t kc_lock;
extern int kc_initialized;
extern int kc_lost;             /* the agent went away; reconnect on the next call */
extern unsigned kc_generation;  /* bumped by C_Finalize, agent loss and fork */
extern uint8_t kc_token[KSA_TOKEN_LEN];
extern struct kc_conn *kc_idle;
extern struct kc_conn *kc_all;
extern uint32_t kc_next_id;
extern const volatile uint64_t *kc_epoch;
extern dev_t kc_epoch_dev;
extern ino_t kc_epoch_ino;
extern int kc_lazy;             /* no store and no agent: the engine's empty view answers the listing calls */

uint32_t kc_spin_us(void);
struct kc_conn *kc_conn_new_locked(int fd, ksa_shm *shm, unsigned generation);
void kc_conn_free_locked(struct kc_conn *c);
const CK_FUNCTION_LIST_3_2 *kc_lazy_engine(void);
void kc_lazy_finalize(void);
int kc_lazy_call(uint32_t fn);
int kc_store_exists(void);
int kc_connect_agent(int allow_start, pid_t *peer);
int kc_call_timeout_ms(uint32_t fn, ksa_arg *args);
int kc_round_trip(struct kc_conn *c, uint32_t id, int timeout);
int kc_exchange_in(struct kc_conn *c, uint32_t fn, ksa_arg *args, CK_RV *rv);
int kc_exchange_frame(struct kc_conn *c, uint32_t id);
void kc_frame_done(struct kc_conn *c);
void kc_drop_idle_locked(void);
CK_RV kc_start_client_locked(struct kc_conn **out, int allow_start);
CK_RV kc_acquire(struct kc_conn **out);
void kc_release(struct kc_conn *c, int broken);

/* pairs.c */
void kc_pairs_forget(void);
void kc_pairs_init(void);
CK_RV kc_call(uint32_t fn, ksa_arg *args);

#endif
