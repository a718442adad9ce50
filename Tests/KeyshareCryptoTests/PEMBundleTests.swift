import Foundation
import Testing
import KeyshareCrypto

/// PEM files as people hand them over: a key with its certificate in either
/// order, `openssl pkcs12 -nodes` output, chains, encrypted keys in both
/// forms (issue 14 items 2 and 3).
@Suite struct PEMBundleTests {
    let certPEM: String
    let keyPEM: String
    let cert: Certificate

    init() throws {
        certPEM = try Fixtures.text("identities/device-ds-ke.cert.pem")
        keyPEM = try Fixtures.text("identities/device-ds-ke.key.pem")
        cert = try Certificate.fixture("device-ds-ke")
    }

    private func noPassword() throws -> [UInt8] { Issue.record("no password should be asked"); return [] }

    @Test func keyAndCertificateInEitherOrder() throws {
        for text in [keyPEM + certPEM, certPEM + keyPEM] {
            let b = try PEMBundle.parse(text, password: noPassword)
            #expect(b.privateKeys.count == 1)
            #expect(b.certificates == [cert])
            #expect(b.privateKeys[0].matches(cert.publicKey))
        }
    }

    @Test func opensslNodesOutputWithBagAttributes() throws {
        let dir = try TempDir()
        let pw = try dir.write("pw", "keyshare-test\n")
        let out = dir.path("nodes.pem")
        let r = try OpenSSLCLI.run(["pkcs12", "-in", Fixtures.root.appendingPathComponent("identities/device-ds-ke.modern.p12").path,
                                    "-nodes", "-passin", "file:" + pw, "-out", out])
        #expect(r.status == 0, "\(r.output)")
        let text = try String(contentsOfFile: out, encoding: .utf8)
        #expect(text.contains("Bag Attributes"))
        let b = try PEMBundle.parse(text, password: noPassword)
        #expect(b.privateKeys.count == 1)
        #expect(b.certificates.count >= 2)   // leaf + chain
        #expect(b.certificates.contains(cert))
    }

    @Test func everyCertificateOfAChain() throws {
        let chain = try Fixtures.text("ca/ca-chain.pem")
        let text = certPEM + chain
        let b = try PEMBundle.parse(text, password: noPassword)
        #expect(b.certificates.count == 1 + (try Certificate.parseAll(pem: chain)).count)
        #expect(b.privateKeys.isEmpty)
    }

    @Test func encryptedPKCS8AndTraditionalKeys() throws {
        let dir = try TempDir()
        let pw = try dir.write("pw", "enc-pass-7\n")
        let plain = try dir.write("k.pem", keyPEM)
        let ec = try dir.write("ec.pem", Fixtures.text("identities/auth-upn-new.key.pem"))
        let forms: [(String, [String])] = [
            ("pkcs8-aes", ["pkcs8", "-topk8", "-in", plain, "-v2", "aes-256-cbc", "-passout", "file:" + pw]),
            ("rsa-traditional-aes", ["rsa", "-in", plain, "-aes256", "-traditional", "-passout", "file:" + pw]),
            ("ec-traditional-3des", ["ec", "-in", ec, "-des3", "-passout", "file:" + pw]),
        ]
        for (name, args) in forms {
            let out = dir.path(name + ".pem")
            let r = try OpenSSLCLI.run(args + ["-out", out])
            #expect(r.status == 0, "\(name): \(r.output)")
            let text = try String(contentsOfFile: out, encoding: .utf8)
            #expect(text.contains("ENCRYPTED"), "\(name)")
            var asked = 0
            let b = try PEMBundle.parse(text + certPEM) { asked += 1; return Array("enc-pass-7".utf8) }
            #expect(asked == 1, "\(name)")
            #expect(b.privateKeys.count == 1, "\(name)")
            // A wrong password is named as such, not an OpenSSL error chain.
            do {
                _ = try PEMBundle.parse(text) { Array("wrong".utf8) }
                Issue.record("\(name): a wrong password was accepted")
            } catch let e as CryptoError {
                #expect(e.kind == .wrongPassword, "\(name): \(e)")
                #expect(e.description == "PEM block 1 (\(name.hasPrefix("pkcs8") ? "ENCRYPTED PRIVATE KEY" : name.hasPrefix("rsa") ? "RSA PRIVATE KEY" : "EC PRIVATE KEY")): wrong password for the encrypted private key")
            }
        }
    }

    @Test func unimportableBlocksAreRefusedByName() throws {
        let csr = "-----BEGIN CERTIFICATE REQUEST-----\nMIIBAA==\n-----END CERTIFICATE REQUEST-----\n"
        do {
            _ = try PEMBundle.parse(certPEM + csr, password: noPassword)
            Issue.record("a certificate request was accepted")
        } catch let e as CryptoError {
            #expect(e.kind == .unsupported)
            #expect(e.description.hasPrefix("PEM block 2 (CERTIFICATE REQUEST): "))
        }
        #expect(throws: CryptoError.self) { _ = try PEMBundle.parse(String(certPEM.dropLast(30)), password: noPassword) }
        #expect(throws: CryptoError.self) { _ = try PEMBundle.parse("no pem here", password: noPassword) }
        let ecParams = try OpenSSLCLI.run(["ecparam", "-name", "prime256v1", "-genkey"])
        let b = try PEMBundle.parse(ecParams.output, password: noPassword)
        #expect(b.privateKeys.count == 1 && b.skipped.count == 1)
    }
}
