/*
 * Registers the in-process PKCS #11 3.2 entries with the agent protocol's server
 * (Sources/AgentProtocol/v32_params.c), so `keyshare agent` serves the 3.2 calls with the
 * same functions the in-process 3.2 table has. Runs when the library is loaded; in the
 * module (.so) it is harmless: the client never serves calls.
 */
#include "keyshare_abi.h"
#include "../../Sources/AgentProtocol/include/agent_protocol.h"

static const ksa_functions_3_2 ks_served_3_2 = {
    .VerifySignatureInit = ks_C_VerifySignatureInit,
    .VerifySignature = ks_C_VerifySignature,
    .VerifySignatureUpdate = ks_C_VerifySignatureUpdate,
    .VerifySignatureFinal = ks_C_VerifySignatureFinal,
    .GetSessionValidationFlags = ks_C_GetSessionValidationFlags,
    .WrapKeyAuthenticated = ks_C_WrapKeyAuthenticated,
    .UnwrapKeyAuthenticated = ks_C_UnwrapKeyAuthenticated,
    .EncapsulateKey = ks_C_EncapsulateKey,
    .DecapsulateKey = ks_C_DecapsulateKey,
};

__attribute__((constructor)) static void ks_register_served_3_2(void) {
    ksa_register_functions_3_2(&ks_served_3_2);
}
