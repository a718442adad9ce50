/*
 * The entries PKCS #11 3.2 adds to the function list (issue 18) that the module does not serve
 * yet. The 3.2 interface is offered first so hosts that speak 3.2 find it, and each entry it
 * cannot serve says so with CKR_FUNCTION_NOT_SUPPORTED, as Kryoptic does for the asynchronous
 * ones: never a NULL entry a host would call. The signature-first verify, the validation flags
 * and authenticated wrapping are implemented (Sources/PKCS11Module/Functions32.swift, the agent
 * client's in agent_client.c), and so is key encapsulation (ML-KEM: Sources/PKCS11Module/
 * Encapsulation.swift); only the asynchronous entries remain here.
 */
#include "keyshare_abi.h"

CK_RV ks32_C_AsyncComplete(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ASYNC_DATA_PTR pResult)
{
    (void)hSession; (void)pFunctionName; (void)pResult;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_AsyncGetID(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG_PTR pulID)
{
    (void)hSession; (void)pFunctionName; (void)pulID;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_AsyncJoin(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG ulID, CK_BYTE_PTR pData,
                       CK_ULONG ulData)
{
    (void)hSession; (void)pFunctionName; (void)ulID; (void)pData; (void)ulData;
    return CKR_FUNCTION_NOT_SUPPORTED;
}
