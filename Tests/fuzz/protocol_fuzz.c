/*
 * libFuzzer target for the agent protocol's codecs (Sources/AgentProtocol,
 * docs/agent.md): both directions a hostile peer controls.
 *   mode 0, the agent's side: ksa_decode_request on bytes from a client, then
 *     ksa_encode_reply over what was decoded (the outputs the agent would send
 *     back, from the arena buffers the decoder sized).
 *   mode 1, the client's side: ksa_apply_reply on bytes from an agent, into
 *     caller buffers allocated at exactly their declared capacities, so a write
 *     past a caller's buffer is an AddressSanitizer report.
 *   mode 2: ksa_serve on a whole call frame, against a function table whose
 *     entries return a CK_RV from the input without touching the arguments.
 * Input: u8 mode, u8 function id, u8 capacity seed, then the payload.
 * Without -DFUZZ_MAIN_REPLAY a libFuzzer target (clang -fsanitize=fuzzer,address
 * with the AgentProtocol C files); with it, a plain program that replays files
 * (Tests/integration/62-fuzz-replay.sh, make test).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../Sources/AgentProtocol/include/agent_protocol.h"
#include "../../Sources/AgentProtocol/codec_internal.h"

static CK_RV fake_rv;

/* Every entry of the fake table: returns the input's CK_RV, reads and writes nothing. */
#define FAKE(name) static CK_RV fake_##name() { return fake_rv; }
FAKE(any)

static CK_FUNCTION_LIST_3_0 table;

/* The PKCS #11 3.2 entries ksa_serve reaches through ksa_call_3_2 (v32_params.c), fake too. */
static ksa_functions_3_2 table_3_2;

static void fill_table(void) {
    void **p = (void **)&table.C_Initialize;
    void **end = (void **)((char *)&table + sizeof table);
    for (; p < end; p++) *p = (void *)fake_any;
    p = (void **)&table_3_2;
    end = (void **)((char *)&table_3_2 + sizeof table_3_2);
    for (; p < end; p++) *p = (void *)fake_any;
    ksa_register_functions_3_2(&table_3_2);
}

/* A caller's per-message parameter (X Y Z), as the client sent it: by the
 * capacity seed a GCM or ChaCha20-Poly1305 struct whose IV and tag buffers
 * are exactly as long as the struct says (heap: ASan sees their ends), or an
 * opaque one. a->cap is the kind the request carried. */
static CK_GCM_MESSAGE_PARAMS fuzz_gcm;
static CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS fuzz_chacha;
static uint8_t fuzz_opaque[16];
static int message_arg(ksa_arg *a, char k, CK_ULONG cap, void **allocs) {
    int n = 0;
    switch (k == 'Z' ? 2 : cap % 3) {
    case 0:
        fuzz_gcm.ulIvLen = cap % 32 + 1;
        fuzz_gcm.pIv = allocs[n++] = malloc(fuzz_gcm.ulIvLen);
        fuzz_gcm.ulTagBits = 32 + 8 * (cap % 13);
        fuzz_gcm.pTag = allocs[n++] = malloc(fuzz_gcm.ulTagBits / 8);
        a->ptr = &fuzz_gcm;
        a->len = sizeof fuzz_gcm;
        a->cap = PARAM_GCM_MSG;
        break;
    case 1:
        fuzz_chacha.ulNonceLen = 12;
        fuzz_chacha.pNonce = allocs[n++] = malloc(12);
        fuzz_chacha.pTag = allocs[n++] = malloc(16);
        a->ptr = &fuzz_chacha;
        a->len = sizeof fuzz_chacha;
        a->cap = PARAM_CHACHA_MSG;
        break;
    default:
        a->ptr = fuzz_opaque;
        a->len = sizeof fuzz_opaque;
        a->cap = PARAM_SIZED;
        break;
    }
    return n;
}

/* Client-side arguments for `sig`, every buffer exactly `cap` long (heap, so
 * ASan sees its end). Returns the allocations to free. */
