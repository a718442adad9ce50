/*
 * PKCS #11 3.2 declarations keyshare needs that neither p11-kit 0.24's pkcs11.h
 * nor pkcs11_shim.h (3.0) has: CK_FUNCTION_LIST_3_2 and the types of its twelve new entries.
 *
 * Copied from the OASIS PKCS #11 TC headers, version 3.2 (oasis-tcs/pkcs11,
 * published/3-02/pkcs11f.h for the function prototypes and their order; working/headers/
 * pkcs11t.h for CK_ASYNC_DATA and CK_SESSION_VALIDATION_FLAGS_TYPE). Copyright OASIS Open;
 * the OASIS IPR policy permits copying the headers to implement the standard. Only the
 * definitions used here are copied; the struct layout is the 3.0 list followed by the 3.2
 * entries in pkcs11f.h order (a static assert in function_table.c checks the size).
 */
#ifndef KEYSHARE_PKCS11_3_2_H
#define KEYSHARE_PKCS11_3_2_H

#include "../../types/pkcs11_shim.h"
/* The 3.2 post-quantum constants and CK_(HASH_)SIGN_ADDITIONAL_CONTEXT live in pkcs11_pq.h (which
 * pkcs11_shim.h includes), so the Swift layers and the agent protocol see them too. */
#include "../../types/pkcs11_pq.h"

#ifndef CK_PKCS11_3_2_DEFINED
#define CK_PKCS11_3_2_DEFINED 1

typedef struct CK_ASYNC_DATA {
    CK_ULONG ulVersion;
    CK_BYTE_PTR pValue;
    CK_ULONG ulValue;
    CK_OBJECT_HANDLE hObject;
    CK_OBJECT_HANDLE hAdditionalObject;
} CK_ASYNC_DATA;
typedef CK_ASYNC_DATA *CK_ASYNC_DATA_PTR;

typedef CK_ULONG CK_SESSION_VALIDATION_FLAGS_TYPE;
/* p11-kit's 2.40 header has no CK_FLAGS_PTR. */
typedef CK_FLAGS *CK_FLAGS_PTR;

typedef CK_RV (*CK_C_EncapsulateKey)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                     CK_OBJECT_HANDLE hPublicKey, CK_ATTRIBUTE_PTR pTemplate,
                                     CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                                     CK_ULONG_PTR pulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey);
typedef CK_RV (*CK_C_DecapsulateKey)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                     CK_OBJECT_HANDLE hPrivateKey, CK_ATTRIBUTE_PTR pTemplate,
                                     CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                                     CK_ULONG ulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey);
typedef CK_RV (*CK_C_VerifySignatureInit)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                          CK_OBJECT_HANDLE hKey, CK_BYTE_PTR pSignature,
                                          CK_ULONG ulSignatureLen);
typedef CK_RV (*CK_C_VerifySignature)(CK_SESSION_HANDLE hSession, CK_BYTE_PTR pData, CK_ULONG ulDataLen);
typedef CK_RV (*CK_C_VerifySignatureUpdate)(CK_SESSION_HANDLE hSession, CK_BYTE_PTR pPart, CK_ULONG ulPartLen);
typedef CK_RV (*CK_C_VerifySignatureFinal)(CK_SESSION_HANDLE hSession);
typedef CK_RV (*CK_C_GetSessionValidationFlags)(CK_SESSION_HANDLE hSession,
                                                CK_SESSION_VALIDATION_FLAGS_TYPE type, CK_FLAGS_PTR pFlags);
typedef CK_RV (*CK_C_AsyncComplete)(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName,
                                    CK_ASYNC_DATA_PTR pResult);
typedef CK_RV (*CK_C_AsyncGetID)(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG_PTR pulID);
typedef CK_RV (*CK_C_AsyncJoin)(CK_SESSION_HANDLE hSession, CK_UTF8CHAR_PTR pFunctionName, CK_ULONG ulID,
                                CK_BYTE_PTR pData, CK_ULONG ulData);
