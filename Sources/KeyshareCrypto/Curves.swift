import COpenSSL

/// The short-Weierstrass curves keyshare holds EC keys on (KeyType.ec):
/// the NIST prime curves PKCS #11 tokens and the key-sharing spec deal in,
/// the legacy P-192 and P-224 some older deployments still carry, secp256k1,
/// and the RFC 5639 brainpool "r1" curves. Raw values are the names OpenSSL 3
/// accepts as group names. Every one of them has cofactor 1, so plain and
/// cofactor ECDH agree on all (CKM_ECDH1_COFACTOR_DERIVE, Derive.swift), and
/// every point on the curve but the identity has the prime group order.
public enum ECCurve: String, Sendable, CaseIterable {
    case p256 = "P-256", p384 = "P-384", p521 = "P-521"
    case p192 = "P-192", p224 = "P-224"
    case secp256k1
    case brainpoolP256r1, brainpoolP384r1, brainpoolP512r1

    /// DER of the named-curve OID: CKA_EC_PARAMS.
    public var paramsDER: [UInt8] {
        switch self {
        case .p256: [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        case .p384: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]
        case .p521: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x23]
        // 1.2.840.10045.3.1.1 (prime192v1) and 1.3.132.0.33 (secp224r1).
        case .p192: [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x01]
        case .p224: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x21]
        // 1.3.132.0.10.
        case .secp256k1: [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x0A]
        // 1.3.36.3.3.2.8.1.1.{7,11,13} (RFC 5639 §4.1).
        case .brainpoolP256r1: [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x07]
        case .brainpoolP384r1: [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0B]
        case .brainpoolP512r1: [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0D]
        }
    }

    /// The curve CKA_EC_PARAMS names: a named-curve OID, or explicit
    /// ECParameters (X9.62 §6.4, a SEQUENCE) that OpenSSL recognises as
    /// exactly one of these curves. SoftHSM2 and python-pkcs11's tests take
    /// explicit parameters; a set that matches no named curve stays refused
    /// (no arbitrary-curve keys: their validation is the classic trap).
    public init?(paramsDER: [UInt8]) {
        if let c = ECCurve.allCases.first(where: { $0.paramsDER == paramsDER }) {
            self = c
        } else if paramsDER.first == 0x30, let c = ECCurve.namedCurve(explicitParameters: paramsDER) {
            self = c
        } else {
            return nil
        }
    }

    /// The named curve explicit ECParameters denote (EC_GROUP_check_named_curve
    /// compares every field, cofactor and seed aside), nil for any other curve,
    /// bad DER or trailing bytes.
    static func namedCurve(explicitParameters der: [UInt8]) -> ECCurve? {
        defer { CryptoError.clearQueue() }
        return der.withUnsafeBufferPointer { buf -> ECCurve? in
            guard let base = buf.baseAddress else { return nil }
            var p: UnsafePointer<UInt8>? = base
            guard let group = d2i_ECPKParameters(nil, &p, buf.count) else { return nil }
            defer { EC_GROUP_free(group) }
            guard p == base + buf.count else { return nil }
            let nid = EC_GROUP_check_named_curve(group, 0, nil)
            guard nid > 0, let sn = OBJ_nid2sn(nid) else { return nil }
            return ECCurve(groupName: String(cString: sn))
        }
    }

    public var bits: Int {
        switch self {
        case .p192: 192
        case .p224: 224
        case .p256, .secp256k1, .brainpoolP256r1: 256
        case .p384, .brainpoolP384r1: 384
        case .brainpoolP512r1: 512
        case .p521: 521
        }
    }

    /// Bytes of one coordinate or scalar: the width of each half of a raw
    /// r||s signature and of X and Y in a point.
    public var byteSize: Int { (bits + 7) / 8 }

    /// The OpenSSL group name as reported by an EVP_PKEY (its short name),
    /// or a NIST alias.
    init?(groupName: String) {
        switch groupName {
        case "prime256v1", "P-256", "secp256r1": self = .p256
        case "secp384r1", "P-384": self = .p384
        case "secp521r1", "P-521": self = .p521
        case "prime192v1", "P-192", "secp192r1": self = .p192
        case "secp224r1", "P-224": self = .p224
        case "secp256k1": self = .secp256k1
        case "brainpoolP256r1": self = .brainpoolP256r1
        case "brainpoolP384r1": self = .brainpoolP384r1
        case "brainpoolP512r1": self = .brainpoolP512r1
        default: return nil
        }
    }

    var nid: Int32 {
        switch self {
        case .p256: NID_X9_62_prime256v1
        case .p384: NID_secp384r1
        case .p521: NID_secp521r1
        case .p192: NID_X9_62_prime192v1
        case .p224: NID_secp224r1
        case .secp256k1: NID_secp256k1
        case .brainpoolP256r1: NID_brainpoolP256r1
        case .brainpoolP384r1: NID_brainpoolP384r1
        case .brainpoolP512r1: NID_brainpoolP512r1
        }
    }

    /// Accepts the point either raw (04||X||Y, as in ECDH parameters) or
    /// wrapped in a DER OCTET STRING (as CKA_EC_POINT). The lengths never
    /// collide: a wrapped point is always 2-3 bytes longer than a raw one.
    func rawPoint(_ point: [UInt8]) throws -> [UInt8] {
        let rawLen = 1 + 2 * byteSize
        if point.count == rawLen, point.first == 0x04 { return point }
        if point.count == 1 + byteSize, point.first == 0x02 || point.first == 0x03 { return point }
        if let inner = DEROctetString.contents(point), inner.count == rawLen || inner.count == 1 + byteSize {
            return inner
        }
        throw CryptoError(.invalidInput, "EC point", reason: "not an \(rawValue) point (raw or DER OCTET STRING)")
    }
}

