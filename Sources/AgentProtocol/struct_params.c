/*
 * Mechanism and message parameters with pointers, beyond the first ones in
 * codec.c (OAEP, GCM, ECDH) and the KDFs (kdf_params.c): ChaCha20-Poly1305,
 * CK_EDDSA_PARAMS, CK_RSA_AES_KEY_WRAP_PARAMS (a nested OAEP struct), and the
 * message-based AEAD parameters (CK_GCM_MESSAGE_PARAMS,
 * CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS), in a C_Message*Init mechanism and
 * as the per-message pParameter of C_EncryptMessage and its relatives.
 *
 * As elsewhere the client sends the pointees and the agent rebuilds the C
 * struct in its arena, so the module's own parser judges every value. A field
 * longer than the module accepts crosses as NULL with its length (the module
 * refuses it on the length, without reading), so the client never reads past
 * what a caller could have meant.
 *
 * Message parameters are in-out: the module writes a generated IV back into
 * pIv and the tag into pTag (encryption). The agent keeps a copy of what it
 * received and returns each buffer the module changed; the client writes
 * exactly those into the caller's buffers, of exactly the caller's lengths.
 * So what reaches the caller is what the module wrote, whatever the rv and
 * whichever call (a length query, CKR_BUFFER_TOO_SMALL, Begin, Next) did it,
 * and a caller's read-only IV is never written. The per-message struct is
 * told apart by its size (48: GCM, 24: ChaCha20-Poly1305): the module checks
 * that size against the active operation's mechanism before reading it, so a
 * struct of the other mechanism is refused there, as in-process.
 */
#include <string.h>
#include "codec_internal.h"

/* The module's own bounds (Sources/PKCS11/MechanismParameters*.swift): a
 * longer field is refused there on its length alone. */
#define MAX_GCM_IV 256u
#define MAX_NONCE 64u
#define MAX_AAD (1u << 20)
#define MAX_LABEL (1u << 16)
#define MAX_CONTEXT 255u
#define MAX_TAG 16u
#define MAX_OPAQUE 4096u

/* A (pointer, length) field read only up to `max`: longer crosses as NULL
 * with its length. */
static void put_field(ksa_buf *b, const void *p, CK_ULONG n, CK_ULONG max) {
    ksa_put_bytes(b, n <= max ? p : NULL, n);
}

static int get_field(ksa_rd *r, void **p, CK_ULONG *n, CK_ULONG max) {
    if (ksa_get_bytes(r, p, n)) return -1;
    return (*p && *n > max) ? -1 : 0;
}

/* ---- the message parameter structs ------------------------------------------ */

/* What the agent hands the module, and the copies it compares against after
 * the call. `p` is first: the module's pointer is the struct's. */
typedef struct {
    union {
        CK_GCM_MESSAGE_PARAMS gcm;
        CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS chacha;
    } p;
    uint8_t kind;
    uint8_t *iv0;       /* the IV as received (NULL: none crossed) */
    CK_ULONG ivLen;
    uint8_t tag[MAX_TAG], tag0[MAX_TAG];
    CK_ULONG tagLen;    /* the bytes of tag the module may read or write */
    int hasTag;
} msg_shadow;

/* The kind of a message struct, by its size. */
static uint8_t message_kind(const void *p, CK_ULONG n, int opaque) {
    if (!p || n == 0) return PARAM_NONE;
    if (!opaque && n == sizeof(CK_GCM_MESSAGE_PARAMS)) return PARAM_GCM_MSG;
    if (!opaque && n == sizeof(CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS)) return PARAM_CHACHA_MSG;
    return n <= MAX_OPAQUE ? PARAM_SIZED : PARAM_NONE;
}

/* The caller's IV and tag (pointers and the lengths the module uses). */
typedef struct {
    void *iv;
    CK_ULONG ivLen, ivMax;
    void *tag;
    CK_ULONG tagLen;
} msg_view;

