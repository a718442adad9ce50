import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto

@Suite struct EncryptionTests {
    let secret = Array("TOP-SECRET-VALUE-0123456789abcdef".utf8)

    func setup(_ home: TempHome) throws -> (KeychainStore, TokenID, TokenKey, PersistentReference, PersistentReference) {
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        let a = try store.add(token: token, itemClass: .secretKey, attributes: [
            CKA.private: AttributeCoding.bool(true), CKA.label: Array("secret-label-A".utf8), CKA.value: secret,
        ], key: key)
        let b = try store.add(token: token, itemClass: .secretKey, attributes: [
            CKA.private: AttributeCoding.bool(true), CKA.label: Array("secret-label-B".utf8), CKA.value: Array("other".utf8),
        ], key: key)
        return (store, token, key, a, b)
    }

    @Test func secretsAndPINsNeverOnDisk() throws {
        let home = TempHome()
        do {
            let (store, _, key, a, _) = try setup(home)
            #expect(try store.item(a, key: key).attributes[CKA.value] == secret)
        }
        let bytes = home.allBytes()
        #expect(!bytes.isEmpty)
        #expect(!contains(bytes, secret))
        #expect(!contains(bytes, Array("secret-label-A".utf8)))
        #expect(!contains(bytes, userPIN))
        #expect(!contains(bytes, soPIN))
    }

    private func rowID(_ store: KeychainStore, _ ref: PersistentReference) throws -> Int64 {
        try store.db.query("SELECT id FROM items WHERE pref = ?", [.blob(ref.bytes)]) { $0.int(0) }[0]
    }

    @Test func ciphertextMovedToAnotherRowFails() throws {
        let home = TempHome()
        let (store, _, key, a, b) = try setup(home)
        let ra = try rowID(store, a), rb = try rowID(store, b)
        try store.db.run("UPDATE attributes SET value = (SELECT value FROM attributes WHERE item = ?1 AND type = ?3) WHERE item = ?2 AND type = ?3",
                         [.int(ra), .int(rb), .int(Int64(CKA.value))])
        #expect {
            _ = try store.item(b, key: key)
        } throws: { e in
            guard case KeychainError.decryptionFailed(let m) = e else { return false }
            return m.contains("moved")
        }
        #expect(try store.item(a, key: key).attributes[CKA.value] == secret)
    }

    @Test func ciphertextMovedToAnotherAttributeFails() throws {
        let home = TempHome()
        let (store, _, key, a, _) = try setup(home)
        let ra = try rowID(store, a)
        try store.db.run("UPDATE attributes SET value = (SELECT value FROM attributes WHERE item = ?1 AND type = ?2) WHERE item = ?1 AND type = ?3",
                         [.int(ra), .int(Int64(CKA.value)), .int(Int64(CKA.label))])
        #expect(throws: KeychainError.self) { _ = try store.item(a, key: key) }
    }

    @Test func flippedByteFails() throws {
        let home = TempHome()
        let (store, _, key, a, _) = try setup(home)
        let ra = try rowID(store, a)
        var v = try store.db.query("SELECT value FROM attributes WHERE item = ? AND type = ?", [.int(ra), .int(Int64(CKA.value))]) { $0.blob(0) }[0]
        v[v.count / 2] ^= 0x01
        try store.db.run("UPDATE attributes SET value = ? WHERE item = ? AND type = ?", [.blob(v), .int(ra), .int(Int64(CKA.value))])
        #expect {
            _ = try store.item(a, key: key)
        } throws: { e in
            if case KeychainError.decryptionFailed = e { return true }
            return false
        }
        // The same ciphertext under another token's key does not open either.
        let other = try makeToken(store, "com.keyshare.soft:1111111111111111")
        let otherKey = try store.unlockUser(other, pin: userPIN)
        #expect(throws: KeychainError.itemNotFound) { _ = try store.item(a, key: otherKey) }
    }

    @Test func privacyChangeReencrypts() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        let ref = try store.add(token: token, itemClass: .data, attributes: [
            CKA.label: Array("was-public-label".utf8), CKA.value: Array("data-object-value-123".utf8),
        ], key: nil)
        try store.update(ref, attributes: [CKA.private: AttributeCoding.bool(true)], key: key)
        #expect(throws: KeychainError.itemNotFound) { _ = try store.item(ref, key: nil) }
        let item = try store.item(ref, key: key)
        #expect(item.isPrivate)
        #expect(item.attributes[CKA.value] == Array("data-object-value-123".utf8))
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("was-public-label".utf8)]), key: key).count == 1)
        let enc = try store.db.query("SELECT COUNT(*) FROM attributes WHERE encrypted = 1") { $0.int(0) }[0]
        #expect(enc >= 2)
    }
}