static int client_args(const char *sig, ksa_arg *a, CK_ULONG cap, void **allocs, CK_ATTRIBUTE *tmpl,
                       CK_ULONG *caps, CK_ULONG *lens) {
    int n = 0;
    for (int i = 0; sig[i]; i++) {
        memset(&a[i], 0, sizeof a[i]);
        switch (sig[i]) {
        case 'O': case 'A': case 'F': {
            size_t elem = sig[i] == 'O' ? 1 : sizeof(CK_ULONG);
            a[i].ptr = allocs[n++] = malloc(cap * elem + 1);
            lens[i] = cap;
            a[i].plen = &lens[i];
            a[i].ul = cap;
            a[i].cap = cap;
            break;
        }
        case 'R': a[i].ptr = allocs[n++] = malloc(cap + 1); a[i].ul = cap; break;
        case 'L': a[i].plen = &lens[i]; break;
        case 'G':
            for (int k = 0; k < 4; k++) {
                tmpl[k].type = (CK_ATTRIBUTE_TYPE)k;
                tmpl[k].ulValueLen = cap >> k;
                tmpl[k].pValue = allocs[n++] = malloc((cap >> k) + 1);
                caps[k] = cap >> k;
            }
            /* The last entry a CKA_WRAP_TEMPLATE (template_params.c): an array
             * of cap/24 inner attributes, each inner buffer exactly `k` bytes
             * (heap), so a reply writing past any of them is an ASan report. */
            if (cap >= sizeof(CK_ATTRIBUTE)) {
                CK_ULONG count = cap / sizeof(CK_ATTRIBUTE);
                CK_ATTRIBUTE *inner = allocs[n++] = malloc(count * sizeof *inner);
                for (CK_ULONG k = 0; k < count && k < 4; k++) {
                    inner[k].type = 0;
                    inner[k].ulValueLen = k;
                    inner[k].pValue = allocs[n++] = malloc(k + 1);
                }
                for (CK_ULONG k = 4; k < count; k++) { inner[k].type = 0; inner[k].pValue = NULL; inner[k].ulValueLen = 0; }
                tmpl[3].type = CKA_WRAP_TEMPLATE;
                tmpl[3].pValue = inner;
                tmpl[3].ulValueLen = caps[3] = count * sizeof *inner;
            }
            a[i].ptr = tmpl;
            a[i].len = 4;
            a[i].plen = caps;
            break;
        case 'i': a[i].ptr = allocs[n++] = malloc(sizeof(CK_INFO)); break;
        case 's': a[i].ptr = allocs[n++] = malloc(sizeof(CK_SLOT_INFO)); break;
        case 't': a[i].ptr = allocs[n++] = malloc(sizeof(CK_TOKEN_INFO)); break;
        case 'e': a[i].ptr = allocs[n++] = malloc(sizeof(CK_SESSION_INFO)); break;
        case 'm': a[i].ptr = allocs[n++] = malloc(sizeof(CK_MECHANISM_INFO)); break;
        case 'X': case 'Y': case 'Z': n += message_arg(&a[i], sig[i], cap, allocs + n); break;
        default: break;
        }
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    uint8_t mode = data[0] % 3;
    uint32_t fn = data[1] % (KSA_FN_COUNT + 2);  /* also unknown ids */
    CK_ULONG cap = data[2];
    data += 3;
    size -= 3;
    const char *sig = ksa_signature(fn);
    ksa_buf out;
    ksa_buf_init(&out);
    if (mode == 0) {
        if (!sig) return 0;
        ksa_arg a[KSA_MAX_ARGS];
        ksa_arena arena = {0};
        ksa_rd r = {data, size, 0};
        /* The agent's sized decode (serve.c) on odd capacity bytes: outputs cut to the input plus slack. */
        int reduced = 0;
        if (ksa_decode_request_sized(fn, &r, a, &arena, (int)(cap & 1), &reduced) == 0) ksa_encode_reply(fn, a, CKR_OK, &out);
        ksa_arena_free(&arena);
    } else if (mode == 1) {
        if (!sig) return 0;
        ksa_arg a[KSA_MAX_ARGS];
        void *allocs[KSA_MAX_ARGS * 4 + 8] = {0};
        CK_ATTRIBUTE tmpl[4];
        CK_ULONG caps[4], lens[KSA_MAX_ARGS];
        int n = client_args(sig, a, cap, allocs, tmpl, caps, lens);
        ksa_rd r = {data, size, 0};
        (void)ksa_apply_reply(fn, a, &r);
        for (int i = 0; i < n; i++) free(allocs[i]);
    } else {
        fake_rv = size ? data[0] : CKR_OK;
        if (!table.C_Initialize) fill_table();
        (void)ksa_serve(&table, data, size, &out);
    }
    ksa_buf_free(&out);
    return 0;
}

#include "replay_main.h"

#ifdef FUZZ_MAKE_SEEDS
/* Seeds: real encodings from the codec itself (a sign round trip, a GCM
 * EncryptInit, a template, a GetAttributeValue), written to DIR/seed-N. */
static int seed_no;
static void put_seed(const char *dir, uint8_t mode, uint32_t fn, uint8_t cap, const ksa_buf *b, size_t skip) {
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%d", dir, seed_no++);
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    uint8_t h[3] = {mode, (uint8_t)fn, cap};
    fwrite(h, 1, 3, fp);
    fwrite(b->data + skip, 1, b->len - skip, fp);
    fclose(fp);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    uint8_t data[32] = {1, 2, 3}, iv[12] = {4}, aad[5] = {5}, sig[64];
    CK_ULONG siglen = sizeof sig, handle = 0;
    CK_GCM_PARAMS gcm = {iv, sizeof iv, 96, aad, sizeof aad, 128};
    CK_MECHANISM mech = {CKM_AES_GCM, &gcm, sizeof gcm};
    CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE tmpl[2] = {{CKA_TOKEN, &yes, 1}, {CKA_LABEL, data, 8}};
    CK_ULONG caps[2];
    /* Template attributes (template_params.c): a CKA_WRAP_TEMPLATE in a
     * template, and one asked of C_GetAttributeValue with inner buffers. */
    CK_ULONG cls = CKO_SECRET_KEY;
    CK_ATTRIBUTE inner[2] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_ID, data, 4}};
    CK_ATTRIBUTE wtmpl[2] = {{CKA_TOKEN, &yes, 1}, {CKA_WRAP_TEMPLATE, inner, sizeof inner}};
    uint8_t ib0[8], ib1[2];
    CK_ATTRIBUTE ginner[2] = {{0, ib0, sizeof ib0}, {0, ib1, sizeof ib1}};
    CK_ATTRIBUTE gtmpl[2] = {{CKA_WRAP_TEMPLATE, ginner, sizeof ginner}, {CKA_UNWRAP_TEMPLATE, NULL, 0}};
    CK_ULONG gcaps[2];
    /* SP 800-108 counter mode with one additional key (a handle handed back). */
    CK_SP800_108_COUNTER_FORMAT ctr = {CK_FALSE, 32};
    CK_PRF_DATA_PARAM prf[2] = {{CK_SP800_108_ITERATION_VARIABLE, &ctr, sizeof ctr}, {CK_SP800_108_BYTE_ARRAY, data, 8}};
    CK_OBJECT_HANDLE extra = 0;
    CK_DERIVED_KEY dk = {tmpl, 2, &extra};
    CK_SP800_108_KDF_PARAMS kdf = {CKM_SHA256_HMAC, 2, prf, 1, &dk};
    CK_MECHANISM kdfMech = {CKM_SP800_108_COUNTER_KDF, &kdf, sizeof kdf};
    CK_HKDF_PARAMS hk = {CK_TRUE, CK_TRUE, CKM_SHA256, CKF_HKDF_SALT_DATA, data, 4, 0, data, 6};
    CK_MECHANISM hkMech = {CKM_HKDF_DERIVE, &hk, sizeof hk};
    /* Protocol 3: ChaCha20-Poly1305, EdDSA, RSA-AES wrap, the message functions. */
    uint8_t tag[16] = {6}, out[64];
    CK_ULONG outlen = sizeof out;
    CK_SALSA20_CHACHA20_POLY1305_PARAMS cc = {iv, sizeof iv, aad, sizeof aad};
    CK_MECHANISM ccMech = {CKM_CHACHA20_POLY1305, &cc, sizeof cc};
    CK_EDDSA_PARAMS ed = {CK_TRUE, 5, aad};
    CK_MECHANISM edMech = {CKM_EDDSA, &ed, sizeof ed};
    CK_RSA_PKCS_OAEP_PARAMS oaep = {CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, aad, sizeof aad};
    CK_RSA_AES_KEY_WRAP_PARAMS ra = {256, &oaep};
    CK_MECHANISM raMech = {CKM_RSA_AES_KEY_WRAP, &ra, sizeof ra};
    CK_GCM_MESSAGE_PARAMS gm = {iv, sizeof iv, 32, CKG_GENERATE_RANDOM, tag, 128};
    CK_MECHANISM gmMech = {CKM_AES_GCM, &gm, sizeof gm};
    CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS cm = {iv, sizeof iv, tag};
    /* PKCS #11 3.2 (issue 18): the signature-first verify, the validation flags, authenticated wrapping. */
    CK_GCM_PARAMS wg = {iv, sizeof iv, 96, NULL, 0, 128};
    CK_MECHANISM wgMech = {CKM_AES_GCM, &wg, sizeof wg};
    CK_MECHANISM ecdsaMech = {CKM_ECDSA_SHA256, NULL, 0};
    CK_ULONG flags = 0;
    /* PKCS #11 3.2 post-quantum (pq_params.c): the signature parameters, key encapsulation. */
    CK_SIGN_ADDITIONAL_CONTEXT pqs = {CKH_HEDGE_PREFERRED, aad, sizeof aad};
    CK_MECHANISM pqMech = {CKM_ML_DSA, &pqs, sizeof pqs};
    CK_HASH_SIGN_ADDITIONAL_CONTEXT pqh = {CKH_DETERMINISTIC_REQUIRED, aad, sizeof aad, CKM_SHA256};
    CK_MECHANISM pqhMech = {CKM_HASH_ML_DSA, &pqh, sizeof pqh};
    CK_MECHANISM kemMech = {CKM_ML_KEM, NULL, 0};
    /* The classical KEMs (ECDH with pPublicData NULL, RSASVE), a context over 255 bytes (crosses as
     * NULL with its length), a CKA_ENCAPSULATE_TEMPLATE in a template. */
    CK_ECDH1_DERIVE_PARAMS ecdhKem = {CKD_SHA256_KDF, sizeof aad, aad, 0, NULL};
    CK_MECHANISM ecdhKemMech = {CKM_ECDH1_DERIVE, &ecdhKem, sizeof ecdhKem};
    CK_MECHANISM x509Mech = {CKM_RSA_X_509, NULL, 0};
    static uint8_t longctx[300];
    CK_SIGN_ADDITIONAL_CONTEXT pql = {CKH_HEDGE_REQUIRED, longctx, sizeof longctx};
    CK_MECHANISM pqlMech = {CKM_SLH_DSA, &pql, sizeof pql};
    CK_ATTRIBUTE etmpl[2] = {{CKA_TOKEN, &yes, 1}, {CKA_ENCAPSULATE_TEMPLATE, inner, sizeof inner}};
    struct { uint32_t fn; ksa_arg a[KSA_MAX_ARGS]; } calls[] = {
        {KSA_FN_VerifySignatureInit, {{.ul = 7}, {.ptr = &ecdsaMech}, {.ul = 9}, {.ptr = sig, .len = 64}}},
        {KSA_FN_VerifySignatureUpdate, {{.ul = 7}, {.ptr = data, .len = 32}}},
        {KSA_FN_VerifySignatureFinal, {{.ul = 7}}},
        {KSA_FN_GetSessionValidationFlags, {{.ul = 7}, {.ul = 1}, {.plen = &flags}}},
        {KSA_FN_WrapKeyAuthenticated, {{.ul = 7}, {.ptr = &wgMech}, {.ul = 9}, {.ul = 10}, {.ptr = aad, .len = sizeof aad},
                                       {.ptr = out, .plen = &outlen}}},
        {KSA_FN_UnwrapKeyAuthenticated, {{.ul = 7}, {.ptr = &wgMech}, {.ul = 9}, {.ptr = data, .len = 32},
                                         {.ptr = tmpl, .len = 2}, {.ptr = aad, .len = sizeof aad}, {.plen = &handle}}},
        {KSA_FN_DeriveKey, {{.ul = 7}, {.ptr = &kdfMech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.plen = &handle}}},
        {KSA_FN_DeriveKey, {{.ul = 7}, {.ptr = &hkMech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.plen = &handle}}},
        {KSA_FN_Sign, {{.ul = 7}, {.ptr = data, .len = 32}, {.ptr = sig, .plen = &siglen}}},
        {KSA_FN_EncryptInit, {{.ul = 7}, {.ptr = &mech}, {.ul = 9}}},
        {KSA_FN_CreateObject, {{.ul = 7}, {.ptr = tmpl, .len = 2}, {.plen = &handle}}},
        {KSA_FN_GetAttributeValue, {{.ul = 7}, {.ul = 9}, {.ptr = tmpl, .len = 2, .plen = caps}}},
        {KSA_FN_CreateObject, {{.ul = 7}, {.ptr = wtmpl, .len = 2}, {.plen = &handle}}},
        {KSA_FN_GetAttributeValue, {{.ul = 7}, {.ul = 9}, {.ptr = gtmpl, .len = 2, .plen = gcaps}}},
        {KSA_FN_GetSlotList, {{.ul = 1}, {.ptr = sig, .plen = &siglen}}},
        {KSA_FN_GetTokenInfo, {{.ul = 1}, {.ptr = sig}}},
        {KSA_FN_EncryptInit, {{.ul = 7}, {.ptr = &ccMech}, {.ul = 9}}},
        {KSA_FN_SignInit, {{.ul = 7}, {.ptr = &edMech}, {.ul = 9}}},
        {KSA_FN_WrapKey, {{.ul = 7}, {.ptr = &raMech}, {.ul = 9}, {.ul = 10}, {.ptr = out, .plen = &outlen}}},
        {KSA_FN_MessageEncryptInit, {{.ul = 7}, {.ptr = &gmMech}, {.ul = 9}}},
        {KSA_FN_EncryptMessage, {{.ul = 7}, {.ptr = &gm, .len = sizeof gm}, {.ptr = aad, .len = sizeof aad},
                                 {.ptr = data, .len = 32}, {.ptr = out, .plen = &outlen}}},
        {KSA_FN_EncryptMessageBegin, {{.ul = 7}, {.ptr = &gm, .len = sizeof gm}, {.ptr = aad, .len = sizeof aad}}},
        {KSA_FN_DecryptMessageNext, {{.ul = 7}, {.ptr = &cm, .len = sizeof cm}, {.ptr = data, .len = 32},
                                     {.ptr = out, .plen = &outlen}, {.ul = CKF_END_OF_MESSAGE}}},
        {KSA_FN_SignMessage, {{.ul = 7}, {.ptr = data, .len = 16}, {.ptr = data, .len = 32}, {.ptr = out, .plen = &outlen}}},
        {KSA_FN_SignInit, {{.ul = 7}, {.ptr = &pqMech}, {.ul = 9}}},
        {KSA_FN_VerifyInit, {{.ul = 7}, {.ptr = &pqhMech}, {.ul = 9}}},
        {KSA_FN_EncapsulateKey, {{.ul = 7}, {.ptr = &kemMech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.ptr = out, .plen = &outlen},
                                 {.plen = &handle}}},
        {KSA_FN_DecapsulateKey, {{.ul = 7}, {.ptr = &kemMech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.ptr = data, .len = 32},
                                 {.plen = &handle}}},
        {KSA_FN_EncapsulateKey, {{.ul = 7}, {.ptr = &ecdhKemMech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.ptr = out, .plen = &outlen},
                                 {.plen = &handle}}},
        {KSA_FN_DecapsulateKey, {{.ul = 7}, {.ptr = &x509Mech}, {.ul = 9}, {.ptr = tmpl, .len = 2}, {.ptr = data, .len = 32},
                                 {.plen = &handle}}},
        {KSA_FN_SignInit, {{.ul = 7}, {.ptr = &pqlMech}, {.ul = 9}}},
        {KSA_FN_CreateObject, {{.ul = 7}, {.ptr = etmpl, .len = 2}, {.plen = &handle}}},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        ksa_buf b;
        ksa_buf_init(&b);
        ksa_put_u32(&b, 1);
        ksa_put_u32(&b, calls[i].fn);
        if (ksa_encode_request(calls[i].fn, calls[i].a, &b) != CKR_OK) return 1;
        put_seed(argv[1], 0, calls[i].fn, 64, &b, 8);   /* the agent decodes the arguments */
        put_seed(argv[1], 2, 0, 0, &b, 0);              /* ksa_serve takes the whole frame */
        /* The agent's reply to it, for the client's side. */
        ksa_rd r = {b.data + 8, b.len - 8, 0};
        ksa_arg d[KSA_MAX_ARGS];
        ksa_arena arena = {0};
        if (ksa_decode_request(calls[i].fn, &r, d, &arena) == 0) {
            ksa_buf rep;
            ksa_buf_init(&rep);
            ksa_encode_reply(calls[i].fn, d, CKR_OK, &rep);
            put_seed(argv[1], 1, calls[i].fn, 64, &rep, 0);
            ksa_buf_free(&rep);
        }
        ksa_arena_free(&arena);
        ksa_buf_free(&b);
    }
    printf("%d seeds\n", seed_no);
    return 0;
}
#endif
