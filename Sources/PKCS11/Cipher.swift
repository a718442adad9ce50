import CPKCS11
import KeyshareCrypto

// PKCS #11 §5.8–5.9 mechanisms: RSA PKCS #1 v1.5 / OAEP / raw, AES-CBC(-PAD)
// and AES-GCM, as `CipherOperation`s (AES-ECB/CTR/CTS, DES, 3DES and
// ChaCha20-Poly1305 are in SymmetricCipher.swift). Encrypt.swift / Decrypt.swift hold the
// shared output-buffer handling; this file decides what each mechanism
// accepts and how long its output is.

/// RSA is single-part only (the spec gives it no multi-part form).
final class RSACipherOperation: CipherOperation {
    let padding: RSAPadding
    let publicKey: PublicKey?
    let privateKey: PrivateKey?
    let modulusBytes: Int

    init(padding: RSAPadding, publicKey: PublicKey?, privateKey: PrivateKey?, bits: Int) {
        self.padding = padding
        self.publicKey = publicKey
        self.privateKey = privateKey
        modulusBytes = (bits + 7) / 8
    }

    var maxInput: Int {
        switch padding {
        case .pkcs1: modulusBytes - 11
        case .oaep(let d, _, _): modulusBytes - 2 * d.outputSize - 2
        case .raw: modulusBytes
        }
    }

    /// Decryption's length query answers the modulus size: the true length is
    /// known only after unpadding, and the bytes call sets it.
    func outputLength(input: Int) -> Int { modulusBytes }
    func updateOutputLength(input: Int) -> Int { 0 }
    var finalOutputLength: Int { 0 }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        if let publicKey {
            guard data.count <= maxInput else { throw PKCS11Error.dataLenRange }
            return try publicKey.encrypt(data, padding: padding)
        }
        guard let privateKey else { throw PKCS11Error.generalError }
        guard data.count == modulusBytes else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        do {
            return try privateKey.decrypt(data, padding: padding)
        } catch {
            // Bad padding, wrong key, a value not below the modulus: one answer,
            // so the error says nothing about which check failed.
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
    }

    func update(_ part: [UInt8]) throws -> [UInt8] { throw PKCS11Error.mechanismInvalid }
    func finish() throws -> [UInt8] { throw PKCS11Error.mechanismInvalid }
}

/// AES-CBC with or without PKCS #7 padding, multi-part through OpenSSL's
/// context. The pending count mirrors OpenSSL's buffer so every length answer
/// is exact.
final class AESCBCOperation: CipherOperation {
    let context: AESCBCContext
    let encrypting: Bool
    let pad: Bool
    var pending = 0

    init(key: [UInt8], iv: [UInt8], pad: Bool, encrypting: Bool) throws {
        context = try AESCBCContext(encrypt: encrypting, key: key, iv: iv, padding: pad)
        self.encrypting = encrypting
        self.pad = pad
    }

    var lengthError: PKCS11Error { PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }

    /// Whole blocks out; a padded decryption keeps its last block back for the final call.
    func updateOutputLength(input: Int) -> Int {
        let total = pending + input
        var out = total / 16 * 16
        if !encrypting, pad, out > 0, total % 16 == 0 { out -= 16 }
        return out
    }

    var finalOutputLength: Int { encrypting ? (pad ? 16 : 0) : (pad ? 15 : 0) }

    func outputLength(input: Int) -> Int {
        encrypting && pad ? (input / 16 + 1) * 16 : input
    }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        if !pad || !encrypting, data.count % 16 != 0 { throw lengthError }
        if !encrypting, pad, data.isEmpty { throw lengthError }
        return try update(data) + finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        let out = try context.update(part)
        pending = (pending + part.count) - out.count
        return out
    }

    func finish() throws -> [UInt8] {
        if !pad, pending != 0 { throw lengthError }
        if pad, !encrypting, pending != 16 { throw lengthError }
        do {
            return try context.finish()
        } catch {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
    }
}

/// AES-GCM. Encryption streams: C_EncryptUpdate returns the ciphertext of
/// its input at once (GCM is a counter mode) and C_EncryptFinal the tag, as
/// the spec's multi-part convention expects and other tokens do. Decryption
/// collects its input and returns the plaintext only from the final call,
/// after the tag (the last tagBytes of the input) is verified: unverified
/// plaintext is never released (C_DecryptUpdate returns no bytes, which
/// the spec allows).
final class AESGCMOperation: CipherOperation {
    let key: [UInt8]
    let parameters: GCMParameters
    let encrypting: Bool
    /// Decryption's collected input; encryption's streaming context.
    var buffer: [UInt8] = []
    var stream: AESGCMEncryptContext?
    /// The session's keyed contexts, for single-part encryption (KeyedCipherCache.swift).
    var cache: KeyedCipherCache?

    init(key: [UInt8], parameters: GCMParameters, encrypting: Bool) throws {
        guard isAESKeySize(key.count) else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        self.key = key
        self.parameters = parameters
        self.encrypting = encrypting
    }

