import COpenSSL

/// Read-only facts about an EVP_PKEY, shared by PrivateKey and PublicKey.
enum PKeyInfo {
    static func keyType(_ pkey: OpaquePointer) throws -> KeyType {
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA: return .rsa
        case EVP_PKEY_EC: return .ec
        case EVP_PKEY_ED25519: return .ed25519
        case EVP_PKEY_ED448: return .ed448
        case EVP_PKEY_X25519: return .x25519
        case EVP_PKEY_X448: return .x448
        default:
            if EVP_PKEY_is_a(pkey, "RSA") == 1 { return .rsa }
            if EVP_PKEY_is_a(pkey, "EC") == 1 { return .ec }
            for c in ECXCurve.allCases where EVP_PKEY_is_a(pkey, c.rawValue) == 1 { return c.keyType }
            // OpenSSL 3.5's provider-only types have no legacy id; on 3.0 no key is any of them.
            if CryptoEngine.hasPostQuantum {
                for t in KeyType.allPostQuantum where EVP_PKEY_is_a(pkey, t.postQuantumName) == 1 { return t }
            }
            throw CryptoError(.unsupported, "key",
                              reason: "unsupported key type (only RSA, EC, Ed25519, Ed448, X25519, X448, ML-DSA, ML-KEM and SLH-DSA)")
        }
    }

    static func curve(_ pkey: OpaquePointer) -> ECCurve? {
        var buf = [CChar](repeating: 0, count: 64)
        var len = 0
        guard EVP_PKEY_get_utf8_string_param(pkey, "group", &buf, buf.count, &len) == 1 else {
            CryptoError.clearQueue()
            return nil
        }
        return ECCurve(groupName: OSSL.string(buf))
    }

    /// RSA and EC: the modulus or field size. The RFC 7748/8032 curves: the
    /// key length in bits (ECXCurve.bits), not OpenSSL's 253/448/456.
    static func bits(_ pkey: OpaquePointer, type: KeyType) -> Int {
        ECXCurve(keyType: type)?.bits ?? Int(EVP_PKEY_get_bits(pkey))
    }

    static func bnParam(_ pkey: OpaquePointer, _ name: String, padTo width: Int = 0) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else {
            CryptoError.clearQueue()
            return nil
        }
        defer { BN_clear_free(bn) }
        return OSSL.bytes(of: bn, padTo: width)
    }

    static func octetParam(_ pkey: OpaquePointer, _ name: String) -> [UInt8]? {
        var len = 0
        guard EVP_PKEY_get_octet_string_param(pkey, name, nil, 0, &len) == 1, len > 0 else {
            CryptoError.clearQueue()
            return nil
        }
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_get_octet_string_param(pkey, name, &out, len, &len) == 1 else {
            CryptoError.clearQueue()
            return nil
        }
        return Array(out[0..<len])
    }

    /// EC and Ed25519 through the ASN.1 layer (`ks_spki_der`: a tenth of
    /// i2d_PUBKEY's cost), RSA and anything it declines through i2d_PUBKEY.
    static func spkiDER(_ pkey: OpaquePointer) throws -> [UInt8] {
        let type = try? keyType(pkey)
        let nid: Int32? = switch type {
        case .ec: curve(pkey)?.nid
        case .ed25519: NID_undef
        default: nil
        }
        if let nid {
            var out: UnsafeMutablePointer<UInt8>? = nil
            let len = ks_spki_der(pkey, nid, &out)
            if len > 0, let out {
                defer { ks_OPENSSL_free(out) }
                return Array(UnsafeBufferPointer(start: out, count: Int(len)))
            }
            CryptoError.clearQueue()
        }
        return try OSSL.i2d("public key encode") { i2d_PUBKEY(pkey, $0) }
    }

    /// The same through i2d_PUBKEY only: the reference the fast path is tested against.
    static func spkiDERViaEncoder(_ pkey: OpaquePointer) throws -> [UInt8] {
        try OSSL.i2d("public key encode") { i2d_PUBKEY(pkey, $0) }
    }

    /// Rejects curves and types the rest of keyshare cannot represent, so a
    /// key object never exists in a state its getters cannot describe.
    static func validate(_ pkey: OpaquePointer) throws -> (KeyType, ECCurve?) {
        let t = try keyType(pkey)
        if t == .ec {
            guard let c = curve(pkey) else {
                throw CryptoError(.unsupported, "key", reason: "unsupported EC curve (only named P-192/224/256/384/521, secp256k1, brainpoolP256r1/384r1/512r1)")
            }
            return (t, c)
        }
        return (t, nil)
    }
}
