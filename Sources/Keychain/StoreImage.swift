#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import KeyshareCrypto

/// What a store image holds, and what was left out of it because it cannot
/// work anywhere but on this machine (docs/backup.md).
public struct StoreContents: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// A soft token: its keys are in the store, encrypted under its PINs; it moves.
        case soft
        /// A TPM token: its keys exist only in this machine's TPM.
        case tpm
        /// A soft token sealed to this machine's TPM (`token bind --tpm`).
        case tpmBound = "tpm-bound"
        /// A smart card's token: the store only mirrors the card, whose keys stay on it.
        case external
    }

    public struct Token: Sendable, Equatable {
        public var tokenID: String
        public var label: String
        public var kind: Kind
        /// Items the image holds of this token (for a token left out: the items it had).
        public var items: Int
        /// Keys of a soft token that live in the TPM (left out; the rest of the token moves).
        public var tpmKeysLeftOut: Int
    }

    /// The tokens in the image.
    public var tokens: [Token] = []
    /// The tokens left out, with the kind that says why.
    public var leftOut: [Token] = []
    /// Machine settings left out: the TPM this store used (`token tpm-config`).
    public var settingsLeftOut: [String] = []

    public var itemCount: Int { tokens.reduce(0) { $0 + $1.items } }
}

/// A store's database as bytes (an SQLite image, checked and with what
/// cannot move taken out), with what it holds.
public struct StoreImage: Sendable {
    public let database: [UInt8]
    public let contents: StoreContents
}

extension KeychainStore {
    /// A consistent copy of the store for `keyshare backup`: SQLite's online
    /// backup copies every page in one read transaction, so commits other
    /// processes (the agent) make meanwhile are either wholly in it or not at
    /// all; the copy is in memory. TPM tokens, TPM-bound tokens, TPM keys,
    /// card tokens and the TPM setting are then taken out of the copy (never
    /// the store), which is compacted with secure_delete on so nothing of
    /// them stays in free pages.
    public func image() throws -> StoreImage {
        let memory = try MemoryDatabase()
        try lock.withLock {
            try db.resume()
            try MemoryDatabase.copy(from: db.db, to: memory.connection.db, what: "the store")
        }
        let contents = try StoreImageRules.removeImmovable(memory.connection)
        return StoreImage(database: try memory.serialize(), contents: contents)
    }
}

/// Restoring an image (`keyshare restore`): checked wholly in memory, then
/// written into an empty home the way a new store is created (complete under
/// a temporary name, linked into place), so keychain.db is never half-made.
public enum StoreRestore {
    /// The checked image of `database` (an archive's keychain.db entry): an
    /// intact SQLite database whose schema is exactly keyshare's (migrated if
    /// older; refused if newer), with nothing that cannot move.
    public static func check(_ database: [UInt8]) throws -> PreparedStore {
        let memory = try MemoryDatabase(deserializing: database)
        let db = memory.connection
        let integrity = try db.query("PRAGMA integrity_check") { $0.text(0) }
        guard integrity == ["ok"] else { throw StoreArchive.Failure.malformed("its store fails SQLite's integrity check") }
        let version = try db.query("PRAGMA user_version") { Int($0.int(0)) }.first ?? 0
        guard version <= Schema.currentVersion else {
            throw StoreArchive.Failure.unsupported(
                "its store has schema version \(version), newer than this keyshare's \(Schema.currentVersion): restore with a newer keyshare")
        }
        guard version >= 1 else { throw StoreArchive.Failure.malformed("its store has no keyshare schema") }
        // Only keyshare's own tables and indexes, compared with a new store at
        // the same version before anything runs on it (a migration, the
        // removals below): no trigger or view a crafted archive added ever runs.
        let fresh = try MemoryDatabase()
        try fresh.connection.exec("BEGIN")
        for m in Schema.migrations[0..<version] { try fresh.connection.exec(m) }
        try fresh.connection.exec("COMMIT")
        guard try schema(db) == schema(fresh.connection) else {
            throw StoreArchive.Failure.malformed("its store's schema is not keyshare's")
        }
        try Schema.migrate(db)
        guard try db.query("PRAGMA foreign_key_check", [], { _ in true }).isEmpty else {
            throw StoreArchive.Failure.malformed("its store has dangling references")
        }
        let contents = try StoreImageRules.removeImmovable(db)
        return PreparedStore(memory: memory, contents: contents)
    }

    /// Creates `home` if needed (0700) and checks it as every store
    /// directory is checked (SecureDirectory); returns it with links resolved.
    @discardableResult
    public static func prepareHome(_ home: String) throws -> String {
        try StoreLocation.prepareDirectory(home)
    }

