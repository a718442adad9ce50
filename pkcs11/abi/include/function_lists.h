/*
 * The function tables' contents, shared by the in-process tables
 * (function_table.c, prefix ks) and the agent client's (client_calls.c,
 * prefix kc). Designated initialisers in the OASIS order of
 * CK_FUNCTION_LIST_3_0, so a misplaced entry is a compile error.
 */
#ifndef KEYSHARE_FUNCTION_LISTS_H
#define KEYSHARE_FUNCTION_LISTS_H

/* The 2.40 entries, shared by both tables (the 3.0 list starts with them). */
#define KS_FUNCTIONS_2_40(P) KS_FUNCTIONS_2_40_GETINFO(P, P##_C_GetInfo)
/* The same with another C_GetInfo: the 3.2 tables' reports cryptokiVersion 3.2 (issue 18). */
#define KS_FUNCTIONS_2_40_GETINFO(P, GETINFO) KS_FUNCTIONS_2_40_WITH(P, GETINFO, P##_C_GetMechanismList, P##_C_GetMechanismInfo)
/* And another C_GetMechanismList and C_GetMechanismInfo too: the 3.0 and 2.40 tables hosts get
 * hide the 3.2-only mechanism types and flags (function_table.c). */
#define KS_FUNCTIONS_2_40_WITH(P, GETINFO, MECHLIST, MECHINFO) \
    .C_Initialize = P##_C_Initialize, \
    .C_Finalize = P##_C_Finalize, \
    .C_GetInfo = GETINFO, \
    .C_GetFunctionList = ks_get_function_list, \
    .C_GetSlotList = P##_C_GetSlotList, \
    .C_GetSlotInfo = P##_C_GetSlotInfo, \
    .C_GetTokenInfo = P##_C_GetTokenInfo, \
    .C_GetMechanismList = MECHLIST, \
    .C_GetMechanismInfo = MECHINFO, \
    .C_InitToken = P##_C_InitToken, \
    .C_InitPIN = P##_C_InitPIN, \
    .C_SetPIN = P##_C_SetPIN, \
    .C_OpenSession = P##_C_OpenSession, \
    .C_CloseSession = P##_C_CloseSession, \
    .C_CloseAllSessions = P##_C_CloseAllSessions, \
    .C_GetSessionInfo = P##_C_GetSessionInfo, \
    .C_GetOperationState = P##_C_GetOperationState, \
    .C_SetOperationState = P##_C_SetOperationState, \
    .C_Login = P##_C_Login, \
    .C_Logout = P##_C_Logout, \
    .C_CreateObject = P##_C_CreateObject, \
    .C_CopyObject = P##_C_CopyObject, \
    .C_DestroyObject = P##_C_DestroyObject, \
    .C_GetObjectSize = P##_C_GetObjectSize, \
    .C_GetAttributeValue = P##_C_GetAttributeValue, \
    .C_SetAttributeValue = P##_C_SetAttributeValue, \
    .C_FindObjectsInit = P##_C_FindObjectsInit, \
    .C_FindObjects = P##_C_FindObjects, \
    .C_FindObjectsFinal = P##_C_FindObjectsFinal, \
    .C_EncryptInit = P##_C_EncryptInit, \
    .C_Encrypt = P##_C_Encrypt, \
    .C_EncryptUpdate = P##_C_EncryptUpdate, \
    .C_EncryptFinal = P##_C_EncryptFinal, \
    .C_DecryptInit = P##_C_DecryptInit, \
    .C_Decrypt = P##_C_Decrypt, \
    .C_DecryptUpdate = P##_C_DecryptUpdate, \
    .C_DecryptFinal = P##_C_DecryptFinal, \
    .C_DigestInit = P##_C_DigestInit, \
    .C_Digest = P##_C_Digest, \
    .C_DigestUpdate = P##_C_DigestUpdate, \
    .C_DigestKey = P##_C_DigestKey, \
    .C_DigestFinal = P##_C_DigestFinal, \
    .C_SignInit = P##_C_SignInit, \
    .C_Sign = P##_C_Sign, \
    .C_SignUpdate = P##_C_SignUpdate, \
    .C_SignFinal = P##_C_SignFinal, \
    .C_SignRecoverInit = P##_C_SignRecoverInit, \
    .C_SignRecover = P##_C_SignRecover, \
    .C_VerifyInit = P##_C_VerifyInit, \
    .C_Verify = P##_C_Verify, \
    .C_VerifyUpdate = P##_C_VerifyUpdate, \
    .C_VerifyFinal = P##_C_VerifyFinal, \
    .C_VerifyRecoverInit = P##_C_VerifyRecoverInit, \
    .C_VerifyRecover = P##_C_VerifyRecover, \
    .C_DigestEncryptUpdate = P##_C_DigestEncryptUpdate, \
    .C_DecryptDigestUpdate = P##_C_DecryptDigestUpdate, \
    .C_SignEncryptUpdate = P##_C_SignEncryptUpdate, \
    .C_DecryptVerifyUpdate = P##_C_DecryptVerifyUpdate, \
    .C_GenerateKey = P##_C_GenerateKey, \
    .C_GenerateKeyPair = P##_C_GenerateKeyPair, \
    .C_WrapKey = P##_C_WrapKey, \
    .C_UnwrapKey = P##_C_UnwrapKey, \
    .C_DeriveKey = P##_C_DeriveKey, \
    .C_SeedRandom = P##_C_SeedRandom, \
    .C_GenerateRandom = P##_C_GenerateRandom, \
    .C_GetFunctionStatus = P##_C_GetFunctionStatus, \
    .C_CancelFunction = P##_C_CancelFunction, \
    .C_WaitForSlotEvent = P##_C_WaitForSlotEvent,

