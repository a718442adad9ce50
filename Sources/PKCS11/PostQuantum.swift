import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 3.2 post-quantum signatures (issue 18): CKK_ML_DSA with CKM_ML_DSA, CKM_HASH_ML_DSA and
// CKM_HASH_ML_DSA_<hash>; CKK_SLH_DSA with CKM_SLH_DSA, CKM_HASH_SLH_DSA and CKM_HASH_SLH_DSA_<hash>.
// Offered only where the engine has them (CryptoEngine.hasPostQuantum: OpenSSL ≥ 3.5); on a
// `make OPENSSL=system` build on Debian 12 none of them is listed and each is CKR_MECHANISM_INVALID.
//
// Parameters (PKCS #11 3.2 §6.67.5, §6.68.5): CKM_ML_DSA, CKM_SLH_DSA and the hash-named
// mechanisms take an optional CK_SIGN_ADDITIONAL_CONTEXT (hedge variant, context ≤ 255 bytes);
// CKM_HASH_ML_DSA / CKM_HASH_SLH_DSA require a CK_HASH_SIGN_ADDITIONAL_CONTEXT naming the hash,
// and their input is that hash's output. CKH_HEDGE_PREFERRED and CKH_HEDGE_REQUIRED both sign
// hedged (OpenSSL always can); CKH_DETERMINISTIC_REQUIRED signs deterministically.
//
// Multi-part: the hash-named mechanisms hash as the data comes (any length). Pure ML-DSA and
// SLH-DSA need the whole message at once in OpenSSL 3.5 (its ML-DSA/SLH-DSA signatures are
// one-shot), so their C_SignUpdate buffers, as Kryoptic does, capped at 1 MiB like the other
// raw-input schemes here (SignatureOperation.update). CKM_HASH_ML_DSA takes one digest.

/// Which family signs, and how the message reaches it.
public struct PQSignMechanism: Sendable, Equatable {
    public enum Family: Sendable, Equatable { case mlDSA, slhDSA }
    public var family: Family
    /// nil: pure (ML-DSA.Sign / slh_sign); otherwise HashML-DSA / HashSLH-DSA with this hash.
    public var preHash: PreHash?
    /// CKM_HASH_ML_DSA / CKM_HASH_SLH_DSA: the input is PH(M) already.
    public var inputIsDigest: Bool
    public var deterministic: Bool
    public var context: [UInt8]
}

extension Mechanism {
    /// The hash-named HashML-DSA / HashSLH-DSA mechanisms.
    static let pqHashMechanisms: [CK_MECHANISM_TYPE: (PQSignMechanism.Family, PreHash)] = {
        let hashes: [(CK_MECHANISM_TYPE, CK_MECHANISM_TYPE, PreHash)] = [
            (CKM_HASH_ML_DSA_SHA224, CKM_HASH_SLH_DSA_SHA224, .digest(.sha224)),
            (CKM_HASH_ML_DSA_SHA256, CKM_HASH_SLH_DSA_SHA256, .digest(.sha256)),
            (CKM_HASH_ML_DSA_SHA384, CKM_HASH_SLH_DSA_SHA384, .digest(.sha384)),
            (CKM_HASH_ML_DSA_SHA512, CKM_HASH_SLH_DSA_SHA512, .digest(.sha512)),
            (CKM_HASH_ML_DSA_SHA3_224, CKM_HASH_SLH_DSA_SHA3_224, .digest(.sha3_224)),
            (CKM_HASH_ML_DSA_SHA3_256, CKM_HASH_SLH_DSA_SHA3_256, .digest(.sha3_256)),
            (CKM_HASH_ML_DSA_SHA3_384, CKM_HASH_SLH_DSA_SHA3_384, .digest(.sha3_384)),
            (CKM_HASH_ML_DSA_SHA3_512, CKM_HASH_SLH_DSA_SHA3_512, .digest(.sha3_512)),
            (CKM_HASH_ML_DSA_SHAKE128, CKM_HASH_SLH_DSA_SHAKE128, .shake128),
            (CKM_HASH_ML_DSA_SHAKE256, CKM_HASH_SLH_DSA_SHAKE256, .shake256),
        ]
        var m: [CK_MECHANISM_TYPE: (PQSignMechanism.Family, PreHash)] = [:]
        for (d, s, h) in hashes {
            m[d] = (.mlDSA, h)
            m[s] = (.slhDSA, h)
        }
        return m
    }()

