import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// A parsed X.509 certificate. Every field is read once at init, so the
/// value is a plain Sendable struct and no OpenSSL object outlives init.
public struct Certificate: Sendable, Equatable, Hashable {
    public let der: [UInt8]
    public let subjectDER: [UInt8]
    public let issuerDER: [UInt8]
    /// The full DER INTEGER TLV, as CKA_SERIAL_NUMBER wants it.
    public let serialNumberDER: [UInt8]
    /// Uppercase hex of the magnitude without the DER sign byte ("8E2F55A1"),
    /// as `openssl x509 -serial` prints it and display file names use it.
    public let serialHex: String
    /// Unix seconds, UTC.
    public let notBefore: Int64
    public let notAfter: Int64
    public let subject: String
    public let issuer: String
    /// The subject's emailAddress, else the first rfc822Name of the SAN.
    public let email: String?
    /// nil when the certificate has no KeyUsage extension (which matters: the
    /// category rules treat "absent" differently from "empty").
    public let keyUsage: KeyUsage?
    public let subjectAltNames: [GeneralName]
    /// nil when the certificate has no ExtendedKeyUsage extension.
    public let extendedKeyUsage: ExtendedKeyUsage?
    /// The subject's (last) commonName, UTF-8; nil when it has none.
    public let commonName: String?
    public let publicKey: PublicKey
    public let isCA: Bool
    public let subjectKeyIdentifier: [UInt8]?
    public let sha1Fingerprint: [UInt8]
    public let sha256Fingerprint: [UInt8]

    public static func == (a: Certificate, b: Certificate) -> Bool { a.der == b.der }
    public func hash(into h: inout Hasher) { h.combine(der) }

    public init(der: [UInt8]) throws {
        CryptoError.clearQueue()
        guard let (x, used) = OSSL.d2i(der, OSSL.decodeX509) else {
            throw CryptoError.openssl("certificate decode", kind: .invalidInput)
        }
        defer { X509_free(x) }
        // Bytes after the certificate are dropped so `der` (and the
        // fingerprints and labels made from it) is exactly what was parsed.
        try self.init(x509: x, der: used == der.count ? der : Array(der[0..<used]))
    }

    /// The first certificate in a PEM text.
    public init(pem: String) throws {
        guard let first = try Certificate.parseAll(pem: pem).first else {
            throw CryptoError(.invalidInput, "certificate PEM", reason: "no certificate found")
        }
        self = first
    }

    /// Every CERTIFICATE block of a PEM bundle, in order; other blocks
    /// (keys, CRLs) are skipped. Throws when there is none or one is broken.
    public static func parseAll(pem: String) throws -> [Certificate] {
        var certs: [Certificate] = []
        var rest = Substring(pem)
        let begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----"
        while let b = rest.textRange(of: begin), let e = rest[b.upperBound...].textRange(of: end) {
            let block = String(rest[b.lowerBound..<e.upperBound]) + "\n"
            rest = rest[e.upperBound...]
            CryptoError.clearQueue()
            let x = try OSSL.withReadBIO(Array(block.utf8), "certificate PEM") { bio -> OpaquePointer? in
                var x: OpaquePointer? = X509_new_ex(CryptoEngine.context, nil)
                guard x != nil else { return nil }
                return PEM_read_bio_X509(bio, &x, noPassphraseCallback, nil)
            }
            guard let x else { throw CryptoError.openssl("certificate PEM decode", kind: .invalidInput) }
            defer { X509_free(x) }
            let der = try OSSL.i2d("certificate encode") { i2d_X509(x, $0) }
            certs.append(try Certificate(x509: x, der: der))
        }
        guard !certs.isEmpty else {
            throw CryptoError(.invalidInput, "certificate PEM", reason: "no certificate found")
        }
        return certs
    }

