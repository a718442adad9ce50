import Testing
import KeyshareCrypto

/// Keys are generated once per process: RSA generation is slow on a shared box.
enum Keys {
    static let rsa = try! PrivateKey.generateRSA(bits: 2048)
    static let p256 = try! PrivateKey.generateEC(.p256)
    static let p384 = try! PrivateKey.generateEC(.p384)
    static let p521 = try! PrivateKey.generateEC(.p521)
    static let ed = try! PrivateKey.generateEd25519()
    static let ed448 = try! PrivateKey.generate(.ed448)
    static let x25519 = try! PrivateKey.generate(.x25519)
    static let x448 = try! PrivateKey.generate(.x448)
    static let k1 = try! PrivateKey.generateEC(.secp256k1)
    static let bp384 = try! PrivateKey.generateEC(.brainpoolP384r1)
    static let p192 = try! PrivateKey.generateEC(.p192)
}

@Suite struct KeyTests {
    @Test func generatedKeyFacts() throws {
        #expect(Keys.rsa.keyType == .rsa && Keys.rsa.bits == 2048 && Keys.rsa.curve == nil)
        #expect(Keys.rsa.publicKey.rsaPublicExponent == [1, 0, 1])
        #expect(Keys.rsa.publicKey.rsaModulus?.count == 256)
        for (k, c) in [(Keys.p256, ECCurve.p256), (Keys.p384, .p384), (Keys.p521, .p521)] {
            #expect(k.keyType == .ec && k.curve == c && k.bits == c.bits)
            #expect(k.publicKey.ecPoint?.count == 1 + 2 * c.byteSize)
            #expect(try k.ecPrivateScalar().count == c.byteSize)
            #expect(ECCurve(paramsDER: c.paramsDER) == c)
        }
        #expect(Keys.ed.keyType == .ed25519 && Keys.ed.publicKey.ed25519Raw?.count == 32)
        #expect(throws: CryptoError.self) { try PrivateKey.generateRSA(bits: 512) }
    }

    @Test(arguments: ["rsa", "p256", "p384", "p521", "ed", "ed448", "x25519", "x448", "k1", "bp384", "p192"])
    func encodingRoundTrips(_ name: String) throws {
        let k = key(name)
        let der = try k.pkcs8DER()
        let again = try PrivateKey(der: der)
        #expect(try again.pkcs8DER() == der)
        #expect(try PrivateKey(pem: k.pem()).pkcs8DER() == der)
        #expect(again.matches(k.publicKey))
        let spki = try k.publicKey.spkiDER()
        #expect(try PublicKey(spkiDER: spki).spkiDER() == spki)
        #expect(try PublicKey(pem: k.publicKey.pem()).spkiDER() == spki)
        switch k.keyType {
        case .rsa:
            let pub = try PublicKey(rsaModulus: k.publicKey.rsaModulus!, exponent: k.publicKey.rsaPublicExponent!)
            #expect(try pub.spkiDER() == spki)
            let c = try k.rsaPrivateComponents()
            #expect(try PrivateKey.fromRSA(c).pkcs8DER() == der)
        case .ec:
            let pub = try PublicKey(ecParams: k.curve!.paramsDER, point: k.publicKey.ecPoint!)
            #expect(try pub.spkiDER() == spki)
            #expect(try PublicKey(ecParams: k.curve!.paramsDER, point: k.publicKey.ecPointDER!).spkiDER() == spki)
            #expect(try PrivateKey.fromEC(curve: k.curve!, privateScalar: k.ecPrivateScalar()).matches(k.publicKey))
        case .ed25519:
            #expect(try PublicKey(ed25519Raw: k.publicKey.ed25519Raw!).spkiDER() == spki)
            #expect(try PrivateKey.fromEd25519(privateRaw: k.ed25519PrivateRaw()).matches(k.publicKey))
        case .ed448, .x25519, .x448:
            let c = k.publicKey.ecxCurve!
            #expect(try PublicKey(c, raw: k.publicKey.ecxRaw!).spkiDER() == spki)
            #expect(try PrivateKey.from(c, privateRaw: k.ecxPrivateRaw()).matches(k.publicKey))
        case .mlDSA, .mlKEM, .slhDSA:
            #expect(try PublicKey(postQuantum: k.keyType, raw: k.publicKey.postQuantumRaw!).spkiDER() == spki)
        }
    }

