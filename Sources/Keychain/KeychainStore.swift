#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import KeyshareCrypto

/// The keychain: one SQLite file shared by every process (the CLI and every
/// host that loaded the PKCS #11 module). One connection per instance,
/// serialised by a pthread lock; SQLite's own locking (WAL + busy_timeout)
/// serialises processes. Every write is a transaction that is durable when
/// the call returns.
public final class KeychainStore: @unchecked Sendable {
    public let home: String
    public let path: String
    /// scrypt log2(N) for new PIN wraps; nil → PINKDFParameters' configured default.
    public let kdfLog2N: Int?
    /// The access groups this store handle is bound to (nil: every group). A
    /// bound handle sees only those groups' items and files new items under
    /// the first one: how a consumer such as the PKCS #11 module is confined
    /// without every caller remembering a filter. Set once, before first use.
    public internal(set) var accessGroupBinding: Set<String>?
    public internal(set) var newItemAccessGroup = "default"

    let lock = Lock(recursive: true)
    let db: SQLiteConnection
    /// Transaction nesting on the owning thread; guarded by `lock`.
    private var depth = 0
    /// Commits made through this connection: PRAGMA data_version ignores them.
    private var ownCommits: UInt64 = 0
    /// The connection's WAL-index mapping, read without a lock or a system
    /// call by `changeCounter()`; nil if the VFS has no shared memory, the
    /// handle is read-only (its index may be private memory, or absent when
    /// immutable: changeCounter() asks SQLite instead), or while the
    /// connection is closed for a fork (ForkSafety.swift).
    private var walIndex: UnsafeRawPointer? { readOnly == nil ? db.walIndex : nil }
    /// Why this handle cannot write (read-only mount, full disk...); nil when it can.
    public let readOnly: ReadOnlyReason?
    /// (device, inode) of keychain.db: names this store's PIN ledger (PINLedger).
    public let fileIdentity: (device: UInt64, inode: UInt64)

    public static func defaultHome() -> String { StoreLocation.defaultHome() }

    #if DEBUG
    /// Tests only (debug builds): runs right after SQLite opened the store,
    /// to swap the file the way a racing same-uid program would.
    nonisolated(unsafe) static var testHookAfterOpen: ((String) -> Void)?
    #endif

    /// Opens (or creates) the store in `home`. Refuses a directory or file
    /// another user could have planted (SecureDirectory) and an emptied
    /// keychain.db. A store that cannot be written (read-only mount, full
    /// disk) opens read-only: `readOnly` says why, and every write fails
    /// with that reason. `readOnly: true` asks for a read-only handle.
    public init(home: String? = nil, kdfLog2N: Int? = nil, readOnly: Bool = false) throws {
        let dir = home ?? StoreLocation.defaultHome()
        self.home = dir
        self.kdfLog2N = kdfLog2N
        let resolved = try StoreLocation.prepareDirectory(dir)
        path = resolved + "/keychain.db"
        try StoreLocation.checkFiles(path)
        try StoreLocation.ensureStore(path)
        StoreLocation.tighten(path)
        (db, self.readOnly) = try StoreOpening.open(path: path, readOnly: readOnly)
        #if DEBUG
        KeychainStore.testHookAfterOpen?(path)
        #endif
        // The identity of the file SQLite opened (its descriptor), not of
        // whatever the path names a moment later: a same-uid swap in between
        // would bind the agent's store check and the PIN ledger to a file
        // this store does not use. stat(path) only where the VFS is not unix.
        if let opened = db.openFileIdentity {
            fileIdentity = opened
        } else {
            var st = stat()
            fileIdentity = stat(path, &st) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : (0, 0)
        }
        if self.readOnly == nil {
            // The migration's reads opened the WAL, so its index is mapped now
            // and the -wal and -shm exist: remember which files they are.
            db.mapWALIndex()
            db.rememberJournalFiles()
        }
        StoreLocation.tighten(path + "-wal")
        StoreLocation.tighten(path + "-shm")
        ForkSafety.register(self)
    }

    /// Whether `home` (nil: the default rule) holds a store: its keychain.db
    /// exists. Nothing is created or checked here.
    public static func exists(home: String?) -> Bool {
        let dir = home ?? StoreLocation.defaultHome()
        var st = stat()
        return lstat(dir + "/keychain.db", &st) == 0 || errno != ENOENT
    }

