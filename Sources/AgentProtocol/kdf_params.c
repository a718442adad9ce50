/*
 * The key-derivation mechanism parameters that carry pointers (HKDF,
 * SP 800-108 counter and feedback, PBKDF2, the CK_KEY_DERIVATION_STRING_DATA
 * derivations), marshalled like the others (codec.c): the client sends the
 * pointees, the agent rebuilds the same C struct in its arena with pointers
 * into it, so the module's own parser (Sources/PKCS11/MechanismParameters+KDF.swift)
 * judges every value, and its errors are its own. The client reads only what
 * the caller's struct names, and only within bounds: a count or a length past
 * a bound crosses as NULL with that count, for the module to refuse.
 *
 * Outputs: SP 800-108's additional derived keys hand back handles through
 * phKey pointers. The agent gives each a slot holding the caller's value
 * and returns them all in the reply (whatever the rv: the module sets them
 * to CK_INVALID_HANDLE on failure); the client writes them back.
 */
#include <string.h>
#include "codec_internal.h"

/* Bounds on what the client reads of a caller's arrays (the module's own
 * limits are lower: 64 data parameters, 32 additional keys). */
#define MAX_ARRAY 4096u
#define MAX_SIZED 4096u
#define PBKD2_MAX_PASSWORD 65535u   /* the module's line between a length and a pointer */

static size_t expected_size(CK_MECHANISM_TYPE t) {
    switch (t) {
    case CKM_CONCATENATE_BASE_AND_DATA: case CKM_CONCATENATE_DATA_AND_BASE: case CKM_XOR_BASE_AND_DATA:
        return sizeof(CK_KEY_DERIVATION_STRING_DATA);
    case CKM_HKDF_DERIVE: case CKM_HKDF_DATA: return sizeof(CK_HKDF_PARAMS);
    case CKM_SP800_108_COUNTER_KDF: return sizeof(CK_SP800_108_KDF_PARAMS);
    case CKM_SP800_108_FEEDBACK_KDF: return sizeof(CK_SP800_108_FEEDBACK_KDF_PARAMS);
    case CKM_PKCS5_PBKD2: return sizeof(CK_PKCS5_PBKD2_PARAMS2);
    default: return 0;
    }
}

/* ---- client ------------------------------------------------------------------ */

static CK_RV put_sp800(ksa_buf *b, const CK_MECHANISM *m) {
    int feedback = m->mechanism == CKM_SP800_108_FEEDBACK_KDF;
    CK_MECHANISM_TYPE prf;
    CK_ULONG count, keyCount, ivLen = 0;
    const CK_PRF_DATA_PARAM *data;
    const CK_DERIVED_KEY *keys;
    const void *iv = NULL;
    if (feedback) {
        const CK_SP800_108_FEEDBACK_KDF_PARAMS *p = m->pParameter;
        prf = p->prfType; count = p->ulNumberOfDataParams; data = p->pDataParams;
        ivLen = p->ulIVLen; iv = p->pIV; keyCount = p->ulAdditionalDerivedKeys; keys = p->pAdditionalDerivedKeys;
    } else {
        const CK_SP800_108_KDF_PARAMS *p = m->pParameter;
        prf = p->prfType; count = p->ulNumberOfDataParams; data = p->pDataParams;
        keyCount = p->ulAdditionalDerivedKeys; keys = p->pAdditionalDerivedKeys;
    }
    ksa_put_u8(b, PARAM_SP800);
    ksa_put_u64(b, prf);
    ksa_put_u64(b, count);
    int dataPresent = data != NULL && count <= MAX_ARRAY;
    ksa_put_u8(b, (uint8_t)dataPresent);
    CK_RV rv = CKR_OK;
    for (CK_ULONG i = 0; dataPresent && i < count && rv == CKR_OK; i++) {
        ksa_put_u64(b, data[i].type);
        rv = ksa_put_bytes(b, data[i].pValue, data[i].ulValueLen);
    }
    if (rv == CKR_OK && feedback) rv = ksa_put_bytes(b, iv, ivLen);
    ksa_put_u64(b, keyCount);
    int keysPresent = keys != NULL && keyCount <= MAX_ARRAY;
    ksa_put_u8(b, (uint8_t)keysPresent);
    for (CK_ULONG i = 0; keysPresent && i < keyCount && rv == CKR_OK; i++) {
        rv = ksa_put_template(b, keys[i].pTemplate, keys[i].ulAttributeCount, 1);
        ksa_put_u8(b, keys[i].phKey != NULL);
        ksa_put_u64(b, keys[i].phKey ? *keys[i].phKey : 0);
    }
    return rv;
}

