/* Attributes whose value is a template (CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE,
 * CKA_DERIVE_TEMPLATE: PKCS #11 3.0 CKF_ARRAY_ATTRIBUTE types holding
 * CK_ATTRIBUTE arrays) across the agent protocol, in templates ('T': the
 * creating functions, C_SetAttributeValue, C_FindObjectsInit, the KDF
 * parameters' nested templates) and in C_GetAttributeValue ('G': the inner
 * capacities in the request, the inner values in the reply). docs/agent.md
 * "Template attributes".
 *
 * As raw bytes such a value is an array of the client's pointers, which the
 * agent must never read: the client sends the inner attributes themselves,
 * the agent rebuilds the array in its arena. One level only: an inner
 * attribute of a template type crosses as NULL with its length (the module
 * refuses it, CKR_ATTRIBUTE_VALUE_INVALID), never as another array. The
 * bounds are the module's (TemplateAttributes.swift): 64 inner attributes,
 * 4096 bytes an inner value; what the module would refuse on its length alone
 * crosses as something it refuses with the same code, so the client never
 * reads more of the caller's memory than a valid value has. */
#include <string.h>
#include "codec_internal.h"

#define TPL_MAX_ENTRIES 64u
#define TPL_MAX_VALUE 4096u
#define TPL_SIZE ((CK_ULONG)sizeof(CK_ATTRIBUTE))

/* Value kinds of a template-type attribute in 'T' (in place of ksa_put_bytes'
 * "present" byte). */
enum { TPL_NULL = 0, TPL_EMPTY = 1, TPL_ARRAY = 2, TPL_REFUSED = 3 };

int ksa_is_template_type(CK_ATTRIBUTE_TYPE t) {
    /* PKCS #11 3.2's KEM templates are CK_ATTRIBUTE_PTR values too (pkcs11_pq.h). */
    return t == CKA_WRAP_TEMPLATE || t == CKA_UNWRAP_TEMPLATE || t == CKA_DERIVE_TEMPLATE ||
           t == CKA_ENCAPSULATE_TEMPLATE || t == CKA_DECAPSULATE_TEMPLATE;
}

/* ---- 'T': a template attribute's value in a request ------------------------- */

CK_RV ksa_put_template_value(ksa_buf *b, const CK_ATTRIBUTE *a) {
    CK_ULONG len = a->ulValueLen;
    if (len == 0 || !a->pValue) {
        ksa_put_u8(b, len == 0 && a->pValue ? TPL_EMPTY : TPL_NULL);
        ksa_put_u64(b, len);
        return CKR_OK;
    }
    if (len % TPL_SIZE != 0 || len / TPL_SIZE > TPL_MAX_ENTRIES) {
        /* Refused by the module on the length alone: only the length crosses. */
        ksa_put_u8(b, TPL_REFUSED);
        ksa_put_u64(b, len);
        return CKR_OK;
    }
    const CK_ATTRIBUTE *in = a->pValue;
    uint32_t n = (uint32_t)(len / TPL_SIZE);
    ksa_put_u8(b, TPL_ARRAY);
    ksa_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        ksa_put_u64(b, in[i].type);
        /* An inner template, or a value longer than the module takes: NULL
         * with its length (refused by the module, never read here). */
        int readable = !ksa_is_template_type(in[i].type) && in[i].ulValueLen <= TPL_MAX_VALUE;
        CK_RV rv = ksa_put_bytes(b, readable && in[i].ulValueLen ? in[i].pValue : NULL, in[i].ulValueLen);
        if (rv != CKR_OK) return rv;
    }
    return b->failed ? CKR_ARGUMENTS_BAD : CKR_OK;
}

static uint8_t zero_value[TPL_SIZE * (TPL_MAX_ENTRIES + 1)];

/* The agent's side: `out->type` is set; fills pValue/ulValueLen. 0, or -1 malformed. */
int ksa_get_template_value(ksa_rd *r, ksa_arena *ar, CK_ATTRIBUTE *out) {
    uint8_t kind = ksa_get_u8(r);
    if (r->failed) return -1;
    switch (kind) {
    case TPL_NULL: case TPL_EMPTY: {
        uint64_t len = ksa_get_u64(r);
        if (r->failed || (kind == TPL_EMPTY && len != 0)) return -1;
        out->pValue = kind == TPL_EMPTY ? (void *)zero_value : NULL;
        out->ulValueLen = (CK_ULONG)len;
        return 0;
    }
    case TPL_REFUSED: {
        uint64_t len = ksa_get_u64(r);
        if (r->failed || len == 0 || (len % TPL_SIZE == 0 && len / TPL_SIZE <= TPL_MAX_ENTRIES)) return -1;
        /* Zeros of a length the module refuses with the same code as the
         * caller's: not a whole number of CK_ATTRIBUTEs, or one too many. */
        out->pValue = zero_value;
        out->ulValueLen = len % TPL_SIZE != 0 ? (CK_ULONG)(len % TPL_SIZE) : TPL_SIZE * (TPL_MAX_ENTRIES + 1);
        return 0;
    }
    case TPL_ARRAY: {
        uint32_t n = ksa_get_u32(r);
        if (r->failed || n == 0 || n > TPL_MAX_ENTRIES) return -1;
        CK_ATTRIBUTE *t = ksa_arena_alloc(ar, n * sizeof *t);
        if (!t) return -1;
        for (uint32_t i = 0; i < n; i++) {
            t[i].type = ksa_get_u64(r);
            if (ksa_get_bytes(r, &t[i].pValue, &t[i].ulValueLen)) return -1;
            /* What the client never sends as bytes: an inner template, an overlong value. */
            if (t[i].pValue && t[i].ulValueLen && (ksa_is_template_type(t[i].type) || t[i].ulValueLen > TPL_MAX_VALUE))
                return -1;
        }
        out->pValue = t;
        out->ulValueLen = n * TPL_SIZE;
        return 0;
    }
    default:
        return -1;
    }
}

