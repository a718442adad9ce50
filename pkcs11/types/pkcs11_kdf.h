/*
 * PKCS #11 3.0 declarations for keyshare's digest, MAC and key-derivation
 * mechanisms (SHA-3, SHA-512/t, general-length HMAC, HKDF, SP 800-108,
 * PBKDF2, the simple derivations) that p11-kit 0.24's 2.40 header lacks.
 * From the OASIS PKCS #11 3.0 Current Mechanisms specification and its
 * errata (the corrected key type values: CKK_SHA3_*_HMAC are 0x36..0x39,
 * CKK_SHA512_224/256_HMAC 0x43/0x44; the 3.0 header as first published gave
 * 0x27/0x28 for the latter, which collide with CKK_MD5_HMAC/CKK_SHA_1_HMAC).
 * Every name is guarded so a newer p11-kit header that has it wins.
 * Included by pkcs11_shim.h.
 */
#ifndef KEYSHARE_PKCS11_KDF_H
#define KEYSHARE_PKCS11_KDF_H

#include <p11-kit-1/p11-kit/pkcs11.h>

/* ---- digests, HMAC and their key types ------------------------------- */
#ifndef CKM_SHA3_256
#define CKM_SHA3_256 (0x2b0UL)
#define CKM_SHA3_256_HMAC (0x2b1UL)
#define CKM_SHA3_256_HMAC_GENERAL (0x2b2UL)
#define CKM_SHA3_256_KEY_GEN (0x2b3UL)
#define CKM_SHA3_224 (0x2b5UL)
#define CKM_SHA3_224_HMAC (0x2b6UL)
#define CKM_SHA3_224_HMAC_GENERAL (0x2b7UL)
#define CKM_SHA3_224_KEY_GEN (0x2b8UL)
#define CKM_SHA3_384 (0x2c0UL)
#define CKM_SHA3_384_HMAC (0x2c1UL)
#define CKM_SHA3_384_HMAC_GENERAL (0x2c2UL)
#define CKM_SHA3_384_KEY_GEN (0x2c3UL)
#define CKM_SHA3_512 (0x2d0UL)
#define CKM_SHA3_512_HMAC (0x2d1UL)
#define CKM_SHA3_512_HMAC_GENERAL (0x2d2UL)
#define CKM_SHA3_512_KEY_GEN (0x2d3UL)
#endif
#ifndef CKM_SHA_1_KEY_GEN
#define CKM_SHA_1_KEY_GEN (0x4003UL)
#define CKM_SHA224_KEY_GEN (0x4004UL)
#define CKM_SHA256_KEY_GEN (0x4005UL)
#define CKM_SHA384_KEY_GEN (0x4006UL)
#define CKM_SHA512_KEY_GEN (0x4007UL)
#define CKM_SHA512_224_KEY_GEN (0x4008UL)
#define CKM_SHA512_256_KEY_GEN (0x4009UL)
#endif
#ifndef CKK_SHA3_224_HMAC
#define CKK_SHA3_224_HMAC (0x36UL)
#define CKK_SHA3_256_HMAC (0x37UL)
#define CKK_SHA3_384_HMAC (0x38UL)
#define CKK_SHA3_512_HMAC (0x39UL)
#endif
#ifndef CKK_HKDF
#define CKK_HKDF (0x42UL)
#endif
#ifndef CKK_SHA512_224_HMAC
#define CKK_SHA512_224_HMAC (0x43UL)
#define CKK_SHA512_256_HMAC (0x44UL)
#endif

/* CK_MAC_GENERAL_PARAMS (the *_HMAC_GENERAL output length) and
 * CK_EXTRACT_PARAMS (CKM_EXTRACT_KEY_FROM_KEY's bit offset) are plain
 * CK_ULONGs; CK_KEY_DERIVATION_STRING_DATA is in p11-kit's header. */

/* ---- C_SessionCancel ----------------------------------------------------- */
#ifndef CKF_FIND_OBJECTS
#define CKF_FIND_OBJECTS (0x40UL)
#endif

/* ---- HKDF ---------------------------------------------------------------- */
#ifndef CKM_HKDF_DERIVE
#define CKM_HKDF_DERIVE (0x402aUL)
#define CKM_HKDF_DATA (0x402bUL)
#define CKM_HKDF_KEY_GEN (0x402cUL)
#endif
#ifndef CKF_HKDF_SALT_NULL
#define CKF_HKDF_SALT_NULL (0x1UL)
#define CKF_HKDF_SALT_DATA (0x2UL)
#define CKF_HKDF_SALT_KEY (0x4UL)
#endif
#ifndef CK_HKDF_PARAMS_DEFINED
#define CK_HKDF_PARAMS_DEFINED 1
typedef struct CK_HKDF_PARAMS {
    CK_BBOOL bExtract;
    CK_BBOOL bExpand;
    CK_MECHANISM_TYPE prfHashMechanism;
    CK_ULONG ulSaltType;
    CK_BYTE_PTR pSalt;
    CK_ULONG ulSaltLen;
    CK_OBJECT_HANDLE hSaltKey;
    CK_BYTE_PTR pInfo;
    CK_ULONG ulInfoLen;
} CK_HKDF_PARAMS;
#endif

