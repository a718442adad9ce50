/*
 * The keyshare agent protocol (docs/agent.md): the module's PKCS #11 calls
 * marshalled at the C ABI level, the way p11-kit's RPC does it, so the agent
 * rebuilds the exact C arguments and calls the same function table the
 * in-process module uses. Every semantic (output-buffer convention, NULL
 * versus empty, per-attribute results) is then the module's own.
 *
 * Frame: u32 little-endian length (<= KSA_MAX_FRAME) + payload.
 * Hello and its reply: hello.c. Reply status: 1 other protocol version, 2
 *   unknown client token, 3 refused (the caller check or the policy:
 *   C_Initialize is CKR_TOKEN_NOT_PRESENT), 4 the agent failed, 5 the store
 *   cannot be opened safely (C_Initialize is CKR_DEVICE_ERROR, as in-process on
 *   the same store), 6 busy (too many connections of this client).
 * Call: u32 call id, u32 function id, arguments by the function's signature.
 * Reply: u32 call id, u64 rv, u8 outputs present, outputs by the signature.
 *
 * Signature characters (one per C argument the agent rebuilds):
 *   u CK_ULONG value           I input bytes (ptr,len)     O output bytes (ptr,*len)
 *   R output bytes, fixed len  L CK_ULONG out pointer      A ULONG list out (ptr,*count)
 *   F FindObjects out (ptr,max,*count)                     T template in (ptr,count)
 *   G GetAttributeValue template (ptr,count)               M CK_MECHANISM pointer
 *   P opaque pointer: only NULL-ness crosses               i s t e m: CK_INFO, CK_SLOT_INFO,
 *   CK_TOKEN_INFO, CK_SESSION_INFO, CK_MECHANISM_INFO out pointers.
 *   N CK_MECHANISM pointer of a C_Message*Init (AEAD parameters are the message structs)
 *   X Y per-message parameter (ptr,len), in-out: X encryption, Y decryption (the tag is an input)
 *   Z per-message parameter of message signing: opaque, only its size crosses
 */
#ifndef KEYSHARE_AGENT_PROTOCOL_H
#define KEYSHARE_AGENT_PROTOCOL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../../../pkcs11/types/pkcs11_shim.h"

#define KSA_MAGIC 0x3141534bu /* "KSA1" little-endian */
/* 2: KDF mechanism parameters, mechanism outputs in replies.
 * 3: the symmetric, EdDSA and RSA-AES parameters, message-based functions
 *    with their parameters (N X Y Z), raw parameters copied by the agent.
 * 4: the shared region (KSA_HELLO_SHM, shm.c): an agent of version 3 would
 *    not send the byte a version-4 client waits for.
 * 5: the hello names no store (the agent serves the one it was started for)
 *    and carries tagged fields; the reply carries a one-line reason (hello.c). */
#define KSA_VERSION 5
#define KSA_MAX_FRAME (16u << 20)
/* The largest single buffer the agent allocates for an output (a bigger
 * capacity is served with this much: the frame could not carry more). */
#define KSA_MAX_OUTPUT (KSA_MAX_FRAME - 4096u)
#define KSA_TOKEN_LEN 16
#define KSA_MAX_ARGS 8

