import Foundation
import Testing
import KeyshareCrypto

@Suite struct CertificateTests {
    struct Expect: Sendable, CustomStringConvertible {
        var id, serial, notBefore, notAfter: String
        var ku: KeyUsage?
        var san: [GeneralName]
        var keyType: KeyType
        var serialDERContent: String? = nil
        var description: String { id }
    }

    static let email = GeneralName.rfc822("test.user.1234567890@mail.example")
    static let upn = GeneralName.upn("1234567890@mil")

    /// The identity table of testdata/README.md.
    static let table: [Expect] = [
        Expect(id: "device-ds-ke", serial: "048F", notBefore: "2025-01-10T08:00:00Z", notAfter: "2040-01-10T08:00:00Z",
               ku: [.digitalSignature, .keyEncipherment], san: [], keyType: .rsa),
        Expect(id: "device-ds-only", serial: "5A", notBefore: "2025-01-10T08:00:00Z", notAfter: "2040-01-10T08:00:00Z",
               ku: .digitalSignature, san: [.dns("test-device-1234567890.devices.example")], keyType: .rsa),
        Expect(id: "device-old-ec", serial: "01F4A3", notBefore: "2023-01-10T08:00:00Z", notAfter: "2038-01-10T08:00:00Z",
               ku: .digitalSignature, san: [], keyType: .ec),
        Expect(id: "signature-ds-nr", serial: "38AF", notBefore: "2023-05-01T12:00:00Z", notAfter: "2038-05-01T12:00:00Z",
               ku: [.digitalSignature, .nonRepudiation], san: [email], keyType: .rsa),
        Expect(id: "signature-ds-email", serial: "01", notBefore: "2025-02-03T12:00:00Z", notAfter: "2040-02-03T12:00:00Z",
               ku: .digitalSignature, san: [email], keyType: .ec),
        Expect(id: "auth-upn-old", serial: "7FFFFFFF0001", notBefore: "2023-09-15T00:00:00Z", notAfter: "2038-09-15T00:00:00Z",
               ku: .digitalSignature, san: [upn], keyType: .rsa),
        Expect(id: "auth-upn-new", serial: "8E2F55A1", notBefore: "2025-06-01T00:00:00Z", notAfter: "2040-06-01T00:00:00Z",
               ku: .digitalSignature,
               san: [.otherName(oid: "2.16.840.1.101.3.6.6"), upn, .uri("urn:uuid:a3e0c2b4-5d6f-4e1a-9b8c-7d6e5f4a3b2c")],
               keyType: .ec, serialDERContent: "008E2F55A1"),
        Expect(id: "encryption-gen1", serial: "0C3A5E", notBefore: "2022-04-01T00:00:00Z", notAfter: "2037-04-01T00:00:00Z",
               ku: .keyEncipherment, san: [email], keyType: .rsa),
        Expect(id: "encryption-gen2", serial: "4D2E1F00", notBefore: "2023-04-01T00:00:00Z", notAfter: "2038-04-01T00:00:00Z",
               ku: .keyEncipherment, san: [email], keyType: .rsa),
        Expect(id: "encryption-gen3", serial: "6E", notBefore: "2024-04-01T00:00:00Z", notAfter: "2039-04-01T00:00:00Z",
               ku: .keyEncipherment, san: [], keyType: .rsa),
        Expect(id: "unknown-no-ku", serial: "1234567890ABCDEF", notBefore: "2024-07-01T00:00:00Z", notAfter: "2039-07-01T00:00:00Z",
               ku: nil, san: [email, upn], keyType: .rsa),
    ]

    /// Issue 28 (`keyshare list`): the subject's common name and the
    /// ExtendedKeyUsage purposes, absent when the certificate has none.
    @Test func commonNameAndExtendedKeyUsage() throws {
        let device = try Certificate.fixture("device-ds-ke")
        #expect(device.commonName == "Test Device 1234567890")
        #expect(device.extendedKeyUsage == [.clientAuth])
        #expect(try Certificate.fixture("signature-ds-email").extendedKeyUsage == [.emailProtection])
        #expect(try Certificate.fixture("unknown-no-ku").extendedKeyUsage == [.emailProtection, .clientAuth])
        #expect(try Certificate.fixture("encryption-gen3").extendedKeyUsage == nil)
        let root = try Certificate(pem: try Fixtures.text("ca/root-ca.pem"))
        #expect(root.commonName == "Keyshare Test Root CA 1" && root.isCA && root.extendedKeyUsage == nil)
    }

