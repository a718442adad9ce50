import CPKCS11
import KeyshareCrypto

// CKM_*_HMAC (full-size MACs) and CKM_*_HMAC_GENERAL (CK_MAC_GENERAL_PARAMS:
// the MAC truncated to 1..HashLen bytes, its leftmost bytes as RFC 2104 §5
// says) over SHA-1, SHA-2, SHA-512/224, SHA-512/256 and SHA-3. Keys:
// CKK_GENERIC_SECRET and CKK_AES with any hash; a CKK_SHA*_HMAC key only
// with its own hash (SoftHSM2 and Kryoptic refuse CKK_SHA256_HMAC with
// CKM_SHA384_HMAC, CKR_KEY_TYPE_INCONSISTENT). CKA_SIGN / CKA_VERIFY as usual.

/// Sign and verify share one MAC computation; verify compares in constant time.
final class HMACOperation: SignOperation, VerifyOperation, SaveableOperation {
    let context: MACContext
    let digest: DigestAlgorithm
    let signatureLength: Int
    /// The key, for C_SetOperationState's hAuthenticationKey check.
    let keyHandle: CK_OBJECT_HANDLE?

    init(_ d: DigestAlgorithm, key: [UInt8], length: Int? = nil, handle: CK_OBJECT_HANDLE? = nil) throws {
        context = try MACContext(.hmac(d), key: key)
        digest = d
        signatureLength = length ?? d.outputSize
        keyHandle = handle
    }

    private init(copying other: HMACOperation) throws {
        context = try other.context.copy()
        digest = other.digest
        signatureLength = other.signatureLength
        keyHandle = other.keyHandle
    }

    func duplicate() throws -> any Operation { try HMACOperation(copying: self) }

    func update(_ part: [UInt8]) throws { try context.update(part) }
    func finish() throws -> [UInt8] { Array(try context.finish().prefix(signatureLength)) }

    func finish(signature: [UInt8]) throws {
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        guard HMAC.equal(try finish(), signature) else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    /// The key type of each hash's own HMAC keys.
    static let hmacKeyType: [DigestAlgorithm: CK_KEY_TYPE] = [
        .sha1: CKK_SHA_1_HMAC, .sha224: CKK_SHA224_HMAC, .sha256: CKK_SHA256_HMAC, .sha384: CKK_SHA384_HMAC,
        .sha512: CKK_SHA512_HMAC, .sha512_224: CKK_SHA512_224_HMAC, .sha512_256: CKK_SHA512_256_HMAC,
        .sha3_224: CKK_SHA3_224_HMAC, .sha3_256: CKK_SHA3_256_HMAC, .sha3_384: CKK_SHA3_384_HMAC,
        .sha3_512: CKK_SHA3_512_HMAC,
    ]

    /// Every secret key type an HMAC mechanism takes (with some hash).
    static let hmacKeyTypes: Set<CK_KEY_TYPE> = Set(hmacKeyType.values).union([CKK_GENERIC_SECRET, CKK_AES])

    /// The HMAC operation for a secret key whose `usage` flag (CKA_SIGN or
    /// CKA_VERIFY) is set; `length` for the general-length mechanisms.
    func hmacOperation(_ d: DigestAlgorithm, _ view: ObjectView, usage: CK_ATTRIBUTE_TYPE,
                       length: Int? = nil) throws -> HMACOperation {
        guard view.objectClass == CKO_SECRET_KEY, let t = view.keyType, Self.hmacKeyTypes.contains(t) else {
            throw PKCS11Error.keyTypeInconsistent
        }
        if Self.hmacKeyType.values.contains(t), Self.hmacKeyType[d] != t { throw PKCS11Error.keyTypeInconsistent }
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        guard let value = view.attributes[CKA_VALUE], !value.isEmpty else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        return try HMACOperation(d, key: value, length: length, handle: view.handle)
    }

    /// The HMAC operation a mechanism asks for, or nil when it is not an HMAC.
    func hmacOperation(_ m: Mechanism, _ view: ObjectView, usage: CK_ATTRIBUTE_TYPE) throws -> HMACOperation? {
        switch m {
        case .hmac(let d): try hmacOperation(d, view, usage: usage)
        case .hmacGeneral(let d, let n): try hmacOperation(d, view, usage: usage, length: n)
        default: nil
        }
    }
}
