/*
 * The agent protocol's encoders and decoders (include/agent_protocol.h).
 * Both ends share this file: the client encodes requests and applies replies,
 * the agent decodes requests into its own memory and encodes replies. Every
 * read is bounds-checked (ksa_rd latches truncation) and every allocation is
 * bounded (ksa_arena's budget), so a hostile or broken peer gets an error,
 * never a crash or an unbounded allocation.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "agent_protocol.h"
#include "codec_internal.h"

/* ---- buffers ------------------------------------------------------------ */

void ksa_buf_init(ksa_buf *b) { memset(b, 0, sizeof *b); }

static void wipe(void *p, size_t n) {
    if (p && n) {
        memset(p, 0, n);
        __asm__ __volatile__("" : : "r"(p) : "memory");
    }
}

void ksa_buf_reset(ksa_buf *b) {
    wipe(b->data, b->len);
    b->len = 0;
    b->failed = 0;
}

void ksa_buf_free(ksa_buf *b) {
    wipe(b->data, b->cap);
    free(b->data);
    ksa_buf_init(b);
}

static int reserve(ksa_buf *b, size_t n) {
    if (b->failed) return 0;
    if (n > KSA_MAX_FRAME || b->len > KSA_MAX_FRAME - n) { b->failed = 1; return 0; }
    if (b->len + n <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    /* Not realloc: the old block may hold a PIN and must be wiped. */
    uint8_t *d = malloc(cap);
    if (!d) { b->failed = 1; return 0; }
    if (b->data) {
        memcpy(d, b->data, b->len);
        wipe(b->data, b->cap);
        free(b->data);
    }
    b->data = d;
    b->cap = cap;
    return 1;
}

void ksa_put_raw(ksa_buf *b, const void *p, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}
void ksa_put_u8(ksa_buf *b, uint8_t v) { ksa_put_raw(b, &v, 1); }
void ksa_put_u16(ksa_buf *b, uint16_t v) { uint8_t x[2] = {v, v >> 8}; ksa_put_raw(b, x, 2); }
void ksa_put_u32(ksa_buf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    ksa_put_raw(b, x, 4);
}
void ksa_put_u64(ksa_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    ksa_put_raw(b, x, 8);
}

const uint8_t *ksa_get_raw(ksa_rd *r, size_t n) {
    if (r->failed || n > r->left) { r->failed = 1; return NULL; }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}
uint8_t ksa_get_u8(ksa_rd *r) { const uint8_t *p = ksa_get_raw(r, 1); return p ? p[0] : 0; }
uint16_t ksa_get_u16(ksa_rd *r) { const uint8_t *p = ksa_get_raw(r, 2); return p ? (uint16_t)(p[0] | p[1] << 8) : 0; }
uint32_t ksa_get_u32(ksa_rd *r) {
    const uint8_t *p = ksa_get_raw(r, 4);
    uint32_t v = 0;
    if (p) for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
uint64_t ksa_get_u64(ksa_rd *r) {
    const uint8_t *p = ksa_get_raw(r, 8);
    uint64_t v = 0;
    if (p) for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- arena ---------------------------------------------------------------- */

/* A block is the header and its bytes, or, from KSA_ARENA_MAP_MIN bytes, the header and a private
 * anonymous mapping. The large ones are output buffers of the client's declared capacity (C_Encrypt
 * into a 1 MiB buffer for 16 KiB of data): calloc and a wipe of the whole capacity made the agent's
 * work grow with what the client claims, not with what it sends (79 % of its CPU for 16 KiB
 * AES-CTR into a 1 MiB buffer, docs/benchmarks.md). A mapping's pages cost nothing until touched,
 * and at free only the resident ones (mincore), the only ones that ever held data, are wiped. */
#define KSA_ARENA_MAP_MIN (32u << 10)
struct ksa_block { struct ksa_block *next; size_t size; unsigned char *map; max_align_t data[]; };
static void *arena_alloc(ksa_arena *a, size_t n, int sparse);

void *ksa_arena_alloc(ksa_arena *a, size_t n) { return arena_alloc(a, n, 0); }

/* `sparse`: an output buffer of a declared capacity the call may leave mostly untouched. Only
 * those are mapped: a buffer the call fills (a sized output, random bytes) is cheaper from the heap,
 * whose memory is reused, than as fresh pages faulted in on every call. */
static void *arena_alloc(ksa_arena *a, size_t n, int sparse) {
    if (n > KSA_MAX_FRAME || a->total > (size_t)KSA_MAX_FRAME * 2 - n) return NULL;
    int big = sparse && n >= KSA_ARENA_MAP_MIN;
    struct ksa_block *b = calloc(1, sizeof *b + (big || !n ? 1 : n));
    if (!b) return NULL;
    if (big) {
        void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { free(b); return NULL; }
        b->map = m;
    }
    b->size = n;
    b->next = a->head;
    a->head = b;
    a->total += n;
    return b->map ? (void *)b->map : (void *)b->data;
}

/* Wipes the pages of a mapping that are resident (touched), then unmaps it. A page mincore cannot
 * tell about is wiped. */
static void unmap_wiped(unsigned char *m, size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (n + page - 1) / page;
    unsigned char vec[256];
    for (size_t at = 0; at < pages; at += sizeof vec) {
        size_t k = pages - at < sizeof vec ? pages - at : sizeof vec;
        size_t len = at + k == pages ? n - at * page : k * page;
        int known = mincore(m + at * page, len, vec) == 0;
        for (size_t i = 0; i < k; i++)
            if (!known || (vec[i] & 1)) {
                size_t off = (at + i) * page;
                wipe(m + off, n - off < page ? n - off : page);
            }
    }
    munmap(m, n);
}

void ksa_arena_free(ksa_arena *a) {
    struct ksa_block *b = a->head;
    while (b) {
        struct ksa_block *next = b->next;
        if (b->map) unmap_wiped(b->map, b->size);
        else wipe(b->data, b->size);
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- signatures ------------------------------------------------------------ */

static const char *const signatures[KSA_FN_COUNT] = {
    [KSA_FN_Initialize] = "u", [KSA_FN_Finalize] = "", [KSA_FN_GetInfo] = "i",
    [KSA_FN_GetSlotList] = "uA", [KSA_FN_GetSlotInfo] = "us", [KSA_FN_GetTokenInfo] = "ut",
    [KSA_FN_GetMechanismList] = "uA", [KSA_FN_GetMechanismInfo] = "uum", [KSA_FN_InitToken] = "uII",
    [KSA_FN_InitPIN] = "uI", [KSA_FN_SetPIN] = "uII", [KSA_FN_OpenSession] = "uuL",
    [KSA_FN_CloseSession] = "u", [KSA_FN_CloseAllSessions] = "u", [KSA_FN_GetSessionInfo] = "ue",
    [KSA_FN_GetOperationState] = "uO", [KSA_FN_SetOperationState] = "uIuu", [KSA_FN_Login] = "uuI",
    [KSA_FN_Logout] = "u", [KSA_FN_CreateObject] = "uTL", [KSA_FN_CopyObject] = "uuTL",
    [KSA_FN_DestroyObject] = "uu", [KSA_FN_GetObjectSize] = "uuL", [KSA_FN_GetAttributeValue] = "uuG",
    [KSA_FN_SetAttributeValue] = "uuT", [KSA_FN_FindObjectsInit] = "uT", [KSA_FN_FindObjects] = "uF",
    [KSA_FN_FindObjectsFinal] = "u",
    [KSA_FN_EncryptInit] = "uMu", [KSA_FN_Encrypt] = "uIO", [KSA_FN_EncryptUpdate] = "uIO", [KSA_FN_EncryptFinal] = "uO",
    [KSA_FN_DecryptInit] = "uMu", [KSA_FN_Decrypt] = "uIO", [KSA_FN_DecryptUpdate] = "uIO", [KSA_FN_DecryptFinal] = "uO",
    [KSA_FN_DigestInit] = "uM", [KSA_FN_Digest] = "uIO", [KSA_FN_DigestUpdate] = "uI", [KSA_FN_DigestKey] = "uu",
    [KSA_FN_DigestFinal] = "uO",
    [KSA_FN_SignInit] = "uMu", [KSA_FN_Sign] = "uIO", [KSA_FN_SignUpdate] = "uI", [KSA_FN_SignFinal] = "uO",
    [KSA_FN_SignRecoverInit] = "uMu", [KSA_FN_SignRecover] = "uIO",
    [KSA_FN_VerifyInit] = "uMu", [KSA_FN_Verify] = "uII", [KSA_FN_VerifyUpdate] = "uI", [KSA_FN_VerifyFinal] = "uI",
    [KSA_FN_VerifyRecoverInit] = "uMu", [KSA_FN_VerifyRecover] = "uIO",
    [KSA_FN_DigestEncryptUpdate] = "uIO", [KSA_FN_DecryptDigestUpdate] = "uIO",
    [KSA_FN_SignEncryptUpdate] = "uIO", [KSA_FN_DecryptVerifyUpdate] = "uIO",
    [KSA_FN_GenerateKey] = "uMTL", [KSA_FN_GenerateKeyPair] = "uMTTLL", [KSA_FN_WrapKey] = "uMuuO",
    [KSA_FN_UnwrapKey] = "uMuITL", [KSA_FN_DeriveKey] = "uMuTL", [KSA_FN_SeedRandom] = "uI",
    [KSA_FN_GenerateRandom] = "uR", [KSA_FN_GetFunctionStatus] = "u", [KSA_FN_CancelFunction] = "u",
    [KSA_FN_WaitForSlotEvent] = "uLP",
    [KSA_FN_LoginUser] = "uuII", [KSA_FN_SessionCancel] = "uu",
    /* Message-based encryption (3.0 §5.13-5.14): N is the C_Message*Init
     * mechanism (its GCM / ChaCha20-Poly1305 parameter is the message struct),
     * X / Y the per-message parameter, in-out (struct_params.c). */
    [KSA_FN_MessageEncryptInit] = "uNu", [KSA_FN_EncryptMessage] = "uXIIO", [KSA_FN_EncryptMessageBegin] = "uXI",
    [KSA_FN_EncryptMessageNext] = "uXIOu", [KSA_FN_MessageEncryptFinal] = "u",
    [KSA_FN_MessageDecryptInit] = "uNu", [KSA_FN_DecryptMessage] = "uYIIO", [KSA_FN_DecryptMessageBegin] = "uYI",
    [KSA_FN_DecryptMessageNext] = "uYIOu", [KSA_FN_MessageDecryptFinal] = "u",
    /* Message-based signing (§5.15-5.16): the module offers no mechanism for
     * it; the per-message parameter is opaque (Z: its size crosses, as zeros).
     * Whoever adds such a mechanism gives its struct a codec as for X. */
    [KSA_FN_MessageSignInit] = "uNu", [KSA_FN_SignMessage] = "uZIO", [KSA_FN_SignMessageBegin] = "uZ",
    [KSA_FN_SignMessageNext] = "uZIO", [KSA_FN_MessageSignFinal] = "u",
    [KSA_FN_MessageVerifyInit] = "uNu", [KSA_FN_VerifyMessage] = "uZII", [KSA_FN_VerifyMessageBegin] = "uZ",
    [KSA_FN_VerifyMessageNext] = "uZII", [KSA_FN_MessageVerifyFinal] = "u",
    /* PKCS #11 3.2 (v32_params.c): the signature crosses at init; AES-GCM's CK_GCM_PARAMS is
     * the M codec's (its pAAD empty: the associated data is the call's own I). */
    [KSA_FN_VerifySignatureInit] = "uMuI", [KSA_FN_VerifySignature] = "uI",
    [KSA_FN_VerifySignatureUpdate] = "uI", [KSA_FN_VerifySignatureFinal] = "u",
    [KSA_FN_GetSessionValidationFlags] = "uuL",
    [KSA_FN_WrapKeyAuthenticated] = "uMuuIO", [KSA_FN_UnwrapKeyAuthenticated] = "uMuITIL",
    /* 3.2 key encapsulation: the ciphertext out (O: length queries as C_Encrypt's) or in, the new key's handle. */
    [KSA_FN_EncapsulateKey] = "uMuTOL", [KSA_FN_DecapsulateKey] = "uMuTIL",
};

const char *ksa_signature(uint32_t fn) {
    if (fn == 0 || fn >= KSA_FN_COUNT) return NULL;
    return signatures[fn];
}

static size_t struct_size(char k) {
    switch (k) {
    case 'i': return sizeof(CK_INFO);
    case 's': return sizeof(CK_SLOT_INFO);
    case 't': return sizeof(CK_TOKEN_INFO);
    case 'e': return sizeof(CK_SESSION_INFO);
    case 'm': return sizeof(CK_MECHANISM_INFO);
    default: return 0;
    }
}

/* ---- mechanisms ---------------------------------------------------------- */


/* Pointer-free parameters. An allow-list, not a deny-list: a parameter struct
 * with pointers sent as raw bytes would make the agent read its own memory at
 * the client's addresses, so anything not known to be pointer-free is refused. */
int ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE t) {
    switch (t) {
    /* CK_RSA_PKCS_PSS_PARAMS */
    case CKM_RSA_PKCS_PSS: case CKM_SHA1_RSA_PKCS_PSS: case CKM_SHA224_RSA_PKCS_PSS:
    case CKM_SHA256_RSA_PKCS_PSS: case CKM_SHA384_RSA_PKCS_PSS: case CKM_SHA512_RSA_PKCS_PSS:
    case CKM_SHA3_224_RSA_PKCS_PSS: case CKM_SHA3_256_RSA_PKCS_PSS: case CKM_SHA3_384_RSA_PKCS_PSS:
    case CKM_SHA3_512_RSA_PKCS_PSS:
    /* IVs (the parameter is the IV itself) and CK_AES_CTR_PARAMS */
    case CKM_AES_CBC: case CKM_AES_CBC_PAD: case CKM_AES_CTR: case CKM_AES_CTS:
    case CKM_AES_KEY_WRAP: case CKM_AES_KEY_WRAP_PAD:
    case CKM_DES_CBC: case CKM_DES_CBC_PAD: case CKM_DES3_CBC: case CKM_DES3_CBC_PAD:
    /* CK_MAC_GENERAL_PARAMS (a CK_ULONG) */
    case CKM_AES_CMAC_GENERAL:
    /* CKM_AES_KEY_WRAP_KWP: no parameter or the 4-byte IV; the *_MAC_GENERAL: a CK_ULONG. */
    case CKM_AES_KEY_WRAP_KWP: case CKM_AES_MAC_GENERAL: case CKM_DES3_MAC_GENERAL:
    case CKM_DH_PKCS_DERIVE:  /* the other party's public value itself */
    case CKM_SHA_1_HMAC_GENERAL: case CKM_SHA256_HMAC_GENERAL: case CKM_SHA384_HMAC_GENERAL:
    case CKM_SHA512_HMAC_GENERAL: case CKM_SHA224_HMAC_GENERAL:
    case CKM_SHA512_224_HMAC_GENERAL: case CKM_SHA512_256_HMAC_GENERAL:
    case CKM_SHA3_224_HMAC_GENERAL: case CKM_SHA3_256_HMAC_GENERAL: case CKM_SHA3_384_HMAC_GENERAL:
    case CKM_SHA3_512_HMAC_GENERAL:
    case CKM_EXTRACT_KEY_FROM_KEY:       /* CK_EXTRACT_PARAMS: a CK_ULONG */
    case CKM_CONCATENATE_BASE_AND_KEY:   /* a CK_OBJECT_HANDLE */
        return 1;
    /* Not CKM_AES_ECB_ENCRYPT_DATA / CKM_AES_CBC_ENCRYPT_DATA (and DES3's): their structs
     * carry a data pointer (breadth_params.c). */
    default:
        return 0;
    }
}

/* Input bytes: u8 present, u64 len, bytes when present. An input that cannot
 * cross (NULL with a length, or more than a frame carries) crosses as NULL
 * with its length, never refused here: the module must see the call, because
 * its CKR_ARGUMENTS_BAD ends the session's active operation (PKCS #11 §5.2),
 * and only the agent holds that operation. */
CK_RV ksa_put_bytes(ksa_buf *b, const void *p, CK_ULONG n) {
    int present = p != NULL && n <= KSA_MAX_OUTPUT;
    ksa_put_u8(b, (uint8_t)present);
    ksa_put_u64(b, n);
    if (present) ksa_put_raw(b, p, n);
    return CKR_OK;
}

static const uint8_t empty_input[8];

/* The agent's view of input bytes: NULL when the client's was NULL; a
 * non-NULL pointer (into the request) otherwise, even for zero bytes. */
int ksa_get_bytes(ksa_rd *r, void **p, CK_ULONG *n) {
    uint8_t present = ksa_get_u8(r);
    uint64_t len = ksa_get_u64(r);
    if (r->failed || present > 1 || (present && len > KSA_MAX_OUTPUT)) return -1;
    *n = (CK_ULONG)len;
    *p = NULL;
    if (present) {
        const uint8_t *d = ksa_get_raw(r, len);
        if (!d) return -1;
        *p = (void *)(len ? d : empty_input);
    }
    return 0;
}

/* A mechanism ('M'; 'N' with `message` 1: a C_Message*Init, where GCM's and
 * ChaCha20-Poly1305's parameter is the message struct). How each
 * mechanism's parameter crosses: the cases below, then struct_params.c and
 * kdf_params.c, then the pointer-free list above. A mechanism with a
 * parameter none of them names is refused here (CKR_MECHANISM_PARAM_INVALID):
 * sent as raw bytes, a struct's pointers would be read in the agent. */
static CK_RV put_mechanism(ksa_buf *b, const CK_MECHANISM *m, int message) {
    ksa_put_u8(b, m != NULL);
    if (!m) return CKR_OK;
    ksa_put_u64(b, m->mechanism);
    if (m->pParameter == NULL || m->ulParameterLen == 0) {
        ksa_put_u8(b, PARAM_NONE);
        ksa_put_u8(b, m->pParameter != NULL);
        ksa_put_u64(b, m->ulParameterLen);
        return CKR_OK;
    }
    CK_RV rv;
    if (ksa_put_struct_param(b, m, message, &rv)) return rv;
    if (ksa_put_pq_param(b, m, &rv)) return rv;   /* pq_params.c */
    switch (m->mechanism) {
    case CKM_RSA_PKCS_OAEP: {
        if (m->ulParameterLen != sizeof(CK_RSA_PKCS_OAEP_PARAMS)) return CKR_MECHANISM_PARAM_INVALID;
        const CK_RSA_PKCS_OAEP_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_OAEP);
        ksa_put_u64(b, p->hashAlg);
        ksa_put_u64(b, p->mgf);
        ksa_put_u64(b, p->source);
        return ksa_put_bytes(b, p->pSourceData, p->ulSourceDataLen);
    }
    case CKM_AES_GCM: {
        if (m->ulParameterLen != sizeof(CK_GCM_PARAMS)) return CKR_MECHANISM_PARAM_INVALID;
        const CK_GCM_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_GCM);
        CK_RV rv = ksa_put_bytes(b, p->pIv, p->ulIvLen);
        if (rv != CKR_OK) return rv;
        ksa_put_u64(b, p->ulIvBits);
        rv = ksa_put_bytes(b, p->pAAD, p->ulAADLen);
        ksa_put_u64(b, p->ulTagBits);
        return rv;
    }
    case CKM_ECDH1_DERIVE: case CKM_ECDH1_COFACTOR_DERIVE: {
        if (m->ulParameterLen != sizeof(CK_ECDH1_DERIVE_PARAMS)) return CKR_MECHANISM_PARAM_INVALID;
        const CK_ECDH1_DERIVE_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_ECDH1);
        ksa_put_u64(b, p->kdf);
        CK_RV rv = ksa_put_bytes(b, p->pSharedData, p->ulSharedDataLen);
        if (rv != CKR_OK) return rv;
        return ksa_put_bytes(b, p->pPublicData, p->ulPublicDataLen);
    }
    default: {
        if (ksa_put_kdf_param(b, m, &rv)) return rv;
        if (ksa_put_breadth_param(b, m, &rv)) return rv;   /* breadth_params.c */
        if (!ksa_mechanism_param_is_raw(m->mechanism)) return CKR_MECHANISM_PARAM_INVALID;
        ksa_put_u8(b, PARAM_RAW);
        return ksa_put_bytes(b, m->pParameter, m->ulParameterLen);
    }
    }
}

static int get_mechanism(ksa_rd *r, ksa_arena *a, CK_MECHANISM **out, int message) {
    *out = NULL;
    uint8_t present = ksa_get_u8(r);
    if (r->failed || present > 1) return -1;
    if (!present) return 0;
    CK_MECHANISM *m = ksa_arena_alloc(a, sizeof *m);
    if (!m) return -1;
    m->mechanism = (CK_MECHANISM_TYPE)ksa_get_u64(r);
    uint8_t enc = ksa_get_u8(r);
    void *d;
    CK_ULONG n;
    switch (enc) {
    case PARAM_NONE: {
        uint8_t nonnull = ksa_get_u8(r);
        uint64_t len = ksa_get_u64(r);
        if (r->failed || nonnull > 1) return -1;
        /* A NULL pointer with a length, or a pointer with length 0: the
         * module sees the same shape (the pointer names no bytes). */
        m->pParameter = nonnull ? (void *)empty_input : NULL;
        m->ulParameterLen = (CK_ULONG)len;
        if (nonnull && len) return -1;
        break;
    }
    case PARAM_RAW: {
        if (ksa_get_bytes(r, &d, &n) || !d || !ksa_mechanism_param_is_raw(m->mechanism)) return -1;
        /* A copy in the arena: aligned for the struct, and the module's own. */
        void *copy = ksa_arena_alloc(a, n);
        if (!copy) return -1;
        if (n) memcpy(copy, d, n);
        m->pParameter = copy;
        m->ulParameterLen = n;
        break;
    }
    case PARAM_OAEP: {
        if (m->mechanism != CKM_RSA_PKCS_OAEP) return -1;
        CK_RSA_PKCS_OAEP_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        p->hashAlg = ksa_get_u64(r);
        p->mgf = ksa_get_u64(r);
        p->source = ksa_get_u64(r);
        if (ksa_get_bytes(r, &p->pSourceData, &p->ulSourceDataLen)) return -1;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        break;
    }
    case PARAM_GCM: {
        if (m->mechanism != CKM_AES_GCM) return -1;
        CK_GCM_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        if (ksa_get_bytes(r, &d, &n)) return -1;
        p->pIv = d;
        p->ulIvLen = n;
        p->ulIvBits = ksa_get_u64(r);
        if (ksa_get_bytes(r, &d, &n)) return -1;
        p->pAAD = d;
        p->ulAADLen = n;
        p->ulTagBits = ksa_get_u64(r);
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        break;
    }
    case PARAM_ECDH1: {
        if (m->mechanism != CKM_ECDH1_DERIVE && m->mechanism != CKM_ECDH1_COFACTOR_DERIVE) return -1;
        CK_ECDH1_DERIVE_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        p->kdf = ksa_get_u64(r);
        if (ksa_get_bytes(r, &d, &n)) return -1;
        p->pSharedData = d;
        p->ulSharedDataLen = n;
        if (ksa_get_bytes(r, &d, &n)) return -1;
        p->pPublicData = d;
        p->ulPublicDataLen = n;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        break;
    }
    case PARAM_CHACHA: case PARAM_EDDSA: case PARAM_RSA_AES: case PARAM_GCM_MSG: case PARAM_CHACHA_MSG:
        if (ksa_get_struct_param(r, a, m, enc, message) != 0) return -1;
        break;
    case PARAM_SIZED:
        /* A wrong-sized message struct (struct_params.c) or KDF struct (kdf_params.c). */
        if (m->mechanism == CKM_AES_GCM || m->mechanism == CKM_CHACHA20_POLY1305) {
            if (ksa_get_struct_param(r, a, m, enc, message) != 0) return -1;
        } else if (ksa_get_kdf_param(r, a, m, enc) != 0) {
            return -1;
        }
        break;
    default: {
        int ok;
        if (ksa_get_pq_param(r, a, m, enc, &ok)) {   /* pq_params.c */
            if (ok != 0) return -1;
            break;
        }
        if (ksa_get_breadth_param(r, a, m, enc, &ok)) {   /* breadth_params.c */
            if (ok != 0) return -1;
            break;
        }
        if (ksa_get_kdf_param(r, a, m, enc) != 0) return -1;
        break;
    }
    }
    if (r->failed) return -1;
    *out = m;
    return 0;
}

/* ---- templates ------------------------------------------------------------ */

CK_RV ksa_put_template(ksa_buf *b, const CK_ATTRIBUTE *t, CK_ULONG count, int with_values) {
    if (count > 1u << 16) return CKR_ARGUMENTS_BAD;
    ksa_put_u8(b, t != NULL);
    ksa_put_u64(b, count);
    if (!t) return CKR_OK;
    for (CK_ULONG i = 0; i < count; i++) {
        ksa_put_u64(b, t[i].type);
        if (with_values && ksa_is_template_type(t[i].type)) {
            /* An array of attributes: its entries cross, never its pointers (template_params.c). */
            CK_RV rv = ksa_put_template_value(b, &t[i]);
            if (rv != CKR_OK) return rv;
        } else if (with_values) {
            CK_RV rv = ksa_put_bytes(b, t[i].ulValueLen ? t[i].pValue : NULL, t[i].ulValueLen);
            if (rv != CKR_OK) return rv;
        } else {
            ksa_put_u8(b, t[i].pValue != NULL);
            ksa_put_u64(b, t[i].ulValueLen);
            if (ksa_wants_template_caps(&t[i])) ksa_put_template_caps(b, &t[i]);
        }
    }
    return b->failed ? CKR_ARGUMENTS_BAD : CKR_OK;
}

/* A template as the agent sees it: a CK_ATTRIBUTE array in the arena. For
 * GetAttributeValue, each value buffer has the client's capacity (bounded). */
int ksa_get_template(ksa_rd *r, ksa_arena *a, int with_values, CK_ATTRIBUTE **out, CK_ULONG *count) {
    uint8_t present = ksa_get_u8(r);
    uint64_t n = ksa_get_u64(r);
    if (r->failed || present > 1 || n > 1u << 16) return -1;
    *count = (CK_ULONG)n;
    *out = NULL;
    if (!present) return 0;
    CK_ATTRIBUTE *t = ksa_arena_alloc(a, n ? n * sizeof *t : 1);
    if (!t) return -1;
    for (uint64_t i = 0; i < n; i++) {
        t[i].type = ksa_get_u64(r);
        if (with_values && ksa_is_template_type(t[i].type)) {
            if (ksa_get_template_value(r, a, &t[i])) return -1;
        } else if (with_values) {
            if (ksa_get_bytes(r, &t[i].pValue, &t[i].ulValueLen)) return -1;
        } else {
            uint8_t has = ksa_get_u8(r);
            uint64_t cap = ksa_get_u64(r);
            if (r->failed || has > 1) return -1;
            t[i].ulValueLen = (CK_ULONG)cap;
            t[i].pValue = NULL;
            if (has && ksa_is_template_type(t[i].type) && cap >= sizeof(CK_ATTRIBUTE)) {
                /* The caller's array with its inner capacities (template_params.c). */
                if (ksa_get_template_caps(r, a, &t[i])) return -1;
            } else if (has) {
                size_t c = cap > KSA_MAX_OUTPUT ? KSA_MAX_OUTPUT : (size_t)cap;
                t[i].pValue = ksa_arena_alloc(a, c);
                if (!t[i].pValue) return -1;
                /* The module sees the capacity that was really allocated. */
                t[i].ulValueLen = (CK_ULONG)c;
            }
        }
    }
    *out = t;
    return 0;
}

/* ---- requests ------------------------------------------------------------- */

CK_RV ksa_encode_request(uint32_t fn, ksa_arg *args, ksa_buf *b) {
    const char *sig = ksa_signature(fn);
    if (!sig) return CKR_FUNCTION_NOT_SUPPORTED;
    CK_RV rv = CKR_OK;
    for (int i = 0; sig[i] && rv == CKR_OK; i++) {
        ksa_arg *a = &args[i];
        switch (sig[i]) {
        case 'u': ksa_put_u64(b, a->ul); break;
        case 'I': rv = ksa_put_bytes(b, a->ptr, a->len); break;
        case 'O':
            ksa_put_u8(b, (a->ptr != NULL) | (a->plen != NULL) << 1);
            a->cap = a->plen ? *a->plen : 0;
            ksa_put_u64(b, a->cap);
            break;
        case 'R':
            ksa_put_u8(b, a->ptr != NULL);
            ksa_put_u64(b, a->ul);
            if (a->ul > KSA_MAX_OUTPUT) rv = CKR_ARGUMENTS_BAD;
            break;
        case 'L': ksa_put_u8(b, a->plen != NULL); break;
        case 'P': ksa_put_u8(b, a->ptr != NULL); break;
        case 'A':
            ksa_put_u8(b, (a->ptr != NULL) | (a->plen != NULL) << 1);
            a->cap = a->plen ? *a->plen : 0;
            ksa_put_u64(b, a->cap);
            break;
        case 'F':
            ksa_put_u8(b, (a->ptr != NULL) | (a->plen != NULL) << 1);
            a->cap = a->ul;
            ksa_put_u64(b, a->ul);
            break;
        case 'T': rv = ksa_put_template(b, a->ptr, a->len, 1); break;
        case 'G':
            /* The caller's capacities, kept (in a->plen, an array the client
             * provides) to bound what the reply may write. */
            if (!a->plen && a->ptr && a->len) { rv = CKR_GENERAL_ERROR; break; }
            if (a->ptr) for (CK_ULONG k = 0; k < a->len; k++)
                a->plen[k] = ((CK_ATTRIBUTE *)a->ptr)[k].pValue ? ((CK_ATTRIBUTE *)a->ptr)[k].ulValueLen : 0;
            rv = ksa_put_template(b, a->ptr, a->len, 0);
            break;
        case 'M': case 'N': rv = put_mechanism(b, a->ptr, sig[i] == 'N'); break;
        case 'X': case 'Y': case 'Z': rv = ksa_put_message_param(b, a, sig[i]); break;
        case 'i': case 's': case 't': case 'e': case 'm':
            ksa_put_u8(b, a->ptr != NULL);
            break;
        default: rv = CKR_GENERAL_ERROR;
        }
    }
    if (rv == CKR_OK && b->failed) rv = CKR_ARGUMENTS_BAD;
    return rv;
}

/* Something the module may point at for a non-NULL opaque pointer (pReserved). */
static uint64_t opaque_dummy[8];

/* The functions whose byte output is bounded by the bytes they are given: at most the input plus
 * KSA_OUTPUT_SLACK (a block of padding, a tag, an RSA modulus of up to 32,768 bits). Not the
 * finals (GCM decryption releases the whole message there), nor signing (an SLH-DSA signature is
 * 49,856 bytes for any input). */
#define KSA_OUTPUT_SLACK 4096u
static int output_follows_input(uint32_t fn) {
    switch (fn) {
    case KSA_FN_Encrypt: case KSA_FN_Decrypt: case KSA_FN_EncryptUpdate: case KSA_FN_DecryptUpdate:
    case KSA_FN_DigestEncryptUpdate: case KSA_FN_DecryptDigestUpdate: case KSA_FN_SignEncryptUpdate:
    case KSA_FN_DecryptVerifyUpdate: case KSA_FN_EncryptMessage: case KSA_FN_DecryptMessage:
    case KSA_FN_EncryptMessageNext: case KSA_FN_DecryptMessageNext:
        return 1;
    default:
        return 0;
    }
}

int ksa_decode_request(uint32_t fn, ksa_rd *r, ksa_arg *args, ksa_arena *ar) {
    return ksa_decode_request_sized(fn, r, args, ar, 0, NULL);
}

int ksa_decode_request_sized(uint32_t fn, ksa_rd *r, ksa_arg *args, ksa_arena *ar, int sized, int *reduced) {
    const char *sig = ksa_signature(fn);
    if (!sig) return -1;
    size_t inputs = 0;
    for (int i = 0; sig[i]; i++) {
        ksa_arg *a = &args[i];
        memset(a, 0, sizeof *a);
        uint8_t f;
        uint64_t n;
        switch (sig[i]) {
        case 'u': a->ul = (CK_ULONG)ksa_get_u64(r); break;
        case 'I': if (ksa_get_bytes(r, &a->ptr, &a->len)) return -1; inputs += a->len; break;
        case 'O': case 'A': case 'F': {
            f = ksa_get_u8(r);
            n = ksa_get_u64(r);
            if (r->failed || f > 3) return -1;
            size_t elem = sig[i] == 'O' ? 1 : sizeof(CK_ULONG);
            size_t max = KSA_MAX_OUTPUT / elem;
            size_t c = n > max ? max : (size_t)n;
            /* Sized: what the call can write, not the capacity the client declares (ksa_serve calls
             * again at the declared capacity if the module says CKR_BUFFER_TOO_SMALL). */
            int fills = sized && sig[i] == 'O' && output_follows_input(fn);
            if (fills && (f & 1) && c > inputs + KSA_OUTPUT_SLACK) {
                c = inputs + KSA_OUTPUT_SLACK;
                if (reduced) *reduced = 1;
            }
            if (f & 2) {
                a->plen = ksa_arena_alloc(ar, sizeof(CK_ULONG));
                if (!a->plen) return -1;
                *a->plen = (CK_ULONG)c;
            }
            a->cap = (CK_ULONG)c;
            if (sig[i] == 'F') a->ul = (CK_ULONG)c;
            if (f & 1) {
                a->ptr = arena_alloc(ar, c * elem, !fills);
                if (!a->ptr) return -1;
            }
            break;
        }
        case 'R':
            f = ksa_get_u8(r);
            n = ksa_get_u64(r);
            if (r->failed || f > 1 || n > KSA_MAX_OUTPUT) return -1;
            a->ul = (CK_ULONG)n;
            if (f && !(a->ptr = ksa_arena_alloc(ar, (size_t)n))) return -1;
            break;
        case 'L':
            f = ksa_get_u8(r);
            if (r->failed || f > 1) return -1;
            if (f && !(a->plen = ksa_arena_alloc(ar, sizeof(CK_ULONG)))) return -1;
            break;
        case 'P':
            f = ksa_get_u8(r);
            if (r->failed || f > 1) return -1;
            a->ptr = f ? opaque_dummy : NULL;
            break;
        case 'T': case 'G': {
            CK_ATTRIBUTE *t;
            if (ksa_get_template(r, ar, sig[i] == 'T', &t, &a->len)) return -1;
            a->ptr = t;
            break;
        }
        case 'M': case 'N': {
            CK_MECHANISM *m;
            if (get_mechanism(r, ar, &m, sig[i] == 'N')) return -1;
            a->ptr = m;
            break;
        }
        case 'X': case 'Y': case 'Z':
            if (ksa_get_message_param(r, ar, a, sig[i])) return -1;
            break;
        case 'i': case 's': case 't': case 'e': case 'm':
            f = ksa_get_u8(r);
            if (r->failed || f > 1) return -1;
            if (f && !(a->ptr = ksa_arena_alloc(ar, struct_size(sig[i])))) return -1;
            break;
        default: return -1;
        }
        if (r->failed) return -1;
    }
    /* Trailing bytes: a framing error. */
    return r->left == 0 ? 0 : -1;
}

/* GetAttributeValue fills values also when it returns these. */
static int attribute_values_valid(CK_RV rv) {
    return rv == CKR_OK || rv == CKR_ATTRIBUTE_SENSITIVE || rv == CKR_ATTRIBUTE_TYPE_INVALID ||
           rv == CKR_BUFFER_TOO_SMALL;
}

void ksa_encode_reply(uint32_t fn, ksa_arg *args, CK_RV rv, ksa_buf *b) {
    const char *sig = ksa_signature(fn);
    ksa_put_u64(b, rv);
    ksa_put_u8(b, sig != NULL);
    if (!sig) return;
    for (int i = 0; sig[i]; i++) {
        ksa_arg *a = &args[i];
        switch (sig[i]) {
        case 'O': case 'A': case 'F': {
            size_t elem = sig[i] == 'O' ? 1 : sizeof(CK_ULONG);
            ksa_put_u8(b, a->plen != NULL);
            CK_ULONG v = a->plen ? *a->plen : 0;
            ksa_put_u64(b, v);
            int data = a->ptr && a->plen && rv == CKR_OK && v <= a->cap;
            ksa_put_u8(b, data);
            if (data) {
                ksa_put_u32(b, (uint32_t)v);
                if (elem == 1) ksa_put_raw(b, a->ptr, v);
                else for (CK_ULONG k = 0; k < v; k++) ksa_put_u64(b, ((CK_ULONG *)a->ptr)[k]);
            }
            break;
        }
        case 'R': {
            int data = a->ptr && rv == CKR_OK;
            ksa_put_u8(b, data);
            if (data) ksa_put_raw(b, a->ptr, a->ul);
            break;
        }
        case 'L':
            ksa_put_u8(b, a->plen && rv == CKR_OK);
            if (a->plen && rv == CKR_OK) ksa_put_u64(b, *a->plen);
            break;
        case 'G': {
            CK_ATTRIBUTE *t = a->ptr;
            ksa_put_u8(b, t != NULL);
            if (!t) break;
            for (CK_ULONG k = 0; k < a->len; k++) {
                ksa_put_u64(b, t[k].ulValueLen);
                if (ksa_is_template_type(t[k].type)) {
                    /* An array: its inner entries, never the agent's pointers. */
                    int nested = ksa_template_reply_kind(&t[k], attribute_values_valid(rv));
                    ksa_put_u8(b, nested ? 2 : 0);
                    if (nested) ksa_put_template_reply(b, &t[k]);
                    continue;
                }
                int data = t[k].pValue && attribute_values_valid(rv) &&
                           t[k].ulValueLen != CK_UNAVAILABLE_INFORMATION && t[k].ulValueLen <= KSA_MAX_OUTPUT;
                ksa_put_u8(b, data);
                if (data) {
                    ksa_put_u32(b, (uint32_t)t[k].ulValueLen);
                    ksa_put_raw(b, t[k].pValue, t[k].ulValueLen);
                }
            }
            break;
        }
        case 'M': case 'N':
            /* The handles a mechanism parameter returns (SP 800-108's additional keys). */
            ksa_put_mechanism_outputs(b, a->ptr);
            break;
        case 'X': case 'Y': case 'Z':
            /* The IV a generator made and the tag, when the module wrote them. */
            ksa_put_message_outputs(b, a);
            break;
        case 'i': case 's': case 't': case 'e': case 'm': {
            int data = a->ptr && rv == CKR_OK;
            ksa_put_u8(b, data);
            if (data) ksa_put_raw(b, a->ptr, struct_size(sig[i]));
            break;
        }
        default: break;
        }
    }
}

CK_RV ksa_apply_reply(uint32_t fn, ksa_arg *args, ksa_rd *r) {
    const char *sig = ksa_signature(fn);
    CK_RV rv = (CK_RV)ksa_get_u64(r);
    uint8_t outputs = ksa_get_u8(r);
    if (r->failed || !sig || outputs > 1) return CKR_DEVICE_ERROR;
    if (!outputs) return r->left == 0 ? rv : CKR_DEVICE_ERROR;
    /* Validate everything before writing anything to the caller's memory. */
    ksa_rd check = *r;
    for (int pass = 0; pass < 2; pass++) {
        ksa_rd *rd = pass == 0 ? &check : r;
        int write = pass == 1;
        for (int i = 0; sig[i]; i++) {
            ksa_arg *a = &args[i];
            switch (sig[i]) {
            case 'O': case 'A': case 'F': {
                size_t elem = sig[i] == 'O' ? 1 : sizeof(CK_ULONG);
                uint8_t has = ksa_get_u8(rd);
                uint64_t v = ksa_get_u64(rd);
                uint8_t data = ksa_get_u8(rd);
                if (rd->failed || has > 1 || data > 1 || has != (a->plen != NULL)) return CKR_DEVICE_ERROR;
                if (write && a->plen) *a->plen = (CK_ULONG)v;
                if (data) {
                    uint32_t n = ksa_get_u32(rd);
                    if (rd->failed || !a->ptr || n > a->cap || n != v) return CKR_DEVICE_ERROR;
                    if (elem == 1) {
                        const uint8_t *d = ksa_get_raw(rd, n);
                        if (!d) return CKR_DEVICE_ERROR;
                        if (write && n) memcpy(a->ptr, d, n);
                    } else {
                        for (uint32_t k = 0; k < n; k++) {
                            uint64_t x = ksa_get_u64(rd);
                            if (write) ((CK_ULONG *)a->ptr)[k] = (CK_ULONG)x;
                        }
                    }
                }
                break;
            }
            case 'R': {
                uint8_t data = ksa_get_u8(rd);
                if (rd->failed || data > 1 || (data && !a->ptr)) return CKR_DEVICE_ERROR;
                if (data) {
                    const uint8_t *d = ksa_get_raw(rd, a->ul);
                    if (!d) return CKR_DEVICE_ERROR;
                    if (write && a->ul) memcpy(a->ptr, d, a->ul);
                }
                break;
            }
            case 'L': {
                uint8_t has = ksa_get_u8(rd);
                if (rd->failed || has > 1 || (has && !a->plen)) return CKR_DEVICE_ERROR;
                if (has) {
                    uint64_t v = ksa_get_u64(rd);
                    if (write) *a->plen = (CK_ULONG)v;
                }
                break;
            }
            case 'G': {
                CK_ATTRIBUTE *t = a->ptr;
                uint8_t has = ksa_get_u8(rd);
                if (rd->failed || has != (t != NULL)) return CKR_DEVICE_ERROR;
                if (!t) break;
                for (CK_ULONG k = 0; k < a->len; k++) {
                    uint64_t v = ksa_get_u64(rd);
                    uint8_t data = ksa_get_u8(rd);
                    CK_ULONG cap = ((CK_ULONG *)a->plen)[k];
                    int tpl = ksa_is_template_type(t[k].type);
                    /* A template-type value comes only as its entries (2), other values only as bytes (1). */
                    if (rd->failed || data > 2 || (data == 2) != (tpl && data != 0)) return CKR_DEVICE_ERROR;
                    if (data == 2) {
                        if (ksa_apply_template_reply(rd, &t[k], cap, v, write)) return CKR_DEVICE_ERROR;
                    } else if (data) {
                        uint32_t n = ksa_get_u32(rd);
                        if (rd->failed || !t[k].pValue || n != v || n > cap) return CKR_DEVICE_ERROR;
                        const uint8_t *d = ksa_get_raw(rd, n);
                        if (!d) return CKR_DEVICE_ERROR;
                        if (write && n) memcpy(t[k].pValue, d, n);
                    }
                    if (write) t[k].ulValueLen = (CK_ULONG)v;
                }
                break;
            }
            case 'M': case 'N':
                if (ksa_apply_mechanism_outputs(rd, a->ptr, write) != 0) return CKR_DEVICE_ERROR;
                break;
            case 'X': case 'Y': case 'Z':
                if (ksa_apply_message_outputs(rd, a, write) != 0) return CKR_DEVICE_ERROR;
                break;
            case 'i': case 's': case 't': case 'e': case 'm': {
                uint8_t data = ksa_get_u8(rd);
                if (rd->failed || data > 1 || (data && !a->ptr)) return CKR_DEVICE_ERROR;
                if (data) {
                    const uint8_t *d = ksa_get_raw(rd, struct_size(sig[i]));
                    if (!d) return CKR_DEVICE_ERROR;
                    if (write) memcpy(a->ptr, d, struct_size(sig[i]));
                }
                break;
            }
            default: break;
            }
        }
        if (rd->failed || rd->left != 0) return CKR_DEVICE_ERROR;
    }
    return rv;
}
