import COpenSSL

public enum PKCS12 {
    public struct Contents: Sendable {
        public var privateKey: PrivateKey?
        /// The certificate matching the key; for a key-less file, the first
        /// certificate (the rest go to `chain`).
        public var certificate: Certificate?
        public var chain: [Certificate]
        public var friendlyName: String?

        public init(privateKey: PrivateKey?, certificate: Certificate?, chain: [Certificate], friendlyName: String?) {
            self.privateKey = privateKey
            self.certificate = certificate
            self.chain = chain
            self.friendlyName = friendlyName
        }
    }

    public enum Profile: String, Sendable, CaseIterable { case modern, legacy }

    /// Throws kind .wrongPassword (MAC mismatch), .notPKCS12 (not a PKCS #12
    /// at all), .corruptPKCS12 (a PKCS #12 that is truncated or damaged) or
    /// .unsupported (e.g. RC2 without OpenSSL's legacy provider).
    public static func parse(_ data: [UInt8], password: String) throws -> Contents {
        let legacyError = LegacyProvider.ensureLoaded()
        CryptoError.clearQueue()
        guard let (p12, _) = OSSL.d2i(data, { p, n in d2i_PKCS12(nil, p, n) }) else {
            let e = CryptoError.openssl("PKCS #12 decode")
            if looksLikePKCS12(data) {
                throw CryptoError(.corruptPKCS12, "PKCS #12 decode", reason: "truncated or damaged PKCS #12 (\(e.reason))")
            }
            throw CryptoError(.notPKCS12, "PKCS #12 decode", reason: "not a PKCS #12 file")
        }
        defer { PKCS12_free(p12) }

        // OpenSSL's empty password is ambiguous: files are made with either
        // an empty BMPString or none at all, so both are tried.
        let candidates: [String?] = password.isEmpty ? ["", nil] : [password]
        var chosen: String?? = nil
        if PKCS12_mac_present(p12) == 1 {
            for c in candidates where verifyMAC(p12, c) {
                chosen = .some(c)
                break
            }
            guard let _ = chosen else {
                let e = CryptoError.openssl("PKCS #12 MAC")
                if e.reason.containsText("mac verify failure") || e.reason.containsText("unknown OpenSSL error") {
                    throw CryptoError(.wrongPassword, "PKCS #12", reason: "wrong password (MAC verification failed)")
                }
                throw CryptoError(.corruptPKCS12, "PKCS #12 MAC", reason: e.reason)
            }
        } else {
            chosen = .some(candidates[0])
        }

        var pkey: OpaquePointer? = nil
        var cert: OpaquePointer? = nil
        var ca: OpaquePointer? = nil
        let ok = withOptionalCString(chosen ?? nil) { PKCS12_parse(p12, $0, &pkey, &cert, &ca) }
        defer {
            if let pkey { EVP_PKEY_free(pkey) }
            if let cert { X509_free(cert) }
            if let ca { ks_sk_X509_pop_free(ca) }
        }
        guard ok == 1 else {
            let e = CryptoError.openssl("PKCS #12 parse")
            let r = e.reason.lowercased()
            if r.containsText("unsupported") || r.containsText("fetch") {
                if let legacyError {
                    throw CryptoError(.unsupported, "PKCS #12 parse", reason: "uses a legacy algorithm (RC2/RC4/DES?): \(legacyError)")
                }
                throw CryptoError(.unsupported, "PKCS #12 parse", reason: e.reason)
            }
            if PKCS12_mac_present(p12) != 1 {
                throw CryptoError(.wrongPassword, "PKCS #12", reason: "cannot decrypt: wrong password? (\(e.reason))")
            }
            throw CryptoError(.corruptPKCS12, "PKCS #12 parse", reason: e.reason)
        }
        return try contents(pkey: &pkey, cert: cert, ca: ca)
    }

    private static func contents(pkey: inout OpaquePointer?, cert: OpaquePointer?, ca: OpaquePointer?) throws -> Contents {
        var key: PrivateKey? = nil
        if let k = pkey {
            pkey = nil  // PrivateKey owns it now (also when its init throws).
            key = try PrivateKey(owning: k)
        }
        var certs: [Certificate] = []
        if let ca {
            for i in 0..<ks_sk_X509_num(ca) {
                if let x = ks_sk_X509_value(ca, i) { certs.append(try certificate(x)) }
            }
        }
        var leaf: Certificate? = nil
        var name: String? = nil
        if let cert {
            leaf = try certificate(cert)
            name = alias(cert)
        } else if key == nil, !certs.isEmpty {
            leaf = certs.removeFirst()
            if let ca, let x = ks_sk_X509_value(ca, 0) { name = alias(x) }
        }
        CryptoError.clearQueue()
        return Contents(privateKey: key, certificate: leaf, chain: certs, friendlyName: name)
    }

    private static func certificate(_ x: OpaquePointer) throws -> Certificate {
        let der = try OSSL.i2d("certificate encode") { i2d_X509(x, $0) }
        return try Certificate(x509: x, der: der)
    }

    private static func alias(_ x: OpaquePointer) -> String? {
        var len: Int32 = 0
        guard let p = X509_alias_get0(x, &len), len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(len)), as: UTF8.self)
    }

    private static func verifyMAC(_ p12: OpaquePointer, _ password: String?) -> Bool {
        let ok: Int32
        if let password {
            ok = password.withCString { PKCS12_verify_mac(p12, $0, Int32(password.utf8.count)) }
        } else {
            ok = PKCS12_verify_mac(p12, nil, 0)
        }
        return ok == 1
    }

    static func withOptionalCString<T>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
        guard let s else { return body(nil) }
        return s.withCString { body($0) }
    }

    /// A DER SEQUENCE whose first element is INTEGER 3 (PFX version): the
    /// file claims to be PKCS #12, so a failure to decode means damage.
    static func looksLikePKCS12(_ d: [UInt8]) -> Bool {
        guard d.count >= 5, d[0] == 0x30 else { return false }
        var i = 1
        if d[1] < 0x80 { i = 2 } else {
            let n = Int(d[1] & 0x7F)
            guard (1...4).contains(n) else { return false }
            i = 2 + n
        }
        return d.count >= i + 3 && d[i] == 0x02 && d[i + 1] == 0x01 && d[i + 2] == 0x03
    }
}
