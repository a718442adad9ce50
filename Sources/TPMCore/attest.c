// Key attestation over tpm2-tss ESAPI (issue 31): the token's attestation
// key, TPM2_Certify, the endorsement key and its certificate, and
// TPM2_ActivateCredential. See include/ktpm.h and docs/tpm.md, "Key attestation".
#include "ktpm.h"
#include "ktpm_internal.h"

#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>

/// PolicySecret(TPM_RH_ENDORSEMENT) with an empty nonce, cpHash, policyRef and no expiry:
/// the authPolicy of the TCG EK Credential Profile's low-range templates (L-1, L-2).
static const uint8_t ek_policy[32] = {
    0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xB3, 0xF8, 0x1A, 0x90, 0xCC, 0x8D, 0x46, 0xA5, 0xD7, 0x24,
    0xFD, 0x52, 0xD7, 0x6E, 0x06, 0x52, 0x0B, 0x64, 0xF2, 0xA1, 0xDA, 0x1B, 0x33, 0x14, 0x69, 0xAA };

/// TCG EK Credential Profile 2.x, templates L-1 (RSA 2048) and L-2 (ECC P-256): what a
/// manufacturer's EK certificate names, so the key re-created here is the certified one.
static int ek_template(int ek, TPM2B_PUBLIC *p) {
    memset(p, 0, sizeof *p);
    TPMT_PUBLIC *a = &p->publicArea;
    a->nameAlg = TPM2_ALG_SHA256;
    a->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
        TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    a->authPolicy.size = 32;
    memcpy(a->authPolicy.buffer, ek_policy, 32);
    if (ek == KTPM_EK_RSA) {
        a->type = TPM2_ALG_RSA;
        a->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_AES;
        a->parameters.rsaDetail.symmetric.keyBits.aes = 128;
        a->parameters.rsaDetail.symmetric.mode.aes = TPM2_ALG_CFB;
        a->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        a->parameters.rsaDetail.keyBits = 2048;
        a->parameters.rsaDetail.exponent = 0;
        a->unique.rsa.size = 256;
        return 1;
    }
    if (ek == KTPM_EK_ECC) {
        a->type = TPM2_ALG_ECC;
        a->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
        a->parameters.eccDetail.symmetric.keyBits.aes = 128;
        a->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
        a->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        a->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
        a->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
        a->unique.ecc.x.size = 32;
        a->unique.ecc.y.size = 32;
        return 1;
    }
    return 0;
}

/// The attestation key's template: restricted, signing only, ECDSA with SHA-256, born in
/// this TPM (fixedTPM, fixedParent, sensitiveDataOrigin), empty authorization and so noDA
/// (an empty authorization guards nothing: its use must not fail while the TPM is in
/// dictionary-attack lockout, as it did on swtpm after a few unclean stops). A primary
/// key, as the TCG's IAK templates ("TPM 2.0 Keys for Device Identity and Attestation"):
/// derived from the endorsement seed and unique.ecc.x, so nothing of it needs storing and
/// TPM2_Clear (owner) does not change it; only a new endorsement seed does (and with it the EK).
static TPM2B_PUBLIC ak_template(const uint8_t seed[32]) {
    TPM2B_PUBLIC p = { 0 };
    TPMT_PUBLIC *a = &p.publicArea;
    a->type = TPM2_ALG_ECC;
    a->nameAlg = TPM2_ALG_SHA256;
    a->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
        TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_NODA;
    a->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    a->parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    a->parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    a->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    a->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    a->unique.ecc.x.size = 32;
    memcpy(a->unique.ecc.x.buffer, seed, 32);
    a->unique.ecc.y.size = 32;
    return p;
}

/// A primary key in the endorsement hierarchy (empty endorsement authorization); the caller flushes *h.
static uint32_t endorsement_primary(ktpm *t, TPM2B_PUBLIC *tmpl, ESYS_TR *h, TPM2B_PUBLIC **pub) {
    TPM2B_SENSITIVE_CREATE sens = { 0 };
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION none = { 0 };
    TPM2B_CREATION_DATA *cd = NULL;
    TPM2B_DIGEST *ch = NULL;
    TPMT_TK_CREATION *tk = NULL;
    *h = ESYS_TR_NONE;
    TSS2_RC rc = Esys_CreatePrimary(ktpm_esys(t), ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                    &sens, tmpl, &outside, &none, h, pub, &cd, &ch, &tk);
    Esys_Free(cd); Esys_Free(ch); Esys_Free(tk);
    if (rc != TSS2_RC_SUCCESS) *h = ESYS_TR_NONE;
    return rc;
}

