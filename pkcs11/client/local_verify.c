/*
 * Public-key verification in the client (include/local_verify.h; docs/agent-transport.md,
 * "Verify in the client"). Issue 30: C_VerifyInit + C_Verify through the agent
 * cost a round trip each time (0.75x raw OpenSSL for ECDSA P-256 at 2 threads,
 * 0.55x for RSA-2048), and a verify needs nothing secret.
 *
 * What runs is what the agent runs (Sources/PKCS11/Sign.swift SignatureOperation,
 * Sources/KeyshareCrypto/Signing.swift): the module hashes the input with the
 * mechanism's digest (none for CKM_ECDSA, CKM_RSA_PKCS, CKM_RSA_PKCS_PSS), then
 * EVP_PKEY_verify with the padding, signature digest, MGF1 digest and salt the
 * agent configures, an ECDSA r||s given to OpenSSL as DER. Only an answer that
 * is CKR_OK or CKR_SIGNATURE_INVALID is given here; every other input (a length
 * the agent answers with CKR_DATA_LEN_RANGE or CKR_ARGUMENTS_BAD) goes to the
 * agent, which answers it as before.
 *
 * libcrypto.so.3 is Debian 12's OpenSSL 3.0 (the agent's engine may be a newer
 * bundle; these one-shot functions give the same answers in both). Loaded
 * RTLD_LOCAL, never unloaded; the module still links no OpenSSL (50-pkcs11-tool).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "../abi/include/keyshare_abi.h"
#include "include/local_verify.h"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct evp_pkey_ctx_st EVP_PKEY_CTX;
typedef struct evp_md_st EVP_MD;
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;
typedef struct engine_st ENGINE;
typedef struct ossl_provider_st OSSL_PROVIDER;

static struct {
    OSSL_LIB_CTX *(*OSSL_LIB_CTX_new)(void);
    OSSL_PROVIDER *(*OSSL_PROVIDER_load)(OSSL_LIB_CTX *, const char *);
    EVP_PKEY *(*d2i_PUBKEY_ex)(EVP_PKEY **, const unsigned char **, long, OSSL_LIB_CTX *, const char *);
    void (*EVP_PKEY_free)(EVP_PKEY *);
    int (*EVP_PKEY_up_ref)(EVP_PKEY *);
    int (*EVP_PKEY_get_base_id)(const EVP_PKEY *);
    int (*EVP_PKEY_get_bits)(const EVP_PKEY *);
    EVP_PKEY_CTX *(*EVP_PKEY_CTX_new_from_pkey)(OSSL_LIB_CTX *, EVP_PKEY *, const char *);
    void (*EVP_PKEY_CTX_free)(EVP_PKEY_CTX *);
    int (*EVP_PKEY_verify_init)(EVP_PKEY_CTX *);
    int (*EVP_PKEY_verify)(EVP_PKEY_CTX *, const unsigned char *, size_t, const unsigned char *, size_t);
    int (*EVP_PKEY_CTX_set_rsa_padding)(EVP_PKEY_CTX *, int);
    int (*EVP_PKEY_CTX_set_signature_md)(EVP_PKEY_CTX *, const EVP_MD *);
    int (*EVP_PKEY_CTX_set_rsa_mgf1_md)(EVP_PKEY_CTX *, const EVP_MD *);
    int (*EVP_PKEY_CTX_set_rsa_pss_saltlen)(EVP_PKEY_CTX *, int);
    EVP_MD *(*EVP_MD_fetch)(OSSL_LIB_CTX *, const char *, const char *);
    int (*EVP_Digest)(const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *, ENGINE *);
    void (*ERR_clear_error)(void);
} C;

/* The module's own library context (issue 29, 92-openssl-isolation): the host's libcrypto is
 * the host's to configure, and its default context may prefer a provider the host's
 * OPENSSL_CONF names (pkcs11-provider, a marker); every key, fetch and context here names this
 * one, with only the "default" provider, into which OpenSSL loads no configuration. */
static OSSL_LIB_CTX *kv_libctx;
static const EVP_MD *kv_md[KV_DIGESTS];
static const size_t kv_md_size[KV_DIGESTS] = {0, 20, 28, 32, 48, 64};
static int kv_loaded;   /* 1 usable, -1 not */
static pthread_once_t kv_once = PTHREAD_ONCE_INIT;

