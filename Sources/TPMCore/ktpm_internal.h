// What ktpm.c shares with the other files of TPMCore (attest.c); not part of the API.
#ifndef KTPM_INTERNAL_H
#define KTPM_INTERNAL_H
#include "ktpm.h"
#include <tss2/tss2_esys.h>

#define CHECK(expr) do { TSS2_RC rc_ = (expr); if (rc_ != TSS2_RC_SUCCESS) return rc_; } while (0)

ESYS_CONTEXT *ktpm_esys(ktpm *t);
/// Loads a key blob under the storage root key with its authorization; the caller flushes *h.
uint32_t ktpm_load(ktpm *t, const uint8_t *blob, size_t len, const uint8_t *auth, size_t authlen, ESYS_TR *h);
/// Flushes the storage root key now (it is derived or loaded again when next needed).
void ktpm_srk_release(ktpm *t);

#endif