int ksa_put_kdf_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv) {
    size_t size = expected_size(m->mechanism);
    if (!size) return 0;
    *rv = CKR_OK;
    if (m->ulParameterLen != size) {
        /* The module refuses a wrong-sized parameter on its size alone; it must
         * see the call to answer in its own order (a bad session first). */
        ksa_put_u8(b, PARAM_SIZED);
        ksa_put_u64(b, m->ulParameterLen);
        return 1;
    }
    switch (m->mechanism) {
    case CKM_HKDF_DERIVE: case CKM_HKDF_DATA: {
        const CK_HKDF_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_HKDF);
        ksa_put_u8(b, p->bExtract);
        ksa_put_u8(b, p->bExpand);
        ksa_put_u64(b, p->prfHashMechanism);
        ksa_put_u64(b, p->ulSaltType);
        ksa_put_bytes(b, p->pSalt, p->ulSaltLen);
        ksa_put_u64(b, p->hSaltKey);
        *rv = ksa_put_bytes(b, p->pInfo, p->ulInfoLen);
        return 1;
    }
    case CKM_SP800_108_COUNTER_KDF: case CKM_SP800_108_FEEDBACK_KDF:
        *rv = put_sp800(b, m);
        return 1;
    case CKM_PKCS5_PBKD2: {
        /* Both layouts, told apart as the module does: a last field past
         * 65535 can only be a 2.20 pointer to the length. */
        const CK_PKCS5_PBKD2_PARAMS2 *p = m->pParameter;
        CK_ULONG passwordLen = p->ulPasswordLen;
        if (passwordLen > PBKD2_MAX_PASSWORD) {
            const CK_PKCS5_PBKD2_PARAMS *old = m->pParameter;
            passwordLen = *old->ulPasswordLen;
            /* The module refuses this length; sent on, it would read the
             * length back as a pointer in the agent. */
            if (passwordLen > PBKD2_MAX_PASSWORD) { *rv = CKR_MECHANISM_PARAM_INVALID; return 1; }
        }
        ksa_put_u8(b, PARAM_PBKD2);
        ksa_put_u64(b, p->saltSource);
        ksa_put_bytes(b, p->pSaltSourceData, p->ulSaltSourceDataLen);
        ksa_put_u64(b, p->iterations);
        ksa_put_u64(b, p->prf);
        ksa_put_bytes(b, p->pPrfData, p->ulPrfDataLen);
        *rv = ksa_put_bytes(b, p->pPassword, passwordLen);
        return 1;
    }
    default: {
        const CK_KEY_DERIVATION_STRING_DATA *p = m->pParameter;
        ksa_put_u8(b, PARAM_STRING);
        *rv = ksa_put_bytes(b, p->pData, p->ulLen);
        return 1;
    }
    }
}

/* ---- agent --------------------------------------------------------------------- */

