/* The plain replay program of a C libFuzzer target (protocol_fuzz.c, shm_fuzz.c): built with
 * -DFUZZ_MAIN_REPLAY by Tests/integration/62-fuzz-replay.sh in `make test`, it runs
 * LLVMFuzzerTestOneInput once per file named on the command line (corpus entries, crash
 * reproducers) and says how many it replayed. Included once, at the end of the target. */
#ifndef KS_FUZZ_REPLAY_MAIN_H
#define KS_FUZZ_REPLAY_MAIN_H
#ifdef FUZZ_MAIN_REPLAY
#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int n = 0;
    static uint8_t buf[1 << 20];
    for (int i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb");
        if (!fp) continue;
        size_t len = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        LLVMFuzzerTestOneInput(buf, len);
        n++;
    }
    printf("replayed %d inputs\n", n);
    return 0;
}
#endif

#ifdef FUZZ_MAKE_SEEDS
/* The seed writer of the targets that make their own seeds (-DFUZZ_MAKE_SEEDS:
 * hello_fuzz.c, gate_fuzz.c): one file per seed, seed-N in DIR. */
#include <stdio.h>
static int seed_no;
__attribute__((unused)) static void write_seed(const char *dir, const ksa_buf *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%d", dir, seed_no++);
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(b->data, 1, b->len, fp);
    fclose(fp);
}
#endif
#endif
