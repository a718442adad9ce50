#ifndef KEYSHARE_ABI_H
#define KEYSHARE_ABI_H
#include "../../types/pkcs11_shim.h"
#endif