static int get_sp800(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m) {
    int feedback = m->mechanism == CKM_SP800_108_FEEDBACK_KDF;
    CK_MECHANISM_TYPE prf = ksa_get_u64(r);
    uint64_t count = ksa_get_u64(r);
    uint8_t dataPresent = ksa_get_u8(r);
    if (r->failed || dataPresent > 1 || (dataPresent && count > MAX_ARRAY)) return -1;
    CK_PRF_DATA_PARAM *data = NULL;
    if (dataPresent) {
        data = ksa_arena_alloc(a, count ? count * sizeof *data : 1);
        if (!data) return -1;
        for (uint64_t i = 0; i < count; i++) {
            data[i].type = ksa_get_u64(r);
            if (ksa_get_bytes(r, &data[i].pValue, &data[i].ulValueLen)) return -1;
        }
    }
    void *iv = NULL;
    CK_ULONG ivLen = 0;
    if (feedback && ksa_get_bytes(r, &iv, &ivLen)) return -1;
    uint64_t keyCount = ksa_get_u64(r);
    uint8_t keysPresent = ksa_get_u8(r);
    if (r->failed || keysPresent > 1 || (keysPresent && keyCount > MAX_ARRAY)) return -1;
    CK_DERIVED_KEY *keys = NULL;
    if (keysPresent) {
        keys = ksa_arena_alloc(a, keyCount ? keyCount * sizeof *keys : 1);
        if (!keys) return -1;
        for (uint64_t i = 0; i < keyCount; i++) {
            if (ksa_get_template(r, a, 1, &keys[i].pTemplate, &keys[i].ulAttributeCount)) return -1;
            uint8_t has = ksa_get_u8(r);
            uint64_t initial = ksa_get_u64(r);
            if (r->failed || has > 1) return -1;
            if (has) {
                keys[i].phKey = ksa_arena_alloc(a, sizeof(CK_OBJECT_HANDLE));
                if (!keys[i].phKey) return -1;
                *keys[i].phKey = (CK_OBJECT_HANDLE)initial;
            }
        }
    }
    if (feedback) {
        CK_SP800_108_FEEDBACK_KDF_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        *p = (CK_SP800_108_FEEDBACK_KDF_PARAMS){prf, (CK_ULONG)count, data, ivLen, iv, (CK_ULONG)keyCount, keys};
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
    } else {
        CK_SP800_108_KDF_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        *p = (CK_SP800_108_KDF_PARAMS){prf, (CK_ULONG)count, data, (CK_ULONG)keyCount, keys};
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
    }
    return r->failed ? -1 : 0;
}

int ksa_get_kdf_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc) {
    size_t size = expected_size(m->mechanism);
    if (!size) return -1;
    switch (enc) {
    case PARAM_SIZED: {
        uint64_t len = ksa_get_u64(r);
        /* Only a size the module refuses on its own: zeros never pass for a struct. */
        if (r->failed || len == size || len > MAX_SIZED) return -1;
        m->pParameter = ksa_arena_alloc(a, (size_t)len);
        m->ulParameterLen = (CK_ULONG)len;
        return m->pParameter ? 0 : -1;
    }
    case PARAM_STRING: {
        if (size != sizeof(CK_KEY_DERIVATION_STRING_DATA)) return -1;
        CK_KEY_DERIVATION_STRING_DATA *p = ksa_arena_alloc(a, sizeof *p);
        void *d;
        if (!p || ksa_get_bytes(r, &d, &p->ulLen)) return -1;
        p->pData = d;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return 0;
    }
    case PARAM_HKDF: {
        if (m->mechanism != CKM_HKDF_DERIVE && m->mechanism != CKM_HKDF_DATA) return -1;
        CK_HKDF_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        void *d;
        p->bExtract = ksa_get_u8(r);
        p->bExpand = ksa_get_u8(r);
        p->prfHashMechanism = ksa_get_u64(r);
        p->ulSaltType = ksa_get_u64(r);
        if (ksa_get_bytes(r, &d, &p->ulSaltLen)) return -1;
        p->pSalt = d;
        p->hSaltKey = ksa_get_u64(r);
        if (ksa_get_bytes(r, &d, &p->ulInfoLen)) return -1;
        p->pInfo = d;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return r->failed ? -1 : 0;
    }
    case PARAM_SP800:
        if (m->mechanism != CKM_SP800_108_COUNTER_KDF && m->mechanism != CKM_SP800_108_FEEDBACK_KDF) return -1;
        return get_sp800(r, a, m);
    case PARAM_PBKD2: {
        if (m->mechanism != CKM_PKCS5_PBKD2) return -1;
        CK_PKCS5_PBKD2_PARAMS2 *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return -1;
        p->saltSource = ksa_get_u64(r);
        if (ksa_get_bytes(r, &p->pSaltSourceData, &p->ulSaltSourceDataLen)) return -1;
        p->iterations = ksa_get_u64(r);
        p->prf = ksa_get_u64(r);
        if (ksa_get_bytes(r, &p->pPrfData, &p->ulPrfDataLen)) return -1;
        void *d;
        if (ksa_get_bytes(r, &d, &p->ulPasswordLen)) return -1;
        p->pPassword = d;
        /* A length the module would read as a 2.20 pointer never reaches it. */
        if (p->ulPasswordLen > PBKD2_MAX_PASSWORD) return -1;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        return r->failed ? -1 : 0;
    }
    default:
        return -1;
    }
}

