/*
 * The agent client's pairs and verify tickets (docs/agent-transport.md, "Round trips: init and call in one
 * frame", "Verify in the client"), and kc_call, through which every forwarded call goes. The
 * connections they use are agent_client.c's (client_internal.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "../abi/include/keyshare_abi.h"
#include "../../Sources/AgentProtocol/include/agent_protocol.h"
#include "keyshare_client.h"
#include "local_verify.h"
#include "client_internal.h"

/* ---- pairs: an init and its one-shot call in one round trip ------------------
 *
 * Issue 30: C_SignInit + C_Sign was two round trips, each a context switch
 * each way once several threads call at once (the agent's CPU went to
 * switching, not signing). An init whose encoded request (session,
 * mechanism with its parameter, key) is byte for byte the last one that
 * succeeded on that session is answered CKR_OK here and travels with the
 * call that follows, in one frame (KSA_FN_Pair, serve.c): the agent runs
 * the init and, when it succeeds, the call. Any other call first sends the
 * pending init alone (that session's; every session's for a call that can
 * change what an init finds: login, logout, object changes, closing), and
 * such calls also forget which inits succeeded, so the next init goes alone
 * and its errors come from C_XInit as before. What is left: an init that
 * succeeded with the same bytes and now fails (a key another process
 * deleted, an unlock that expired in between) reports its error from the
 * call, as when that happens right after the init returned; documented in
 * docs/agent-transport.md ("Round trips: init and call in one frame").
 * KEYSHARE_AGENT_PAIR=0 turns it off. */
#define KC_PAIR_SLOTS 256u
#define KC_PAIR_MAX 512u   /* the largest encoded init kept (an RSA-PSS or GCM init is < 100 bytes) */
#define KC_TICKETS 2       /* verify tickets per slot (local_verify.c) */
#define KC_TICKET_MAX 128u /* the largest encoded C_VerifyInit with a ticket (an RSA-PSS one is < 100 bytes) */
struct kc_pair {
    pthread_mutex_t lock;
    CK_SESSION_HANDLE h;
    int known;     /* init[0..n) succeeded last on session h */
    int pending;   /* that init was answered here and waits for its call */
    int active;    /* an operation may still be active on session h: the next init goes alone
                      (the agent answers CKR_OPERATION_ACTIVE if it is); cleared only by a
                      one-shot call seen to end the operation */
    uint32_t n;
    uint8_t init[KC_PAIR_MAX];   /* u32 fn, then the arguments, as ksa_encode_request wrote them */
    /* Issue 30, verify in the client (docs/agent-transport.md, "Verify in the client"). With
     * the agent's epoch page, `known` holds only while the page reads `epoch`,
     * the value read before that init was sent: anything the agent did since
     * that may change an init's answer (another process destroying the key,
     * setting CKA_VERIFY false, a logout...) sends the next init alone, so its
     * error comes from C_XInit. */
    const volatile uint64_t *page;
    uint64_t epoch;
    /* Tickets: C_VerifyInit requests the agent accepted with a mechanism
     * local_verify.c runs, each with the public key the agent verifies with
     * (the object's CKA_PUBLIC_KEY_INFO: a public, non-private key of a
     * keyshare token), valid while the page reads the epoch read before that
     * init was sent. Kept apart from the one init above, so a session that
     * alternates C_SignInit and C_VerifyInit keeps its verify ticket. `local`:
     * the pending init was answered with tickets[cur], and C_Verify may run
     * here (else it goes to the agent as a pair). */
    struct kc_ticket {
        CK_SESSION_HANDLE h;   /* 0: none */
        uint32_t n;
        uint8_t init[KC_TICKET_MAX];
        const volatile uint64_t *page;
        uint64_t epoch;
        void *key;
        void *ctx;             /* key's verify context for mech, lent to one C_Verify at a time */
        kv_mech mech;
        uint32_t siglen;
    } tickets[KC_TICKETS];
    int local, cur;
};

/* Drops ticket t (called with its slot's lock held). */
static void ticket_drop_locked(struct kc_ticket *t) {
    kv_ctx_free(t->ctx);
    kv_key_free(t->key);
    t->ctx = t->key = NULL;
    t->h = 0;
}