    /// Traditional (PKCS #1 / SEC 1) DER is accepted too, and encrypted PEM needs its password.
    @Test func traditionalAndEncryptedForms() throws {
        let dir = try TempDir()
        let pem = try dir.write("k.pem", Keys.p256.pem())
        let rsaPem = try dir.write("r.pem", Keys.rsa.pem())
        #expect(try OpenSSLCLI.run(["ec", "-in", pem, "-outform", "DER", "-out", dir.path("sec1.der")]).status == 0)
        #expect(try OpenSSLCLI.run(["rsa", "-in", rsaPem, "-traditional", "-outform", "DER", "-out", dir.path("pkcs1.der")]).status == 0)
        #expect(try PrivateKey(der: dir.read("sec1.der")).matches(Keys.p256.publicKey))
        #expect(try PrivateKey(der: dir.read("pkcs1.der")).matches(Keys.rsa.publicKey))
        #expect(try OpenSSLCLI.run(["pkcs8", "-topk8", "-in", pem, "-passout", "env:KEY_PASSWORD", "-out", dir.path("enc.pem")],
                                       environment: ["KEY_PASSWORD": "s3cret"]).status == 0)
        let enc = String(decoding: try dir.read("enc.pem"), as: UTF8.self)
        #expect(try PrivateKey(pem: enc, password: Array("s3cret".utf8)).matches(Keys.p256.publicKey))
        #expect(throws: CryptoError.self) { try PrivateKey(pem: enc) }
        #expect(throws: CryptoError.self) { try PrivateKey(pem: enc, password: Array("wrong".utf8)) }
    }

    @Test func ecPointValidation() throws {
        var point = Keys.p256.publicKey.ecPoint!
        point[40] ^= 1
        #expect(throws: CryptoError.self) { try PublicKey(ecParams: ECCurve.p256.paramsDER, point: point) }
        #expect(throws: CryptoError.self) { try PublicKey(ecParams: [0x06, 0x01, 0x00], point: point) }
        #expect(throws: CryptoError.self) { try PublicKey(ed25519Raw: [1, 2, 3]) }
    }

    @Test func fixtureKeysMatchCertificates() throws {
        for row in Fixtures.rows("key", "ca-key") {
            let k = try PrivateKey(pem: Fixtures.text(row.path))
            let c = try Certificate(der: Fixtures.bytes(row.certDER))
            #expect(k.matches(c.publicKey), "\(row.path)")
            #expect(k.keyType == (row.key.hasPrefix("RSA") ? .rsa : .ec))
        }
    }

    @Test func rsaEncryption() throws {
        let pub = Keys.rsa.publicKey
        let msg = Array("attack at dawn".utf8)
        let paddings: [RSAPadding] = [
            .pkcs1, .oaep(.sha1, mgf1: .sha1, label: []), .oaep(.sha256, mgf1: .sha256, label: Array("label".utf8)),
            .oaep(.sha512, mgf1: .sha1, label: []),
        ]
        for p in paddings {
            let c = try pub.encrypt(msg, padding: p)
            #expect(c.count == 256)
            #expect(try Keys.rsa.decrypt(c, padding: p) == msg)
        }
        let wrongLabel = try pub.encrypt(msg, padding: .oaep(.sha256, mgf1: .sha256, label: [1]))
        #expect { try Keys.rsa.decrypt(wrongLabel, padding: .oaep(.sha256, mgf1: .sha256, label: [2])) } throws: {
            ($0 as? CryptoError)?.kind == .invalidInput
        }
        // Raw: the bare RSA permutation, input left-padded.
        let raw = try pub.encrypt([0x42, 0x42], padding: .raw)
        #expect(try Keys.rsa.decrypt(raw, padding: .raw) == [UInt8](repeating: 0, count: 254) + [0x42, 0x42])
        #expect { try pub.encrypt([UInt8](repeating: 1, count: 250), padding: .pkcs1) } throws: {
            ($0 as? CryptoError)?.kind == .dataTooLong
        }
    }

    @Test func ecdhAgreement() throws {
        for (a, curve) in [(Keys.p256, ECCurve.p256), (Keys.p384, .p384), (Keys.p521, .p521)] {
            let b = try PrivateKey.generateEC(curve)
            let ab = try a.deriveECDH(peerPoint: b.publicKey.ecPoint!)
            let ba = try b.deriveECDH(peerPoint: a.publicKey.ecPointDER!)
            #expect(ab == ba && ab.count == curve.byteSize)
        }
        #expect(throws: CryptoError.self) { try Keys.p256.deriveECDH(peerPoint: Keys.p384.publicKey.ecPoint!) }
        #expect(throws: CryptoError.self) { try Keys.rsa.deriveECDH(peerPoint: Keys.p256.publicKey.ecPoint!) }
    }

    @Test func keyIdentifierMatchesOpenSSLSKI() throws {
        // The CA certificates carry a method-1 SKI; ours must agree.
        let ca = try Certificate(der: Fixtures.bytes("ca/intermediate-ca.der"))
        if let ski = ca.subjectKeyIdentifier {
            #expect(try ca.publicKey.keyIdentifier() == ski)
        }
    }
}

func key(_ name: String) -> PrivateKey {
    switch name {
    case "rsa": Keys.rsa
    case "p256": Keys.p256
    case "p384": Keys.p384
    case "p521": Keys.p521
    case "ed448": Keys.ed448
    case "x25519": Keys.x25519
    case "x448": Keys.x448
    case "k1": Keys.k1
    case "bp384": Keys.bp384
    case "p192": Keys.p192
    default: Keys.ed
    }
}
