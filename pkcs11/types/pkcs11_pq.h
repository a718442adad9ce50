/*
 * PKCS #11 3.2 post-quantum declarations (issue 18): the ML-DSA, SLH-DSA and ML-KEM key types,
 * mechanisms, attributes, parameter sets and the signature parameter structs.
 *
 * Values copied from the OASIS PKCS #11 TC header published/3-02/pkcs11t.h (oasis-tcs/pkcs11).
 * Copyright OASIS Open; the OASIS IPR policy permits copying the headers to implement the
 * standard. Each name is guarded so a newer system header that has it wins. Included by
 * pkcs11_shim.h (so the Swift layers and the agent protocol see them) and by pkcs11_3_2.h.
 */
#ifndef KEYSHARE_PKCS11_PQ_H
#define KEYSHARE_PKCS11_PQ_H

#ifndef CKK_ML_KEM
#define CKK_ML_KEM (0x00000049UL)
#define CKK_ML_DSA (0x0000004aUL)
#define CKK_SLH_DSA (0x0000004bUL)
#endif

#ifndef CKA_PARAMETER_SET
#define CKA_PARAMETER_SET (0x0000061dUL)
#endif
#ifndef CKA_ENCAPSULATE_TEMPLATE
#define CKA_ENCAPSULATE_TEMPLATE (0x0000062aUL)
#define CKA_DECAPSULATE_TEMPLATE (0x0000062bUL)
#endif
#ifndef CKA_ENCAPSULATE
#define CKA_ENCAPSULATE (0x00000633UL)
#define CKA_DECAPSULATE (0x00000634UL)
#endif
#ifndef CKA_SEED
#define CKA_SEED (0x00000637UL)
#endif

#ifndef CKM_ML_KEM_KEY_PAIR_GEN
#define CKM_ML_KEM_KEY_PAIR_GEN (0x0000000fUL)
#define CKM_ML_KEM (0x00000017UL)
#define CKM_ML_DSA_KEY_PAIR_GEN (0x0000001cUL)
#define CKM_ML_DSA (0x0000001dUL)
#define CKM_HASH_ML_DSA (0x0000001fUL)
#define CKM_HASH_ML_DSA_SHA224 (0x00000023UL)
#define CKM_HASH_ML_DSA_SHA256 (0x00000024UL)
#define CKM_HASH_ML_DSA_SHA384 (0x00000025UL)
#define CKM_HASH_ML_DSA_SHA512 (0x00000026UL)
#define CKM_HASH_ML_DSA_SHA3_224 (0x00000027UL)
#define CKM_HASH_ML_DSA_SHA3_256 (0x00000028UL)
#define CKM_HASH_ML_DSA_SHA3_384 (0x00000029UL)
#define CKM_HASH_ML_DSA_SHA3_512 (0x0000002aUL)
#define CKM_HASH_ML_DSA_SHAKE128 (0x0000002bUL)
#define CKM_HASH_ML_DSA_SHAKE256 (0x0000002cUL)
#define CKM_SLH_DSA_KEY_PAIR_GEN (0x0000002dUL)
#define CKM_SLH_DSA (0x0000002eUL)
#define CKM_HASH_SLH_DSA (0x00000034UL)
#define CKM_HASH_SLH_DSA_SHA224 (0x00000036UL)
#define CKM_HASH_SLH_DSA_SHA256 (0x00000037UL)
#define CKM_HASH_SLH_DSA_SHA384 (0x00000038UL)
#define CKM_HASH_SLH_DSA_SHA512 (0x00000039UL)
#define CKM_HASH_SLH_DSA_SHA3_224 (0x0000003aUL)
#define CKM_HASH_SLH_DSA_SHA3_256 (0x0000003bUL)
#define CKM_HASH_SLH_DSA_SHA3_384 (0x0000003cUL)
#define CKM_HASH_SLH_DSA_SHA3_512 (0x0000003dUL)
#define CKM_HASH_SLH_DSA_SHAKE128 (0x0000003eUL)
#define CKM_HASH_SLH_DSA_SHAKE256 (0x0000003fUL)

#endif

/* Case labels, for switches that must name every one of a group (one list, not a copy per switch).
 * KS_CASES_PQ_CONTEXT_SIGN: the signature mechanisms whose parameter is CK_SIGN_ADDITIONAL_CONTEXT
 * (pure ML-DSA / SLH-DSA and the pre-hash ones with the hash in the mechanism); the agent codec
 * marshals it (Sources/AgentProtocol/pq_params.c). KS_CASES_MECHANISMS_3_2: every mechanism type
 * 3.2 defined that this module offers; the 3.0 and 2.40 tables do not list them
 * (pkcs11/abi/function_table.c). */
