import COpenSSL

/// PKCS #11 carries ECDSA signatures as raw r||s, each half padded to the
/// curve size; OpenSSL speaks DER ECDSA-Sig-Value. These convert between them.
enum ECDSASignature {
    /// Read directly from the DER (SEQUENCE of two INTEGERs) rather than
    /// through d2i_ECDSA_SIG, which allocates two BIGNUMs per signature on
    /// the signing path. Anything but one well-formed pair is an error.
    static func rawFromDER(_ der: ArraySlice<UInt8>, curve: ECCurve) throws -> [UInt8] {
        func fail(_ why: String) -> CryptoError { CryptoError(.openssl, "ECDSA signature", reason: why) }
        var reader = DERReader(der)
        guard let body = reader.element(tag: 0x30), reader.atEnd else { throw fail("not a DER SEQUENCE") }
        var fields = DERReader(body)
        guard let r = fields.element(tag: 0x02), let s = fields.element(tag: 0x02), fields.atEnd else {
            throw fail("not two INTEGERs")
        }
        var out = [UInt8](repeating: 0, count: 2 * curve.byteSize)
        for (i, n) in [r, s].enumerated() {
            let digits = n.drop { $0 == 0 }
            guard let lead = n.first, lead & 0x80 == 0, digits.count <= curve.byteSize else {
                throw fail("component negative or larger than the curve")
            }
            let end = (i + 1) * curve.byteSize
            out.replaceSubrange(end - digits.count..<end, with: digits)
        }
        return out
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

/// Just enough DER for an ECDSA-Sig-Value: definite lengths up to 4 bytes.
struct DERReader {
    private var rest: ArraySlice<UInt8>
    init(_ bytes: ArraySlice<UInt8>) { rest = bytes }
    var atEnd: Bool { rest.isEmpty }

    /// The contents of the next element if it has `tag`; nil on anything malformed.
    mutating func element(tag: UInt8) -> ArraySlice<UInt8>? {
        guard rest.count >= 2, rest.first == tag else { return nil }
        var i = rest.startIndex + 1
        var length = Int(rest[i])
        i += 1
        if length & 0x80 != 0 {
            let n = length & 0x7f
            guard n >= 1, n <= 4, rest.endIndex - i >= n else { return nil }
            length = 0
            for _ in 0..<n { length = length << 8 | Int(rest[i]); i += 1 }
        }
        guard rest.endIndex - i >= length else { return nil }
        let contents = rest[i..<i + length]
        rest = rest[(i + length)...]
        return contents
    }
}
