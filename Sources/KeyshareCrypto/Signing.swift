import COpenSSL

extension PrivateKey {
    /// Hashes `message` when the algorithm names a digest; the nil-digest
    /// forms (CKM_RSA_PKCS, CKM_ECDSA) and raw RSA take the input as is.
    public func sign(message: [UInt8], algorithm: SignatureAlgorithm) throws -> [UInt8] {
        try Signer.check(algorithm, keyType: keyType)
        CryptoError.clearQueue()
        switch algorithm {
        case .rsaPKCS1(let md?), .ecdsa(let md?):
            return try Signer.digestSign(pkey, md: md.md, message: message, curve: curve) { _ in true }
        case .rsaPSS(let md, let mgf1, let salt):
            return try Signer.digestSign(pkey, md: md.md, message: message, curve: nil) {
                Signer.configurePSS($0, mgf1: mgf1, saltLength: salt)
            }
        case .ed25519, .ed448, .mlDSA, .slhDSA:
            return try Signer.digestSign(pkey, md: nil, message: message, curve: nil) { _ in true }
        case .eddsa(let i):
            return try EdDSASigner.sign(pkey, i, message: message, signatureLength: ECXCurve(keyType: keyType)?.signatureLength ?? 0)
        case .rsaPKCS1(nil), .ecdsa(nil), .rsaRaw:
            return try sign(digest: message, algorithm: algorithm)
        }
    }

    /// Signs a precomputed digest (or DigestInfo / raw block for the nil and
    /// raw forms). Ed25519 has no pre-hashed form here.
    public func sign(digest: [UInt8], algorithm: SignatureAlgorithm) throws -> [UInt8] {
        try Signer.check(algorithm, keyType: keyType)
        CryptoError.clearQueue()
        var input = digest
        switch algorithm {
        case .ed25519, .ed448, .eddsa:
            throw CryptoError(.unsupported, "EdDSA sign", reason: "EdDSA signs messages, not digests")
        case .mlDSA, .slhDSA:
            throw CryptoError(.unsupported, "\(keyType) sign", reason: "pure ML-DSA/SLH-DSA sign messages; HashML-DSA is MLDSAKey.sign(digest:)")
        case .rsaRaw:
            input = try Signer.leftPad(digest, to: (bits + 7) / 8)
        case .rsaPKCS1(nil):
            guard digest.count <= (bits + 7) / 8 - 11 else {
                throw CryptoError(.dataTooLong, "RSA PKCS #1 sign", reason: "input longer than modulus size - 11")
            }
        case .rsaPKCS1(let md?), .ecdsa(let md?), .rsaPSS(let md, _, _):
            guard digest.count == md.outputSize else {
                throw CryptoError(.invalidInput, "sign", reason: "digest must be \(md.outputSize) bytes for \(md.name)")
            }
        case .ecdsa(nil):
            guard !digest.isEmpty else { throw CryptoError(.invalidInput, "ECDSA sign", reason: "empty digest") }
        }
        let ctx = try signingContexts.context(algorithm, pkey: pkey)
        defer { EVP_PKEY_CTX_free(ctx) }
        // The key's maximum signature size, instead of a length-query call.
        var len = Int(EVP_PKEY_get_size(pkey))
        guard len > 0 else { throw CryptoError.openssl("sign") }
        var sig = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_sign(ctx, &sig, &len, input, input.count) == 1 else { throw CryptoError.openssl("sign") }
        if case .ecdsa = algorithm, let curve {
            return try ECDSASignature.rawFromDER(sig[0..<len], curve: curve)
        }
        sig.removeLast(sig.count - len)
        return sig
    }
}

extension PublicKey {
    /// False for a signature that does not verify (including a malformed or
    /// wrong-length one); throws only when the request itself is invalid.
    public func verify(signature: [UInt8], message: [UInt8], algorithm: SignatureAlgorithm) throws -> Bool {
        try Signer.check(algorithm, keyType: keyType)
        CryptoError.clearQueue()
        var sig = signature
        if case .ecdsa = algorithm, let curve {
            guard let der = try ECDSASignature.derFromRaw(signature, curve: curve) else { return false }
            sig = der
        }
        let md: OpaquePointer?
        var pss: (DigestAlgorithm, Int)? = nil
        switch algorithm {
        case .rsaPKCS1(let d?), .ecdsa(let d?): md = d.md
        case .rsaPSS(let d, let mgf1, let salt): md = d.md; pss = (mgf1, salt)
        case .ed25519, .ed448, .mlDSA, .slhDSA: md = nil
        case .eddsa(let i):
            return try EdDSASigner.verify(pkey, i, signature: signature, message: message)
        case .rsaPKCS1(nil), .ecdsa(nil), .rsaRaw:
            return try verify(signature: signature, digest: message, algorithm: algorithm)
        }
        guard let mdctx = EVP_MD_CTX_new() else { throw CryptoError.openssl("verify") }
        defer { EVP_MD_CTX_free(mdctx) }
        var pctx: OpaquePointer? = nil
        guard EVP_DigestVerifyInit_ex(mdctx, &pctx, CryptoEngine.name(of: md), CryptoEngine.context, nil, pkey, nil) == 1 else { throw CryptoError.openssl("verify init") }
        if let (mgf1, salt) = pss, let pctx {
            guard Signer.configurePSS(pctx, mgf1: mgf1, saltLength: salt) else { throw CryptoError.openssl("verify init") }
        }
        let r = EVP_DigestVerify(mdctx, sig, sig.count, message, message.count)
        CryptoError.clearQueue()
        return r == 1
    }

