import COpenSSL

/// AES-256-GCM, the AEAD for every secret at rest. The sealed form is
/// `nonce(12) || ciphertext || tag(16)`, so one blob carries all it needs.
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16
    public static let overhead = nonceSize + tagSize

    public static func seal(key: [UInt8], plaintext: [UInt8], aad: [UInt8] = []) throws -> [UInt8] {
        try seal(key: key, nonce: SecureRandom.bytes(nonceSize), plaintext: plaintext, aad: aad)
    }

    /// Explicit-nonce form, for known-answer tests and PKCS #11 CKM_AES_GCM
    /// where the caller supplies the IV (of any length) and tag size.
    public static func seal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8] = [], tagLength: Int = tagSize) throws -> [UInt8] {
        let (ct, tag) = try encrypt(key: key, iv: nonce, plaintext: plaintext, aad: aad, tagLength: tagLength)
        return nonce + ct + tag
    }

    public static func open(key: [UInt8], sealed: [UInt8], aad: [UInt8] = []) throws -> [UInt8] {
        guard sealed.count >= overhead else {
            throw CryptoError(.authenticationFailed, "AES-GCM open", reason: "ciphertext too short")
        }
        let nonce = Array(sealed[0..<nonceSize])
        let ct = Array(sealed[nonceSize..<(sealed.count - tagSize)])
        let tag = Array(sealed[(sealed.count - tagSize)...])
        return try decrypt(key: key, iv: nonce, ciphertext: ct, tag: tag, aad: aad)
    }

    public static func encrypt(key: [UInt8], iv: [UInt8], plaintext: [UInt8], aad: [UInt8], tagLength: Int = tagSize) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard let cipher = cipherFor(keySize: key.count) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "key must be 16, 24 or 32 bytes")
        }
        guard !iv.isEmpty, (4...16).contains(tagLength) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "bad IV or tag length")
        }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl("AES-GCM") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: tagLength)
        var len: Int32 = 0
        var total = 0
        guard EVP_EncryptInit_ex(ctx, cipher, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1,
              EVP_EncryptInit_ex(ctx, nil, nil, key, iv) == 1 else { throw CryptoError.openssl("AES-GCM init") }
        if !aad.isEmpty {
            guard EVP_EncryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1 else { throw CryptoError.openssl("AES-GCM aad") }
        }
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            if !plaintext.isEmpty {
                guard EVP_EncryptUpdate(ctx, o.baseAddress, &len, plaintext, Int32(plaintext.count)) == 1 else { return false }
                total = Int(len)
            }
            guard EVP_EncryptFinal_ex(ctx, o.baseAddress! + total, &len) == 1 else { return false }
            total += Int(len)
            return true
        }
        guard ok, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else {
            throw CryptoError.openssl("AES-GCM encrypt")
        }
        return (Array(out[0..<total]), tag)
    }

    public static func decrypt(key: [UInt8], iv: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard let cipher = cipherFor(keySize: key.count) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "key must be 16, 24 or 32 bytes")
        }
        guard !iv.isEmpty, (4...16).contains(tag.count) else {
            throw CryptoError(.invalidInput, "AES-GCM", reason: "bad IV or tag length")
        }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openssl("AES-GCM") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var len: Int32 = 0
        var total = 0
        var tagCopy = tag
        guard EVP_DecryptInit_ex(ctx, cipher, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1,
              EVP_DecryptInit_ex(ctx, nil, nil, key, iv) == 1 else { throw CryptoError.openssl("AES-GCM init") }
        if !aad.isEmpty {
            guard EVP_DecryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1 else { throw CryptoError.openssl("AES-GCM aad") }
        }
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            if !ciphertext.isEmpty {
                guard EVP_DecryptUpdate(ctx, o.baseAddress, &len, ciphertext, Int32(ciphertext.count)) == 1 else { return false }
                total = Int(len)
            }
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagCopy.count), &tagCopy) == 1 else { return false }
            guard EVP_DecryptFinal_ex(ctx, o.baseAddress! + total, &len) == 1 else { return false }
            total += Int(len)
            return true
        }
        guard ok else {
            CryptoError.clearQueue()
            throw CryptoError(.authenticationFailed, "AES-GCM open", reason: "authentication failed (wrong key, or data altered or moved)")
        }
        return Array(out[0..<total])
    }

    static func cipherFor(keySize: Int) -> OpaquePointer? {
        switch keySize {
        case 16: Fetched.aes128GCM
        case 24: Fetched.aes192GCM
        case 32: Fetched.aes256GCM
        default: nil
        }
    }
}
