/*
 * The agent's side of the PKCS #11 3.2 calls (issue 18): the signature-first verify
 * (C_VerifySignature*), C_GetSessionValidationFlags and C_WrapKeyAuthenticated /
 * C_UnwrapKeyAuthenticated. Their arguments cross with the existing signature characters
 * (codec.c: "uMuI", "uI", "u", "uuL", "uMuuIO", "uMuITIL"), so every bound the codec
 * applies (frame size, NULL versus empty, the output capacity, the GCM parameter's
 * lengths) applies to them unchanged. The functions themselves are the in-process module's,
 * registered by the agent's process (pkcs11/abi/agent_serve_3_2.c): this library does not
 * link the module, and a process that registers nothing (the protocol tests, the fuzzer)
 * answers CKR_FUNCTION_NOT_SUPPORTED, as an agent older than 3.2 does.
 */
#include "agent_protocol.h"

static const ksa_functions_3_2 *registered;

void ksa_register_functions_3_2(const ksa_functions_3_2 *f) {
    __atomic_store_n(&registered, f, __ATOMIC_RELEASE);
}

#define U(i) (a[i].ul)
#define B(i) ((CK_BYTE_PTR)a[i].ptr)
#define N(i) (a[i].len)
#define PL(i) (a[i].plen)
#define T(i) ((CK_ATTRIBUTE_PTR)a[i].ptr)
#define M(i) ((CK_MECHANISM_PTR)a[i].ptr)

CK_RV ksa_call_3_2(uint32_t fn, ksa_arg *a) {
    const ksa_functions_3_2 *f = __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
    if (f == NULL) return CKR_FUNCTION_NOT_SUPPORTED;
    switch (fn) {
    case KSA_FN_VerifySignatureInit: return f->VerifySignatureInit(U(0), M(1), U(2), B(3), N(3));
    case KSA_FN_VerifySignature: return f->VerifySignature(U(0), B(1), N(1));
    case KSA_FN_VerifySignatureUpdate: return f->VerifySignatureUpdate(U(0), B(1), N(1));
    case KSA_FN_VerifySignatureFinal: return f->VerifySignatureFinal(U(0));
    case KSA_FN_GetSessionValidationFlags: return f->GetSessionValidationFlags(U(0), U(1), PL(2));
    case KSA_FN_WrapKeyAuthenticated: return f->WrapKeyAuthenticated(U(0), M(1), U(2), U(3), B(4), N(4), B(5), PL(5));
    case KSA_FN_UnwrapKeyAuthenticated:
        return f->UnwrapKeyAuthenticated(U(0), M(1), U(2), B(3), N(3), T(4), N(4), B(5), N(5), PL(6));
    /* ML-KEM (issue 18): an agent that registered no KEM entries answers CKR_FUNCTION_NOT_SUPPORTED. */
    case KSA_FN_EncapsulateKey:
        return f->EncapsulateKey ? f->EncapsulateKey(U(0), M(1), U(2), T(3), N(3), B(4), PL(4), PL(5)) : CKR_FUNCTION_NOT_SUPPORTED;
    case KSA_FN_DecapsulateKey:
        return f->DecapsulateKey ? f->DecapsulateKey(U(0), M(1), U(2), T(3), N(3), B(4), N(4), PL(5)) : CKR_FUNCTION_NOT_SUPPORTED;
    default: return CKR_FUNCTION_NOT_SUPPORTED;
    }
}
