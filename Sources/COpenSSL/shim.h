#ifndef KEYSHARE_COPENSSL_SHIM_H
#define KEYSHARE_COPENSSL_SHIM_H
// The OpenSSL 3 surface keyshare uses. Function-like macros are not imported
// into Swift, so the few that matter are wrapped as static inline functions.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

static inline long ks_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline void ks_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline int ks_sk_X509_num(const STACK_OF(X509) *s) { return sk_X509_num(s); }
static inline X509 *ks_sk_X509_value(const STACK_OF(X509) *s, int i) { return sk_X509_value(s, i); }
static inline STACK_OF(X509) *ks_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int ks_sk_X509_push(STACK_OF(X509) *s, X509 *x) { return sk_X509_push(s, x); }
static inline void ks_sk_X509_pop_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }
static inline void ks_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
static inline int ks_sk_GENERAL_NAME_num(const GENERAL_NAMES *s) { return sk_GENERAL_NAME_num(s); }
static inline GENERAL_NAME *ks_sk_GENERAL_NAME_value(const GENERAL_NAMES *s, int i) { return sk_GENERAL_NAME_value(s, i); }
static inline void ks_GENERAL_NAMES_free(GENERAL_NAMES *s) { GENERAL_NAMES_free(s); }

#endif
