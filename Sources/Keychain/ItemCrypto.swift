import KeyshareCrypto

/// Encryption of attribute values at rest (DESIGN.md §3) and the digests of
/// the lookup index.
enum ItemCrypto {
    /// Attributes a private or secret-bearing item never stores in the clear.
    /// CLASS/TOKEN/PRIVATE stay readable because the store itself needs them
    /// to decide visibility before any key is available.
    static func isSecret(_ type: AttributeType, itemClass: ItemClass, isPrivate: Bool) -> Bool {
        if type == CKA.keysharePKCS8 { return true }
        if isPrivate { return type != CKA.class && type != CKA.token && type != CKA.private }
        switch itemClass {
        case .privateKey:
            return type == CKA.value || (CKA.privateExponent...CKA.coefficient).contains(type)
        case .secretKey, .genericPassword:
            return type == CKA.value
        default:
            return false
        }
    }

    static func typeBytes(_ type: AttributeType) -> [UInt8] {
        let t = UInt64(type)
        return (0..<8).map { UInt8(truncatingIfNeeded: t >> (56 - 8 * UInt64($0))) }
    }

    /// Persistent reference || attribute type (8 bytes big-endian): a
    /// ciphertext moved to another item or attribute fails to open.
    static func aad(_ ref: PersistentReference, _ type: AttributeType) -> [UInt8] {
        ref.bytes + typeBytes(type)
    }

    static func seal(_ value: [UInt8], key: TokenKey, ref: PersistentReference, type: AttributeType) throws -> [UInt8] {
        try AESGCM.seal(key: key.keyBytes, plaintext: value, aad: aad(ref, type))
    }

    static func open(_ sealed: [UInt8], key: TokenKey, ref: PersistentReference, type: AttributeType) throws -> [UInt8] {
        do {
            return try AESGCM.open(key: key.keyBytes, sealed: sealed, aad: aad(ref, type))
        } catch {
            throw KeychainError.decryptionFailed(
                "attribute 0x\(String(type, radix: 16)) of item \(ref.base64url) does not authenticate: "
                + "it was altered, moved from another item or attribute, or sealed under another token key")
        }
    }

    /// Index digest of a cleartext value: a plain hash keeps index rows small
    /// (certificates are kilobytes) and reveals nothing the row does not.
    static func publicDigest(_ type: AttributeType, _ value: [UInt8]) -> [UInt8] {
        DigestAlgorithm.sha256.hash(typeBytes(type) + value)
    }

    /// Index digest of an encrypted value: keyed, so the index cannot be used
    /// to confirm a guessed secret (a label, an ID) without the token key.
    static func keyedDigest(_ type: AttributeType, _ value: [UInt8], key: TokenKey) throws -> [UInt8] {
        try HMAC.mac(.sha256, key: key.indexKey, data: typeBytes(type) + value)
    }
}
