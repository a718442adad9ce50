import Foundation
import KeyshareCrypto
@testable import KeySharing

/// The shared test credentials (Tests/Fixtures/testdata): manifest rows and certificates.
enum Fixture {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/testdata")

    struct Row {
        var kind, path, password, certDER, share, identity, category, offered, serial, notBefore, key: String
    }

    static let rows: [Row] = {
        guard let t = try? String(contentsOf: root.appendingPathComponent("manifest.tsv"), encoding: .utf8) else { return [] }
        return t.split(separator: "\n").filter { !$0.hasPrefix("#") }
            .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
            .filter { $0.count >= 14 }
            .map { Row(kind: $0[0], path: $0[1], password: $0[2], certDER: $0[3], share: $0[4], identity: $0[5],
                       category: $0[6], offered: $0[7], serial: $0[8], notBefore: $0[9], key: $0[10]) }
    }()

    /// One row per identity: the PKCS #12 files marked `share`.
    static var shareRows: [Row] { rows.filter { $0.kind == "p12" && $0.share == "share" } }

    static func bytes(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: root.appendingPathComponent(path)))
    }

    static func certificate(_ path: String) throws -> Certificate { try Certificate(der: bytes(path)) }

    /// The share set as the tree sees it, labelled as import labels them.
    static func shareIdentities() throws -> [ShareIdentity] {
        try shareRows.map { row in
            let c = try certificate(row.certDER)
            return ShareIdentity(label: c.sha256Hex, certificate: c)
        }
    }

    struct ExpectedTree: Decodable {
        var root: [String]
        var folders: [String: [String]]
        var zips: [String: [String]]
    }

    static func expectedTree() throws -> ExpectedTree {
        try JSONDecoder().decode(ExpectedTree.self, from: Data(bytes("expected-tree.json")))
    }
}
