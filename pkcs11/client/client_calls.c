/*
 * The agent client's PKCS #11 entry points and its function tables (client_tables.c chooses
 * them in agent mode): C_Initialize and C_Finalize here, every other call marshalled through
 * kc_call (pairs.c) to the agent.
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

/* ---- the entry points ----------------------------------------------------- */

#define ARGS(...) ksa_arg a[KSA_MAX_ARGS] = {__VA_ARGS__}
#define UL(x) {.ul = (CK_ULONG)(x)}
#define IN(p, n) {.ptr = (void *)(p), .len = (n)}
#define OUT(p, pn) {.ptr = (void *)(p), .plen = (pn)}
#define PTR(p) {.ptr = (void *)(p)}
#define OUTUL(p) {.plen = (p)}
#define TMPL(p, n) {.ptr = (void *)(p), .len = (n)}

static CK_RV kc_C_Initialize(CK_VOID_PTR pInitArgs) {
    if (pInitArgs) {
        CK_C_INITIALIZE_ARGS *a = pInitArgs;
        int n = (a->CreateMutex != NULL) + (a->DestroyMutex != NULL) + (a->LockMutex != NULL) + (a->UnlockMutex != NULL);
        if (a->pReserved != NULL || (n != 0 && n != 4)) return CKR_ARGUMENTS_BAD;
    }
    /* Before kc_lock: a pair slot's lock is taken before kc_lock, never after. */
    kc_pairs_forget();
    pthread_mutex_lock(&kc_lock);
    if (kc_initialized) {
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_ALREADY_INITIALIZED;
    }
    /* No store and no agent: list the free slot from an empty view, start
     * nothing, create nothing (docs/agent.md, "No store, no agent"). */
    if (!kc_store_exists()) {
        pid_t peer;
        int fd = kc_connect_agent(0, &peer);
        if (fd == -2) {
            pthread_mutex_unlock(&kc_lock);
            return CKR_DEVICE_ERROR;
        }
        if (fd >= 0) close(fd);
        const CK_FUNCTION_LIST_3_2 *L = fd == -1 ? kc_lazy_engine() : NULL;
        if (L && L->C_Initialize(NULL) == CKR_OK) {
            kc_initialized = 1;
            kc_lost = 0;
            __atomic_store_n(&kc_lazy, 1, __ATOMIC_RELEASE);
            ks_client_note("no store at this process's KEYSHARE_HOME and no agent: listing only, nothing started or created");
            pthread_mutex_unlock(&kc_lock);
            return CKR_OK;
        }
    }
    struct kc_conn *c = NULL;
    CK_RV rv = kc_start_client_locked(&c, 1);
    if (rv == CKR_OK) {
        kc_initialized = 1;
        kc_lost = 0;
        c->generation = kc_generation;
        c->next = kc_idle;
        kc_idle = c;
    }
    pthread_mutex_unlock(&kc_lock);
    return rv;
}

