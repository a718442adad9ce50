import Foundation
import Testing
import KeyshareCrypto
@testable import KeySharing

/// Issue 18: ML-DSA and ML-KEM identities follow the key-sharing category rules and the share
/// tree's default filter exactly as RSA and EC ones do (only Key Usage, SAN and notBefore count).
/// The certificates are OpenSSL 3.5's (Tests/Fixtures/pq/README.md); with Debian 12's OpenSSL 3.0
/// (`make OPENSSL=system`) they cannot be parsed, so the suite runs only where the engine has them.
@Suite(.enabled(if: CryptoEngine.hasPostQuantum, "needs OpenSSL 3.5 (post-quantum)"))
struct PostQuantumCategoryTests {
    static let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/pq")

    static func cert(_ name: String) throws -> Certificate {
        try Certificate(der: [UInt8](Data(contentsOf: dir.appendingPathComponent("\(name).cert.der"))))
    }

    /// (file, key type, category, display name)
    static let cases: [(String, KeyType, CertificateCategory, String)] = [
        ("mldsa44-device", .mlDSA(.mlDSA44), .device, "device_44.p12"),
        ("mldsa65-signature", .mlDSA(.mlDSA65), .signature, "signature_65.p12"),
        ("mldsa87-auth", .mlDSA(.mlDSA87), .authentication, "piv_87.p12"),
        ("mlkem768-enc", .mlKEM(.mlKEM768), .encryption, "encryption_0768.p12"),
    ]

    @Test func categoriesAndDisplayNames() throws {
        for (name, type, category, display) in Self.cases {
            let c = try Self.cert(name)
            #expect(c.publicKey.keyType == type, "\(name)")
            #expect(CertificateCategory(certificate: c) == category, "\(name)")
            #expect(CertificateCategory(certificate: c).displayFileName(for: c) == display, "\(name)")
        }
        // The ML-DSA root: keyCertSign/cRLSign only, like the RSA root.
        #expect(CertificateCategory(certificate: try Self.cert("root")) == .unknown)
    }

    /// Mixed with the classic set: each PQ identity is the newest of its category (notBefore
    /// 2026), so the default filter offers it and hides the older RSA/EC generation, except for
    /// encryption, where every generation stays; the unfiltered folder has them all.
    @Test func shareTreeTreatsThemLikeOtherKeys() throws {
        let pq = try Self.cases.map { c in
            let cert = try Self.cert(c.0)
            return ShareIdentity(label: cert.sha256Hex, certificate: cert)
        }
        let tree = ShareTree(identities: try Fixture.shareIdentities() + pq, now: 1_800_000_000)
        func folder(_ n: String) -> [String] { tree.folders.first { $0.fileName == n }?.children.map(\.fileName) ?? [] }
        #expect(folder("PIV") == ["piv_87.p12"])
        #expect(folder("Signature") == ["signature_65.p12"])
        #expect(folder("Device") == ["device_44.p12"])
        #expect(folder("Encryption") == ["encryption_0768.p12", "encryption_0C3A5E.p12", "encryption_4D2E1F00.p12", "encryption_6E.p12"])
        #expect(Set(folder("Unfiltered")).isSuperset(of: Self.cases.map(\.3)))
        #expect(Set(folder("Unfiltered")).isSuperset(of: ["piv_8E2F55A1.p12", "signature_01.p12", "device_048F.p12"]))
        #expect(Set(tree.root.map(\.fileName)) == Set(["device_44.p12", "piv_87.p12", "signature_65.p12", "encryption_0768.p12",
                                                        "encryption_0C3A5E.p12", "encryption_4D2E1F00.p12", "encryption_6E.p12"]))
        let zip = try #require(tree.entry("PIV.zip"))
        #expect(zip.kind == .zip)
    }
}
