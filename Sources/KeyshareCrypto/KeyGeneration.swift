import COpenSSL

extension PrivateKey {
    /// The modulus sizes RSA generation accepts: the range C_GetMechanismInfo
    /// reports for CKM_RSA_PKCS_KEY_PAIR_GEN and for every RSA mechanism
    /// (SoftHSM2 offers the same upper bound). 1024 is the floor because
    /// binding test suites and older deployments still generate 1024-bit
    /// keys; the CLI's own default stays 2048.
    public static let rsaGenerationBits = 1024...16384

    /// RSA of `rsaGenerationBits`, any size in that range (OpenSSL makes
    /// moduli of exactly the requested bit length).
    public static func generateRSA(bits: Int, publicExponent: [UInt8] = [1, 0, 1]) throws -> PrivateKey {
        guard rsaGenerationBits.contains(bits) else {
            throw CryptoError(.invalidInput, "RSA key generation", reason: "modulus size must be 1024-16384 bits")
        }
        let e = try OSSL.bignum(publicExponent)
        defer { BN_free(e) }
        guard BN_is_odd(e) == 1, BN_num_bits(e) >= 2 else {
            throw CryptoError(.invalidInput, "RSA key generation", reason: "public exponent must be odd and at least 3")
        }
        return try generate("RSA", "RSA key generation") { ctx in
            EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1
                && EVP_PKEY_CTX_set1_rsa_keygen_pubexp(ctx, e) == 1
        }
    }

    public static func generateEC(_ curve: ECCurve) throws -> PrivateKey {
        try generate("EC", "EC key generation") { ctx in
            EVP_PKEY_CTX_set_group_name(ctx, curve.rawValue) == 1
        }
    }

    public static func generateEd25519() throws -> PrivateKey {
        try generate(.ed25519)
    }

    /// An Ed25519, Ed448, X25519 or X448 key.
    public static func generate(_ curve: ECXCurve) throws -> PrivateKey {
        try generate(curve.rawValue, "\(curve.rawValue) key generation") { _ in true }
    }

    private static func generate(_ type: String, _ op: String, _ configure: (OpaquePointer) -> Bool) throws -> PrivateKey {
        CryptoError.clearQueue()
        guard let ctx = EVP_PKEY_CTX_new_from_name(CryptoEngine.context, type, nil) else { throw CryptoError.openssl(op) }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1, configure(ctx),
              EVP_PKEY_generate(ctx, &key) == 1, let key else {
            throw CryptoError.openssl(op)
        }
        return try PrivateKey(owning: key)
    }

    /// From raw CKA_VALUE-style material (C_CreateObject of a private key).
    public static func fromEC(curve: ECCurve, privateScalar: [UInt8]) throws -> PrivateKey {
        let d = try OSSL.bignum(privateScalar)
        defer { BN_clear_free(d) }
        // OpenSSL needs the public point too; derive it from the scalar.
        guard let group = EC_GROUP_new_by_curve_name_ex(CryptoEngine.context, nil, curve.nid) else { throw CryptoError.openssl("EC private key") }
        defer { EC_GROUP_free(group) }
        guard let point = EC_POINT_new(group) else { throw CryptoError.openssl("EC private key") }
        defer { EC_POINT_free(point) }
        guard EC_POINT_mul(group, point, d, nil, nil, nil) == 1 else {
            throw CryptoError.openssl("EC private key", kind: .invalidInput)
        }
        var pub = [UInt8](repeating: 0, count: 1 + 2 * curve.byteSize)
        guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &pub, pub.count, nil) == pub.count else {
            throw CryptoError.openssl("EC private key")
        }
        let b = try ParamBuilder()
        b.utf8("group", curve.rawValue)
        b.bn("priv", d)
        b.octets("pub", pub)
        return try PrivateKey(owning: b.makeKey("EC", selection: ks_EVP_PKEY_KEYPAIR(), "EC private key"))
    }

    public static func fromEd25519(privateRaw: [UInt8]) throws -> PrivateKey {
        try from(.ed25519, privateRaw: privateRaw)
    }

    /// From the raw private key of an RFC 7748 / RFC 8032 curve (CKA_VALUE):
    /// the Ed25519/Ed448 seed or the X25519/X448 scalar string.
    public static func from(_ curve: ECXCurve, privateRaw: [UInt8]) throws -> PrivateKey {
        guard privateRaw.count == curve.keyLength else {
            throw CryptoError(.invalidInput, "\(curve.rawValue) private key", reason: "must be \(curve.keyLength) bytes")
        }
        guard let key = EVP_PKEY_new_raw_private_key_ex(CryptoEngine.context, curve.opensslName, nil, privateRaw, privateRaw.count) else {
            throw CryptoError.openssl("\(curve.rawValue) private key", kind: .invalidInput)
        }
        return try PrivateKey(owning: key)
    }

    /// From the CRT components (C_CreateObject of an RSA private key).
    public static func fromRSA(_ c: RSAPrivateComponents) throws -> PrivateKey {
        var bns: [OpaquePointer] = []
        defer { bns.forEach { BN_clear_free($0) } }
        let names = ["n", "e", "d", "rsa-factor1", "rsa-factor2", "rsa-exponent1", "rsa-exponent2", "rsa-coefficient1"]
        for v in [c.modulus, c.publicExponent, c.d, c.p, c.q, c.dp, c.dq, c.qinv] {
            bns.append(try OSSL.bignum(v))
        }
        let b = try ParamBuilder()
        for (name, bn) in zip(names, bns) { b.bn(name, bn) }
        return try PrivateKey(owning: b.makeKey("RSA", selection: ks_EVP_PKEY_KEYPAIR(), "RSA private key"))
    }
}
