import CPKCS11
import KeyshareCrypto

/// Which RFC 8032 instance CKM_EDDSA names for a key. PKCS #11 3.0 §2.3.14 maps the parameter to
/// the instance: no parameter is Ed25519 (pure); a CK_EDDSA_PARAMS is Ed25519ctx (phFlag false)
/// or Ed25519ph (phFlag true) on an Ed25519 key, Ed448 (phFlag false) or Ed448ph (phFlag true)
/// on an Ed448 key, each with the optional context string (docs/pkcs11-conformance.md, "EdDSA
/// instances"; issue 29):
///
/// - Ed25519 key, no parameter: Ed25519.
/// - Ed448 key, no parameter, or phFlag false with an empty context: Ed448 with the empty
///   context. The spec's table marks the parameter "required" for Ed448 and Kryoptic refuses its
///   absence; it is accepted here because the instance it can only mean is unambiguous (RFC 8032
///   Ed448 always has a context, empty by default), and callers written for Ed25519 (OpenSC
///   0.23's pkcs11-tool, the SoftHSM2 tests) send none.
/// - Ed25519ctx with a context, Ed25519ph (with or without one), Ed448 with a context, Ed448ph:
///   computed with OpenSSL ≥ 3.2's "instance" / "context-string" parameters
///   (KeyshareCrypto.EdDSAInstance). The ph instances take the message and hash it (PH(M) is
///   SHA-512 / SHAKE256-64), as the RFC's vectors are given.
/// - Ed25519ctx with an empty context: CKR_MECHANISM_PARAM_INVALID (RFC 8032 §5.1 defines the
///   instance with a non-empty context; OpenSSL refuses it too).
/// - With an OpenSSL 3.0 engine (`make OPENSSL=system` on Debian 12), which signs only the pure
///   instances, every parameterised instance is CKR_MECHANISM_PARAM_INVALID, never signed as
///   another instance.
enum EdDSAVariant {
    static func algorithm(_ m: Mechanism, keyType: KeyType) throws -> SignatureAlgorithm {
        guard keyType == .ed25519 || keyType == .ed448 else { throw PKCS11Error.keyTypeInconsistent }
        switch m {
        case .eddsa:
            return keyType == .ed25519 ? .ed25519 : .ed448
        case .eddsaWith(let p):
            if keyType == .ed448, !p.prehash, p.context.isEmpty { return .ed448 }
            guard CryptoEngine.hasEdDSAInstances else { throw PKCS11Error.mechanismParamInvalid }
            let variant: EdDSAInstance.Variant = keyType == .ed25519
                ? (p.prehash ? .ed25519ph : .ed25519ctx) : (p.prehash ? .ed448ph : .ed448)
            do {
                return .eddsa(try EdDSAInstance(variant, context: p.context))
            } catch {
                throw PKCS11Error.mechanismParamInvalid  // Ed25519ctx with an empty context
            }
        default:
            throw PKCS11Error.mechanismInvalid
        }
    }
}
