#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import KeyshareCrypto

/// Why a store handle cannot write. A store that cannot be written is still
/// opened, read-only, so that listing, C_Initialize, login and signing keep
/// working on a read-only mount or a full disk; every write then fails with
/// the error this reason names (docs/reliability-findings.md, "Read-only mount and full disk").
public enum ReadOnlyReason: Sendable, Equatable, CustomStringConvertible {
    /// The file system holding the store is mounted read-only.
    case readOnlyFileSystem
    /// The disk holding the store is full: SQLite could not create or grow
    /// the WAL index.
    case diskFull
    /// The store's files are not writable by this user.
    case notPermitted
    /// The caller asked for a read-only handle.
    case requested
    /// No store exists yet: an empty view that creates nothing
    /// (KeychainStore(emptyViewOf:), docs/agent.md "No store, no agent").
    case noStore

    public var description: String {
        switch self {
        case .readOnlyFileSystem: "read-only file system"
        case .diskFull: "disk full"
        case .notPermitted: "no write permission"
        case .requested: "opened read-only"
        case .noStore: "no store yet"
        }
    }

    /// The error every write on such a handle fails with.
    func writeError(home: String) -> KeychainError {
        switch self {
        case .diskFull:
            .storeFull("the disk holding \(home) is full: free some space; until then the store can be read and used to sign, not changed")
        case .readOnlyFileSystem:
            .readOnlyStore("\(home) is on a read-only file system: the store can be read and used to sign, not changed")
        case .notPermitted:
            .readOnlyStore("\(home)/keychain.db is not writable by this user: the store can be read, not changed")
        case .requested:
            .readOnlyStore("this handle on \(home) was opened read-only")
        case .noStore:
            .readOnlyStore("there is no store at \(home) yet: C_InitToken or `keyshare token create` creates it")
        }
    }
}

/// Opening the store's SQLite connection: read-write when possible, else
/// read-only in the way SQLite can still read a WAL store correctly.
enum StoreOpening {
    /// A connection configured for the store at `path` (an existing, checked
    /// file) and why it cannot write (nil: it can).
    static func open(path: String, readOnly requested: Bool) throws -> (SQLiteConnection, ReadOnlyReason?) {
        if requested { return (try openReadOnly(path: path, reason: .requested, cause: nil), .requested) }
        let (error, code): (KeychainError, Int32)
        switch openReadWrite(path: path) {
        case .success(let db): return (db, nil)
        case .failure(let failure): (error, code) = (failure.error, failure.code)
        }
        // The read-write connection is closed by now: a connection in the
        // same process would share its WAL index, opened for writing.
        guard let reason = writeImpossible(path: path, code: code, error: error) else { throw error.naming(path) }
        return (try openReadOnly(path: path, reason: reason, cause: error), reason)
    }

    private struct OpenFailure: Error {
        var error: KeychainError
        var code: Int32
    }

    private static func openReadWrite(path: String) -> Result<SQLiteConnection, OpenFailure> {
        let db: SQLiteConnection
        do {
            // The settings are applied again when a connection closed for a fork reopens.
            db = try SQLiteConnection(name: path, file: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                                      configure: configure)
        } catch {
            return .failure(OpenFailure(error: error as? KeychainError ?? .storage("\(error)"), code: SQLITE_CANTOPEN))
        }
        do {
            try Schema.migrate(db)
            return .success(db)
        } catch {
            return .failure(OpenFailure(error: error as? KeychainError ?? .storage("\(error)"), code: db.lastFailureCode))
        }
    }

    /// The per-connection settings of a read-write handle.
    static func configure(_ db: SQLiteConnection) throws {
        // SQLite silently opens read-only a file it may not write.
        if sqlite3_db_readonly(db.db, "main") == 1 {
            throw KeychainError.readOnlyStore("cannot write \(db.file)")
        }
        // Many processes share the file: wait for a writer instead of failing
        // (polling each millisecond: a waiter must not lose to a busy writer).
        ks_sqlite_busy_poll(db.db, 15_000)
        // Setting the mode writes the header: only when it is not WAL yet
        // (a new store), so that reading the mode is the first access.
        let mode = try db.query("PRAGMA journal_mode") { $0.text(0) }.first ?? ""
        if mode != "wal" { _ = try db.query("PRAGMA journal_mode=WAL") { $0.text(0) } }
        try db.exec("""
            PRAGMA synchronous=FULL;
            PRAGMA foreign_keys=ON;
            PRAGMA secure_delete=ON;
            PRAGMA temp_store=MEMORY;
            """)
    }