static CK_RV kc_C_Finalize(CK_VOID_PTR pReserved) {
    if (pReserved) return CKR_ARGUMENTS_BAD;
    kc_pairs_forget();   /* the pending inits die with the sessions */
    /* A connection for the Finalize call, also when every connection is in
     * use by another thread (blocked in C_WaitForSlotEvent, say): the
     * agent-side C_Finalize is what wakes such a call (CKR_CRYPTOKI_NOT_INITIALIZED),
     * as in-process. Not when the agent is lost: nothing to finalise there. */
    struct kc_conn *c = NULL;
    pthread_mutex_lock(&kc_lock);
    int need = kc_initialized && !kc_lost && !kc_lazy && !kc_idle;
    pthread_mutex_unlock(&kc_lock);
    if (need && kc_acquire(&c) != CKR_OK) c = NULL;
    pthread_mutex_lock(&kc_lock);
    if (!kc_initialized) {
        if (c) kc_conn_free_locked(c);
        pthread_mutex_unlock(&kc_lock);
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    if (!c && kc_idle) {
        c = kc_idle;
        kc_idle = c->next;
    }
    int lost = kc_lost;
    if (kc_lazy) {
        kc_lazy_finalize();
        __atomic_store_n(&kc_lazy, 0, __ATOMIC_RELEASE);
    }
    kc_initialized = 0;
    kc_lost = 0;
    kc_generation++;
    kc_drop_idle_locked();
    pthread_mutex_unlock(&kc_lock);
    /* The agent finalises the client when its last connection closes; the
     * explicit call ends its sessions and logins now (as in-process). */
    if (c) {
        if (!lost) {
            ksa_arg a[1] = {{0}};
            CK_RV rv;
            (void)kc_exchange_in(c, KSA_FN_Finalize, a, &rv);
        }
        pthread_mutex_lock(&kc_lock);
        kc_conn_free_locked(c);
        pthread_mutex_unlock(&kc_lock);
    }
    return CKR_OK;
}

#define CALL(fn) return kc_call(KSA_FN_##fn, a)

static CK_RV kc_C_GetInfo(CK_INFO_PTR p) { ARGS(PTR(p)); CALL(GetInfo); }
static CK_RV kc_C_GetSlotList(CK_BBOOL t, CK_SLOT_ID_PTR p, CK_ULONG_PTR n) { ARGS(UL(t), OUT(p, n)); CALL(GetSlotList); }
static CK_RV kc_C_GetSlotInfo(CK_SLOT_ID s, CK_SLOT_INFO_PTR p) { ARGS(UL(s), PTR(p)); CALL(GetSlotInfo); }
static CK_RV kc_C_GetTokenInfo(CK_SLOT_ID s, CK_TOKEN_INFO_PTR p) { ARGS(UL(s), PTR(p)); CALL(GetTokenInfo); }
static CK_RV kc_C_WaitForSlotEvent(CK_FLAGS f, CK_SLOT_ID_PTR s, CK_VOID_PTR r) { ARGS(UL(f), OUTUL(s), PTR(r)); CALL(WaitForSlotEvent); }
static CK_RV kc_C_GetMechanismList(CK_SLOT_ID s, CK_MECHANISM_TYPE_PTR p, CK_ULONG_PTR n) { ARGS(UL(s), OUT(p, n)); CALL(GetMechanismList); }
static CK_RV kc_C_GetMechanismInfo(CK_SLOT_ID s, CK_MECHANISM_TYPE t, CK_MECHANISM_INFO_PTR p) { ARGS(UL(s), UL(t), PTR(p)); CALL(GetMechanismInfo); }
static CK_RV kc_C_InitToken(CK_SLOT_ID s, CK_UTF8CHAR_PTR pin, CK_ULONG n, CK_UTF8CHAR_PTR label) { ARGS(UL(s), IN(pin, n), IN(label, label ? 32 : 0)); CALL(InitToken); }
static CK_RV kc_C_InitPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR pin, CK_ULONG n) { ARGS(UL(h), IN(pin, n)); CALL(InitPIN); }
static CK_RV kc_C_SetPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR o, CK_ULONG on, CK_UTF8CHAR_PTR nw, CK_ULONG nn) { ARGS(UL(h), IN(o, on), IN(nw, nn)); CALL(SetPIN); }
static CK_RV kc_C_OpenSession(CK_SLOT_ID s, CK_FLAGS f, CK_VOID_PTR app, CK_NOTIFY notify, CK_SESSION_HANDLE_PTR ph) {
    /* Notify callbacks are accepted and never called, as in-process. */
    (void)app; (void)notify;
    ARGS(UL(s), UL(f), OUTUL(ph)); CALL(OpenSession);
}
static CK_RV kc_C_CloseSession(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(CloseSession); }
static CK_RV kc_C_CloseAllSessions(CK_SLOT_ID s) { ARGS(UL(s)); CALL(CloseAllSessions); }
static CK_RV kc_C_GetSessionInfo(CK_SESSION_HANDLE h, CK_SESSION_INFO_PTR p) { ARGS(UL(h), PTR(p)); CALL(GetSessionInfo); }
static CK_RV kc_C_GetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG_PTR n) { ARGS(UL(h), OUT(p, n)); CALL(GetOperationState); }
static CK_RV kc_C_SetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n, CK_OBJECT_HANDLE e, CK_OBJECT_HANDLE k) { ARGS(UL(h), IN(p, n), UL(e), UL(k)); CALL(SetOperationState); }
static CK_RV kc_C_Login(CK_SESSION_HANDLE h, CK_USER_TYPE u, CK_UTF8CHAR_PTR pin, CK_ULONG n) { ARGS(UL(h), UL(u), IN(pin, n)); CALL(Login); }
static CK_RV kc_C_Logout(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(Logout); }
static CK_RV kc_C_CreateObject(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), TMPL(t, n), OUTUL(o)); CALL(CreateObject); }
static CK_RV kc_C_CopyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR no) { ARGS(UL(h), UL(o), TMPL(t, n), OUTUL(no)); CALL(CopyObject); }
static CK_RV kc_C_DestroyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o) { ARGS(UL(h), UL(o)); CALL(DestroyObject); }
static CK_RV kc_C_GetObjectSize(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ULONG_PTR n) { ARGS(UL(h), UL(o), OUTUL(n)); CALL(GetObjectSize); }
static CK_RV kc_C_GetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n) {
    /* The caller's capacities bound what the reply may write. */
    CK_ULONG small[16];
    CK_ULONG *caps = small;
    if (t && n > 16) {
        if (n > 1u << 16) return CKR_ARGUMENTS_BAD;
        caps = calloc(n, sizeof *caps);
        if (!caps) return CKR_HOST_MEMORY;
    }
    ksa_arg a[KSA_MAX_ARGS] = {UL(h), UL(o), {.ptr = t, .len = n, .plen = caps}};
    CK_RV rv = kc_call(KSA_FN_GetAttributeValue, a);
    if (caps != small) free(caps);
    return rv;
}
static CK_RV kc_C_SetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n) { ARGS(UL(h), UL(o), TMPL(t, n)); CALL(SetAttributeValue); }
static CK_RV kc_C_FindObjectsInit(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR t, CK_ULONG n) { ARGS(UL(h), TMPL(t, n)); CALL(FindObjectsInit); }
static CK_RV kc_C_FindObjects(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE_PTR p, CK_ULONG max, CK_ULONG_PTR n) { ARGS(UL(h), {.ptr = p, .ul = max, .plen = n}); CALL(FindObjects); }
static CK_RV kc_C_FindObjectsFinal(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(FindObjectsFinal); }

