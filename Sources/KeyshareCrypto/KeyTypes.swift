import COpenSSL

public enum KeyType: Sendable, Equatable { case rsa, ec, ed25519 }

/// The NIST curves PKCS #11 tokens and the key-sharing spec deal in. Raw
/// values are the names OpenSSL 3 accepts as group names.
public enum ECCurve: String, Sendable, CaseIterable {
    case p256 = "P-256", p384 = "P-384", p521 = "P-521"

    /// DER of the named-curve OID: CKA_EC_PARAMS.
    public var paramsDER: [UInt8] {
        switch self {
        case .p256: [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        case .p384: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]
        case .p521: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x23]
        }
    }

    public init?(paramsDER: [UInt8]) {
        guard let c = ECCurve.allCases.first(where: { $0.paramsDER == paramsDER }) else { return nil }
        self = c
    }

    public var bits: Int {
        switch self {
        case .p256: 256
        case .p384: 384
        case .p521: 521
        }
    }

    /// Bytes of one coordinate or scalar: the width of each half of a raw
    /// r||s signature and of X and Y in a point.
    public var byteSize: Int { (bits + 7) / 8 }

    /// The OpenSSL group name as reported by an EVP_PKEY.
    init?(groupName: String) {
        switch groupName {
        case "prime256v1", "P-256", "secp256r1": self = .p256
        case "secp384r1", "P-384": self = .p384
        case "secp521r1", "P-521": self = .p521
        default: return nil
        }
    }

    /// Accepts the point either raw (04||X||Y, as in ECDH parameters) or
    /// wrapped in a DER OCTET STRING (as CKA_EC_POINT). The lengths never
    /// collide: a wrapped point is always 2-3 bytes longer than a raw one.
    func rawPoint(_ point: [UInt8]) throws -> [UInt8] {
        let rawLen = 1 + 2 * byteSize
        if point.count == rawLen, point.first == 0x04 { return point }
        if point.count == 1 + byteSize, point.first == 0x02 || point.first == 0x03 { return point }
        if point.count > 2, point[0] == 0x04 {
            var i = 1
            var len = 0
            if point[1] < 0x80 {
                len = Int(point[1]); i = 2
            } else if point[1] == 0x81, point.count > 2 {
                len = Int(point[2]); i = 3
            } else if point[1] == 0x82, point.count > 3 {
                len = Int(point[2]) << 8 | Int(point[3]); i = 4
            }
            if len > 0, i + len == point.count { return Array(point[i...]) }
        }
        throw CryptoError(.invalidInput, "EC point", reason: "not an \(rawValue) point (raw or DER OCTET STRING)")
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
