import Foundation
import Testing
import KeyshareCrypto
@testable import KeySharing

@Suite struct CategoryTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/testdata")

    /// (certificate DER path, category) of every `cert` row of manifest.tsv.
    static let rows: [[String]] = {
        guard let t = try? String(contentsOf: root.appendingPathComponent("manifest.tsv"), encoding: .utf8) else { return [] }
        return t.split(separator: "\n").filter { !$0.hasPrefix("#") }
            .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
            .filter { $0.count >= 14 && ($0[0] == "cert" || $0[0] == "p12" || $0[0] == "p12-nokey") }
            .map { [$0[3], $0[6], $0[8]] }
    }()

    static func cert(_ path: String) throws -> Certificate {
        try Certificate(der: [UInt8](Data(contentsOf: root.appendingPathComponent(path))))
    }

    @Test func manifestHasRows() { #expect(Self.rows.count >= 11) }

    @Test(arguments: rows)
    func categoryMatchesManifest(_ row: [String]) throws {
        let c = try Self.cert(row[0])
        let category = CertificateCategory(certificate: c)
        #expect(category.rawValue == row[1], "\(row[0])")
        let type = category == .authentication ? "piv" : row[1]
        #expect(category.displayFileName(for: c) == "\(type)_\(row[2]).p12")
    }

    @Test func displayNames() throws {
        let c = try Self.cert("identities/auth-upn-new.cert.der")
        #expect(CertificateCategory(certificate: c).displayFileName(for: c) == "piv_8E2F55A1.p12")
        let e = try Self.cert("identities/device-ds-ke.cert.der")
        #expect(CertificateCategory(certificate: e).displayFileName(for: e) == "device_048F.p12")
        #expect(CertificateCategory.authentication.displayType == "piv")
        #expect(CertificateCategory.encryption.displayType == "encryption")
    }

    /// CA certificates carry keyCertSign/cRLSign only: no row fits.
    @Test func caCertificateIsUnknown() throws {
        #expect(CertificateCategory(certificate: try Self.cert("ca/root-ca.der")) == .unknown)
    }
}