/* The additional keys of an SP 800-108 parameter as the codec built it (the
 * agent's) or as the caller gave it (the client's); 0 when none. */
static CK_ULONG additional_keys(const CK_MECHANISM *m, const CK_DERIVED_KEY **keys) {
    *keys = NULL;
    if (!m || !m->pParameter) return 0;
    CK_ULONG n = 0;
    if (m->mechanism == CKM_SP800_108_COUNTER_KDF && m->ulParameterLen == sizeof(CK_SP800_108_KDF_PARAMS)) {
        const CK_SP800_108_KDF_PARAMS *p = m->pParameter;
        n = p->ulAdditionalDerivedKeys; *keys = p->pAdditionalDerivedKeys;
    } else if (m->mechanism == CKM_SP800_108_FEEDBACK_KDF && m->ulParameterLen == sizeof(CK_SP800_108_FEEDBACK_KDF_PARAMS)) {
        const CK_SP800_108_FEEDBACK_KDF_PARAMS *p = m->pParameter;
        n = p->ulAdditionalDerivedKeys; *keys = p->pAdditionalDerivedKeys;
    }
    if (!*keys || n > MAX_ARRAY) return 0;
    return n;
}

void ksa_put_mechanism_outputs(ksa_buf *b, const CK_MECHANISM *m) {
    const CK_DERIVED_KEY *keys;
    CK_ULONG n = additional_keys(m, &keys);
    ksa_put_u8(b, n != 0);
    if (!n) return;
    ksa_put_u32(b, (uint32_t)n);
    for (CK_ULONG i = 0; i < n; i++) {
        ksa_put_u8(b, keys[i].phKey != NULL);
        ksa_put_u64(b, keys[i].phKey ? *keys[i].phKey : 0);
    }
}

int ksa_apply_mechanism_outputs(ksa_rd *r, const CK_MECHANISM *m, int write) {
    uint8_t has = ksa_get_u8(r);
    if (r->failed || has > 1) return -1;
    if (!has) return 0;
    const CK_DERIVED_KEY *keys;
    CK_ULONG n = additional_keys(m, &keys);
    uint32_t count = ksa_get_u32(r);
    /* Only the caller's own phKey slots, exactly as many as it gave. */
    if (r->failed || n == 0 || count != n) return -1;
    for (CK_ULONG i = 0; i < n; i++) {
        uint8_t present = ksa_get_u8(r);
        uint64_t v = ksa_get_u64(r);
        if (r->failed || present != (keys[i].phKey != NULL)) return -1;
        if (write && present) *keys[i].phKey = (CK_OBJECT_HANDLE)v;
    }
    return 0;
}
