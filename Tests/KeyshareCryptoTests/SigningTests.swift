import Testing
import KeyshareCrypto

@Suite struct SigningTests {
    static let message = Array("The quick brown fox jumps over the lazy dog".utf8)

    struct Case: Sendable, CustomStringConvertible {
        var key: String
        var alg: SignatureAlgorithm
        var description: String { "\(key) \(alg)" }
    }

    static let cases: [Case] = {
        var c: [Case] = []
        for d in DigestAlgorithm.allCases {
            c.append(Case(key: "rsa", alg: .rsaPKCS1(d)))
            c.append(Case(key: "rsa", alg: .rsaPSS(d, mgf1: d, saltLength: d.outputSize)))
            c.append(Case(key: "p256", alg: .ecdsa(d)))
        }
        c.append(Case(key: "rsa", alg: .rsaPSS(.sha256, mgf1: .sha1, saltLength: 0)))
        c.append(Case(key: "p384", alg: .ecdsa(.sha384)))
        c.append(Case(key: "p521", alg: .ecdsa(.sha512)))
        c.append(Case(key: "p521", alg: .ecdsa(.sha1)))
        c.append(Case(key: "ed", alg: .ed25519))
        return c
    }()

    @Test(arguments: cases)
    func roundTrip(_ c: Case) throws {
        let k = key(c.key)
        let sig = try k.sign(message: Self.message, algorithm: c.alg)
        if let curve = k.curve { #expect(sig.count == 2 * curve.byteSize) }
        #expect(try k.publicKey.verify(signature: sig, message: Self.message, algorithm: c.alg))
        var bad = sig
        bad[bad.count / 2] ^= 1
        #expect(try !k.publicKey.verify(signature: bad, message: Self.message, algorithm: c.alg))
        #expect(try !k.publicKey.verify(signature: sig, message: Self.message + [0], algorithm: c.alg))
        #expect(try !k.publicKey.verify(signature: Array(sig.dropLast()), message: Self.message, algorithm: c.alg))

        // The pre-hashed path agrees with the message path (deterministic for PKCS #1).
        switch c.alg {
        case .rsaPKCS1(let d?), .ecdsa(let d?), .rsaPSS(let d, _, _):
            let digest = d.hash(Self.message)
            let s2 = try k.sign(digest: digest, algorithm: c.alg)
            #expect(try k.publicKey.verify(signature: s2, message: Self.message, algorithm: c.alg))
            #expect(try k.publicKey.verify(signature: sig, digest: digest, algorithm: c.alg))
            if case .rsaPKCS1 = c.alg { #expect(s2 == sig) }
            #expect(throws: CryptoError.self) { try k.sign(digest: Array(digest.dropLast()), algorithm: c.alg) }
        default:
            #expect(throws: CryptoError.self) { try k.sign(digest: Self.message, algorithm: c.alg) }
        }
    }

    /// CKM_RSA_PKCS: the caller supplies the DigestInfo; result equals sha256WithRSA.
    @Test func rsaPKCS1WithDigestInfo() throws {
        let prefix = Hex.decode("3031300d060960864801650304020105000420")
        let digestInfo = prefix + DigestAlgorithm.sha256.hash(Self.message)
        let s = try Keys.rsa.sign(message: digestInfo, algorithm: .rsaPKCS1(nil))
        #expect(s == (try Keys.rsa.sign(message: Self.message, algorithm: .rsaPKCS1(.sha256))))
        #expect(try Keys.rsa.publicKey.verify(signature: s, message: digestInfo, algorithm: .rsaPKCS1(nil)))
        #expect(try Keys.rsa.publicKey.verify(signature: s, message: Self.message, algorithm: .rsaPKCS1(.sha256)))
    }

    @Test func rsaRaw() throws {
        let input: [UInt8] = [0x00, 0x01, 0x02, 0x03]
        let s = try Keys.rsa.sign(message: input, algorithm: .rsaRaw)
        #expect(s.count == 256)
        #expect(try Keys.rsa.publicKey.verify(signature: s, message: input, algorithm: .rsaRaw))
        #expect(try !Keys.rsa.publicKey.verify(signature: s, message: [9], algorithm: .rsaRaw))
        // Raw sign == raw decrypt (the private permutation), and encrypt undoes it.
        #expect(try Keys.rsa.publicKey.encrypt(s, padding: .raw) == [UInt8](repeating: 0, count: 252) + input)
    }

    @Test func ecdsaOverDigestOfAnyLength() throws {
        let digest = DigestAlgorithm.sha512.hash(Self.message)
        let s = try Keys.p256.sign(digest: digest, algorithm: .ecdsa(nil))
        #expect(try Keys.p256.publicKey.verify(signature: s, digest: digest, algorithm: .ecdsa(nil)))
        #expect(try Keys.p256.publicKey.verify(signature: s, message: digest, algorithm: .ecdsa(nil)))
    }

    @Test func mismatchedAlgorithmThrows() throws {
        #expect(throws: CryptoError.self) { try Keys.rsa.sign(message: Self.message, algorithm: .ecdsa(.sha256)) }
        #expect(throws: CryptoError.self) { try Keys.p256.sign(message: Self.message, algorithm: .ed25519) }
        #expect(throws: CryptoError.self) { try Keys.ed.sign(message: Self.message, algorithm: .rsaPKCS1(.sha256)) }
    }

    // MARK: openssl CLI cross-checks

    static let cliCases: [Case] = [
        Case(key: "rsa", alg: .rsaPKCS1(.sha256)), Case(key: "rsa", alg: .rsaPKCS1(.sha1)),
        Case(key: "rsa", alg: .rsaPSS(.sha256, mgf1: .sha256, saltLength: 32)),
        Case(key: "rsa", alg: .rsaPSS(.sha384, mgf1: .sha1, saltLength: 20)),
        Case(key: "p256", alg: .ecdsa(.sha256)), Case(key: "p384", alg: .ecdsa(.sha384)),
        Case(key: "p521", alg: .ecdsa(.sha512)), Case(key: "ed", alg: .ed25519),
    ]

    /// Our signatures verify with openssl, and openssl's verify with us.
    @Test(arguments: cliCases)
    func crossCheckWithOpenSSL(_ c: Case) throws {
        let k = key(c.key)
        let dir = try TempDir()
        let msg = try dir.write("msg", Self.message)
        let keyPath = try dir.write("key.pem", k.pem())
        let pubPath = try dir.write("pub.pem", k.publicKey.pem())
        var sig = try k.sign(message: Self.message, algorithm: c.alg)
        if case .ecdsa = c.alg { sig = ECDSADER.encode(raw: sig) }
        let sigPath = try dir.write("sig", sig)

        var opts: [String] = []
        var digestArg: [String] = []
        switch c.alg {
        case .rsaPKCS1(let d?), .ecdsa(let d?): digestArg = [cliName(d)]
        case .rsaPSS(let d, let mgf1, let salt):
            digestArg = [cliName(d)]
            opts = ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:\(salt)",
                    "-sigopt", "rsa_mgf1_md:\(cliName(mgf1).dropFirst())"]
        default: break
        }
        if c.alg == .ed25519 {
            let v = try OpenSSLCLI.run(["pkeyutl", "-verify", "-pubin", "-inkey", pubPath, "-rawin", "-in", msg, "-sigfile", sigPath])
            #expect(v.status == 0, "\(v.output)")
            let s = try OpenSSLCLI.run(["pkeyutl", "-sign", "-inkey", keyPath, "-rawin", "-in", msg, "-out", dir.path("theirs")])
            #expect(s.status == 0, "\(s.output)")
            #expect(try k.publicKey.verify(signature: dir.read("theirs"), message: Self.message, algorithm: c.alg))
            return
        }
        let v = try OpenSSLCLI.run(["dgst"] + digestArg + opts + ["-verify", pubPath, "-signature", sigPath, msg])
        #expect(v.status == 0 && v.output.contains("Verified OK"), "\(v.output)")
        let s = try OpenSSLCLI.run(["dgst"] + digestArg + opts + ["-sign", keyPath, "-out", dir.path("theirs"), msg])
        #expect(s.status == 0, "\(s.output)")
        var theirs = try dir.read("theirs")
        if case .ecdsa = c.alg, let curve = k.curve { theirs = ECDSADER.decode(der: theirs, size: curve.byteSize) }
        #expect(try k.publicKey.verify(signature: theirs, message: Self.message, algorithm: c.alg))
    }

    /// openssl decrypts what we encrypt with OAEP, and the reverse.
    @Test func rsaOAEPCrossCheck() throws {
        let dir = try TempDir()
        let keyPath = try dir.write("key.pem", Keys.rsa.pem())
        let ct = try Keys.rsa.publicKey.encrypt(Self.message, padding: .oaep(.sha256, mgf1: .sha256, label: []))
        let ctPath = try dir.write("ct", ct)
        let r = try OpenSSLCLI.run(["pkeyutl", "-decrypt", "-inkey", keyPath, "-in", ctPath, "-out", dir.path("pt"),
                                    "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"])
        #expect(r.status == 0, "\(r.output)")
        #expect(try dir.read("pt") == Self.message)
        let msgPath = try dir.write("msg", Self.message)
        let e = try OpenSSLCLI.run(["pkeyutl", "-encrypt", "-inkey", keyPath, "-in", msgPath, "-out", dir.path("ct2"),
                                    "-pkeyopt", "rsa_padding_mode:pkcs1"])
        #expect(e.status == 0, "\(e.output)")
        #expect(try Keys.rsa.decrypt(dir.read("ct2"), padding: .pkcs1) == Self.message)
    }

    func cliName(_ d: DigestAlgorithm) -> String {
        switch d {
        case .sha1: "-sha1"
        case .sha224: "-sha224"
        case .sha256: "-sha256"
        case .sha384: "-sha384"
        case .sha512: "-sha512"
        case .sha512_224: "-sha512-224"
        case .sha512_256: "-sha512-256"
        case .sha3_224: "-sha3-224"
        case .sha3_256: "-sha3-256"
        case .sha3_384: "-sha3-384"
        case .sha3_512: "-sha3-512"
        }
    }
}
