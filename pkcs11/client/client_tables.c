/*
 * libkeyshare-pkcs11.so's exported getters and the tables they hand out.
 *
 * Agent mode (the default, docs/agent.md): the agent client's tables (client_calls.c), plain C,
 * so a host maps no Swift runtime, no OpenSSL and no store code. In-process mode
 * (KEYSHARE_IN_PROCESS=1): the engine's own tables, from libkeyshare-engine.so, loaded on the
 * first getter call (engine.c). The choice is made once, when the library is loaded.
 *
 * The tables are static initialised data or copies made by a constructor before any caller can
 * ask, and every entry points at a non-exported function, so no entry is ever NULL and no
 * dynamic relocation is interposable. Only the three C_Get* symbols are exported (version script).
 */
#include <stdlib.h>
#include <string.h>
#include "../abi/include/keyshare_abi.h"
#include "../abi/include/shared_tables.h"

#include "keyshare_client.h"

CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList);
CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount);
CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                       CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags);

static CK_CHAR ks_interface_name[] = "PKCS 11";

/* The newest table first (3.2, 3.0, 2.40), as in process: the 3.0 and 2.40 ones are copies
 * whose C_GetMechanismInfo and C_GetMechanismList leave out what only 3.2 defines. */
static CK_INTERFACE ks_interfaces_agent[KS_INTERFACE_COUNT];
static CK_FUNCTION_LIST ks_agent_2_40;
static CK_FUNCTION_LIST_3_0 ks_agent_3_0;

static CK_RV ks_agent_C_GetMechanismList_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE_PTR pMechanismList, CK_ULONG_PTR pulCount)
{
    return ks_filtered_mechanism_list(kc_function_list_3_2()->C_GetMechanismList, slotID, pMechanismList, pulCount);
}

static CK_RV ks_agent_C_GetMechanismInfo_3_0(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR pInfo)
{
    return ks_filtered_mechanism_info(kc_function_list_3_2()->C_GetMechanismInfo, slotID, type, pInfo);
}

/* Builds the agent tables once, when the library is loaded, before any caller can ask. */
__attribute__((constructor)) static void ks_choose_tables(void) {
    if (!ks_agent_mode()) return;
    ks_agent_2_40 = *kc_function_list_2_40();
    ks_agent_2_40.C_GetMechanismInfo = ks_agent_C_GetMechanismInfo_3_0;
    ks_agent_2_40.C_GetMechanismList = ks_agent_C_GetMechanismList_3_0;
    ks_agent_3_0 = *kc_function_list_3_0();
    ks_agent_3_0.C_GetMechanismInfo = ks_agent_C_GetMechanismInfo_3_0;
    ks_agent_3_0.C_GetMechanismList = ks_agent_C_GetMechanismList_3_0;
    ks_interfaces_agent[0] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)kc_function_list_3_2(), 0 };
    ks_interfaces_agent[1] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)&ks_agent_3_0, 0 };
    ks_interfaces_agent[2] = (CK_INTERFACE){ ks_interface_name, (CK_VOID_PTR)&ks_agent_2_40, 0 };
}

/* In-process mode with no engine to load: CKR_GENERAL_ERROR (engine.c logged why). */
CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
    if (!ks_agent_mode()) {
        const struct ks_engine_pkcs11 *e = ks_engine();
        return e ? e->get_function_list(ppFunctionList) : CKR_GENERAL_ERROR;
    }
    if (ppFunctionList == NULL)
        return CKR_ARGUMENTS_BAD;
    *ppFunctionList = &ks_agent_2_40;
    return CKR_OK;
}

CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
{
    if (!ks_agent_mode()) {
        const struct ks_engine_pkcs11 *e = ks_engine();
        return e ? e->get_interface_list(pInterfacesList, pulCount) : CKR_GENERAL_ERROR;
    }
    return ks_list_interfaces(ks_interfaces_agent, pInterfacesList, pulCount);
}

CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                       CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags)
{
    if (!ks_agent_mode()) {
        const struct ks_engine_pkcs11 *e = ks_engine();
        return e ? e->get_interface(pInterfaceName, pVersion, ppInterface, flags) : CKR_GENERAL_ERROR;
    }
    return ks_find_interface(ks_interfaces_agent, pInterfaceName, pVersion, ppInterface, flags);
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
