import Foundation
import Testing
import KeyshareCrypto

/// PKCS #10 requests assembled by OpenSSL and signed by a callback (in
/// keyshare: the token's key), checked by `openssl req -verify` and by
/// reading the extension back.
@Suite struct CertificateRequestTests {
    @Test(arguments: ["device-ds-ke", "auth-upn-new"])
    func signedByTheCallbackAndVerifiedByOpenSSL(identity: String) throws {
        let key = try PrivateKey.fixture(identity)
        var calls = 0
        let der = try CertificateRequest.build(
            subject: try CertificateRequest.parseSubject("/CN=Alice Example/O=Example\\/Inc"),
            altNames: [try .init(argument: "email:alice@example.com"), try .init(argument: "upn:alice@EXAMPLE.COM"),
                       try .init(argument: "ip:192.0.2.7")],
            publicKey: key.publicKey) { tbs, algorithm in
                calls += 1
                #expect(algorithm == CertificateRequest.signatureAlgorithm(for: key.publicKey))
                return try key.sign(message: tbs, algorithm: algorithm)
            }
        #expect(calls == 1)
        #expect(try CertificateRequest.verify(der))
        let dir = try TempDir()
        let path = try dir.write("req.pem", try CertificateRequest.pem(der))
        let r = try OpenSSLCLI.run(["req", "-in", path, "-verify", "-noout", "-text"])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("verify OK"))
        #expect(r.output.contains("CN = Alice Example, O = Example/Inc"))
        #expect(r.output.contains("email:alice@example.com"))
        #expect(r.output.contains("UPN::alice@EXAMPLE.COM") || r.output.contains("UPN:alice@EXAMPLE.COM"))
        #expect(r.output.contains("IP Address:192.0.2.7"))
    }

    @Test func anotherSignersKeyIsAnError() throws {
        let key = try PrivateKey.fixture("auth-upn-new")
        let other = try PrivateKey.generateEC(.p256)
        #expect(throws: CryptoError.self) {
            _ = try CertificateRequest.build(subject: [("CN", "x")], altNames: [], publicKey: key.publicKey) { tbs, alg in
                try other.sign(message: tbs, algorithm: alg)
            }
        }
    }

    @Test func badSubjectsAndNames() throws {
        #expect(throws: CryptoError.self) { _ = try CertificateRequest.parseSubject("CN=no-slash") }
        #expect(throws: CryptoError.self) { _ = try CertificateRequest.parseSubject("/CN") }
        #expect(throws: CryptoError.self) { _ = try CertificateRequest.AltName(argument: "x400:foo") }
        #expect(throws: CryptoError.self) { _ = try CertificateRequest.AltName(argument: "ip:999.1.1.1") }
        let key = try PrivateKey.fixture("auth-upn-new")
        #expect(throws: CryptoError.self) {
            _ = try CertificateRequest.build(subject: [("NoSuchAttr", "x")], altNames: [], publicKey: key.publicKey) { tbs, a in
                try key.sign(message: tbs, algorithm: a)
            }
        }
    }
}
