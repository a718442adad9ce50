#if canImport(Glibc)
import Glibc
#endif
import CSQLite

/// A thin, non-thread-safe wrapper over one sqlite3 connection; the store
/// serialises access with its own lock, so this stays simple.
final class SQLiteConnection {
    let db: OpaquePointer
    /// The database file (never a URI): named in errors, and the base of the -wal/-shm names.
    let file: String
    private var cache: [String: OpaquePointer] = [:]
    /// The extended result code of the last failure thrown, so the opener can
    /// tell "cannot write here" from other errors.
    private(set) var lastFailureCode: Int32 = SQLITE_OK
    /// (suffix, device, inode) of the -wal and -shm files as they were when
    /// this connection opened them (`rememberJournalFiles`).
    private var journalFiles: [(suffix: String, device: UInt64, inode: UInt64)] = []

    /// - Parameters: `name` is the file, or a `file:` URI with SQLITE_OPEN_URI; `file` the plain path.
    init(name: String, file: String, flags: Int32) throws {
        self.file = file
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(name, &handle, flags, nil)
        guard rc == SQLITE_OK, let h = handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let h = handle { sqlite3_close_v2(h) }
            throw KeychainError.storage("cannot open \(file): \(msg)")
        }
        db = h
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        for (_, s) in cache { sqlite3_finalize(s) }
        // The last connection to close checkpoints its WAL into the database
        // file and deletes the WAL by name. If the WAL this connection holds
        // is no longer the one on disk, that would copy stale pages over
        // other processes' commits and delete their log: close without it.
        if journalFilesReplaced() != nil { ks_sqlite_no_checkpoint_on_close(db) }
        sqlite3_close_v2(db)
    }

    var errorMessage: String { String(cString: sqlite3_errmsg(db)) }

    /// The error for a failed call: out of space and read-only are told apart
    /// (by SQLite's code, or by errno for an I/O error) so the caller gets
    /// "disk full" / "read-only store" rather than "disk I/O error".
    func failure(_ rc: Int32, _ message: String) -> KeychainError {
        lastFailureCode = rc
        let sysErrno = sqlite3_system_errno(db)
        switch rc & 0xFF {
        case SQLITE_FULL:
            return .storeFull("cannot write \(file): \(message)")
        case SQLITE_READONLY:
            return .readOnlyStore("cannot write \(file): \(message)")
        case SQLITE_IOERR where sysErrno == ENOSPC || sysErrno == EDQUOT:
            return .storeFull("cannot write \(file): \(String(cString: strerror(sysErrno)))")
        case SQLITE_IOERR where sysErrno == EROFS:
            return .readOnlyStore("cannot write \(file): \(String(cString: strerror(sysErrno)))")
        default:
            return .storage(message)
        }
    }

    func exec(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(err)
            throw failure(sqlite3_extended_errcode(db), msg)
        }
    }

    /// Records which -wal and -shm files this connection has open; call once
    /// its WAL is open (after the first read).
    func rememberJournalFiles() {
        journalFiles = []
        for suffix in ["-wal", "-shm"] {
            var st = stat()
            if stat(file + suffix, &st) == 0 {
                journalFiles.append((suffix, UInt64(st.st_dev), UInt64(st.st_ino)))
            }
        }
    }

    /// nil while the -wal and -shm on disk are the files this connection
    /// opened; otherwise what happened to them. A WAL deleted under a running
    /// process (by hand, or by a cleanup script) leaves this connection
    /// writing into an unlinked file while new connections start a new log:
    /// commits acknowledged here would be lost, and this connection's
    /// checkpoint at close would overwrite theirs.
    func journalFilesReplaced() -> String? {
        for f in journalFiles {
            var st = stat()
            if stat(file + f.suffix, &st) != 0 { return "\(file)\(f.suffix) was deleted" }
            if UInt64(st.st_dev) != f.device || UInt64(st.st_ino) != f.inode { return "\(file)\(f.suffix) was replaced" }
        }
        return nil
    }

    /// Prepared statements are cached by SQL text: the same few statements run
    /// on every call, and preparing is a measurable part of a lookup.
    func statement(_ sql: String) throws -> Statement {
        if let s = cache[sql] {
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
            return Statement(s, connection: self)
        }
        if cache.count >= 256 {
            // find() builds SQL per template shape; keep the cache bounded.
            for (_, s) in cache { sqlite3_finalize(s) }
            cache.removeAll()
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let s = stmt else {
            throw failure(sqlite3_extended_errcode(db), "\(errorMessage) in \(sql)")
        }
        cache[sql] = s
        return Statement(s, connection: self)
    }

    /// Runs a statement to completion, discarding rows.
    func run(_ sql: String, _ values: [SQLValue] = []) throws {
        let s = try statement(sql)
        try s.bind(values)
        while try s.step() {}
    }

    func query<T>(_ sql: String, _ values: [SQLValue] = [], _ row: (Statement) throws -> T) throws -> [T] {
        let s = try statement(sql)
        defer { sqlite3_reset(s.handle) }
        try s.bind(values)
        var out: [T] = []
        while try s.step() { out.append(try row(s)) }
        return out
    }

    var changes: Int { Int(sqlite3_changes(db)) }
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(db) }
}

enum SQLValue {
    case int(Int64)
    case text(String)
    case blob([UInt8])
    case null
}

struct Statement {
    let handle: OpaquePointer
    unowned let connection: SQLiteConnection

    init(_ handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    func bind(_ values: [SQLValue]) throws {
        for (i, v) in values.enumerated() {
            let idx = Int32(i + 1)
            let rc: Int32
            switch v {
            case .int(let n): rc = sqlite3_bind_int64(handle, idx, n)
            case .text(let t): rc = sqlite3_bind_text(handle, idx, t, -1, ks_sqlite_transient())
            case .blob(let b):
                // A zero-length blob must still bind as a blob, not NULL.
                rc = b.withUnsafeBytes { p in
                    sqlite3_bind_blob(handle, idx, p.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(b.count), ks_sqlite_transient())
                }
            case .null: rc = sqlite3_bind_null(handle, idx)
            }
            guard rc == SQLITE_OK else { throw connection.failure(rc, connection.errorMessage) }
        }
    }

    /// True while a row is available. Resets on completion or error so the
    /// cached statement releases its read snapshot promptly.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            let msg = connection.errorMessage
            if rc & 0xFF == SQLITE_CONSTRAINT {
                sqlite3_reset(handle)
                throw SQLiteConstraint(message: msg)
            }
            // Classified before the reset, while SQLite still holds the errno.
            let error = connection.failure(sqlite3_extended_errcode(connection.db), msg)
            sqlite3_reset(handle)
            throw error
        }
    }

    func int(_ col: Int32) -> Int64 { sqlite3_column_int64(handle, col) }
    func isNull(_ col: Int32) -> Bool { sqlite3_column_type(handle, col) == SQLITE_NULL }

    func text(_ col: Int32) -> String {
        guard let p = sqlite3_column_text(handle, col) else { return "" }
        return String(cString: p)
    }

    func blob(_ col: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(handle, col))
        guard n > 0, let p = sqlite3_column_blob(handle, col) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}

struct SQLiteConstraint: Error {
    let message: String
}