/* ---- SP 800-108 ---------------------------------------------------------- */
#ifndef CKM_SP800_108_COUNTER_KDF
#define CKM_SP800_108_COUNTER_KDF (0x3acUL)
#define CKM_SP800_108_FEEDBACK_KDF (0x3adUL)
#define CKM_SP800_108_DOUBLE_PIPELINE_KDF (0x3aeUL)
#endif
#ifndef CKM_AES_CMAC
#define CKM_AES_CMAC (0x108aUL)
#endif
#ifndef CK_SP800_108_ITERATION_VARIABLE
#define CK_SP800_108_ITERATION_VARIABLE (0x1UL)
#define CK_SP800_108_OPTIONAL_COUNTER (0x2UL)
#define CK_SP800_108_COUNTER (0x2UL)
#define CK_SP800_108_DKM_LENGTH (0x3UL)
#define CK_SP800_108_BYTE_ARRAY (0x4UL)
#define CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS (0x1UL)
#define CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS (0x2UL)
#endif
#ifndef CK_SP800_108_KDF_PARAMS_DEFINED
#define CK_SP800_108_KDF_PARAMS_DEFINED 1
typedef struct CK_PRF_DATA_PARAM {
    CK_ULONG type;
    CK_VOID_PTR pValue;
    CK_ULONG ulValueLen;
} CK_PRF_DATA_PARAM;
typedef struct CK_SP800_108_COUNTER_FORMAT {
    CK_BBOOL bLittleEndian;
    CK_ULONG ulWidthInBits;
} CK_SP800_108_COUNTER_FORMAT;
typedef struct CK_SP800_108_DKM_LENGTH_FORMAT {
    CK_ULONG dkmLengthMethod;
    CK_BBOOL bLittleEndian;
    CK_ULONG ulWidthInBits;
} CK_SP800_108_DKM_LENGTH_FORMAT;
typedef struct CK_DERIVED_KEY {
    CK_ATTRIBUTE_PTR pTemplate;
    CK_ULONG ulAttributeCount;
    CK_OBJECT_HANDLE_PTR phKey;
} CK_DERIVED_KEY;
typedef struct CK_SP800_108_KDF_PARAMS {
    CK_MECHANISM_TYPE prfType;
    CK_ULONG ulNumberOfDataParams;
    CK_PRF_DATA_PARAM *pDataParams;
    CK_ULONG ulAdditionalDerivedKeys;
    CK_DERIVED_KEY *pAdditionalDerivedKeys;
} CK_SP800_108_KDF_PARAMS;
typedef struct CK_SP800_108_FEEDBACK_KDF_PARAMS {
    CK_MECHANISM_TYPE prfType;
    CK_ULONG ulNumberOfDataParams;
    CK_PRF_DATA_PARAM *pDataParams;
    CK_ULONG ulIVLen;
    CK_BYTE_PTR pIV;
    CK_ULONG ulAdditionalDerivedKeys;
    CK_DERIVED_KEY *pAdditionalDerivedKeys;
} CK_SP800_108_FEEDBACK_KDF_PARAMS;
#endif

/* ---- PKCS #5 PBKDF2 ------------------------------------------------------ */
#ifndef CKP_PKCS5_PBKD2_HMAC_SHA1
#define CKP_PKCS5_PBKD2_HMAC_SHA1 (0x1UL)
#define CKP_PKCS5_PBKD2_HMAC_GOSTR3411 (0x2UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA224 (0x3UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA256 (0x4UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA384 (0x5UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512 (0x6UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512_224 (0x7UL)
#define CKP_PKCS5_PBKD2_HMAC_SHA512_256 (0x8UL)
#endif
#ifndef CKZ_SALT_SPECIFIED
#define CKZ_SALT_SPECIFIED (0x1UL)
#endif
#ifndef CK_PKCS5_PBKD2_PARAMS_DEFINED
#define CK_PKCS5_PBKD2_PARAMS_DEFINED 1
/* 2.20's layout: ulPasswordLen is a pointer to the length. */
typedef struct CK_PKCS5_PBKD2_PARAMS {
    CK_ULONG saltSource;
    CK_VOID_PTR pSaltSourceData;
    CK_ULONG ulSaltSourceDataLen;
    CK_ULONG iterations;
    CK_ULONG prf;
    CK_VOID_PTR pPrfData;
    CK_ULONG ulPrfDataLen;
    CK_UTF8CHAR_PTR pPassword;
    CK_ULONG_PTR ulPasswordLen;
} CK_PKCS5_PBKD2_PARAMS;
/* 2.40 errata and 3.0: the length itself. The same size on LP64. */
typedef struct CK_PKCS5_PBKD2_PARAMS2 {
    CK_ULONG saltSource;
    CK_VOID_PTR pSaltSourceData;
    CK_ULONG ulSaltSourceDataLen;
    CK_ULONG iterations;
    CK_ULONG prf;
    CK_VOID_PTR pPrfData;
    CK_ULONG ulPrfDataLen;
    CK_UTF8CHAR_PTR pPassword;
    CK_ULONG ulPasswordLen;
} CK_PKCS5_PBKD2_PARAMS2;
#endif

#endif /* KEYSHARE_PKCS11_KDF_H */
