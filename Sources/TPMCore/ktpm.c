// keyshare's TPM work over tpm2-tss ESAPI; see include/ktpm.h and docs/tpm.md.
#include "ktpm.h"
#include "ktpm_internal.h"
#include "tcti_cloexec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

struct ktpm {
    TSS2_TCTI_CONTEXT *tcti;
    int own_tcti;    // tcti is keyshare's close-on-exec one (tcti_cloexec.c), not tpm2-tss's loader
    ESYS_CONTEXT *esys;
    ESYS_TR srk;     // ESYS_TR_NONE until first needed
    int srk_cached;  // srk came from the saved context (srk_cache), not from CreatePrimary
    char *tcti_conf; // the TCTI string: the saved SRK context is kept per TPM
};


/// tpm2-tss logs to the host's stderr (WARNING and ERROR lines for a wrong PIN,
/// a probe that finds no TPM, a stale saved context) unless TSS2_LOG says
/// otherwise, and it has no other switch: each of its source files reads
/// TSS2_LOG once, at its first log call, into a private static. So TSS2_LOG
/// is set to all+NONE if (and only if) the host has not set it, once, before
/// this process's first TSS call. Once, because glibc's setenv may free the
/// environment array an earlier setenv made while another thread's getenv
/// reads it: one call is the least exposure, and in a host that never called
/// setenv it frees nothing (the initial array is copied). Not restored
/// afterwards, because a file that logs later would read it then. A host that sets TSS2_LOG keeps
/// its choice. The price: the host's children inherit TSS2_LOG=all+NONE
/// (docs/tpm.md).
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_tss(void) {
    if (!getenv("TSS2_LOG")) setenv("TSS2_LOG", "all+NONE", 0);
}

uint32_t ktpm_open(const char *tcti, ktpm **out) {
    *out = NULL;
    pthread_once(&quiet_once, quiet_tss);
    ktpm *t = calloc(1, sizeof *t);
    if (!t) return KTPM_RC_BUFFER;
    t->srk = ESYS_TR_NONE;
    t->tcti_conf = strdup(tcti ? tcti : "");
    if (!t->tcti_conf) { free(t); return KTPM_RC_BUFFER; }
    // swtpm and TPM devices through keyshare's own TCTI, whose descriptors are close-on-exec; others through tpm2-tss.
    t->own_tcti = ktcti_handles(tcti);
    TSS2_RC rc = t->own_tcti ? ktcti_open(tcti, &t->tcti) : Tss2_TctiLdr_Initialize(tcti, &t->tcti);
    if (rc != TSS2_RC_SUCCESS) { free(t->tcti_conf); free(t); return rc; }
    rc = Esys_Initialize(&t->esys, t->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        if (t->own_tcti) ktcti_close(t->tcti); else Tss2_TctiLdr_Finalize(&t->tcti);
        free(t->tcti_conf);
        free(t);
        return rc;
    }
    *out = t;
    return TSS2_RC_SUCCESS;
}

void ktpm_close(ktpm *t) {
    if (!t) return;
    if (t->srk != ESYS_TR_NONE) Esys_FlushContext(t->esys, t->srk);
    Esys_Finalize(&t->esys);
    if (t->own_tcti) ktcti_close(t->tcti); else Tss2_TctiLdr_Finalize(&t->tcti);
    free(t->tcti_conf);
    free(t);
}

uint32_t ktpm_probe(ktpm *t) {
    TPM2B_DIGEST *r = NULL;
    TSS2_RC rc = Esys_GetRandom(t->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, 1, &r);
    Esys_Free(r);
    return rc;
}

const char *ktpm_rc_text(uint32_t rc) {
    switch (rc) {
    case KTPM_RC_BAD_BLOB: return "keyshare: malformed TPM object blob";
    case KTPM_RC_BUFFER: return "keyshare: buffer too small";
    case KTPM_RC_ARGUMENT: return "keyshare: bad argument";
    default: return Tss2_RC_Decode(rc);
    }
}

// MARK: templates

static const TPMA_OBJECT key_attrs = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
    TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH;

