/*
 * The module's pthread_atfork handlers (docs/reliability.md, "Fork with busy
 * threads"), registered by a constructor when the library is loaded, so they
 * are in place before any thread can enter the module. The handlers are
 * Swift (Sources/PKCS11Module/Support.swift): prepare waits until no thread is
 * inside the module and closes the store connections; parent reopens the
 * gate; child marks the runtime inherited (C_Initialize starts afresh).
 * The module is linked -z nodelete, so the handlers never outlive the code.
 */
#include <pthread.h>
#include "keyshare_abi.h"

__attribute__((constructor)) static void ks_register_fork_handlers(void) {
    pthread_atfork(ks_fork_prepare, ks_fork_parent, ks_fork_child);
}
