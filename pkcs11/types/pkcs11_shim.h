#ifndef KEYSHARE_PKCS11_SHIM_H
#define KEYSHARE_PKCS11_SHIM_H
#include <p11-kit-1/p11-kit/pkcs11.h>
#endif
