/*
 * PKCS #11 types for keyshare.
 *
 * p11-kit 0.24's pkcs11.h stops at 2.40. The 3.0 additions keyshare needs are
 * declared here from the OASIS PKCS #11 3.0 specification. Every name is
 * guarded so a newer p11-kit header that already has them wins.
 *
 * Swift does not import macros that contain casts; those are re-declared as
 * static const CK_ULONG with a KS_ prefix so Swift code can use them.
 */
#ifndef KEYSHARE_PKCS11_SHIM_H
#define KEYSHARE_PKCS11_SHIM_H

#include <p11-kit-1/p11-kit/pkcs11.h>

/* ---- 3.0 constants ---------------------------------------------------- */
#ifndef CKA_UNIQUE_ID
#define CKA_UNIQUE_ID (0x4UL)
#endif
#ifndef CKF_INTERFACE_FORK_SAFE
#define CKF_INTERFACE_FORK_SAFE (0x00000001UL)
#endif
#ifndef CKF_END_OF_MESSAGE
#define CKF_END_OF_MESSAGE (0x00000001UL)
#endif
#ifndef CKR_OPERATION_CANCEL_FAILED
#define CKR_OPERATION_CANCEL_FAILED (0x00000202UL)
#endif
#ifndef CKF_MESSAGE_ENCRYPT
#define CKF_MESSAGE_ENCRYPT (0x00000002UL)
#define CKF_MESSAGE_DECRYPT (0x00000004UL)
#define CKF_MESSAGE_SIGN (0x00000008UL)
#define CKF_MESSAGE_VERIFY (0x00000010UL)
#define CKF_MULTI_MESSAGE (0x00000020UL)
#endif
#ifndef CKU_CONTEXT_SPECIFIC
#define CKU_CONTEXT_SPECIFIC (2UL)
#endif

/* ---- 3.0 symmetric mechanisms: ChaCha20-Poly1305 and message-based AEAD
 * (PKCS #11 3.0 Current Mechanisms §2.11.x, §2.18, §2.42-2.44). ------- */
#ifndef CKM_CHACHA20_POLY1305
#define CKK_CHACHA20 (0x00000033UL)
#define CKM_CHACHA20_KEY_GEN (0x00001225UL)
#define CKM_CHACHA20_POLY1305 (0x00004021UL)

typedef struct CK_SALSA20_CHACHA20_POLY1305_PARAMS {
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_BYTE_PTR pAAD;
    CK_ULONG ulAADLen;
} CK_SALSA20_CHACHA20_POLY1305_PARAMS;

typedef struct CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS {
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_BYTE_PTR pTag;
} CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS;
#endif

#ifndef CKG_NO_GENERATE
typedef CK_ULONG CK_GENERATOR_FUNCTION;
#define CKG_NO_GENERATE (0x00000000UL)
#define CKG_GENERATE (0x00000001UL)
#define CKG_GENERATE_COUNTER (0x00000002UL)
#define CKG_GENERATE_RANDOM (0x00000003UL)

typedef struct CK_GCM_MESSAGE_PARAMS {
    CK_BYTE_PTR pIv;
    CK_ULONG ulIvLen;
    CK_ULONG ulIvFixedBits;
    CK_GENERATOR_FUNCTION ivGenerator;
    CK_BYTE_PTR pTag;
    CK_ULONG ulTagBits;
} CK_GCM_MESSAGE_PARAMS;
#endif

/* ---- 3.0 types -------------------------------------------------------- */
#ifndef CK_INTERFACE_DEFINED
#define CK_INTERFACE_DEFINED 1

typedef struct CK_INTERFACE {
    CK_CHAR *pInterfaceName;
    CK_VOID_PTR pFunctionList;
    CK_FLAGS flags;
} CK_INTERFACE;
typedef CK_INTERFACE *CK_INTERFACE_PTR;
typedef CK_INTERFACE_PTR *CK_INTERFACE_PTR_PTR;

typedef CK_RV (*CK_C_GetInterfaceList)(CK_INTERFACE_PTR pInterfacesList, CK_ULONG_PTR pulCount);
typedef CK_RV (*CK_C_GetInterface)(CK_UTF8CHAR_PTR pInterfaceName, CK_VERSION_PTR pVersion,
                                   CK_INTERFACE_PTR_PTR ppInterface, CK_FLAGS flags);
