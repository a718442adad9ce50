import Testing
@testable import KeyshareCrypto

/// The r||s form is read straight from OpenSSL's DER on the signing path;
/// these pin it against the BIGNUM-based conversion the verifier uses.
@Suite struct ECDSAFormTests {
    /// Enough signatures that r or s with the top bit set (a 33-byte INTEGER)
    /// and, for P-521, the long-form SEQUENCE length all occur.
    @Test(arguments: ["p256", "p384", "p521"])
    func manySignaturesRoundTrip(_ name: String) throws {
        let k = key(name)
        let digest = DigestAlgorithm.sha256.hash(Array("form".utf8))
        for _ in 0..<300 {
            let sig = try k.sign(digest: digest, algorithm: .ecdsa(nil))
            #expect(sig.count == 2 * k.curve!.byteSize)
            #expect(try k.publicKey.verify(signature: sig, digest: digest, algorithm: .ecdsa(nil)))
            let der = try #require(try ECDSASignature.derFromRaw(sig, curve: k.curve!))
            #expect(try ECDSASignature.rawFromDER(der[...], curve: k.curve!) == sig)
        }
    }

    @Test func shortComponentsArePadded() throws {
        // r = 1, s = 0x80 (needs a leading zero byte in DER).
        let der: [UInt8] = [0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x02, 0x00, 0x80]
        let raw = try ECDSASignature.rawFromDER(der[...], curve: .p256)
        #expect(raw == [UInt8](repeating: 0, count: 31) + [1] + [UInt8](repeating: 0, count: 31) + [0x80])
    }

    @Test(arguments: [
        [],
        [0x30],
        [0x30, 0x00],
        [0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],       // not a SEQUENCE
        [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00], // trailing byte
        [0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],       // length past the end
        [0x30, 0x03, 0x02, 0x01, 0x01],                         // one INTEGER
        [0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01],       // negative r
        [0x30, 0x05, 0x02, 0x00, 0x02, 0x01, 0x01],             // empty INTEGER
        [0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x02],             // huge length
        [0x30, 0x80, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00, 0x00], // indefinite length
    ] as [[UInt8]])
    func malformedDERIsRefused(_ der: [UInt8]) {
        #expect(throws: CryptoError.self) { try ECDSASignature.rawFromDER(der[...], curve: .p256) }
    }

    @Test func componentLongerThanTheCurveIsRefused() {
        let big = [UInt8](repeating: 0x11, count: 33)
        let der: [UInt8] = [0x30, 0x26, 0x02, 0x21] + big + [0x02, 0x01, 0x01]
        #expect(throws: CryptoError.self) { try ECDSASignature.rawFromDER(der[...], curve: .p256) }
    }
}