/// The storage root key, TCG "TPM v2.0 Provisioning Guidance" ECC P-256 template
/// (unique x and y: 32 zero bytes each), so every run re-creates the same key.
static TPM2B_PUBLIC srk_template(void) {
    TPM2B_PUBLIC p = { 0 };
    p.publicArea.type = TPM2_ALG_ECC;
    p.publicArea.nameAlg = TPM2_ALG_SHA256;
    p.publicArea.objectAttributes = key_attrs | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    p.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    p.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    p.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    p.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    p.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    p.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    p.publicArea.unique.ecc.x.size = 32;
    p.publicArea.unique.ecc.y.size = 32;
    return p;
}

static int key_template(int kind, int noda, int imported, TPM2B_PUBLIC *p) {
    memset(p, 0, sizeof *p);
    TPMT_PUBLIC *a = &p->publicArea;
    a->nameAlg = TPM2_ALG_SHA256;
    // An imported key cannot claim to have been born here (fixedTPM/sensitiveDataOrigin).
    a->objectAttributes = imported ? TPMA_OBJECT_USERWITHAUTH : key_attrs;
    if (noda) a->objectAttributes |= TPMA_OBJECT_NODA;
    switch (kind) {
    case KTPM_EC_P256:
    case KTPM_EC_P384:
        a->type = TPM2_ALG_ECC;
        a->objectAttributes |= TPMA_OBJECT_SIGN_ENCRYPT;
        a->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        a->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
        a->parameters.eccDetail.curveID = kind == KTPM_EC_P256 ? TPM2_ECC_NIST_P256 : TPM2_ECC_NIST_P384;
        a->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
        return 1;
    case KTPM_RSA_2048:
    case KTPM_RSA_3072:
        a->type = TPM2_ALG_RSA;
        // Scheme NULL: the caller picks per operation, and the raw private
        // operation (RSA_Decrypt with no scheme) makes PKCS #1 and PSS signatures.
        a->objectAttributes |= TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT;
        a->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
        a->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        a->parameters.rsaDetail.keyBits = kind == KTPM_RSA_2048 ? 2048 : 3072;
        a->parameters.rsaDetail.exponent = 0;
        return 1;
    default:
        return 0;
    }
}

static int set_auth(TPM2B_AUTH *dst, const uint8_t *auth, size_t authlen) {
    memset(dst, 0, sizeof *dst);
    if (authlen > sizeof dst->buffer) return 0;
    dst->size = (UINT16)authlen;
    if (authlen) memcpy(dst->buffer, auth, authlen);
    return 1;
}

static TPML_PCR_SELECTION pcr_selection(uint32_t mask) {
    TPML_PCR_SELECTION s = { 0 };
    s.count = 1;
    s.pcrSelections[0].hash = TPM2_ALG_SHA256;
    s.pcrSelections[0].sizeofSelect = 3;
    for (int i = 0; i < 24; i++)
        if (mask & (1u << i)) s.pcrSelections[0].pcrSelect[i / 8] |= (uint8_t)(1u << (i % 8));
    return s;
}

// MARK: blobs

static uint32_t blob_write(const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv, uint8_t *blob, size_t cap, size_t *len) {
    size_t off = 0;
    if (Tss2_MU_TPM2B_PUBLIC_Marshal(pub, blob, cap, &off) != TSS2_RC_SUCCESS) return KTPM_RC_BUFFER;
    if (Tss2_MU_TPM2B_PRIVATE_Marshal(priv, blob, cap, &off) != TSS2_RC_SUCCESS) return KTPM_RC_BUFFER;
    *len = off;
    return TSS2_RC_SUCCESS;
}

static uint32_t blob_read(const uint8_t *blob, size_t len, TPM2B_PUBLIC *pub, TPM2B_PRIVATE *priv) {
    size_t off = 0;
    memset(pub, 0, sizeof *pub);
    if (Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, len, &off, pub) != TSS2_RC_SUCCESS) return KTPM_RC_BAD_BLOB;
    if (priv) {
        memset(priv, 0, sizeof *priv);
        if (Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, len, &off, priv) != TSS2_RC_SUCCESS) return KTPM_RC_BAD_BLOB;
        if (off != len) return KTPM_RC_BAD_BLOB;
    }
    return TSS2_RC_SUCCESS;
}

// MARK: the storage root key and loading