    /// Reads every field from an OpenSSL X509 the caller keeps owning.
    init(x509 x: OpaquePointer, der: [UInt8]) throws {
        self.der = der
        guard let subj = X509_get_subject_name(x), let iss = X509_get_issuer_name(x),
              let serial = X509_get0_serialNumber(x) else {
            throw CryptoError(.invalidInput, "certificate", reason: "missing subject, issuer or serial")
        }
        subjectDER = try OSSL.i2d("subject encode") { i2d_X509_NAME(subj, $0) }
        issuerDER = try OSSL.i2d("issuer encode") { i2d_X509_NAME(iss, $0) }
        subject = try Certificate.oneLine(subj)
        issuer = try Certificate.oneLine(iss)
        serialNumberDER = try OSSL.i2d("serial encode") { i2d_ASN1_INTEGER(serial, $0) }
        let magnitude = OSSL.asn1StringBytes(serial)
        serialHex = magnitude.isEmpty ? "00" : OSSL.hex(magnitude)
        notBefore = try Certificate.unixTime(X509_get0_notBefore(x), "notBefore")
        notAfter = try Certificate.unixTime(X509_get0_notAfter(x), "notAfter")

        // Extension flags are computed (and cached, under OpenSSL's lock) once.
        let flags = X509_get_extension_flags(x)
        if X509_get_ext_by_NID(x, NID_key_usage, -1) >= 0 {
            keyUsage = flags & UInt32(EXFLAG_KUSAGE) != 0 ? KeyUsage(openssl: X509_get_key_usage(x)) : []
        } else {
            keyUsage = nil
        }
        isCA = flags & UInt32(EXFLAG_CA) != 0
        extendedKeyUsage = flags & UInt32(EXFLAG_XKUSAGE) != 0
            ? ExtendedKeyUsage(openssl: X509_get_extended_key_usage(x)) : nil
        commonName = Certificate.commonName(subj)
        subjectKeyIdentifier = X509_get0_subject_key_id(x).map { OSSL.asn1StringBytes($0) }
        subjectAltNames = Certificate.altNames(x)
        email = Certificate.lastEntry(subj, nid: NID_pkcs9_emailAddress)
            ?? subjectAltNames.lazy.compactMap { if case .rfc822(let m) = $0, !m.isEmpty { m } else { nil } }.first
        CryptoError.clearQueue()

        guard let pk = X509_get0_pubkey(x) else {
            throw CryptoError.openssl("certificate public key", kind: .unsupported)
        }
        publicKey = try PublicKey(spkiDER: PKeyInfo.spkiDER(pk))
        sha1Fingerprint = DigestAlgorithm.sha1.hash(der)
        sha256Fingerprint = DigestAlgorithm.sha256.hash(der)
    }

    /// Uppercase hex SHA-256 of the DER: the label key sharing gives an identity.
    public var sha256Hex: String { OSSL.hex(sha256Fingerprint) }

    private static func oneLine(_ name: OpaquePointer) throws -> String {
        let bytes = try OSSL.collectBIO("name print") { ks_X509_NAME_print_rfc2253($0, name) >= 0 }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The last CN entry (the most specific, as RFC 6125 readers take it) as UTF-8.
    private static func commonName(_ name: OpaquePointer) -> String? {
        var last: Int32 = -1, i: Int32 = -1
        while true {
            i = X509_NAME_get_index_by_NID(name, NID_commonName, i)
            if i < 0 { break }
            last = i
        }
        guard last >= 0, let entry = X509_NAME_get_entry(name, last), let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var out: UnsafeMutablePointer<UInt8>?
        let n = ASN1_STRING_to_UTF8(&out, data)
        guard n >= 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return String(decoding: UnsafeBufferPointer(start: out, count: Int(n)), as: UTF8.self)
    }

    /// ASN1_TIME_to_tm gives UTC fields; timegm (never mktime) keeps them UTC.
    private static func unixTime(_ t: UnsafePointer<ASN1_TIME>?, _ what: String) throws -> Int64 {
        var tm = Glibc.tm()
        guard let t, ASN1_TIME_to_tm(t, &tm) == 1 else {
            throw CryptoError.openssl("certificate \(what)", kind: .invalidInput)
        }
        return Int64(timegm(&tm))
    }

    private static func altNames(_ x: OpaquePointer) -> [GeneralName] {
        guard let raw = X509_get_ext_d2i(x, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { ks_GENERAL_NAMES_free(names) }
        var out: [GeneralName] = []
        for i in 0..<ks_sk_GENERAL_NAME_num(names) {
            if let gn = ks_sk_GENERAL_NAME_value(names, i) { out.append(GeneralName.from(gn)) }
        }
        return out
    }
}