/// The curves of RFC 7748 (X25519, X448: key agreement) and RFC 8032
/// (Ed25519, Ed448: signatures), OpenSSL's "ECX" family. Their keys are
/// fixed-length little-endian strings, not points and scalars: CKA_VALUE is
/// the raw private key, CKA_EC_POINT the raw public key (in a DER OCTET
/// STRING, as OpenSC writes and reads it; raw is accepted on input).
public enum ECXCurve: String, Sendable, CaseIterable {
    case ed25519 = "ED25519", ed448 = "ED448", x25519 = "X25519", x448 = "X448"

    /// DER of the RFC 8410 OID (1.3.101.112, .113, .110, .111): CKA_EC_PARAMS.
    public var paramsDER: [UInt8] {
        switch self {
        case .ed25519: [0x06, 0x03, 0x2B, 0x65, 0x70]
        case .ed448: [0x06, 0x03, 0x2B, 0x65, 0x71]
        case .x25519: [0x06, 0x03, 0x2B, 0x65, 0x6E]
        case .x448: [0x06, 0x03, 0x2B, 0x65, 0x6F]
        }
    }

    public init?(paramsDER: [UInt8]) {
        guard let c = ECXCurve.allCases.first(where: { $0.paramsDER == paramsDER }) else { return nil }
        self = c
    }

    public init?(keyType: KeyType) {
        switch keyType {
        case .ed25519: self = .ed25519
        case .ed448: self = .ed448
        case .x25519: self = .x25519
        case .x448: self = .x448
        case .rsa, .ec, .mlDSA, .mlKEM, .slhDSA: return nil
        }
    }

    public var keyType: KeyType {
        switch self {
        case .ed25519: .ed25519
        case .ed448: .ed448
        case .x25519: .x25519
        case .x448: .x448
        }
    }

    /// True for the signature curves (CKK_EC_EDWARDS), false for the key
    /// agreement ones (CKK_EC_MONTGOMERY).
    public var isEdwards: Bool { self == .ed25519 || self == .ed448 }

    /// Bytes of a raw public or private key (RFC 8032 §5.2.5: Ed448 keys are 57 bytes).
    public var keyLength: Int {
        switch self {
        case .ed25519, .x25519: 32
        case .ed448: 57
        case .x448: 56
        }
    }

    /// The size C_GetMechanismInfo counts and CKA_*-based tools print: the
    /// key length in bits (Ed25519 256, Ed448 456, X25519 256, X448 448),
    /// as Kryoptic reports them.
    public var bits: Int { keyLength * 8 }

    /// Signature bytes (Ed25519 64, Ed448 114); 0 for the Montgomery curves.
    public var signatureLength: Int {
        switch self {
        case .ed25519: 64
        case .ed448: 114
        case .x25519, .x448: 0
        }
    }

    /// The key type's name for the `_ex` constructors that take one (OpenSSL's, as EVP_PKEY_get0_type_name).
    var opensslName: String {
        switch self {
        case .ed25519: "ED25519"
        case .ed448: "ED448"
        case .x25519: "X25519"
        case .x448: "X448"
        }
    }

    var pkeyID: Int32 {
        switch self {
        case .ed25519: EVP_PKEY_ED25519
        case .ed448: EVP_PKEY_ED448
        case .x25519: EVP_PKEY_X25519
        case .x448: EVP_PKEY_X448
        }
    }

    /// A raw key (`keyLength` bytes) or the same wrapped in a DER OCTET
    /// STRING (CKA_EC_POINT, ECDH public data); nil for anything else.
    public func rawKey(_ bytes: [UInt8]) -> [UInt8]? {
        if bytes.count == keyLength { return bytes }
        if let inner = DEROctetString.contents(bytes), inner.count == keyLength { return inner }
        return nil
    }

    /// The DER OCTET STRING form (CKA_EC_POINT) of a raw key.
    public static func octetString(_ raw: [UInt8]) -> [UInt8] { DEROctetString.encode(raw) }
}

/// The one DER type CKA_EC_POINT is written in.
enum DEROctetString {
    static func encode(_ content: [UInt8]) -> [UInt8] {
        let n = content.count
        if n < 0x80 { return [0x04, UInt8(n)] + content }
        if n < 0x100 { return [0x04, 0x81, UInt8(n)] + content }
        return [0x04, 0x82, UInt8(n >> 8), UInt8(n & 0xFF)] + content
    }

    /// The contents of a definite-length OCTET STRING that spans `bytes`
    /// exactly (minimal or not), or nil.
    static func contents(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count > 2, bytes[0] == 0x04 else { return nil }
        var i = 1
        var len = 0
        if bytes[1] < 0x80 {
            len = Int(bytes[1]); i = 2
        } else if bytes[1] == 0x81 {
            len = Int(bytes[2]); i = 3
        } else if bytes[1] == 0x82, bytes.count > 3 {
            len = Int(bytes[2]) << 8 | Int(bytes[3]); i = 4
        } else {
            return nil
        }
        guard len > 0, i + len == bytes.count else { return nil }
        return Array(bytes[i...])
    }
}
