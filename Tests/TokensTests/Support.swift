import Foundation
@testable import Keychain
import KeyshareCrypto
import Tokens

final class TempHome {
    let path: String

    init() {
        var template = Array((NSTemporaryDirectory() + "tokens-test-XXXXXX").utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!) + "/home"
    }

    deinit { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

    func store() throws -> KeychainStore { try KeychainStore(home: path, kdfLog2N: 10) }

    func allBytes() -> [UInt8] {
        var out: [UInt8] = []
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if let d = FileManager.default.contents(atPath: path + "/keychain.db" + suffix) { out += Array(d) }
        }
        return out
    }
}

enum Fixture {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        url.deleteLastPathComponent()
        url.deleteLastPathComponent()
        return url.appendingPathComponent("Fixtures/testdata").path
    }()

    static func bytes(_ rel: String) throws -> [UInt8] {
        guard let d = FileManager.default.contents(atPath: root + "/" + rel) else {
            throw KeychainError.invalidArgument("missing fixture \(rel)")
        }
        return Array(d)
    }

    static func text(_ rel: String) throws -> String { String(decoding: try bytes(rel), as: UTF8.self) }

    static let password = "keyshare-test"
}

let soPIN = Array("so-pin-7788".utf8)
let userPIN = Array("user-pin-5566".utf8)

struct Env {
    let home = TempHome()
    let store: KeychainStore
    let manager: TokenManager
    let token: TokenRecord
    let key: TokenKey

    init() throws {
        store = try home.store()
        manager = TokenManager(store: store)
        token = try manager.createSoftToken(label: "Soft", soPIN: soPIN, userPIN: userPIN)
        key = try store.unlockUser(token.tokenID, pin: userPIN)
    }

    func rowCounts() throws -> [Int64] {
        try ["items", "attributes", "attr_index", "retired_refs"].map { t in
            try store.db.query("SELECT COUNT(*) FROM \(t)") { $0.int(0) }[0]
        }
    }
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
