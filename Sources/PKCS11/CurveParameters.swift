import CPKCS11
import KeyshareCrypto

/// CKA_EC_PARAMS to a curve, for C_GenerateKeyPair and C_CreateObject.
/// PKCS #11 3.0 §2.3.3 (ECParameters) allows the namedCurve OID, the
/// implicitlyCA NULL and explicit ecParameters, and for Edwards and
/// Montgomery keys (§2.3.5, §2.3.7) additionally a PrintableString curve
/// name. keyshare takes OIDs and names (OpenSC's pkcs11-tool sends names for
/// Edwards curves, some callers for the others); explicit parameters and
/// implicitlyCA are CKR_CURVE_NOT_SUPPORTED, as in Kryoptic and SoftHSM2.
enum CurveParameters {
    /// A DER PrintableString (or UTF8String) curve name, lowercased, or nil.
    static func name(_ p: [UInt8]) -> String? {
        guard p.count >= 2, p[0] == 0x13 || p[0] == 0x0C, Int(p[1]) == p.count - 2 else { return nil }
        return String(decoding: p[2...], as: UTF8.self).lowercased()
    }

    /// Names for the short-Weierstrass curves: OpenSSL's, SEC 2's, the NIST
    /// ones and RFC 5639's, lowercased.
    static let ecNames: [String: ECCurve] = [
        "prime256v1": .p256, "secp256r1": .p256, "p-256": .p256, "nistp256": .p256,
        "secp384r1": .p384, "p-384": .p384, "nistp384": .p384,
        "secp521r1": .p521, "p-521": .p521, "nistp521": .p521,
        "prime192v1": .p192, "secp192r1": .p192, "p-192": .p192, "nistp192": .p192,
        "secp224r1": .p224, "p-224": .p224, "nistp224": .p224,
        "secp256k1": .secp256k1,
        "brainpoolp256r1": .brainpoolP256r1, "brainpoolp384r1": .brainpoolP384r1, "brainpoolp512r1": .brainpoolP512r1,
    ]

    /// RFC 7748 / RFC 8410 names.
    static let ecxNames: [String: ECXCurve] = [
        "edwards25519": .ed25519, "ed25519": .ed25519, "edwards448": .ed448, "ed448": .ed448,
        "curve25519": .x25519, "x25519": .x25519, "curve448": .x448, "x448": .x448,
    ]

    /// 1.3.6.1.4.1.11591.15.1, the pre-RFC 8410 Ed25519 OID some OpenSC versions send.
    static let ed25519LegacyOID: [UInt8] = [0x06, 0x09, 0x2B, 0x06, 0x01, 0x04, 0x01, 0xDA, 0x47, 0x0F, 0x01]
    /// 1.3.6.1.4.1.3029.1.5.1, the GnuPG Curve25519 OID some tools send for X25519.
    static let x25519LegacyOID: [UInt8] = [0x06, 0x0A, 0x2B, 0x06, 0x01, 0x04, 0x01, 0x97, 0x55, 0x01, 0x05, 0x01]

    /// A CKK_EC curve.
    static func weierstrass(_ p: [UInt8]) throws -> ECCurve {
        if let c = ECCurve(paramsDER: p) { return c }
        if let n = name(p), let c = ecNames[n] { return c }
        throw PKCS11Error(CKR_CURVE_NOT_SUPPORTED)
    }

    /// What OpenSC 0.23's pkcs11-tool sends for `--key-type EC:curve25519`:
    /// a PrintableString whose length byte says 11 for the 10 bytes of
    /// "curve25519" (a constant in its curve table, corrected in later
    /// OpenSC). Accepted as that exact byte string only, so Debian 12's
    /// pkcs11-tool can make X25519 keys; any other malformed DER is refused.
    static let openSC023Curve25519: [UInt8] = [0x13, 0x0B] + Array("curve25519".utf8)

    /// A CKK_EC_EDWARDS (`edwards` true) or CKK_EC_MONTGOMERY curve.
    static func ecx(_ p: [UInt8], edwards: Bool) throws -> ECXCurve {
        var c = ECXCurve(paramsDER: p) ?? name(p).flatMap { ecxNames[$0] }
        if p == ed25519LegacyOID { c = .ed25519 }
        if p == x25519LegacyOID || p == openSC023Curve25519 { c = .x25519 }
        guard let c, c.isEdwards == edwards else { throw PKCS11Error(CKR_CURVE_NOT_SUPPORTED) }
        return c
    }
}
