/*
 * The module's function tables and the three exported getters.
 *
 * The tables are static initialised data so no Swift code runs to build them
 * and no entry can be left NULL. Every entry points at a non-exported function
 * (the ks_C_* implementations are local by the version script), so the tables
 * need no interposable dynamic relocations.
 *
 * Designated initialisers, in the OASIS order of CK_FUNCTION_LIST_3_0, so a
 * misplaced entry is a compile error rather than a wrong call; the static
 * assert below checks the 3.0 list is the 2.40 list plus 24 entries.
 */
#include <string.h>
#include "keyshare_abi.h"

static CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList);
static CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount);
static CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                              CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags);

/* The 2.40 entries, shared by both tables (the 3.0 list starts with them). */
#define KS_FUNCTIONS_2_40 \
    .C_Initialize = ks_C_Initialize, \
    .C_Finalize = ks_C_Finalize, \
    .C_GetInfo = ks_C_GetInfo, \
    .C_GetFunctionList = ks_get_function_list, \
    .C_GetSlotList = ks_C_GetSlotList, \
    .C_GetSlotInfo = ks_C_GetSlotInfo, \
    .C_GetTokenInfo = ks_C_GetTokenInfo, \
    .C_GetMechanismList = ks_C_GetMechanismList, \
    .C_GetMechanismInfo = ks_C_GetMechanismInfo, \
    .C_InitToken = ks_C_InitToken, \
    .C_InitPIN = ks_C_InitPIN, \
    .C_SetPIN = ks_C_SetPIN, \
    .C_OpenSession = ks_C_OpenSession, \
    .C_CloseSession = ks_C_CloseSession, \
    .C_CloseAllSessions = ks_C_CloseAllSessions, \
    .C_GetSessionInfo = ks_C_GetSessionInfo, \
    .C_GetOperationState = ks_C_GetOperationState, \
    .C_SetOperationState = ks_C_SetOperationState, \
    .C_Login = ks_C_Login, \
    .C_Logout = ks_C_Logout, \
    .C_CreateObject = ks_C_CreateObject, \
    .C_CopyObject = ks_C_CopyObject, \
    .C_DestroyObject = ks_C_DestroyObject, \
    .C_GetObjectSize = ks_C_GetObjectSize, \
    .C_GetAttributeValue = ks_C_GetAttributeValue, \
    .C_SetAttributeValue = ks_C_SetAttributeValue, \
    .C_FindObjectsInit = ks_C_FindObjectsInit, \
    .C_FindObjects = ks_C_FindObjects, \
    .C_FindObjectsFinal = ks_C_FindObjectsFinal, \
    .C_EncryptInit = ks_C_EncryptInit, \
    .C_Encrypt = ks_C_Encrypt, \
    .C_EncryptUpdate = ks_C_EncryptUpdate, \
    .C_EncryptFinal = ks_C_EncryptFinal, \
    .C_DecryptInit = ks_C_DecryptInit, \
    .C_Decrypt = ks_C_Decrypt, \
    .C_DecryptUpdate = ks_C_DecryptUpdate, \
    .C_DecryptFinal = ks_C_DecryptFinal, \
    .C_DigestInit = ks_C_DigestInit, \
    .C_Digest = ks_C_Digest, \
    .C_DigestUpdate = ks_C_DigestUpdate, \
    .C_DigestKey = ks_C_DigestKey, \
    .C_DigestFinal = ks_C_DigestFinal, \
    .C_SignInit = ks_C_SignInit, \
    .C_Sign = ks_C_Sign, \
    .C_SignUpdate = ks_C_SignUpdate, \
    .C_SignFinal = ks_C_SignFinal, \
    .C_SignRecoverInit = ks_C_SignRecoverInit, \
    .C_SignRecover = ks_C_SignRecover, \
    .C_VerifyInit = ks_C_VerifyInit, \
    .C_Verify = ks_C_Verify, \
    .C_VerifyUpdate = ks_C_VerifyUpdate, \
    .C_VerifyFinal = ks_C_VerifyFinal, \
    .C_VerifyRecoverInit = ks_C_VerifyRecoverInit, \
    .C_VerifyRecover = ks_C_VerifyRecover, \
    .C_DigestEncryptUpdate = ks_C_DigestEncryptUpdate, \
    .C_DecryptDigestUpdate = ks_C_DecryptDigestUpdate, \
    .C_SignEncryptUpdate = ks_C_SignEncryptUpdate, \
    .C_DecryptVerifyUpdate = ks_C_DecryptVerifyUpdate, \
    .C_GenerateKey = ks_C_GenerateKey, \
    .C_GenerateKeyPair = ks_C_GenerateKeyPair, \
    .C_WrapKey = ks_C_WrapKey, \
    .C_UnwrapKey = ks_C_UnwrapKey, \
    .C_DeriveKey = ks_C_DeriveKey, \
    .C_SeedRandom = ks_C_SeedRandom, \
    .C_GenerateRandom = ks_C_GenerateRandom, \
    .C_GetFunctionStatus = ks_C_GetFunctionStatus, \
    .C_CancelFunction = ks_C_CancelFunction, \
    .C_WaitForSlotEvent = ks_C_WaitForSlotEvent,

