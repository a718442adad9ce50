import COpenSSL

/// The key families keyshare holds. `.ec` is every short-Weierstrass curve
/// of `ECCurve`; the RFC 8032 Edwards (EdDSA) and RFC 7748 Montgomery (ECDH)
/// curves are each their own type, as OpenSSL and PKCS #11 keep them apart
/// (CKK_EC_EDWARDS, CKK_EC_MONTGOMERY); `ECXCurve` describes them.
/// The post-quantum families (issue 18) carry their parameter set, as PKCS #11 3.2
/// keeps one key type per family (CKK_ML_DSA, CKK_ML_KEM, CKK_SLH_DSA) with
/// CKA_PARAMETER_SET naming the set; they exist only with OpenSSL ≥ 3.5
/// (`CryptoEngine.hasPostQuantum`).
public enum KeyType: Sendable, Hashable, CustomStringConvertible {
    case rsa, ec, ed25519, ed448, x25519, x448
    case mlDSA(MLDSAParameterSet)
    case mlKEM(MLKEMParameterSet)
    case slhDSA(SLHDSAParameterSet)

    /// "rsa", "ec", … as before the post-quantum types (what `"\(keyType)"` printed),
    /// and the FIPS name for those ("ML-DSA-65", "SLH-DSA-SHA2-128s").
    public var description: String {
        switch self {
        case .rsa: "rsa"
        case .ec: "ec"
        case .ed25519: "ed25519"
        case .ed448: "ed448"
        case .x25519: "x25519"
        case .x448: "x448"
        case .mlDSA(let s): s.name
        case .mlKEM(let s): s.name
        case .slhDSA(let s): s.name
        }
    }

    /// The NIST security category (1-5) of a post-quantum parameter set, as FIPS 203 / 204 / 205
    /// give it (ML-KEM-512/768/1024: 1/3/5; ML-DSA-44/65/87: 2/3/5; SLH-DSA-*-128/192/256: 1/3/5):
    /// what a size means for these keys, which have no modulus or field size. nil for the others.
    public var securityCategory: Int? {
        switch self {
        case .mlDSA(let s): [2, 3, 5][Int(s.rawValue) - 1]
        case .mlKEM(let s): [1, 3, 5][Int(s.rawValue) - 1]
        case .slhDSA(let s): [1, 3, 5][(Int(s.rawValue) - 1) / 4]
        default: nil
        }
    }

    /// ML-DSA, ML-KEM or SLH-DSA.
    public var isPostQuantum: Bool {
        switch self {
        case .mlDSA, .mlKEM, .slhDSA: true
        default: false
        }
    }

    /// The OpenSSL algorithm name of a post-quantum type (nil for the others).
    public var postQuantumName: String? {
        switch self {
        case .mlDSA(let s): s.name
        case .mlKEM(let s): s.name
        case .slhDSA(let s): s.name
        default: nil
        }
    }

    /// Every post-quantum type, ML-DSA, then ML-KEM, then SLH-DSA.
    public static var allPostQuantum: [KeyType] {
        MLDSAParameterSet.allCases.map { .mlDSA($0) } + MLKEMParameterSet.allCases.map { .mlKEM($0) }
            + SLHDSAParameterSet.allCases.map { .slhDSA($0) }
    }

    /// A post-quantum type by its FIPS / OpenSSL name, case-insensitive ("ml-dsa-65").
    public init?(postQuantumName name: String) {
        guard let t = Self.allPostQuantum.first(where: { $0.postQuantumName?.lowercased() == name.lowercased() }) else {
            return nil
        }
        self = t
    }
}

/// Mechanism-level signature choices; each maps to one PKCS #11 mechanism family.
public enum SignatureAlgorithm: Sendable, Hashable {
    /// nil: the input is already a DigestInfo (CKM_RSA_PKCS).
    case rsaPKCS1(DigestAlgorithm?)
    case rsaPSS(DigestAlgorithm, mgf1: DigestAlgorithm, saltLength: Int)
    /// CKM_RSA_X_509: the bare RSA operation; short input is left-padded with zeros.
    case rsaRaw
    /// nil: the input is the digest. Signatures are raw r||s (the PKCS #11 form).
    case ecdsa(DigestAlgorithm?)
    case ed25519
    /// Pure Ed448 (RFC 8032 §5.2) with the empty context: what OpenSSL 3.0 signs.
    case ed448
    /// Ed25519ctx, Ed25519ph, Ed448 with a context, Ed448ph (OpenSSL ≥ 3.2; EdDSAInstances.swift).
    case eddsa(EdDSAInstance)
    /// Pure ML-DSA (FIPS 204 ML-DSA.Sign), empty context, hedged: what X.509 and CSRs use.
    /// Contexts, the deterministic variant and HashML-DSA are on `MLDSAKey`.
    case mlDSA
    /// Pure SLH-DSA (FIPS 205 slh_sign), empty context, hedged; the rest is on `SLHDSAKey`.
    case slhDSA
}

public enum RSAPadding: Sendable, Equatable {
    case pkcs1
    case oaep(DigestAlgorithm, mgf1: DigestAlgorithm, label: [UInt8])
    /// CKM_RSA_X_509: no padding; input is left-padded with zeros to the modulus size.
    case raw
}

/// Big-endian CRT components, for CKA_PRIVATE_EXPONENT and friends when a
/// key is extractable.
public struct RSAPrivateComponents: Sendable, Equatable {
    public var modulus: [UInt8]
    public var publicExponent: [UInt8]
    public var d: [UInt8]
    public var p: [UInt8]
    public var q: [UInt8]
    public var dp: [UInt8]
    public var dq: [UInt8]
    public var qinv: [UInt8]
}
