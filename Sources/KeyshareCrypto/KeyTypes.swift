import COpenSSL

/// The key families keyshare holds. `.ec` is every short-Weierstrass curve
/// of `ECCurve`; the RFC 8032 Edwards (EdDSA) and RFC 7748 Montgomery (ECDH)
/// curves are each their own type, as OpenSSL and PKCS #11 keep them apart
/// (CKK_EC_EDWARDS, CKK_EC_MONTGOMERY); `ECXCurve` describes them.
public enum KeyType: Sendable, Equatable { case rsa, ec, ed25519, ed448, x25519, x448 }

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
