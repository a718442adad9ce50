import Testing
import KeyshareCrypto

@Suite struct PKCS12Tests {
    @Test(arguments: Fixtures.rows("p12", "p12-nokey"))
    func parsesManifestFile(_ row: Fixtures.Row) throws {
        let c = try PKCS12.parse(Fixtures.bytes(row.path), password: row.password)
        let expectedCert = try Fixtures.bytes(row.certDER)
        #expect(c.certificate?.der == expectedCert)
        if row.kind == "p12" {
            let key = try #require(c.privateKey)
            #expect(key.matches(c.certificate!.publicKey))
            #expect(key.keyType == (row.key.hasPrefix("RSA") ? .rsa : .ec))
        } else {
            #expect(c.privateKey == nil)
        }
        if row.profile == "legacy" {
            #expect(c.chain.isEmpty)
            #expect(c.friendlyName == c.certificate?.sha256Hex)
        }
        if row.profile == "modern", !row.path.contains("no-friendly-name") {
            #expect(c.chain.count == 2)
            #expect(c.friendlyName?.isEmpty == false)
        }
        if row.path.contains("no-friendly-name") { #expect(c.friendlyName == nil) }
    }

    @Test(arguments: Fixtures.rows("bad"))
    func rejectsBrokenFile(_ row: Fixtures.Row) throws {
        let expected: CryptoError.Kind = switch row.expect {
        case "corrupt": .corruptPKCS12
        case "bad-mac": .wrongPassword
        default: .notPKCS12
        }
        #expect { try PKCS12.parse(Fixtures.bytes(row.path), password: row.password) } throws: {
            ($0 as? CryptoError)?.kind == expected
        }
    }