    /// The digest mechanisms a CK_HASH_SIGN_ADDITIONAL_CONTEXT may name (3.2 defines no SHAKE digest
    /// mechanism, so SHAKE pre-hashing is only through the hash-named mechanisms).
    static let pqDigestOf: [CK_MECHANISM_TYPE: PreHash] = [
        CKM_SHA224: .digest(.sha224), CKM_SHA256: .digest(.sha256), CKM_SHA384: .digest(.sha384),
        CKM_SHA512: .digest(.sha512), CKM_SHA512_224: .digest(.sha512_224), CKM_SHA512_256: .digest(.sha512_256),
        CKM_SHA3_224: .digest(.sha3_224), CKM_SHA3_256: .digest(.sha3_256), CKM_SHA3_384: .digest(.sha3_384),
        CKM_SHA3_512: .digest(.sha3_512),
    ]

    static let pqKeyPairGen: Set<CK_MECHANISM_TYPE> = [CKM_ML_DSA_KEY_PAIR_GEN, CKM_SLH_DSA_KEY_PAIR_GEN, CKM_ML_KEM_KEY_PAIR_GEN]

    /// Decodes a post-quantum mechanism, nil for any other. Without post-quantum in the engine every
    /// one of them is CKR_MECHANISM_INVALID (none is listed).
    static func postQuantum(_ type: CK_MECHANISM_TYPE, _ p: [UInt8]) throws -> Mechanism? {
        let hashNamed = pqHashMechanisms[type]
        guard hashNamed != nil || pqKeyPairGen.contains(type)
            || [CKM_ML_DSA, CKM_SLH_DSA, CKM_HASH_ML_DSA, CKM_HASH_SLH_DSA, CKM_ML_KEM].contains(type) else { return nil }
        guard CryptoEngine.hasPostQuantum else { throw PKCS11Error.mechanismInvalid }
        if pqKeyPairGen.contains(type) || type == CKM_ML_KEM {
            guard p.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
            return .undecoded(type, [])
        }
        if type == CKM_HASH_ML_DSA || type == CKM_HASH_SLH_DSA {
            let raw = try load(p, as: CK_HASH_SIGN_ADDITIONAL_CONTEXT.self)
            guard let h = pqDigestOf[raw.hash] else { throw PKCS11Error.mechanismParamInvalid }
            return .pqSign(PQSignMechanism(family: type == CKM_HASH_ML_DSA ? .mlDSA : .slhDSA, preHash: h, inputIsDigest: true,
                                           deterministic: try deterministic(raw.hedgeVariant),
                                           context: try copy(raw.pContext, raw.ulContextLen, max: 255)))
        }
        var m = PQSignMechanism(family: hashNamed?.0 ?? (type == CKM_ML_DSA ? .mlDSA : .slhDSA), preHash: hashNamed?.1,
                                inputIsDigest: false, deterministic: false, context: [])
        if !p.isEmpty {
            let raw = try load(p, as: CK_SIGN_ADDITIONAL_CONTEXT.self)
            m.deterministic = try deterministic(raw.hedgeVariant)
            m.context = try copy(raw.pContext, raw.ulContextLen, max: 255)
        }
        return .pqSign(m)
    }

    private static func deterministic(_ hedge: CK_HEDGE_TYPE) throws -> Bool {
        switch hedge {
        case CK_HEDGE_TYPE(CKH_HEDGE_PREFERRED), CK_HEDGE_TYPE(CKH_HEDGE_REQUIRED): return false
        case CK_HEDGE_TYPE(CKH_DETERMINISTIC_REQUIRED): return true
        default: throw PKCS11Error.mechanismParamInvalid
        }
    }
}

extension MechanismCatalog {
    /// Sizes as Kryoptic reports them: the public key's length in bytes, smallest to largest set.
    static let postQuantumEntries: [(CK_MECHANISM_TYPE, MechanismInfo)] = {
        guard CryptoEngine.hasPostQuantum else { return [] }
        let dsa = (CK_ULONG(MLDSAParameterSet.mlDSA44.publicKeyLength), CK_ULONG(MLDSAParameterSet.mlDSA87.publicKeyLength))
        let slh = (CK_ULONG(SLHDSAParameterSet.sha2_128s.publicKeyLength), CK_ULONG(SLHDSAParameterSet.shake_256f.publicKeyLength))
        let kem = (CK_ULONG(MLKEMParameterSet.mlKEM512.encapsulationKeyLength),
                   CK_ULONG(MLKEMParameterSet.mlKEM1024.encapsulationKeyLength))
        let sv = CKF_SIGN | CKF_VERIFY
        var e: [(CK_MECHANISM_TYPE, MechanismInfo)] = []
        e.append((CKM_ML_DSA_KEY_PAIR_GEN, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: CKF_GENERATE_KEY_PAIR)))
        e.append((CKM_ML_DSA, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: sv)))
        e.append((CKM_HASH_ML_DSA, MechanismInfo(minKeySize: dsa.0, maxKeySize: dsa.1, flags: sv)))
        e.append((CKM_SLH_DSA_KEY_PAIR_GEN, MechanismInfo(minKeySize: slh.0, maxKeySize: slh.1, flags: CKF_GENERATE_KEY_PAIR)))
        e.append((CKM_SLH_DSA, MechanismInfo(minKeySize: slh.0, maxKeySize: slh.1, flags: sv)))
        e.append((CKM_HASH_SLH_DSA, MechanismInfo(minKeySize: slh.0, maxKeySize: slh.1, flags: sv)))
        for (t, (family, _)) in Mechanism.pqHashMechanisms.sorted(by: { $0.key < $1.key }) {
            let r = family == .mlDSA ? dsa : slh
            e.append((t, MechanismInfo(minKeySize: r.0, maxKeySize: r.1, flags: sv)))
        }
        e.append((CKM_ML_KEM_KEY_PAIR_GEN, MechanismInfo(minKeySize: kem.0, maxKeySize: kem.1, flags: CKF_GENERATE_KEY_PAIR)))
        e.append((CKM_ML_KEM, MechanismInfo(minKeySize: kem.0, maxKeySize: kem.1,
                                            flags: CK_FLAGS(CKF_ENCAPSULATE) | CK_FLAGS(CKF_DECAPSULATE))))
        return e
    }()
}

