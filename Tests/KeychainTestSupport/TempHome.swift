import Foundation
import Keychain

/// A throwaway KEYSHARE_HOME per test, removed when the test ends; shared by
/// the test targets that open stores so they agree on the KDF cost and layout.
public final class TempHome: @unchecked Sendable {
    public let path: String

    public init(prefix: String = "keyshare-test") {
        var template = Array((NSTemporaryDirectory() + prefix + "-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!) + "/home"
    }

    deinit { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

    /// A store at the lowest KDF cost: the tests are about behaviour, not PIN hardness.
    public func store() throws -> KeychainStore { try KeychainStore(home: path, kdfLog2N: 10) }

    /// Every byte the store has on disk: the database, its WAL and shared memory.
    public func allBytes() -> [UInt8] {
        var out: [UInt8] = []
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if let d = FileManager.default.contents(atPath: path + "/keychain.db" + suffix) { out += Array(d) }
        }
        return out
    }
}
