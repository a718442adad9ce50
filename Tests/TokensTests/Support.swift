import Foundation
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto
import Tokens

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
        try ["items", "attributes", "attr_lookup", "retired_refs"].map { t in
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
