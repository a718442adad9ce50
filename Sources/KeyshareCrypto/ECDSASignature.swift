import COpenSSL

/// PKCS #11 carries ECDSA signatures as raw r||s, each half padded to the
/// curve size; OpenSSL speaks DER ECDSA-Sig-Value. These convert between them.
enum ECDSASignature {
    static func rawFromDER(_ der: [UInt8], curve: ECCurve) throws -> [UInt8] {
        guard let (sig, _) = OSSL.d2i(der, { p, n in d2i_ECDSA_SIG(nil, p, n) }) else {
            throw CryptoError.openssl("ECDSA signature decode")
        }
        defer { ECDSA_SIG_free(sig) }
        let r = OSSL.bytes(of: ECDSA_SIG_get0_r(sig), padTo: curve.byteSize)
        let s = OSSL.bytes(of: ECDSA_SIG_get0_s(sig), padTo: curve.byteSize)
        guard r.count == curve.byteSize, s.count == curve.byteSize else {
            throw CryptoError(.openssl, "ECDSA signature", reason: "component larger than the curve")
        }
        return r + s
    }

    /// nil when the raw form has the wrong length: such a signature simply
    /// does not verify.
    static func derFromRaw(_ raw: [UInt8], curve: ECCurve) throws -> [UInt8]? {
        guard raw.count == 2 * curve.byteSize else { return nil }
        guard let sig = ECDSA_SIG_new() else { throw CryptoError.openssl("ECDSA signature") }
        defer { ECDSA_SIG_free(sig) }
        let r = try OSSL.bignum(Array(raw[0..<curve.byteSize]))
        guard let s = try? OSSL.bignum(Array(raw[curve.byteSize...])) else {
            BN_free(r)
            throw CryptoError.openssl("ECDSA signature")
        }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r); BN_free(s)
            throw CryptoError.openssl("ECDSA signature")
        }
        return try OSSL.i2d("ECDSA signature encode") { i2d_ECDSA_SIG(sig, $0) }
    }
}