    @Test(arguments: Fixtures.rows("p12", "p12-nokey"))
    func wrongPassword(_ row: Fixtures.Row) throws {
        #expect { try PKCS12.parse(Fixtures.bytes(row.path), password: row.password + "x") } throws: {
            ($0 as? CryptoError)?.kind == .wrongPassword
        }
    }

    static let chain: [Certificate] = (try? Certificate.parseAll(pem: Fixtures.text("ca/ca-chain.pem"))) ?? []
    /// openssl reads the password from its environment (`-passin env:P12_PASSWORD`), not from argv.
    static let p12Password = ["P12_PASSWORD": "keyshare-test"]

    @Test(arguments: ["device-ds-ke", "device-old-ec", "auth-upn-new"], PKCS12.Profile.allCases)
    func buildParseRoundTrip(_ id: String, _ profile: PKCS12.Profile) throws {
        let key = try PrivateKey.fixture(id)
        let cert = try Certificate.fixture(id)
        let password = "p@ss wörd:" + id
        let p12 = try PKCS12.build(privateKey: key, certificate: cert, chain: Self.chain,
                                   friendlyName: cert.sha256Hex, password: password, profile: profile)
        let c = try PKCS12.parse(p12, password: password)
        #expect(c.certificate == cert)
        #expect(try c.privateKey?.pkcs8DER() == key.pkcs8DER())
        #expect(c.friendlyName == cert.sha256Hex)
        #expect(c.chain == (profile == .modern ? Self.chain : []))
        #expect { try PKCS12.parse(p12, password: "nope") } throws: { ($0 as? CryptoError)?.kind == .wrongPassword }
    }

    @Test func buildsEd25519AndEmptyPassword() throws {
        // A self-made certificate is not needed: a key/cert mismatch must be refused.
        #expect(throws: CryptoError.self) {
            try PKCS12.build(privateKey: Keys.ed, certificate: Certificate.fixture("device-ds-ke"), chain: [],
                             friendlyName: "x", password: "x", profile: .modern)
        }
        let key = try PrivateKey.fixture("device-old-ec")
        let cert = try Certificate.fixture("device-old-ec")
        let p12 = try PKCS12.build(privateKey: key, certificate: cert, chain: [], friendlyName: "", password: "", profile: .legacy)
        let c = try PKCS12.parse(p12, password: "")
        #expect(c.certificate == cert && c.privateKey != nil && c.friendlyName == nil)
    }

    /// The exact structure spec §4 asks for, as the OpenSSL 3 CLI sees it.
    @Test(arguments: ["device-ds-ke", "signature-ds-email"])
    func opensslReadsLegacyProfile(_ id: String) throws {
        let cert = try Certificate.fixture(id)
        let p12 = try PKCS12.build(privateKey: PrivateKey.fixture(id), certificate: cert, chain: Self.chain,
                                   friendlyName: cert.sha256Hex, password: "keyshare-test", profile: .legacy)
        let dir = try TempDir()
        let path = try dir.write("l.p12", p12)
        let r = try OpenSSLCLI.run(["pkcs12", "-info", "-noout", "-passin", "env:P12_PASSWORD", "-in", path], environment: Self.p12Password)
        #expect(r.status == 0, "\(r.output)")
        let lines = r.output.split(separator: "\n").map(String.init)
        // Line for line what the reference layout (and the fixture files) show.
        #expect(lines == [
            "MAC: sha1, Iteration 2048", "MAC length: 20, salt length: 8", "PKCS7 Data", "Certificate bag",
            "PKCS7 Data", "Shrouded Keybag: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048",
        ])
        #expect(lines.contains("MAC: sha1, Iteration 2048"))
        #expect(lines.contains("Shrouded Keybag: pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 2048"))
        let p7 = try #require(lines.firstIndex(of: "PKCS7 Data"))
        #expect(lines.indices.contains(p7 + 1) && lines[p7 + 1] == "Certificate bag")
        #expect(lines.filter { $0 == "Certificate bag" }.count == 1)
        #expect(!lines.contains { $0.hasPrefix("PKCS7 Encrypted data") })
        let full = try OpenSSLCLI.run(["pkcs12", "-nokeys", "-passin", "env:P12_PASSWORD", "-in", path], environment: Self.p12Password)
        #expect(full.output.contains("friendlyName: \(cert.sha256Hex)"))
        let keyID = Hex.encode(DigestAlgorithm.sha1.hash(cert.der)).uppercased()
        let spaced = stride(from: 0, to: keyID.count, by: 2).map { i -> String in
            let s = keyID.index(keyID.startIndex, offsetBy: i)
            return String(keyID[s...keyID.index(after: s)])
        }.joined(separator: " ")
        #expect(full.output.contains("localKeyID: \(spaced)"))
    }

    @Test(arguments: ["device-ds-ke", "auth-upn-new"])
    func opensslReadsModernProfile(_ id: String) throws {
        let cert = try Certificate.fixture(id)
        let p12 = try PKCS12.build(privateKey: PrivateKey.fixture(id), certificate: cert, chain: Self.chain,
                                   friendlyName: "Test identity", password: "keyshare-test", profile: .modern)
        let dir = try TempDir()
        let path = try dir.write("m.p12", p12)
        let r = try OpenSSLCLI.run(["pkcs12", "-info", "-noout", "-passin", "env:P12_PASSWORD", "-in", path], environment: Self.p12Password)
        #expect(r.status == 0, "\(r.output)")
        let pbes2 = "PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256"
        #expect(r.output.split(separator: "\n").map(String.init) == [
            "MAC: sha256, Iteration 2048", "MAC length: 32, salt length: 8", "PKCS7 Encrypted data: \(pbes2)",
            "Certificate bag", "Certificate bag", "Certificate bag", "PKCS7 Data", "Shrouded Keybag: \(pbes2)",
        ])
        #expect(r.output.contains("MAC: sha256, Iteration 2048"))
        #expect(r.output.contains("PKCS7 Encrypted data: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256"))
        #expect(r.output.contains("Shrouded Keybag: PBES2, PBKDF2, AES-256-CBC, Iteration 2048, PRF hmacWithSHA256"))
        #expect(r.output.components(separatedBy: "Certificate bag").count - 1 == 3)
        let certs = try OpenSSLCLI.run(["pkcs12", "-nokeys", "-passin", "env:P12_PASSWORD", "-in", path], environment: Self.p12Password)
        #expect(certs.output.contains("friendlyName: Test identity"))
    }
}