    /// What is at `home` that a restore must not replace: nil when it holds
    /// no store (no keychain.db, no journal, no file among `others`).
    public static func occupant(home: String, others: [String] = []) -> String? {
        for name in ["keychain.db"] + StoreLocation.companionSuffixes.map({ "keychain.db" + $0 }) + others {
            var st = stat()
            if lstat(home + "/" + name, &st) == 0 || errno != ENOENT { return home + "/" + name }
        }
        return nil
    }

    /// Writes the prepared store as `home`/keychain.db (0600; `home` made
    /// 0700 and checked as every store directory is). Refuses a home that
    /// holds a store, also one that appeared while this ran (link(2) does not
    /// replace). Returns the store's path.
    @discardableResult
    public static func install(_ prepared: PreparedStore, home: String) throws -> String {
        let dir = try StoreLocation.prepareDirectory(home)
        let path = dir + "/keychain.db"
        if let there = occupant(home: dir) {
            throw KeychainError.storage("\(there) exists: a restore writes only into a home without a store")
        }
        let temp = dir + "/.keychain.db.restore-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError.storage("cannot create \(temp): \(String(cString: strerror(errno)))") }
        close(fd)
        defer {
            unlink(temp)
            for suffix in StoreLocation.companionSuffixes { unlink(temp + suffix) }
        }
        do {
            let file = try SQLiteConnection(name: temp, file: temp, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX)
            try file.exec("PRAGMA synchronous=FULL")
            try MemoryDatabase.copy(from: prepared.memory.connection.db, to: file.db, what: "the restored store")
            // As a new store: WAL, written before the file is linked into place.
            _ = try file.query("PRAGMA journal_mode=WAL") { $0.text(0) }
            guard try file.query("PRAGMA quick_check", [], { $0.text(0) }) == ["ok"] else {
                throw KeychainError.storage("the restored store failed its check after writing")
            }
        }
        let written = open(temp, O_RDONLY | O_CLOEXEC)
        guard written >= 0, fsync(written) == 0 else {
            let reason = String(cString: strerror(errno))
            if written >= 0 { close(written) }
            throw KeychainError.storage("cannot write \(temp): \(reason)")
        }
        close(written)
        guard link(temp, path) == 0 else {
            let code = errno
            throw KeychainError.storage(code == EEXIST
                ? "\(path) appeared while the backup was restored: nothing was restored"
                : "cannot create \(path): \(String(cString: strerror(code)))")
        }
        let d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if d >= 0 {
            fsync(d)
            close(d)
        }
        return path
    }

    static func schema(_ db: SQLiteConnection) throws -> [String] {
        try db.query("""
            SELECT type || ' ' || name || ' ' || tbl_name || ' ' || COALESCE(sql, '') FROM sqlite_master
            WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name
            """) { $0.text(0) }
    }
}

/// A checked store image, ready to be installed (StoreRestore.install).
public final class PreparedStore {
    let memory: MemoryDatabase
    public let contents: StoreContents

    init(memory: MemoryDatabase, contents: StoreContents) {
        self.memory = memory
        self.contents = contents
    }
}