static msg_view view(uint8_t kind, const void *p) {
    msg_view v = {0};
    if (kind == PARAM_GCM_MSG) {
        const CK_GCM_MESSAGE_PARAMS *g = p;
        v.iv = g->pIv; v.ivLen = g->ulIvLen; v.ivMax = MAX_GCM_IV;
        v.tag = g->pTag;
        /* Only a tag size the module accepts (32..128 bits, whole bytes); with
         * another it refuses before touching pTag. */
        v.tagLen = (g->ulTagBits % 8 == 0 && g->ulTagBits >= 32 && g->ulTagBits <= 8 * MAX_TAG) ? g->ulTagBits / 8 : 0;
    } else if (kind == PARAM_CHACHA_MSG) {
        const CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS *c = p;
        v.iv = c->pNonce; v.ivLen = c->ulNonceLen; v.ivMax = MAX_NONCE;
        v.tag = c->pTag;
        v.tagLen = MAX_TAG; /* Poly1305's tag */
    }
    return v;
}

/* A message struct after its kind byte. tag_in: the tag's contents cross
 * (decryption reads pTag; encryption only writes it). */
static void put_message_struct(ksa_buf *b, uint8_t kind, const void *p, int tag_in) {
    msg_view v = view(kind, p);
    put_field(b, v.iv, v.ivLen, v.ivMax);
    if (kind == PARAM_GCM_MSG) {
        const CK_GCM_MESSAGE_PARAMS *g = p;
        ksa_put_u64(b, g->ulIvFixedBits);
        ksa_put_u64(b, g->ivGenerator);
        ksa_put_u64(b, g->ulTagBits);
    }
    int contents = tag_in && v.tag && v.tagLen;
    ksa_put_u8(b, (uint8_t)((v.tag != NULL) | contents << 1));
    ksa_put_u64(b, v.tagLen);
    if (contents) ksa_put_raw(b, v.tag, v.tagLen);
}

static msg_shadow *get_message_struct(ksa_rd *r, ksa_arena *a, uint8_t kind) {
    msg_shadow *s = ksa_arena_alloc(a, sizeof *s);
    if (!s) return NULL;
    s->kind = kind;
    void *iv;
    CK_ULONG ivLen;
    if (get_field(r, &iv, &ivLen, kind == PARAM_GCM_MSG ? MAX_GCM_IV : MAX_NONCE)) return NULL;
    if (iv && ivLen) {
        /* The module may write a generated IV here: the agent's own copy. */
        uint8_t *w = ksa_arena_alloc(a, ivLen), *w0 = ksa_arena_alloc(a, ivLen);
        if (!w || !w0) return NULL;
        memcpy(w, iv, ivLen);
        memcpy(w0, iv, ivLen);
        iv = w;
        s->iv0 = w0;
    }
    s->ivLen = ivLen;
    if (kind == PARAM_GCM_MSG) {
        s->p.gcm.pIv = iv;
        s->p.gcm.ulIvLen = ivLen;
        s->p.gcm.ulIvFixedBits = ksa_get_u64(r);
        s->p.gcm.ivGenerator = ksa_get_u64(r);
        s->p.gcm.ulTagBits = ksa_get_u64(r);
    } else {
        s->p.chacha.pNonce = iv;
        s->p.chacha.ulNonceLen = ivLen;
    }
    uint8_t flags = ksa_get_u8(r);
    uint64_t tagLen = ksa_get_u64(r);
    if (r->failed || flags > 3 || tagLen > MAX_TAG || (flags == 2)) return NULL;
    /* The module reads or writes ulTagBits/8 bytes only when that is what
     * the client measured (32..128 bits); the buffer is the largest tag. */
    if (kind == PARAM_GCM_MSG) {
        CK_ULONG bits = s->p.gcm.ulTagBits;
        CK_ULONG expect = (bits % 8 == 0 && bits >= 32 && bits <= 8 * MAX_TAG) ? bits / 8 : 0;
        if (tagLen != expect) return NULL;
    } else if (tagLen != MAX_TAG) {
        return NULL;
    }
    s->tagLen = (CK_ULONG)tagLen;
    s->hasTag = flags & 1;
    if (flags & 2) {
        const uint8_t *t = ksa_get_raw(r, (size_t)tagLen);
        if (!t) return NULL;
        memcpy(s->tag, t, (size_t)tagLen);
    }
    memcpy(s->tag0, s->tag, sizeof s->tag);
    if (kind == PARAM_GCM_MSG) s->p.gcm.pTag = s->hasTag ? s->tag : NULL;
    else s->p.chacha.pTag = s->hasTag ? s->tag : NULL;
    return r->failed ? NULL : s;
}