    static func unix(_ iso: String) -> Int64 {
        Int64(ISO8601DateFormatter().date(from: iso)!.timeIntervalSince1970)
    }

    @Test(arguments: table)
    func identityFields(_ e: Expect) throws {
        let c = try Certificate.fixture(e.id)
        #expect(c.serialHex == e.serial)
        let content = e.serialDERContent ?? e.serial
        #expect(Hex.encode(c.serialNumberDER).uppercased() == String(format: "02%02X", content.count / 2) + content)
        #expect(c.notBefore == Self.unix(e.notBefore))
        #expect(c.notAfter == Self.unix(e.notAfter))
        #expect(c.keyUsage == e.ku)
        if e.id == "auth-upn-new" {
            // FASC-N's OID as written in the certificate; the other names exactly.
            #expect(c.subjectAltNames.count == 3)
            #expect(c.subjectAltNames.contains(Self.upn))
            #expect(c.subjectAltNames.contains(.uri("urn:uuid:a3e0c2b4-5d6f-4e1a-9b8c-7d6e5f4a3b2c")))
            #expect(c.subjectAltNames.contains { if case .otherName = $0 { true } else { false } })
        } else {
            #expect(c.subjectAltNames == e.san)
        }
        #expect(c.publicKey.keyType == e.keyType)
        #expect(!c.isCA)
        #expect(c.sha256Hex == Hex.encode(DigestAlgorithm.sha256.hash(c.der)).uppercased())
        #expect(c.sha1Fingerprint == DigestAlgorithm.sha1.hash(c.der))
        #expect(c.issuer.contains("CN=Keyshare Test Derived CA 2"))
        #expect(c.subject.hasPrefix("CN=Test "))
        #expect(c.subject.hasSuffix("O=U.S. Government,C=US"))

        let fromPEM = try Certificate(pem: Fixtures.text("identities/\(e.id).cert.pem"))
        #expect(fromPEM == c)
        // Cross-check subject/issuer DER and dates with the openssl CLI.
        let r = try OpenSSLCLI.run(["x509", "-in", Fixtures.root.appendingPathComponent("identities/\(e.id).cert.der").path,
                                    "-inform", "DER", "-noout", "-serial"])
        #expect(r.output.trimmingCharacters(in: .whitespacesAndNewlines) == "serial=\(e.serial)")
    }

    @Test func caCertificates() throws {
        let root = try Certificate(der: Fixtures.bytes("ca/root-ca.der"))
        #expect(root.isCA && root.serialHex == "7E57A0")
        #expect(root.subject == "CN=Keyshare Test Root CA 1,OU=PKI,OU=DoD,O=U.S. Government,C=US")
        #expect(root.subjectDER == root.issuerDER)
        #expect(root.notAfter == Self.unix("2049-12-31T23:59:59Z"))
        #expect(root.notBefore == Self.unix("2019-01-01T00:00:00Z"))
        #expect(root.publicKey.bits == 4096)
        let chain = try Certificate.parseAll(pem: Fixtures.text("ca/ca-chain.pem"))
        #expect(chain.count == 2)
        #expect(chain[0] == (try Certificate(der: Fixtures.bytes("ca/intermediate-ca.der"))))
        #expect(chain[1] == root)
        #expect(chain[0].issuerDER == root.subjectDER)
        let unrelated = try Certificate(pem: Fixtures.text("ca/unrelated-root-ca.pem"))
        #expect(unrelated.serialHex == "0BAD0BAD" && unrelated.publicKey.curve == .p256)
        #expect(throws: CryptoError.self) { try Certificate.parseAll(pem: "no certificates here") }
    }
}
