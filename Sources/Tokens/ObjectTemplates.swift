import Keychain
import KeyshareCrypto

/// The PKCS #11 attribute sets of certificates and keys. Both the CLI (via
/// TokenManager) and the PKCS #11 module build objects here, so an object
/// looks the same to pkcs11-tool whichever of them made it.
public enum ObjectTemplates {
    /// CK_UNAVAILABLE_INFORMATION, for CKA_KEY_GEN_MECHANISM of imported keys.
    public static let unavailable: UInt = ~0

    /// DER OID 1.3.101.112, the CKA_EC_PARAMS of Ed25519 keys (PKCS #11 3.0).
    public static let ed25519Params: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]

    public static func certificate(_ c: Certificate, label: String, id: [UInt8],
                                   category: UInt = CertificateCategory.unspecified) -> AttributeMap {
        var a: AttributeMap = [
            CKA.class: AttributeCoding.ulong(CKO.certificate),
            CKA.token: AttributeCoding.bool(true),
            CKA.private: AttributeCoding.bool(false),
            CKA.modifiable: AttributeCoding.bool(true),
            CKA.label: AttributeCoding.string(label),
            CKA.id: id,
            CKA.certificateType: AttributeCoding.ulong(CKC.x509),
            CKA.trusted: AttributeCoding.bool(false),
            CKA.certificateCategory: AttributeCoding.ulong(category),
            CKA.subject: c.subjectDER,
            CKA.issuer: c.issuerDER,
            CKA.serialNumber: c.serialNumberDER,
            CKA.value: c.der,
            CKA.checkValue: Array(c.sha1Fingerprint.prefix(3)),
            CKA.startDate: ckDate(c.notBefore),
            CKA.endDate: ckDate(c.notAfter),
        ]
        if let spki = try? c.publicKey.spkiDER() { a[CKA.publicKeyInfo] = spki }
        return a
    }

    /// Usage flags follow the key type, narrowed by the certificate's Key
    /// Usage when there is one (an RSA key certified for signing only does
    /// not advertise CKA_DECRYPT).
    public static func privateKey(_ k: PrivateKey, label: String, id: [UInt8], extractable: Bool, local: Bool,
                                  sensitive: Bool = true, usage: KeyUsage? = nil, subject: [UInt8]? = nil) throws -> AttributeMap {
        let f = flags(k.keyType, usage)
        var a: AttributeMap = [
            CKA.class: AttributeCoding.ulong(CKO.privateKey),
            CKA.token: AttributeCoding.bool(true),
            CKA.private: AttributeCoding.bool(true),
            CKA.modifiable: AttributeCoding.bool(true),
            CKA.label: AttributeCoding.string(label),
            CKA.id: id,
            CKA.keyType: AttributeCoding.ulong(keyType(k.keyType)),
            CKA.sensitive: AttributeCoding.bool(sensitive),
            CKA.extractable: AttributeCoding.bool(extractable),
            CKA.alwaysSensitive: AttributeCoding.bool(local && sensitive),
            CKA.neverExtractable: AttributeCoding.bool(local && !extractable),
            CKA.local: AttributeCoding.bool(local),
            CKA.keyGenMechanism: AttributeCoding.ulong(local ? mechanism(k.keyType) : unavailable),
            CKA.alwaysAuthenticate: AttributeCoding.bool(false),
            CKA.wrapWithTrusted: AttributeCoding.bool(false),
            CKA.sign: AttributeCoding.bool(f.sign),
            CKA.signRecover: AttributeCoding.bool(false),
            CKA.decrypt: AttributeCoding.bool(f.decrypt),
            CKA.unwrap: AttributeCoding.bool(f.decrypt),
            CKA.derive: AttributeCoding.bool(f.derive),
            CKA.subject: subject ?? [],
            CKA.publicKeyInfo: try k.publicKey.spkiDER(),
            CKA.keysharePKCS8: try k.pkcs8DER(),
        ]
        a.merge(try publicParts(k.publicKey, includePoint: false)) { _, new in new }
        if case .mlKEM = k.keyType { a[CKA.decapsulate] = AttributeCoding.bool(f.kem) }
        return a
    }

    public static func publicKey(_ k: PublicKey, label: String, id: [UInt8], local: Bool,
                                 usage: KeyUsage? = nil, subject: [UInt8]? = nil) throws -> AttributeMap {
        let f = flags(k.keyType, usage)
        var a: AttributeMap = [
            CKA.class: AttributeCoding.ulong(CKO.publicKey),
            CKA.token: AttributeCoding.bool(true),
            CKA.private: AttributeCoding.bool(false),
            CKA.modifiable: AttributeCoding.bool(true),
            CKA.label: AttributeCoding.string(label),
            CKA.id: id,
            CKA.keyType: AttributeCoding.ulong(keyType(k.keyType)),
            CKA.local: AttributeCoding.bool(local),
            CKA.keyGenMechanism: AttributeCoding.ulong(local ? mechanism(k.keyType) : unavailable),
            CKA.trusted: AttributeCoding.bool(false),
            CKA.verify: AttributeCoding.bool(f.sign),
            CKA.verifyRecover: AttributeCoding.bool(false),
            CKA.encrypt: AttributeCoding.bool(f.decrypt),
            CKA.wrap: AttributeCoding.bool(f.decrypt),
            CKA.derive: AttributeCoding.bool(f.derive),
            CKA.subject: subject ?? [],
            CKA.publicKeyInfo: try k.spkiDER(),
        ]
        a.merge(try publicParts(k, includePoint: true)) { _, new in new }
        if case .mlKEM = k.keyType { a[CKA.encapsulate] = AttributeCoding.bool(f.kem) }
        return a
    }

    public static func keyType(_ t: KeyType) -> UInt {
        switch t {
        case .rsa: CKK.rsa
        case .ec: CKK.ec
        case .ed25519, .ed448: CKK.ecEdwards
        case .x25519, .x448: CKK.ecMontgomery
        case .mlDSA: CKK.mlDSA
        case .mlKEM: CKK.mlKEM
        case .slhDSA: CKK.slhDSA
        }
    }

    public static func mechanism(_ t: KeyType) -> UInt {
        switch t {
        case .rsa: CKM.rsaPKCSKeyPairGen
        case .ec: CKM.ecKeyPairGen
        case .ed25519, .ed448: CKM.ecEdwardsKeyPairGen
        case .x25519, .x448: CKM.ecMontgomeryKeyPairGen
        case .mlDSA: CKM.mlDSAKeyPairGen
        case .mlKEM: CKM.mlKEMKeyPairGen
        case .slhDSA: CKM.slhDSAKeyPairGen
        }
    }

    /// The post-quantum key type of CKK_ML_DSA / CKK_ML_KEM / CKK_SLH_DSA with CKA_PARAMETER_SET
    /// `set`; nil for any other pair (an unknown set included).
    public static func postQuantumType(ckk: UInt, parameterSet set: UInt) -> KeyType? {
        switch ckk {
        case CKK.mlDSA: MLDSAParameterSet(rawValue: set).map { .mlDSA($0) }
        case CKK.mlKEM: MLKEMParameterSet(rawValue: set).map { .mlKEM($0) }
        case CKK.slhDSA: SLHDSAParameterSet(rawValue: set).map { .slhDSA($0) }
        default: nil
        }
    }

    /// CKA_PARAMETER_SET of a post-quantum type, nil for the others.
    public static func parameterSet(_ t: KeyType) -> UInt? {
        switch t {
        case .mlDSA(let s): s.rawValue
        case .mlKEM(let s): s.rawValue
        case .slhDSA(let s): s.rawValue
        default: nil
        }
    }

    /// `kem`: CKA_ENCAPSULATE / CKA_DECAPSULATE of an ML-KEM key (keyEncipherment in a certificate,
    /// RFC 9935 §5); false for every other type.
    public static func flags(_ t: KeyType, _ usage: KeyUsage?) -> (sign: Bool, decrypt: Bool, derive: Bool, kem: Bool) {
        let u = usage ?? [.digitalSignature, .nonRepudiation, .keyEncipherment, .dataEncipherment, .keyAgreement]
        let sign = !u.isDisjoint(with: [.digitalSignature, .nonRepudiation, .keyCertSign, .cRLSign])
        switch t {
        case .rsa: return (sign, !u.isDisjoint(with: [.keyEncipherment, .dataEncipherment]), false, false)
        case .ec: return (sign, false, u.contains(.keyAgreement), false)
        case .ed25519, .ed448, .mlDSA, .slhDSA: return (sign, false, false, false)
        case .x25519, .x448: return (false, false, u.contains(.keyAgreement), false)
        case .mlKEM: return (false, false, false, u.contains(.keyEncipherment))
        }
    }

    static func publicParts(_ k: PublicKey, includePoint: Bool) throws -> AttributeMap {
        var a: AttributeMap = [:]
        switch k.keyType {
        case .rsa:
            guard let n = k.rsaModulus, let e = k.rsaPublicExponent else {
                throw CryptoError(.invalidInput, "RSA key attributes", reason: "modulus or exponent unavailable")
            }
            a[CKA.modulus] = n
            a[CKA.publicExponent] = e
            a[CKA.modulusBits] = AttributeCoding.ulong(UInt(k.bits))
        case .ec:
            guard let curve = k.curve, let point = k.ecPointDER else {
                throw CryptoError(.invalidInput, "EC key attributes", reason: "curve or point unavailable")
            }
            a[CKA.ecParams] = curve.paramsDER
            if includePoint { a[CKA.ecPoint] = point }
        case .ed25519, .ed448, .x25519, .x448:
            // CKA_EC_POINT as OpenSC writes and reads it: the raw key in a DER OCTET STRING.
            guard let curve = k.ecxCurve, let raw = k.ecxRaw else {
                throw CryptoError(.invalidInput, "EdDSA/XDH key attributes", reason: "raw public key unavailable")
            }
            a[CKA.ecParams] = curve.paramsDER
            if includePoint { a[CKA.ecPoint] = ECXCurve.octetString(raw) }
        case .mlDSA, .mlKEM, .slhDSA:
            // PKCS #11 3.2: CKA_PARAMETER_SET on both halves, the raw public key as the public key's CKA_VALUE.
            guard let set = parameterSet(k.keyType), let raw = k.postQuantumRaw else {
                throw CryptoError(.invalidInput, "\(k.keyType) key attributes", reason: "raw public key unavailable")
            }
            a[CKA.parameterSet] = AttributeCoding.ulong(set)
            if includePoint { a[CKA.value] = raw }
        }
        return a
    }

    /// CK_DATE: "YYYYMMDD" as 8 ASCII bytes (UTC).
    public static func ckDate(_ unixSeconds: Int64) -> [UInt8] {
        // Howard Hinnant's days-to-civil.
        let z = Int64((Double(unixSeconds) / 86_400).rounded(.down)) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return Array((pad(y, 4) + pad(m, 2) + pad(d, 2)).utf8)
    }

    /// Uppercase hex, the form of labels (SHA-256 of the certificate DER).
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