/* ---- the per-message parameter ('X' encrypt, 'Y' decrypt, 'Z' opaque) ------- */

CK_RV ksa_put_message_param(ksa_buf *b, ksa_arg *a, char sig) {
    uint8_t kind = message_kind(a->ptr, a->len, sig == 'Z');
    a->cap = kind; /* the reply must answer for the same struct */
    ksa_put_u8(b, kind);
    switch (kind) {
    case PARAM_NONE:
        /* NULL, or no bytes, or more than any struct: a pointer crosses only
         * with no bytes behind it; a longer one crosses as NULL with its
         * length, which the module refuses as it refuses the size. */
        ksa_put_u8(b, a->ptr != NULL && a->len == 0);
        ksa_put_u64(b, a->len);
        break;
    case PARAM_SIZED:
        ksa_put_u64(b, a->len);
        break;
    default:
        put_message_struct(b, kind, a->ptr, sig == 'Y');
        break;
    }
    return b->failed ? CKR_ARGUMENTS_BAD : CKR_OK;
}

int ksa_get_message_param(ksa_rd *r, ksa_arena *ar, ksa_arg *a, char sig) {
    uint8_t kind = ksa_get_u8(r);
    if (r->failed) return -1;
    a->ul = kind;
    switch (kind) {
    case PARAM_NONE: {
        uint8_t nonnull = ksa_get_u8(r);
        uint64_t len = ksa_get_u64(r);
        /* A pointer crosses only with no bytes behind it. */
        if (r->failed || nonnull > 1 || (nonnull && len)) return -1;
        static const uint8_t empty[8];
        a->ptr = nonnull ? (void *)empty : NULL;
        a->len = (CK_ULONG)len;
        return 0;
    }
    case PARAM_SIZED: {
        /* Zeros of a size no message struct has: the module refuses it on its size. */
        uint64_t len = ksa_get_u64(r);
        if (r->failed || len == 0 || len > MAX_OPAQUE) return -1;
        if (sig != 'Z' && (len == sizeof(CK_GCM_MESSAGE_PARAMS) ||
                           len == sizeof(CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS))) return -1;
        a->ptr = ksa_arena_alloc(ar, (size_t)len);
        a->len = (CK_ULONG)len;
        return a->ptr ? 0 : -1;
    }
    case PARAM_GCM_MSG: case PARAM_CHACHA_MSG: {
        if (sig == 'Z') return -1;
        msg_shadow *s = get_message_struct(r, ar, kind);
        if (!s) return -1;
        a->ptr = &s->p;
        a->len = kind == PARAM_GCM_MSG ? sizeof s->p.gcm : sizeof s->p.chacha;
        return 0;
    }
    default:
        return -1;
    }
}