static void tickets_drop_locked(struct kc_pair *p) {
    for (int i = 0; i < KC_TICKETS; i++) ticket_drop_locked(&p->tickets[i]);
    p->local = 0;
}
static struct kc_pair kc_pairs[KC_PAIR_SLOTS];
static int kc_pending;    /* pending inits, all slots (atomic) */
static int kc_pairs_off;  /* KEYSHARE_AGENT_PAIR=0, or an agent without pairs (atomic) */

/* C_Initialize, C_Finalize: nothing pending, nothing known (the sessions are gone). */
void kc_pairs_forget(void) {
    for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
        pthread_mutex_lock(&kc_pairs[i].lock);
        kc_pairs[i].pending = kc_pairs[i].known = kc_pairs[i].active = kc_pairs[i].local = 0;
        kc_pairs[i].h = 0;
        tickets_drop_locked(&kc_pairs[i]);
        pthread_mutex_unlock(&kc_pairs[i].lock);
    }
    __atomic_store_n(&kc_pending, 0, __ATOMIC_RELEASE);
    const char *v = secure_getenv("KEYSHARE_AGENT_PAIR");
    __atomic_store_n(&kc_pairs_off, v && strcmp(v, "0") == 0, __ATOMIC_RELEASE);
}

void kc_pairs_init(void) {
    for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
        pthread_mutex_init(&kc_pairs[i].lock, NULL);
        kc_pairs[i].h = 0;
        kc_pairs[i].known = kc_pairs[i].pending = kc_pairs[i].active = kc_pairs[i].local = 0;
        kc_pairs[i].n = 0;
        kc_pairs[i].page = NULL;
        /* A fork child's tickets are dropped, not freed (a parent thread may have been using them). */
        memset(kc_pairs[i].tickets, 0, sizeof kc_pairs[i].tickets);
    }
    __atomic_store_n(&kc_pending, 0, __ATOMIC_RELEASE);
    const char *v = secure_getenv("KEYSHARE_AGENT_PAIR");
    __atomic_store_n(&kc_pairs_off, v && strcmp(v, "0") == 0, __ATOMIC_RELEASE);
}

static struct kc_pair *pair_slot(CK_SESSION_HANDLE h) {
    uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull;
    return &kc_pairs[(x >> 56) % KC_PAIR_SLOTS];
}

static int pair_init_fn(uint32_t fn) {
    return fn == KSA_FN_SignInit || fn == KSA_FN_VerifyInit || fn == KSA_FN_EncryptInit || fn == KSA_FN_DecryptInit;
}
static int pair_call_fn(uint32_t fn) {
    return fn == KSA_FN_Sign || fn == KSA_FN_Verify || fn == KSA_FN_Encrypt || fn == KSA_FN_Decrypt;
}

/* The functions whose first argument is not a session, and those that can
 * change what an init finds anywhere in the process: they send every pending
 * init first and forget the successful ones. */
static int pair_global_fn(uint32_t fn) {
    switch (fn) {
    case KSA_FN_Initialize: case KSA_FN_Finalize: case KSA_FN_GetInfo: case KSA_FN_GetSlotList:
    case KSA_FN_GetSlotInfo: case KSA_FN_GetTokenInfo: case KSA_FN_GetMechanismList: case KSA_FN_GetMechanismInfo:
    case KSA_FN_InitToken: case KSA_FN_OpenSession: case KSA_FN_CloseAllSessions: case KSA_FN_WaitForSlotEvent:
    case KSA_FN_Login: case KSA_FN_Logout: case KSA_FN_LoginUser: case KSA_FN_CloseSession: case KSA_FN_DestroyObject:
    case KSA_FN_SetAttributeValue: case KSA_FN_CopyObject: case KSA_FN_InitPIN: case KSA_FN_SetPIN:
    case KSA_FN_SessionCancel: case KSA_FN_SetOperationState:
        return 1;
    default:
        return 0;
    }
}


/* Sends one pending init alone (its reply's rv only: an init has no
 * outputs). Called with the slot's lock held. A failure is remembered as
 * "not known"; the call that follows then meets CKR_OPERATION_NOT_INITIALIZED. */
