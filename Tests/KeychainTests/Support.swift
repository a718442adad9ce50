import Foundation
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto


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
