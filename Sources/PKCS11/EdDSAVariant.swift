import CPKCS11
import KeyshareCrypto

/// Which RFC 8032 instance CKM_EDDSA names for a key, and whether OpenSSL
/// 3.0 can compute it. PKCS #11 3.0 §2.3.14 maps the parameter to the
/// instance: no parameter is Ed25519 (pure); a CK_EDDSA_PARAMS is Ed25519ctx
/// (phFlag false) or Ed25519ph (phFlag true) on an Ed25519 key, Ed448
/// (phFlag false) or Ed448ph (phFlag true) on an Ed448 key, each with the
/// optional context string.
///
/// OpenSSL 3.0 signs only the pure instances: its EdDSA signature provider
/// takes no parameters (EVP_SIGNATURE-ED25519(7) of 3.0: "No additional
/// parameters can be set"; OSSL_SIGNATURE_PARAM_INSTANCE and
/// OSSL_SIGNATURE_PARAM_CONTEXT_STRING, which select Ed25519ctx/ph and
/// Ed448ph and carry a context, came with OpenSSL 3.2 and are absent from
/// 3.0's core_names.h). So here:
///
/// - Ed25519 key, no parameter: Ed25519.
/// - Ed448 key, no parameter, or phFlag false with an empty context: Ed448
///   with the empty context, which is what OpenSSL computes. The spec's
///   table marks the parameter "required" for Ed448 and Kryoptic refuses
///   its absence; it is accepted here because the instance it can only
///   mean is unambiguous (RFC 8032 Ed448 always has a context, empty by
///   default), and callers written for Ed25519 (OpenSC 0.23's pkcs11-tool,
///   the SoftHSM2 tests) send none.
/// - Ed25519ctx (any context; RFC 8032 §5.1 forbids it empty anyway),
///   Ed25519ph, Ed448 with a non-empty context, Ed448ph:
///   CKR_MECHANISM_PARAM_INVALID at C_SignInit / C_VerifyInit.
enum EdDSAVariant {
    static func algorithm(_ m: Mechanism, keyType: KeyType) throws -> SignatureAlgorithm {
        guard keyType == .ed25519 || keyType == .ed448 else { throw PKCS11Error.keyTypeInconsistent }
        switch m {
        case .eddsa:
            return keyType == .ed25519 ? .ed25519 : .ed448
        case .eddsaWith(let p):
            if keyType == .ed448, !p.prehash, p.context.isEmpty { return .ed448 }
            throw PKCS11Error.mechanismParamInvalid
        default:
            throw PKCS11Error.mechanismInvalid
        }
    }
}