#define EVP_PKEY_RSA_ID 6      /* NID_rsaEncryption */
#define EVP_PKEY_EC_ID 408     /* NID_X9_62_id_ecPublicKey */
#define RSA_PKCS1_PADDING_ID 1
#define RSA_PKCS1_PSS_PADDING_ID 6

static void kv_load(void) {
    kv_loaded = -1;
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        ks_client_note("libcrypto.so.3 cannot be loaded (%s): signatures are verified by the agent", dlerror());
        return;
    }
#define SYM(name) if (!(*(void **)&C.name = dlsym(h, #name))) { ks_client_note("libcrypto.so.3 has no %s: signatures are verified by the agent", #name); return; }
    SYM(OSSL_LIB_CTX_new) SYM(OSSL_PROVIDER_load) SYM(d2i_PUBKEY_ex) SYM(EVP_PKEY_free) SYM(EVP_PKEY_up_ref) SYM(EVP_PKEY_get_base_id) SYM(EVP_PKEY_get_bits)
    SYM(EVP_PKEY_CTX_new_from_pkey) SYM(EVP_PKEY_CTX_free) SYM(EVP_PKEY_verify_init) SYM(EVP_PKEY_verify)
    SYM(EVP_PKEY_CTX_set_rsa_padding) SYM(EVP_PKEY_CTX_set_signature_md) SYM(EVP_PKEY_CTX_set_rsa_mgf1_md)
    SYM(EVP_PKEY_CTX_set_rsa_pss_saltlen) SYM(EVP_MD_fetch) SYM(EVP_Digest) SYM(ERR_clear_error)
#undef SYM
    kv_libctx = C.OSSL_LIB_CTX_new();
    if (!kv_libctx || !C.OSSL_PROVIDER_load(kv_libctx, "default")) {
        ks_client_note("libcrypto.so.3: no library context of the module's own: signatures are verified by the agent");
        return;
    }
    /* Fetched once (an implicit fetch per call would take the method store's lock every time). */
    static const char *const names[KV_DIGESTS] = {NULL, "SHA1", "SHA2-224", "SHA2-256", "SHA2-384", "SHA2-512"};
    for (int i = 1; i < KV_DIGESTS; i++) {
        kv_md[i] = C.EVP_MD_fetch(kv_libctx, names[i], NULL);
        if (!kv_md[i]) { ks_client_note("libcrypto.so.3 has no %s: signatures are verified by the agent", names[i]); return; }
    }
    kv_loaded = 1;
}

int kv_available(void) {
    pthread_once(&kv_once, kv_load);
    return kv_loaded == 1;
}

int kv_wanted(void) {
    const char *v = secure_getenv("KEYSHARE_AGENT_VERIFY_LOCAL");
    return !(v && strcmp(v, "0") == 0);
}

static int pss_hash(CK_MECHANISM_TYPE t) {
    switch (t) {
    case CKM_SHA_1: return KV_SHA1;
    case CKM_SHA224: return KV_SHA224;
    case CKM_SHA256: return KV_SHA256;
    case CKM_SHA384: return KV_SHA384;
    case CKM_SHA512: return KV_SHA512;
    default: return KV_NONE;
    }
}

static int mgf_hash(CK_RSA_PKCS_MGF_TYPE g) {
    switch (g) {
    case CKG_MGF1_SHA1: return KV_SHA1;
    case CKG_MGF1_SHA224: return KV_SHA224;
    case CKG_MGF1_SHA256: return KV_SHA256;
    case CKG_MGF1_SHA384: return KV_SHA384;
    case CKG_MGF1_SHA512: return KV_SHA512;
    default: return KV_NONE;
    }
}

