import COpenSSL

/// A private key held as an OpenSSL EVP_PKEY. A class because it owns that
/// handle; immutable after init, and OpenSSL 3 keys are safe to use from
/// several threads at once, hence @unchecked Sendable.
public final class PrivateKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let keyType: KeyType
    public let curve: ECCurve?
    public let publicKey: PublicKey
    let signingContexts = SigningContexts()
    /// This key as an ML-KEM key (`mlKEM`), made once: its parked encapsulation and
    /// decapsulation contexts (MLKEMKey) then serve every call on the key.
    let kem: MLKEMKey?

    /// Takes ownership of `pkey` (freed on deinit, also when init throws).
    init(owning pkey: OpaquePointer) throws {
        do {
            (keyType, curve) = try PKeyInfo.validate(pkey)
            publicKey = try PublicKey(spkiDER: PKeyInfo.spkiDER(pkey))
            kem = if case .mlKEM(let set) = keyType { MLKEMKey(owning: PQ.retain(pkey), set, privateKey: true) } else { nil }
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// PKCS #8 or the traditional per-algorithm form (PKCS #1, SEC 1), auto-detected.
    public convenience init(der: [UInt8]) throws {
        CryptoError.clearQueue()
        guard let (key, _) = OSSL.d2i(der, { p, n in d2i_AutoPrivateKey_ex(nil, p, n, CryptoEngine.context, nil) }) else {
            throw CryptoError.openssl("private key decode", kind: .invalidInput)
        }
        try self.init(owning: key)
    }

    /// Any PEM private key (PKCS #8, encrypted PKCS #8, traditional). Without
    /// a password an encrypted key fails instead of prompting on a terminal.
    public convenience init(pem: String, password: [UInt8]? = nil) throws {
        CryptoError.clearQueue()
        let key: OpaquePointer? = try OSSL.withReadBIO(Array(pem.utf8), "private key PEM") { bio in
            if var pw = password {
                pw.append(0)
                defer { OSSL.cleanse(&pw) }
                return pw.withUnsafeMutableBytes { PEM_read_bio_PrivateKey_ex(bio, nil, nil, $0.baseAddress, CryptoEngine.context, nil) }
            }
            return PEM_read_bio_PrivateKey_ex(bio, nil, noPassphraseCallback, nil, CryptoEngine.context, nil)
        }
        guard let key else {
            let kind: CryptoError.Kind = password == nil ? .invalidInput : .wrongPassword
            throw CryptoError.openssl("private key PEM decode", kind: kind)
        }
        try self.init(owning: key)
    }

    public var bits: Int { PKeyInfo.bits(pkey, type: keyType) }

    /// Unencrypted PKCS #8 DER: the form the keychain stores (encrypted at rest there).
    public func pkcs8DER() throws -> [UInt8] {
        try OSSL.collectBIO("private key encode") { bio in
            i2d_PKCS8PrivateKey_bio(bio, pkey, nil, nil, 0, nil, nil) == 1
        }
    }

    public func pem() throws -> String {
        let bytes = try OSSL.collectBIO("private key PEM encode") { bio in
            PEM_write_bio_PKCS8PrivateKey(bio, pkey, nil, nil, 0, nil, nil) == 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    public func rsaPrivateComponents() throws -> RSAPrivateComponents {
        guard keyType == .rsa else {
            throw CryptoError(.invalidInput, "RSA components", reason: "not an RSA key")
        }
        func get(_ name: String) throws -> [UInt8] {
            guard let v = PKeyInfo.bnParam(pkey, name) else {
                throw CryptoError(.unsupported, "RSA components", reason: "key has no \(name) component")
            }
            return v
        }
        return try RSAPrivateComponents(
            modulus: get("n"), publicExponent: get("e"), d: get("d"),
            p: get("rsa-factor1"), q: get("rsa-factor2"),
            dp: get("rsa-exponent1"), dq: get("rsa-exponent2"), qinv: get("rsa-coefficient1"))
    }

    /// The private scalar, padded to the curve's byte size (CKA_VALUE of an EC key).
    public func ecPrivateScalar() throws -> [UInt8] {
        guard keyType == .ec, let curve else {
            throw CryptoError(.invalidInput, "EC private value", reason: "not an EC key")
        }
        guard let v = PKeyInfo.bnParam(pkey, "priv", padTo: curve.byteSize) else {
            throw CryptoError.openssl("EC private value")
        }
        return v
    }

    /// The raw 32-byte Ed25519 seed (CKA_VALUE of an Ed25519 key).
    public func ed25519PrivateRaw() throws -> [UInt8] {
        guard keyType == .ed25519 else {
            throw CryptoError(.invalidInput, "Ed25519 private value", reason: "not an Ed25519 key")
        }
        return try ecxPrivateRaw()
    }

    /// The raw private key of an Ed25519, Ed448, X25519 or X448 key (CKA_VALUE).
    public func ecxPrivateRaw() throws -> [UInt8] {
        guard publicKey.ecxCurve != nil else {
            throw CryptoError(.invalidInput, "private value", reason: "not an Ed25519/Ed448/X25519/X448 key")
        }
        var len = 0
        guard EVP_PKEY_get_raw_private_key(pkey, nil, &len) == 1 else { throw CryptoError.openssl("raw private value") }
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_get_raw_private_key(pkey, &out, &len) == 1 else { throw CryptoError.openssl("raw private value") }
        return Array(out[0..<len])
    }

    /// True when `publicKey` is this key's public half: how a certificate is
    /// matched to its key.
    public func matches(_ other: PublicKey) -> Bool {
        let r = EVP_PKEY_eq(pkey, other.pkey)
        CryptoError.clearQueue()
        return r == 1
    }
}
