import Testing
import KeyshareCrypto

/// Malformed input must throw, never crash: every decoder is fed garbage,
/// truncations at many offsets and bit flips.
@Suite struct RobustnessTests {
    /// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
    static func noise(_ n: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        return (0..<n).map { _ in
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return UInt8(truncatingIfNeeded: x)
        }
    }

    static func variants(of data: [UInt8], count: Int) -> [[UInt8]] {
        var out: [[UInt8]] = [[], [0x30], [0x30, 0x82, 0xFF, 0xFF], [0x30, 0x80, 0x00, 0x00]]
        let step = max(1, data.count / count)
        for cut in stride(from: 1, to: data.count, by: step) { out.append(Array(data[0..<cut])) }
        for (i, pos) in stride(from: 0, to: data.count, by: step).enumerated() {
            var d = data
            d[pos] ^= UInt8(1 << (i % 8))
            out.append(d)
        }
        for s in 1...20 { out.append(noise(Int(s) * 37, seed: UInt64(s))) }
        return out
    }

    @Test func certificateDecoderSurvivesGarbage() throws {
        let der = try Fixtures.bytes("identities/auth-upn-new.cert.der")
        for v in Self.variants(of: der, count: 150) {
            _ = try? Certificate(der: v)
        }
        #expect(throws: CryptoError.self) { try Certificate(der: Array(der.dropLast())) }
        #expect(throws: CryptoError.self) { try Certificate(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") }
    }

    @Test func keyDecodersSurviveGarbage() throws {
        for k in [Keys.rsa, Keys.p384, Keys.ed] {
            let der = try k.pkcs8DER()
            for v in Self.variants(of: der, count: 120) {
                _ = try? PrivateKey(der: v)
            }
            let spki = try k.publicKey.spkiDER()
            for v in Self.variants(of: spki, count: 60) {
                _ = try? PublicKey(spkiDER: v)
            }
        }
        #expect(throws: CryptoError.self) { try PrivateKey(der: []) }
        #expect(throws: CryptoError.self) { try PrivateKey(pem: "garbage") }
        #expect(throws: CryptoError.self) { try PublicKey(spkiDER: Self.noise(91, seed: 7)) }
    }

    @Test(arguments: ["identities/device-ds-ke.legacy.p12", "identities/auth-upn-new.modern.p12", "variants/rc2-40.p12"])
    func pkcs12ParserSurvivesGarbage(_ path: String) throws {
        let data = try Fixtures.bytes(path)
        for v in Self.variants(of: data, count: 80) {
            do {
                _ = try PKCS12.parse(v, password: "keyshare-test")
            } catch let e as CryptoError {
                #expect([.wrongPassword, .notPKCS12, .corruptPKCS12, .unsupported, .invalidInput].contains(e.kind), "\(e)")
            }
        }
        // Every strict truncation is reported as a damaged PKCS #12, not as a wrong password.
        for cut in [10, data.count / 3, data.count / 2, data.count - 1] {
            #expect { try PKCS12.parse(Array(data[0..<cut]), password: "keyshare-test") } throws: {
                ($0 as? CryptoError)?.kind == .corruptPKCS12
            }
        }
        #expect { try PKCS12.parse(Self.noise(300, seed: 99), password: "x") } throws: {
            ($0 as? CryptoError)?.kind == .notPKCS12
        }
    }

    @Test func signatureVerifierSurvivesGarbage() throws {
        let msg: [UInt8] = [1, 2, 3]
        for k in [Keys.rsa, Keys.p256, Keys.ed] {
            let alg: SignatureAlgorithm = k.keyType == .rsa ? .rsaPKCS1(.sha256) : k.keyType == .ec ? .ecdsa(.sha256) : .ed25519
            for n in [0, 1, 63, 64, 65, 255, 256, 257] {
                #expect(try !k.publicKey.verify(signature: Self.noise(n, seed: UInt64(n + 1)), message: msg, algorithm: alg))
            }
        }
        // Not type 2 (00 01 ...) whatever the key: noise would parse as type 2 now and then.
        let notType2 = try Keys.rsa.publicKey.encrypt([0, 1] + Self.noise(254, seed: 3).map { $0 | 1 }, padding: .raw)
        if CryptoEngine.rsaImplicitRejection {
            // OpenSSL 3.2+ (the bundled 3.5, issue 18): no error, a synthetic message that depends only on the
            // key and the ciphertext, so a caller learns nothing from how the padding was wrong.
            let a = try Keys.rsa.decrypt(notType2, padding: .pkcs1)
            #expect(try Keys.rsa.decrypt(notType2, padding: .pkcs1) == a)
            #expect(a.count < 256 - 10)
        } else {
            #expect(throws: CryptoError.self) { try Keys.rsa.decrypt(notType2, padding: .pkcs1) }
        }
        #expect(throws: CryptoError.self) { try Keys.rsa.decrypt([1, 2, 3], padding: .pkcs1) }
    }
}