/// The SRK's saved context (TPM2_ContextSave right after CreatePrimary), kept
/// for the life of this process per TCTI string: TPM2_ContextLoad of it costs
/// one cheap command where CreatePrimary derives the ECC key from the owner
/// seed (about half of a login's TPM time, docs/tpm.md). The TPM protects the
/// context's integrity with a key that changes at every TPM Reset (swtpm
/// restart, reboot) and with the owner hierarchy's proof (TPM2_Clear): a
/// stale context does not load, and the primary is made again. Only loads
/// use it; creating keys and sealing always use a freshly derived primary.
static pthread_mutex_t srk_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static char *srk_cache_tcti;
static TPMS_CONTEXT srk_cache;

static void srk_cache_drop(void) {
    pthread_mutex_lock(&srk_cache_lock);
    free(srk_cache_tcti);
    srk_cache_tcti = NULL;
    pthread_mutex_unlock(&srk_cache_lock);
}

static void srk_cache_put(const char *tcti, const TPMS_CONTEXT *ctx) {
    char *copy = strdup(tcti);
    if (!copy) return;
    pthread_mutex_lock(&srk_cache_lock);
    free(srk_cache_tcti);
    srk_cache_tcti = copy;
    srk_cache = *ctx;
    pthread_mutex_unlock(&srk_cache_lock);
}

static int srk_cache_get(const char *tcti, TPMS_CONTEXT *out) {
    int found = 0;
    pthread_mutex_lock(&srk_cache_lock);
    if (srk_cache_tcti && !strcmp(srk_cache_tcti, tcti)) { *out = srk_cache; found = 1; }
    pthread_mutex_unlock(&srk_cache_lock);
    return found;
}

