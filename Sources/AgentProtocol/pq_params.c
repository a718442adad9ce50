/*
 * The PKCS #11 3.2 post-quantum signature parameters (issue 18): CK_SIGN_ADDITIONAL_CONTEXT of
 * CKM_ML_DSA, CKM_SLH_DSA and the CKM_HASH_ML_DSA_<hash> / CKM_HASH_SLH_DSA_<hash> mechanisms,
 * and CK_HASH_SIGN_ADDITIONAL_CONTEXT of CKM_HASH_ML_DSA / CKM_HASH_SLH_DSA.
 *
 * As for the other pointer-carrying structs (struct_params.c), the client sends the hedge
 * variant, the context bytes and the hash, and the agent rebuilds the struct in its arena, so
 * the module's own parser (Sources/PKCS11/PostQuantum.swift) judges every value. A context
 * longer than the module accepts (255 bytes) crosses as NULL with its length: the module refuses
 * it on the length alone, so the client never reads past what a caller could have meant.
 */
#include <string.h>
#include "codec_internal.h"

#define MAX_PQ_CONTEXT 255u

static int is_plain(CK_MECHANISM_TYPE t) {
    switch (t) {
    KS_CASES_PQ_CONTEXT_SIGN
        return 1;
    default:
        return 0;
    }
}

static int is_hash(CK_MECHANISM_TYPE t) { return t == CKM_HASH_ML_DSA || t == CKM_HASH_SLH_DSA; }

int ksa_put_pq_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv) {
    int plain = is_plain(m->mechanism), hash = is_hash(m->mechanism);
    if (!plain && !hash) return 0;
    *rv = CKR_OK;
    if (m->ulParameterLen != (plain ? sizeof(CK_SIGN_ADDITIONAL_CONTEXT) : sizeof(CK_HASH_SIGN_ADDITIONAL_CONTEXT))) {
        /* The module refuses a wrong size on the size alone: zeros of that length. */
        if (m->ulParameterLen > 4096) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
        ksa_put_u8(b, PARAM_PQ_SIZED);
        ksa_put_u64(b, m->ulParameterLen);
        return 1;
    }
    /* Both structs start with the same three fields. */
    const CK_SIGN_ADDITIONAL_CONTEXT *p = m->pParameter;
    ksa_put_u8(b, plain ? PARAM_PQ_SIGN : PARAM_PQ_HASH_SIGN);
    ksa_put_u64(b, p->hedgeVariant);
    ksa_put_bytes(b, p->ulContextLen <= MAX_PQ_CONTEXT ? p->pContext : NULL, p->ulContextLen);
    if (hash) ksa_put_u64(b, ((const CK_HASH_SIGN_ADDITIONAL_CONTEXT *)m->pParameter)->hash);
    if (b->failed) *rv = CKR_ARGUMENTS_BAD;
    return 1;
}

int ksa_get_pq_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int *ok) {
    if (enc != PARAM_PQ_SIGN && enc != PARAM_PQ_HASH_SIGN && enc != PARAM_PQ_SIZED) return 0;
    *ok = -1;
    int plain = is_plain(m->mechanism), hash = is_hash(m->mechanism);
    if (enc == PARAM_PQ_SIZED) {
        uint64_t len = ksa_get_u64(r);
        size_t size = plain ? sizeof(CK_SIGN_ADDITIONAL_CONTEXT) : sizeof(CK_HASH_SIGN_ADDITIONAL_CONTEXT);
        if (r->failed || (!plain && !hash) || len == 0 || len == size || len > 4096) return 1;
        m->pParameter = ksa_arena_alloc(a, (size_t)len);
        m->ulParameterLen = (CK_ULONG)len;
        if (m->pParameter) *ok = 0;
        return 1;
    }
    if ((enc == PARAM_PQ_SIGN && !plain) || (enc == PARAM_PQ_HASH_SIGN && !hash)) return 1;
    CK_HASH_SIGN_ADDITIONAL_CONTEXT *p = ksa_arena_alloc(a, sizeof *p);
    if (!p) return 1;
    void *d;
    CK_ULONG n;
    p->hedgeVariant = ksa_get_u64(r);
    if (ksa_get_bytes(r, &d, &n) || (d && n > MAX_PQ_CONTEXT)) return 1;
    p->pContext = d;
    p->ulContextLen = n;
    if (enc == PARAM_PQ_HASH_SIGN) p->hash = ksa_get_u64(r);
    if (r->failed) return 1;
    m->pParameter = p;
    m->ulParameterLen = enc == PARAM_PQ_SIGN ? sizeof(CK_SIGN_ADDITIONAL_CONTEXT) : sizeof *p;
    *ok = 0;
    return 1;
}