    func outputLength(input: Int) -> Int {
        encrypting ? input + parameters.tagBytes : Swift.max(0, input - parameters.tagBytes)
    }
    func updateOutputLength(input: Int) -> Int { encrypting ? input : 0 }
    var finalOutputLength: Int { encrypting ? parameters.tagBytes : outputLength(input: buffer.count) }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        let p = parameters
        if encrypting {
            let (ct, tag) = try AESGCM.encrypt(key: key, iv: p.iv, plaintext: data, aad: p.aad, tagLength: p.tagBytes)
            return ct + tag
        }
        buffer = data
        return try finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        if encrypting {
            let s = try stream ?? AESGCMEncryptContext(key: key, iv: parameters.iv, aad: parameters.aad,
                                                       tagLength: parameters.tagBytes)
            stream = s
            return try s.update(part)
        }
        guard buffer.count + part.count <= 1 << 26 else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        buffer += part
        return []
    }

    func finish() throws -> [UInt8] {
        let p = parameters
        if encrypting {
            let s = try stream ?? AESGCMEncryptContext(key: key, iv: p.iv, aad: p.aad, tagLength: p.tagBytes)
            return try s.finish()
        }
        guard buffer.count >= p.tagBytes else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        let ct = Array(buffer[..<(buffer.count - p.tagBytes)])
        let tag = Array(buffer[(buffer.count - p.tagBytes)...])
        do {
            return try AESGCM.decrypt(key: key, iv: p.iv, ciphertext: ct, tag: tag, aad: p.aad)
        } catch {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        }
    }
}

extension Runtime {
    /// The operation a cipher mechanism means for a key object, after the
    /// key's usage flags allow it. Key-class mismatches are
    /// CKR_KEY_TYPE_INCONSISTENT, flags CKR_KEY_FUNCTION_NOT_PERMITTED.
    /// `checked`: told the key value of a symmetric mechanism once every
    /// check on the key passed (CheckedCipherKey.swift records it).
    func cipherOperation(_ m: Mechanism, _ view: ObjectView, encrypting: Bool,
                         checked: (([UInt8]) -> Void)? = nil) throws -> any CipherOperation {
        let usage = encrypting ? CKA_ENCRYPT : CKA_DECRYPT
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        // AES (every mode), DES / 3DES and ChaCha20-Poly1305: the key's value
        // with its class, type and size checked, then the operation.
        if let key = try symmetricKey(m, view) {
            let op = try symmetricCipherOperation(m, key: key, encrypting: encrypting)
            checked?(key)
            return op
        }
        switch m {
        case .rsaPKCS, .rsaX509, .rsaOAEP:
            let padding: RSAPadding
            switch m {
            case .rsaOAEP(let o): padding = .oaep(o.hash, mgf1: o.mgf1, label: o.label)
            case .rsaX509: padding = .raw
            default: padding = .pkcs1
            }
            guard view.keyType == CKK_RSA else { throw PKCS11Error.keyTypeInconsistent }
            if encrypting {
                guard view.objectClass == CKO_PUBLIC_KEY else { throw PKCS11Error.keyTypeInconsistent }
                let k = try publicKey(view)
                return RSACipherOperation(padding: padding, publicKey: k, privateKey: nil, bits: k.bits)
            }
            guard view.objectClass == CKO_PRIVATE_KEY else { throw PKCS11Error.keyTypeInconsistent }
            try checkConsent(view, .decrypt)  // Prompt.swift
            // A key of an external token: decrypted on the card (ExternalTokens.swift).
            if view.isExternalKey { return try externalDecryptOperation(view, m) }
            if let blob = view.tpmBlob { return try tpmDecryptOperation(view, blob: blob, m) }  // TPMKeys.swift
            let k = try privateKey(view)
            return RSACipherOperation(padding: padding, publicKey: nil, privateKey: k, bits: k.bits)
        default:
            throw PKCS11Error.mechanismInvalid
        }
    }

    /// The value of an AES key for a cipher. A key may both wrap and decrypt
    /// (common templates set both): the wrap-then-decrypt attack is stopped
    /// at C_WrapKey instead, which never wraps a sensitive key under a key
    /// that can decrypt (KeyUsagePolicy.checkWrap).
    func aesKey(_ view: ObjectView, encrypting: Bool) throws -> [UInt8] {
        guard view.objectClass == CKO_SECRET_KEY, view.keyType == CKK_AES else { throw PKCS11Error.keyTypeInconsistent }
        guard let v = view.attributes[CKA_VALUE], isAESKeySize(v.count) else {
            throw PKCS11Error(CKR_KEY_SIZE_RANGE)
        }
        return v
    }
}

/// 16, 24 or 32 bytes. A comparison, not `[16, 24, 32].contains`: that
/// array literal was allocated on every C_EncryptInit (twice for AES-GCM).
@inline(__always)
func isAESKeySize(_ n: Int) -> Bool { n == 16 || n == 24 || n == 32 }