typedef CK_RV (*CK_C_LoginUser)(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType,
                                CK_UTF8CHAR_PTR pPin, CK_ULONG ulPinLen,
                                CK_UTF8CHAR_PTR pUsername, CK_ULONG ulUsernameLen);
typedef CK_RV (*CK_C_SessionCancel)(CK_SESSION_HANDLE hSession, CK_FLAGS flags);
typedef CK_RV (*CK_C_MessageEncryptInit)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                         CK_OBJECT_HANDLE hKey);
typedef CK_RV (*CK_C_EncryptMessage)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                     CK_ULONG ulParameterLen, CK_BYTE_PTR pAssociatedData,
                                     CK_ULONG ulAssociatedDataLen, CK_BYTE_PTR pPlaintext,
                                     CK_ULONG ulPlaintextLen, CK_BYTE_PTR pCiphertext,
                                     CK_ULONG_PTR pulCiphertextLen);
typedef CK_RV (*CK_C_EncryptMessageBegin)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                          CK_ULONG ulParameterLen, CK_BYTE_PTR pAssociatedData,
                                          CK_ULONG ulAssociatedDataLen);
typedef CK_RV (*CK_C_EncryptMessageNext)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                         CK_ULONG ulParameterLen, CK_BYTE_PTR pPlaintextPart,
                                         CK_ULONG ulPlaintextPartLen, CK_BYTE_PTR pCiphertextPart,
                                         CK_ULONG_PTR pulCiphertextPartLen, CK_FLAGS flags);
typedef CK_RV (*CK_C_MessageEncryptFinal)(CK_SESSION_HANDLE hSession);
typedef CK_RV (*CK_C_MessageDecryptInit)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                         CK_OBJECT_HANDLE hKey);
typedef CK_RV (*CK_C_DecryptMessage)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                     CK_ULONG ulParameterLen, CK_BYTE_PTR pAssociatedData,
                                     CK_ULONG ulAssociatedDataLen, CK_BYTE_PTR pCiphertext,
                                     CK_ULONG ulCiphertextLen, CK_BYTE_PTR pPlaintext,
                                     CK_ULONG_PTR pulPlaintextLen);
typedef CK_RV (*CK_C_DecryptMessageBegin)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                          CK_ULONG ulParameterLen, CK_BYTE_PTR pAssociatedData,
                                          CK_ULONG ulAssociatedDataLen);
typedef CK_RV (*CK_C_DecryptMessageNext)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                         CK_ULONG ulParameterLen, CK_BYTE_PTR pCiphertextPart,
                                         CK_ULONG ulCiphertextPartLen, CK_BYTE_PTR pPlaintextPart,
                                         CK_ULONG_PTR pulPlaintextPartLen, CK_FLAGS flags);
typedef CK_RV (*CK_C_MessageDecryptFinal)(CK_SESSION_HANDLE hSession);
typedef CK_RV (*CK_C_MessageSignInit)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                      CK_OBJECT_HANDLE hKey);
typedef CK_RV (*CK_C_SignMessage)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                  CK_ULONG ulParameterLen, CK_BYTE_PTR pData, CK_ULONG ulDataLen,
                                  CK_BYTE_PTR pSignature, CK_ULONG_PTR pulSignatureLen);
typedef CK_RV (*CK_C_SignMessageBegin)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                       CK_ULONG ulParameterLen);
typedef CK_RV (*CK_C_SignMessageNext)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                      CK_ULONG ulParameterLen, CK_BYTE_PTR pData, CK_ULONG ulDataLen,
                                      CK_BYTE_PTR pSignature, CK_ULONG_PTR pulSignatureLen);
typedef CK_RV (*CK_C_MessageSignFinal)(CK_SESSION_HANDLE hSession);
typedef CK_RV (*CK_C_MessageVerifyInit)(CK_SESSION_HANDLE hSession, CK_MECHANISM_PTR pMechanism,
                                        CK_OBJECT_HANDLE hKey);