enum ksa_function {
    KSA_FN_Initialize = 1, KSA_FN_Finalize, KSA_FN_GetInfo, KSA_FN_GetSlotList, KSA_FN_GetSlotInfo,
    KSA_FN_GetTokenInfo, KSA_FN_GetMechanismList, KSA_FN_GetMechanismInfo, KSA_FN_InitToken, KSA_FN_InitPIN,
    KSA_FN_SetPIN, KSA_FN_OpenSession, KSA_FN_CloseSession, KSA_FN_CloseAllSessions, KSA_FN_GetSessionInfo,
    KSA_FN_GetOperationState, KSA_FN_SetOperationState, KSA_FN_Login, KSA_FN_Logout, KSA_FN_CreateObject,
    KSA_FN_CopyObject, KSA_FN_DestroyObject, KSA_FN_GetObjectSize, KSA_FN_GetAttributeValue,
    KSA_FN_SetAttributeValue, KSA_FN_FindObjectsInit, KSA_FN_FindObjects, KSA_FN_FindObjectsFinal,
    KSA_FN_EncryptInit, KSA_FN_Encrypt, KSA_FN_EncryptUpdate, KSA_FN_EncryptFinal, KSA_FN_DecryptInit,
    KSA_FN_Decrypt, KSA_FN_DecryptUpdate, KSA_FN_DecryptFinal, KSA_FN_DigestInit, KSA_FN_Digest,
    KSA_FN_DigestUpdate, KSA_FN_DigestKey, KSA_FN_DigestFinal, KSA_FN_SignInit, KSA_FN_Sign, KSA_FN_SignUpdate,
    KSA_FN_SignFinal, KSA_FN_SignRecoverInit, KSA_FN_SignRecover, KSA_FN_VerifyInit, KSA_FN_Verify,
    KSA_FN_VerifyUpdate, KSA_FN_VerifyFinal, KSA_FN_VerifyRecoverInit, KSA_FN_VerifyRecover,
    KSA_FN_DigestEncryptUpdate, KSA_FN_DecryptDigestUpdate, KSA_FN_SignEncryptUpdate,
    KSA_FN_DecryptVerifyUpdate, KSA_FN_GenerateKey, KSA_FN_GenerateKeyPair, KSA_FN_WrapKey, KSA_FN_UnwrapKey,
    KSA_FN_DeriveKey, KSA_FN_SeedRandom, KSA_FN_GenerateRandom, KSA_FN_GetFunctionStatus,
    KSA_FN_CancelFunction, KSA_FN_WaitForSlotEvent,
    /* 3.0 */
    KSA_FN_LoginUser, KSA_FN_SessionCancel, KSA_FN_MessageEncryptInit, KSA_FN_EncryptMessage,
    KSA_FN_EncryptMessageBegin, KSA_FN_EncryptMessageNext, KSA_FN_MessageEncryptFinal,
    KSA_FN_MessageDecryptInit, KSA_FN_DecryptMessage, KSA_FN_DecryptMessageBegin, KSA_FN_DecryptMessageNext,
    KSA_FN_MessageDecryptFinal, KSA_FN_MessageSignInit, KSA_FN_SignMessage, KSA_FN_SignMessageBegin,
    KSA_FN_SignMessageNext, KSA_FN_MessageSignFinal, KSA_FN_MessageVerifyInit, KSA_FN_VerifyMessage,
    KSA_FN_VerifyMessageBegin, KSA_FN_VerifyMessageNext, KSA_FN_MessageVerifyFinal,
    /* 3.2 (issue 18; v32_params.c): the signature-first verify, the validation flags,
     * authenticated wrapping. An agent older than these answers CKR_FUNCTION_NOT_SUPPORTED. */
    KSA_FN_VerifySignatureInit, KSA_FN_VerifySignature, KSA_FN_VerifySignatureUpdate,
    KSA_FN_VerifySignatureFinal, KSA_FN_GetSessionValidationFlags, KSA_FN_WrapKeyAuthenticated,
    KSA_FN_UnwrapKeyAuthenticated,
    /* 3.2 key encapsulation (issue 18, ML-KEM; pq_params.c's parameters). */
    KSA_FN_EncapsulateKey, KSA_FN_DecapsulateKey,
    KSA_FN_COUNT
};

/* A pair (issue 30, docs/agent-transport.md "Round trips: init and call in one frame"):
 * an init and the one-shot call that follows it, in one frame, served in
 * order; the second only when the first returned CKR_OK. Request: u32 id,
 * u32 KSA_FN_Pair, u32 n, then the init's (u32 fn, arguments) in n bytes,
 * then the call's (u32 fn, arguments) to the end. Reply: u32 id, u64
 * CKR_OK, u8 0, u32 m, the init's reply (rv, outputs) in m bytes, then the
 * call's reply when it ran. Only the pairs ksa_pair_allowed names; anything
 * else, or a malformed part, is answered CKR_ARGUMENTS_BAD for the frame. An
 * agent without pairs answers CKR_FUNCTION_NOT_SUPPORTED for the frame (the
 * client then sends the two calls one by one). */
#define KSA_FN_Pair 0x100u
int ksa_pair_allowed(uint32_t init_fn, uint32_t call_fn);

/* The signature of a function id, or NULL for an unknown id. */
const char *ksa_signature(uint32_t fn);

