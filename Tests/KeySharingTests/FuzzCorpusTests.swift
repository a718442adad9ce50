import Foundation
import Testing
import KeyshareCrypto
import KeySharing

/// Replays the kept fuzz corpora and every crash reproducer (Tests/fuzz, issue 8)
/// through the same calls as the libFuzzer harness Tests/fuzz/swift/Fuzz.swift,
/// so a parser regression on any input the fuzzer once found shows up in
/// `make test` without a sanitizer build. Passing = returning without a trap.
@Suite struct FuzzCorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz")

    static func inputs(_ target: String) -> [[UInt8]] {
        let fm = FileManager.default
        var urls: [URL] = []
        let corpus = fuzz.appendingPathComponent("corpus/\(target)")
        urls += ((try? fm.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)) ?? [])
        let crashes = fuzz.appendingPathComponent("crashes")
        urls += ((try? fm.contentsOfDirectory(at: crashes, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.lastPathComponent.hasPrefix("\(target)-") }
        return urls.compactMap { try? [UInt8](Data(contentsOf: $0)) }
    }

    @Test func pkcs12Corpus() {
        for bytes in Self.inputs("pkcs12") {
            _ = try? PKCS12.parse(bytes, password: "keyshare-test")
            _ = try? PKCS12.parse(bytes, password: "")
        }
    }

    @Test func x509Corpus() {
        for bytes in Self.inputs("x509") {
            if let cert = try? Certificate(der: bytes) {
                _ = CertificateCategory(certificate: cert).displayFileName(for: cert)
                _ = (cert.subject, cert.issuer, cert.serialHex, cert.subjectAltNames, cert.keyUsage, cert.isCA)
            }
            if let text = String(bytes: bytes, encoding: .utf8) { _ = try? Certificate.parseAll(pem: text) }
        }
    }

    @Test func passwordRequestCorpus() {
        for bytes in Self.inputs("password") {
            _ = PasswordProtocol.validate(bytes)
            _ = try? JSONDecoder().decode(PasswordProtocol.Reply.self, from: Data(bytes))
        }
        let good = Array(#"{"v":1,"service":"red.hound.KeySharingPassword-v1.0.0","call":"fetchPassword"}"#.utf8)
        #expect((try? PasswordProtocol.validate(good).get()) != nil)
    }
}
