/*
 * /usr/bin/keyshare: loads the engine, libkeyshare-engine.so, and runs the CLI (or the agent,
 * `keyshare agent`) in it. The engine is one image shared with libkeyshare-pkcs11.so's in-process
 * mode, so the Swift runtime, the static OpenSSL and the layers are installed once
 * (docs/packaging.md, "Size"; docs/architecture.md, "Images").
 *
 * The engine is found from this program's own path (/proc/self/exe), never from a variable:
 * next to it (a build directory), then ../lib/<triplet>/keyshare/ (the installed layout under
 * any prefix), then /usr/lib/<triplet>/keyshare/ (`make install PREFIX=/usr/local`, whose engine
 * goes beside the system's PKCS #11 modules).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#define KS_TRIPLET "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define KS_TRIPLET "aarch64-linux-gnu"
#elif defined(__i386__)
#define KS_TRIPLET "i386-linux-gnu"
#elif defined(__riscv) && __riscv_xlen == 64
#define KS_TRIPLET "riscv64-linux-gnu"
#else
#error "add this architecture's Debian multiarch triplet"
#endif

int main(int argc, char **argv) {
    char self[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "keyshare: cannot read /proc/self/exe (is /proc mounted?)\n");
        return 1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    const char *where[] = {"%s/libkeyshare-engine.so", "%s/../lib/" KS_TRIPLET "/keyshare/libkeyshare-engine.so",
                           "/usr/lib/" KS_TRIPLET "/keyshare/libkeyshare-engine.so"};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(path, sizeof path, where[i], self);
        if (access(path, F_OK) != 0) continue;
        void *engine = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (engine == NULL) {
            fprintf(stderr, "keyshare: cannot load %s: %s\n", path, dlerror());
            return 1;
        }
        int (*run)(int, char **) = (int (*)(int, char **))dlsym(engine, "keyshare_main_v1");
        if (run == NULL) {
            fprintf(stderr, "keyshare: %s is not this program's engine (reinstall keyshare)\n", path);
            return 1;
        }
        return run(argc, argv);
    }
    fprintf(stderr, "keyshare: libkeyshare-engine.so is missing (looked in %s, %s/../lib/" KS_TRIPLET
                    "/keyshare and /usr/lib/" KS_TRIPLET "/keyshare): reinstall keyshare\n", self, self);
    return 1;
}
