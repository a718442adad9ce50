import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
import Tokens

@Suite struct ImportTests {
    let rsaP12 = "identities/device-ds-ke.modern.p12"
    let ecP12 = "identities/signature-ds-email.modern.p12"

    @Test func importsRSAIdentityWithFullAttributes() throws {
        let env = try Env()
        let tid = env.token.tokenID
        let result = try env.manager.importPKCS12(try Fixture.bytes(rsaP12), password: Fixture.password, into: tid, key: env.key)
        #expect(!result.duplicate)
        let cert = try Certificate(der: try Fixture.bytes("identities/device-ds-ke.cert.der"))
        #expect(result.label == "Test Device 1234567890 (device 048F)")  // the file's friendlyName (IdentityLabel)
        #expect(result.id == DigestAlgorithm.sha1.hash(try subjectPublicKeyBits(cert)))

        let keyItem = try env.store.item(try #require(result.privateKey), key: env.key)
        let a = keyItem.attributes
        #expect(keyItem.isPrivate)
        #expect(a.ulong(CKA.class) == CKO.privateKey)
        #expect(a.ulong(CKA.keyType) == CKK.rsa)
        #expect(a[CKA.id] == result.id)
        #expect(a.string(CKA.label) == result.label)
        #expect(a.bool(CKA.sensitive) == true)
        #expect(a.bool(CKA.extractable) == true)
        #expect(a.bool(CKA.alwaysSensitive) == false)
        #expect(a.bool(CKA.neverExtractable) == false)
        #expect(a.bool(CKA.local) == false)
        #expect(a.bool(CKA.sign) == true)
        #expect(a.bool(CKA.decrypt) == true)   // digitalSignature + keyEncipherment
        #expect(a.bool(CKA.derive) == false)
        #expect(a[CKA.modulus] == cert.publicKey.rsaModulus)
        #expect(a[CKA.publicExponent] == cert.publicKey.rsaPublicExponent)
        #expect(a[CKA.subject] == cert.subjectDER)
        let pk = try env.manager.privateKey(keyItem.reference, key: env.key)
        #expect(pk.matches(cert.publicKey))

        let certItem = try env.store.item(try #require(result.certificate), key: nil)
        #expect(certItem.attributes[CKA.value] == cert.der)
        #expect(certItem.attributes.ulong(CKA.certificateType) == CKC.x509)
        #expect(certItem.attributes[CKA.issuer] == cert.issuerDER)
        #expect(certItem.attributes[CKA.serialNumber] == cert.serialNumberDER)
        #expect(certItem.attributes.bool(CKA.trusted) == false)
        #expect(certItem.attributes.ulong(CKA.certificateCategory) == CertificateCategory.tokenUser)
        #expect(certItem.attributes[CKA.startDate] == Array("20250110".utf8))
        #expect(certItem.attributes[CKA.endDate] == Array("20400110".utf8))

        let pubItem = try env.store.item(try #require(result.publicKey), key: nil)
        #expect(pubItem.attributes.ulong(CKA.class) == CKO.publicKey)
        #expect(pubItem.attributes[CKA.id] == result.id)
        #expect(pubItem.attributes.bool(CKA.verify) == true)

        let ids = try env.manager.identities(in: tid, key: env.key)
        #expect(ids.count == 1)
        #expect(ids.first?.privateKeyReference == result.privateKey)
        #expect(ids.first?.certificate == cert)
        // Without the key the identity is listed, its private key is not visible.
        #expect(try env.manager.identities(in: tid, key: nil).first?.privateKeyReference == nil)
    }

    @Test func importsECIdentity() throws {
        let env = try Env()
        let result = try env.manager.importPKCS12(try Fixture.bytes(ecP12), password: Fixture.password,
                                                  into: env.token.tokenID, key: env.key)
        let a = try env.store.item(try #require(result.privateKey), key: env.key).attributes
        #expect(a.ulong(CKA.keyType) == CKK.ec)
        #expect(a[CKA.ecParams] == ECCurve.p256.paramsDER)
        #expect(a.bool(CKA.decrypt) == false)
        let pub = try env.store.item(try #require(result.publicKey), key: nil).attributes
        let point = try #require(pub[CKA.ecPoint])
        #expect(point.count == 67 && point[0] == 0x04 && point[1] == 65 && point[2] == 0x04)
    }

    @Test func duplicateImportCreatesNothing() throws {
        let env = try Env()
        let data = try Fixture.bytes(rsaP12)
        let first = try env.manager.importPKCS12(data, password: Fixture.password, into: env.token.tokenID, key: env.key)
        let counts = try env.rowCounts()
        let second = try env.manager.importPKCS12(data, password: Fixture.password, into: env.token.tokenID, key: env.key)
        #expect(second.duplicate)
        #expect(second.privateKey == first.privateKey)
        #expect(second.certificate == first.certificate)
        #expect(try env.rowCounts() == counts)
        // The legacy file of the same identity is a duplicate too.
        let third = try env.manager.importPKCS12(try Fixture.bytes("identities/device-ds-ke.legacy.p12"),
                                                 password: Fixture.password, into: env.token.tokenID, key: env.key)
        #expect(third.duplicate)
        #expect(try env.rowCounts() == counts)
    }

    private func kind(_ body: () throws -> Void) -> CryptoError.Kind? {
        do { try body() } catch let e as CryptoError { return e.kind } catch { return nil }
        return nil
    }

    @Test func badFilesLeaveStoreUntouched() throws {
        let env = try Env()
        _ = try env.manager.importPKCS12(try Fixture.bytes(ecP12), password: Fixture.password, into: env.token.tokenID, key: env.key)
        let counts = try env.rowCounts()
        let tid = env.token.tokenID
        let cases: [(String, String, CryptoError.Kind)] = [
            (rsaP12, "wrong-password", .wrongPassword),
            ("broken/random-bytes.p12", Fixture.password, .notPKCS12),
            ("broken/truncated.p12", Fixture.password, .corruptPKCS12),
            ("variants/cert-only.p12", Fixture.password, .noPrivateKey),
        ]
        var seen: [CryptoError.Kind] = []
        for (file, password, expected) in cases {
            let data = try Fixture.bytes(file)
            let k = kind { _ = try env.manager.importPKCS12(data, password: password, into: tid, key: env.key) }
            #expect(k == expected, "\(file)")
            if let k { seen.append(k) }
            #expect(try env.rowCounts() == counts, "\(file)")
        }
        #expect(Set(seen.map { "\($0)" }).count == 4)
    }

    @Test func secretsNeverOnDisk() throws {
        let home: TempHome
        var needles: [(String, [UInt8])] = []
        do {
            let env = try Env()
            home = env.home
            for file in [rsaP12, ecP12] {
                _ = try env.manager.importPKCS12(try Fixture.bytes(file), password: Fixture.password,
                                                 into: env.token.tokenID, key: env.key)
                let contents = try PKCS12.parse(try Fixture.bytes(file), password: Fixture.password)
                let pk = try #require(contents.privateKey)
                needles.append(("\(file) PKCS #8", try pk.pkcs8DER()))
                if pk.keyType == .rsa {
                    let c = try pk.rsaPrivateComponents()
                    for (n, v) in [("d", c.d), ("p", c.p), ("q", c.q), ("dp", c.dp), ("dq", c.dq), ("qinv", c.qinv)] {
                        #expect(v.count >= 16)
                        needles.append(("\(file) \(n)", Array(v.prefix(16))))
                        needles.append(("\(file) \(n) full", v))
                    }
                } else {
                    needles.append(("\(file) scalar", try pk.ecPrivateScalar()))
                }
            }
            #expect(try env.store.find(ItemQuery(itemClass: .privateKey), key: env.key).count == 2)
        }
        needles.append(("user PIN", userPIN))
        needles.append(("SO PIN", soPIN))
        let disk = home.allBytes()
        #expect(disk.count > 4096)
        for (name, needle) in needles {
            #expect(!contains(disk, needle), "\(name) found on disk")
        }
    }

    @Test func lockedPINResetBySOKeepsSigningKey() throws {
        let env = try Env()
        let tid = env.token.tokenID
        let result = try env.manager.importPKCS12(try Fixture.bytes(rsaP12), password: Fixture.password, into: tid, key: env.key)
        for _ in 0..<env.token.maxPINAttempts {
            #expect(throws: KeychainError.self) { _ = try env.store.unlockUser(tid, pin: Array("bad".utf8)) }
        }
        #expect(throws: KeychainError.pinLocked) { _ = try env.store.unlockUser(tid, pin: userPIN) }
        let so = try env.store.unlockSO(tid, pin: soPIN)
        try env.store.initUserPIN(tid, soKey: so, newPIN: Array("reset-pin".utf8))
        let key = try env.store.unlockUser(tid, pin: Array("reset-pin".utf8))
        let pk = try env.manager.privateKey(try #require(result.privateKey), key: key)
        let msg = Array("hello".utf8)
        let sig = try pk.sign(message: msg, algorithm: .rsaPKCS1(.sha256))
        let cert = try Certificate(der: try Fixture.bytes("identities/device-ds-ke.cert.der"))
        #expect(try cert.publicKey.verify(signature: sig, message: msg, algorithm: .rsaPKCS1(.sha256)))

        try env.store.changeUserPIN(tid, old: Array("reset-pin".utf8), new: userPIN)
        let again = try env.store.unlockUser(tid, pin: userPIN)
        #expect(try env.manager.privateKey(try #require(result.privateKey), key: again).matches(cert.publicKey))
    }

    @Test func certificateAndKeyImportedSeparatelyFormIdentity() throws {
        let env = try Env()
        let tid = env.token.tokenID
        let cert = try Certificate(der: try Fixture.bytes("identities/signature-ds-nr.cert.der"))
        let key = try PrivateKey(pem: try Fixture.text("identities/signature-ds-nr.key.pem"))
        let c = try env.manager.importCertificate(cert, into: tid, key: nil)
        #expect(try env.manager.importCertificate(cert, into: tid, key: nil).duplicate)
        let k = try env.manager.importPrivateKey(key, label: nil, into: tid, key: env.key)
        #expect(c.id == k.id)
        let ids = try env.manager.identities(in: tid, key: env.key)
        #expect(ids.count == 1 && ids[0].privateKeyReference == k.privateKey)
    }

    /// Issue 28: a CA certificate whose private key is in the token (a
    /// self-signed `openssl req -x509`, basicConstraints CA:TRUE) is an
    /// identity; a CA certificate without its key (a chain member) is not.
    @Test func caCertificateWithItsKeyIsAnIdentity() throws {
        let env = try Env()
        let tid = env.token.tokenID
        let root = try #require(try Certificate.parseAll(pem: try Fixture.text("ca/root-ca.pem")).first)
        let rootKey = try PrivateKey(pem: try Fixture.text("ca/root-ca.key.pem"))
        let intermediate = try #require(try Certificate.parseAll(pem: try Fixture.text("ca/intermediate-ca.pem")).first)
        #expect(root.isCA && intermediate.isCA)
        let results = try env.manager.importBundle(privateKeys: [rootKey], certificates: [root, intermediate], into: tid, key: env.key)
        let ids = try env.manager.identities(in: tid, key: env.key)
        #expect(ids.count == 1)
        #expect(ids.first?.certificate == root)
        #expect(ids.first?.privateKeyReference != nil && ids.first?.privateKeyReference == results.first?.privateKey)
        // Without the token key: still listed (its public key object stands for the pair), the key not visible.
        let locked = try env.manager.identities(in: tid, key: nil)
        #expect(locked.map(\.certificate) == [root] && locked.first?.privateKeyReference == nil)
    }

    /// The subjectPublicKey BIT STRING contents, found by walking the SPKI DER.
    private func subjectPublicKeyBits(_ cert: Certificate) throws -> [UInt8] {
        let spki = try cert.publicKey.spkiDER()
        func header(_ at: Int) -> (len: Int, hdr: Int) {
            let b = Int(spki[at + 1])
            if b < 0x80 { return (b, 2) }
            let n = b & 0x7F
            var l = 0
            for i in 0..<n { l = l << 8 | Int(spki[at + 2 + i]) }
            return (l, 2 + n)
        }
        let outer = header(0)
        let algAt = outer.hdr
        let alg = header(algAt)
        let bitsAt = algAt + alg.hdr + alg.len
        let bits = header(bitsAt)
        return Array(spki[(bitsAt + bits.hdr + 1)..<(bitsAt + bits.hdr + bits.len)])
    }
}