    /// Whether `error`, met opening read-write, means that writing is
    /// impossible here, and why; nil for any other failure, reported as it is.
    static func writeImpossible(path: String, code: Int32, error: KeychainError) -> ReadOnlyReason? {
        switch code & 0xFF {
        case SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_FULL, SQLITE_PERM: break
        default:
            // The silent read-only open has no SQLite code.
            guard error.isWriteImpossible else { return nil }
        }
        let dir = SecureDirectory.parent(of: path)
        var fs = statvfs()
        if statvfs(dir, &fs) == 0 {
            if fs.f_flag & UInt(ST_RDONLY) != 0 { return .readOnlyFileSystem }
            // Root may use the reserved blocks. Opening needs room for the
            // WAL index (32 KiB) and a file for the WAL: "full" is below 1 MiB
            // or no inode left.
            let blocks = UInt64(geteuid() == 0 ? fs.f_bfree : fs.f_bavail)
            let inodes = UInt64(geteuid() == 0 ? fs.f_ffree : fs.f_favail)
            if code & 0xFF == SQLITE_FULL || blocks * UInt64(fs.f_frsize) < 1 << 20 || (fs.f_files > 0 && inodes == 0) {
                return .diskFull
            }
        }
        if access(path, W_OK) != 0 || access(dir, W_OK) != 0 { return .notPermitted }
        return nil
    }

    /// Read-only, for a store whose files cannot be written. SQLite reads a
    /// WAL store read-only when its -shm exists or can be created:
    /// `readonly_shm=1` reads the index from the file (or rebuilds it in
    /// memory) and never writes it. On a read-only mount without a -shm that
    /// is impossible; a store whose WAL is absent or empty is then opened
    /// `immutable=1`, which is exact there: nothing can change a read-only
    /// mount's files, and the database file holds every commit. A WAL with
    /// frames but no -shm on a read-only mount cannot be read at all.
    static func openReadOnly(path: String, reason: ReadOnlyReason, cause: KeychainError?) throws -> SQLiteConnection {
        let flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX
        let failure: KeychainError
        do {
            let db = try SQLiteConnection(name: uri(path, "mode=ro&readonly_shm=1"), file: path, flags: flags) {
                ks_sqlite_busy_poll($0.db, 15_000)
            }
            try Schema.check(db, readOnly: reason)
            return db
        } catch let e as KeychainError {
            failure = e
        }
        let walSize = fileSize(path + "-wal") ?? 0
        if reason == .readOnlyFileSystem && walSize == 0 {
            let db = try SQLiteConnection(name: uri(path, "immutable=1"), file: path, flags: flags)
            try Schema.check(db, readOnly: reason)
            return db
        }
        if reason == .readOnlyFileSystem && fileSize(path + "-shm") == nil {
            throw KeychainError.readOnlyStore(
                "cannot read \(path): it is on a read-only file system and its write-ahead log (\(walSize) bytes) has no "
                    + "index file \(path)-shm; mount it read-write once so that SQLite can rebuild the index")
        }
        switch failure {
        case .storage(let m) where m.containsText("schema version"): throw failure
        default: break
        }
        // Writing failed (`cause`), and so did reading: say both.
        let detail = (cause.map { "\($0); read-only: " } ?? "") + "\(failure)"
        switch reason {
        case .diskFull: throw KeychainError.storeFull("cannot open \(path), the disk is full: \(detail)")
        default: throw KeychainError.readOnlyStore("cannot open \(path) (\(reason)): \(detail)")
        }
    }

    static func fileSize(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    /// A `file:` URI for `path` with `query`; every byte but the unreserved
    /// ones and `/` is percent-encoded (a path may hold `?`, `#` or `%`).
    static func uri(_ path: String, _ query: String) -> String {
        var out = "file:"
        for b in path.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(Character(Unicode.Scalar(b)))
            default:
                let hex = String(b, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out + "?" + query
    }
}
