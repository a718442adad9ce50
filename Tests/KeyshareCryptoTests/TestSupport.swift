import Foundation
import KeyshareCrypto

/// Fixture access, the openssl CLI and hex helpers shared by the crypto tests.
enum Fixtures {
    static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/testdata")

    static func bytes(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: root.appendingPathComponent(path)))
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    struct Row: Sendable, CustomStringConvertible {
        var kind, path, password, certDER, identity, category, serial, notBefore, key, profile, expect: String
        var description: String { path }
    }

    /// manifest.tsv rows (comments skipped); an empty password field is the empty password.
    static let manifest: [Row] = {
        guard let t = try? text("manifest.tsv") else { return [] }
        return t.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
            if line.hasPrefix("#") { return nil }
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 14 else { return nil }
            return Row(kind: f[0], path: f[1], password: f[2], certDER: f[3], identity: f[5], category: f[6],
                       serial: f[8], notBefore: f[9], key: f[10], profile: f[11], expect: f[13])
        }
    }()

    static func rows(_ kinds: String...) -> [Row] { manifest.filter { kinds.contains($0.kind) } }
}

enum Hex {
    static func decode(_ s: String) -> [UInt8] {
        let chars = Array(s.filter { !$0.isWhitespace })
        return stride(from: 0, to: chars.count, by: 2).map { UInt8(String(chars[$0...$0 + 1]), radix: 16)! }
    }

    static func encode(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
}

/// A scratch directory removed when the value is released.
final class TempDir {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ks-crypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }

    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let u = url.appendingPathComponent(name)
        try Data(bytes).write(to: u)
        return u.path
    }

    func write(_ name: String, _ text: String) throws -> String { try write(name, Array(text.utf8)) }
    func read(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: url.appendingPathComponent(name))) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

enum OpenSSLCLI {
    struct Result { var status: Int32; var output: String }

    /// Runs openssl with args; environment entries are added to this process's
    /// environment. Passwords go there (`-passin env:VAR`), never into args:
    /// every local user reads every process's argv in `ps`.
    static func run(_ args: [String], environment: [String: String] = [:]) throws -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        if !environment.isEmpty {
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }
}

/// Test-side DER for ECDSA signatures, independent of the code under test.
enum ECDSADER {
    static func encode(raw: [UInt8]) -> [UInt8] {
        func int(_ b: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(b.drop(while: { $0 == 0 }))
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02] + len(v.count) + v
        }
        let half = raw.count / 2
        let body = int(raw[0..<half]) + int(raw[half...])
        return [0x30] + len(body.count) + body
    }

    static func decode(der: [UInt8], size: Int) -> [UInt8] {
        var i = 1
        i += der[i] & 0x80 != 0 ? 1 + Int(der[i] & 0x7F) : 1
        var out: [UInt8] = []
        for _ in 0..<2 {
            precondition(der[i] == 0x02)
            let l = Int(der[i + 1])
            var v = Array(der[(i + 2)..<(i + 2 + l)]).drop(while: { $0 == 0 })
            while v.count < size { v.insert(0, at: v.startIndex) }
            out += v
            i += 2 + l
        }
        return out
    }

    private static func len(_ n: Int) -> [UInt8] { n < 0x80 ? [UInt8(n)] : [0x81, UInt8(n)] }
}

extension PrivateKey {
    static func fixture(_ identity: String) throws -> PrivateKey {
        try PrivateKey(pem: Fixtures.text("identities/\(identity).key.pem"))
    }
}

extension Certificate {
    static func fixture(_ identity: String) throws -> Certificate {
        try Certificate(der: Fixtures.bytes("identities/\(identity).cert.der"))
    }
}
