import COpenSSL

extension PKCS12 {
    /// Key-sharing spec §4. `legacy`: key bag shrouded with
    /// pbeWithSHA1And3-KeyTripleDES-CBC, one unencrypted certificate bag, no
    /// chain, HMAC-SHA1 MAC (what old SecPKCS12Import accepts). `modern`:
    /// PBES2 / PBKDF2-HMAC-SHA256 / AES-256-CBC on key and certificates,
    /// HMAC-SHA256 MAC, chain included. Both: 2048 iterations, friendlyName
    /// and localKeyID (SHA-1 of the certificate DER) on the identity's bags.
    public static func build(privateKey: PrivateKey, certificate: Certificate, chain: [Certificate],
                             friendlyName: String, password: String, profile: Profile) throws -> [UInt8] {
        guard privateKey.matches(certificate.publicKey) else {
            throw CryptoError(.invalidInput, "PKCS #12 build", reason: "the private key does not belong to the certificate")
        }
        CryptoError.clearQueue()
        let iterations: Int32 = 2048
        let localKeyID = DigestAlgorithm.sha1.hash(certificate.der)
        var x509s: [OpaquePointer] = []
        defer { x509s.forEach { X509_free($0) } }
        for c in [certificate] + (profile == .modern ? chain : []) {
            guard let (x, _) = OSSL.d2i(c.der, OSSL.decodeX509) else {
                throw CryptoError.openssl("PKCS #12 build: certificate")
            }
            x509s.append(x)
        }

        var certBags: OpaquePointer? = nil
        var keyBags: OpaquePointer? = nil
        var safes: OpaquePointer? = nil
        defer {
            if let certBags { ks_sk_PKCS12_SAFEBAG_pop_free(certBags) }
            if let keyBags { ks_sk_PKCS12_SAFEBAG_pop_free(keyBags) }
            if let safes { ks_sk_PKCS7_pop_free(safes) }
        }
        let op = "PKCS #12 build"
        for (i, x) in x509s.enumerated() {
            guard let bag = PKCS12_add_cert(&certBags, x) else { throw CryptoError.openssl(op) }
            if i == 0 { try addAttributes(bag, friendlyName: friendlyName, localKeyID: localKeyID) }
        }
        let keyNID = profile == .legacy ? NID_pbe_WithSHA1And3_Key_TripleDES_CBC : NID_aes_256_cbc
        let certSafeNID: Int32 = profile == .legacy ? -1 : NID_aes_256_cbc
        let p12: OpaquePointer? = try password.withCString { pass in
            guard let keyBag = PKCS12_add_key(&keyBags, privateKey.pkey, 0, iterations, keyNID, pass) else {
                throw CryptoError.openssl(op)
            }
            try addAttributes(keyBag, friendlyName: friendlyName, localKeyID: localKeyID)
            guard PKCS12_add_safe(&safes, certBags, certSafeNID, iterations, pass) == 1,
                  PKCS12_add_safe(&safes, keyBags, -1, 0, nil) == 1,
                  let p12 = PKCS12_add_safes(safes, 0) else {
                throw CryptoError.openssl(op)
            }
            let md = profile == .legacy ? EVP_sha1() : EVP_sha256()
            guard PKCS12_set_mac(p12, pass, -1, nil, 0, iterations, md) == 1 else {
                PKCS12_free(p12)
                throw CryptoError.openssl(op)
            }
            return p12
        }
        guard let p12 else { throw CryptoError.openssl(op) }
        defer { PKCS12_free(p12) }
        return try OSSL.i2d(op) { i2d_PKCS12(p12, $0) }
    }

    private static func addAttributes(_ bag: OpaquePointer, friendlyName: String, localKeyID: [UInt8]) throws {
        var id = localKeyID
        guard friendlyName.isEmpty || PKCS12_add_friendlyname_utf8(bag, friendlyName, -1) == 1,
              PKCS12_add_localkeyid(bag, &id, Int32(id.count)) == 1 else {
            throw CryptoError.openssl("PKCS #12 bag attributes")
        }
    }
}