#define INIT_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k) { ARGS(UL(h), PTR(m), UL(k)); CALL(name); }
#define ONESHOT_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), IN(i, in), OUT(o, on)); CALL(name); }
#define UPDATE_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR i, CK_ULONG in) { ARGS(UL(h), IN(i, in)); CALL(name); }
#define FINAL_FN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), OUT(o, on)); CALL(name); }

INIT_FN(EncryptInit) ONESHOT_FN(Encrypt) ONESHOT_FN(EncryptUpdate) FINAL_FN(EncryptFinal)
INIT_FN(DecryptInit) ONESHOT_FN(Decrypt) ONESHOT_FN(DecryptUpdate) FINAL_FN(DecryptFinal)
static CK_RV kc_C_DigestInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m) { ARGS(UL(h), PTR(m)); CALL(DigestInit); }
ONESHOT_FN(Digest) UPDATE_FN(DigestUpdate) FINAL_FN(DigestFinal)
static CK_RV kc_C_DigestKey(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE k) { ARGS(UL(h), UL(k)); CALL(DigestKey); }
INIT_FN(SignInit) ONESHOT_FN(Sign) UPDATE_FN(SignUpdate) FINAL_FN(SignFinal)
INIT_FN(SignRecoverInit) ONESHOT_FN(SignRecover)
INIT_FN(VerifyInit) UPDATE_FN(VerifyUpdate) UPDATE_FN(VerifyFinal)
static CK_RV kc_C_Verify(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(d, dn), IN(s, sn)); CALL(Verify); }
INIT_FN(VerifyRecoverInit) ONESHOT_FN(VerifyRecover)
ONESHOT_FN(DigestEncryptUpdate) ONESHOT_FN(DecryptDigestUpdate) ONESHOT_FN(SignEncryptUpdate) ONESHOT_FN(DecryptVerifyUpdate)

