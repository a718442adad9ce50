/*
 * A host for 84-agent-flood.sh: the agent's work follows what a call carries, not the output
 * capacity a client declares (Sources/AgentProtocol/serve.c decode_and_call). It makes N
 * C_EncryptInit + C_Encrypt (AES-256-CTR, 16 bytes) with a session key, first into a 32-byte
 * buffer, then into a buffer of CAPACITY bytes, and counts the agent's minor page faults over
 * each run (/proc/AGENTPID/stat, field 10): before, the agent allocated and wiped the declared
 * capacity on every call (16 MiB: 4,096 faults a call). The PIN comes from the environment (PIN).
 *   capacityhost MODULE N CAPACITY   (AGENTPID in the environment)
 * Prints ok/FAIL lines and "N passed, M failed".
 */
#include <stdlib.h>
#include "harness.h"

static int passed, failed;
static void check(int ok, const char *what, const char *detail) {
    if (ok) { printf("ok   - %s\n", what); passed++; }
    else { printf("FAIL - %s\n       %s\n", what, detail); failed++; }
}

/* The agent's minor faults so far, or -1. */
static long minflt(const char *pid) {
    char path[64], b[4096];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t n = fread(b, 1, sizeof b - 1, fp);
    fclose(fp);
    b[n] = 0;
    char *p = strrchr(b, ')');   /* after the command name, which may hold spaces */
    if (!p) return -1;
    long v = -1;
    /* fields after ")": state(3) ppid pgrp session tty tpgid flags minflt(10) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %ld", &v) != 1) return -1;
    return v;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: capacityhost MODULE N CAPACITY\n"); return 2; }
    const char *pin = getenv("PIN"), *agent = getenv("AGENTPID");
    int n = atoi(argv[2]);
    size_t capacity = (size_t)strtoul(argv[3], NULL, 10);
    CK_FUNCTION_LIST_3_0 *f = harness_load(argv[1]);
    if (!f) return 1;
    if (!pin || !agent || n <= 0 || capacity < 32) { printf("PIN, AGENTPID, N or CAPACITY missing\n0 passed, 1 failed\n"); return 1; }
    CK_SLOT_ID slots[16];
    CK_ULONG ns = 16;
    CK_SESSION_HANDLE s;
    if (f->C_Initialize(NULL) != CKR_OK || f->C_GetSlotList(CK_TRUE, slots, &ns) != CKR_OK || ns == 0 ||
        f->C_OpenSession(slots[0], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK ||
        f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin)) != CKR_OK) {
        printf("no session with a login on the first token\n0 passed, 1 failed\n");
        return 1;
    }
    CK_ULONG len32 = 32;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ATTRIBUTE t[] = {{CKA_VALUE_LEN, &len32, sizeof len32}, {CKA_ENCRYPT, &yes, 1}, {CKA_TOKEN, &no, 1}};
    CK_MECHANISM gen = {CKM_AES_KEY_GEN, NULL, 0};
    CK_OBJECT_HANDLE key;
    if (f->C_GenerateKey(s, &gen, t, 3, &key) != CKR_OK) { printf("C_GenerateKey\n0 passed, 1 failed\n"); return 1; }
    CK_AES_CTR_PARAMS ctr = {128, {0}};
    CK_MECHANISM m = {CKM_AES_CTR, &ctr, sizeof ctr};
    unsigned char in[16] = {1, 2, 3}, *out = malloc(capacity);
    if (!out) return 1;
    long per[2] = {0, 0};
    size_t caps[2] = {32, capacity};
    for (int run = 0; run < 2; run++) {
        long before = minflt(agent);
        CK_RV rv = CKR_OK;
        CK_ULONG got = 0;
        for (int i = 0; i < n && rv == CKR_OK; i++) {
            CK_ULONG len = caps[run];
            rv = f->C_EncryptInit(s, &m, key);
            if (rv == CKR_OK) rv = f->C_Encrypt(s, in, sizeof in, out, &len);
            got = len;
        }
        long after = minflt(agent);
        char d[160];
        snprintf(d, sizeof d, "rv 0x%lx, output %lu bytes", rv, got);
        check(rv == CKR_OK && got == 16, caps[run] == 32 ? "16 bytes into a 32-byte buffer" : "16 bytes into the large buffer", d);
        per[run] = before < 0 || after < 0 ? -1 : (after - before) / n;
    }
    char d[160];
    snprintf(d, sizeof d, "%ld faults a call with a %zu-byte buffer, %ld with 32 bytes", per[1], capacity, per[0]);
    /* A 16 MiB capacity wiped each call is 4,096 faults; what the call carries is a handful. */
    printf("  agent minor faults a call: %ld (32-byte buffer), %ld (%zu-byte buffer)\n", per[0], per[1], capacity);
    check(per[0] >= 0 && per[1] >= 0 && per[1] <= per[0] + 16,
          "the agent's work follows the 16 bytes, not the declared capacity (page faults a call)", d);
    f->C_Finalize(NULL);
    printf("%d passed, %d failed\n", passed, failed);
    return 0;
}
