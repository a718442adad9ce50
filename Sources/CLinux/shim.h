#ifndef KEYSHARE_CLINUX_SHIM_H
#define KEYSHARE_CLINUX_SHIM_H
// Linux calls Swift cannot import directly (variadic prototypes), as inline
// wrappers; no library to link.
#include <sys/prctl.h>

/// PR_SET_DUMPABLE: 0 makes the process non-dumpable (no core, no same-uid
/// ptrace or /proc/PID/mem). Returns prctl's result.
static inline int keyshare_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}

/// PR_GET_DUMPABLE: 1 dumpable, 0 not, -1 error.
static inline int keyshare_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}
#endif