/// A response code from the TPM itself (not from the TSS or the TCTI).
static int tpm_layer(TSS2_RC rc) { return (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER; }

static void srk_flush(ktpm *t) {
    if (t->srk != ESYS_TR_NONE) Esys_FlushContext(t->esys, t->srk);
    t->srk = ESYS_TR_NONE;
    t->srk_cached = 0;
}

/// The storage root key, derived afresh from the owner seed (CreatePrimary);
/// its context is saved for later loads in this process.
static uint32_t srk_fresh(ktpm *t) {
    if (t->srk != ESYS_TR_NONE && !t->srk_cached) return TSS2_RC_SUCCESS;
    srk_flush(t);
    TPM2B_SENSITIVE_CREATE sens = { 0 };
    TPM2B_PUBLIC tmpl = srk_template();
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION none = { 0 };
    TPM2B_PUBLIC *pub = NULL;
    TPM2B_CREATION_DATA *cd = NULL;
    TPM2B_DIGEST *ch = NULL;
    TPMT_TK_CREATION *tk = NULL;
    TSS2_RC rc = Esys_CreatePrimary(t->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sens,
                                    &tmpl, &outside, &none, &t->srk, &pub, &cd, &ch, &tk);
    Esys_Free(pub); Esys_Free(cd); Esys_Free(ch); Esys_Free(tk);
    if (rc != TSS2_RC_SUCCESS) { t->srk = ESYS_TR_NONE; return rc; }
    // ContextSave leaves a transient object loaded; a failure only costs the cache.
    TPMS_CONTEXT *ctx = NULL;
    if (Esys_ContextSave(t->esys, t->srk, &ctx) == TSS2_RC_SUCCESS && ctx) srk_cache_put(t->tcti_conf, ctx);
    Esys_Free(ctx);
    return TSS2_RC_SUCCESS;
}

/// The storage root key for loading objects: the saved context if this TPM
/// still accepts it, else a fresh one.
static uint32_t srk_for_load(ktpm *t) {
    if (t->srk != ESYS_TR_NONE) return TSS2_RC_SUCCESS;
    TPMS_CONTEXT ctx;
    if (srk_cache_get(t->tcti_conf, &ctx)) {
        TSS2_RC rc = Esys_ContextLoad(t->esys, &ctx, &t->srk);
        if (rc == TSS2_RC_SUCCESS) {
            t->srk_cached = 1;
            return TSS2_RC_SUCCESS;
        }
        t->srk = ESYS_TR_NONE;
        // Only the TPM's own refusal means "stale"; no TPM (a TCTI error) is reported as such,
        // and ESAPI answers BAD_SEQUENCE to anything after one.
        if (!tpm_layer(rc)) return rc;
        // TPM Reset, owner cleared, another TPM at this address: derive it again.
        srk_cache_drop();
    }
    return srk_fresh(t);
}

/// Loads a blob under the SRK and sets its authorization; the caller flushes *h.
static uint32_t load(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen, ESYS_TR *h) {
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    TPM2B_AUTH a;
    *h = ESYS_TR_NONE;
    CHECK(blob_read(blob, len, &pub, &priv));
    if (!set_auth(&a, auth, authlen)) return KTPM_RC_ARGUMENT;
    CHECK(srk_for_load(t));
    TSS2_RC rc = Esys_Load(t->esys, t->srk, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &priv, &pub, h);
    if (rc != TSS2_RC_SUCCESS && t->srk_cached && tpm_layer(rc)) {
        // Whatever the saved context held, the answer that counts is the one under a freshly derived SRK.
        srk_cache_drop();
        CHECK(srk_fresh(t));
        rc = Esys_Load(t->esys, t->srk, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &priv, &pub, h);
    }
    if (rc != TSS2_RC_SUCCESS) { *h = ESYS_TR_NONE; explicit_bzero(&a, sizeof a); return rc; }
    rc = Esys_TR_SetAuth(t->esys, *h, &a);
    if (rc != TSS2_RC_SUCCESS) { Esys_FlushContext(t->esys, *h); *h = ESYS_TR_NONE; }
    explicit_bzero(&a, sizeof a);
    return rc;
}

ESYS_CONTEXT *ktpm_esys(ktpm *t) { return t->esys; }

uint32_t ktpm_load(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen, ESYS_TR *h) {
    return load(t, blob, len, auth, authlen, h);
}

void ktpm_srk_release(ktpm *t) { srk_flush(t); }

// MARK: identity and capabilities

uint32_t ktpm_ek_public(ktpm *t, uint8_t *out, size_t cap, size_t *len) {
    // TCG EK Credential Profile, template L-2 (ECC NIST P-256).
    static const uint8_t policy[32] = {
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xB3, 0xF8, 0x1A, 0x90, 0xCC, 0x8D, 0x46, 0xA5, 0xD7, 0x24,
        0xFD, 0x52, 0xD7, 0x6E, 0x06, 0x52, 0x0B, 0x64, 0xF2, 0xA1, 0xDA, 0x1B, 0x33, 0x14, 0x69, 0xAA };
    TPM2B_PUBLIC tmpl = srk_template();
    tmpl.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
        TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    tmpl.publicArea.authPolicy.size = 32;
    memcpy(tmpl.publicArea.authPolicy.buffer, policy, 32);
    TPM2B_SENSITIVE_CREATE sens = { 0 };
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION none = { 0 };
    TPM2B_PUBLIC *pub = NULL;
    TPM2B_CREATION_DATA *cd = NULL;
    TPM2B_DIGEST *ch = NULL;
    TPMT_TK_CREATION *tk = NULL;
    ESYS_TR ek = ESYS_TR_NONE;
    TSS2_RC rc = Esys_CreatePrimary(t->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                    &sens, &tmpl, &outside, &none, &ek, &pub, &cd, &ch, &tk);
    if (rc == TSS2_RC_SUCCESS) {
        Esys_FlushContext(t->esys, ek);
        const TPMS_ECC_POINT *q = &pub->publicArea.unique.ecc;
        if ((size_t)q->x.size + q->y.size > cap) {
            rc = KTPM_RC_BUFFER;
        } else {
            memcpy(out, q->x.buffer, q->x.size);
            memcpy(out + q->x.size, q->y.buffer, q->y.size);
            *len = (size_t)q->x.size + q->y.size;
        }
    }
    Esys_Free(pub); Esys_Free(cd); Esys_Free(ch); Esys_Free(tk);
    return rc;
}

uint32_t ktpm_supports(ktpm *t, int kind) {
    TPM2B_PUBLIC p;
    if (!key_template(kind, 0, 0, &p)) return KTPM_RC_ARGUMENT;
    TPMT_PUBLIC_PARMS parms = { .type = p.publicArea.type, .parameters = p.publicArea.parameters };
    return Esys_TestParms(t->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &parms);
}

// MARK: keys

static uint32_t create(ktpm *t, TPM2B_SENSITIVE_CREATE *sens, TPM2B_PUBLIC *tmpl, uint8_t *blob, size_t cap, size_t *len) {
    CHECK(srk_fresh(t));
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION none = { 0 };
    TPM2B_PRIVATE *priv = NULL;
    TPM2B_PUBLIC *pub = NULL;
    TPM2B_CREATION_DATA *cd = NULL;
    TPM2B_DIGEST *ch = NULL;
    TPMT_TK_CREATION *tk = NULL;
    TSS2_RC rc = Esys_Create(t->esys, t->srk, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, sens, tmpl, &outside, &none,
                             &priv, &pub, &cd, &ch, &tk);
    if (rc == TSS2_RC_SUCCESS) rc = blob_write(pub, priv, blob, cap, len);
    Esys_Free(priv); Esys_Free(pub); Esys_Free(cd); Esys_Free(ch); Esys_Free(tk);
    return rc;
}

uint32_t ktpm_create_key(ktpm *t, int kind, const uint8_t *auth, size_t authlen, int noda,
                         uint8_t *blob, size_t cap, size_t *len) {
    TPM2B_PUBLIC tmpl;
    TPM2B_SENSITIVE_CREATE sens = { 0 };
    if (!key_template(kind, noda, 0, &tmpl)) return KTPM_RC_ARGUMENT;
    if (!set_auth(&sens.sensitive.userAuth, auth, authlen)) return KTPM_RC_ARGUMENT;
    uint32_t rc = create(t, &sens, &tmpl, blob, cap, len);
    explicit_bzero(&sens, sizeof sens);
    return rc;
}

/// TPM2_Import with neither inner nor outer wrapper: the duplicate is the
/// TPM2B_SENSITIVE itself (TPM 2.0 Part 1, "Duplication"). The key is in this
/// process's memory already, so there is nothing to protect in transit.
static uint32_t import(ktpm *t, TPM2B_PUBLIC *pub, TPMT_SENSITIVE *s, uint8_t *blob, size_t cap, size_t *len) {
    CHECK(srk_fresh(t));
    TPM2B_SENSITIVE wrapped = { .size = 0, .sensitiveArea = *s };
    TPM2B_PRIVATE dup = { 0 };
    size_t off = 0;
    TSS2_RC rc = Tss2_MU_TPM2B_SENSITIVE_Marshal(&wrapped, dup.buffer, sizeof dup.buffer, &off);
    explicit_bzero(&wrapped, sizeof wrapped);
    if (rc != TSS2_RC_SUCCESS) return KTPM_RC_BUFFER;
    dup.size = (UINT16)off;
    TPM2B_DATA enckey = { 0 };
    TPM2B_ENCRYPTED_SECRET seed = { 0 };
    TPMT_SYM_DEF_OBJECT sym = { .algorithm = TPM2_ALG_NULL };
    TPM2B_PRIVATE *out = NULL;
    rc = Esys_Import(t->esys, t->srk, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &enckey, pub, &dup, &seed, &sym, &out);
    explicit_bzero(&dup, sizeof dup);
    if (rc == TSS2_RC_SUCCESS) rc = blob_write(pub, out, blob, cap, len);
    Esys_Free(out);
    return rc;
}

uint32_t ktpm_import_ec(ktpm *t, int kind, const uint8_t *d, size_t dlen, const uint8_t *x, const uint8_t *y,
                        size_t clen, const uint8_t *auth, size_t authlen, int noda, uint8_t *blob, size_t cap,
                        size_t *len) {
    TPM2B_PUBLIC pub;
    if ((kind != KTPM_EC_P256 && kind != KTPM_EC_P384) || !key_template(kind, noda, 1, &pub)) return KTPM_RC_ARGUMENT;
    size_t want = kind == KTPM_EC_P256 ? 32 : 48;
    if (clen != want || dlen != want) return KTPM_RC_ARGUMENT;
    pub.publicArea.unique.ecc.x.size = (UINT16)clen;
    memcpy(pub.publicArea.unique.ecc.x.buffer, x, clen);
    pub.publicArea.unique.ecc.y.size = (UINT16)clen;
    memcpy(pub.publicArea.unique.ecc.y.buffer, y, clen);
    TPMT_SENSITIVE s = { 0 };
    s.sensitiveType = TPM2_ALG_ECC;
    if (!set_auth(&s.authValue, auth, authlen)) return KTPM_RC_ARGUMENT;
    s.sensitive.ecc.size = (UINT16)dlen;
    memcpy(s.sensitive.ecc.buffer, d, dlen);
    uint32_t rc = import(t, &pub, &s, blob, cap, len);
    explicit_bzero(&s, sizeof s);
    return rc;
}

uint32_t ktpm_import_rsa(ktpm *t, int kind, const uint8_t *n, size_t nlen, uint32_t e, const uint8_t *p,
                         size_t plen, const uint8_t *auth, size_t authlen, int noda, uint8_t *blob, size_t cap,
                         size_t *len) {
    TPM2B_PUBLIC pub;
    if ((kind != KTPM_RSA_2048 && kind != KTPM_RSA_3072) || !key_template(kind, noda, 1, &pub)) return KTPM_RC_ARGUMENT;
    size_t want = kind == KTPM_RSA_2048 ? 256 : 384;
    if (nlen != want || plen != want / 2) return KTPM_RC_ARGUMENT;
    pub.publicArea.parameters.rsaDetail.exponent = e == 65537 ? 0 : e;
    pub.publicArea.unique.rsa.size = (UINT16)nlen;
    memcpy(pub.publicArea.unique.rsa.buffer, n, nlen);
    TPMT_SENSITIVE s = { 0 };
    s.sensitiveType = TPM2_ALG_RSA;
    if (!set_auth(&s.authValue, auth, authlen)) return KTPM_RC_ARGUMENT;
    s.sensitive.rsa.size = (UINT16)plen;
    memcpy(s.sensitive.rsa.buffer, p, plen);
    uint32_t rc = import(t, &pub, &s, blob, cap, len);
    explicit_bzero(&s, sizeof s);
    return rc;
}

static uint32_t public_info(const TPM2B_PUBLIC *pub, int *kind, uint8_t *a, size_t acap, size_t *alen, uint8_t *b,
                            size_t bcap, size_t *blen) {
    const TPMT_PUBLIC *p = &pub->publicArea;
    if (p->type == TPM2_ALG_ECC) {
        TPMI_ECC_CURVE c = p->parameters.eccDetail.curveID;
        if (c == TPM2_ECC_NIST_P256) *kind = KTPM_EC_P256;
        else if (c == TPM2_ECC_NIST_P384) *kind = KTPM_EC_P384;
        else return KTPM_RC_BAD_BLOB;
        if (p->unique.ecc.x.size > acap || p->unique.ecc.y.size > bcap) return KTPM_RC_BUFFER;
        memcpy(a, p->unique.ecc.x.buffer, p->unique.ecc.x.size);
        *alen = p->unique.ecc.x.size;
        memcpy(b, p->unique.ecc.y.buffer, p->unique.ecc.y.size);
        *blen = p->unique.ecc.y.size;
        return TSS2_RC_SUCCESS;
    }
    if (p->type == TPM2_ALG_RSA) {
        UINT16 bits = p->parameters.rsaDetail.keyBits;
        if (bits == 2048) *kind = KTPM_RSA_2048;
        else if (bits == 3072) *kind = KTPM_RSA_3072;
        else return KTPM_RC_BAD_BLOB;
        if (p->unique.rsa.size > acap || bcap < 4) return KTPM_RC_BUFFER;
        memcpy(a, p->unique.rsa.buffer, p->unique.rsa.size);
        *alen = p->unique.rsa.size;
        uint32_t e = p->parameters.rsaDetail.exponent ? p->parameters.rsaDetail.exponent : 65537;
        size_t i = 0;
        uint8_t be[4] = { (uint8_t)(e >> 24), (uint8_t)(e >> 16), (uint8_t)(e >> 8), (uint8_t)e };
        while (i < 3 && be[i] == 0) i++;
        memcpy(b, be + i, 4 - i);
        *blen = 4 - i;
        return TSS2_RC_SUCCESS;
    }
    return KTPM_RC_BAD_BLOB;
}

uint32_t ktpm_public_info(const uint8_t *blob, size_t len, int *kind, uint8_t *a, size_t acap, size_t *alen,
                          uint8_t *b, size_t bcap, size_t *blen) {
    TPM2B_PUBLIC pub;
    TPM2B_PRIVATE priv;
    CHECK(blob_read(blob, len, &pub, &priv));
    return public_info(&pub, kind, a, acap, alen, b, bcap, blen);
}

uint32_t ktpm_tpm2b_public_info(const uint8_t *pub, size_t len, int *kind, uint8_t *a, size_t acap, size_t *alen,
                                uint8_t *b, size_t bcap, size_t *blen) {
    TPM2B_PUBLIC p;
    size_t off = 0;
    memset(&p, 0, sizeof p);
    if (Tss2_MU_TPM2B_PUBLIC_Unmarshal(pub, len, &off, &p) != TSS2_RC_SUCCESS || off != len) return KTPM_RC_BAD_BLOB;
    return public_info(&p, kind, a, acap, alen, b, bcap, blen);
}

uint32_t ktpm_sign_ecdsa(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                         const uint8_t *digest, size_t dlen, uint8_t *r, uint8_t *s, size_t half) {
    if (dlen != half || (dlen != 32 && dlen != 48)) return KTPM_RC_ARGUMENT;
    ESYS_TR h;
    CHECK(load(t, blob, len, auth, authlen, &h));
    TPM2B_DIGEST d = { .size = (UINT16)dlen };
    memcpy(d.buffer, digest, dlen);
    TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_ECDSA };
    scheme.details.ecdsa.hashAlg = dlen == 32 ? TPM2_ALG_SHA256 : TPM2_ALG_SHA384;
    TPMT_TK_HASHCHECK ticket = { .tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL };
    TPMT_SIGNATURE *sig = NULL;
    TSS2_RC rc = Esys_Sign(t->esys, h, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &d, &scheme, &ticket, &sig);
    Esys_FlushContext(t->esys, h);
    if (rc == TSS2_RC_SUCCESS) {
        const TPM2B_ECC_PARAMETER *sr = &sig->signature.ecdsa.signatureR, *ss = &sig->signature.ecdsa.signatureS;
        if (sr->size > half || ss->size > half) {
            rc = KTPM_RC_BUFFER;
        } else {
            // Fixed width, left-padded (PKCS #11 r||s).
            memset(r, 0, half);
            memset(s, 0, half);
            memcpy(r + half - sr->size, sr->buffer, sr->size);
            memcpy(s + half - ss->size, ss->buffer, ss->size);
        }
    }
    Esys_Free(sig);
    return rc;
}