/* The 24 entries 3.0 adds after C_GetInterfaceList and C_GetInterface. */
#define KS_FUNCTIONS_3_0_EXTRA(P) \
    .C_LoginUser = P##_C_LoginUser, \
    .C_SessionCancel = P##_C_SessionCancel, \
    .C_MessageEncryptInit = P##_C_MessageEncryptInit, \
    .C_EncryptMessage = P##_C_EncryptMessage, \
    .C_EncryptMessageBegin = P##_C_EncryptMessageBegin, \
    .C_EncryptMessageNext = P##_C_EncryptMessageNext, \
    .C_MessageEncryptFinal = P##_C_MessageEncryptFinal, \
    .C_MessageDecryptInit = P##_C_MessageDecryptInit, \
    .C_DecryptMessage = P##_C_DecryptMessage, \
    .C_DecryptMessageBegin = P##_C_DecryptMessageBegin, \
    .C_DecryptMessageNext = P##_C_DecryptMessageNext, \
    .C_MessageDecryptFinal = P##_C_MessageDecryptFinal, \
    .C_MessageSignInit = P##_C_MessageSignInit, \
    .C_SignMessage = P##_C_SignMessage, \
    .C_SignMessageBegin = P##_C_SignMessageBegin, \
    .C_SignMessageNext = P##_C_SignMessageNext, \
    .C_MessageSignFinal = P##_C_MessageSignFinal, \
    .C_MessageVerifyInit = P##_C_MessageVerifyInit, \
    .C_VerifyMessage = P##_C_VerifyMessage, \
    .C_VerifyMessageBegin = P##_C_VerifyMessageBegin, \
    .C_VerifyMessageNext = P##_C_VerifyMessageNext, \
    .C_MessageVerifyFinal = P##_C_MessageVerifyFinal,

/* The 12 entries 3.2 adds after the 3.0 list (pkcs11_3_2.h), in pkcs11f.h order. P is the
 * table's prefix (ks in-process, kc the agent client) for the entries implemented; the others
 * are the shared CKR_FUNCTION_NOT_SUPPORTED ones of functions_3_2.c (ks32). */
#define KS_FUNCTIONS_3_2_EXTRA(P) \
    .C_EncapsulateKey = P##_C_EncapsulateKey, \
    .C_DecapsulateKey = P##_C_DecapsulateKey, \
    .C_VerifySignatureInit = P##_C_VerifySignatureInit, \
    .C_VerifySignature = P##_C_VerifySignature, \
    .C_VerifySignatureUpdate = P##_C_VerifySignatureUpdate, \
    .C_VerifySignatureFinal = P##_C_VerifySignatureFinal, \
    .C_GetSessionValidationFlags = P##_C_GetSessionValidationFlags, \
    .C_AsyncComplete = ks32_C_AsyncComplete, \
    .C_AsyncGetID = ks32_C_AsyncGetID, \
    .C_AsyncJoin = ks32_C_AsyncJoin, \
    .C_WrapKeyAuthenticated = P##_C_WrapKeyAuthenticated, \
    .C_UnwrapKeyAuthenticated = P##_C_UnwrapKeyAuthenticated,

#endif
