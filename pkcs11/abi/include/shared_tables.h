/*
 * What the engine's in-process tables (function_table.c) and the module's agent-client tables
 * (pkcs11/client/client_tables.c) share. Static, so each image has its own copy and neither
 * exports it.
 */
#ifndef KEYSHARE_SHARED_TABLES_H
#define KEYSHARE_SHARED_TABLES_H

#include <stdlib.h>
#include <string.h>
#include "keyshare_abi.h"

/* The entries PKCS #11 3.2 adds to the function list (issue 18) that the module does not serve
 * yet. The 3.2 interface is offered first so hosts that speak 3.2 find it, and each entry it
 * cannot serve says so with CKR_FUNCTION_NOT_SUPPORTED, as Kryoptic does for the asynchronous
 * ones: never a NULL entry a host would call. The signature-first verify, the validation flags
 * and authenticated wrapping are implemented (Sources/PKCS11Module/Functions32.swift, the agent
 * client's in client_calls.c), and so is key encapsulation (ML-KEM: Sources/PKCS11Module/
 * Encapsulation.swift); only the asynchronous entries remain here.
 */
static inline CK_RV ks32_C_AsyncComplete(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ASYNC_DATA_PTR pResult)
{
    (void)hSession; (void)pFunctionName; (void)pResult;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

static inline CK_RV ks32_C_AsyncGetID(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG_PTR pulID)
{
    (void)hSession; (void)pFunctionName; (void)pulID;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

static inline CK_RV ks32_C_AsyncJoin(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG ulID, CK_BYTE_PTR pData,
                       CK_ULONG ulData)
{
    (void)hSession; (void)pFunctionName; (void)ulID; (void)pData; (void)ulData;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

/* The CK_MECHANISM_INFO flags PKCS #11 3.2 added (its pkcs11t.h against 3.0's: CKF_ENCAPSULATE,
 * CKF_DECAPSULATE; 3.0 added none to 2.40's that a 3.0 host would not know). A host that asked for
 * the 3.0 or 2.40 interface sees what it saw before 3.2 (issue 18), so the C_GetMechanismInfo of
 * those tables clears them; the 3.2 table keeps them. Kryoptic serves one C_GetMechanismInfo to
 * every table (docs/pkcs11-conformance.md says why keyshare differs). */
#define KS_MECHANISM_FLAGS_3_2_ONLY ((CK_FLAGS)(CKF_ENCAPSULATE | CKF_DECAPSULATE))

/* The mechanism types PKCS #11 3.2 defined (pkcs11_pq.h, KS_CASES_MECHANISMS_3_2): ML-KEM, ML-DSA, HashML-DSA, SLH-DSA and
 * HashSLH-DSA. The 3.0 and 2.40 tables do not list them: a host that asked for those interfaces
 * cannot know their numbers or their 3.2 parameter structures, and Debian 12's PyKCS11 1.5.12
 * raises KeyError in getMechanismList() on a standard number it does not know (its upstream issue
 * 134), which this module's post-quantum mechanisms made every PyKCS11 user meet. They stay usable
 * by number through every table (C_GetMechanismInfo answers, C_SignInit etc. accept them), so a
 * 3.0 binding that knows the numbers, as 33-pq.sh's PyKCS11 step does, still reaches them.
 * Kryoptic lists one set through every table (docs/pkcs11-conformance.md says why keyshare differs). */
static inline int ks_mechanism_is_3_2_only(CK_MECHANISM_TYPE t)
{
    switch (t) {
    KS_CASES_MECHANISMS_3_2
        return 1;
    default:
        return 0;
    }
}

/* C_GetMechanismList of the 3.0 and 2.40 tables: `full` (the 3.2 one) less the 3.2-only types,
 * with the function's two-call contract (NULL list: the count; too small: CKR_BUFFER_TOO_SMALL
 * and the count). The full list is read into a buffer of its own, so the caller's is written
 * only with the answer. */
static inline CK_RV ks_filtered_mechanism_list(CK_C_GetMechanismList full, CK_SLOT_ID slotID,
                                        CK_MECHANISM_TYPE_PTR pMechanismList, CK_ULONG_PTR pulCount)
{
    if (pulCount == NULL)
        return full(slotID, pMechanismList, pulCount);  /* its own argument check answers */
    CK_MECHANISM_TYPE stack[512], *all = stack;
    CK_ULONG n = 0;
    CK_RV rv = full(slotID, NULL, &n);
    if (rv != CKR_OK)
        return rv;
    for (int tries = 0; tries < 3; tries++) {
        if (n > sizeof stack / sizeof stack[0]) {
            if (all != stack) free(all);
            all = malloc(n * sizeof *all);
            if (all == NULL) return CKR_HOST_MEMORY;
        }
        CK_ULONG got = n;
        rv = full(slotID, all, &got);
        if (rv == CKR_BUFFER_TOO_SMALL) { n = got; continue; }  /* the list grew (a token arrived) */
        n = got;
        break;
    }
    if (rv != CKR_OK) {
        if (all != stack) free(all);
        return rv;
    }
    CK_ULONG kept = 0;
    for (CK_ULONG i = 0; i < n; i++)
        if (!ks_mechanism_is_3_2_only(all[i]))
            all[kept++] = all[i];
    if (pMechanismList == NULL) {
        rv = CKR_OK;
    } else if (*pulCount < kept) {
        rv = CKR_BUFFER_TOO_SMALL;
    } else {
        memcpy(pMechanismList, all, kept * sizeof *all);
        rv = CKR_OK;
    }
    *pulCount = kept;
    if (all != stack) free(all);
    return rv;
}

/* C_GetMechanismInfo of the 3.0 and 2.40 tables: `full`'s answer (the 3.2 one) without the
 * flags only 3.2 defines. */
static inline CK_RV ks_filtered_mechanism_info(CK_C_GetMechanismInfo full, CK_SLOT_ID slotID, CK_MECHANISM_TYPE type,
                                               CK_MECHANISM_INFO_PTR pInfo)
{
    CK_RV rv = full(slotID, type, pInfo);
    if (rv == CKR_OK)
        pInfo->flags &= ~KS_MECHANISM_FLAGS_3_2_ONLY;
    return rv;
}

/* C_GetInterfaceList and C_GetInterface over a table of KS_INTERFACE_COUNT interfaces (the
 * newest first), with the functions' two-call and argument rules. */
#define KS_INTERFACE_COUNT 3

static inline CK_RV ks_list_interfaces(const CK_INTERFACE *all, CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
{
    if (pulCount == NULL)
        return CKR_ARGUMENTS_BAD;
    if (pInterfacesList == NULL) {
        *pulCount = KS_INTERFACE_COUNT;
        return CKR_OK;
    }
    if (*pulCount < KS_INTERFACE_COUNT) {
        *pulCount = KS_INTERFACE_COUNT;
        return CKR_BUFFER_TOO_SMALL;
    }
    memcpy(pInterfacesList, all, KS_INTERFACE_COUNT * sizeof(CK_INTERFACE));
    *pulCount = KS_INTERFACE_COUNT;
    return CKR_OK;
}

static inline CK_RV ks_find_interface(CK_INTERFACE *all, CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                               CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags)
{
    if (ppInterface == NULL)
        return CKR_ARGUMENTS_BAD;
    if (pInterfaceName != NULL && strcmp((const char *)pInterfaceName, "PKCS 11") != 0)
        return CKR_ARGUMENTS_BAD;
    for (size_t i = 0; i < KS_INTERFACE_COUNT; i++) {
        const CK_VERSION *v = (const CK_VERSION *)all[i].pFunctionList;
        if (pVersion != NULL && (pVersion->major != v->major || pVersion->minor != v->minor))
            continue;
        if ((all[i].flags & flags) != flags)
            continue;
        *ppInterface = &all[i];
        return CKR_OK;
    }
    return CKR_ARGUMENTS_BAD;
}

#endif
