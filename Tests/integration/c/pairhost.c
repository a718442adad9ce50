/*
 * A host for 79-agent-spin.sh (docs/agent-transport.md, "Round trips: init and call in
 * one frame", issue 30): an init that succeeded before with the same
 * arguments travels with its one-shot call. Checks that the PKCS #11 answers
 * stay those of one call at a time: repeated C_SignInit + C_Sign (ECDSA
 * P-256, session keys) and C_VerifyInit + C_Verify give good signatures and
 * CKR_SIGNATURE_INVALID for a bad one; C_EncryptInit + C_Encrypt and
 * C_DecryptInit + C_Decrypt (AES-CBC-PAD) round-trip; an init's error comes
 * from the init, every time; a second C_SignInit on a session whose init is
 * pending is CKR_OPERATION_ACTIVE; a length query (NULL output) keeps the
 * operation; an init followed by another kind of call (C_SignUpdate) works;
 * the key destroyed between a pending init and its call behaves as if the
 * init had gone alone (the agent has the operation). Prints "ok"/"FAIL"
 * lines and "N passed, M failed". PIN from the environment (PIN).
 * Usage: pairhost MODULE
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pkcs11_shim.h"

static int pass, fail;
#define RV(name, call, want) do { CK_RV rv_ = (call); if (rv_ == (CK_RV)(want)) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s: rv 0x%lx, want 0x%lx (line %d)\n", name, rv_, (CK_RV)(want), __LINE__); } } while (0)
#define CHECK(name, cond) do { if (cond) { pass++; printf("ok   - %s\n", name); } \
    else { fail++; printf("FAIL - %s (line %d)\n", name, __LINE__); } } while (0)

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: pairhost MODULE\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("FAIL - dlopen: %s\n0 passed, 1 failed\n", dlerror()); return 1; }
    CK_C_GetFunctionList gfl = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f;
    if (!gfl || gfl(&f) != CKR_OK || f->C_Initialize(NULL) != CKR_OK) { printf("FAIL - load\n0 passed, 1 failed\n"); return 1; }
    CK_SLOT_ID slots[8];
    CK_ULONG n = 8;
    CK_SESSION_HANDLE s;
    const char *pin = getenv("PIN");
    if (f->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK || n < 1 ||
        f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK ||
        !pin || f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) {
        printf("FAIL - session and login\n0 passed, 1 failed\n");
        return 1;
    }
    CK_BBOOL yes = CK_TRUE;
    CK_BYTE oid[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    CK_ATTRIBUTE pubt[] = {{CKA_EC_PARAMS, oid, sizeof oid}, {CKA_VERIFY, &yes, 1}};
    CK_ATTRIBUTE privt[] = {{CKA_SIGN, &yes, 1}};
    CK_MECHANISM gen = {CKM_EC_KEY_PAIR_GEN, NULL, 0}, ecdsa = {CKM_ECDSA, NULL, 0};
    CK_OBJECT_HANDLE pub, priv;
    RV("an EC P-256 session key pair", f->C_GenerateKeyPair(s, &gen, pubt, 2, privt, 1, &pub, &priv), CKR_OK);

    CK_BYTE digest[32], sig[80];
    memset(digest, 0x42, sizeof digest);
    int good = 0, verified = 0;
    for (int i = 0; i < 20; i++) {
        CK_ULONG sl = sizeof sig;
        digest[0] = (CK_BYTE)i;
        if (f->C_SignInit(s, &ecdsa, priv) != CKR_OK || f->C_Sign(s, digest, 32, sig, &sl) != CKR_OK || sl != 64) continue;
        good++;
        if (f->C_VerifyInit(s, &ecdsa, pub) == CKR_OK && f->C_Verify(s, digest, 32, sig, sl) == CKR_OK) verified++;
    }
    CHECK("20 x C_SignInit + C_Sign then C_VerifyInit + C_Verify (the same inits each time): every signature good", good == 20 && verified == 20);
    CK_ULONG sl = sizeof sig;
    RV("C_SignInit (again the same)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    RV("C_Sign", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);
    sig[5] ^= 1;
    RV("C_VerifyInit (again the same)", f->C_VerifyInit(s, &ecdsa, pub), CKR_OK);
    RV("C_Verify of a damaged signature: CKR_SIGNATURE_INVALID", f->C_Verify(s, digest, 32, sig, sl), CKR_SIGNATURE_INVALID);
    RV("C_VerifyInit after that", f->C_VerifyInit(s, &ecdsa, pub), CKR_OK);
    sig[5] ^= 1;
    RV("C_Verify of the good one", f->C_Verify(s, digest, 32, sig, sl), CKR_OK);

    /* An init's errors come from the init, also after the same init failed before. */
    for (int i = 0; i < 2; i++) {
        RV("C_SignInit with a handle that names nothing: CKR_KEY_HANDLE_INVALID from the init", f->C_SignInit(s, &ecdsa, 0x7ffffff1), CKR_KEY_HANDLE_INVALID);
        RV("  and C_Sign after it: CKR_OPERATION_NOT_INITIALIZED", f->C_Sign(s, digest, 32, sig, &sl), CKR_OPERATION_NOT_INITIALIZED);
    }
    for (int i = 0; i < 2; i++) {
        CK_RV r = f->C_SignInit(s, &ecdsa, pub);
        CHECK("C_SignInit with the public key: refused by the init", r == CKR_KEY_TYPE_INCONSISTENT || r == CKR_KEY_FUNCTION_NOT_PERMITTED);
    }

    /* A second init while one is pending: the agent has the first, the second is refused. */
    RV("C_SignInit (learned again)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    sl = sizeof sig;
    RV("C_Sign", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);
    RV("C_SignInit (pending)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    RV("a second C_SignInit on the session: CKR_OPERATION_ACTIVE", f->C_SignInit(s, &ecdsa, priv), CKR_OPERATION_ACTIVE);
    sl = sizeof sig;
    RV("  the first operation goes on: C_Sign", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);

    /* A length query keeps the operation; then the signature. */
    RV("C_SignInit (pending)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    CK_ULONG need = 0;
    RV("C_Sign with no buffer: the length", f->C_Sign(s, digest, 32, NULL, &need), CKR_OK);
    CHECK("  64 bytes", need == 64);
    sl = sizeof sig;
    RV("  then C_Sign with the buffer", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);

    /* A pending init followed by a multi-part call. */
    CK_MECHANISM sha_ecdsa = {CKM_ECDSA_SHA256, NULL, 0};
    RV("C_SignInit ECDSA-SHA256", f->C_SignInit(s, &sha_ecdsa, priv), CKR_OK);
    sl = sizeof sig;
    RV("  C_Sign", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);
    RV("C_SignInit ECDSA-SHA256 (pending)", f->C_SignInit(s, &sha_ecdsa, priv), CKR_OK);
    RV("  C_SignUpdate (not a pair: the init goes first)", f->C_SignUpdate(s, digest, 32), CKR_OK);
    sl = sizeof sig;
    RV("  C_SignFinal", f->C_SignFinal(s, sig, &sl), CKR_OK);

    /* Symmetric pairs: AES-CBC-PAD with a fixed IV, both ways. */
    CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
    CK_KEY_TYPE kt = CKK_AES;
    CK_BYTE kv[32], iv[16], pt[100], ct[128], back[128];
    memset(kv, 7, sizeof kv);
    memset(iv, 9, sizeof iv);
    for (int i = 0; i < 100; i++) pt[i] = (CK_BYTE)i;
    CK_ATTRIBUTE at[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_KEY_TYPE, &kt, sizeof kt}, {CKA_VALUE, kv, 32},
                         {CKA_ENCRYPT, &yes, 1}, {CKA_DECRYPT, &yes, 1}};
    CK_OBJECT_HANDLE aes;
    RV("an AES-256 session key", f->C_CreateObject(s, at, 5, &aes), CKR_OK);
    CK_MECHANISM cbc = {CKM_AES_CBC_PAD, iv, sizeof iv};
    int round = 0;
    for (int i = 0; i < 5; i++) {
        CK_ULONG cl = sizeof ct, bl = sizeof back;
        if (f->C_EncryptInit(s, &cbc, aes) == CKR_OK && f->C_Encrypt(s, pt, 100, ct, &cl) == CKR_OK && cl == 112 &&
            f->C_DecryptInit(s, &cbc, aes) == CKR_OK && f->C_Decrypt(s, ct, cl, back, &bl) == CKR_OK && bl == 100 &&
            memcmp(back, pt, 100) == 0)
            round++;
    }
    CHECK("5 x C_EncryptInit + C_Encrypt, C_DecryptInit + C_Decrypt (AES-CBC-PAD): the plaintext back", round == 5);

    /* The key destroyed between a pending init and its call: C_DestroyObject sends the
     * init first, so the agent holds the operation as it would have. */
    sl = sizeof sig;
    RV("C_SignInit (learned)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    RV("  C_Sign", f->C_Sign(s, digest, 32, sig, &sl), CKR_OK);
    RV("C_SignInit (pending)", f->C_SignInit(s, &ecdsa, priv), CKR_OK);
    RV("C_DestroyObject of the key", f->C_DestroyObject(s, priv), CKR_OK);
    sl = sizeof sig;
    CK_RV after = f->C_Sign(s, digest, 32, sig, &sl);
    printf("  C_Sign after the key was destroyed: rv 0x%lx\n", after);
    RV("C_SignInit with the destroyed key: CKR_KEY_HANDLE_INVALID from the init", f->C_SignInit(s, &ecdsa, priv), CKR_KEY_HANDLE_INVALID);
    f->C_Logout(s);
    f->C_CloseSession(s);
    f->C_Finalize(NULL);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
