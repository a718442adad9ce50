#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import Synchronization

/// A thin, non-thread-safe wrapper over one sqlite3 connection; the store
/// serialises access with its own lock, so this stays simple.
///
/// A fork closes the connection (`suspend`, ForkSafety.swift) and the next
/// statement reopens it (`resume`) with the same per-connection settings
/// (`configure`), so nothing SQLite-owned is inherited by a forked child.
final class SQLiteConnection {
    /// What was passed to sqlite3_open_v2 (the file, or a `file:` URI) and its flags: a reopen uses them again.
    let name: String
    private let flags: Int32
    /// The database file (never a URI): named in errors, and the base of the -wal/-shm names.
    let file: String
    /// nil while suspended for a fork.
    private var handle: OpaquePointer?
    private var cache: [String: OpaquePointer] = [:]
    /// Per-connection settings, applied at every open.
    private let configure: (SQLiteConnection) throws -> Void
    /// The WAL-index mapping (KeychainStore.changeCounter reads it without a
    /// lock), 0 while unknown or suspended. Atomic: a reopen publishes it
    /// while other threads may be reading.
    private let walIndexAddress = Atomic<UInt>(0)
    /// How many times this connection was opened (a reopen after a fork counts).
    private(set) var generation: UInt64 = 0
    /// The extended result code of the last failure thrown, so the opener can
    /// tell "cannot write here" from other errors.
    private(set) var lastFailureCode: Int32 = SQLITE_OK
    /// (suffix, device, inode) of the -wal and -shm files as they were when
    /// this connection opened them (`rememberJournalFiles`).
    private var journalFiles: [(suffix: String, device: UInt64, inode: UInt64)] = []
    /// Whether a reopen records the journal files again (read-write connections).
    private var tracksJournalFiles = false

    /// - Parameters: `name` is the file, or a `file:` URI with SQLITE_OPEN_URI; `file` the plain path;
    ///   `configure` the per-connection settings, applied now and at every reopen after a fork.
    init(name: String, file: String, flags: Int32, configure: @escaping (SQLiteConnection) throws -> Void = { _ in }) throws {
        self.name = name
        self.file = file
        self.flags = flags
        self.configure = configure
        handle = try Self.open(name: name, file: file, flags: flags)
        generation = 1
        do {
            try configure(self)
        } catch {
            suspend()
            throw error
        }
    }

    private static func open(name: String, file: String, flags: Int32) throws -> OpaquePointer {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(name, &handle, flags, nil)
        guard rc == SQLITE_OK, let h = handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let h = handle { sqlite3_close_v2(h) }
            throw KeychainError.storage("cannot open \(file): \(msg)")
        }
        sqlite3_extended_result_codes(h, 1)
        return h
    }

    deinit {
        for (_, s) in cache { sqlite3_finalize(s) }
        guard let handle else { return }
        // The last connection to close checkpoints its WAL into the database
        // file and deletes the WAL by name. If the WAL this connection holds
        // is no longer the one on disk, that would copy stale pages over
        // other processes' commits and delete their log: close without it.
        if journalFilesReplaced() != nil { ks_sqlite_no_checkpoint_on_close(handle) }
        sqlite3_close_v2(handle)
    }

    /// The open handle, for `configure` and statements (every path that runs
    /// SQL resumes a suspended connection first).
    var db: OpaquePointer {
        guard let handle else { preconditionFailure("SQLite connection used while suspended") }
        return handle
    }

    var isOpen: Bool { handle != nil }

    /// (device, inode) of the main database file this connection holds open
    /// (its descriptor, shim.h); nil when the VFS is not the unix one.
    var openFileIdentity: (device: UInt64, inode: UInt64)? {
        guard let handle else { return nil }
        var dev: UInt64 = 0, ino: UInt64 = 0
        guard ks_sqlite_main_file_identity(handle, &dev, &ino) == 0 else { return nil }
        return (dev, ino)
    }

    /// Closes the connection for a fork: prepared statements finalized, no
    /// checkpoint and no WAL deletion on close (another process may be using
    /// it, and the child must not find it gone), the WAL-index mapping
    /// forgotten. Only with no statement running (every module thread is
    /// outside the ForkGate).
    func suspend() {
        guard let h = handle else { return }
        walIndexAddress.store(0, ordering: .releasing)
        for (_, s) in cache { sqlite3_finalize(s) }
        cache.removeAll()
        ks_sqlite_no_checkpoint_on_close(h)
        if sqlite3_close(h) != SQLITE_OK { sqlite3_close_v2(h) }
        handle = nil
    }

    /// Reopens a suspended connection with its settings and maps its WAL
    /// index again (a first read opens the WAL).
    func resume() throws {
        guard handle == nil else { return }
        handle = try Self.open(name: name, file: file, flags: flags)
        generation &+= 1
        do {
            try configure(self)
            _ = try query("PRAGMA schema_version") { $0.int(0) }
            mapWALIndex()
            if tracksJournalFiles { rememberJournalFiles() }
        } catch {
            suspend()
            throw error
        }
    }

    /// Records the connection's WAL-index mapping (after a read opened the WAL).
    func mapWALIndex() {
        guard let handle else { return }
        walIndexAddress.store(UInt(bitPattern: UnsafeRawPointer(ks_sqlite_wal_index(handle))), ordering: .releasing)
    }

    /// The connection's WAL-index mapping, or nil (see KeychainStore.changeCounter).
    var walIndex: UnsafeRawPointer? { UnsafeRawPointer(bitPattern: walIndexAddress.load(ordering: .acquiring)) }

    var errorMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "connection closed" }

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
        try resume()
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
        tracksJournalFiles = true
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
        try resume()
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

    var changes: Int { handle.map { Int(sqlite3_changes($0)) } ?? 0 }
    var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }
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