/* Reply: u8 kind; for a struct, the IV then the tag: u8 changed [u32 n, bytes]. */
void ksa_put_message_outputs(ksa_buf *b, const ksa_arg *a) {
    uint8_t kind = (uint8_t)a->ul;
    ksa_put_u8(b, kind);
    if (kind != PARAM_GCM_MSG && kind != PARAM_CHACHA_MSG) return;
    const msg_shadow *s = a->ptr;
    const uint8_t *iv = kind == PARAM_GCM_MSG ? s->p.gcm.pIv : s->p.chacha.pNonce;
    int ivChanged = s->iv0 && iv && memcmp(iv, s->iv0, s->ivLen) != 0;
    ksa_put_u8(b, (uint8_t)ivChanged);
    if (ivChanged) {
        ksa_put_u32(b, (uint32_t)s->ivLen);
        ksa_put_raw(b, iv, s->ivLen);
    }
    int tagChanged = s->hasTag && s->tagLen && memcmp(s->tag, s->tag0, s->tagLen) != 0;
    ksa_put_u8(b, (uint8_t)tagChanged);
    if (tagChanged) {
        ksa_put_u32(b, (uint32_t)s->tagLen);
        ksa_put_raw(b, s->tag, s->tagLen);
    }
}

int ksa_apply_message_outputs(ksa_rd *r, const ksa_arg *a, int write) {
    uint8_t kind = ksa_get_u8(r);
    if (r->failed || kind != a->cap) return -1;
    if (kind != PARAM_GCM_MSG && kind != PARAM_CHACHA_MSG) return 0;
    msg_view v = view(kind, a->ptr);
    for (int field = 0; field < 2; field++) {
        uint8_t changed = ksa_get_u8(r);
        if (r->failed || changed > 1) return -1;
        if (!changed) continue;
        uint32_t n = ksa_get_u32(r);
        const uint8_t *d = ksa_get_raw(r, n);
        if (!d) return -1;
        /* Only into a buffer the caller gave, of exactly the length it said
         * (an IV is written only if it crossed, i.e. within the module's bound). */
        void *dst = field == 0 ? v.iv : v.tag;
        CK_ULONG len = field == 0 ? (v.ivLen <= v.ivMax ? v.ivLen : 0) : v.tagLen;
        if (!dst || len == 0 || n != len) return -1;
        if (write) memcpy(dst, d, n);
    }
    return 0;
}

/* ---- mechanism parameters ---------------------------------------------------- */

int ksa_put_struct_param(ksa_buf *b, const CK_MECHANISM *m, int message, CK_RV *rv) {
    *rv = CKR_OK;
    if (message) {
        /* C_Message*Init: the message struct (accepted and ignored by the
         * module), or another size for the module to refuse. */
        size_t size = m->mechanism == CKM_AES_GCM ? sizeof(CK_GCM_MESSAGE_PARAMS)
                    : m->mechanism == CKM_CHACHA20_POLY1305 ? sizeof(CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS) : 0;
        if (!size) return 0;
        if (m->ulParameterLen != size) {
            if (m->ulParameterLen > MAX_OPAQUE) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
            ksa_put_u8(b, PARAM_SIZED);
            ksa_put_u64(b, m->ulParameterLen);
            return 1;
        }
        uint8_t kind = m->mechanism == CKM_AES_GCM ? PARAM_GCM_MSG : PARAM_CHACHA_MSG;
        ksa_put_u8(b, kind);
        put_message_struct(b, kind, m->pParameter, 0);
        return 1;
    }
    switch (m->mechanism) {
    case CKM_CHACHA20_POLY1305: {
        if (m->ulParameterLen != sizeof(CK_SALSA20_CHACHA20_POLY1305_PARAMS)) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
        const CK_SALSA20_CHACHA20_POLY1305_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_CHACHA);
        put_field(b, p->pNonce, p->ulNonceLen, MAX_NONCE);
        put_field(b, p->pAAD, p->ulAADLen, MAX_AAD);
        return 1;
    }
    case CKM_EDDSA: {
        if (m->ulParameterLen != sizeof(CK_EDDSA_PARAMS)) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
        const CK_EDDSA_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_EDDSA);
        ksa_put_u8(b, p->phFlag);
        put_field(b, p->pContextData, p->ulContextDataLen, MAX_CONTEXT);
        return 1;
    }
    case CKM_RSA_AES_KEY_WRAP: {
        if (m->ulParameterLen != sizeof(CK_RSA_AES_KEY_WRAP_PARAMS)) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
        const CK_RSA_AES_KEY_WRAP_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_RSA_AES);
        ksa_put_u64(b, p->ulAESKeyBits);
        ksa_put_u8(b, p->pOAEPParams != NULL);
        if (p->pOAEPParams) {
            const CK_RSA_PKCS_OAEP_PARAMS *o = p->pOAEPParams;
            ksa_put_u64(b, o->hashAlg);
            ksa_put_u64(b, o->mgf);
            ksa_put_u64(b, o->source);
            put_field(b, o->pSourceData, o->ulSourceDataLen, MAX_LABEL);
        }
        return 1;
    }
    default:
        return 0;
    }
}

