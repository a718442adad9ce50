import Keychain
import KeyshareCrypto

/// The post-quantum operations of a keychain key (issue 18) that the classical SecKey-style
/// calls have no room for: ML-DSA / SLH-DSA with a context string (FIPS 204 / 205 ctx), and
/// ML-KEM encapsulation and decapsulation (FIPS 203). The usage flags are checked as for the
/// classical calls: CKA_SIGN / CKA_VERIFY, and PKCS #11 3.2's CKA_ENCAPSULATE / CKA_DECAPSULATE.
extension KeyRef {
    private var name: String { attributes.label.map { "\"\($0)\"" } ?? "the key" }

    private func privatePQ(_ what: String) throws -> PrivateKey {
        if isInTPM { throw KeyShareError.unsupported("\(name) lives in the TPM: \(what) with it through the PKCS #11 module") }
        guard let privateKey else { throw KeyShareError.invalidParameter("\(what) needs the private key, this is the public key") }
        return privateKey
    }

    private func allowed(_ attribute: AttributeType, _ what: String) throws {
        guard attributes.pkcs11[attribute] == [1] else {
            throw KeyShareError.operationNotAllowed("\(name) is not allowed to \(what)")
        }
    }

    /// Pure ML-DSA or SLH-DSA over `message` with `context` (at most 255 bytes, may be empty).
    public func createSignature(_ message: [UInt8], context: [UInt8]) throws -> [UInt8] {
        let k = try privatePQ("signing")
        guard attributes.usage.contains(.sign) else { throw KeyShareError.operationNotAllowed("\(name) is not allowed to sign") }
        guard context.count <= 255 else { throw KeyShareError.invalidParameter("the context is \(context.count) bytes; at most 255") }
        if let d = k.mlDSA { return try mapped { try d.sign(message, context: context) } }
        if let s = k.slhDSA { return try mapped { try s.sign(message, context: context) } }
        throw KeyShareError.unsupported("an \(keyType) key cannot sign with a context (ML-DSA and SLH-DSA only)")
    }

    /// True when `signature` is a valid pure ML-DSA / SLH-DSA signature of `message` under `context`.
    public func verifySignature(_ signature: [UInt8], message: [UInt8], context: [UInt8]) throws -> Bool {
        if !isPrivate, !attributes.usage.contains(.verify) {
            throw KeyShareError.operationNotAllowed("\(name) is not allowed to verify")
        }
        return try Self.verify(publicKey, signature, message: message, context: context)
    }

    /// The same check for a public key that is not in the keychain (a PEM file, a certificate).
    public static func verify(_ key: PublicKey, _ signature: [UInt8], message: [UInt8], context: [UInt8]) throws -> Bool {
        guard context.count <= 255 else { throw KeyShareError.invalidParameter("the context is \(context.count) bytes; at most 255") }
        if let d = key.mlDSA { return try mapped { try d.verify(signature, message: message, context: context) } }
        if let s = key.slhDSA { return try mapped { try s.verify(signature, message: message, context: context) } }
        throw KeyShareError.unsupported("an \(key.keyType) key cannot verify with a context (ML-DSA and SLH-DSA only)")
    }

    /// ML-KEM encapsulation to this key's encapsulation (public) key: (ciphertext, 32-byte shared secret).
    public func encapsulate() throws -> (ciphertext: [UInt8], sharedSecret: [UInt8]) {
        if !isPrivate { try allowed(CKA.encapsulate, "encapsulate") }
        return try Self.encapsulate(to: publicKey)
    }

    public static func encapsulate(to key: PublicKey) throws -> (ciphertext: [UInt8], sharedSecret: [UInt8]) {
        guard let k = key.mlKEM else {
            throw KeyShareError.unsupported("an \(key.keyType) key cannot encapsulate (ML-KEM only)")
        }
        return try mapped { try k.encapsulate() }
    }

    /// ML-KEM decapsulation with the private key: the 32-byte shared secret. A ciphertext of the
    /// wrong length is refused; a wrong one of the right length gives FIPS 203's implicit-rejection
    /// secret, as every ML-KEM does (the caller's protocol notices, not this call).
    public func decapsulate(_ ciphertext: [UInt8]) throws -> [UInt8] {
        let k = try privatePQ("decapsulation")
        guard let kem = k.mlKEM else { throw KeyShareError.unsupported("an \(keyType) key cannot decapsulate (ML-KEM only)") }
        try allowed(CKA.decapsulate, "decapsulate")
        let n = kem.parameterSet.ciphertextLength
        guard ciphertext.count == n else {
            throw KeyShareError.invalidParameter("the ciphertext is \(ciphertext.count) bytes; an \(keyType) ciphertext is \(n)")
        }
        return try mapped { try kem.decapsulate(ciphertext) }
    }
}
