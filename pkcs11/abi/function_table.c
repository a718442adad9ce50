/*
 * The module's function tables and the three exported getters.
 *
 * The tables are static initialised data so no Swift code runs to build them
 * and no entry can be left NULL. Every entry points at a non-exported function
 * (the ks_C_* implementations are local by the version script), so the tables
 * need no interposable dynamic relocations.
 *
 * Designated initialisers, in the OASIS order of CK_FUNCTION_LIST_3_0/_3_2, so a
 * misplaced entry is a compile error rather than a wrong call; the static
 * asserts below check the 3.0 list is the 2.40 list plus 24 entries, and 3.2 is 3.0 plus 12.
 */
#include <stdlib.h>
#include <string.h>
#include "keyshare_abi.h"

CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList);
CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount);
CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                              CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags);

#include "function_lists.h"

/* The CK_MECHANISM_INFO flags PKCS #11 3.2 added (its pkcs11t.h against 3.0's: CKF_ENCAPSULATE,
 * CKF_DECAPSULATE; 3.0 added none to 2.40's that a 3.0 host would not know). A host that asked for
 * the 3.0 or 2.40 interface sees what it saw before 3.2 (issue 18), so the C_GetMechanismInfo of
 * those tables clears them; the 3.2 table keeps them. Kryoptic serves one C_GetMechanismInfo to
 * every table (docs/pkcs11-conformance.md says why keyshare differs). */
#define KS_MECHANISM_FLAGS_3_2_ONLY ((CK_FLAGS)(CKF_ENCAPSULATE | CKF_DECAPSULATE))

static CK_RV ks_C_GetMechanismInfo_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR pInfo)
{
    CK_RV rv = ks_C_GetMechanismInfo(slotID, type, pInfo);
    if (rv == CKR_OK)
        pInfo->flags &= ~KS_MECHANISM_FLAGS_3_2_ONLY;
    return rv;
}

/* The mechanism types PKCS #11 3.2 defined (pkcs11_pq.h, KS_CASES_MECHANISMS_3_2): ML-KEM, ML-DSA, HashML-DSA, SLH-DSA and
 * HashSLH-DSA. The 3.0 and 2.40 tables do not list them: a host that asked for those interfaces
 * cannot know their numbers or their 3.2 parameter structures, and Debian 12's PyKCS11 1.5.12
 * raises KeyError in getMechanismList() on a standard number it does not know (its upstream issue
 * 134), which this module's post-quantum mechanisms made every PyKCS11 user meet. They stay usable
 * by number through every table (C_GetMechanismInfo answers, C_SignInit etc. accept them), so a
 * 3.0 binding that knows the numbers, as 33-pq.sh's PyKCS11 step does, still reaches them.
 * Kryoptic lists one set through every table (docs/pkcs11-conformance.md says why keyshare differs). */
static int ks_mechanism_is_3_2_only(CK_MECHANISM_TYPE t)
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
static CK_RV ks_filtered_mechanism_list(CK_C_GetMechanismList full, CK_SLOT_ID slotID,
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

static CK_RV ks_C_GetMechanismList_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE_PTR pMechanismList, CK_ULONG_PTR pulCount)
{
    return ks_filtered_mechanism_list(ks_C_GetMechanismList, slotID, pMechanismList, pulCount);
}

static const CK_FUNCTION_LIST ks_functions_2_40 = {
    .version = {2, 40},
    KS_FUNCTIONS_2_40_WITH(ks, ks_C_GetInfo, ks_C_GetMechanismList_3_0, ks_C_GetMechanismInfo_3_0)
};

/* The 3.0 table hosts get (C_GetInterface / C_GetInterfaceList). */
static const CK_FUNCTION_LIST_3_0 ks_functions_3_0_host = {
    .version = {3, 0},
    KS_FUNCTIONS_2_40_WITH(ks, ks_C_GetInfo, ks_C_GetMechanismList_3_0, ks_C_GetMechanismInfo_3_0)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(ks)
};

/* The agent's own table (ks_function_list_3_0, Sources/KeyshareAgent): it serves every client
 * table, the 3.2 one included, so it keeps the whole flags; the client's tables clear them. */
static const CK_FUNCTION_LIST_3_0 ks_functions_3_0 = {
    .version = {3, 0},
    KS_FUNCTIONS_2_40(ks)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(ks)
};

_Static_assert(sizeof(CK_FUNCTION_LIST_3_0) == sizeof(CK_FUNCTION_LIST) + 24 * sizeof(void (*)(void)),
               "CK_FUNCTION_LIST_3_0 must be the 2.40 list plus the 24 functions of 3.0");

/* PKCS #11 3.2 (issue 18): the 3.0 list plus twelve entries. Only this table's C_GetInfo reports
 * cryptokiVersion 3.2; hosts that ask for 3.0 or 2.40 see what they saw before. */
static CK_RV ks_C_GetInfo_3_2(CK_INFO_PTR pInfo)
{
    CK_RV rv = ks_C_GetInfo(pInfo);
    if (rv == CKR_OK)
        pInfo->cryptokiVersion = (CK_VERSION){3, 2};
    return rv;
}

static const CK_FUNCTION_LIST_3_2 ks_functions_3_2 = {
    .version = {3, 2},
    KS_FUNCTIONS_2_40_GETINFO(ks, ks_C_GetInfo_3_2)
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    KS_FUNCTIONS_3_0_EXTRA(ks)
    KS_FUNCTIONS_3_2_EXTRA(ks)
};

