#ifndef KEYSHARE_OPENSSL_SUPPORT_H
#define KEYSHARE_OPENSSL_SUPPORT_H
#include <stddef.h>

/// The directory of the ELF object this code is linked into (the module's .so, the CLI, a test
/// binary), written NUL-terminated into buf. Returns 1, or 0 when it cannot be told or buf is too
/// small. The bundled OpenSSL's legacy provider is looked for next to that object (issue 18).
int ks_self_object_dir(char *buf, size_t size);

/// 1 when `address` (a function) lies in the same ELF object as this code: for OpenSSL_version, that
/// libcrypto is linked into this binary (the bundled engine) rather than a shared libcrypto.so.
int ks_same_object(const void *address);

#endif