/// A sign or verify operation of `PQSignMechanism`.
final class PQSignatureOperation: SignOperation, VerifyOperation {
    let mechanism: PQSignMechanism
    let signatureLength: Int
    private let privateKey: PrivateKey?
    private let publicKey: PublicKey?
    private var buffer: [UInt8] = []
    private var digest: DigestContext?

    init(_ m: PQSignMechanism, keyType: KeyType, privateKey: PrivateKey?, publicKey: PublicKey?) throws {
        switch (m.family, keyType) {
        case (.mlDSA, .mlDSA(let s)): signatureLength = s.signatureLength
        case (.slhDSA, .slhDSA(let s)): signatureLength = s.signatureLength
        default: throw PKCS11Error.keyTypeInconsistent
        }
        mechanism = m
        self.privateKey = privateKey
        self.publicKey = publicKey
        if !m.inputIsDigest, case .digest(let d)? = m.preHash { digest = try DigestContext(d) }
    }

    func update(_ part: [UInt8]) throws {
        if let digest { return try digest.update(part) }
        guard buffer.count + part.count <= 1 << 20 else { throw PKCS11Error.dataLenRange }
        buffer += part
    }

    /// The message (pure) or PH(M) (pre-hash) the family signs.
    private func input() throws -> [UInt8] {
        if let digest { return try digest.finish() }
        guard let h = mechanism.preHash, !mechanism.inputIsDigest else { return buffer }
        return try h.hash(buffer)  // SHAKE128/256
    }

    func finish() throws -> [UInt8] {
        guard let privateKey else { throw PKCS11Error.generalError }
        let m = try input()
        let c = mechanism.context, det = mechanism.deterministic
        if let h = mechanism.preHash, m.count != h.outputSize { throw PKCS11Error.dataLenRange }
        switch mechanism.family {
        case .mlDSA:
            guard let k = privateKey.mlDSA else { throw PKCS11Error.keyTypeInconsistent }
            if let h = mechanism.preHash { return try k.sign(digest: m, preHash: h, context: c, deterministic: det) }
            return try k.sign(m, context: c, deterministic: det)
        case .slhDSA:
            guard let k = privateKey.slhDSA else { throw PKCS11Error.keyTypeInconsistent }
            if let h = mechanism.preHash { return try k.sign(digest: m, preHash: h, context: c, deterministic: det) }
            return try k.sign(m, context: c, deterministic: det)
        }
    }

    func finish(signature: [UInt8]) throws {
        guard let publicKey else { throw PKCS11Error.generalError }
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        let m = try input()
        if let h = mechanism.preHash, m.count != h.outputSize { throw PKCS11Error.dataLenRange }
        let c = mechanism.context
        let ok: Bool
        switch mechanism.family {
        case .mlDSA:
            guard let k = publicKey.mlDSA else { throw PKCS11Error.keyTypeInconsistent }
            ok = try mechanism.preHash.map { try k.verify(signature, digest: m, preHash: $0, context: c) }
                ?? k.verify(signature, message: m, context: c)
        case .slhDSA:
            guard let k = publicKey.slhDSA else { throw PKCS11Error.keyTypeInconsistent }
            ok = try mechanism.preHash.map { try k.verify(signature, digest: m, preHash: $0, context: c) }
                ?? k.verify(signature, message: m, context: c)
        }
        guard ok else { throw PKCS11Error.signatureInvalid }
    }
}
