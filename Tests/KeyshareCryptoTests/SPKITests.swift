import Testing
@testable import KeyshareCrypto

/// SubjectPublicKeyInfo is assembled through the ASN.1 layer for EC and
/// Ed25519 keys (ks_spki_der) for speed; it must equal OpenSSL's encoder
/// output byte for byte, and parse back to the same key.
@Suite struct SPKITests {
    @Test(arguments: ["p256", "p384", "p521", "ed", "rsa"])
    func fastPathMatchesTheEncoder(_ name: String) throws {
        for _ in 0..<3 {
            let k = name == "rsa" ? key(name) : try fresh(name)
            let spki = try PKeyInfo.spkiDER(k.publicKey.pkey)
            #expect(spki == (try PKeyInfo.spkiDERViaEncoder(k.publicKey.pkey)))
            #expect(spki == (try PKeyInfo.spkiDERViaEncoder(k.pkey)))
            #expect(k.matches(try PublicKey(spkiDER: spki)))
        }
    }

    /// A key made from a compressed point still encodes as OpenSSL does.
    @Test(arguments: ECCurve.allCases)
    func compressedPointKeys(_ curve: ECCurve) throws {
        let k = try PrivateKey.generateEC(curve)
        let point = try #require(k.publicKey.ecPoint)
        let x = point[1...curve.byteSize]
        let compressed = [0x02 | (point.last! & 1)] + x
        let pub = try PublicKey(ecParams: curve.paramsDER, point: Array(compressed))
        #expect(try pub.spkiDER() == (try PKeyInfo.spkiDERViaEncoder(pub.pkey)))
        #expect(k.matches(pub))
    }

    private func fresh(_ name: String) throws -> PrivateKey {
        switch name {
        case "p256": try PrivateKey.generateEC(.p256)
        case "p384": try PrivateKey.generateEC(.p384)
        case "p521": try PrivateKey.generateEC(.p521)
        default: try PrivateKey.generateEd25519()
        }
    }
}