int kv_mechanism(const CK_MECHANISM *m, kv_mech *out) {
    memset(out, 0, sizeof *out);
    if (!m) return 0;
    int pss = 0;
    switch (m->mechanism) {
    case CKM_ECDSA: out->family = KV_EC; break;
    case CKM_ECDSA_SHA1: out->family = KV_EC; out->digest = KV_SHA1; break;
    case CKM_ECDSA_SHA224: out->family = KV_EC; out->digest = KV_SHA224; break;
    case CKM_ECDSA_SHA256: out->family = KV_EC; out->digest = KV_SHA256; break;
    case CKM_ECDSA_SHA384: out->family = KV_EC; out->digest = KV_SHA384; break;
    case CKM_ECDSA_SHA512: out->family = KV_EC; out->digest = KV_SHA512; break;
    case CKM_RSA_PKCS: out->family = KV_RSA; break;
    case CKM_SHA1_RSA_PKCS: out->family = KV_RSA; out->digest = KV_SHA1; break;
    case CKM_SHA224_RSA_PKCS: out->family = KV_RSA; out->digest = KV_SHA224; break;
    case CKM_SHA256_RSA_PKCS: out->family = KV_RSA; out->digest = KV_SHA256; break;
    case CKM_SHA384_RSA_PKCS: out->family = KV_RSA; out->digest = KV_SHA384; break;
    case CKM_SHA512_RSA_PKCS: out->family = KV_RSA; out->digest = KV_SHA512; break;
    case CKM_RSA_PKCS_PSS: pss = 1; break;
    case CKM_SHA1_RSA_PKCS_PSS: pss = 1; out->digest = KV_SHA1; break;
    case CKM_SHA224_RSA_PKCS_PSS: pss = 1; out->digest = KV_SHA224; break;
    case CKM_SHA256_RSA_PKCS_PSS: pss = 1; out->digest = KV_SHA256; break;
    case CKM_SHA384_RSA_PKCS_PSS: pss = 1; out->digest = KV_SHA384; break;
    case CKM_SHA512_RSA_PKCS_PSS: pss = 1; out->digest = KV_SHA512; break;
    default: return 0;
    }
    if (!pss) {
        out->scheme = out->family == KV_EC ? KV_ECDSA : KV_PKCS1;
        return 1;
    }
    /* The parameter the agent accepted at C_VerifyInit; anything this code
     * does not know exactly stays with the agent. */
    if (!m->pParameter || m->ulParameterLen != sizeof(CK_RSA_PKCS_PSS_PARAMS)) return 0;
    CK_RSA_PKCS_PSS_PARAMS p;
    memcpy(&p, m->pParameter, sizeof p);
    out->family = KV_RSA;
    out->scheme = KV_PSS;
    out->pss_md = pss_hash(p.hashAlg);
    out->mgf1_md = mgf_hash(p.mgf);
    if (out->pss_md == KV_NONE || out->mgf1_md == KV_NONE || p.sLen > 4096) return 0;
    out->salt = (int)p.sLen;
    return 1;
}

void *kv_key(const uint8_t *spki, size_t n, const kv_mech *m, uint32_t *siglen) {
    if (!kv_available() || !spki || n == 0 || n > (16u << 10)) return NULL;
    const unsigned char *p = spki;
    EVP_PKEY *k = C.d2i_PUBKEY_ex(NULL, &p, (long)n, kv_libctx, NULL);
    if (!k || p != spki + n) {
        if (k) C.EVP_PKEY_free(k);
        C.ERR_clear_error();
        return NULL;
    }
    int id = C.EVP_PKEY_get_base_id(k), bits = C.EVP_PKEY_get_bits(k);
    int fits = (m->family == KV_RSA && id == EVP_PKEY_RSA_ID && bits >= 512 && bits <= 16384) ||
               (m->family == KV_EC && id == EVP_PKEY_EC_ID && bits >= 160 && bits <= 521);
    if (!fits) {
        C.EVP_PKEY_free(k);
        return NULL;
    }
    uint32_t bytes = (uint32_t)(bits + 7) / 8;
    *siglen = m->family == KV_RSA ? bytes : 2 * bytes;
    return k;
}

void kv_key_ref(void *key) { if (key) C.EVP_PKEY_up_ref(key); }
void kv_key_free(void *key) { if (key) C.EVP_PKEY_free(key); }

/* One INTEGER of an ECDSA-Sig-Value from a big-endian half (as BN_bin2bn + i2d would). */
static size_t der_int(uint8_t *out, const uint8_t *v, size_t n) {
    while (n > 0 && v[0] == 0) v++, n--;
    int pad = n == 0 || (v[0] & 0x80);
    size_t len = n + (size_t)pad, at = 0;
    out[at++] = 0x02;
    if (len >= 0x80) { out[at++] = 0x81; }
    out[at++] = (uint8_t)len;
    if (pad) out[at++] = 0;
    memcpy(out + at, v, n);
    return at + n;
}

