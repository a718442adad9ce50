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
            #expect(plan.contains { $0.contains("attr_lookup") }, "\(plan)")
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

    /// Flags are not in the lookup index (each would dirty a page of its own
    /// per create); a find on them with a class narrows by token and class
    /// and checks the flags per candidate through the attributes' primary key,
    /// with the same answers as a seek would give.
    @Test func flagsAreCheckedPerCandidate() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        for i in 0..<40 {
            _ = try store.add(token: token, itemClass: i % 2 == 0 ? .privateKey : .publicKey, attributes: [
                CKA.private: AttributeCoding.bool(i % 2 == 0), CKA.sign: AttributeCoding.bool(i % 4 == 0),
                CKA.keyType: AttributeCoding.ulong(i % 3 == 0 ? CKK.ec : CKK.rsa),
                CKA.label: Array("k \(i)".utf8),
            ], key: key)
        }
        let signers = ItemQuery(tokenID: token, itemClass: .privateKey, attributes: [CKA.sign: AttributeCoding.bool(true)])
        let (sql, args) = try store.findSQL(signers, key: key)
        let plan = try store.db.query("EXPLAIN QUERY PLAN " + sql, args) { $0.text(3) }
        #expect(plan.contains { $0.contains("items_token_class") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN") && !$0.hasPrefix("SCAN t") }, "\(plan)")
        #expect(try store.find(signers, key: key).count == 10)
        // Flags with a label: the label seeks, the flags filter.
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("k 4".utf8), CKA.sign: AttributeCoding.bool(true)]),
                               key: key).count == 1)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("k 6".utf8), CKA.sign: AttributeCoding.bool(true)]),
                               key: key).isEmpty)
        // A flag alone, across classes (a scan of the token: every item may match).
        #expect(try store.find(ItemQuery(tokenID: token, attributes: [CKA.keyType: AttributeCoding.ulong(CKK.ec)]),
                               key: key).count == 14)
        // Without the key, private items do not match on their flags either.
        #expect(try store.find(ItemQuery(tokenID: token, attributes: [CKA.sign: AttributeCoding.bool(true)]),
                               key: nil).isEmpty)
    }

    /// Updating an indexed attribute moves its lookup entry; deleting the item removes it.
    @Test func lookupEntriesFollowUpdatesAndDeletes() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let ref = try store.add(token: token, itemClass: .data, attributes: [CKA.label: Array("old".utf8)], key: nil)
        try store.update(ref, attributes: [CKA.label: Array("new".utf8)], key: nil)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("old".utf8)]), key: nil).isEmpty)
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("new".utf8)]), key: nil).count == 1)
        #expect(try store.db.query("SELECT COUNT(*) FROM attr_lookup") { $0.int(0) } == [1])
        try store.delete(ref)
        #expect(try store.db.query("SELECT COUNT(*) FROM attr_lookup") { $0.int(0) } == [0])
    }

    /// A version-2 store (digests in attr_index, every attribute in one lookup
    /// index) migrates through 3, 4 and 5: the digests join their attribute rows,
    /// the indexed attributes move to attr_lookup, finds give the same answers,
    /// and its token gets the consent setting, off.
    @Test func versionTwoStoreMigrates() throws {
        let home = TempHome()
        let token: TokenID
        do {
            let store = try home.store()
            token = try makeToken(store)
            for i in 0..<20 {
                _ = try store.add(token: token, itemClass: .data, attributes: [
                    CKA.label: Array("d \(i)".utf8), CKA.modifiable: AttributeCoding.bool(i % 2 == 0),
                ], key: nil)
            }
            // Back to the version-2 layout.
            try store.db.exec("""
                DROP TABLE attr_lookup;
                CREATE TABLE attr_index (
                    item INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
                    type INTEGER NOT NULL,
                    digest BLOB NOT NULL,
                    PRIMARY KEY (item, type)
                ) WITHOUT ROWID;
                INSERT INTO attr_index SELECT item, type, digest FROM attributes;
                ALTER TABLE attributes DROP COLUMN digest;
                CREATE INDEX attr_index_lookup ON attr_index(type, digest);
                ALTER TABLE tokens DROP COLUMN consent;
                PRAGMA user_version = 2;
                """)
        }
        let store = try home.store()
        #expect(try store.db.query("PRAGMA user_version") { Int($0.int(0)) } == [Schema.currentVersion])
        // Version 5: the consent setting, off for tokens made before it (docs/agent.md, "Consent").
        #expect(try store.token(token)?.consent == .off)
        #expect(try store.db.query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'attr_index'") { $0.int(0) } == [0])
        #expect(try store.db.query("SELECT COUNT(*) FROM attributes WHERE digest IS NULL") { $0.int(0) } == [0])
        #expect(try store.db.query("SELECT COUNT(*) FROM attr_lookup WHERE type = ?", [.int(Int64(CKA.label))]) { $0.int(0) } == [20])
        #expect(try store.db.query("SELECT COUNT(*) FROM attr_lookup WHERE type = ?", [.int(Int64(CKA.modifiable))]) { $0.int(0) } == [0])
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("d 3".utf8)]), key: nil).count == 1)
        #expect(try store.find(ItemQuery(tokenID: token, itemClass: .data, attributes: [CKA.modifiable: AttributeCoding.bool(true)]),
                               key: nil).count == 10)
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
