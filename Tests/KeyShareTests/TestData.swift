import Foundation
import KeyShare

/// Fixture files, found relative to this source file (Tests/Fixtures/testdata).
enum TestData {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/testdata")

    static func bytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: root.appendingPathComponent(path))) }
    static func certificateDER() throws -> [UInt8] { try bytes("identities/device-ds-ke.cert.der") }
    static func pem(_ path: String) throws -> Certificate { try Certificate(pem: String(decoding: bytes(path), as: UTF8.self)) }

    /// A scratch file path in a fresh temporary directory.
    static func scratch(_ name: String) -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyshare-lib-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent(name).path
    }
}
