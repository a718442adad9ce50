#!/usr/bin/env bash
# Bad input and faults through the C ABI: wrong mechanism parameters (OAEP,
# GCM with a NULL IV, wrong ulParameterLen), operations in the wrong state,
# the output-length rules, an object destroyed while another session uses
# it, a session closed mid-operation, C_Finalize while other threads are in
# C_Sign, dual-function calls, wrap policy. Every answer must be a clean
# CK_RV and the host must never crash.
# Usage: 54-pkcs11-faults.sh KEYSHARE MODULE. Ends with "N passed, M failed".
set -euo pipefail
MODULE=${2:-${1:?module path}}
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
. "$(dirname "$0")/lib.sh"
new_home
WORK=$(mktemp -d /tmp/keyshare-faults.XXXXXX)
trap 'rm -rf "$WORK" "$KEYSHARE_HOME"' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# PINs reach pkcs11-tool through the environment (--pin env:VAR), never argv.
export PIN=0000 SOPIN=1234  # faults.c below logs in with the same PIN
P=(pkcs11-tool --module "$MODULE")
"${P[@]}" --init-token --label faults --so-pin env:SOPIN --slot 1 >/dev/null
"${P[@]}" --init-pin --login --login-type so --so-pin env:SOPIN --new-pin env:PIN --token-label faults >/dev/null
"${P[@]}" --token-label faults --login --pin env:PIN --keypairgen --key-type rsa:2048 --id 01 --label rsa \
  --usage-sign --usage-decrypt >/dev/null

cat > "$WORK/faults.c" <<'EOF2'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "pkcs11_shim.h"

static int pass, fail;
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)
static CK_FUNCTION_LIST *f;
static CK_SLOT_ID slot;
static CK_BBOOL yes = CK_TRUE;

static CK_OBJECT_HANDLE find(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls) {
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}};
    CK_OBJECT_HANDLE h = 0; CK_ULONG n = 0;
    f->C_FindObjectsInit(s, t, 1); f->C_FindObjects(s, &h, 1, &n); f->C_FindObjectsFinal(s);
    return n ? h : 0;
}

static CK_OBJECT_HANDLE aes(CK_SESSION_HANDLE s, CK_BBOOL wrap, CK_BBOOL extractable) {
    CK_ULONG len = 32; CK_BBOOL dec = !wrap;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len, sizeof len}, {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &dec, 1},
                        {CKA_WRAP, &wrap, 1}, {CKA_UNWRAP, &wrap, 1}, {CKA_EXTRACTABLE, &extractable, 1}};
    CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE h = 0;
    return f->C_GenerateKey(s, &m, t, 6, &h) == CKR_OK ? h : 0;
}

static volatile int stop;
static CK_OBJECT_HANDLE rsa_key;
static CK_SESSION_HANDLE thread_sessions[4];
static int crashed_rv;
static void *signer(void *arg) {
    CK_SESSION_HANDLE s = *(CK_SESSION_HANDLE *)arg;
    CK_MECHANISM m = {CKM_SHA256_RSA_PKCS, NULL, 0};
    unsigned char sig[512]; CK_ULONG n;
    while (!stop) {
        CK_RV rv = f->C_SignInit(s, &m, rsa_key);
        if (rv == CKR_OK) { n = sizeof sig; rv = f->C_Sign(s, (CK_BYTE_PTR)"data", 4, sig, &n); }
        if (rv != CKR_OK && rv != CKR_CRYPTOKI_NOT_INITIALIZED && rv != CKR_SESSION_HANDLE_INVALID &&
            rv != CKR_KEY_HANDLE_INVALID && rv != CKR_OPERATION_NOT_INITIALIZED && rv != CKR_USER_NOT_LOGGED_IN) crashed_rv = (int)rv;
        if (rv == CKR_CRYPTOKI_NOT_INITIALIZED) break;
    }
    return NULL;
}