/* One C argument. Which fields mean what depends on the signature char. */
typedef struct {
    CK_ULONG ul;      /* u: the value; F: the maximum count; R: the length; X Y Z (agent): the struct kind */
    void *ptr;        /* I O R A F T G M P and the structs: the pointer */
    CK_ULONG len;     /* I: the length; T G: the attribute count */
    CK_ULONG *plen;   /* O: *len; A F: *count; L: the out value */
    CK_ULONG cap;     /* client side: the capacity when the request was made; X Y Z: the kind sent */
} ksa_arg;

/* A growing output buffer; `failed` latches an allocation or bound failure. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    int failed;
} ksa_buf;

/* A reader over received bytes; `failed` latches truncation. */
typedef struct {
    const uint8_t *p;
    size_t left;
    int failed;
} ksa_rd;

void ksa_buf_init(ksa_buf *b);
void ksa_buf_reset(ksa_buf *b);   /* zeroes what was written (PINs pass through) */
void ksa_buf_free(ksa_buf *b);    /* zeroes, then frees */
void ksa_put_u8(ksa_buf *b, uint8_t v);
void ksa_put_u16(ksa_buf *b, uint16_t v);
void ksa_put_u32(ksa_buf *b, uint32_t v);
void ksa_put_u64(ksa_buf *b, uint64_t v);
void ksa_put_raw(ksa_buf *b, const void *p, size_t n);
uint8_t ksa_get_u8(ksa_rd *r);
uint16_t ksa_get_u16(ksa_rd *r);
uint32_t ksa_get_u32(ksa_rd *r);
uint64_t ksa_get_u64(ksa_rd *r);
const uint8_t *ksa_get_raw(ksa_rd *r, size_t n);

/* Server-side allocations for one call, freed (zeroed) together. */
typedef struct ksa_arena {
    struct ksa_block *head;
    size_t total;
} ksa_arena;
void *ksa_arena_alloc(ksa_arena *a, size_t n);   /* zeroed; NULL past the budget */
void ksa_arena_free(ksa_arena *a);

/* Client: encodes the arguments of `fn` after the call header. Returns CKR_OK
 * or the CK_RV the call must fail with before anything is sent
 * (CKR_MECHANISM_PARAM_INVALID for a parameter that cannot be marshalled,
 * CKR_ARGUMENTS_BAD for inputs past the frame bound). */
CK_RV ksa_encode_request(uint32_t fn, ksa_arg *args, ksa_buf *out);

/* Client: applies a reply's outputs to the caller's arguments. Returns the
 * call's rv, or CKR_DEVICE_ERROR for a malformed reply. */
CK_RV ksa_apply_reply(uint32_t fn, ksa_arg *args, ksa_rd *in);

/* Agent: decodes a call's arguments into agent memory. 0 on success, -1 malformed. */
int ksa_decode_request(uint32_t fn, ksa_rd *in, ksa_arg *args, ksa_arena *arena);
/* The same; `sized`: a byte output of a function whose output follows its input (C_Encrypt,
 * C_DecryptUpdate, C_EncryptMessage...) gets the input's length plus a slack instead of a larger
 * capacity the client declares, and *reduced is set (the caller calls again at the declared
 * capacity if the module answers CKR_BUFFER_TOO_SMALL: ksa_serve). */
int ksa_decode_request_sized(uint32_t fn, ksa_rd *in, ksa_arg *args, ksa_arena *arena, int sized, int *reduced);

/* Agent: encodes rv and the outputs after the call. */
void ksa_encode_reply(uint32_t fn, ksa_arg *args, CK_RV rv, ksa_buf *out);

/* Agent: serves one call frame (u32 call id, u32 fn, args) with `f`, the
 * in-process function table, writing the whole reply payload to `out`. A
 * malformed call gets CKR_ARGUMENTS_BAD without outputs (and a -1 return
 * so the agent can log it); an unknown function CKR_FUNCTION_NOT_SUPPORTED. */
int ksa_serve(const CK_FUNCTION_LIST_3_0 *f, const uint8_t *req, size_t len, ksa_buf *out);

/* The PKCS #11 3.2 entries the agent serves (issue 18), as plain function pointers so the
 * protocol needs no 3.2 header: the agent's process registers its in-process ones once
 * (pkcs11/abi/agent_serve_3_2.c, a constructor); until then, or in a process that never
 * registers, the 3.2 calls are answered CKR_FUNCTION_NOT_SUPPORTED (v32_params.c). */
