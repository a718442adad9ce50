/*
 * The agent's side of a call: decode into agent memory, call the in-process
 * function table (the same code the module runs in-process), encode the
 * reply. The per-client runtime is chosen by the caller of ksa_serve (the
 * agent sets the thread's current Module before calling it).
 */
#include <string.h>
#include "agent_protocol.h"

#define U(i) (a[i].ul)
#define B(i) ((CK_BYTE_PTR)a[i].ptr)
#define N(i) (a[i].len)
#define PL(i) (a[i].plen)
#define T(i) ((CK_ATTRIBUTE_PTR)a[i].ptr)
#define M(i) ((CK_MECHANISM_PTR)a[i].ptr)

static CK_RV call(const CK_FUNCTION_LIST_3_0 *f, uint32_t fn, ksa_arg *a) {
    switch (fn) {
    case KSA_FN_Initialize: return f->C_Initialize(NULL);
    case KSA_FN_Finalize: return f->C_Finalize(NULL);
    case KSA_FN_GetInfo: return f->C_GetInfo(a[0].ptr);
    case KSA_FN_GetSlotList: return f->C_GetSlotList((CK_BBOOL)(U(0) != 0), a[1].ptr, PL(1));
    case KSA_FN_GetSlotInfo: return f->C_GetSlotInfo(U(0), a[1].ptr);
    case KSA_FN_GetTokenInfo: return f->C_GetTokenInfo(U(0), a[1].ptr);
    case KSA_FN_GetMechanismList: return f->C_GetMechanismList(U(0), a[1].ptr, PL(1));
    case KSA_FN_GetMechanismInfo: return f->C_GetMechanismInfo(U(0), U(1), a[2].ptr);
    case KSA_FN_InitToken:
        /* The label is 32 bytes or NULL (the client sends exactly that). */
        if (B(2) && N(2) != 32) return CKR_ARGUMENTS_BAD;
        return f->C_InitToken(U(0), B(1), N(1), B(2));
    case KSA_FN_InitPIN: return f->C_InitPIN(U(0), B(1), N(1));
    case KSA_FN_SetPIN: return f->C_SetPIN(U(0), B(1), N(1), B(2), N(2));
    case KSA_FN_OpenSession: return f->C_OpenSession(U(0), U(1), NULL, NULL, PL(2));
    case KSA_FN_CloseSession: return f->C_CloseSession(U(0));
    case KSA_FN_CloseAllSessions: return f->C_CloseAllSessions(U(0));
    case KSA_FN_GetSessionInfo: return f->C_GetSessionInfo(U(0), a[1].ptr);
    case KSA_FN_GetOperationState: return f->C_GetOperationState(U(0), B(1), PL(1));
    case KSA_FN_SetOperationState: return f->C_SetOperationState(U(0), B(1), N(1), U(2), U(3));
    case KSA_FN_Login: return f->C_Login(U(0), U(1), B(2), N(2));
    case KSA_FN_Logout: return f->C_Logout(U(0));
    case KSA_FN_CreateObject: return f->C_CreateObject(U(0), T(1), N(1), PL(2));
    case KSA_FN_CopyObject: return f->C_CopyObject(U(0), U(1), T(2), N(2), PL(3));
    case KSA_FN_DestroyObject: return f->C_DestroyObject(U(0), U(1));
    case KSA_FN_GetObjectSize: return f->C_GetObjectSize(U(0), U(1), PL(2));
    case KSA_FN_GetAttributeValue: return f->C_GetAttributeValue(U(0), U(1), T(2), N(2));
    case KSA_FN_SetAttributeValue: return f->C_SetAttributeValue(U(0), U(1), T(2), N(2));
    case KSA_FN_FindObjectsInit: return f->C_FindObjectsInit(U(0), T(1), N(1));
    case KSA_FN_FindObjects: return f->C_FindObjects(U(0), a[1].ptr, a[1].ul, PL(1));
    case KSA_FN_FindObjectsFinal: return f->C_FindObjectsFinal(U(0));
    case KSA_FN_EncryptInit: return f->C_EncryptInit(U(0), M(1), U(2));
    case KSA_FN_Encrypt: return f->C_Encrypt(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_EncryptUpdate: return f->C_EncryptUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_EncryptFinal: return f->C_EncryptFinal(U(0), B(1), PL(1));
    case KSA_FN_DecryptInit: return f->C_DecryptInit(U(0), M(1), U(2));
    case KSA_FN_Decrypt: return f->C_Decrypt(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DecryptUpdate: return f->C_DecryptUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DecryptFinal: return f->C_DecryptFinal(U(0), B(1), PL(1));
    case KSA_FN_DigestInit: return f->C_DigestInit(U(0), M(1));
    case KSA_FN_Digest: return f->C_Digest(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DigestUpdate: return f->C_DigestUpdate(U(0), B(1), N(1));
    case KSA_FN_DigestKey: return f->C_DigestKey(U(0), U(1));
    case KSA_FN_DigestFinal: return f->C_DigestFinal(U(0), B(1), PL(1));
    case KSA_FN_SignInit: return f->C_SignInit(U(0), M(1), U(2));
    case KSA_FN_Sign: return f->C_Sign(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_SignUpdate: return f->C_SignUpdate(U(0), B(1), N(1));
    case KSA_FN_SignFinal: return f->C_SignFinal(U(0), B(1), PL(1));
    case KSA_FN_SignRecoverInit: return f->C_SignRecoverInit(U(0), M(1), U(2));
    case KSA_FN_SignRecover: return f->C_SignRecover(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_VerifyInit: return f->C_VerifyInit(U(0), M(1), U(2));
    case KSA_FN_Verify: return f->C_Verify(U(0), B(1), N(1), B(2), N(2));
    case KSA_FN_VerifyUpdate: return f->C_VerifyUpdate(U(0), B(1), N(1));
    case KSA_FN_VerifyFinal: return f->C_VerifyFinal(U(0), B(1), N(1));
    case KSA_FN_VerifyRecoverInit: return f->C_VerifyRecoverInit(U(0), M(1), U(2));
    case KSA_FN_VerifyRecover: return f->C_VerifyRecover(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DigestEncryptUpdate: return f->C_DigestEncryptUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DecryptDigestUpdate: return f->C_DecryptDigestUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_SignEncryptUpdate: return f->C_SignEncryptUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_DecryptVerifyUpdate: return f->C_DecryptVerifyUpdate(U(0), B(1), N(1), B(2), PL(2));
    case KSA_FN_GenerateKey: return f->C_GenerateKey(U(0), M(1), T(2), N(2), PL(3));
    case KSA_FN_GenerateKeyPair:
        return f->C_GenerateKeyPair(U(0), M(1), T(2), N(2), T(3), N(3), PL(4), PL(5));
    case KSA_FN_WrapKey: return f->C_WrapKey(U(0), M(1), U(2), U(3), B(4), PL(4));
    case KSA_FN_UnwrapKey: return f->C_UnwrapKey(U(0), M(1), U(2), B(3), N(3), T(4), N(4), PL(5));
    case KSA_FN_DeriveKey: return f->C_DeriveKey(U(0), M(1), U(2), T(3), N(3), PL(4));
    case KSA_FN_SeedRandom: return f->C_SeedRandom(U(0), B(1), N(1));
    case KSA_FN_GenerateRandom: return f->C_GenerateRandom(U(0), B(1), a[1].ul);
    case KSA_FN_GetFunctionStatus: return f->C_GetFunctionStatus(U(0));
    case KSA_FN_CancelFunction: return f->C_CancelFunction(U(0));
    case KSA_FN_WaitForSlotEvent: return f->C_WaitForSlotEvent(U(0), PL(1), a[2].ptr);
    case KSA_FN_LoginUser: return f->C_LoginUser(U(0), U(1), B(2), N(2), B(3), N(3));
    case KSA_FN_SessionCancel: return f->C_SessionCancel(U(0), U(1));
    /* Message-based: a[1] is the per-message parameter as the codec rebuilt it (ptr, len). */
    case KSA_FN_MessageEncryptInit: return f->C_MessageEncryptInit(U(0), M(1), U(2));
    case KSA_FN_EncryptMessage:
        return f->C_EncryptMessage(U(0), a[1].ptr, N(1), B(2), N(2), B(3), N(3), B(4), PL(4));
    case KSA_FN_EncryptMessageBegin: return f->C_EncryptMessageBegin(U(0), a[1].ptr, N(1), B(2), N(2));
    case KSA_FN_EncryptMessageNext:
        return f->C_EncryptMessageNext(U(0), a[1].ptr, N(1), B(2), N(2), B(3), PL(3), U(4));
    case KSA_FN_MessageEncryptFinal: return f->C_MessageEncryptFinal(U(0));
    case KSA_FN_MessageDecryptInit: return f->C_MessageDecryptInit(U(0), M(1), U(2));
    case KSA_FN_DecryptMessage:
        return f->C_DecryptMessage(U(0), a[1].ptr, N(1), B(2), N(2), B(3), N(3), B(4), PL(4));
    case KSA_FN_DecryptMessageBegin: return f->C_DecryptMessageBegin(U(0), a[1].ptr, N(1), B(2), N(2));
    case KSA_FN_DecryptMessageNext:
        return f->C_DecryptMessageNext(U(0), a[1].ptr, N(1), B(2), N(2), B(3), PL(3), U(4));
    case KSA_FN_MessageDecryptFinal: return f->C_MessageDecryptFinal(U(0));
    case KSA_FN_MessageSignInit: return f->C_MessageSignInit(U(0), M(1), U(2));
    case KSA_FN_SignMessage: return f->C_SignMessage(U(0), a[1].ptr, N(1), B(2), N(2), B(3), PL(3));
    case KSA_FN_SignMessageBegin: return f->C_SignMessageBegin(U(0), a[1].ptr, N(1));
    case KSA_FN_SignMessageNext: return f->C_SignMessageNext(U(0), a[1].ptr, N(1), B(2), N(2), B(3), PL(3));
    case KSA_FN_MessageSignFinal: return f->C_MessageSignFinal(U(0));
    case KSA_FN_MessageVerifyInit: return f->C_MessageVerifyInit(U(0), M(1), U(2));
    case KSA_FN_VerifyMessage: return f->C_VerifyMessage(U(0), a[1].ptr, N(1), B(2), N(2), B(3), N(3));
    case KSA_FN_VerifyMessageBegin: return f->C_VerifyMessageBegin(U(0), a[1].ptr, N(1));
    case KSA_FN_VerifyMessageNext: return f->C_VerifyMessageNext(U(0), a[1].ptr, N(1), B(2), N(2), B(3), N(3));
    case KSA_FN_MessageVerifyFinal: return f->C_MessageVerifyFinal(U(0));
    default: return ksa_call_3_2(fn, a);  /* 3.2 (v32_params.c), else CKR_FUNCTION_NOT_SUPPORTED */
    }
}

int ksa_pair_allowed(uint32_t init_fn, uint32_t call_fn) {
    return (init_fn == KSA_FN_SignInit && call_fn == KSA_FN_Sign) ||
           (init_fn == KSA_FN_VerifyInit && call_fn == KSA_FN_Verify) ||
           (init_fn == KSA_FN_EncryptInit && call_fn == KSA_FN_Encrypt) ||
           (init_fn == KSA_FN_DecryptInit && call_fn == KSA_FN_Decrypt);
}

/* Decodes fn's arguments, with byte outputs sized to what the call can write (codec.c: a client
 * passing a 1 MiB buffer for 16 KiB made the agent allocate and wipe 1 MiB a call, five times the
 * whole call's cost), then calls. If the module wants more than that size (CKR_BUFFER_TOO_SMALL,
 * which leaves the operation as it was: the spec's two-call convention), decodes again at the
 * client's capacities and calls again, so the client sees what a direct call would answer.
 * -1: the arguments do not decode, or bytes follow them where `whole` asks for none. */
static int decode_and_call(const CK_FUNCTION_LIST_3_0 *f, uint32_t fn, ksa_rd *r, int whole, ksa_arg *a,
                           ksa_arena *arena, CK_RV *rv) {
    ksa_rd start = *r;
    int reduced = 0;
    if (ksa_decode_request_sized(fn, r, a, arena, 1, &reduced) != 0 || (whole && r->left != 0)) return -1;
    *rv = call(f, fn, a);
    if (*rv == CKR_BUFFER_TOO_SMALL && reduced) {
        ksa_arena_free(arena);
        *r = start;
        if (ksa_decode_request(fn, r, a, arena) != 0) return -1;
        *rv = call(f, fn, a);
    }
    return 0;
}

/* One part of a pair: decode (fn, arguments), call, encode (rv, outputs).
 * The rv, or CKR_ARGUMENTS_BAD (*bad set) for a part that does not decode. */
static CK_RV serve_part(const CK_FUNCTION_LIST_3_0 *f, uint32_t fn, ksa_rd *r, ksa_buf *out, int *bad) {
    ksa_arg a[KSA_MAX_ARGS];
    ksa_arena arena = {0};
    CK_RV rv;
    if (decode_and_call(f, fn, r, 1, a, &arena, &rv) != 0) {
        *bad = 1;
        rv = CKR_ARGUMENTS_BAD;
        ksa_put_u64(out, rv);
        ksa_put_u8(out, 0);
    } else {
        if (ksa_epoch_fn_changes(fn)) ksa_epoch_bump();
        ksa_encode_reply(fn, a, rv, out);
    }
    ksa_arena_free(&arena);
    return rv;
}

/* KSA_FN_Pair (include/agent_protocol.h): the init, then the call when the
 * init succeeded. Every length is bounded by the frame; the two functions
 * must be one of the allowed pairs, checked before either runs. */
static int serve_pair(const CK_FUNCTION_LIST_3_0 *f, ksa_rd *r, ksa_buf *out) {
    uint32_t n = ksa_get_u32(r);
    const uint8_t *first = r->failed || n < 4 || n > r->left ? NULL : ksa_get_raw(r, n);
    ksa_rd one = {first, first ? n : 0, first == NULL};
    uint32_t fn1 = ksa_get_u32(&one), fn2 = ksa_get_u32(r);
    if (!first || one.failed || r->failed || !ksa_pair_allowed(fn1, fn2)) {
        ksa_put_u64(out, CKR_ARGUMENTS_BAD);
        ksa_put_u8(out, 0);
        return -1;
    }
    ksa_put_u64(out, CKR_OK);
    ksa_put_u8(out, 0);
    size_t at = out->len;
    ksa_put_u32(out, 0);
    int bad = 0;
    CK_RV rv = serve_part(f, fn1, &one, out, &bad);
    if (out->failed) return -1;
    uint32_t m = (uint32_t)(out->len - at - 4);
    for (int i = 0; i < 4; i++) out->data[at + i] = (uint8_t)(m >> (8 * i));  /* little-endian, as ksa_put_u32 */
    if (rv == CKR_OK && !bad) (void)serve_part(f, fn2, r, out, &bad);
    return bad ? -1 : 0;
}

int ksa_serve(const CK_FUNCTION_LIST_3_0 *f, const uint8_t *req, size_t len, ksa_buf *out) {
    ksa_rd r = {req, len, 0};
    uint32_t id = ksa_get_u32(&r);
    uint32_t fn = ksa_get_u32(&r);
    ksa_put_u32(out, id);
    if (r.failed) {
        ksa_put_u64(out, CKR_ARGUMENTS_BAD);
        ksa_put_u8(out, 0);
        return -1;
    }
    if (fn == KSA_FN_Pair) return serve_pair(f, &r, out);
    if (!ksa_signature(fn)) {
        ksa_put_u64(out, CKR_FUNCTION_NOT_SUPPORTED);
        ksa_put_u8(out, 0);
        return -1;
    }
    ksa_arg a[KSA_MAX_ARGS];
    ksa_arena arena = {0};
    int status = 0;
    CK_RV rv;
    if (decode_and_call(f, fn, &r, 0, a, &arena, &rv) != 0) {
        ksa_put_u64(out, CKR_ARGUMENTS_BAD);
        ksa_put_u8(out, 0);
        status = -1;
    } else {
        /* Before the reply leaves: a client that hears of the change sees the new epoch (epoch.c). */
        if (ksa_epoch_fn_changes(fn)) ksa_epoch_bump();
        ksa_encode_reply(fn, a, rv, out);
    }
    ksa_arena_free(&arena);
    return status;
}