static const CK_FUNCTION_LIST ks_functions_2_40 = {
    .version = {2, 40},
    KS_FUNCTIONS_2_40
};

static const CK_FUNCTION_LIST_3_0 ks_functions_3_0 = {
    .version = {3, 0},
    KS_FUNCTIONS_2_40
    .C_GetInterfaceList = ks_get_interface_list,
    .C_GetInterface = ks_get_interface,
    .C_LoginUser = ks_C_LoginUser,
    .C_SessionCancel = ks_C_SessionCancel,
    .C_MessageEncryptInit = ks_C_MessageEncryptInit,
    .C_EncryptMessage = ks_C_EncryptMessage,
    .C_EncryptMessageBegin = ks_C_EncryptMessageBegin,
    .C_EncryptMessageNext = ks_C_EncryptMessageNext,
    .C_MessageEncryptFinal = ks_C_MessageEncryptFinal,
    .C_MessageDecryptInit = ks_C_MessageDecryptInit,
    .C_DecryptMessage = ks_C_DecryptMessage,
    .C_DecryptMessageBegin = ks_C_DecryptMessageBegin,
    .C_DecryptMessageNext = ks_C_DecryptMessageNext,
    .C_MessageDecryptFinal = ks_C_MessageDecryptFinal,
    .C_MessageSignInit = ks_C_MessageSignInit,
    .C_SignMessage = ks_C_SignMessage,
    .C_SignMessageBegin = ks_C_SignMessageBegin,
    .C_SignMessageNext = ks_C_SignMessageNext,
    .C_MessageSignFinal = ks_C_MessageSignFinal,
    .C_MessageVerifyInit = ks_C_MessageVerifyInit,
    .C_VerifyMessage = ks_C_VerifyMessage,
    .C_VerifyMessageBegin = ks_C_VerifyMessageBegin,
    .C_VerifyMessageNext = ks_C_VerifyMessageNext,
    .C_MessageVerifyFinal = ks_C_MessageVerifyFinal,
};

_Static_assert(sizeof(CK_FUNCTION_LIST_3_0) == sizeof(CK_FUNCTION_LIST) + 24 * sizeof(void (*)(void)),
               "CK_FUNCTION_LIST_3_0 must be the 2.40 list plus the 24 functions of 3.0");

static CK_CHAR ks_interface_name[] = "PKCS 11";

/* The 3.0 table first: a caller taking the first entry gets the newest.
 * Not CKF_INTERFACE_FORK_SAFE: after fork the child must call C_Initialize. */
static CK_INTERFACE ks_interfaces[] = {
    { ks_interface_name, (CK_VOID_PTR)&ks_functions_3_0, 0 },
    { ks_interface_name, (CK_VOID_PTR)&ks_functions_2_40, 0 },
};
#define KS_INTERFACE_COUNT (sizeof(ks_interfaces) / sizeof(ks_interfaces[0]))

const CK_FUNCTION_LIST_3_0 *ks_function_list_3_0(void) { return &ks_functions_3_0; }

static CK_RV ks_get_function_list(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
    if (ppFunctionList == NULL)
        return CKR_ARGUMENTS_BAD;
    *ppFunctionList = (CK_FUNCTION_LIST_PTR)&ks_functions_2_40;
    return CKR_OK;
}

static CK_RV ks_get_interface_list(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount)
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
    memcpy(pInterfacesList, ks_interfaces, sizeof(ks_interfaces));
    *pulCount = KS_INTERFACE_COUNT;
    return CKR_OK;
}

static CK_RV ks_get_interface(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
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
