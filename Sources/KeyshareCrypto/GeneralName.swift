import COpenSSL

/// The ExtendedKeyUsage purposes keyshare names (RFC 5280 4.2.1.12), from
/// OpenSSL's XKU_* flags; others are ignored.
public struct ExtendedKeyUsage: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let serverAuth = ExtendedKeyUsage(rawValue: 1 << 0)
    public static let clientAuth = ExtendedKeyUsage(rawValue: 1 << 1)
    public static let emailProtection = ExtendedKeyUsage(rawValue: 1 << 2)
    public static let codeSigning = ExtendedKeyUsage(rawValue: 1 << 3)
    public static let timeStamping = ExtendedKeyUsage(rawValue: 1 << 4)
    public static let ocspSigning = ExtendedKeyUsage(rawValue: 1 << 5)
    public static let any = ExtendedKeyUsage(rawValue: 1 << 6)

    init(openssl xku: UInt32) {
        var u: ExtendedKeyUsage = []
        let map: [(UInt32, ExtendedKeyUsage)] = [
            (UInt32(XKU_SSL_SERVER), .serverAuth), (UInt32(XKU_SSL_CLIENT), .clientAuth), (UInt32(XKU_SMIME), .emailProtection),
            (UInt32(XKU_CODE_SIGN), .codeSigning), (UInt32(XKU_TIMESTAMP), .timeStamping), (UInt32(XKU_OCSP_SIGN), .ocspSigning),
            (UInt32(XKU_ANYEKU), .any),
        ]
        for (bit, usage) in map where xku & bit != 0 { u.insert(usage) }
        self = u
    }
}

/// X.509 KeyUsage bits, raw values in ASN.1 bit order (bit 0 = digitalSignature).
public struct KeyUsage: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let digitalSignature = KeyUsage(rawValue: 1 << 0)
    public static let nonRepudiation = KeyUsage(rawValue: 1 << 1)
    public static let keyEncipherment = KeyUsage(rawValue: 1 << 2)
    public static let dataEncipherment = KeyUsage(rawValue: 1 << 3)
    public static let keyAgreement = KeyUsage(rawValue: 1 << 4)
    public static let keyCertSign = KeyUsage(rawValue: 1 << 5)
    public static let cRLSign = KeyUsage(rawValue: 1 << 6)
    public static let encipherOnly = KeyUsage(rawValue: 1 << 7)
    public static let decipherOnly = KeyUsage(rawValue: 1 << 8)

    /// From OpenSSL's KU_* flags (a different bit layout).
    init(openssl ku: UInt32) {
        var u: KeyUsage = []
        let map: [(UInt32, KeyUsage)] = [
            (UInt32(KU_DIGITAL_SIGNATURE), .digitalSignature), (UInt32(KU_NON_REPUDIATION), .nonRepudiation),
            (UInt32(KU_KEY_ENCIPHERMENT), .keyEncipherment), (UInt32(KU_DATA_ENCIPHERMENT), .dataEncipherment),
            (UInt32(KU_KEY_AGREEMENT), .keyAgreement), (UInt32(KU_KEY_CERT_SIGN), .keyCertSign),
            (UInt32(KU_CRL_SIGN), .cRLSign), (UInt32(KU_ENCIPHER_ONLY), .encipherOnly),
            (UInt32(KU_DECIPHER_ONLY), .decipherOnly),
        ]
        for (bit, usage) in map where ku & bit != 0 { u.insert(usage) }
        self = u
    }
}

/// One SubjectAltName entry. A UPN (Microsoft's otherName
/// 1.3.6.1.4.1.311.20.2.3 with a UTF8String) gets its own case because the
/// key-sharing category rules turn on it; other otherNames (FASC-N, ...)
/// keep only their OID.
public enum GeneralName: Sendable, Equatable, Hashable {
    case rfc822(String)
    case dns(String)
    case uri(String)
    case upn(String)
    case otherName(oid: String)
    case ip([UInt8])
    case directory([UInt8])
    case other

    public static let upnOID = "1.3.6.1.4.1.311.20.2.3"

    static func from(_ gn: UnsafeMutablePointer<GENERAL_NAME>) -> GeneralName {
        let d = gn.pointee.d
        switch gn.pointee.type {
        case GEN_EMAIL: return .rfc822(OSSL.asn1String(d.rfc822Name))
        case GEN_DNS: return .dns(OSSL.asn1String(d.dNSName))
        case GEN_URI: return .uri(OSSL.asn1String(d.uniformResourceIdentifier))
        case GEN_IPADD: return .ip(OSSL.asn1StringBytes(d.iPAddress))
        case GEN_DIRNAME:
            guard let name = d.directoryName,
                  let der = try? OSSL.i2d("directory name", { i2d_X509_NAME(name, $0) }) else { return .other }
            return .directory(der)
        case GEN_OTHERNAME:
            guard let on = d.otherName else { return .other }
            let oid = OSSL.objectText(on.pointee.type_id)
            if oid == upnOID, let value = on.pointee.value, value.pointee.type == V_ASN1_UTF8STRING {
                return .upn(OSSL.asn1String(value.pointee.value.utf8string))
            }
            return .otherName(oid: oid)
        default:
            return .other
        }
    }
}
