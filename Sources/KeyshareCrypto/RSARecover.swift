import COpenSSL

// RSA with message recovery (PKCS #11 C_SignRecover / C_VerifyRecover with
// CKM_RSA_PKCS and CKM_RSA_X_509). Signing with recovery is the ordinary
// signature of the same input (PrivateKey.sign(digest:algorithm:) with
// .rsaPKCS1(nil) or .rsaRaw); what is new is getting the input back.

extension PublicKey {
    /// The data a signature carries: for `.rsaPKCS1(nil)` the content of the
    /// PKCS #1 v1.5 type-1 block, for `.rsaRaw` the whole block (modulus
    /// size, leading zeros kept). A signature of the wrong length, not below
    /// the modulus, or (PKCS #1) without a valid type-1 padding throws
    /// `.verificationFailed`.
    public func recover(signature: [UInt8], algorithm: SignatureAlgorithm) throws -> [UInt8] {
        guard keyType == .rsa else {
            throw CryptoError(.invalidInput, "verify recover", reason: "not an RSA key")
        }
        switch algorithm {
        case .rsaPKCS1(nil), .rsaRaw: break
        default: throw CryptoError(.unsupported, "verify recover", reason: "only RSA PKCS #1 v1.5 and raw RSA recover data")
        }
        let k = (bits + 7) / 8
        guard signature.count == k else {
            throw CryptoError(.verificationFailed, "verify recover", reason: "signature must be \(k) bytes")
        }
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("verify recover") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_verify_recover_init(ctx) == 1, Signer.configure(ctx, algorithm) else {
            throw CryptoError.openssl("verify recover init")
        }
        var out = [UInt8](repeating: 0, count: k)
        var len = k
        guard EVP_PKEY_verify_recover(ctx, &out, &len, signature, signature.count) == 1 else {
            CryptoError.clearQueue()
            throw CryptoError(.verificationFailed, "verify recover", reason: "signature does not verify")
        }
        let data = Array(out[0..<len])
        if case .rsaRaw = algorithm { return try Signer.leftPad(data, to: k) }
        return data
    }
}