_Static_assert(sizeof(CK_FUNCTION_LIST_3_2) == sizeof(CK_FUNCTION_LIST_3_0) + 12 * sizeof(void (*)(void)),
               "CK_FUNCTION_LIST_3_2 must be the 3.0 list plus the 12 functions of 3.2");

static CK_CHAR ks_interface_name[] = "PKCS 11";

/* The newest table first (3.2, 3.0, 2.40): a caller taking the first entry gets the newest, as
 * in Kryoptic. Not CKF_INTERFACE_FORK_SAFE: after fork the child must call C_Initialize. */
static CK_INTERFACE ks_interfaces_in_process[] = {
    { ks_interface_name, (CK_VOID_PTR)&ks_functions_3_2, 0 },
    { ks_interface_name, (CK_VOID_PTR)&ks_functions_3_0_host, 0 },
    { ks_interface_name, (CK_VOID_PTR)&ks_functions_2_40, 0 },
};
/* Agent mode (docs/agent.md): the same shape over the client's tables; the 3.0 and 2.40 ones are
 * copies whose C_GetMechanismInfo clears the 3.2-only flags, as in process. */
static CK_INTERFACE ks_interfaces_agent[3];
static CK_INTERFACE *ks_interfaces = ks_interfaces_in_process;
static CK_FUNCTION_LIST ks_agent_2_40;
static CK_FUNCTION_LIST_3_0 ks_agent_3_0;
static CK_C_GetMechanismInfo ks_agent_mechanism_info;
static CK_C_GetMechanismList ks_agent_mechanism_list;

static CK_RV ks_agent_C_GetMechanismList_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE_PTR pMechanismList, CK_ULONG_PTR pulCount)
{
    return ks_filtered_mechanism_list(ks_agent_mechanism_list, slotID, pMechanismList, pulCount);
}

static CK_RV ks_agent_C_GetMechanismInfo_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR pInfo)
{
    CK_RV rv = ks_agent_mechanism_info(slotID, type, pInfo);
    if (rv == CKR_OK)
        pInfo->flags &= ~KS_MECHANISM_FLAGS_3_2_ONLY;
    return rv;
}

/* Chooses the tables once, when the library is loaded, before any caller
 * can ask for them. */
__attribute__((constructor)) static void ks_choose_tables(void) {
    if (!ks_agent_mode()) return;
    ks_agent_mechanism_info = kc_function_list_3_2()->C_GetMechanismInfo;
    ks_agent_mechanism_list = kc_function_list_3_2()->C_GetMechanismList;
    ks_agent_2_40 = *kc_function_list_2_40();
    ks_agent_2_40.C_GetMechanismInfo = ks_agent_C_GetMechanismInfo_3_0;
    ks_agent_2_40.C_GetMechanismList = ks_agent_C_GetMechanismList_3_0;
    ks_agent_3_0 = *kc_function_list_3_0();
    ks_agent_3_0.C_GetMechanismInfo = ks_agent_C_GetMechanismInfo_3_0;
    ks_agent_3_0.C_GetMechanismList = ks_agent_C_GetMechanismList_3_0;
    ks_interfaces_agent[0] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)kc_function_list_3_2(), 0 };
    ks_interfaces_agent[1] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)&ks_agent_3_0, 0 };
    ks_interfaces_agent[2] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)&ks_agent_2_40, 0 };
    ks_interfaces = ks_interfaces_agent;
}
#define KS_INTERFACE_COUNT 3

const CK_FUNCTION_LIST_3_0 *ks_function_list_3_0(void) { return &ks_functions_3_0; }

CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
    if (ppFunctionList == NULL)
        return CKR_ARGUMENTS_BAD;
    *ppFunctionList = (CK_FUNCTION_LIST_PTR)(ks_interfaces == ks_interfaces_agent ? &ks_agent_2_40
                                                                                  : &ks_functions_2_40);
    return CKR_OK;
}

CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
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
    memcpy(pInterfacesList, ks_interfaces, KS_INTERFACE_COUNT * sizeof(CK_INTERFACE));
    *pulCount = KS_INTERFACE_COUNT;
    return CKR_OK;
}

CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                              CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags)
{
    if (ppInterface == NULL)
        return CKR_ARGUMENTS_BAD;
    if (pInterfaceName != NULL && strcmp((const char *)pInterfaceName, (const char *)ks_interface_name) != 0)
        return CKR_ARGUMENTS_BAD;
    for (size_t i = 0; i < KS_INTERFACE_COUNT; i++) {
        const CK_VERSION *v = (const CK_VERSION *)ks_interfaces[i].pFunctionList;
        if (pVersion != NULL && (pVersion->major != v->major || pVersion->minor != v->minor))
            continue;
        if ((ks_interfaces[i].flags & flags) != flags)
            continue;
        *ppInterface = &ks_interfaces[i];
        return CKR_OK;
    }
    return CKR_ARGUMENTS_BAD;
}

/* The exported symbols: thin forwards so the tables never point at them. */
CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
    return ks_get_function_list(ppFunctionList);
}

CK_RV C_GetInterfaceList(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
{
    return ks_get_interface_list(pInterfacesList, pulCount);
}

CK_RV C_GetInterface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                     CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags)
{
    return ks_get_interface(pInterfaceName, pVersion, ppInterface, flags);
}
