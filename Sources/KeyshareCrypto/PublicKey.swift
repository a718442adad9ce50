import COpenSSL

/// A public key held as an OpenSSL EVP_PKEY; see PrivateKey for why a class.
public final class PublicKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let keyType: KeyType
    public let curve: ECCurve?
    /// This key as an ML-KEM key (`mlKEM`), made once: see PrivateKey.kem.
    let kem: MLKEMKey?

    init(owning pkey: OpaquePointer) throws {
        do {
            (keyType, curve) = try PKeyInfo.validate(pkey)
            kem = if case .mlKEM(let set) = keyType { MLKEMKey(owning: PQ.retain(pkey), set, privateKey: false) } else { nil }
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// X.509 SubjectPublicKeyInfo DER (CKA_PUBLIC_KEY_INFO).
    public convenience init(spkiDER: [UInt8]) throws {
        CryptoError.clearQueue()
        guard let (key, used) = OSSL.d2i(spkiDER, { p, n in d2i_PUBKEY_ex(nil, p, n, CryptoEngine.context, nil) }) else {
            throw CryptoError.openssl("public key decode", kind: .invalidInput)
        }
        guard used == spkiDER.count else {
            EVP_PKEY_free(key)
            throw CryptoError(.invalidInput, "public key decode", reason: "trailing data after SubjectPublicKeyInfo")
        }
        try self.init(owning: key)
    }

    public convenience init(pem: String) throws {
        CryptoError.clearQueue()
        let key = try OSSL.withReadBIO(Array(pem.utf8), "public key PEM") { bio in
            PEM_read_bio_PUBKEY_ex(bio, nil, noPassphraseCallback, nil, CryptoEngine.context, nil)
        }
        guard let key else { throw CryptoError.openssl("public key PEM decode", kind: .invalidInput) }
        try self.init(owning: key)
    }

    /// From CKA_MODULUS / CKA_PUBLIC_EXPONENT (C_CreateObject).
    public convenience init(rsaModulus: [UInt8], exponent: [UInt8]) throws {
        guard !rsaModulus.isEmpty, !exponent.isEmpty else {
            throw CryptoError(.invalidInput, "RSA public key", reason: "empty modulus or exponent")
        }
        let n = try OSSL.bignum(rsaModulus)
        defer { BN_free(n) }
        let e = try OSSL.bignum(exponent)
        defer { BN_free(e) }
        CryptoError.clearQueue()
        let b = try ParamBuilder()
        b.bn("n", n)
        b.bn("e", e)
        let key = try b.makeKey("RSA", selection: ks_EVP_PKEY_PUBLIC_KEY(), "RSA public key")
        try self.init(owning: key)
    }

    /// From CKA_EC_PARAMS and CKA_EC_POINT; the point may be raw or DER-wrapped.
    /// The point is checked to be on the curve, so a bad one fails here and
    /// not later inside a signature check or ECDH.
    public convenience init(ecParams: [UInt8], point: [UInt8]) throws {
        guard let curve = ECCurve(paramsDER: ecParams) else {
            throw CryptoError(.unsupported, "EC public key", reason: "unsupported curve parameters (named curves of ECCurve only)")
        }
        try self.init(curve: curve, point: point)
    }

    public convenience init(curve: ECCurve, point: [UInt8]) throws {
        let raw = try curve.rawPoint(point)
        CryptoError.clearQueue()
        let b = try ParamBuilder()
        b.utf8("group", curve.rawValue)
        b.octets("pub", raw)
        let key = try b.makeKey("EC", selection: ks_EVP_PKEY_PUBLIC_KEY(), "EC public key")
        try self.init(owning: key)
        try checkPublic()
    }

    public convenience init(ed25519Raw: [UInt8]) throws {
        try self.init(.ed25519, raw: ed25519Raw)
    }

    /// From the raw public key of an RFC 7748 / RFC 8032 curve (CKA_EC_POINT
    /// without its OCTET STRING). Ed25519/Ed448 points that do not decode
    /// are refused by OpenSSL at use; X25519/X448 take any string (RFC 7748 §5).
    public convenience init(_ curve: ECXCurve, raw: [UInt8]) throws {
        guard raw.count == curve.keyLength else {
            throw CryptoError(.invalidInput, "\(curve.rawValue) public key", reason: "must be \(curve.keyLength) bytes")
        }
        guard let key = EVP_PKEY_new_raw_public_key_ex(CryptoEngine.context, curve.opensslName, nil, raw, raw.count) else {
            throw CryptoError.openssl("\(curve.rawValue) public key", kind: .invalidInput)
        }
        try self.init(owning: key)
    }

    /// The partial check (SP 800-56A 5.6.2.3.4: coordinates in range, point on
    /// the curve, not the identity). The full check adds n·Q = O, a scalar
    /// multiplication (about 130 us for P-256) that proves nothing more on
    /// these curves: every ECCurve has cofactor 1, so every point on the
    /// curve but the identity has prime order n.
    private func checkPublic() throws {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, pkey, nil) else { throw CryptoError.openssl("public key check") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_public_check_quick(ctx) == 1 else {
            throw CryptoError.openssl("public key check", kind: .invalidInput)
        }
    }

    public func spkiDER() throws -> [UInt8] { try PKeyInfo.spkiDER(pkey) }

    public func pem() throws -> String {
        let bytes = try OSSL.collectBIO("public key PEM encode") { PEM_write_bio_PUBKEY($0, pkey) == 1 }
        return String(decoding: bytes, as: UTF8.self)
    }

    public var bits: Int { PKeyInfo.bits(pkey, type: keyType) }
    public var rsaModulus: [UInt8]? { keyType == .rsa ? PKeyInfo.bnParam(pkey, "n") : nil }
    public var rsaPublicExponent: [UInt8]? { keyType == .rsa ? PKeyInfo.bnParam(pkey, "e") : nil }

    /// Raw uncompressed 04||X||Y, whatever form the key was created from.
    public var ecPoint: [UInt8]? {
        guard keyType == .ec, let curve else { return nil }
        guard let enc = PKeyInfo.octetParam(pkey, "encoded-pub-key") else { return nil }
        if enc.first == 0x04 { return enc }
        // A compressed input point: expand through the coordinates.
        guard let x = PKeyInfo.bnParam(pkey, "qx", padTo: curve.byteSize),
              let y = PKeyInfo.bnParam(pkey, "qy", padTo: curve.byteSize) else { return nil }
        return [0x04] + x + y
    }

    /// CKA_EC_POINT form: the raw point wrapped in a DER OCTET STRING.
    public var ecPointDER: [UInt8]? {
        guard let p = ecPoint else { return nil }
        return DEROctetString.encode(p)
    }

    public var ed25519Raw: [UInt8]? { keyType == .ed25519 ? ecxRaw : nil }

    /// The curve of an Ed25519, Ed448, X25519 or X448 key.
    public var ecxCurve: ECXCurve? { ECXCurve(keyType: keyType) }

    /// The raw public key of an Ed25519, Ed448, X25519 or X448 key.
    public var ecxRaw: [UInt8]? {
        guard let c = ecxCurve else { return nil }
        var len = c.keyLength
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_get_raw_public_key(pkey, &out, &len) == 1 else {
            CryptoError.clearQueue()
            return nil
        }
        return Array(out[0..<len])
    }

    /// SHA-1 of the subjectPublicKey BIT STRING contents (RFC 5280 §4.2.1.2
    /// method 1): the CKA_ID keyshare gives an identity's objects.
    public func keyIdentifier() throws -> [UInt8] {
        var der = try spkiDER()
        defer { OSSL.cleanse(&der) }
        guard let (pub, _) = OSSL.d2i(der, { p, n in d2i_X509_PUBKEY(nil, p, n) }) else {
            throw CryptoError.openssl("public key decode")
        }
        defer { X509_PUBKEY_free(pub) }
        var data: UnsafePointer<UInt8>? = nil
        var len: Int32 = 0
        guard X509_PUBKEY_get0_param(nil, &data, &len, nil, pub) == 1, let data else {
            throw CryptoError.openssl("public key bits")
        }
        return DigestAlgorithm.sha1.hash(Array(UnsafeBufferPointer(start: data, count: Int(len))))
    }
}