static uint32_t marshal_public(const TPM2B_PUBLIC *pub, uint8_t *out, size_t cap, size_t *len) {
    size_t off = 0;
    if (Tss2_MU_TPM2B_PUBLIC_Marshal(pub, out, cap, &off) != TSS2_RC_SUCCESS) return KTPM_RC_BUFFER;
    *len = off;
    return TSS2_RC_SUCCESS;
}

uint32_t ktpm_ek_public_area(ktpm *t, int ek, uint8_t *out, size_t cap, size_t *len) {
    TPM2B_PUBLIC tmpl, *pub = NULL;
    ESYS_TR h;
    if (!ek_template(ek, &tmpl)) return KTPM_RC_ARGUMENT;
    TSS2_RC rc = endorsement_primary(t, &tmpl, &h, &pub);
    if (rc != TSS2_RC_SUCCESS) return rc;
    Esys_FlushContext(ktpm_esys(t), h);
    rc = marshal_public(pub, out, cap, len);
    Esys_Free(pub);
    return rc;
}

uint32_t ktpm_ak_public(ktpm *t, const uint8_t seed[32], uint8_t *out, size_t cap, size_t *len) {
    TPM2B_PUBLIC tmpl = ak_template(seed), *pub = NULL;
    ESYS_TR h;
    TSS2_RC rc = endorsement_primary(t, &tmpl, &h, &pub);
    if (rc != TSS2_RC_SUCCESS) return rc;
    Esys_FlushContext(ktpm_esys(t), h);
    rc = marshal_public(pub, out, cap, len);
    Esys_Free(pub);
    return rc;
}

uint32_t ktpm_certify(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                      const uint8_t seed[32], const uint8_t *qual, size_t qlen, uint8_t *attest, size_t acap,
                      size_t *alen, uint8_t *sig, size_t scap, size_t *slen, uint8_t *akpub, size_t akcap,
                      size_t *aklen) {
    TPM2B_DATA q = { 0 };
    if (qlen > sizeof q.buffer) return KTPM_RC_ARGUMENT;
    q.size = (UINT16)qlen;
    if (qlen) memcpy(q.buffer, qual, qlen);
    ESYS_TR key;
    CHECK(ktpm_load(t, blob, len, auth, authlen, &key));
    // The SRK is no longer needed: its slot goes to the AK (a TPM without a resource manager has 3).
    ktpm_srk_release(t);
    TPM2B_PUBLIC tmpl = ak_template(seed), *pub = NULL;
    ESYS_TR ak;
    TSS2_RC rc = endorsement_primary(t, &tmpl, &ak, &pub);
    if (rc != TSS2_RC_SUCCESS) { Esys_FlushContext(ktpm_esys(t), key); return rc; }
    TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_NULL }; // the AK's own: ECDSA with SHA-256
    TPM2B_ATTEST *info = NULL;
    TPMT_SIGNATURE *signature = NULL;
    rc = Esys_Certify(ktpm_esys(t), key, ak, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE, &q, &scheme, &info,
                      &signature);
    Esys_FlushContext(ktpm_esys(t), ak);
    Esys_FlushContext(ktpm_esys(t), key);
    if (rc == TSS2_RC_SUCCESS) {
        size_t off = 0;
        if (info->size > acap) {
            rc = KTPM_RC_BUFFER;
        } else {
            memcpy(attest, info->attestationData, info->size);
            *alen = info->size;
            if (Tss2_MU_TPMT_SIGNATURE_Marshal(signature, sig, scap, &off) != TSS2_RC_SUCCESS) rc = KTPM_RC_BUFFER;
            else *slen = off;
        }
        if (rc == TSS2_RC_SUCCESS) rc = marshal_public(pub, akpub, akcap, aklen);
    }
    Esys_Free(info); Esys_Free(signature); Esys_Free(pub);
    return rc;
}