uint32_t ktpm_rsa_decrypt(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                          int scheme, uint16_t oaep_hash, const uint8_t *in, size_t inlen, uint8_t *out, size_t cap,
                          size_t *outlen) {
    TPM2B_PUBLIC_KEY_RSA c = { 0 };
    if (inlen > sizeof c.buffer) return KTPM_RC_ARGUMENT;
    c.size = (UINT16)inlen;
    memcpy(c.buffer, in, inlen);
    TPMT_RSA_DECRYPT s = { 0 };
    switch (scheme) {
    case KTPM_RSA_RAW: s.scheme = TPM2_ALG_NULL; break;
    case KTPM_RSA_PKCS1: s.scheme = TPM2_ALG_RSAES; break;
    case KTPM_RSA_OAEP: s.scheme = TPM2_ALG_OAEP; s.details.oaep.hashAlg = oaep_hash; break;
    default: return KTPM_RC_ARGUMENT;
    }
    ESYS_TR h;
    CHECK(load(t, blob, len, auth, authlen, &h));
    TPM2B_DATA label = { 0 };
    TPM2B_PUBLIC_KEY_RSA *m = NULL;
    TSS2_RC rc = Esys_RSA_Decrypt(t->esys, h, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &c, &s, &label, &m);
    Esys_FlushContext(t->esys, h);
    if (rc == TSS2_RC_SUCCESS) {
        if (m->size > cap) rc = KTPM_RC_BUFFER;
        else { memcpy(out, m->buffer, m->size); *outlen = m->size; }
        explicit_bzero(m->buffer, m->size);
    }
    Esys_Free(m);
    return rc;
}

