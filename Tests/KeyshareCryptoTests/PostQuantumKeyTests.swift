import Testing
import KeyshareCrypto

/// The post-quantum keys as PrivateKey / PublicKey (issue 18): PKCS #8 and SPKI as OpenSSL 3.5
/// writes them round-trip to the same key type and key, PEM too; on an engine without
/// post-quantum (`make OPENSSL=system`) generation is `.unsupported`, not a crash.
@Suite struct PostQuantumKeyTests {
    @Test(.enabled(if: CryptoEngine.hasPostQuantum),
          arguments: [KeyType.mlDSA(.mlDSA44), .mlDSA(.mlDSA65), .mlDSA(.mlDSA87), .mlKEM(.mlKEM512), .mlKEM(.mlKEM768),
                      .mlKEM(.mlKEM1024), .slhDSA(.sha2_128s), .slhDSA(.shake_256f)])
    func pkcs8AndSPKIRoundTrip(_ type: KeyType) throws {
        let k = try PrivateKey.generate(postQuantum: type)
        #expect(k.keyType == type && k.publicKey.keyType == type)
        let der = try k.pkcs8DER()
        let back = try PrivateKey(der: der)
        #expect(back.keyType == type)
        #expect(try back.postQuantumPrivateBytes() == k.postQuantumPrivateBytes())
        #expect(back.matches(k.publicKey))
        let pem = try PrivateKey(pem: try k.pem())
        #expect(pem.keyType == type && pem.matches(k.publicKey))
        let spki = try k.publicKey.spkiDER()
        let pub = try PublicKey(spkiDER: spki)
        #expect(pub.keyType == type)
        let raw = try #require(pub.postQuantumRaw)
        #expect(try PublicKey(postQuantum: type, raw: raw).spkiDER() == spki)
        switch type {
        case .mlDSA(let s):
            #expect(raw.count == s.publicKeyLength)
            #expect(try k.postQuantumPrivateBytes().count == s.privateKeyLength)
            #expect(k.postQuantumSeed?.count == 32)
        case .mlKEM(let s):
            #expect(raw.count == s.encapsulationKeyLength)
            #expect(k.postQuantumSeed?.count == 64)
        case .slhDSA(let s):
            #expect(raw.count == s.publicKeyLength)
            #expect(try k.postQuantumPrivateBytes().count == s.privateKeyLength)
        default: Issue.record("not a post-quantum type")
        }
        #expect(KeyType(postQuantumName: "\(type)".lowercased()) == type)
    }

    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func slhDSASignVerify() throws {
        let k = try SLHDSAKey.generate(.sha2_128f)
        let sig = try k.sign(Array("m".utf8), context: [1, 2, 3])
        #expect(sig.count == SLHDSAParameterSet.sha2_128f.signatureLength)
        #expect(try k.verify(sig, message: Array("m".utf8), context: [1, 2, 3]))
        #expect(try !k.verify(sig, message: Array("m".utf8)))
    }

    @Test func parameterSetNames() {
        #expect(SLHDSAParameterSet.sha2_128s.name == "SLH-DSA-SHA2-128s")
        #expect(SLHDSAParameterSet.shake_128f.name == "SLH-DSA-SHAKE-128f")
        #expect(SLHDSAParameterSet.shake_256f.rawValue == 12 && SLHDSAParameterSet.sha2_192s.rawValue == 5)
        #expect(SLHDSAParameterSet.sha2_192f.signatureLength == 35_664)
        #expect(KeyType.rsa.description == "rsa" && KeyType.mlDSA(.mlDSA65).description == "ML-DSA-65")
    }

    @Test(.enabled(if: !CryptoEngine.hasPostQuantum)) func unsupportedOnOldEngine() {
        for t in KeyType.allPostQuantum {
            #expect(throws: CryptoError.self) { _ = try PrivateKey.generate(postQuantum: t) }
        }
    }
}