int ksa_get_struct_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int message) {
    void *d;
    CK_ULONG n;
    switch (enc) {
    case PARAM_GCM_MSG: case PARAM_CHACHA_MSG: {
        /* Only in a C_Message*Init: elsewhere the module would read the same
         * 48 bytes of GCM as a CK_GCM_PARAMS, whose fields differ. */
        if (!message) return -1;
        if (m->mechanism != (enc == PARAM_GCM_MSG ? CKM_AES_GCM : CKM_CHACHA20_POLY1305)) return -1;
        msg_shadow *s = get_message_struct(r, a, enc);
        if (!s) return -1;
        m->pParameter = &s->p;
        m->ulParameterLen = enc == PARAM_GCM_MSG ? sizeof s->p.gcm : sizeof s->p.chacha;
        return 0;
    }
    case PARAM_SIZED: {
        /* Message init only (the KDFs have their own): zeros of a size the
         * module refuses on its own. */
        uint64_t len = ksa_get_u64(r);
        size_t size = m->mechanism == CKM_AES_GCM ? sizeof(CK_GCM_MESSAGE_PARAMS)
                    : m->mechanism == CKM_CHACHA20_POLY1305 ? sizeof(CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS) : 0;
        if (r->failed || !message || !size || len == size || len == 0 || len > MAX_OPAQUE) return -1;
        m->pParameter = ksa_arena_alloc(a, (size_t)len);
        m->ulParameterLen = (CK_ULONG)len;
        return m->pParameter ? 0 : -1;
    }
    case PARAM_CHACHA: {
        if (m->mechanism != CKM_CHACHA20_POLY1305) return -1;
        CK_SALSA20_CHACHA20_POLY1305_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p || get_field(r, &d, &n, MAX_NONCE)) return -1;
        p->pNonce = d;
        p->ulNonceLen = n;
        if (get_field(r, &d, &n, MAX_AAD)) return -1;
        p->pAAD = d;
        p->ulAADLen = n;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return r->failed ? -1 : 0;
    }
    case PARAM_EDDSA: {
        if (m->mechanism != CKM_EDDSA) return -1;
        CK_EDDSA_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        p->phFlag = ksa_get_u8(r);
        if (get_field(r, &d, &n, MAX_CONTEXT)) return -1;
        p->pContextData = d;
        p->ulContextDataLen = n;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return r->failed ? -1 : 0;
    }
    case PARAM_RSA_AES: {
        if (m->mechanism != CKM_RSA_AES_KEY_WRAP) return -1;
        CK_RSA_AES_KEY_WRAP_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        p->ulAESKeyBits = ksa_get_u64(r);
        uint8_t has = ksa_get_u8(r);
        if (r->failed || has > 1) return -1;
        if (has) {
            CK_RSA_PKCS_OAEP_PARAMS *o = ksa_arena_alloc(a, sizeof *o);
            if (!o) return -1;
            o->hashAlg = ksa_get_u64(r);
            o->mgf = ksa_get_u64(r);
            o->source = ksa_get_u64(r);
            if (get_field(r, &o->pSourceData, &o->ulSourceDataLen, MAX_LABEL)) return -1;
            p->pOAEPParams = o;
        }
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return r->failed ? -1 : 0;
    }
    default:
        return -1;
    }
}
