/*
 * Public-key verification in the client (docs/agent.md, "Verify in the
 * client"): the system's libcrypto.so.3, loaded on first use with dlopen, so
 * the module links no OpenSSL. Nothing here decides whether a key may be
 * used: the agent did at C_VerifyInit (pairs.c keeps its answer as a
 * ticket); this file only computes what the agent's verify would.
 */
#ifndef KEYSHARE_LOCAL_VERIFY_H
#define KEYSHARE_LOCAL_VERIFY_H
#include <stddef.h>
#include <stdint.h>
#include "../../types/pkcs11_shim.h"

enum { KV_RSA = 1, KV_EC = 2 };
enum { KV_PKCS1 = 1, KV_PSS = 2, KV_ECDSA = 3 };

/* A verify mechanism the client can run, as the agent's SignatureOperation
 * runs it: the module hashes the input with `digest` (0: the input is taken
 * as is), then verifies that with the scheme. Digests are indexes (KV_SHA*). */
enum { KV_NONE = 0, KV_SHA1, KV_SHA224, KV_SHA256, KV_SHA384, KV_SHA512, KV_DIGESTS };
typedef struct kv_mech {
    int family, scheme;
    int digest;          /* the module's hash of the input (KV_NONE: raw input) */
    int pss_md, mgf1_md; /* PSS: the parameter's hash and MGF1 hash */
    int salt;
} kv_mech;

/* 1 and *out filled when `m` is one of the mechanisms verified here
 * (CKM_ECDSA[_SHA*], CKM_[SHA*_]RSA_PKCS, CKM_[SHA*_]RSA_PKCS_PSS with a
 * well-formed parameter); 0 otherwise (the agent verifies). */
int kv_mechanism(const CK_MECHANISM *m, kv_mech *out);
/* Whether KEYSHARE_AGENT_VERIFY_LOCAL=0 leaves verification to the agent. */
int kv_wanted(void);
/* libcrypto.so.3 loaded and every function found (once; a debug line when not). */
int kv_available(void);
/* The key of a SubjectPublicKeyInfo (at most 16 KiB) if it fits the
 * mechanism's family; *siglen the signature size the agent requires. NULL
 * when it cannot be used here. A counted reference: kv_key_ref, kv_key_free. */
void *kv_key(const uint8_t *spki, size_t n, const kv_mech *m, uint32_t *siglen);
void kv_key_ref(void *key);
void kv_key_free(void *key);
/* A verify context of `key` set up for `m` (padding, digests, salt), for
 * kv_verify again and again, by one thread at a time; NULL on failure. */
void *kv_ctx(void *key, const kv_mech *m);
void kv_ctx_free(void *ctx);
/* 1 the signature verifies, 0 it does not (CKR_SIGNATURE_INVALID), -1 the
 * agent must decide (an input whose answer is not one of those two: a
 * length out of range, no memory...). sn must already equal the key's size.
 * ctx: kv_ctx(key, m), or NULL for a context made for this verify only. */
int kv_verify(void *key, void *ctx, const kv_mech *m, size_t siglen, const uint8_t *data, size_t dn, const uint8_t *sig,
              size_t sn);
#endif
