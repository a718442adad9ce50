#ifndef KEYSHARE_OPENSSL_SUPPORT_H
#define KEYSHARE_OPENSSL_SUPPORT_H
#include <stddef.h>
#include <openssl/types.h>

/// The directory of the ELF object this code is linked into (the module's .so, the CLI, a test
/// binary), written NUL-terminated into buf. Returns 1, or 0 when it cannot be told or buf is too
/// small. The bundled OpenSSL's legacy provider is looked for next to that object (issue 18).
int ks_self_object_dir(char *buf, size_t size);

/// 1 when `address` (a function) lies in the same ELF object as this code: for OpenSSL_version, that
/// libcrypto is linked into this binary (the bundled engine) rather than a shared libcrypto.so.
int ks_same_object(const void *address);

/// keyshare's own OpenSSL library context (issue 29; docs/architecture.md, "The crypto engine"):
/// made once, with the "default" provider loaded explicitly and no configuration file read, so no
/// provider, engine or property a host's OPENSSL_CONF names ever serves keyshare's operations,
/// whether libcrypto is linked into this binary or shared with the host. NULL only if OpenSSL
/// cannot make one (out of memory); callers then fall back to the default context.
OSSL_LIB_CTX *ks_libctx(void);

/// 1 when this code's OpenSSL is its own: linked statically into this object (the bundled engine)
/// or the main program's (keyshare's CLI and agent). Only then does keyshare turn off OpenSSL's
/// automatic configuration loading for the whole library (OPENSSL_INIT_NO_LOAD_CONFIG, at load
/// time); a libcrypto.so shared with a host is the host's to configure.
int ks_openssl_is_own(void);

#endif
