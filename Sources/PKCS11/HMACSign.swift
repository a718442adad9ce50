import CPKCS11
import KeyshareCrypto

// CKM_SHA*_HMAC (PKCS #11 3.0 §2.20 "general-length" HMAC is not offered;
// these give the full digest size). Keys: CKK_GENERIC_SECRET, CKK_SHA*_HMAC
// and CKK_AES secret keys with CKA_SIGN / CKA_VERIFY.

/// Sign and verify share one MAC computation; verify compares in constant time.
final class HMACOperation: SignOperation, VerifyOperation {
    let context: HMACContext
    let signatureLength: Int

    init(_ d: DigestAlgorithm, key: [UInt8]) throws {
        context = try HMACContext(d, key: key)
        signatureLength = d.outputSize
    }

    func update(_ part: [UInt8]) throws { try context.update(part) }
    func finish() throws -> [UInt8] { try context.finish() }

    func finish(signature: [UInt8]) throws {
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        guard HMAC.equal(try context.finish(), signature) else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    static let hmacKeyTypes: Set<CK_KEY_TYPE> = [
        CKK_GENERIC_SECRET, CKK_AES, CKK_SHA_1_HMAC, CKK_SHA224_HMAC, CKK_SHA256_HMAC, CKK_SHA384_HMAC, CKK_SHA512_HMAC,
    ]

    /// The HMAC operation for a secret key whose `usage` flag (CKA_SIGN or
    /// CKA_VERIFY) is set.
    func hmacOperation(_ d: DigestAlgorithm, _ view: ObjectView, usage: CK_ATTRIBUTE_TYPE) throws -> HMACOperation {
        guard view.objectClass == CKO_SECRET_KEY, let t = view.keyType, Self.hmacKeyTypes.contains(t) else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        guard let value = view.attributes[CKA_VALUE], !value.isEmpty else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        return try HMACOperation(d, key: value)
    }
}