static void pair_flush_locked(struct kc_pair *p) {
    if (!p->pending) return;
    p->pending = 0;
    p->local = 0;
    __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    struct kc_conn *c;
    if (kc_acquire(&c) != CKR_OK) { p->known = 0; return; }
    ksa_buf *bp = &c->buf;
    ksa_buf_reset(bp);
    uint32_t id = __atomic_add_fetch(&kc_next_id, 1, __ATOMIC_RELAXED);
    ksa_put_u32(bp, id);
    ksa_put_raw(bp, p->init, p->n);
    int x = kc_exchange_frame(c, id);
    CK_RV rv = CKR_DEVICE_ERROR;
    if (x == 0) {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);
        rv = ksa_get_u64(&r);
        if (r.failed) rv = CKR_DEVICE_ERROR;
    }
    kc_frame_done(c);
    kc_release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (rv != CKR_OK) p->known = 0;
}

/* Before a call that is not a pair's: session h's pending init goes first
 * (every session's, and every "known" forgotten, for a global function). */
static void pair_flush_for(uint32_t fn, ksa_arg *args) {
    if (pair_global_fn(fn)) {
        for (unsigned i = 0; i < KC_PAIR_SLOTS; i++) {
            struct kc_pair *p = &kc_pairs[i];
            pthread_mutex_lock(&p->lock);
            pair_flush_locked(p);
            p->known = 0;
            /* A call that can change what an init finds: no ticket outlives it (C_Login,
             * C_Logout, C_CloseSession change this client only, and the agent's epoch
             * does not move for them: epoch.c). */
            if (!ksa_epoch_fn_reads(fn)) tickets_drop_locked(p);
            pthread_mutex_unlock(&p->lock);
        }
        return;
    }
    if (!__atomic_load_n(&kc_pending, __ATOMIC_ACQUIRE)) return;
    struct kc_pair *p = pair_slot(args[0].ul);
    pthread_mutex_lock(&p->lock);
    if (p->h == args[0].ul) pair_flush_locked(p);
    pthread_mutex_unlock(&p->lock);
}

/* C_XInit: answered here (1, *rv = CKR_OK) when the same init succeeded last
 * on this session; else 0 (the caller sends it, then pair_learn). */
/* Whether slot p's "known" init still holds by the epoch page (called with its lock held). */
static int pair_current_locked(const struct kc_pair *p, const volatile uint64_t *page, uint64_t now) {
    if (!p->page) return 1;   /* learnt without a page: the rules before it (docs/agent.md) */
    return p->page == page && now != 0 && now == p->epoch;
}

