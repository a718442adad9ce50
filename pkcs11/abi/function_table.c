/*
 * The in-process function tables (the engine, libkeyshare-engine.so: the agent and
 * KEYSHARE_IN_PROCESS=1) and their getters. The exported C_Get* live in the module
 * (pkcs11/client/client_tables.c), which forwards to these in in-process mode.
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

#include "function_lists.h"
#include "shared_tables.h"

static CK_RV ks_C_GetMechanismInfo_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR pInfo)
{
    return ks_filtered_mechanism_info(ks_C_GetMechanismInfo, slotID, type, pInfo);
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
const CK_FUNCTION_LIST_3_0 *ks_function_list_3_0(void) { return &ks_functions_3_0; }

CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
    if (ppFunctionList == NULL)
        return CKR_ARGUMENTS_BAD;
    *ppFunctionList = (CK_FUNCTION_LIST_PTR)&ks_functions_2_40;
    return CKR_OK;
}

CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
{
    return ks_list_interfaces(ks_interfaces_in_process, pInterfacesList, pulCount);
}

CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                       CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags)
{
    return ks_find_interface(ks_interfaces_in_process, pInterfaceName, pVersion, ppInterface, flags);
}

/* What libkeyshare-pkcs11.so asks of the engine in in-process mode (pkcs11/client/engine.c): the
 * three getters over these tables. Exported by the engine's version script; the _v suffix is the
 * ABI, so a module and an engine from different builds fail to link instead of misbehaving. */
static const struct ks_engine_pkcs11 ks_engine = {
    .get_function_list = ks_get_function_list,
    .get_interface_list = ks_get_interface_list,
    .get_interface = ks_get_interface,
};

const struct ks_engine_pkcs11 *keyshare_engine_pkcs11_v1(void) { return &ks_engine; }