typedef struct ksa_functions_3_2 {
    CK_RV (*VerifySignatureInit)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*VerifySignature)(CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*VerifySignatureUpdate)(CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG);
    CK_RV (*VerifySignatureFinal)(CK_SESSION_HANDLE);
    CK_RV (*GetSessionValidationFlags)(CK_SESSION_HANDLE, CK_ULONG, CK_FLAGS *);
    CK_RV (*WrapKeyAuthenticated)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE,
                                  CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR);
    CK_RV (*UnwrapKeyAuthenticated)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_BYTE_PTR, CK_ULONG,
                                    CK_ATTRIBUTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);
    /* ML-KEM (issue 18). */
    CK_RV (*EncapsulateKey)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG,
                            CK_BYTE_PTR, CK_ULONG_PTR, CK_OBJECT_HANDLE_PTR);
    CK_RV (*DecapsulateKey)(CK_SESSION_HANDLE, CK_MECHANISM_PTR, CK_OBJECT_HANDLE, CK_ATTRIBUTE_PTR, CK_ULONG,
                            CK_BYTE_PTR, CK_ULONG, CK_OBJECT_HANDLE_PTR);
} ksa_functions_3_2;
void ksa_register_functions_3_2(const ksa_functions_3_2 *f);
/* serve.c: one 3.2 call with the registered functions (CKR_FUNCTION_NOT_SUPPORTED when none,
 * or for a function id that is not a 3.2 one). */
CK_RV ksa_call_3_2(uint32_t fn, ksa_arg *a);

/* The mechanisms whose parameter is pointer-free and may cross as raw bytes. */
int ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE type);

/* ---- which agent, which store (paths.c); reaching it (connect.c) ---- */

/* The store a process names (KEYSHARE_HOME, else XDG_DATA_HOME/keyshare, else
 * HOME/.local/share/keyshare), absolute, symlinks resolved when it exists. 0 or -1. */
int ksa_store_home(char *out, size_t n);
/* 1 when `store` is the effective user's default store (PASSWD HOME/.local/share/keyshare). */
int ksa_store_is_default(const char *store);
/* $XDG_RUNTIME_DIR/keyshare, else /tmp/keyshare-agent-EUID (*shared_tmp = 1). */
int ksa_agent_base(char *dir, size_t n, int *shared_tmp);
/* The agent's directory: $KEYSHARE_AGENT_SOCKET's directory; else BASE for the
 * default store and BASE/s.<hash of the store's path> for any other. 0 or -1 (too long). */
int ksa_agent_dir(char *dir, size_t n);
/* The socket path: $KEYSHARE_AGENT_SOCKET, else DIR/agent.sock. */
int ksa_socket_path(char *path, size_t n);
/* Creates the directory 0700 if missing (create) and checks it: a directory,
 * not a link, owned by the effective uid, no group or other access, every
 * ancestor (symlinks resolved) owned by us or root and not writable by others
 * unless sticky. 0, or -1 with errno and one line in `why` naming the path,
 * its owner and mode. */
int ksa_check_dir(const char *dir, int create, char *why, size_t n);
/* 1 in a user namespace other than the initial one (a sandbox, a rootless
 * container): such a process never starts an agent (connect.c). */
int ksa_in_user_namespace(void);
/* ksa_check_dir without the line. */
int ksa_prepare_dir(const char *dir, int create);

/* Connects to the socket at path, waiting at most timeout_ms for a full
 * backlog, and checks the listener is of our effective uid (SO_PEERCRED). The
 * descriptor (blocking, close-on-exec); -1 no agent there; -2 refused (`why`);
 * -3 the agent does not accept (`why`). */
int ksa_connect(const char *path, int timeout_ms, pid_t *peer_pid, char *why, size_t n);
/* The one way to reach the agent: checks the directory, connects, and when
 * nothing listens and allow_start, starts `program agent --daemonize` under
 * DIR/start.lock with the minimal environment (connect.c) and connects. The
 * descriptor, -1 no agent (allow_start 0), else -2/-3 with `why`. */
int ksa_connect_or_start(const char *program, int allow_start, int timeout_ms, pid_t *peer_pid, char *why, size_t n);
/* Whether an environment entry (NAME=VALUE) is passed to an agent it starts. */
int ksa_agent_env_kept(const char *entry);
/* SO_RCVTIMEO and SO_SNDTIMEO (0: none). */
int ksa_set_timeout(int fd, int ms);
/* A duration in seconds from the environment, in ms: at least 1 (0 would mean no
 * timeout to SO_RCVTIMEO), the fallback when unset or invalid (NaN included). */