    public func verify(signature: [UInt8], digest: [UInt8], algorithm: SignatureAlgorithm) throws -> Bool {
        try Signer.check(algorithm, keyType: keyType)
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("verify") }
        defer { EVP_PKEY_CTX_free(ctx) }
        switch algorithm {
        case .ed25519, .ed448, .eddsa:
            throw CryptoError(.unsupported, "EdDSA verify", reason: "EdDSA verifies messages, not digests")
        case .mlDSA, .slhDSA:
            throw CryptoError(.unsupported, "\(keyType) verify", reason: "pure ML-DSA/SLH-DSA verify messages, not digests")
        case .rsaRaw:
            let k = (bits + 7) / 8
            guard signature.count == k, let expected = try? Signer.leftPad(digest, to: k) else { return false }
            guard EVP_PKEY_verify_recover_init(ctx) == 1, Signer.configure(ctx, algorithm) else {
                throw CryptoError.openssl("verify init")
            }
            var out = [UInt8](repeating: 0, count: k)
            var len = k
            let r = EVP_PKEY_verify_recover(ctx, &out, &len, signature, signature.count)
            CryptoError.clearQueue()
            return r == 1 && Signer.leftPad(Array(out[0..<len]), orEmpty: k) == expected
        case .rsaPKCS1(let md?), .ecdsa(let md?), .rsaPSS(let md, _, _):
            guard digest.count == md.outputSize else { return false }
        default:
            break
        }
        var sig = signature
        if case .ecdsa = algorithm, let curve {
            guard let der = try ECDSASignature.derFromRaw(signature, curve: curve) else { return false }
            sig = der
        }
        guard EVP_PKEY_verify_init(ctx) == 1, Signer.configure(ctx, algorithm) else { throw CryptoError.openssl("verify init") }
        let r = EVP_PKEY_verify(ctx, sig, sig.count, digest, digest.count)
        CryptoError.clearQueue()
        return r == 1
    }
}

enum Signer {
    static func check(_ algorithm: SignatureAlgorithm, keyType: KeyType) throws {
        let ok: Bool
        switch algorithm {
        case .rsaPKCS1, .rsaPSS, .rsaRaw: ok = keyType == .rsa
        case .ecdsa: ok = keyType == .ec
        case .ed25519: ok = keyType == .ed25519
        case .ed448: ok = keyType == .ed448
        case .eddsa(let i):
            try EdDSASigner.check(i, keyType: keyType)
            ok = true
        case .mlDSA: if case .mlDSA = keyType { ok = true } else { ok = false }
        case .slhDSA: if case .slhDSA = keyType { ok = true } else { ok = false }
        }
        guard ok else {
            throw CryptoError(.invalidInput, "sign", reason: "algorithm \(algorithm) does not fit a \(keyType) key")
        }
        if case .rsaPSS(_, _, let salt) = algorithm, salt < 0 {
            throw CryptoError(.invalidInput, "RSA-PSS", reason: "negative salt length")
        }
    }

    static func configure(_ ctx: OpaquePointer, _ algorithm: SignatureAlgorithm) -> Bool {
        switch algorithm {
        case .rsaPKCS1(let md):
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 else { return false }
            if let md { return EVP_PKEY_CTX_set_signature_md(ctx, md.md) == 1 }
            return true
        case .rsaPSS(let md, let mgf1, let salt):
            return EVP_PKEY_CTX_set_signature_md(ctx, md.md) == 1 && configurePSS(ctx, mgf1: mgf1, saltLength: salt)
        case .rsaRaw:
            return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_NO_PADDING) == 1
        case .ecdsa(let md):
            if let md { return EVP_PKEY_CTX_set_signature_md(ctx, md.md) == 1 }
            return true
        case .ed25519, .ed448, .eddsa, .mlDSA, .slhDSA:
            return true
        }
    }

    static func configurePSS(_ ctx: OpaquePointer, mgf1: DigestAlgorithm, saltLength: Int) -> Bool {
        EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1
            && EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1.md) == 1
            && EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, Int32(saltLength)) == 1
    }

    static func digestSign(_ pkey: OpaquePointer, md: OpaquePointer?, message: [UInt8], curve: ECCurve?,
                           configure: (OpaquePointer) -> Bool) throws -> [UInt8] {
        guard let mdctx = EVP_MD_CTX_new() else { throw CryptoError.openssl("sign") }
        defer { EVP_MD_CTX_free(mdctx) }
        var pctx: OpaquePointer? = nil
        guard EVP_DigestSignInit_ex(mdctx, &pctx, CryptoEngine.name(of: md), CryptoEngine.context, nil, pkey, nil) == 1, let pctx, configure(pctx) else {
            throw CryptoError.openssl("sign init")
        }
        var len = 0
        guard EVP_DigestSign(mdctx, nil, &len, message, message.count) == 1 else { throw CryptoError.openssl("sign") }
        var sig = [UInt8](repeating: 0, count: len)
        guard EVP_DigestSign(mdctx, &sig, &len, message, message.count) == 1 else { throw CryptoError.openssl("sign") }
        if let curve { return try ECDSASignature.rawFromDER(sig[0..<len], curve: curve) }
        return Array(sig[0..<len])
    }

    /// Raw RSA works on whole modulus-sized blocks; PKCS #11 lets callers
    /// omit leading zeros.
    static func leftPad(_ input: [UInt8], to size: Int) throws -> [UInt8] {
        guard input.count <= size else {
            throw CryptoError(.dataTooLong, "raw RSA", reason: "input longer than the modulus")
        }
        return [UInt8](repeating: 0, count: size - input.count) + input
    }

    static func leftPad(_ input: [UInt8], orEmpty size: Int) -> [UInt8] {
        (try? leftPad(input, to: size)) ?? []
    }
}