/// What cannot move to another machine, and taking it out of an image.
enum StoreImageRules {
    /// Removes from `db` (an in-memory copy) every token and key bound to
    /// this machine and every card mirror, as deleteToken would (their
    /// references retired), and the TPM setting; compacts; returns what is
    /// left and what was left out.
    static func removeImmovable(_ db: SQLiteConnection) throws -> StoreContents {
        try db.exec("PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON;")
        let tpmAttribute = Int64(CKA.keyshareTPM)
        let rows = try db.query("""
            SELECT token_id, label,
                   COALESCE(user_kdf, '') = ?1 OR COALESCE(so_kdf, '') = ?1,
                   EXISTS (SELECT 1 FROM meta WHERE key = 'binding:' || tokens.token_id),
                   so_wrapped IS NULL,
                   (SELECT count(*) FROM items i WHERE i.token_id = tokens.token_id),
                   (SELECT count(DISTINCT a.item) FROM attributes a JOIN items i ON i.id = a.item
                    WHERE i.token_id = tokens.token_id AND a.type = ?2)
            FROM tokens ORDER BY created, token_id
            """, [.text(PINWrap.tpmSealCost), .int(tpmAttribute)]) { s -> StoreContents.Token in
            let kind: StoreContents.Kind = s.int(2) != 0 ? .tpm : s.int(3) != 0 ? .tpmBound : s.int(4) != 0 ? .external : .soft
            return StoreContents.Token(tokenID: s.text(0), label: s.text(1), kind: kind, items: Int(s.int(5)),
                                       tpmKeysLeftOut: kind == .soft ? Int(s.int(6)) : 0)
        }
        var contents = StoreContents()
        let tcti = try !db.query("SELECT 1 FROM meta WHERE key = 'tpm-tcti'") { _ in true }.isEmpty
        try db.exec("BEGIN IMMEDIATE")
        do {
            for var t in rows {
                let id = SQLValue.text(t.tokenID)
                if t.kind != .soft {
                    try db.run("""
                        INSERT OR IGNORE INTO retired_refs (pref)
                        SELECT pref FROM items WHERE token_id = ? AND substr(pref, 1, 1) = x'01'
                        """, [id])
                    try db.run("DELETE FROM items WHERE token_id = ?", [id])
                    try db.run("DELETE FROM tokens WHERE token_id = ?", [id])
                    for prefix in ["canary:", "binding:", "mirror:"] {
                        try db.run("DELETE FROM meta WHERE key = ?", [.text(prefix + t.tokenID)])
                    }
                    contents.leftOut.append(t)
                    continue
                }
                if t.tpmKeysLeftOut > 0 {
                    let tpmItems = "SELECT item FROM attributes WHERE type = ?"
                    try db.run("""
                        INSERT OR IGNORE INTO retired_refs (pref) SELECT pref FROM items
                        WHERE token_id = ? AND id IN (\(tpmItems)) AND substr(pref, 1, 1) = x'01'
                        """, [id, .int(tpmAttribute)])
                    try db.run("DELETE FROM items WHERE token_id = ? AND id IN (\(tpmItems))", [id, .int(tpmAttribute)])
                    t.items -= t.tpmKeysLeftOut
                }
                contents.tokens.append(t)
            }
            if tcti {
                try db.run("DELETE FROM meta WHERE key = 'tpm-tcti'")
                contents.settingsLeftOut.append("tpm-tcti")
            }
            try db.exec("COMMIT")
        } catch {
            try? db.exec("ROLLBACK")
            throw error
        }
        try db.exec("VACUUM")
        return contents
    }
}

/// An in-memory SQLite database: the image being built or checked.
final class MemoryDatabase {
    let connection: SQLiteConnection

    init() throws {
        connection = try SQLiteConnection(name: ":memory:", file: ":memory:",
                                          flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_MEMORY)
    }

    /// The database `bytes` hold (an SQLite file image), in memory.
    convenience init(deserializing bytes: [UInt8]) throws {
        let header = Array("SQLite format 3\u{0}".utf8)
        guard bytes.count >= 512, Array(bytes[0..<header.count]) == header else {
            throw StoreArchive.Failure.malformed("its store is not an SQLite database")
        }
        try self.init()
        var image = bytes
        // A WAL store's header says so (bytes 18 and 19 are 2); in memory
        // there is no WAL: read it as a rollback-journal database.
        if image[18] == 2 && image[19] == 2 { (image[18], image[19]) = (1, 1) }
        guard let buffer = sqlite3_malloc64(UInt64(image.count)) else { throw KeychainError.storage("out of memory") }
        image.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let flags = UInt32(SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE)
        let rc = sqlite3_deserialize(connection.db, "main", buffer.assumingMemoryBound(to: UInt8.self),
                                     Int64(image.count), Int64(image.count), flags)
        guard rc == SQLITE_OK else { throw StoreArchive.Failure.malformed("its store cannot be read: \(connection.errorMessage)") }
        // Nothing in the image's schema may call a function with side effects.
        try connection.exec("PRAGMA trusted_schema=OFF")
    }

    /// The database as the bytes of an SQLite file.
    func serialize() throws -> [UInt8] {
        var size: Int64 = 0
        guard let p = sqlite3_serialize(connection.db, "main", &size, 0) else {
            throw KeychainError.storage("cannot serialize the store image: \(connection.errorMessage)")
        }
        defer { sqlite3_free(p) }
        return Array(UnsafeBufferPointer(start: p, count: Int(size)))
    }

    /// Every page of `source` into `destination` in one step (one read
    /// transaction on the source); a busy source is retried for up to 15 s.
    static func copy(from source: OpaquePointer, to destination: OpaquePointer, what: String) throws {
        guard let backup = sqlite3_backup_init(destination, "main", source, "main") else {
            throw KeychainError.storage("cannot copy \(what): \(String(cString: sqlite3_errmsg(destination)))")
        }
        var rc = SQLITE_OK
        for _ in 0..<3000 {
            rc = sqlite3_backup_step(backup, -1)
            guard rc == SQLITE_BUSY || rc == SQLITE_LOCKED else { break }
            sqlite3_sleep(5)
        }
        let finish = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE, finish == SQLITE_OK else {
            throw KeychainError.storage("cannot copy \(what): \(String(cString: sqlite3_errstr(rc == SQLITE_DONE ? finish : rc)))")
        }
    }
}