static CK_RV kc_C_GenerateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), TMPL(t, n), OUTUL(k)); CALL(GenerateKey); }
static CK_RV kc_C_GenerateKeyPair(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR pt, CK_ULONG pn, CK_ATTRIBUTE_PTR st, CK_ULONG sn, CK_OBJECT_HANDLE_PTR pk, CK_OBJECT_HANDLE_PTR sk) { ARGS(UL(h), PTR(m), TMPL(pt, pn), TMPL(st, sn), OUTUL(pk), OUTUL(sk)); CALL(GenerateKeyPair); }
static CK_RV kc_C_WrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), PTR(m), UL(w), UL(k), OUT(o, on)); CALL(WrapKey); }
static CK_RV kc_C_UnwrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE u, CK_BYTE_PTR w, CK_ULONG wn, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(u), IN(w, wn), TMPL(t, tn), OUTUL(k)); CALL(UnwrapKey); }
/* 3.2 key encapsulation (issue 18, ML-KEM). */
static CK_RV kc_C_EncapsulateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR c, CK_ULONG_PTR cn, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), PTR(m), UL(k), TMPL(t, tn), OUT(c, cn), OUTUL(o)); CALL(EncapsulateKey); }
static CK_RV kc_C_DecapsulateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR c, CK_ULONG cn, CK_OBJECT_HANDLE_PTR o) { ARGS(UL(h), PTR(m), UL(k), TMPL(t, tn), IN(c, cn), OUTUL(o)); CALL(DecapsulateKey); }
static CK_RV kc_C_DeriveKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE b, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(b), TMPL(t, n), OUTUL(k)); CALL(DeriveKey); }
static CK_RV kc_C_SeedRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n) { ARGS(UL(h), IN(p, n)); CALL(SeedRandom); }
static CK_RV kc_C_GenerateRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n) { ARGS(UL(h), {.ptr = p, .ul = n}); CALL(GenerateRandom); }
static CK_RV kc_C_GetFunctionStatus(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(GetFunctionStatus); }
static CK_RV kc_C_CancelFunction(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(CancelFunction); }
static CK_RV kc_C_LoginUser(CK_SESSION_HANDLE h, CK_USER_TYPE u, CK_UTF8CHAR_PTR pin, CK_ULONG pn, CK_UTF8CHAR_PTR user, CK_ULONG un) { ARGS(UL(h), UL(u), IN(pin, pn), IN(user, un)); CALL(LoginUser); }
static CK_RV kc_C_SessionCancel(CK_SESSION_HANDLE h, CK_FLAGS f) { ARGS(UL(h), UL(f)); CALL(SessionCancel); }

/* Message-based functions. The per-message parameter crosses in and out
 * (Sources/AgentProtocol/struct_params.c): the IV a generator made and the
 * tag come back into the caller's struct when the module wrote them. */
#define MSG_INIT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k) { ARGS(UL(h), PTR(m), UL(k)); CALL(name); }
#define MSG_FINAL(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(name); }
MSG_INIT(MessageEncryptInit) MSG_FINAL(MessageEncryptFinal) MSG_INIT(MessageDecryptInit) MSG_FINAL(MessageDecryptFinal)
MSG_INIT(MessageSignInit) MSG_FINAL(MessageSignFinal) MSG_INIT(MessageVerifyInit) MSG_FINAL(MessageVerifyFinal)
#define MSG_ONESHOT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR ad, CK_ULONG adn, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), IN(p, pn), IN(ad, adn), IN(i, in), OUT(o, on)); CALL(name); }
#define MSG_BEGIN(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR ad, CK_ULONG adn) { ARGS(UL(h), IN(p, pn), IN(ad, adn)); CALL(name); }
#define MSG_NEXT(name) static CK_RV kc_C_##name(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR i, CK_ULONG in, CK_BYTE_PTR o, CK_ULONG_PTR on, CK_FLAGS f) { ARGS(UL(h), IN(p, pn), IN(i, in), OUT(o, on), UL(f)); CALL(name); }
MSG_ONESHOT(EncryptMessage) MSG_BEGIN(EncryptMessageBegin) MSG_NEXT(EncryptMessageNext)
MSG_ONESHOT(DecryptMessage) MSG_BEGIN(DecryptMessageBegin) MSG_NEXT(DecryptMessageNext)
static CK_RV kc_C_SignMessage(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG_PTR sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), OUT(s, sn)); CALL(SignMessage); }
static CK_RV kc_C_SignMessageBegin(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn) { ARGS(UL(h), IN(p, pn)); CALL(SignMessageBegin); }
static CK_RV kc_C_SignMessageNext(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG_PTR sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), OUT(s, sn)); CALL(SignMessageNext); }
static CK_RV kc_C_VerifyMessage(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), IN(s, sn)); CALL(VerifyMessage); }
static CK_RV kc_C_VerifyMessageBegin(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn) { ARGS(UL(h), IN(p, pn)); CALL(VerifyMessageBegin); }
static CK_RV kc_C_VerifyMessageNext(CK_SESSION_HANDLE h, CK_VOID_PTR p, CK_ULONG pn, CK_BYTE_PTR d, CK_ULONG dn, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), IN(p, pn), IN(d, dn), IN(s, sn)); CALL(VerifyMessageNext); }

