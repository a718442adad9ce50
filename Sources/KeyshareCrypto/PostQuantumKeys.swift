import COpenSSL

// The post-quantum keys as PrivateKey / PublicKey (issue 18): the keychain stores every private
// key as PKCS #8 and every public key as SubjectPublicKeyInfo, in the forms OpenSSL 3.5 writes
// (ML-DSA/ML-KEM PKCS #8 carry the seed and the expanded key; the SPKI holds the raw public key
// under the NIST OID). The family classes (MLDSAKey, MLKEMKey, SLHDSAKey) do the operations; the
// views below share the one EVP_PKEY (reference counted), so nothing is re-parsed per operation.

extension PrivateKey {
    /// A new ML-DSA key pair (from the 32-byte ξ when `seed` is given).
    public static func generateMLDSA(_ set: MLDSAParameterSet, seed: [UInt8]? = nil) throws -> PrivateKey {
        try PrivateKey(MLDSAKey.generate(set, seed: seed))
    }

    /// A new ML-KEM key pair (from d || z, 64 bytes, when `seed` is given).
    public static func generateMLKEM(_ set: MLKEMParameterSet, seed: [UInt8]? = nil) throws -> PrivateKey {
        try PrivateKey(MLKEMKey.generate(set, seed: seed))
    }

    /// A new SLH-DSA key pair (from SK.seed || SK.prf || PK.seed when `seed` is given).
    public static func generateSLHDSA(_ set: SLHDSAParameterSet, seed: [UInt8]? = nil) throws -> PrivateKey {
        try PrivateKey(SLHDSAKey.generate(set, seed: seed))
    }

    /// A new key pair of any post-quantum type; `.unsupported` for the classical types (they have
    /// their own generators with their own parameters) and on an engine without post-quantum.
    public static func generate(postQuantum type: KeyType) throws -> PrivateKey {
        switch type {
        case .mlDSA(let s): try generateMLDSA(s)
        case .mlKEM(let s): try generateMLKEM(s)
        case .slhDSA(let s): try generateSLHDSA(s)
        default: throw CryptoError(.unsupported, "key generation", reason: "\(type) is not a post-quantum type")
        }
    }

    public convenience init(_ k: MLDSAKey) throws {
        guard k.hasPrivateKey else { throw CryptoError(.noPrivateKey, "\(k.parameterSet.name) private key", reason: "public key only") }
        try self.init(owning: withExtendedLifetime(k) { PQ.retain(k.pkey) })
    }

    public convenience init(_ k: MLKEMKey) throws {
        guard k.hasPrivateKey else { throw CryptoError(.noPrivateKey, "\(k.parameterSet.name) private key", reason: "encapsulation key only") }
        try self.init(owning: withExtendedLifetime(k) { PQ.retain(k.pkey) })
    }

    public convenience init(_ k: SLHDSAKey) throws {
        guard k.hasPrivateKey else { throw CryptoError(.noPrivateKey, "\(k.parameterSet.name) private key", reason: "public key only") }
        try self.init(owning: withExtendedLifetime(k) { PQ.retain(k.pkey) })
    }

    /// This key as an ML-DSA key (nil for other types): signing with contexts, HashML-DSA.
    public var mlDSA: MLDSAKey? {
        guard case .mlDSA(let s) = keyType else { return nil }
        return MLDSAKey(owning: PQ.retain(pkey), s, privateKey: true)
    }

    /// This key as an ML-KEM decapsulation key (nil for other types): the same object every time,
    /// so its parked contexts are reused.
    public var mlKEM: MLKEMKey? { kem }

    /// This key as an SLH-DSA key (nil for other types).
    public var slhDSA: SLHDSAKey? {
        guard case .slhDSA(let s) = keyType else { return nil }
        return SLHDSAKey(owning: PQ.retain(pkey), s, privateKey: true)
    }

    /// The FIPS 203/204/205 encoded private key (dk / sk) of a post-quantum key. Sealed in the
    /// keychain like every private value; the module never returns it (CKA_VALUE is sensitive).
    public func postQuantumPrivateBytes() throws -> [UInt8] {
        guard keyType.isPostQuantum, let v = PKeyInfo.octetParam(pkey, "priv") else {
            throw CryptoError(.invalidInput, "private value", reason: "not a post-quantum key")
        }
        return v
    }

    /// The seed the key was generated from (ML-DSA ξ, ML-KEM d || z), when OpenSSL kept it; nil for
    /// keys imported without one and for SLH-DSA (whose private key is its seeds).
    public var postQuantumSeed: [UInt8]? {
        switch keyType {
        case .mlDSA, .mlKEM: PKeyInfo.octetParam(pkey, "seed")
        default: nil
        }
    }
}

extension PublicKey {
    /// From the raw encoded public key of a post-quantum type (CKA_VALUE of a PKCS #11 3.2 public key).
    public convenience init(postQuantum type: KeyType, raw: [UInt8]) throws {
        // The family object owns its EVP_PKEY and may be released as soon as `.pkey` is read, so
        // the second reference is taken while it is still held.
        let pkey: OpaquePointer
        switch type {
        case .mlDSA(let s): let k = try MLDSAKey(publicKey: raw, s); pkey = withExtendedLifetime(k) { PQ.retain(k.pkey) }
        case .mlKEM(let s): let k = try MLKEMKey(encapsulationKey: raw, s); pkey = withExtendedLifetime(k) { PQ.retain(k.pkey) }
        case .slhDSA(let s): let k = try SLHDSAKey(publicKey: raw, s); pkey = withExtendedLifetime(k) { PQ.retain(k.pkey) }
        default: throw CryptoError(.unsupported, "public key", reason: "\(type) is not a post-quantum type")
        }
        try self.init(owning: pkey)
    }

    /// The raw encoded public key of a post-quantum key (CKA_VALUE), nil for the other types.
    public var postQuantumRaw: [UInt8]? {
        keyType.isPostQuantum ? PKeyInfo.octetParam(pkey, "pub") : nil
    }

    public var mlDSA: MLDSAKey? {
        guard case .mlDSA(let s) = keyType else { return nil }
        return MLDSAKey(owning: PQ.retain(pkey), s, privateKey: false)
    }

    /// The same object every time (see PrivateKey.mlKEM).
    public var mlKEM: MLKEMKey? { kem }

    public var slhDSA: SLHDSAKey? {
        guard case .slhDSA(let s) = keyType else { return nil }
        return SLHDSAKey(owning: PQ.retain(pkey), s, privateKey: false)
    }
}

extension PQ {
    /// One more reference to `pkey` (EVP_PKEY_up_ref), for a second owner.
    static func retain(_ pkey: OpaquePointer) -> OpaquePointer {
        EVP_PKEY_up_ref(pkey)
        return pkey
    }
}
