import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto

@Suite struct StoreTests {
    @Test func filesAreOwnerOnly() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        var st = stat()
        #expect(stat(home.path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
        for f in ["/keychain.db", "/keychain.db-wal", "/keychain.db-shm"] {
            #expect(stat(home.path + f, &st) == 0)
            #expect(st.st_mode & 0o077 == 0, "\(f) mode \(String(st.st_mode & 0o777, radix: 8))")
        }
        // A loosened file is tightened at the next open.
        chmod(home.path + "/keychain.db", 0o644)
        _ = try home.store()
        #expect(stat(home.path + "/keychain.db", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
    }

    @Test func addFindUpdateDelete() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let ref = try store.add(token: token, itemClass: .certificate,
                                attributes: .certLike(label: "one", id: [1, 2], value: [9, 9, 9]), key: nil)
        let got = try store.item(ref, key: nil)
        #expect(got.itemClass == .certificate)
        #expect(got.tokenID == token)
        #expect(!got.isPrivate)
        #expect(got.attributes[CKA.label] == Array("one".utf8))
        #expect(got.attributes.ulong(CKA.class) == CKO.certificate)

        try store.update(ref, attributes: [CKA.label: Array("renamed".utf8)], key: nil)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("one".utf8)]), key: nil).isEmpty)
        let found = try store.find(ItemQuery(attributes: [CKA.label: Array("renamed".utf8)]), key: nil)
        #expect(found.map(\.reference) == [ref])
        #expect(found[0].attributes[CKA.id] == [1, 2])

        try store.delete(ref)
        #expect(throws: KeychainError.itemNotFound) { try store.item(ref, key: nil) }
        #expect(throws: KeychainError.itemNotFound) { try store.delete(ref) }
        #expect(throws: KeychainError.itemNotFound) { try store.update(ref, attributes: [:], key: nil) }
    }

    @Test func matchesByEveryAttributeAndLimit() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        var refs: [PersistentReference] = []
        for i in 0..<4 {
            refs.append(try store.add(token: token, itemClass: .certificate,
                                      attributes: .certLike(label: "c\(i % 2)", id: [UInt8(i)], value: [UInt8](repeating: UInt8(i), count: 300)),
                                      key: nil))
        }
        let priv = try store.add(token: token, itemClass: .privateKey, attributes: [
            CKA.private: AttributeCoding.bool(true), CKA.label: Array("k".utf8), CKA.id: [7],
            CKA.sign: AttributeCoding.bool(true), CKA.keysharePKCS8: [1, 2, 3],
        ], key: key)

        // Every stored attribute of every item finds that item.
        for ref in refs + [priv] {
            let item = try store.item(ref, key: key)
            for (type, value) in item.attributes {
                let hits = try store.find(ItemQuery(attributes: [type: value]), key: key)
                #expect(hits.contains { $0.reference == ref }, "attribute 0x\(String(type, radix: 16))")
            }
            let all = try store.find(ItemQuery(attributes: item.attributes), key: key)
            #expect(all.map(\.reference) == [ref])
        }
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("c0".utf8)]), key: nil).count == 2)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("c0".utf8)], limit: .one), key: nil).count == 1)
        #expect(try store.find(ItemQuery(itemClass: .certificate), key: nil).count == 4)
        #expect(try store.find(ItemQuery(tokenID: token), key: key).count == 5)
        #expect(try store.find(ItemQuery(reference: refs[2]), key: nil).map(\.reference) == [refs[2]])
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("nope".utf8)]), key: nil).isEmpty)
        // Private items are invisible without the key, even by exact attribute.
        #expect(try store.find(ItemQuery(attributes: [CKA.id: [7]]), key: nil).isEmpty)
        #expect(throws: KeychainError.itemNotFound) { try store.item(priv, key: nil) }
        #expect(try store.find(ItemQuery(attributes: [CKA.id: [7]]), key: key).map(\.reference) == [priv])
        #expect(try store.count(token: token) == 5)
    }

    @Test func persistentReferencesSurviveReopenAndAreNeverReused() throws {
        let home = TempHome()
        var ref: PersistentReference
        var gone: PersistentReference
        do {
            let store = try home.store()
            let token = try makeToken(store)
            ref = try store.add(token: token, itemClass: .data, attributes: [CKA.label: Array("keep".utf8)], key: nil)
            gone = try store.add(token: token, itemClass: .data, attributes: [CKA.label: Array("gone".utf8)], key: nil)
            try store.delete(gone)
        }
        let store = try home.store()
        let text = ref.base64url
        let parsed = try #require(PersistentReference(base64url: text))
        #expect(try store.item(parsed, key: nil).attributes[CKA.label] == Array("keep".utf8))
        #expect(throws: KeychainError.itemNotFound) { try store.item(gone, key: nil) }
        #expect(try store.isRetired(gone))
        #expect(try !store.isRetired(ref))
        #expect(PersistentReference(base64url: "AAAA") == nil)
    }

    @Test func absentTokenHidesItsItems() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let other = try makeToken(store, "com.keyshare.soft:FFFFFFFFFFFFFFFF")
        let ref = try store.add(token: token, itemClass: .data, attributes: [CKA.label: Array("x".utf8)], key: nil)
        _ = try store.add(token: other, itemClass: .data, attributes: [CKA.label: Array("x".utf8)], key: nil)
        try store.setPresent(token, false)
        #expect(throws: KeychainError.itemNotFound) { try store.item(ref, key: nil) }
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("x".utf8)]), key: nil).count == 1)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("x".utf8)], includeAbsentTokens: true), key: nil).count == 2)
        try store.setPresent(token, true)
        #expect(try store.item(ref, key: nil).tokenID == token)
    }

    @Test func slotIDsAreStableAndNeverReused() throws {
        let home = TempHome()
        let store = try home.store()
        let a = try makeToken(store)
        let slot = try #require(try store.token(a)).slotID
        #expect(slot >= 0x100)
        try store.deleteToken(a)
        _ = try makeToken(store)
        #expect(try store.token(a)?.slotID == slot)
        let b = try makeToken(store, "com.keyshare.soft:0000000000000001")
        #expect(try store.token(b)?.slotID != slot)
        #expect(try store.token(slotID: slot)?.tokenID == a)
        #expect(throws: KeychainError.tokenExists) { _ = try makeToken(store) }
    }

    @Test func transactionRollsBack() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.transaction {
                _ = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [1]], key: nil)
                throw Boom()
            }
        }
        #expect(try store.count(token: token) == 0)
        try store.transaction {
            _ = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [1]], key: nil)
            _ = try? store.transaction { () throws -> Void in
                _ = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [2]], key: nil)
                throw Boom()
            }
        }
        #expect(try store.count(token: token) == 1)
    }

    @Test func twoStoresSeeEachOthersWrites() throws {
        let home = TempHome()
        let a = try home.store()
        let b = try home.store()
        let token = try makeToken(a)
        // Read from the WAL-index in shared memory, not through a PRAGMA.
        #expect(a.changeCounterIsLockFree && b.changeCounterIsLockFree)
        let before = try b.changeCounter()
        #expect(try b.changeCounter() == before)
        let ref = try a.add(token: token, itemClass: .data, attributes: [CKA.label: [5]], key: nil)
        #expect(try b.changeCounter() != before)
        #expect(try b.item(ref, key: nil).attributes[CKA.label] == [5])
        let mine = try a.changeCounter()
        try a.delete(ref)
        #expect(try a.changeCounter() != mine)
    }

    /// Every commit moves the counter, also across checkpoints that restart
    /// the WAL from its first frame (the header then repeats its frame count).
    @Test func changeCounterMovesOnEveryCommitAcrossCheckpoints() throws {
        let home = TempHome()
        let a = try home.store()
        let b = try home.store()
        let token = try makeToken(a)
        var seen: Set<UInt64> = [try b.changeCounter()]
        for i in 0..<40 {
            _ = try a.add(token: token, itemClass: .data, attributes: [CKA.label: [UInt8(i)]], key: nil)
            if i % 10 == 9 { try a.checkpoint() }
            let now = try b.changeCounter()
            #expect(!seen.contains(now), "commit \(i) left the counter at a value already seen")
            seen.insert(now)
            #expect(try b.changeCounter() == now)
        }
    }

    @Test func concurrentThreadsAndStores() async throws {
        let home = TempHome()
        let setup = try home.store()
        let token = try makeToken(setup)
        let stores = [setup, try home.store()]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    let s = stores[t % 2]
                    for i in 0..<10 {
                        let ref = try s.add(token: token, itemClass: .data, attributes: [CKA.label: [UInt8(t), UInt8(i)]], key: nil)
                        _ = try s.item(ref, key: nil)
                        _ = try s.find(ItemQuery(attributes: [CKA.label: [UInt8(t), UInt8(i)]]), key: nil)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try setup.count(token: token) == 80)
    }

    @Test func genericPasswords() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        #expect(try store.genericPassword(service: "S", account: "A", token: token, key: key) == nil)
        try store.setGenericPassword(service: "S", account: "A", value: Array("pw-one-XYZ".utf8), token: token, key: key)
        try store.setGenericPassword(service: "S", account: "A", value: Array("pw-two-XYZ".utf8), token: token, key: key)
        #expect(try store.genericPassword(service: "S", account: "A", token: token, key: key) == Array("pw-two-XYZ".utf8))
        #expect(try store.find(ItemQuery(itemClass: .genericPassword), key: nil).count == 1)
        #expect(try store.find(ItemQuery(itemClass: .genericPassword), key: nil).first?.secretsWithheld == true)
        #expect(!contains(home.allBytes(), Array("pw-two-XYZ".utf8)))
        #expect(throws: KeychainError.keyRequired) {
            _ = try store.add(token: token, itemClass: .genericPassword, attributes: [CKA.value: [1]], key: nil)
        }
        #expect(try store.deleteGenericPassword(service: "S", account: "A", token: token))
        #expect(try store.genericPassword(service: "S", account: "A", token: token, key: key) == nil)
    }
}
