import COpenSSL

// The classical key encapsulations of PKCS #11 3.2 (issue 18), under C_EncapsulateKey /
// C_DecapsulateKey in the module (Sources/PKCS11/ClassicalEncapsulation.swift):
// - ECDH (elliptic_curves.md, CKM_ECDH1_DERIVE / CKM_ECDH1_COFACTOR_DERIVE): an ephemeral key pair
//   on the recipient's curve; its public value is the ciphertext, Z the shared secret the KDF of
//   the mechanism parameter then turns into the key.
// - RSASVE (rsa.md, CKM_RSA_X_509: "according to RSASVE defined in [FIPS SP 800-56B]"): OpenSSL's
//   own RSASVE KEM (EVP_PKEY_encapsulate with the "RSASVE" operation, OpenSSL 3.0 and later): a
//   random z in [2, n-2], ciphertext z^e mod n, secret Z = z as k bytes.

extension PublicKey {
    /// ECDH encapsulation to this EC, X25519 or X448 key: (the ephemeral public value in the
    /// form C_DeriveKey takes it: the raw uncompressed point, or the RFC 7748 bytes; Z).
    public func ecdhEncapsulate() throws -> (ciphertext: [UInt8], z: [UInt8]) {
        let ephemeral: PrivateKey
        let mine: [UInt8]
        if let c = ecxCurve, !c.isEdwards, let raw = ecxRaw {
            ephemeral = try PrivateKey.generate(c)
            mine = raw
        } else if keyType == .ec, let curve, let point = ecPoint {
            ephemeral = try PrivateKey.generateEC(curve)
            mine = point
        } else {
            throw CryptoError(.invalidInput, "ECDH encapsulate", reason: "not an EC, X25519 or X448 key")
        }
        let pub = ephemeral.publicKey
        guard let ct = pub.ecxCurve != nil ? pub.ecxRaw : pub.ecPoint else {
            throw CryptoError(.openssl, "ECDH encapsulate", reason: "no ephemeral public value")
        }
        return (ct, try ephemeral.deriveECDH(peerPoint: mine))
    }

    /// RSASVE.GENERATE (SP 800-56B §7.2.1.2): (ciphertext, Z), both k bytes.
    public func rsasveEncapsulate() throws -> (ciphertext: [UInt8], secret: [UInt8]) {
        let op = "RSASVE encapsulate"
        guard keyType == .rsa else { throw CryptoError(.invalidInput, op, reason: "not an RSA key") }
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl(op) }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_encapsulate_init(ctx, nil) == 1, EVP_PKEY_CTX_set_kem_op(ctx, "RSASVE") == 1 else {
            throw CryptoError.openssl(op)
        }
        var clen = 0, slen = 0
        guard EVP_PKEY_encapsulate(ctx, nil, &clen, nil, &slen) == 1 else { throw CryptoError.openssl(op) }
        var c = [UInt8](repeating: 0, count: clen)
        var s = [UInt8](repeating: 0, count: slen)
        guard EVP_PKEY_encapsulate(ctx, &c, &clen, &s, &slen) == 1 else {
            OSSL.cleanse(&s)
            throw CryptoError.openssl(op)
        }
        return (Array(c[0..<clen]), Array(s[0..<slen]))
    }
}

extension PrivateKey {
    /// RSASVE.RECOVER (SP 800-56B §7.2.1.3): Z for a k-byte ciphertext; a ciphertext that is not
    /// k bytes, or not an integer in [1, n-1], is `.invalidInput`.
    public func rsasveDecapsulate(_ ciphertext: [UInt8]) throws -> [UInt8] {
        let op = "RSASVE decapsulate"
        guard keyType == .rsa else { throw CryptoError(.invalidInput, op, reason: "not an RSA key") }
        guard ciphertext.count == (bits + 7) / 8 else {
            throw CryptoError(.invalidInput, op, reason: "ciphertext must be \((bits + 7) / 8) bytes")
        }
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl(op) }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_decapsulate_init(ctx, nil) == 1, EVP_PKEY_CTX_set_kem_op(ctx, "RSASVE") == 1 else {
            throw CryptoError.openssl(op)
        }
        var slen = 0
        guard EVP_PKEY_decapsulate(ctx, nil, &slen, ciphertext, ciphertext.count) == 1 else { throw CryptoError.openssl(op) }
        var s = [UInt8](repeating: 0, count: slen)
        guard EVP_PKEY_decapsulate(ctx, &s, &slen, ciphertext, ciphertext.count) == 1 else {
            OSSL.cleanse(&s)
            throw CryptoError.openssl(op, kind: .invalidInput)
        }
        return Array(s[0..<slen])
    }
}