uint32_t ktpm_nv_read(ktpm *t, uint32_t index, uint8_t *out, size_t cap, size_t *len) {
    ESYS_CONTEXT *e = ktpm_esys(t);
    ESYS_TR nv = ESYS_TR_NONE;
    CHECK(Esys_TR_FromTPMPublic(e, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv));
    TPM2B_NV_PUBLIC *pub = NULL;
    TSS2_RC rc = Esys_NV_ReadPublic(e, nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, NULL);
    size_t size = rc == TSS2_RC_SUCCESS ? pub->nvPublic.dataSize : 0;
    Esys_Free(pub);
    if (rc == TSS2_RC_SUCCESS && size > cap) rc = KTPM_RC_BUFFER;
    // NV_Read returns at most TPM2_PT_NV_BUFFER_MAX bytes; 512 is below every TPM's.
    size_t off = 0;
    while (rc == TSS2_RC_SUCCESS && off < size) {
        UINT16 chunk = (UINT16)(size - off > 512 ? 512 : size - off);
        TPM2B_MAX_NV_BUFFER *data = NULL;
        // The owner reads (index attribute TPMA_NV_OWNERREAD of EK certificates), empty owner authorization.
        rc = Esys_NV_Read(e, ESYS_TR_RH_OWNER, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, chunk, (UINT16)off, &data);
        if (rc == TSS2_RC_SUCCESS) {
            if (data->size != chunk) rc = KTPM_RC_BAD_BLOB;
            else memcpy(out + off, data->buffer, chunk);
            off += chunk;
        }
        Esys_Free(data);
    }
    Esys_TR_Close(e, &nv);
    if (rc == TSS2_RC_SUCCESS) *len = size;
    return rc;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

uint32_t ktpm_activate(ktpm *t, const uint8_t seed[32], int ek, const uint8_t *cred, size_t credlen, uint8_t *out,
                       size_t cap, size_t *outlen) {
    TPM2B_ID_OBJECT id = { 0 };
    TPM2B_ENCRYPTED_SECRET secret = { 0 };
    TPM2B_PUBLIC ektmpl;
    if (!ek_template(ek, &ektmpl)) return KTPM_RC_ARGUMENT;
    size_t off = 8;
    if (credlen < 8 || be32(cred) != 0xBADCC0DEu || be32(cred + 4) != 1) return KTPM_RC_BAD_BLOB;
    if (Tss2_MU_TPM2B_ID_OBJECT_Unmarshal(cred, credlen, &off, &id) != TSS2_RC_SUCCESS ||
        Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal(cred, credlen, &off, &secret) != TSS2_RC_SUCCESS || off != credlen)
        return KTPM_RC_BAD_BLOB;
    ESYS_CONTEXT *e = ktpm_esys(t);
    TPM2B_PUBLIC aktmpl = ak_template(seed), *pub = NULL;
    ESYS_TR ak, ekh, session = ESYS_TR_NONE;
    CHECK(endorsement_primary(t, &aktmpl, &ak, &pub));
    Esys_Free(pub);
    pub = NULL;
    TSS2_RC rc = endorsement_primary(t, &ektmpl, &ekh, &pub);
    Esys_Free(pub);
    if (rc != TSS2_RC_SUCCESS) { Esys_FlushContext(e, ak); return rc; }
    // The EK's user role is its policy only: PolicySecret of the endorsement hierarchy.
    TPMT_SYM_DEF sym = { .algorithm = TPM2_ALG_NULL };
    rc = Esys_StartAuthSession(e, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                               TPM2_SE_POLICY, &sym, TPM2_ALG_SHA256, &session);
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_NONCE nonce = { 0 };
        TPM2B_DIGEST cp = { 0 };
        TPM2B_NONCE ref = { 0 };
        TPM2B_TIMEOUT *timeout = NULL;
        TPMT_TK_AUTH *ticket = NULL;
        rc = Esys_PolicySecret(e, ESYS_TR_RH_ENDORSEMENT, session, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &nonce,
                               &cp, &ref, 0, &timeout, &ticket);
        Esys_Free(timeout); Esys_Free(ticket);
    }
    TPM2B_DIGEST *info = NULL;
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_ActivateCredential(e, ak, ekh, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, &id, &secret, &info);
    if (session != ESYS_TR_NONE && rc != TSS2_RC_SUCCESS) Esys_FlushContext(e, session); // continueSession is clear: gone on success
    Esys_FlushContext(e, ekh);
    Esys_FlushContext(e, ak);
    if (rc == TSS2_RC_SUCCESS) {
        if (info->size > cap) rc = KTPM_RC_BUFFER;
        else { memcpy(out, info->buffer, info->size); *outlen = info->size; }
        explicit_bzero(info->buffer, info->size);
    }
    Esys_Free(info);
    return rc;
}
