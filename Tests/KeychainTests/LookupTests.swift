import Testing
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto

@Suite struct LookupTests {
    /// A find by CKA_ID / CKA_LABEL on private objects is an index seek: the
    /// plan has no full scan of items or attributes, and only the match is decrypted.
    @Test func attributeFindIsAnIndexSeek() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        for i in 0..<200 {
            _ = try store.add(token: token, itemClass: .privateKey, attributes: [
                CKA.private: AttributeCoding.bool(true), CKA.id: [UInt8(i & 0xFF), 1], CKA.label: Array("key \(i)".utf8),
            ], key: key)
        }
        try store.db.exec("ANALYZE")
        for query in [
            ItemQuery(tokenID: token, itemClass: .privateKey, attributes: [CKA.id: [5, 1]], limit: .one),
            ItemQuery(attributes: [CKA.label: Array("key 7".utf8)]),
            ItemQuery(attributes: [CKA.label: Array("key 7".utf8), CKA.id: [7, 1]]),
        ] {
            let (sql, args) = try store.findSQL(query, key: key)
            let plan = try store.db.query("EXPLAIN QUERY PLAN " + sql, args) { $0.text(3) }
            // The tokens table (a handful of rows) may be scanned; items and attributes never.
            #expect(!plan.contains { $0.hasPrefix("SCAN") && !$0.hasPrefix("SCAN t") }, "\(plan)")
            #expect(plan.contains { $0.contains("attr_index_lookup") }, "\(plan)")
            #expect(try store.find(query, key: key).count == 1)
        }
    }

    /// Without ANALYZE statistics (a real store never runs it) the attribute
    /// seeks still drive the plan: items are fetched by rowid, never walked
    /// per token through items_token_class (that made find O(items)).
    @Test func attributeFindSeeksWithoutStatistics() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        for i in 0..<50 {
            _ = try store.add(token: token, itemClass: .data, attributes: [CKA.label: Array("d \(i)".utf8)], key: nil)
        }
        for query in [
            ItemQuery(tokenID: token, itemClass: .data, attributes: [CKA.label: Array("d 7".utf8)], limit: .one),
            ItemQuery(tokenID: token, attributes: [CKA.label: Array("d 8".utf8)]),
        ] {
            let (sql, args) = try store.findSQL(query, key: nil)
            let plan = try store.db.query("EXPLAIN QUERY PLAN " + sql, args) { $0.text(3) }
            #expect(plan.contains { $0.hasPrefix("SEARCH i USING INTEGER PRIMARY KEY") }, "\(plan)")
            #expect(!plan.contains { $0.contains("items_token_class") }, "\(plan)")
            #expect(try store.find(query, key: nil).count == 1)
        }
    }

    /// Failed logins from different processes (connections) add up.
    @Test func bruteForceAcrossStoresIsCounted() throws {
        let home = TempHome()
        let a = try home.store()
        let token = try makeToken(a, maxAttempts: 4)
        let b = try home.store()
        #expect(throws: KeychainError.pinIncorrect(remaining: 3)) { _ = try a.unlockUser(token, pin: [0]) }
        #expect(throws: KeychainError.pinIncorrect(remaining: 2)) { _ = try b.unlockUser(token, pin: [0]) }
        #expect(throws: KeychainError.pinIncorrect(remaining: 1)) { _ = try a.unlockUser(token, pin: [0]) }
        #expect(throws: KeychainError.pinIncorrect(remaining: 0)) { _ = try b.unlockUser(token, pin: [0]) }
        #expect(throws: KeychainError.pinLocked) { _ = try a.unlockUser(token, pin: userPIN) }
        #expect(try b.token(token)?.userPINLocked == true)
    }

    @Test func schemaIsVersioned() throws {
        let home = TempHome()
        let store = try home.store()
        #expect(try store.db.query("PRAGMA user_version") { Int($0.int(0)) } == [Schema.currentVersion])
        #expect(try store.db.query("PRAGMA journal_mode") { $0.text(0) } == ["wal"])
        #expect(try store.db.query("PRAGMA synchronous") { $0.int(0) } == [2])
        #expect(try store.db.query("PRAGMA foreign_keys") { $0.int(0) } == [1])
        #expect(try store.db.query("PRAGMA secure_delete") { $0.int(0) } == [1])
        try store.db.exec("PRAGMA user_version = 99")
        #expect(throws: KeychainError.self) { _ = try home.store() }
    }
}

@Suite struct ExternalTokenTests {
    @Test func externalTokensKeepTheirSlotAndHoldPublicItems() throws {
        let home = TempHome()
        let store = try home.store()
        let id = TokenID("org.opensc.pkcs11:SoftHSM-1234")!
        let rec = try store.registerExternalToken(id, label: "Card", serial: "1234")
        #expect(!rec.hasPINs && rec.present)
        let ref = try store.add(token: id, itemClass: .certificate, attributes: [CKA.label: [1]], key: nil)
        #expect(throws: KeychainError.keyRequired) {
            _ = try store.add(token: id, itemClass: .privateKey, attributes: [CKA.label: [2]], key: nil)
        }
        _ = try store.add(token: id, itemClass: .privateKey, attributes: [CKA.private: AttributeCoding.bool(false), CKA.label: [2]], key: nil)
        try store.setPresent(id, false)
        #expect(throws: KeychainError.itemNotFound) { _ = try store.item(ref, key: nil) }
        let again = try store.registerExternalToken(id, label: "Card", serial: "1234")
        #expect(again.slotID == rec.slotID && again.present)
        #expect(try store.item(ref, key: nil).attributes[CKA.label] == [1])
        #expect(throws: KeychainError.pinNotInitialized) { _ = try store.unlockUser(id, pin: [1]) }
        #expect(try store.delete(ItemQuery(tokenID: id), key: nil) == 2)
        #expect(try store.count(token: id) == 0)
        #expect(try store.isRetired(ref))
    }
}
