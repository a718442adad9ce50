/*
 * initbench MODULE N SIZE KIND: CPU time (this thread's, CLOCK_THREAD_CPUTIME_ID)
 * per C_EncryptInit + C_Encrypt of SIZE bytes, N times, under a 32-byte
 * session key (AES-256 or ChaCha20) created in the first slot's token; KIND
 * is gcm, ctr or chacha, or raw-gcm / raw-ctr / raw-chacha for the same work
 * on a new EVP_CIPHER_CTX per message (MODULE is then ignored); hmac is
 * C_SignInit + C_Sign of CKM_SHA256_HMAC under a generic secret key (the
 * per-call cost of a small keyed operation). CPU time,
 * not wall time: on a shared, loaded machine it is what stays comparable
 * between runs (docs/benchmarks.md, "One-shot encryption").
 *   cc -O2 -o initbench Benchmarks/initbench.c -ldl -lcrypto
 *   KEYSHARE_HOME=... PIN=... ./initbench .build/release/libkeyshare-pkcs11.so 20000 16384 gcm
 * The PIN comes from the environment (PIN), never the command line.
 */
#define CK_PTR *
#define CK_DECLARE_FUNCTION(r, n) r n
#define CK_DECLARE_FUNCTION_POINTER(r, n) r (*n)
#define CK_CALLBACK_FUNCTION(r, n) r (*n)
#include <p11-kit-1/p11-kit/pkcs11.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#ifndef CKM_CHACHA20_POLY1305
#define CKM_CHACHA20_POLY1305 0x4021UL
#endif
#ifndef CKK_CHACHA20
#define CKK_CHACHA20 0x33UL
#endif
typedef struct { CK_BYTE_PTR pNonce; CK_ULONG ulNonceLen; CK_BYTE_PTR pAAD; CK_ULONG ulAADLen; } CHACHA_PARAMS;
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
    const char *kind = argv[4];
    long n = atol(argv[2]); size_t size = atol(argv[3]);
    unsigned char key[32] = {1}, iv[16] = {2};
    unsigned char *in = calloc(1, size), *out = malloc(size + 64);
    if (!strncmp(kind, "raw-", 4)) {
        const EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, !strcmp(kind, "raw-gcm") ? "AES-256-GCM" : !strcmp(kind, "raw-ctr") ? "AES-256-CTR" : "ChaCha20-Poly1305", NULL);
        double t0 = now();
        for (long i = 0; i < n; i++) {
            EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(); int a, b;
            EVP_EncryptInit_ex2(x, c, key, iv, NULL); EVP_EncryptUpdate(x, out, &a, in, size); EVP_EncryptFinal_ex(x, out + a, &b);
            if (strcmp(kind, "raw-ctr")) EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, out + a + b);
            EVP_CIPHER_CTX_free(x);
        }
        printf("%s %zu: %.0f ns CPU/op\n", kind, size, (now() - t0) / n * 1e9);
        return 0;
    }
    void *dl = dlopen(argv[1], RTLD_NOW);
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(dl, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f; gfl(&f);
    if (f->C_Initialize(NULL) != CKR_OK) return 1;
    CK_SLOT_ID slots[8]; CK_ULONG ns = 8; f->C_GetSlotList(CK_TRUE, slots, &ns);
    CK_SESSION_HANDLE s; f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    const char *pin = getenv("PIN");
    if (f->C_Login(s, CKU_USER, (CK_BYTE_PTR)pin, strlen(pin)) != CKR_OK) return 2;
    CK_OBJECT_CLASS cls = CKO_SECRET_KEY; int hmac = !strcmp(kind, "hmac");
    CK_KEY_TYPE kt = !strcmp(kind, "chacha") ? CKK_CHACHA20 : hmac ? CKK_GENERIC_SECRET : CKK_AES; CK_BBOOL yes = CK_TRUE;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, key, 32}, {hmac ? CKA_SIGN : CKA_ENCRYPT, &yes, 1}};
    CK_OBJECT_HANDLE h; CK_RV rv = f->C_CreateObject(s, t, 4, &h); if (rv) { printf("create %lx\n", rv); return 3; }
    CK_GCM_PARAMS g = {iv, 12, 96, NULL, 0, 128};
    CK_AES_CTR_PARAMS c = {128, {0}}; memcpy(c.cb, iv, 16);
    CHACHA_PARAMS ch = {iv, 12, NULL, 0};
    CK_MECHANISM m = !strcmp(kind, "gcm") ? (CK_MECHANISM){CKM_AES_GCM, &g, sizeof g} : !strcmp(kind, "ctr") ? (CK_MECHANISM){CKM_AES_CTR, &c, sizeof c} : (CK_MECHANISM){CKM_CHACHA20_POLY1305, &ch, sizeof ch};
    if (hmac) m = (CK_MECHANISM){CKM_SHA256_HMAC, NULL, 0};
    double t0 = now();
    for (long i = 0; hmac && i < n; i++) {
        if ((rv = f->C_SignInit(s, &m, h))) { printf("init %lx\n", rv); return 4; }
        CK_ULONG len = size + 64;
        if ((rv = f->C_Sign(s, in, size, out, &len))) { printf("sign %lx\n", rv); return 5; }
    }
    for (long i = 0; !hmac && i < n; i++) {
        if ((rv = f->C_EncryptInit(s, &m, h))) { printf("init %lx\n", rv); return 4; }
        CK_ULONG len = size + 64;
        if ((rv = f->C_Encrypt(s, in, size, out, &len))) { printf("enc %lx\n", rv); return 5; }
    }
    printf("%s %zu: %.0f ns CPU/op\n", kind, size, (now() - t0) / n * 1e9);
    f->C_Finalize(NULL);
    return 0;
}
