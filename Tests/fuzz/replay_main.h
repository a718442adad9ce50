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
#endif