typedef CK_RV (*CK_C_VerifyMessage)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                    CK_ULONG ulParameterLen, CK_BYTE_PTR pData, CK_ULONG ulDataLen,
                                    CK_BYTE_PTR pSignature, CK_ULONG ulSignatureLen);
typedef CK_RV (*CK_C_VerifyMessageBegin)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                         CK_ULONG ulParameterLen);
typedef CK_RV (*CK_C_VerifyMessageNext)(CK_SESSION_HANDLE hSession, CK_VOID_PTR pParameter,
                                        CK_ULONG ulParameterLen, CK_BYTE_PTR pData, CK_ULONG ulDataLen,
                                        CK_BYTE_PTR pSignature, CK_ULONG ulSignatureLen);
typedef CK_RV (*CK_C_MessageVerifyFinal)(CK_SESSION_HANDLE hSession);

/* OASIS 3.0 order: the 2.40 list, then the 24 functions added in 3.0. */
typedef struct CK_FUNCTION_LIST_3_0 {
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
} CK_FUNCTION_LIST_3_0;
typedef CK_FUNCTION_LIST_3_0 *CK_FUNCTION_LIST_3_0_PTR;
typedef CK_FUNCTION_LIST_3_0_PTR *CK_FUNCTION_LIST_3_0_PTR_PTR;

#endif /* CK_INTERFACE_DEFINED */

/* ---- 3.0 asymmetric additions (Montgomery keys, EdDSA and RSA-AES wrap
 *      parameters); PKCS #11 3.0 pkcs11t.h ------------------------------- */
#ifndef CKK_EC_MONTGOMERY
#define CKK_EC_MONTGOMERY (0x41UL)
#endif
#ifndef CKM_EC_MONTGOMERY_KEY_PAIR_GEN
#define CKM_EC_MONTGOMERY_KEY_PAIR_GEN (0x1056UL)
#endif
#ifndef CK_EDDSA_PARAMS_DEFINED
#define CK_EDDSA_PARAMS_DEFINED 1
typedef struct CK_EDDSA_PARAMS {
    CK_BBOOL phFlag;
    CK_ULONG ulContextDataLen;
    CK_BYTE_PTR pContextData;
} CK_EDDSA_PARAMS;
typedef CK_EDDSA_PARAMS *CK_EDDSA_PARAMS_PTR;
#endif
/* SHA-3 signatures and MGF1 (PKCS #11 3.0 pkcs11t.h). */
#ifndef CKM_SHA3_256_RSA_PKCS
#define CKM_SHA3_256_RSA_PKCS (0x60UL)
#define CKM_SHA3_384_RSA_PKCS (0x61UL)
#define CKM_SHA3_512_RSA_PKCS (0x62UL)
#define CKM_SHA3_256_RSA_PKCS_PSS (0x63UL)
#define CKM_SHA3_384_RSA_PKCS_PSS (0x64UL)
#define CKM_SHA3_512_RSA_PKCS_PSS (0x65UL)
#define CKM_SHA3_224_RSA_PKCS (0x66UL)
#define CKM_SHA3_224_RSA_PKCS_PSS (0x67UL)
#endif
#ifndef CKM_ECDSA_SHA3_224
#define CKM_ECDSA_SHA3_224 (0x1047UL)
#define CKM_ECDSA_SHA3_256 (0x1048UL)
#define CKM_ECDSA_SHA3_384 (0x1049UL)
#define CKM_ECDSA_SHA3_512 (0x104aUL)
#endif
#ifndef CKG_MGF1_SHA3_224
#define CKG_MGF1_SHA3_224 (0x6UL)
#define CKG_MGF1_SHA3_256 (0x7UL)
#define CKG_MGF1_SHA3_384 (0x8UL)
#define CKG_MGF1_SHA3_512 (0x9UL)
#endif
#ifndef CK_RSA_AES_KEY_WRAP_PARAMS_DEFINED
#define CK_RSA_AES_KEY_WRAP_PARAMS_DEFINED 1
typedef struct CK_RSA_AES_KEY_WRAP_PARAMS {
    CK_ULONG ulAESKeyBits;
    CK_RSA_PKCS_OAEP_PARAMS_PTR pOAEPParams;
} CK_RSA_AES_KEY_WRAP_PARAMS;
typedef CK_RSA_AES_KEY_WRAP_PARAMS *CK_RSA_AES_KEY_WRAP_PARAMS_PTR;
#endif

