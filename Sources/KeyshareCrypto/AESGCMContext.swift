import COpenSSL

/// Multi-part AES-GCM encryption (PKCS #11 C_EncryptUpdate with CKM_AES_GCM):
/// GCM is a counter mode, so each update returns exactly as many ciphertext
/// bytes as it was given, and the tag comes at the end. Decryption has no
/// such form here: its plaintext must not be released before the tag is
/// verified, so it stays one-shot (`AESGCM.decrypt`).
public final class AESGCMEncryptContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    private let tagLength: Int

    public init(key: [UInt8], iv: [UInt8], aad: [UInt8], tagLength: Int = AESGCM.tagSize) throws {
        guard let cipher = AESGCM.cipherFor(keySize: key.count) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "key must be 16, 24 or 32 bytes")
        }
        guard !iv.isEmpty, (4...16).contains(tagLength) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "bad IV or tag length")
        }
        CryptoError.clearQueue()
        guard let c = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl("AES-GCM") }
        var len: Int32 = 0
        guard EVP_EncryptInit_ex(c, cipher, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1,
              EVP_EncryptInit_ex(c, nil, nil, key, iv) == 1,
              aad.isEmpty || EVP_EncryptUpdate(c, nil, &len, aad, Int32(aad.count)) == 1 else {
            EVP_CIPHER_CTX_free(c)
            throw CryptoError.openssl("AES-GCM init")
        }
        ctx = c
        self.tagLength = tagLength
    }

    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// The ciphertext of `plaintext`: always `plaintext.count` bytes.
    public func update(_ plaintext: [UInt8]) throws -> [UInt8] {
        if plaintext.isEmpty { return [] }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var len: Int32 = 0
        guard EVP_EncryptUpdate(ctx, &out, &len, plaintext, Int32(plaintext.count)) == 1 else {
            throw CryptoError.openssl("AES-GCM update")
        }
        return Array(out[0..<Int(len)])
    }

    /// Whatever ciphertext is left (none for GCM), then the tag.
    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        var len: Int32 = 0
        var tag = [UInt8](repeating: 0, count: tagLength)
        guard EVP_EncryptFinal_ex(ctx, &out, &len) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else {
            throw CryptoError.openssl("AES-GCM final")
        }
        return Array(out[0..<Int(len)]) + tag
    }
}
