import COpenSSL

extension PublicKey {
    public func encrypt(_ plaintext: [UInt8], padding: RSAPadding) throws -> [UInt8] {
        guard keyType == .rsa else {
            throw CryptoError(.invalidInput, "RSA encrypt", reason: "not an RSA key")
        }
        let k = (bits + 7) / 8
        var input = plaintext
        switch padding {
        case .raw:
            input = try Signer.leftPad(plaintext, to: k)
        case .pkcs1:
            guard plaintext.count <= k - 11 else {
                throw CryptoError(.dataTooLong, "RSA encrypt", reason: "plaintext longer than modulus size - 11")
            }
        case .oaep(let md, _, _):
            guard plaintext.count <= k - 2 * md.outputSize - 2 else {
                throw CryptoError(.dataTooLong, "RSA encrypt", reason: "plaintext too long for OAEP with \(md.name)")
            }
        }
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("RSA encrypt") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_encrypt_init(ctx) == 1, try RSACipher.configure(ctx, padding) else {
            throw CryptoError.openssl("RSA encrypt init")
        }
        var len = 0
        guard EVP_PKEY_encrypt(ctx, nil, &len, input, input.count) == 1 else { throw CryptoError.openssl("RSA encrypt") }
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_encrypt(ctx, &out, &len, input, input.count) == 1 else {
            throw CryptoError.openssl("RSA encrypt", kind: .invalidInput)
        }
        return Array(out[0..<len])
    }
}

extension PrivateKey {
    /// Decryption failures (bad padding, wrong key) throw kind .invalidInput
    /// (CKR_ENCRYPTED_DATA_INVALID); the reason never carries data.
    public func decrypt(_ ciphertext: [UInt8], padding: RSAPadding) throws -> [UInt8] {
        guard keyType == .rsa else {
            throw CryptoError(.invalidInput, "RSA decrypt", reason: "not an RSA key")
        }
        let k = (bits + 7) / 8
        guard ciphertext.count == k else {
            throw CryptoError(.invalidInput, "RSA decrypt", reason: "ciphertext must be \(k) bytes")
        }
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("RSA decrypt") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_decrypt_init(ctx) == 1, try RSACipher.configure(ctx, padding) else {
            throw CryptoError.openssl("RSA decrypt init")
        }
        var len = k
        var out = [UInt8](repeating: 0, count: k)
        defer { OSSL.cleanse(&out) }
        guard EVP_PKEY_decrypt(ctx, &out, &len, ciphertext, ciphertext.count) == 1 else {
            throw CryptoError.openssl("RSA decrypt", kind: .invalidInput)
        }
        if case .raw = padding { return try Signer.leftPad(Array(out[0..<len]), to: k) }
        return Array(out[0..<len])
    }
}

enum RSACipher {
    static func configure(_ ctx: OpaquePointer, _ padding: RSAPadding) throws -> Bool {
        switch padding {
        case .pkcs1:
            return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1
        case .raw:
            return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_NO_PADDING) == 1
        case .oaep(let md, let mgf1, let label):
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1,
                  EVP_PKEY_CTX_set_rsa_oaep_md(ctx, md.md) == 1,
                  EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1.md) == 1 else { return false }
            if label.isEmpty { return true }
            // set0 takes ownership of an OPENSSL_malloc'd copy.
            guard let copy = label.withUnsafeBytes({ ks_OPENSSL_memdup($0.baseAddress, $0.count) }) else {
                throw CryptoError.openssl("OAEP label")
            }
            guard EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, copy, Int32(label.count)) == 1 else {
                ks_OPENSSL_free(copy)
                return false
            }
            return true
        }
    }
}
