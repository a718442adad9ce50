// tpm2-tss (Debian libtss2-dev): ESAPI, the TCTI loader, marshalling and
// response-code decoding. The TPM work itself is in Sources/TPMCore (C, because
// the TPM2B/TPMT structures are unions of fixed arrays that Swift imports badly).
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