int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("0 passed, 1 failed\n"); return 1; }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    get(&f);
    f->C_Initialize(NULL);
    CK_SLOT_ID slots[8]; CK_ULONG ns = 8;
    f->C_GetSlotList(CK_TRUE, slots, &ns); slot = slots[0];
    CK_SESSION_HANDLE s, s2;
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s);
    f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s2);
    CHECK("login", f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)"0000", 4) == CKR_OK);
    rsa_key = find(s, CKO_PRIVATE_KEY);
    CK_OBJECT_HANDLE rsa_pub = find(s, CKO_PUBLIC_KEY);
    CK_OBJECT_HANDLE key = aes(s, CK_FALSE, CK_FALSE), kek = aes(s, CK_TRUE, CK_FALSE), open = aes(s, CK_FALSE, CK_TRUE);
    CHECK("keys", rsa_key && rsa_pub && key && kek && open);

    /* Wrong mechanism parameters. */
    unsigned char iv[16] = {0}, out[4096]; CK_ULONG n;
    CK_GCM_PARAMS g = {NULL, 12, 96, NULL, 0, 128};
    CK_MECHANISM gm = {CKM_AES_GCM, &g, sizeof g};
    CHECK("GCM with a NULL IV: CKR_MECHANISM_PARAM_INVALID", f->C_EncryptInit(s, &gm, key) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM gshort = {CKM_AES_GCM, &g, sizeof g - 8};
    CHECK("GCM with a short ulParameterLen", f->C_EncryptInit(s, &gshort, key) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM cnull = {CKM_AES_CBC, NULL, 16};
    CHECK("CBC with pParameter NULL and a length: CKR_ARGUMENTS_BAD", f->C_EncryptInit(s, &cnull, key) == CKR_ARGUMENTS_BAD);
    CK_MECHANISM cshort = {CKM_AES_CBC, iv, 8};
    CHECK("CBC with an 8-byte IV", f->C_EncryptInit(s, &cshort, key) == CKR_MECHANISM_PARAM_INVALID);
    CK_RSA_PKCS_OAEP_PARAMS o = {CKM_SHA256, CKG_MGF1_SHA256, CKZ_DATA_SPECIFIED, NULL, 5};
    CK_MECHANISM om = {CKM_RSA_PKCS_OAEP, &o, sizeof o};
    CHECK("OAEP with a NULL label of length 5", f->C_DecryptInit(s, &om, rsa_key) == CKR_MECHANISM_PARAM_INVALID);
    o.pSourceData = NULL; o.ulSourceDataLen = 0; o.hashAlg = CKM_MD5;
    CHECK("OAEP with MD5", f->C_DecryptInit(s, &om, rsa_key) == CKR_MECHANISM_PARAM_INVALID);
    o.hashAlg = CKM_SHA256; o.source = 7;
    CHECK("OAEP with an unknown source", f->C_DecryptInit(s, &om, rsa_key) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM rsa_with_param = {CKM_RSA_PKCS, iv, 4};
    CHECK("RSA-PKCS with a parameter", f->C_DecryptInit(s, &rsa_with_param, rsa_key) == CKR_MECHANISM_PARAM_INVALID);
    CK_MECHANISM unknown = {0x7777, NULL, 0};
    CHECK("unknown mechanism", f->C_EncryptInit(s, &unknown, key) == CKR_MECHANISM_INVALID);

    /* Wrong state and output-length rules. */
    CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, 16};
    CHECK("EncryptUpdate without init", f->C_EncryptUpdate(s, iv, 16, out, &n) == CKR_OPERATION_NOT_INITIALIZED);
    CHECK("EncryptInit", f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    CHECK("EncryptInit twice: CKR_OPERATION_ACTIVE", f->C_EncryptInit(s, &cbc, key) == CKR_OPERATION_ACTIVE);
    n = 0;
    CHECK("length query", f->C_Encrypt(s, iv, 5, NULL, &n) == CKR_OK && n == 16);
    n = 4;
    CHECK("short buffer: CKR_BUFFER_TOO_SMALL", f->C_Encrypt(s, iv, 5, out, &n) == CKR_BUFFER_TOO_SMALL && n == 16);
    n = sizeof out;
    CHECK("the operation survived both", f->C_Encrypt(s, iv, 5, out, &n) == CKR_OK && n == 16);
    CHECK("EncryptFinal after the end", f->C_EncryptFinal(s, out, &n) == CKR_OPERATION_NOT_INITIALIZED);
    CHECK("EncryptInit again", f->C_EncryptInit(s, &cbc, key) == CKR_OK);
    n = sizeof out;
    CHECK("EncryptUpdate", f->C_EncryptUpdate(s, iv, 5, out, &n) == CKR_OK && n == 0);
    n = sizeof out;
    CHECK("single-part after update: CKR_OPERATION_ACTIVE", f->C_Encrypt(s, iv, 5, out, &n) == CKR_OPERATION_ACTIVE);
    CK_MECHANISM pkcs = {CKM_RSA_PKCS, NULL, 0};
    CHECK("RSA DecryptInit", f->C_DecryptInit(s, &pkcs, rsa_key) == CKR_OK);
    n = sizeof out;
    CHECK("RSA ciphertext of the wrong length: CKR_ENCRYPTED_DATA_LEN_RANGE", f->C_Decrypt(s, iv, 16, out, &n) == CKR_ENCRYPTED_DATA_LEN_RANGE);
    CHECK("RSA EncryptInit with the public key", f->C_EncryptInit(s, &pkcs, rsa_pub) == CKR_OK);
    n = sizeof out;
    CHECK("RSA plaintext too long: CKR_DATA_LEN_RANGE", f->C_Encrypt(s, out, 250, out, &n) == CKR_DATA_LEN_RANGE);

    /* Dual function: digest and encrypt in one pass. */
    CK_MECHANISM sha = {CKM_SHA256, NULL, 0};
    f->C_DigestInit(s, &sha); f->C_EncryptInit(s, &cbc, key);
    n = sizeof out;
    CHECK("C_DigestEncryptUpdate", f->C_DigestEncryptUpdate(s, out, 32, out + 64, &n) == CKR_OK && n == 32);
    n = sizeof out;
    CHECK("digest after the dual call", f->C_DigestFinal(s, out, &n) == CKR_OK && n == 32);
    n = sizeof out;
    f->C_EncryptFinal(s, out, &n);

    /* Wrap policy. */
    CK_MECHANISM kw = {CKM_AES_KEY_WRAP, NULL, 0};
    n = sizeof out;
    CHECK("wrap an unextractable key: CKR_KEY_UNEXTRACTABLE", f->C_WrapKey(s, &kw, kek, key, out, &n) == CKR_KEY_UNEXTRACTABLE);
    n = 0;
    CHECK("wrap length query", f->C_WrapKey(s, &kw, kek, open, NULL, &n) == CKR_OK && n == 40);
    n = sizeof out;
    CHECK("wrap an extractable key", f->C_WrapKey(s, &kw, kek, open, out, &n) == CKR_OK && n == 40);
    CK_MECHANISM ecb_like = {CKM_AES_CBC, iv, 16};
    CHECK("the wrapping key cannot decrypt", f->C_DecryptInit(s, &ecb_like, kek) == CKR_KEY_FUNCTION_NOT_PERMITTED);

    /* An object destroyed by another session while in use. */
    CK_MECHANISM sm = {CKM_SHA256_RSA_PKCS, NULL, 0};
    CK_OBJECT_HANDLE victim = aes(s, CK_FALSE, CK_FALSE);
    CHECK("EncryptInit on the victim", f->C_EncryptInit(s, &cbc, victim) == CKR_OK);
    CHECK("another session destroys it", f->C_DestroyObject(s2, victim) == CKR_OK);
    n = sizeof out;
    CHECK("the running operation finishes cleanly", f->C_Encrypt(s, iv, 5, out, &n) == CKR_OK);
    CHECK("a new operation sees CKR_KEY_HANDLE_INVALID", f->C_EncryptInit(s, &cbc, victim) == CKR_KEY_HANDLE_INVALID);

    /* A session closed mid-operation. */
    CK_SESSION_HANDLE s3;
    f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s3);
    CHECK("SignInit in the doomed session", f->C_SignInit(s3, &sm, rsa_key) == CKR_OK);
    CHECK("SignUpdate", f->C_SignUpdate(s3, (CK_BYTE_PTR)"x", 1) == CKR_OK);
    CHECK("close it mid-operation", f->C_CloseSession(s3) == CKR_OK);
    n = sizeof out;
    CHECK("SignFinal on it: CKR_SESSION_HANDLE_INVALID", f->C_SignFinal(s3, out, &n) == CKR_SESSION_HANDLE_INVALID);

    /* C_Finalize while other threads are inside C_Sign. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &thread_sessions[i]);
        pthread_create(&t[i], NULL, signer, &thread_sessions[i]);
    }
    usleep(300000);
    CHECK("C_Finalize with signers running", f->C_Finalize(NULL) == CKR_OK);
    usleep(100000);
    stop = 1;
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK("signers saw only clean return values", crashed_rv == 0);
    CHECK("re-initialise after that", f->C_Initialize(NULL) == CKR_OK);
    CHECK("and it works", f->C_GetSlotList(CK_TRUE, NULL, &ns) == CKR_OK && ns >= 1);
    CHECK("C_Finalize", f->C_Finalize(NULL) == CKR_OK);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
EOF2
if cc -O1 -Wall -Werror -I "$ROOT/pkcs11/types" -o "$WORK/faults" "$WORK/faults.c" -ldl -lpthread; then
  "$WORK/faults" "$MODULE"
else
  echo "0 passed, 1 failed"
  exit 1
fi