int ksa_timeout_ms(const char *name, int fallback_ms);
/* Client defaults: connecting and the hello, and a call's reply (KEYSHARE_AGENT_TIMEOUT). */
#define KSA_CONNECT_TIMEOUT_MS 5000
#define KSA_HELLO_TIMEOUT_MS 10000
#define KSA_CALL_TIMEOUT_MS 120000
/* Once a frame's first bytes are in, the rest must follow within this (both sides).
 * The shm fuzzer and its replay (single-threaded: the rest never comes) build with 0. */
#ifndef KSA_FRAME_TIMEOUT_MS
#define KSA_FRAME_TIMEOUT_MS 10000
#endif

/* ---- the hello (hello.c) ---- */

#define KSA_HELLO_MAX_FRAME (64u << 10)
#define KSA_HELLO_MAX_FIELDS 32
#define KSA_HELLO_MAX_FIELD 4096
#define KSA_HELLO_MAX_REASON 512
/* Field tags. */
#define KSA_HELLO_GROUPS 1u
/* One NAME=VALUE of the client's environment that says where a person can be
 * asked (issue 27: the agent's prompt goes to the client's display, never to
 * whoever started the agent): only the names ksa_hello_display_name accepts. */
#define KSA_HELLO_DISPLAY 2u
/* The client's controlling terminal (a path under /dev), for a terminal prompt. */
#define KSA_HELLO_TTY 3u
#define KSA_HELLO_MAX_DISPLAY 8
typedef struct {
    const uint8_t *p;
    uint32_t len;
} ksa_span;
typedef struct {
    uint32_t magic;
    uint16_t version, flags;
    const uint8_t *token;      /* KSA_TOKEN_LEN bytes in the frame */
    const uint8_t *groups;     /* KEYSHARE_ACCESS_GROUPS (no NUL), or NULL */
    uint32_t groups_len;
    ksa_span display[KSA_HELLO_MAX_DISPLAY];   /* NAME=VALUE entries, checked names, no NUL */
    uint32_t display_count;
    ksa_span tty;              /* p NULL: none */
} ksa_hello;
/* 1 when NAME (n bytes) is one of the display variables a hello may carry:
 * DISPLAY, WAYLAND_DISPLAY, XAUTHORITY, XDG_SESSION_TYPE, XDG_RUNTIME_DIR,
 * DBUS_SESSION_BUS_ADDRESS, TERM, LANG. */
int ksa_hello_display_name(const char *name, size_t n);
typedef struct {
    uint16_t version, status;
    const uint8_t *token;
    char reason[KSA_HELLO_MAX_REASON + 1];
} ksa_hello_reply;
void ksa_hello_build(ksa_buf *b, uint16_t flags, const uint8_t token[KSA_TOKEN_LEN], const char *groups);
/* A new client's hello with its display: the display variables of `env`
 * (NULL-terminated NAME=VALUE entries; others are skipped) and its tty (or NULL). */
void ksa_hello_build_full(ksa_buf *b, uint16_t flags, const uint8_t token[KSA_TOKEN_LEN], const char *groups,
                          char *const *env, const char *tty);
/* 0 ok; -1 malformed or not a hello; -2 another protocol version (h->version set). */
int ksa_hello_parse(const uint8_t *p, size_t n, ksa_hello *h);
void ksa_hello_reply_build(ksa_buf *b, uint16_t status, const uint8_t token[KSA_TOKEN_LEN], const char *reason);
/* 0 ok; -1 malformed; -2 another protocol version (version and status set). */
int ksa_hello_reply_parse(const uint8_t *p, size_t n, ksa_hello_reply *h);

/* ---- the gate: accepted connections until their first frame (gate.c) ---- */