typedef CK_RV (*CK_C_WrapKeyAuthenticated)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                           CK_OBJECT_HANDLE hWrappingKey, CK_OBJECT_HANDLE hKey,
                                           CK_BYTE_PTR pAssociatedData, CK_ULONG ulAssociatedDataLen,
                                           CK_BYTE_PTR pWrappedKey, CK_ULONG_PTR pulWrappedKeyLen);
typedef CK_RV (*CK_C_UnwrapKeyAuthenticated)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                             CK_OBJECT_HANDLE hUnwrappingKey, CK_BYTE_PTR pWrappedKey,
                                             CK_ULONG ulWrappedKeyLen, CK_ATTRIBUTE_PTR pTemplate,
                                             CK_ULONG ulAttributeCount, CK_BYTE_PTR pAssociatedData,
                                             CK_ULONG ulAssociatedDataLen, CK_OBJECT_HANDLE_PTR phKey);

/* The 3.0 list, then the twelve 3.2 entries in pkcs11f.h order. */
typedef struct CK_FUNCTION_LIST_3_2 {
    CK_VERSION version;
    CK_C_Initialize C_Initialize;
    CK_C_Finalize C_Finalize;
    CK_C_GetInfo C_GetInfo;
    CK_C_GetFunctionList C_GetFunctionList;
    CK_C_GetSlotList C_GetSlotList;
    CK_C_GetSlotInfo C_GetSlotInfo;
    CK_C_GetTokenInfo C_GetTokenInfo;
    CK_C_GetMechanismList C_GetMechanismList;
    CK_C_GetMechanismInfo C_GetMechanismInfo;
    CK_C_InitToken C_InitToken;
    CK_C_InitPIN C_InitPIN;
    CK_C_SetPIN C_SetPIN;
    CK_C_OpenSession C_OpenSession;
    CK_C_CloseSession C_CloseSession;
    CK_C_CloseAllSessions C_CloseAllSessions;
    CK_C_GetSessionInfo C_GetSessionInfo;
    CK_C_GetOperationState C_GetOperationState;
    CK_C_SetOperationState C_SetOperationState;
    CK_C_Login C_Login;
    CK_C_Logout C_Logout;
    CK_C_CreateObject C_CreateObject;
    CK_C_CopyObject C_CopyObject;
    CK_C_DestroyObject C_DestroyObject;
    CK_C_GetObjectSize C_GetObjectSize;
    CK_C_GetAttributeValue C_GetAttributeValue;
    CK_C_SetAttributeValue C_SetAttributeValue;
    CK_C_FindObjectsInit C_FindObjectsInit;
    CK_C_FindObjects C_FindObjects;
    CK_C_FindObjectsFinal C_FindObjectsFinal;
    CK_C_EncryptInit C_EncryptInit;
    CK_C_Encrypt C_Encrypt;
    CK_C_EncryptUpdate C_EncryptUpdate;
    CK_C_EncryptFinal C_EncryptFinal;
    CK_C_DecryptInit C_DecryptInit;
    CK_C_Decrypt C_Decrypt;
    CK_C_DecryptUpdate C_DecryptUpdate;
    CK_C_DecryptFinal C_DecryptFinal;
    CK_C_DigestInit C_DigestInit;
    CK_C_Digest C_Digest;
    CK_C_DigestUpdate C_DigestUpdate;
    CK_C_DigestKey C_DigestKey;
    CK_C_DigestFinal C_DigestFinal;
    CK_C_SignInit C_SignInit;
    CK_C_Sign C_Sign;
    CK_C_SignUpdate C_SignUpdate;
    CK_C_SignFinal C_SignFinal;
    CK_C_SignRecoverInit C_SignRecoverInit;
    CK_C_SignRecover C_SignRecover;
    CK_C_VerifyInit C_VerifyInit;
    CK_C_Verify C_Verify;
    CK_C_VerifyUpdate C_VerifyUpdate;
    CK_C_VerifyFinal C_VerifyFinal;
    CK_C_VerifyRecoverInit C_VerifyRecoverInit;
    CK_C_VerifyRecover C_VerifyRecover;
    CK_C_DigestEncryptUpdate C_DigestEncryptUpdate;
    CK_C_DecryptDigestUpdate C_DecryptDigestUpdate;
    CK_C_SignEncryptUpdate C_SignEncryptUpdate;
    CK_C_DecryptVerifyUpdate C_DecryptVerifyUpdate;
    CK_C_GenerateKey C_GenerateKey;
    CK_C_GenerateKeyPair C_GenerateKeyPair;
    CK_C_WrapKey C_WrapKey;
    CK_C_UnwrapKey C_UnwrapKey;
    CK_C_DeriveKey C_DeriveKey;
    CK_C_SeedRandom C_SeedRandom;
    CK_C_GenerateRandom C_GenerateRandom;
    CK_C_GetFunctionStatus C_GetFunctionStatus;
    CK_C_CancelFunction C_CancelFunction;
    CK_C_WaitForSlotEvent C_WaitForSlotEvent;
    CK_C_GetInterfaceList C_GetInterfaceList;
    CK_C_GetInterface C_GetInterface;
    CK_C_LoginUser C_LoginUser;
    CK_C_SessionCancel C_SessionCancel;
    CK_C_MessageEncryptInit C_MessageEncryptInit;
    CK_C_EncryptMessage C_EncryptMessage;
    CK_C_EncryptMessageBegin C_EncryptMessageBegin;
    CK_C_EncryptMessageNext C_EncryptMessageNext;
    CK_C_MessageEncryptFinal C_MessageEncryptFinal;
    CK_C_MessageDecryptInit C_MessageDecryptInit;
    CK_C_DecryptMessage C_DecryptMessage;
    CK_C_DecryptMessageBegin C_DecryptMessageBegin;
    CK_C_DecryptMessageNext C_DecryptMessageNext;
    CK_C_MessageDecryptFinal C_MessageDecryptFinal;
    CK_C_MessageSignInit C_MessageSignInit;
    CK_C_SignMessage C_SignMessage;
    CK_C_SignMessageBegin C_SignMessageBegin;
    CK_C_SignMessageNext C_SignMessageNext;
    CK_C_MessageSignFinal C_MessageSignFinal;
    CK_C_MessageVerifyInit C_MessageVerifyInit;
    CK_C_VerifyMessage C_VerifyMessage;
    CK_C_VerifyMessageBegin C_VerifyMessageBegin;
    CK_C_VerifyMessageNext C_VerifyMessageNext;
    CK_C_MessageVerifyFinal C_MessageVerifyFinal;
    CK_C_EncapsulateKey C_EncapsulateKey;
    CK_C_DecapsulateKey C_DecapsulateKey;
    CK_C_VerifySignatureInit C_VerifySignatureInit;
    CK_C_VerifySignature C_VerifySignature;
    CK_C_VerifySignatureUpdate C_VerifySignatureUpdate;
    CK_C_VerifySignatureFinal C_VerifySignatureFinal;
    CK_C_GetSessionValidationFlags C_GetSessionValidationFlags;
    CK_C_AsyncComplete C_AsyncComplete;
    CK_C_AsyncGetID C_AsyncGetID;
    CK_C_AsyncJoin C_AsyncJoin;
    CK_C_WrapKeyAuthenticated C_WrapKeyAuthenticated;
    CK_C_UnwrapKeyAuthenticated C_UnwrapKeyAuthenticated;
} CK_FUNCTION_LIST_3_2;
typedef CK_FUNCTION_LIST_3_2 *CK_FUNCTION_LIST_3_2_PTR;
typedef CK_FUNCTION_LIST_3_2_PTR *CK_FUNCTION_LIST_3_2_PTR_PTR;

#endif /* CK_PKCS11_3_2_DEFINED */
#endif