    /// An empty view of a store that does not exist yet: an in-memory
    /// keychain with the current schema, no tokens, every write refused
    /// (`readOnly` is `.noStore`). What a module load shows before any store
    /// exists, creating no file (docs/agent.md, "No store, no agent").
    public init(emptyViewOf home: String?) throws {
        let dir = home ?? StoreLocation.defaultHome()
        self.home = dir
        kdfLog2N = nil
        path = dir + "/keychain.db"
        db = try SQLiteConnection(name: ":memory:", file: ":memory:",
                                  flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_MEMORY)
        try Schema.migrate(db)
        readOnly = .noStore
        fileIdentity = (0, 0)
    }

    /// True for an empty view (`init(emptyViewOf:)`).
    public var isEmptyView: Bool { readOnly == .noStore }

    /// Runs `body` atomically (BEGIN IMMEDIATE, or a savepoint when nested).
    /// Store calls made inside join it. PIN operations may not run inside,
    /// because their failure counting must commit on its own.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try write(body)
    }

    func write<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        let level = depth
        if level == 0 {
            if let readOnly { throw readOnly.writeError(home: home) }
            try db.exec("BEGIN IMMEDIATE")
        } else {
            try db.exec("SAVEPOINT ks\(level)")
        }
        depth += 1
        let result: T
        do {
            result = try body()
        } catch {
            depth -= 1
            if level == 0 {
                try? db.exec("ROLLBACK")
            } else {
                try? db.exec("ROLLBACK TO ks\(level); RELEASE ks\(level)")
            }
            throw error
        }
        depth -= 1
        if level == 0 {
            do {
                try checkJournalFiles()
                try db.exec("COMMIT")
            } catch {
                try? db.exec("ROLLBACK")
                throw error
            }
            ownCommits &+= 1
        } else {
            try db.exec("RELEASE ks\(level)")
        }
        return result
    }

    /// A consistent snapshot across the several SELECTs of one call.
    func read<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if depth > 0 { return try body() }
        try db.exec("BEGIN")
        depth += 1
        defer {
            depth -= 1
            try? db.exec("COMMIT")
        }
        return try body()
    }

    var inTransaction: Bool { lock.withLock { depth > 0 } }

    /// Changes whenever any process commits to the store, so callers can cache
    /// item lists and decrypted keys and refresh only when it moves. Read from
    /// the WAL-index header in shared memory: no lock, no system call, so the
    /// per-call check of the signing path neither serialises threads nor
    /// costs a read transaction (PRAGMA data_version took two fcntl locks and
    /// SQLite's global mutex per call). The PRAGMA remains the fallback while
    /// a writer is rewriting the header.
    public func changeCounter() throws -> UInt64 {
        if let walIndex {
            let stamp = ks_sqlite_wal_stamp(walIndex)
            if stamp != 0 { return stamp }
        }
        return try lock.withLock {
            let dv = try db.query("PRAGMA data_version") { UInt64(bitPattern: $0.int(0)) }.first ?? 0
            // Even: never equal to a stamp, which is odd. data_version is per
            // connection, so the connection's generation (a reopen after a
            // fork, ForkSafety.swift) keeps values of two connections apart.
            return (dv &<< 32 &+ ownCommits &+ db.generation &<< 52) &<< 1
        }
    }

    /// Moves the WAL's frames into the database file and empties the WAL, so
    /// the next commit restarts it from the first frame.
    public func checkpoint() throws {
        if let readOnly { throw readOnly.writeError(home: home) }
        try lock.withLock {
            try checkJournalFiles()
            try db.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// Refuses to commit (or checkpoint) once the -wal or -shm this
    /// connection opened was deleted or replaced on disk: such a commit
    /// would be acknowledged and then lost, and would not be seen by any
    /// other process (docs/reliability-findings.md, "The WAL deleted under a running process"). Two stat calls.
    func checkJournalFiles() throws {
        if let what = db.journalFilesReplaced() {
            throw KeychainError.storage(
                "\(what) while this process had the store open; its writes would be lost, so they are refused: "
                    + "restart the program (PKCS #11: C_Finalize, then C_Initialize)")
        }
    }

    /// Whether `changeCounter()` reads shared memory (tests check it does).
    public var changeCounterIsLockFree: Bool { walIndex != nil }

    static func now() -> Int64 { Int64(time(nil)) }
}
