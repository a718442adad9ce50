/*
 * Mechanism parameters with pointers of issue 13's second round (the
 * module's Sources/PKCS11/MechanismParameters+Breadth.swift decodes them):
 * CK_CCM_PARAMS (CKM_AES_CCM), CK_AES_CBC_ENCRYPT_DATA_PARAMS /
 * CK_DES_CBC_ENCRYPT_DATA_PARAMS (CKM_AES/DES3_CBC_ENCRYPT_DATA) and
 * CK_KEY_DERIVATION_STRING_DATA for CKM_AES/DES3_ECB_ENCRYPT_DATA. As in
 * codec.c and kdf_params.c: the client sends the pointees, the agent rebuilds
 * the struct in its arena, and the module judges every value; a struct of
 * the wrong size crosses as zeros of its size, for the module to refuse.
 */
#include <string.h>
#include "codec_internal.h"

/* Kept apart from codec_internal.h's list so branches that add kinds merge. */
enum { PARAM_CCM = 40, PARAM_CBC_DATA = 41, PARAM_ECB_DATA = 42, PARAM_BREADTH_SIZED = 43 };
#define MAX_SIZED 4096u

static size_t expected_size(CK_MECHANISM_TYPE t) {
    switch (t) {
    case CKM_AES_CCM: return sizeof(CK_CCM_PARAMS);
    case CKM_AES_CBC_ENCRYPT_DATA: return sizeof(CK_AES_CBC_ENCRYPT_DATA_PARAMS);
    case CKM_DES3_CBC_ENCRYPT_DATA: return sizeof(CK_DES_CBC_ENCRYPT_DATA_PARAMS);
    case CKM_AES_ECB_ENCRYPT_DATA: case CKM_DES3_ECB_ENCRYPT_DATA: return sizeof(CK_KEY_DERIVATION_STRING_DATA);
    default: return 0;
    }
}

int ksa_put_breadth_param(ksa_buf *b, const CK_MECHANISM *m, CK_RV *rv) {
    size_t size = expected_size(m->mechanism);
    if (!size) return 0;
    *rv = CKR_OK;
    if (m->ulParameterLen != size) {
        ksa_put_u8(b, PARAM_BREADTH_SIZED);
        ksa_put_u64(b, m->ulParameterLen);
        return 1;
    }
    switch (m->mechanism) {
    case CKM_AES_CCM: {
        const CK_CCM_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_CCM);
        ksa_put_u64(b, p->ulDataLen);
        ksa_put_bytes(b, p->pNonce, p->ulNonceLen);
        ksa_put_bytes(b, p->pAAD, p->ulAADLen);
        ksa_put_u64(b, p->ulMACLen);
        return 1;
    }
    case CKM_AES_CBC_ENCRYPT_DATA: {
        const CK_AES_CBC_ENCRYPT_DATA_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_CBC_DATA);
        ksa_put_raw(b, p->iv, sizeof p->iv);
        *rv = ksa_put_bytes(b, p->data_params, p->length);
        return 1;
    }
    case CKM_DES3_CBC_ENCRYPT_DATA: {
        const CK_DES_CBC_ENCRYPT_DATA_PARAMS *p = m->pParameter;
        ksa_put_u8(b, PARAM_CBC_DATA);
        ksa_put_raw(b, p->iv, sizeof p->iv);
        *rv = ksa_put_bytes(b, p->data_params, p->length);
        return 1;
    }
    default: {
        const CK_KEY_DERIVATION_STRING_DATA *p = m->pParameter;
        ksa_put_u8(b, PARAM_ECB_DATA);
        *rv = ksa_put_bytes(b, p->pData, p->ulLen);
        return 1;
    }
    }
}

/* 1 when `enc` is one of this file's kinds (then *ok: 0, or -1 malformed), else 0. */
int ksa_get_breadth_param(ksa_rd *r, ksa_arena *a, CK_MECHANISM *m, uint8_t enc, int *ok) {
    if (enc < PARAM_CCM || enc > PARAM_BREADTH_SIZED) return 0;
    *ok = -1;
    size_t size = expected_size(m->mechanism);
    if (!size) return 1;
    void *d;
    CK_ULONG n;
    switch (enc) {
    case PARAM_BREADTH_SIZED: {
        uint64_t len = ksa_get_u64(r);
        if (r->failed || len == size || len > MAX_SIZED) return 1;
        m->pParameter = ksa_arena_alloc(a, (size_t)len);
        m->ulParameterLen = (CK_ULONG)len;
        if (m->pParameter) *ok = 0;
        return 1;
    }
    case PARAM_CCM: {
        if (m->mechanism != CKM_AES_CCM) return 1;
        CK_CCM_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
        if (!p) return 1;
        p->ulDataLen = ksa_get_u64(r);
        if (ksa_get_bytes(r, &d, &n)) return 1;
        p->pNonce = d;
        p->ulNonceLen = n;
        if (ksa_get_bytes(r, &d, &n)) return 1;
        p->pAAD = d;
        p->ulAADLen = n;
        p->ulMACLen = ksa_get_u64(r);
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        break;
    }
    case PARAM_CBC_DATA: {
        if (m->mechanism == CKM_AES_CBC_ENCRYPT_DATA) {
            CK_AES_CBC_ENCRYPT_DATA_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
            const uint8_t *iv = ksa_get_raw(r, sizeof p->iv);
            if (!p || !iv || ksa_get_bytes(r, &d, &n)) return 1;
            memcpy(p->iv, iv, sizeof p->iv);
            p->data_params = d;
            p->length = n;
            m->pParameter = p;
            m->ulParameterLen = sizeof *p;
        } else if (m->mechanism == CKM_DES3_CBC_ENCRYPT_DATA) {
            CK_DES_CBC_ENCRYPT_DATA_PARAMS *p = ksa_arena_alloc(a, sizeof *p);
            const uint8_t *iv = ksa_get_raw(r, sizeof p->iv);
            if (!p || !iv || ksa_get_bytes(r, &d, &n)) return 1;
            memcpy(p->iv, iv, sizeof p->iv);
            p->data_params = d;
            p->length = n;
            m->pParameter = p;
            m->ulParameterLen = sizeof *p;
        } else {
            return 1;
        }
        break;
    }
    case PARAM_ECB_DATA: {
        if (m->mechanism != CKM_AES_ECB_ENCRYPT_DATA && m->mechanism != CKM_DES3_ECB_ENCRYPT_DATA) return 1;
        CK_KEY_DERIVATION_STRING_DATA *p = ksa_arena_alloc(a, sizeof *p);
        if (!p || ksa_get_bytes(r, &d, &p->ulLen)) return 1;
        p->pData = d;
        m->pParameter = p;
        m->ulParameterLen = sizeof *p;
        break;
    }
    default:
        return 1;
    }
    if (!r->failed) *ok = 0;
    return 1;
}