/* The CLI's control requests (Sources/KeyshareAgent/ControlProtocol.swift): "KSC1". */
#define KSA_CONTROL_MAGIC 0x3143534bu
enum { KSA_GATE_HELLO = 1, KSA_GATE_CONTROL = 2 };
typedef struct ksa_gate ksa_gate;
typedef struct {
    int fd;
    pid_t pid;
    int kind;          /* KSA_GATE_HELLO or _CONTROL; 0: refused */
    const char *why;   /* refused: the reason ("" when the peer just closed) */
    uint8_t *data;     /* the frame's payload (malloc'd, now the taker's), len bytes of cap */
    size_t len, cap;
} ksa_gate_event;
ksa_gate *ksa_gate_new(unsigned max_pending, unsigned max_per_pid, size_t byte_budget, int deadline_ms);
/* 0: the connection waits in the gate (made non-blocking); -1 refused (why; the caller closes fd). */
int ksa_gate_add(ksa_gate *g, int fd, pid_t pid, const char **why);
unsigned ksa_gate_count(const ksa_gate *g);
size_t ksa_gate_bytes(const ksa_gate *g);
/* The waiting connections as pollfds (POLLIN); the count written. */
int ksa_gate_pollfds(const ksa_gate *g, struct pollfd *out, int max);
/* Milliseconds until the earliest deadline, -1 when nothing waits. */
int ksa_gate_timeout_ms(const ksa_gate *g);
/* Reads the ready ones, ends the finished, refused and late ones as events. */
void ksa_gate_service(ksa_gate *g, const struct pollfd *pfds, int n);
/* The next event: 1 (and *ev), 0 none. A done event's socket is blocking again. */
int ksa_gate_take(ksa_gate *g, ksa_gate_event *ev);
/* Ends the gate: the waiting connections and the events not taken are closed
 * and their bytes wiped. The agent's gate lives as long as its loop; the unit
 * tests and the fuzzer (Tests/fuzz/gate_fuzz.c, LeakSanitizer) end theirs. */
void ksa_gate_free(ksa_gate *g);

/* ---- frames (frame.c) ---- */

/* Writes u32 length + payload, all of it (EINTR retried). 0 or -1. */
int ksa_write_frame(int fd, const uint8_t *p, size_t n);
/* Reads one frame into b (reset first). 0, or -1 (EOF, error, oversize). */
int ksa_read_frame(int fd, ksa_buf *b);
/* The same, in one recv when the frame fits: for calls and replies after the
 * hello (the peer never sends ahead there). */
int ksa_read_frame_next(int fd, ksa_buf *b);

/* ---- bounded adaptive polling before a blocking read (spin.c) ---- */

/* KEYSHARE_AGENT_SPIN_US when unset: the most a reader polls for its peer's
 * next frame before it blocks (docs/agent-transport.md, "Round trips"). */
#define KSA_SPIN_US_DEFAULT 50u
#define KSA_SPIN_ALWAYS 1u
typedef struct ksa_spin {
    uint32_t budget_ns;      /* 0: never poll */
    uint32_t skip;           /* waits left that block at once (back-off after a miss) */
    uint32_t misses;         /* consecutive polls the peer did not answer */
    uint32_t flags;          /* KSA_SPIN_ALWAYS: poll whatever the load (unit tests) */
    uint64_t spins_answered; /* counters, for tests and profiling */
    uint64_t spins_missed;
    uint64_t wait_start_ns;  /* when the current wait began (ksa_spin_wait), for ksa_spin_done */
    uint32_t learned_ns;     /* 5/4 of the peer's longest recent answer time, decaying (0: none under the cap) */
    uint32_t own;            /* how many of this process's active calls are the waiter's own (client 1, agent 0) */
} ksa_spin;
/* This process's calls in progress (the client: sent, reply not yet read;
 * the agent: a call being served). A waiter polls only while no other call
 * of its process is in progress (issue 30): with two client threads and
 * their two agent threads on two CPUs, a poller takes the CPU its own or
 * another pair's peer needs; it parks instead (shm.c). */
void ksa_spin_active(int delta);
/* KEYSHARE_AGENT_SPIN_US of this process (0 = off; at most 1000), else the default. */
uint32_t ksa_spin_budget_us(void);
void ksa_spin_init(ksa_spin *s, uint32_t budget_us);
/* Before a blocking read of fd: polls (MSG_PEEK, never consumes) for at most
 * the budget while the machine has a CPU to spare. 1: something is there to
 * read (a frame, EOF or an error), 0: nothing yet (block as usual). */
int ksa_spin_wait(int fd, ksa_spin *s);
/* After the read that followed ksa_spin_wait: learns how long the peer took
 * to answer. A reply that comes within KSA_SPIN_LEARN_MAX_US (an ML-KEM or
 * ML-DSA verify call, 40-200 us) sets the next waits' budget to 5/4 of the
 * longest recent answer time (decaying by 1/8 a call), so a call a little longer than the base budget is polled for instead
 * of paying two wakeups; a longer one (RSA key generation, an idle peer)
 * leaves the budget at the base and the back-off as it is. */