#define KS_CASES_PQ_CONTEXT_SIGN \
    case CKM_ML_DSA: case CKM_SLH_DSA: \
    case CKM_HASH_ML_DSA_SHA224: case CKM_HASH_ML_DSA_SHA256: case CKM_HASH_ML_DSA_SHA384: \
    case CKM_HASH_ML_DSA_SHA512: case CKM_HASH_ML_DSA_SHA3_224: case CKM_HASH_ML_DSA_SHA3_256: \
    case CKM_HASH_ML_DSA_SHA3_384: case CKM_HASH_ML_DSA_SHA3_512: case CKM_HASH_ML_DSA_SHAKE128: \
    case CKM_HASH_ML_DSA_SHAKE256: \
    case CKM_HASH_SLH_DSA_SHA224: case CKM_HASH_SLH_DSA_SHA256: case CKM_HASH_SLH_DSA_SHA384: \
    case CKM_HASH_SLH_DSA_SHA512: case CKM_HASH_SLH_DSA_SHA3_224: case CKM_HASH_SLH_DSA_SHA3_256: \
    case CKM_HASH_SLH_DSA_SHA3_384: case CKM_HASH_SLH_DSA_SHA3_512: case CKM_HASH_SLH_DSA_SHAKE128: \
    case CKM_HASH_SLH_DSA_SHAKE256:
#define KS_CASES_MECHANISMS_3_2 \
    KS_CASES_PQ_CONTEXT_SIGN \
    case CKM_HASH_ML_DSA: case CKM_HASH_SLH_DSA: \
    case CKM_ML_DSA_KEY_PAIR_GEN: case CKM_SLH_DSA_KEY_PAIR_GEN: \
    case CKM_ML_KEM_KEY_PAIR_GEN: case CKM_ML_KEM:
#ifndef CKF_ENCAPSULATE
#define CKF_ENCAPSULATE (0x10000000UL)
#define CKF_DECAPSULATE (0x20000000UL)
#endif
#ifndef CKR_PARAMETER_SET_NOT_SUPPORTED
#define CKR_PARAMETER_SET_NOT_SUPPORTED (0x00000209UL)
#endif

#ifndef CKH_HEDGE_PREFERRED
typedef CK_ULONG CK_HEDGE_TYPE;
#define CKH_HEDGE_PREFERRED (0x00000000UL)
#define CKH_HEDGE_REQUIRED (0x00000001UL)
#define CKH_DETERMINISTIC_REQUIRED (0x00000002UL)

typedef struct CK_SIGN_ADDITIONAL_CONTEXT {
    CK_HEDGE_TYPE hedgeVariant;
    CK_BYTE_PTR pContext;
    CK_ULONG ulContextLen;
} CK_SIGN_ADDITIONAL_CONTEXT;

typedef struct CK_HASH_SIGN_ADDITIONAL_CONTEXT {
    CK_HEDGE_TYPE hedgeVariant;
    CK_BYTE_PTR pContext;
    CK_ULONG ulContextLen;
    CK_MECHANISM_TYPE hash;
} CK_HASH_SIGN_ADDITIONAL_CONTEXT;
#endif

#ifndef CKP_ML_DSA_44
#define CKP_ML_DSA_44 (0x00000001UL)
#define CKP_ML_DSA_65 (0x00000002UL)
#define CKP_ML_DSA_87 (0x00000003UL)
#define CKP_SLH_DSA_SHA2_128S (0x00000001UL)
#define CKP_SLH_DSA_SHAKE_128S (0x00000002UL)
#define CKP_SLH_DSA_SHA2_128F (0x00000003UL)
#define CKP_SLH_DSA_SHAKE_128F (0x00000004UL)
#define CKP_SLH_DSA_SHA2_192S (0x00000005UL)
#define CKP_SLH_DSA_SHAKE_192S (0x00000006UL)
#define CKP_SLH_DSA_SHA2_192F (0x00000007UL)
#define CKP_SLH_DSA_SHAKE_192F (0x00000008UL)
#define CKP_SLH_DSA_SHA2_256S (0x00000009UL)
#define CKP_SLH_DSA_SHAKE_256S (0x0000000aUL)
#define CKP_SLH_DSA_SHA2_256F (0x0000000bUL)
#define CKP_SLH_DSA_SHAKE_256F (0x0000000cUL)
#define CKP_ML_KEM_512 (0x00000001UL)
#define CKP_ML_KEM_768 (0x00000002UL)
#define CKP_ML_KEM_1024 (0x00000003UL)
#endif

#endif /* KEYSHARE_PKCS11_PQ_H */