/* PKCS #11 3.2 (issue 18; the agent serves them with Sources/AgentProtocol/v32_params.c). The
 * signature crosses at init; the associated data as input bytes. */
static CK_RV kc_C_VerifySignatureInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k, CK_BYTE_PTR s, CK_ULONG sn) { ARGS(UL(h), PTR(m), UL(k), IN(s, sn)); CALL(VerifySignatureInit); }
static CK_RV kc_C_VerifySignature(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn) { ARGS(UL(h), IN(d, dn)); CALL(VerifySignature); }
static CK_RV kc_C_VerifySignatureUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR d, CK_ULONG dn) { ARGS(UL(h), IN(d, dn)); CALL(VerifySignatureUpdate); }
static CK_RV kc_C_VerifySignatureFinal(CK_SESSION_HANDLE h) { ARGS(UL(h)); CALL(VerifySignatureFinal); }
static CK_RV kc_C_GetSessionValidationFlags(CK_SESSION_HANDLE h, CK_SESSION_VALIDATION_FLAGS_TYPE t, CK_FLAGS_PTR f) { ARGS(UL(h), UL(t), OUTUL(f)); CALL(GetSessionValidationFlags); }
static CK_RV kc_C_WrapKeyAuthenticated(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE w, CK_OBJECT_HANDLE k, CK_BYTE_PTR ad, CK_ULONG adn, CK_BYTE_PTR o, CK_ULONG_PTR on) { ARGS(UL(h), PTR(m), UL(w), UL(k), IN(ad, adn), OUT(o, on)); CALL(WrapKeyAuthenticated); }
static CK_RV kc_C_UnwrapKeyAuthenticated(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE u, CK_BYTE_PTR w, CK_ULONG wn, CK_ATTRIBUTE_PTR t, CK_ULONG tn, CK_BYTE_PTR ad, CK_ULONG adn, CK_OBJECT_HANDLE_PTR k) { ARGS(UL(h), PTR(m), UL(u), IN(w, wn), TMPL(t, tn), IN(ad, adn), OUTUL(k)); CALL(UnwrapKeyAuthenticated); }

/* The client tables, selected by function_table.c in agent mode. */
#include "../abi/include/function_lists.h"
#include "../abi/include/shared_tables.h"

static const CK_FUNCTION_LIST kc_functions_2_40 = {
    .version = {2, 40},
    KS_FUNCTIONS_2_40(kc)
};

static const CK_FUNCTION_LIST_3_0 kc_functions_3_0 = {
    .version = {3, 0},
    KS_FUNCTIONS_2_40(kc)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(kc)
};

/* PKCS #11 3.2 (issue 18): C_GetInfo reports 3.2 only through this table; the 3.2 entries not
 * served yet are the shared not-supported ones (functions_3_2.c), which need no round trip. */
static CK_RV kc_C_GetInfo_3_2(CK_INFO_PTR p)
{
    CK_RV rv = kc_C_GetInfo(p);
    if (rv == CKR_OK)
        p->cryptokiVersion = (CK_VERSION){3, 2};
    return rv;
}

static const CK_FUNCTION_LIST_3_2 kc_functions_3_2 = {
    .version = {3, 2},
    KS_FUNCTIONS_2_40_GETINFO(kc, kc_C_GetInfo_3_2)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(kc)
    KS_FUNCTIONS_3_2_EXTRA(kc)
};

const CK_FUNCTION_LIST *kc_function_list_2_40(void) { return &kc_functions_2_40; }
const CK_FUNCTION_LIST_3_0 *kc_function_list_3_0(void) { return &kc_functions_3_0; }
const CK_FUNCTION_LIST_3_2 *kc_function_list_3_2(void) { return &kc_functions_3_2; }