#define KSA_SPIN_LEARN_MAX_US 400u
void ksa_spin_done(ksa_spin *s);
/* The pieces of ksa_spin_wait, for a poll on something other than a socket
 * (shm.c): ksa_spin_start decides (budget, back-off, a CPU to spare) and
 * returns the deadline in ksa_mono_ns time, 0 for no poll; then exactly one
 * of ksa_spin_hit (answered) or ksa_spin_miss (the deadline passed). */
uint64_t ksa_mono_ns(void);
uint64_t ksa_spin_start(ksa_spin *s);
void ksa_spin_hit(ksa_spin *s);
void ksa_spin_miss(ksa_spin *s);
void ksa_spin_pause(void);

/* ---- frames through shared memory (shm.c; docs/agent-transport.md "Round trips: shared memory") ---- */

/* A connection's shared region: per direction a state word, a length and
 * one frame's bytes (the payload only: no length prefix), 64 KiB a
 * direction; a bigger frame goes on the socket. The layout is shm.c's
 * (shm_layout.h); callers hold pointers only. */
#define KSA_SHM_DIR_SIZE (64u << 10)
#define KSA_SHM_DATA (KSA_SHM_DIR_SIZE - 64u)
typedef struct ksa_shm ksa_shm;
typedef struct ksa_shm_dir ksa_shm_dir;
enum {
    KSA_SHM_EMPTY = 0,    /* nothing, the receiver not waiting */
    KSA_SHM_SPINNING = 1, /* the receiver polls the state word */
    KSA_SHM_SLEEPING = 2, /* the receiver blocks in recv: the frame must come on the socket */
    KSA_SHM_FULL = 3,     /* a frame is in data[0..len) */
    KSA_SHM_SOCKET = 4,   /* the frame comes on the socket (too big for data) */
    KSA_SHM_PARKED = 5,   /* the receiver sleeps on the state word (futex), for at most park_ns */
};
/* How long a receiver sleeps on its state word (a futex: no CPU) before it
 * falls back to sleeping in recv, where it also sees the peer's death (EOF).
 * A sender that finds PARKED writes the frame and wakes it: one futex call
 * each side instead of a send and a recv (docs/agent-transport.md, "Round trips: futex
 * parking"). KEYSHARE_AGENT_PARK_US overrides it (0: off, at most 1 s). */
#define KSA_SHM_PARK_US_DEFAULT 50000u
uint32_t ksa_shm_park_us(void);
/* The region's size in bytes, and a direction's fields (tests, the fuzzer):
 * to_agent 1 for the client-to-agent direction. */
size_t ksa_shm_size(void);
uint32_t *ksa_shm_state(ksa_shm *shm, int to_agent);
uint32_t *ksa_shm_len(ksa_shm *shm, int to_agent);
uint8_t *ksa_shm_data(ksa_shm *shm, int to_agent);
/* A connection: its socket, and its shared region when it has one. */
typedef struct ksa_chan {
    int fd;
    ksa_shm *shm;       /* NULL: frames on the socket only */
    ksa_shm_dir *in;    /* what this side receives */
    ksa_shm_dir *out;   /* what this side sends */
    ksa_spin spin;
    uint64_t park_ns;   /* how long a receive sleeps on the state word (0: straight to recv) */
    uint64_t shm_in, shm_out, sock_in, sock_out; /* frames each way, for tests and profiling */
    uint64_t parked_in, wakes_out;               /* frames met parked / futex wakes sent */
} ksa_chan;
/* KEYSHARE_AGENT_SHM=0 in this process's environment turns the shared region off. */
int ksa_shm_wanted(void);
/* The agent's side: a sealed memfd of sizeof(ksa_shm) (it cannot be shrunk
 * or grown by the client, so the agent's mapping never faults), -1. */
int ksa_shm_create(void);
/* Maps fd (checks its size); NULL on failure. The mapping is not inherited
 * by a fork child (MADV_DONTFORK) and left out of core dumps. */
ksa_shm *ksa_shm_map(int fd);
void ksa_shm_unmap(ksa_shm *shm);
/* agent_side: 1 for the agent (receives to_agent), 0 for the client. Both
 * sides check every state word and length they read (the agent's peer is
 * not trusted; the client's checks cost nothing). shm may be NULL. */