int kv_verify(void *key, void *ctx, const kv_mech *m, size_t siglen, const uint8_t *data, size_t dn, const uint8_t *sig, size_t sn) {
    if (!key || sn != siglen || sn == 0 || sn > 2048 || !data || !sig || dn > (1u << 20)) return -1;
    uint8_t hash[64];
    const uint8_t *tbs = data;
    size_t tbslen = dn;
    if (m->digest != KV_NONE) {
        unsigned int hl = 0;
        if (C.EVP_Digest(data, dn, hash, &hl, kv_md[m->digest], NULL) != 1 || hl != kv_md_size[m->digest]) {
            C.ERR_clear_error();
            return -1;
        }
        tbs = hash;
        tbslen = hl;
    } else if (m->scheme == KV_ECDSA) {
        if (dn == 0) return -1;
    } else if (m->scheme == KV_PKCS1) {
        if (dn == 0 || dn > sn - 11 || sn < 11) return -1;   /* the agent's answer (CKR_DATA_LEN_RANGE or a failure) */
    } else if (m->scheme == KV_PSS) {
        if (dn != kv_md_size[m->pss_md]) return -1;          /* CKR_DATA_LEN_RANGE, from the agent */
    }
    /* The agent compares a digest with the PSS parameter's hash size first: another size never verifies. */
    if (m->scheme == KV_PSS && tbslen != kv_md_size[m->pss_md]) return 0;
    uint8_t der[2 * (66 + 4) + 8];
    const uint8_t *s = sig;
    size_t slen = sn;
    if (m->scheme == KV_ECDSA) {
        size_t half = sn / 2;
        if (sn % 2 || half > 66) return -1;
        size_t a = der_int(der + 3, sig, half);
        a += der_int(der + 3 + a, sig + half, half);
        /* The SEQUENCE header, short or long form, moved to sit right before the body. */
        size_t at = a >= 0x80 ? 0 : 1;
        der[at] = 0x30;
        if (a >= 0x80) { der[1] = 0x81; der[2] = (uint8_t)a; } else der[2] = (uint8_t)a;
        s = der + at;
        slen = a + 3 - at;
    }
    EVP_PKEY_CTX *c = ctx ? ctx : kv_ctx(key, m);
    int r = -1;
    if (c) r = C.EVP_PKEY_verify(c, s, slen, tbs, tbslen) == 1 ? 1 : 0;
    if (c != ctx) kv_ctx_free(c);
    C.ERR_clear_error();
    return r;
}

/* A context set up for the mechanism, used again and again: in OpenSSL 3.0 a
 * new context, its init and its settings cost more than an RSA-2048 verify's
 * public operation (74,800 against 63,000 verifies a second measured here). A
 * context serves one verify at a time (the caller's ticket lends it out). */
void *kv_ctx(void *key, const kv_mech *m) {
    EVP_PKEY_CTX *c = key ? C.EVP_PKEY_CTX_new_from_pkey(kv_libctx, key, NULL) : NULL;
    if (!c) return NULL;
    int ok = C.EVP_PKEY_verify_init(c) == 1;
    if (ok && m->family == KV_RSA) {
        ok = C.EVP_PKEY_CTX_set_rsa_padding(c, m->scheme == KV_PSS ? RSA_PKCS1_PSS_PADDING_ID : RSA_PKCS1_PADDING_ID) == 1;
        if (ok && m->scheme == KV_PSS)
            ok = C.EVP_PKEY_CTX_set_signature_md(c, kv_md[m->pss_md]) == 1 &&
                 C.EVP_PKEY_CTX_set_rsa_mgf1_md(c, kv_md[m->mgf1_md]) == 1 &&
                 C.EVP_PKEY_CTX_set_rsa_pss_saltlen(c, m->salt) == 1;
        else if (ok && m->digest != KV_NONE)
            ok = C.EVP_PKEY_CTX_set_signature_md(c, kv_md[m->digest]) == 1;
    } else if (ok && m->digest != KV_NONE) {
        ok = C.EVP_PKEY_CTX_set_signature_md(c, kv_md[m->digest]) == 1;
    }
    C.ERR_clear_error();
    if (!ok) {
        C.EVP_PKEY_CTX_free(c);
        return NULL;
    }
    return c;
}

void kv_ctx_free(void *ctx) { if (ctx) C.EVP_PKEY_CTX_free(ctx); }
