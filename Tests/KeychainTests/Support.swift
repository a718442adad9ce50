import Foundation
@testable import Keychain
import KeyshareCrypto

/// A throwaway KEYSHARE_HOME per test, removed when the test ends.
final class TempHome {
    let path: String

    init() {
        var template = Array((NSTemporaryDirectory() + "keychain-test-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!) + "/home"
    }

    deinit { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

    func store() throws -> KeychainStore { try KeychainStore(home: path, kdfLog2N: 10) }

    /// Every byte the store has on disk: the database, its WAL and shared memory.
    func allBytes() -> [UInt8] {
        var out: [UInt8] = []
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if let d = FileManager.default.contents(atPath: path + "/keychain.db" + suffix) { out += Array(d) }
        }
        return out
    }
}

let soPIN = Array("so-secret-9931".utf8)
let userPIN = Array("user-secret-4417".utf8)

func makeToken(_ store: KeychainStore, _ name: String = "com.keyshare.soft:00112233AABBCCDD", maxAttempts: Int = 10) throws -> TokenID {
    let id = TokenID(name)!
    _ = try store.createToken(id, label: "Test \(name.suffix(4))", soPIN: soPIN, userPIN: userPIN, maxPINAttempts: maxAttempts)
    return id
}

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    let first = needle[0]
    var i = 0
    let last = haystack.count - needle.count
    while i <= last {
        if haystack[i] == first && Array(haystack[i..<(i + needle.count)]) == needle { return true }
        i += 1
    }
    return false
}

extension AttributeMap {
    static func certLike(label: String, id: [UInt8], value: [UInt8]) -> AttributeMap {
        [CKA.token: AttributeCoding.bool(true), CKA.private: AttributeCoding.bool(false),
         CKA.label: Array(label.utf8), CKA.id: id, CKA.value: value,
         CKA.certificateType: AttributeCoding.ulong(CKC.x509)]
    }
}