void ksa_chan_init(ksa_chan *c, int fd, ksa_shm *shm, int agent_side, uint32_t spin_us);
/* Sends one frame: through the region when the peer is not asleep and the
 * frame fits, else on the socket. 0, or -1 (broken: close the connection). */
int ksa_chan_send(ksa_chan *c, const uint8_t *p, size_t n);
/* Receives one frame into b (reset first): polls the region within the spin
 * budget, then blocks on the socket. Only where calls and replies strictly
 * alternate (after the hello). 0, or -1 (EOF, error, a malformed region). */
int ksa_chan_recv(ksa_chan *c, ksa_buf *b);
/* Frees nothing but the mapping (the socket is the caller's). */
void ksa_chan_close_shm(ksa_chan *c);

/* The hello's flags (u16): a new client's debug-log descriptor follows the
 * hello frame as one SCM_RIGHTS byte (ksa_send_fd). */
#define KSA_HELLO_LOG 1u
/* The client asks for a shared region (shm.c): after a hello reply of status
 * 0 the agent sends one byte, with the region's memfd as SCM_RIGHTS or alone
 * (none: frames on the socket only). */
#define KSA_HELLO_SHM 2u
/* The client authenticates a person (issue 27, "Unlocks that are scoped"):
 * libpam or libcryptsetup is loaded in it (a PAM stack, a disk unlocker), so
 * no `keyshare unlock` may reach it. Set by the module (agent_client.c); the
 * agent trusts it as is: a forged flag only loses the client the unlock. */
#define KSA_HELLO_AUTHENTICATOR 4u
/* The client asks for the agent's epoch page (epoch.c; docs/agent.md, "Verify
 * in the client"). An agent that has one answers the hello with the reason
 * "epoch" and sends its descriptor after the shared region's byte (after the
 * reply when no region was asked for); an agent without one (or older) leaves
 * the reason empty and sends nothing more. */
#define KSA_HELLO_EPOCH 8u
#define KSA_HELLO_EPOCH_REASON "epoch"
#define KSA_HELLO_STORE_UNSAFE 5u
/* Sends fd (or, with fd < 0 or a closed fd, the byte alone). 0 or -1. */
int ksa_send_fd(int sock, int fd);
/* The descriptor, -1 when none came, -2 on a broken connection. */
int ksa_recv_fd(int sock);
/* The agent's side of a client's debug-log descriptor: one the agent can
 * write to without ever blocking (a client's pipe that nobody reads, a
 * stopped terminal: a blocked write would hold the call inside the module,
 * and a fork would wait for it). A pipe, FIFO or terminal is opened anew
 * through /proc/self/fd with O_NONBLOCK (its own open file description: the
 * client's stays as it was) and the received one closed; a socket is kept
 * (written with MSG_DONTWAIT: PKCS11 Log); anything else is kept. -1 when
 * a pipe or terminal cannot be opened anew (no reader left: no log). */
int ksa_log_fd_nonblocking(int fd);

/* ---- the epoch page (epoch.c) ---- */
#define KSA_EPOCH_PAGE 4096
/* The agent's side: the page's descriptor (made on first use, sealed: no
 * client can write it or change its size), -1 when the kernel cannot seal it. */
int ksa_epoch_fd(void);
/* Moves the counter (any event that may change a C_VerifyInit's answer). */
void ksa_epoch_bump(void);
/* Starts the watcher of the store's directory (once); without it no page is
 * given (-1). */
int ksa_epoch_watch(const char *dir);
/* 1 when `fn` changes nothing a C_VerifyInit of the calling client finds
 * (GetAttributeValue, FindObjects*, the crypto calls, ...). */
int ksa_epoch_fn_reads(uint32_t fn);
/* 1 when a served call of `fn` may change what another client's C_VerifyInit
 * finds (every function but the reads and those that change only the
 * caller's own logins, sessions and operations): serve.c bumps the counter
 * after it. */
int ksa_epoch_fn_changes(uint32_t fn);
/* The client's side: maps the page read-only (its size and seals checked);
 * NULL on failure. */
const volatile uint64_t *ksa_epoch_map(int fd);
/* The counter now; 0 when there is no page or the agent no longer watches
 * the store (nothing may be taken as current). */
uint64_t ksa_epoch_read(const volatile uint64_t *page);

#endif