/* ---- mechanism breadth (issue 13, part 2): RFC 5649 key wrap under its
 * 3.0 code, AES-CCM (Current Mechanisms §2.14 / §2.12.3), the counter-XOR IV
 * generator. --------------------------------------------------------------- */
#ifndef CKM_AES_KEY_WRAP_KWP
#define CKM_AES_KEY_WRAP_KWP (0x0000210BUL)
#endif
#ifndef CKG_GENERATE_COUNTER_XOR
#define CKG_GENERATE_COUNTER_XOR (0x00000004UL)
#endif
#ifndef CK_CCM_PARAMS_DEFINED
#define CK_CCM_PARAMS_DEFINED 1
typedef struct CK_CCM_PARAMS {
    CK_ULONG ulDataLen;
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_BYTE_PTR pAAD;
    CK_ULONG ulAADLen;
    CK_ULONG ulMACLen;
} CK_CCM_PARAMS;
typedef CK_CCM_PARAMS *CK_CCM_PARAMS_PTR;

typedef struct CK_CCM_MESSAGE_PARAMS {
    CK_ULONG ulDataLen;
    CK_BYTE_PTR pNonce;
    CK_ULONG ulNonceLen;
    CK_ULONG ulNonceFixedBits;
    CK_GENERATOR_FUNCTION nonceGenerator;
    CK_BYTE_PTR pMAC;
    CK_ULONG ulMACLen;
} CK_CCM_MESSAGE_PARAMS;
typedef CK_CCM_MESSAGE_PARAMS *CK_CCM_MESSAGE_PARAMS_PTR;
#endif

/* ---- cast macros Swift cannot import ---------------------------------- */
static const CK_ULONG KS_CK_UNAVAILABLE_INFORMATION = CK_UNAVAILABLE_INFORMATION;
static const CK_ULONG KS_CK_EFFECTIVELY_INFINITE = CK_EFFECTIVELY_INFINITE;
static const CK_ULONG KS_CKO_VENDOR_DEFINED = CKO_VENDOR_DEFINED;
static const CK_ULONG KS_CKK_VENDOR_DEFINED = CKK_VENDOR_DEFINED;
static const CK_ULONG KS_CKA_VENDOR_DEFINED = CKA_VENDOR_DEFINED;
static const CK_ULONG KS_CKM_VENDOR_DEFINED = CKM_VENDOR_DEFINED;
static const CK_ULONG KS_CKR_VENDOR_DEFINED = CKR_VENDOR_DEFINED;
static const CK_ULONG KS_CKA_WRAP_TEMPLATE = CKA_WRAP_TEMPLATE;
static const CK_ULONG KS_CKA_UNWRAP_TEMPLATE = CKA_UNWRAP_TEMPLATE;
static const CK_ULONG KS_CKA_DERIVE_TEMPLATE = CKA_DERIVE_TEMPLATE;
static const CK_ULONG KS_CKA_ALLOWED_MECHANISMS = CKA_ALLOWED_MECHANISMS;
static const CK_ULONG KS_CKA_UNIQUE_ID = CKA_UNIQUE_ID;

/* Digest, MAC and key-derivation declarations (SHA-3, HKDF, SP 800-108, PBKDF2). */
#include "pkcs11_kdf.h"
/* PKCS #11 3.2 post-quantum key types, mechanisms and parameters (issue 18). */
#include "pkcs11_pq.h"

/* The environment as the module may trust it: glibc's secure_getenv, which
 * gives nothing in a setuid, setgid or file-capability program (AT_SECURE),
 * whose environment is its invoker's (sudo or su loading the module through
 * pam_p11): there KEYSHARE_LOG must not make root create or append to a file
 * the invoker names. Declared in the function: Swift's Glibc has no
 * _GNU_SOURCE. */
static inline const char *ks_secure_getenv(const char *name) {
    extern char *secure_getenv(const char *);
    return secure_getenv(name);
}

#endif /* KEYSHARE_PKCS11_SHIM_H */