/* ---- 'G': C_GetAttributeValue --------------------------------------------- */

/* How many inner entries of the caller's buffer the module may read: those
 * it holds, at most as many as a template has. */
static uint32_t inner_count(CK_ULONG cap) {
    CK_ULONG n = cap / TPL_SIZE;
    return n > TPL_MAX_ENTRIES ? TPL_MAX_ENTRIES : (uint32_t)n;
}

/* Request: after (type, has, cap) of a template-type entry whose buffer holds
 * at least one CK_ATTRIBUTE: each inner entry's (has, capacity). */
void ksa_put_template_caps(ksa_buf *b, const CK_ATTRIBUTE *a) {
    uint32_t n = inner_count(a->ulValueLen);
    const CK_ATTRIBUTE *in = a->pValue;
    ksa_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        ksa_put_u8(b, in[i].pValue != NULL);
        ksa_put_u64(b, in[i].ulValueLen);
    }
}

int ksa_wants_template_caps(const CK_ATTRIBUTE *a) {
    return ksa_is_template_type(a->type) && a->pValue && a->ulValueLen >= TPL_SIZE;
}

/* Agent: the caller's buffer rebuilt as an array of `n` CK_ATTRIBUTEs, each
 * inner buffer of the caller's capacity (at most TPL_MAX_VALUE: no stored
 * inner value is longer, so copy or too-small comes out the same). */
int ksa_get_template_caps(ksa_rd *r, ksa_arena *ar, CK_ATTRIBUTE *out) {
    uint32_t n = ksa_get_u32(r);
    if (r->failed || n == 0 || n > TPL_MAX_ENTRIES || n > out->ulValueLen / TPL_SIZE) return -1;
    CK_ATTRIBUTE *t = ksa_arena_alloc(ar, n * sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t has = ksa_get_u8(r);
        uint64_t cap = ksa_get_u64(r);
        if (r->failed || has > 1) return -1;
        t[i].type = 0;
        t[i].ulValueLen = (CK_ULONG)cap;
        t[i].pValue = NULL;
        if (has) {
            size_t c = cap > TPL_MAX_VALUE ? TPL_MAX_VALUE : (size_t)cap;
            if (!(t[i].pValue = ksa_arena_alloc(ar, c))) return -1;
            t[i].ulValueLen = (CK_ULONG)c;
        }
    }
    out->pValue = t;
    out->ulValueLen = n * TPL_SIZE;
    return 0;
}

/* Reply (agent): a template-type entry the module filled as an array: u32
 * count, then per inner entry type, ulValueLen, u8 data [u32 n, bytes]. */
int ksa_template_reply_kind(const CK_ATTRIBUTE *a, int values_valid) {
    return ksa_is_template_type(a->type) && a->pValue && values_valid && a->ulValueLen != CK_UNAVAILABLE_INFORMATION &&
           a->ulValueLen % TPL_SIZE == 0 && a->ulValueLen / TPL_SIZE <= TPL_MAX_ENTRIES;
}

void ksa_put_template_reply(ksa_buf *b, const CK_ATTRIBUTE *a) {
    uint32_t n = (uint32_t)(a->ulValueLen / TPL_SIZE);
    const CK_ATTRIBUTE *in = a->pValue;
    ksa_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        ksa_put_u64(b, in[i].type);
        ksa_put_u64(b, in[i].ulValueLen);
        int data = in[i].pValue && in[i].ulValueLen != CK_UNAVAILABLE_INFORMATION && in[i].ulValueLen <= TPL_MAX_VALUE;
        ksa_put_u8(b, data);
        if (data) {
            ksa_put_u32(b, (uint32_t)in[i].ulValueLen);
            ksa_put_raw(b, in[i].pValue, in[i].ulValueLen);
        }
    }
}

/* Client: the inner entries into the caller's array `a` (whose capacity when
 * the request was made was `cap`), with outer length `v`. Validated in pass
 * 0 (write 0), written in pass 1. Each inner entry is bounded by the
 * caller's own buffer: a reply naming more entries than the caller's array
 * holds, or more bytes than an inner buffer, is refused (-1). */
int ksa_apply_template_reply(ksa_rd *r, CK_ATTRIBUTE *a, CK_ULONG cap, uint64_t v, int write) {
    uint32_t n = ksa_get_u32(r);
    if (r->failed || !a->pValue || n > TPL_MAX_ENTRIES || n > cap / TPL_SIZE || v != (uint64_t)n * TPL_SIZE) return -1;
    CK_ATTRIBUTE *in = a->pValue;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t type = ksa_get_u64(r);
        uint64_t len = ksa_get_u64(r);
        uint8_t data = ksa_get_u8(r);
        if (r->failed || data > 1) return -1;
        if (data) {
            uint32_t k = ksa_get_u32(r);
            if (r->failed || k != len || !in[i].pValue || k > in[i].ulValueLen) return -1;
            const uint8_t *d = ksa_get_raw(r, k);
            if (!d) return -1;
            if (write && k) memcpy(in[i].pValue, d, k);
        }
        if (write) {
            in[i].type = (CK_ATTRIBUTE_TYPE)type;
            in[i].ulValueLen = (CK_ULONG)len;
        }
    }
    return 0;
}
