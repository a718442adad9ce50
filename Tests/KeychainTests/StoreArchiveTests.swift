import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto

/// The backup archive (StoreArchive) and the store image it carries
/// (StoreImage): docs/backup.md; the CLI round trip is 97-backup-restore.sh.
@Suite struct StoreArchiveTests {
    let passphrase = Array("a backup passphrase".utf8)
    let entries = [StoreArchive.Entry(name: "keychain.db", bytes: Array("not really a database, 40 bytes long....".utf8)),
                   StoreArchive.Entry(name: "share-policy.json", bytes: Array("{}".utf8))]

    @Test func roundTrip() throws {
        let archive = try StoreArchive.seal(entries, passphrase: passphrase, log2N: 10)
        #expect(try StoreArchive.open(archive, passphrase: passphrase) == entries)
        #expect(!contains(archive, entries[0].bytes))
    }

    /// One bit changed at every offset, and every truncation: all refused, each
    /// with a Failure (never entries, never a crash).
    @Test func everyChangedByteIsRefused() throws {
        let archive = try StoreArchive.seal(entries, passphrase: passphrase, log2N: 10)
        for offset in archive.indices {
            var bad = archive
            bad[offset] ^= 0x01
            #expect(throws: StoreArchive.Failure.self, "bit 0 of byte \(offset)") { try StoreArchive.open(bad, passphrase: passphrase) }
        }
        for length in 0..<archive.count {
            #expect(throws: StoreArchive.Failure.self, "truncated to \(length)") {
                try StoreArchive.open(Array(archive.prefix(length)), passphrase: passphrase)
            }
        }
        #expect(throws: StoreArchive.Failure.truncated) { try StoreArchive.open(archive + [0], passphrase: passphrase) }
    }

    @Test func failuresSayWhich() throws {
        let archive = try StoreArchive.seal(entries, passphrase: passphrase, log2N: 10)
        #expect(throws: StoreArchive.Failure.wrongPassphrase) { try StoreArchive.open(archive, passphrase: Array("another one".utf8)) }
        var body = archive
        body[StoreArchive.headerSize + 3] ^= 0x80
        #expect(throws: StoreArchive.Failure.tampered) { try StoreArchive.open(body, passphrase: passphrase) }
        var cost = archive
        cost[10] = 30  // 2^30: never attempted
        #expect(throws: StoreArchive.Failure.self) { try StoreArchive.open(cost, passphrase: passphrase) }
        #expect(throws: StoreArchive.Failure.notAnArchive) { try StoreArchive.open(Array("SQLite format 3".utf8), passphrase: passphrase) }
    }

    /// A soft token moves with its items; a bound token (its `binding:` row)
    /// and the TPM setting are left out; the restored store opens with the PIN.
    @Test func imageRestoresIntoAnEmptyHome() throws {
        let home = TempHome()
        let store = try home.store()
        let soft = try makeToken(store)
        let bound = try makeToken(store, "com.keyshare.soft:99887766AABBCCDD")
        let key = try store.unlockUser(soft, pin: userPIN)
        let value = Array("restored secret value".utf8)
        let ref = try store.add(token: soft, itemClass: .secretKey, attributes: [
            CKA.private: AttributeCoding.bool(true), CKA.label: Array("kept".utf8), CKA.value: value,
        ], key: key)
        try store.write {
            try store.db.run("INSERT INTO meta (key, value) VALUES (?, x'01')", [.text("binding:" + bound.description)])
            try store.db.run("INSERT INTO meta (key, value) VALUES ('tpm-tcti', x'00')")
        }
        let image = try store.image()
        #expect(image.contents.tokens.map(\.tokenID) == [soft.description])
        #expect(image.contents.leftOut.map(\.kind) == [.tpmBound])
        #expect(image.contents.settingsLeftOut == ["tpm-tcti"])
        #expect(try store.token(bound) != nil, "the store itself is untouched")

        let prepared = try StoreRestore.check(image.database)
        let target = home.path + "-restored/home"
        defer { try? FileManager.default.removeItem(atPath: home.path + "-restored") }
        let path = try StoreRestore.install(prepared, home: target)
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let restored = try KeychainStore(home: target, kdfLog2N: 10)
        #expect(try restored.tokens().map(\.tokenID) == [soft])
        let key2 = try restored.unlockUser(soft, pin: userPIN)
        #expect(try restored.item(ref, key: key2).attributes[CKA.value] == value)
        #expect(throws: KeychainError.self) { try StoreRestore.install(prepared, home: target) }
    }

    /// An image that still holds a TPM-bound token (not one keyshare backup
    /// writes) restores without it, and says so.
    @Test func restoreLeavesOutWhatCannotMove() throws {
        let home = TempHome()
        let store = try home.store()
        let soft = try makeToken(store)
        let bound = try makeToken(store, "com.keyshare.soft:99887766AABBCCDD")
        try store.write {
            try store.db.run("INSERT INTO meta (key, value) VALUES (?, x'01')", [.text("binding:" + bound.description)])
        }
        let raw = try MemoryDatabase()
        try MemoryDatabase.copy(from: store.db.db, to: raw.connection.db, what: "the test store")
        let prepared = try StoreRestore.check(try raw.serialize())
        #expect(prepared.contents.tokens.map(\.tokenID) == [soft.description])
        #expect(prepared.contents.leftOut.map(\.tokenID) == [bound.description])
        #expect(try prepared.memory.connection.query("SELECT count(*) FROM meta WHERE key LIKE 'binding:%'") { $0.int(0) } == [0])
    }

    /// An image of an older schema is migrated; one with a trigger added is
    /// refused before any migration runs on it.
    @Test func olderSchemaIsMigratedForeignObjectsRefused() throws {
        func v4(_ extra: String?) throws -> [UInt8] {
            let old = try MemoryDatabase()
            for m in Schema.migrations[0..<4] { try old.connection.exec(m) }
            try old.connection.exec("PRAGMA user_version = 4")
            if let extra { try old.connection.exec(extra) }
            return try old.serialize()
        }
        let prepared = try StoreRestore.check(try v4(nil))
        #expect(try prepared.memory.connection.query("PRAGMA user_version") { Int($0.int(0)) } == [Schema.currentVersion])
        #expect(throws: StoreArchive.Failure.malformed("its store's schema is not keyshare's")) {
            try StoreRestore.check(try v4("CREATE TRIGGER t AFTER UPDATE ON attributes BEGIN DELETE FROM tokens; END"))
        }
    }

    /// A store image with an object keyshare does not make (a trigger) is refused.
    @Test func foreignSchemaIsRefused() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        let memory = try MemoryDatabase(deserializing: try store.image().database)
        try memory.connection.exec("CREATE TRIGGER t AFTER DELETE ON items BEGIN DELETE FROM tokens; END")
        #expect(throws: StoreArchive.Failure.malformed("its store's schema is not keyshare's")) {
            try StoreRestore.check(try memory.serialize())
        }
        #expect(throws: StoreArchive.Failure.self) { try StoreRestore.check(Array(repeating: 0, count: 4096)) }
    }
}