static int pair_try_init(uint32_t fn, ksa_arg *args, uint8_t *enc, uint32_t *encn,
                         const volatile uint64_t **page_out, uint64_t *epoch_out) {
    /* Read before anything is sent: a change after this read moves the page past it. */
    const volatile uint64_t *page = __atomic_load_n(&kc_epoch, __ATOMIC_ACQUIRE);
    uint64_t now = ksa_epoch_read(page);
    *page_out = page;
    *epoch_out = now;
    ksa_buf b;
    ksa_buf_init(&b);
    ksa_put_u32(&b, fn);
    int usable = ksa_encode_request(fn, args, &b) == CKR_OK && !b.failed && b.len <= KC_PAIR_MAX;
    *encn = 0;
    if (usable) {
        memcpy(enc, b.data, b.len);
        *encn = (uint32_t)b.len;
    }
    ksa_buf_free(&b);
    CK_SESSION_HANDLE h = args[0].ul;
    struct kc_pair *p = pair_slot(h);
    int answered = 0;
    pthread_mutex_lock(&p->lock);
    /* A pending init of this session (a second C_XInit: it goes alone, and
     * the agent answers CKR_OPERATION_ACTIVE) or of another in this slot goes first. */
    int again = p->pending && p->h == h;
    pair_flush_locked(p);
    /* A ticket for this very init, still current: it becomes the learnt init again. */
    /* Only while this slot follows session h (p->h) and no operation of h may
     * be active: otherwise a second init could be answered here that the
     * agent refuses with CKR_OPERATION_ACTIVE. */
    int t = -1;
    if (!again && usable && fn == KSA_FN_VerifyInit && page && now && p->h == h && !p->active) {
        for (int i = 0; i < KC_TICKETS && t < 0; i++) {
            struct kc_ticket *k = &p->tickets[i];
            if (k->h == h && k->key && k->n == *encn && memcmp(k->init, enc, *encn) == 0 && k->page == page &&
                k->epoch == now)
                t = i;
        }
        if (t >= 0) {
            p->known = 1;
            p->n = *encn;
            memcpy(p->init, enc, *encn);
            p->page = page;
            p->epoch = now;
        }
    }
    if (!again && usable && p->known && !p->active && p->h == h && p->n == *encn && memcmp(p->init, enc, *encn) == 0) {
        if (pair_current_locked(p, page, now)) {
            p->pending = 1;
            p->local = t >= 0;
            p->cur = t;
            __atomic_add_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
            answered = 1;
        } else {
            p->known = 0;   /* the agent may answer otherwise now: this init goes alone */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return answered;
}

/* After an init sent alone: remember it when it succeeded. */
static void pair_learn(CK_SESSION_HANDLE h, const uint8_t *enc, uint32_t n, CK_RV rv,
                       const volatile uint64_t *page, uint64_t epoch) {
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (!p->pending) {
        if (rv == CKR_OK && n > 0 && (!page || epoch != 0)) {
            p->h = h;
            p->known = 1;
            p->active = 1;
            p->n = n;
            memcpy(p->init, enc, n);
            p->page = page;
            p->epoch = epoch;
        } else if (p->h == h) {
            p->known = 0;
            p->active = 1;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

/* After C_Sign, C_Verify, C_Encrypt or C_Decrypt on session h: whether it
 * ended the operation (PKCS #11 3.0 5.2: every call does, except one that
 * returns CKR_BUFFER_TOO_SMALL and a successful length query, whose output
 * pointer is NULL; C_Verify has no output). Only then may the next identical
 * init be answered here: an operation of that kind starts only by an init,
 * which sets `active` (sent alone) or is pending (answered here), so an
 * update or final in between never leaves `active` clear. */
static void pair_ended(uint32_t fn, ksa_arg *args, CK_RV rv) {
    CK_SESSION_HANDLE h = args[0].ul;
    int ended = fn == KSA_FN_Verify || !(rv == CKR_BUFFER_TOO_SMALL || (rv == CKR_OK && args[2].ptr == NULL));
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (p->h == h) p->active = !ended;
    pthread_mutex_unlock(&p->lock);
}

/* C_Sign, C_Verify, C_Encrypt, C_Decrypt: with this session's pending init
 * in one frame (1, *rv set), or 0 (no pending init: the caller sends it as usual). */
static int pair_call(uint32_t fn, ksa_arg *args, CK_RV *rv) {
    CK_SESSION_HANDLE h = args[0].ul;
    struct kc_pair *p = pair_slot(h);
    uint8_t init[KC_PAIR_MAX];
    uint32_t n = 0;
    pthread_mutex_lock(&p->lock);
    /* C_Verify after an init answered with the ticket: verified here when the
     * answer is CKR_OK or CKR_SIGNATURE_INVALID (local_verify.c); any other
     * input goes to the agent with the init, as a pair. */
    struct kc_ticket *tk = p->local && p->cur >= 0 && p->cur < KC_TICKETS ? &p->tickets[p->cur] : NULL;
    if (fn == KSA_FN_Verify && tk && p->pending && p->h == h && tk->h == h && tk->key && args[1].ptr && args[2].ptr &&
        args[2].len == tk->siglen && args[1].len <= (1u << 20)) {
        void *key = tk->key, *ctx = tk->ctx;
        kv_mech mech = tk->mech;
        uint32_t siglen = tk->siglen;
        kv_key_ref(key);
        tk->ctx = NULL;   /* lent to this call */
        pthread_mutex_unlock(&p->lock);
        if (!ctx) ctx = kv_ctx(key, &mech);
        int v = kv_verify(key, ctx, &mech, siglen, args[1].ptr, args[1].len, args[2].ptr, args[2].len);
        pthread_mutex_lock(&p->lock);
        if (ctx && tk->key == key && !tk->ctx) tk->ctx = ctx, ctx = NULL;   /* back to the ticket, if still its own */
        pthread_mutex_unlock(&p->lock);
        kv_ctx_free(ctx);
        kv_key_free(key);
        pthread_mutex_lock(&p->lock);
        if (v >= 0 && p->local && p->pending && p->h == h) {
            /* The operation ends with C_Verify, here as at the agent. */
            p->pending = p->local = 0;
            p->active = 0;
            __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
            pthread_mutex_unlock(&p->lock);
            *rv = v ? CKR_OK : CKR_SIGNATURE_INVALID;
            return 1;
        }
    }
    p->local = 0;
    int mine = p->pending && p->h == h && p->n >= 4;
    uint32_t init_fn = mine ? (uint32_t)(p->init[0] | p->init[1] << 8 | p->init[2] << 16 | (uint32_t)p->init[3] << 24) : 0;
    if (mine && !ksa_pair_allowed(init_fn, fn)) {
        /* Another call after the init (C_Sign after C_VerifyInit...): the init goes alone first. */
        pair_flush_locked(p);
        mine = 0;
    }
    if (mine) {
        n = p->n;
        memcpy(init, p->init, n);
        p->pending = 0;
        __atomic_sub_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&p->lock);
    if (!mine) return 0;

    struct kc_conn *c;
    CK_RV arv = kc_acquire(&c);
    if (arv != CKR_OK) { *rv = arv; return 1; }
    ksa_buf *bp = &c->buf;
    ksa_buf_reset(bp);
    uint32_t id = __atomic_add_fetch(&kc_next_id, 1, __ATOMIC_RELAXED);
    ksa_put_u32(bp, id);
    ksa_put_u32(bp, KSA_FN_Pair);
    ksa_put_u32(bp, n);
    ksa_put_raw(bp, init, n);
    ksa_put_u32(bp, fn);
    CK_RV erv = ksa_encode_request(fn, args, bp);
    int x = -3;
    if (erv == CKR_OK && !bp->failed) x = kc_exchange_frame(c, id);
    int again = 0;
    if (x == -3) {
        /* The call cannot be encoded (it fails with its own CK_RV): the init alone, then the call as usual. */
        again = 1;
    } else if (x == -2) {
        *rv = CKR_DEVICE_ERROR;
    } else if (x != 0) {
        *rv = CKR_DEVICE_REMOVED;
    } else {
        ksa_rd r = {bp->data, bp->len, 0};
        (void)ksa_get_u32(&r);
        CK_RV frv = ksa_get_u64(&r);
        (void)ksa_get_u8(&r);
        if (frv == CKR_FUNCTION_NOT_SUPPORTED && !r.failed && r.left == 0) {
            /* An agent without pairs: never again; this time the two calls one by one. */
            __atomic_store_n(&kc_pairs_off, 1, __ATOMIC_RELEASE);
            again = 1;
        } else {
            uint32_t m = ksa_get_u32(&r);
            const uint8_t *first = r.failed || m > r.left ? NULL : ksa_get_raw(&r, m);
            if (frv != CKR_OK || !first || m < 8) {
                *rv = frv != CKR_OK ? frv : CKR_DEVICE_ERROR;
            } else {
                ksa_rd one = {first, m, 0};
                CK_RV irv = ksa_get_u64(&one);
                if (one.failed) irv = CKR_DEVICE_ERROR;
                if (irv != CKR_OK) {
                    pair_learn(h, NULL, 0, irv, NULL, 0);
                    *rv = irv;
                } else {
                    *rv = ksa_apply_reply(fn, args, &r);
                    pair_ended(fn, args, *rv);
                }
            }
        }
    }
    kc_frame_done(c);
    kc_release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (!again) return 1;
    /* Back to one by one: the init (its rv decides), then the call as usual. */
    pthread_mutex_lock(&p->lock);
    p->h = h;
    p->n = n;
    memcpy(p->init, init, n);
    p->pending = 1;
    __atomic_add_fetch(&kc_pending, 1, __ATOMIC_ACQ_REL);
    pair_flush_locked(p);
    int ok = p->known;
    pthread_mutex_unlock(&p->lock);
    if (!ok) { *rv = CKR_OPERATION_NOT_INITIALIZED; return 1; }
    return 0;
}

/* After a C_VerifyInit the agent accepted, sent alone: the ticket, when the
 * mechanism is one local_verify.c runs and the key is a public, non-private
 * key object of a keyshare token whose CKA_PUBLIC_KEY_INFO gives the key the
 * agent verifies with. Two or three round trips, once per session, key and
 * mechanism; stored only while that init is still the slot's, learnt at
 * `epoch` (the read before the init was sent: a change since moves the page,
 * and the ticket is never used). Anything unexpected: no ticket. */
/* A read for the ticket, outside the pair rules: C_GetTokenInfo is a call that
 * forgets every learnt init (pair_global_fn), the one just learnt included;
 * these three reads change nothing, and the session has no pending init. */
static CK_RV ticket_read(uint32_t fn, ksa_arg *args) {
    struct kc_conn *c;
    CK_RV rv = kc_acquire(&c);
    if (rv != CKR_OK) return rv;
    int x = kc_exchange_in(c, fn, args, &rv);
    kc_release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    return x ? CKR_DEVICE_ERROR : rv;
}

static void ticket_fetch(ksa_arg *args, const uint8_t *enc, uint32_t encn, const volatile uint64_t *page, uint64_t epoch) {
    kv_mech mech;
    if (!kv_wanted() || !kv_mechanism(args[1].ptr, &mech) || !kv_available()) return;
    CK_SESSION_HANDLE h = args[0].ul;
    const char *why = NULL;
    CK_OBJECT_HANDLE key = args[2].ul;
    /* A keyshare token's own key: "keyshare soft" (an external token's keys
     * come and go with a card the epoch does not follow). */
    CK_SESSION_INFO si;
    CK_TOKEN_INFO ti;
    static const char model[16] = "keyshare soft   ";
    ksa_arg sa[KSA_MAX_ARGS] = {{.ul = h}, {.ptr = &si}};
    ksa_arg ta[KSA_MAX_ARGS] = {{0}, {.ptr = &ti}};
    CK_RV srv = ticket_read(KSA_FN_GetSessionInfo, sa);
    ta[0].ul = si.slotID;
    if (srv != CKR_OK || ticket_read(KSA_FN_GetTokenInfo, ta) != CKR_OK || memcmp(ti.model, model, sizeof model) != 0) {
        ks_client_note("C_VerifyInit on session %lu: verified by the agent (not a keyshare soft token's key)", h);
        return;
    }
    CK_OBJECT_CLASS cls = 0;
    CK_BBOOL priv = CK_TRUE;
    uint8_t *spki = malloc(4096);
    if (!spki) return;
    CK_ATTRIBUTE t[3] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_PRIVATE, &priv, sizeof priv}, {CKA_PUBLIC_KEY_INFO, spki, 4096}};
    CK_ULONG caps[3];
    ksa_arg ga[KSA_MAX_ARGS] = {{.ul = h}, {.ul = key}, {.ptr = t, .len = 3, .plen = caps}};
    CK_RV rv = ticket_read(KSA_FN_GetAttributeValue, ga);
    void *k = NULL;
    uint32_t siglen = 0;
    if (rv == CKR_OK && t[0].ulValueLen == sizeof cls && cls == CKO_PUBLIC_KEY && t[1].ulValueLen == sizeof priv &&
        priv == CK_FALSE && t[2].ulValueLen > 0 && t[2].ulValueLen <= 4096)
        k = kv_key(spki, t[2].ulValueLen, &mech, &siglen);
    else
        why = rv != CKR_OK ? "its attributes cannot be read" : cls != CKO_PUBLIC_KEY ? "not a public key object"
            : priv != CK_FALSE ? "a private object (CKA_PRIVATE)" : "no CKA_PUBLIC_KEY_INFO";
    free(spki);
    if (!k) {
        ks_client_note("C_VerifyInit on session %lu key %lu: verified by the agent (%s)", h, key,
                       why ? why : "a key this module does not verify");
        return;
    }
    struct kc_pair *p = pair_slot(h);
    pthread_mutex_lock(&p->lock);
    if (encn <= KC_TICKET_MAX && ksa_epoch_read(page) == epoch) {
        /* This init's ticket, else a free one, else the other session's. */
        struct kc_ticket *t = NULL;
        for (int i = 0; i < KC_TICKETS && !t; i++)
            if (p->tickets[i].h == h && p->tickets[i].n == encn && memcmp(p->tickets[i].init, enc, encn) == 0) t = &p->tickets[i];
        for (int i = 0; i < KC_TICKETS && !t; i++)
            if (p->tickets[i].h == 0 || p->tickets[i].epoch != epoch) t = &p->tickets[i];
        if (!t) t = &p->tickets[h % KC_TICKETS];
        if (p->local && t == &p->tickets[p->cur]) t = NULL;   /* in use by a pending init: not replaced */
        if (t) {
            ticket_drop_locked(t);
            t->h = h;
            t->n = encn;
            memcpy(t->init, enc, encn);
            t->page = page;
            t->epoch = epoch;
            t->key = k;
            t->mech = mech;
            t->siglen = siglen;
            k = NULL;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (k) ks_client_note("C_VerifyInit on session %lu key %lu: changed meanwhile, no ticket", h, key);
    else ks_client_note("C_VerifyInit on session %lu key %lu: the same init again is verified in this process", h, key);
    kv_key_free(k);
}

CK_RV kc_call(uint32_t fn, ksa_arg *args) {
    const CK_FUNCTION_LIST_3_2 *L;
    if (__atomic_load_n(&kc_lazy, __ATOMIC_ACQUIRE) && kc_lazy_call(fn) && (L = kc_lazy_engine()) != NULL) {
        /* The in-process module over the empty view (Module.initialize: no store). */
        switch (fn) {
        case KSA_FN_GetInfo: return L->C_GetInfo(args[0].ptr);
        case KSA_FN_GetSlotList: return L->C_GetSlotList((CK_BBOOL)(args[0].ul != 0), args[1].ptr, args[1].plen);
        case KSA_FN_GetSlotInfo: return L->C_GetSlotInfo(args[0].ul, args[1].ptr);
        case KSA_FN_GetTokenInfo: return L->C_GetTokenInfo(args[0].ul, args[1].ptr);
        case KSA_FN_GetMechanismList: return L->C_GetMechanismList(args[0].ul, args[1].ptr, args[1].plen);
        case KSA_FN_GetMechanismInfo: return L->C_GetMechanismInfo(args[0].ul, args[1].ul, args[2].ptr);
        }
    }
    uint8_t enc[KC_PAIR_MAX];
    uint32_t encn = 0;
    int learn = 0;
    const volatile uint64_t *page = NULL;
    uint64_t epoch = 0;
    if (!__atomic_load_n(&kc_pairs_off, __ATOMIC_ACQUIRE)) {
        if (pair_init_fn(fn)) {
            if (pair_try_init(fn, args, enc, &encn, &page, &epoch)) return CKR_OK;
            learn = 1;
        } else if (pair_call_fn(fn)) {
            CK_RV prv;
            if (pair_call(fn, args, &prv)) return prv;
        } else {
            pair_flush_for(fn, args);
        }
    } else if (__atomic_load_n(&kc_pending, __ATOMIC_ACQUIRE)) {
        pair_flush_for(KSA_FN_Finalize, args);   /* turned off with inits pending: send them all */
    }
    struct kc_conn *c;
    CK_RV rv = kc_acquire(&c);
    if (rv != CKR_OK) return rv;
    int x = kc_exchange_in(c, fn, args, &rv);
    kc_release(c, x == -1 ? 1 : x == -2 ? 2 : 0);
    if (learn) {
        pair_learn(args[0].ul, enc, encn, x == 0 ? rv : CKR_DEVICE_ERROR, page, epoch);
        if (x == 0 && rv == CKR_OK && fn == KSA_FN_VerifyInit && page && epoch) ticket_fetch(args, enc, encn, page, epoch);
    }
    else if (x == 0 && pair_call_fn(fn) && !__atomic_load_n(&kc_pairs_off, __ATOMIC_ACQUIRE)) pair_ended(fn, args, rv);
    if (x == -2) {
        ks_client_note("the keyshare agent did not answer call %u within %d ms (KEYSHARE_AGENT_TIMEOUT): CKR_DEVICE_ERROR",
                    fn, kc_call_timeout_ms(fn, args));
        return CKR_DEVICE_ERROR;
    }
    return x ? CKR_DEVICE_REMOVED : rv;
}

