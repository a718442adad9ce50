/*
 * The twelve entries PKCS #11 3.2 adds to the function list (issue 18). The 3.2 interface is
 * offered first so hosts that speak 3.2 find it, and each entry it cannot serve yet says so with
 * CKR_FUNCTION_NOT_SUPPORTED, as Kryoptic does for the asynchronous ones: never a NULL entry a
 * host would call. Encapsulation, the signature-first verify and authenticated wrapping
 * replace these as they are implemented (one table entry each, in function_lists.h).
 */
#include "keyshare_abi.h"

/* Key encapsulation (ML-KEM, issue 18): the agent's client in agent mode, the Swift entry points
 * (Sources/PKCS11Module/Encapsulation.swift) in-process and inside the agent. */
CK_RV ks32_C_EncapsulateKey(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism, CK_OBJECT_HANDLE hPublicKey,
                            CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                            CK_ULONG_PTR pulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey)
{
    if (ks_agent_mode())
        return kc32_C_EncapsulateKey(hSession, pMechanism, hPublicKey, pTemplate, ulAttributeCount, pCiphertext,
                                     pulCiphertextLen, phKey);
    return ks_C_EncapsulateKey(hSession, pMechanism, hPublicKey, pTemplate, ulAttributeCount, pCiphertext,
                               pulCiphertextLen, phKey);
}

CK_RV ks32_C_DecapsulateKey(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism, CK_OBJECT_HANDLE hPrivateKey,
                            CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulAttributeCount, CK_BYTE_PTR pCiphertext,
                            CK_ULONG ulCiphertextLen, CK_OBJECT_HANDLE_PTR phKey)
{
    if (ks_agent_mode())
        return kc32_C_DecapsulateKey(hSession, pMechanism, hPrivateKey, pTemplate, ulAttributeCount, pCiphertext,
                                     ulCiphertextLen, phKey);
    return ks_C_DecapsulateKey(hSession, pMechanism, hPrivateKey, pTemplate, ulAttributeCount, pCiphertext,
                               ulCiphertextLen, phKey);
}

CK_RV ks32_C_VerifySignatureInit(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism, CK_OBJECT_HANDLE hKey,
                                 CK_BYTE_PTR pSignature, CK_ULONG ulSignatureLen)
{
    (void)hSession; (void)pMechanism; (void)hKey; (void)pSignature; (void)ulSignatureLen;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_VerifySignature(CK_SESSION_HANDLE hSession, CK_BYTE_PTR pData, CK_ULONG ulDataLen)
{
    (void)hSession; (void)pData; (void)ulDataLen;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_VerifySignatureUpdate(CK_SESSION_HANDLE hSession, CK_BYTE_PTR pPart, CK_ULONG ulPartLen)
{
    (void)hSession; (void)pPart; (void)ulPartLen;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_VerifySignatureFinal(CK_SESSION_HANDLE hSession)
{
    (void)hSession;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_GetSessionValidationFlags(CK_SESSION_HANDLE hSession, CK_SESSION_VALIDATION_FLAGS_TYPE type,
                                       CK_FLAGS_PTR pFlags)
{
    (void)hSession; (void)type; (void)pFlags;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

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

CK_RV ks32_C_WrapKeyAuthenticated(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                  CK_OBJECT_HANDLE hWrappingKey, CK_OBJECT_HANDLE hKey, CK_BYTE_PTR pAssociatedData,
                                  CK_ULONG ulAssociatedDataLen, CK_BYTE_PTR pWrappedKey,
                                  CK_ULONG_PTR pulWrappedKeyLen)
{
    (void)hSession; (void)pMechanism; (void)hWrappingKey; (void)hKey; (void)pAssociatedData;
    (void)ulAssociatedDataLen; (void)pWrappedKey; (void)pulWrappedKeyLen;
    return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV ks32_C_UnwrapKeyAuthenticated(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                    CK_OBJECT_HANDLE hUnwrappingKey, CK_BYTE_PTR pWrappedKey,
                                    CK_ULONG ulWrappedKeyLen, CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulAttributeCount,
                                    CK_BYTE_PTR pAssociatedData, CK_ULONG ulAssociatedDataLen,
                                    CK_OBJECT_HANDLE_PTR phKey)
{
    (void)hSession; (void)pMechanism; (void)hUnwrappingKey; (void)pWrappedKey; (void)ulWrappedKeyLen;
    (void)pTemplate; (void)ulAttributeCount; (void)pAssociatedData; (void)ulAssociatedDataLen; (void)phKey;
    return CKR_FUNCTION_NOT_SUPPORTED;
}