// MARK: sealing

/// A policy session (or a trial one) that has run TPM2_PolicyPCR over the selected PCRs.
static uint32_t pcr_policy(ktpm *t, TPM2_SE type, uint32_t mask, ESYS_TR *session) {
    TPMT_SYM_DEF sym = { .algorithm = TPM2_ALG_NULL };
    *session = ESYS_TR_NONE;
    CHECK(Esys_StartAuthSession(t->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                type, &sym, TPM2_ALG_SHA256, session));
    TPM2B_DIGEST empty = { 0 };
    TPML_PCR_SELECTION sel = pcr_selection(mask);
    TSS2_RC rc = Esys_PolicyPCR(t->esys, *session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &empty, &sel);
    if (rc != TSS2_RC_SUCCESS) { Esys_FlushContext(t->esys, *session); *session = ESYS_TR_NONE; }
    return rc;
}

uint32_t ktpm_seal(ktpm *t, const uint8_t *secret, size_t slen, const uint8_t *auth, size_t authlen, int noda,
                   uint32_t pcrmask, uint8_t *blob, size_t cap, size_t *len) {
    TPM2B_SENSITIVE_CREATE sens = { 0 };
    if (slen == 0 || slen > 128) return KTPM_RC_ARGUMENT;
    if (!set_auth(&sens.sensitive.userAuth, auth, authlen)) return KTPM_RC_ARGUMENT;
    sens.sensitive.data.size = (UINT16)slen;
    memcpy(sens.sensitive.data.buffer, secret, slen);
    TPM2B_PUBLIC tmpl = { 0 };
    tmpl.publicArea.type = TPM2_ALG_KEYEDHASH;
    tmpl.publicArea.nameAlg = TPM2_ALG_SHA256;
    tmpl.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT;
    if (noda) tmpl.publicArea.objectAttributes |= TPMA_OBJECT_NODA;
    tmpl.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    uint32_t rc = TSS2_RC_SUCCESS;
    if (pcrmask) {
        // Only the PCR policy opens it: userWithAuth stays clear.
        ESYS_TR trial;
        rc = pcr_policy(t, TPM2_SE_TRIAL, pcrmask, &trial);
        if (rc == TSS2_RC_SUCCESS) {
            TPM2B_DIGEST *digest = NULL;
            rc = Esys_PolicyGetDigest(t->esys, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
            Esys_FlushContext(t->esys, trial);
            if (rc == TSS2_RC_SUCCESS) tmpl.publicArea.authPolicy = *digest;
            Esys_Free(digest);
        }
    } else {
        tmpl.publicArea.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
    }
    if (rc == TSS2_RC_SUCCESS) rc = create(t, &sens, &tmpl, blob, cap, len);
    explicit_bzero(&sens, sizeof sens);
    return rc;
}

uint32_t ktpm_unseal(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen,
                     uint32_t pcrmask, uint8_t *out, size_t cap, size_t *outlen) {
    ESYS_TR h;
    CHECK(load(t, blob, len, auth, authlen, &h));
    ESYS_TR session = ESYS_TR_PASSWORD;
    TSS2_RC rc = TSS2_RC_SUCCESS;
    if (pcrmask) rc = pcr_policy(t, TPM2_SE_POLICY, pcrmask, &session);
    TPM2B_SENSITIVE_DATA *data = NULL;
    if (rc == TSS2_RC_SUCCESS) rc = Esys_Unseal(t->esys, h, session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
    if (pcrmask && session != ESYS_TR_NONE && session != ESYS_TR_PASSWORD) Esys_FlushContext(t->esys, session);
    Esys_FlushContext(t->esys, h);
    if (rc == TSS2_RC_SUCCESS) {
        if (data->size > cap) rc = KTPM_RC_BUFFER;
        else { memcpy(out, data->buffer, data->size); *outlen = data->size; }
        explicit_bzero(data->buffer, data->size);
    }
    Esys_Free(data);
    return rc;
}

uint32_t ktpm_pcr_extend(ktpm *t, int pcr, const uint8_t digest[32]) {
    if (pcr < 0 || pcr > 23) return KTPM_RC_ARGUMENT;
    TPML_DIGEST_VALUES v = { .count = 1 };
    v.digests[0].hashAlg = TPM2_ALG_SHA256;
    memcpy(v.digests[0].digest.sha256, digest, 32);
    return Esys_PCR_Extend(t->esys, ESYS_TR_PCR0 + (ESYS_TR)pcr, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &v);
}
